//go:build unix

package agentrl_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// Environment of the resume test's child processes (TestResumeHelperProcess).
const (
	// resumeEnvDir names the child's run folder: checkpoints under ckpt/,
	// the steps' metrics appended to metrics.txt.
	resumeEnvDir = "AGENTRL_TEST_RESUME_DIR"
	// resumeEnvHangAfter, when set to k, makes the child hang in the
	// first reward call after its checkpoint of step k is complete and
	// say resumeReady on stdout, for the parent to kill it.
	resumeEnvHangAfter = "AGENTRL_TEST_RESUME_HANG_AFTER"
	// resumeEnvSeed seeds the choice of the step killed; unset, the
	// test draws one and logs it.
	resumeEnvSeed = "AGENTRL_TEST_RESUME_SEED"
	// resumeReady is the child's line when it hangs, ready to be killed.
	resumeReady = "resume-test: hanging in step after checkpoint"
	// resumeSteps is the length of the run.
	resumeSteps = 6
)

// TestResumeHelperProcess is not a test: it is the body of the child
// processes of TestExactResumeAfterSIGKILL (the os/exec helper-process
// pattern) and returns at once unless resumeEnvDir is set. It runs
// resumeRun in that folder.
func TestResumeHelperProcess(t *testing.T) {
	dir := os.Getenv(resumeEnvDir)
	if dir == "" {
		return
	}
	hangAfter := -1
	if s := os.Getenv(resumeEnvHangAfter); s != "" {
		k, err := strconv.Atoi(s)
		require.NoError(t, err)
		hangAfter = k
	}
	resumeRun(t, dir, hangAfter)
}

// resumeRun trains orderRun's tiny transformer (GRPO-TCR with TIS, and
// dynamic sampling by whether a response holds an odd number of 'c's, so that some
// steps take several generation batches and move the prompt sampler by
// more than one batch) for
// resumeSteps steps of Trainer.Run, with a checkpoint after every step
// under dir/ckpt and Resume on, appending every step's metrics (but
// those of time) to dir/metrics.txt as "step key bits" lines and the
// step it resumed at, if it did, to dir/resumed.txt. With hangAfter ≥
// 0, the first reward call after the checkpoint of step hangAfter prints
// resumeReady and hangs, with step hangAfter+1's rollouts in flight.
func resumeRun(t *testing.T, dir string, hangAfter int) {
	pc := policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: len(orderAlphabet), HiddenSize: 16, IntermediateSize: 32,
		NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
		MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
		EOSTokenIDs: []int{strings.IndexByte(orderAlphabet, 'h')},
	}
	tok := alphaTokenizer{orderAlphabet}
	m, err := policy.New(pc, 5, policy.WithDecoder(tok.Decode))
	require.NoError(t, err)
	defer m.Close()
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: tok, MaxResponseTokens: 8, MaxConcurrent: 16})
	require.NoError(t, err)
	prompts := make([]agentrl.Prompt, 5)
	for i := range prompts {
		prompts[i] = agentrl.Prompt{ID: string(rune('p' + i)), Tokens: tok.Encode(orderAlphabet[:1+i%4])}
	}
	var armed atomic.Bool // the checkpoint of step hangAfter is complete
	score := func(ctx context.Context, in reward.Input) (reward.Output, error) {
		if armed.Load() {
			fmt.Println(resumeReady)
			time.Sleep(time.Hour) // until the parent kills the process
		}
		out, err := countC(ctx, in)
		out.Acc = strings.Count(in.Response, "c")%2 == 1 // varies in a group often enough, not always
		return out, err
	}
	cfg := agentrl.GRPOTCR()
	cfg.PromptsPerStep, cfg.SamplesPerPrompt = 2, 4
	cfg.MiniBatchSize, cfg.MicroBatchSize = 4, 2
	cfg.Sampling = lm.SampleParams{Temperature: 1, MaxNewTokens: 6}
	cfg.Optimizer = policy.AdamWConfig{LR: 0.05, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	cfg.Overlong = nil
	cfg.Loss.TISCap = 2
	cfg.DynamicSampling = &agentrl.DynamicSamplingConfig{Metric: agentrl.FilterByAcc, MaxGenBatches: 16}
	cfg.Seed = 11
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: score, Prompts: prompts, GroundTruthOptional: true}) // score reads no ground truth
	require.NoError(t, err)
	defer tr.Close()

	metrics, err := os.OpenFile(filepath.Join(dir, "metrics.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer metrics.Close()
	err = tr.Run(context.Background(), agentrl.RunConfig{
		Steps: resumeSteps, Checkpoints: checkpoint.Root{Dir: filepath.Join(dir, "ckpt")}, SaveEvery: 1, Resume: true,
		OnStep: func(_ context.Context, step int, row map[string]float64) error {
			var b strings.Builder
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range row {
					if !yield(k) {
						return
					}
				}
			}) {
				if strings.HasPrefix(k, "timing_s/") || strings.HasPrefix(k, "perf/") || k == "memory/activations_bytes" {
					// They measure time, or the process's largest
					// activation buffers so far, which a resumed process
					// allocates afresh.
					continue
				}
				fmt.Fprintf(&b, "%d %s %016x\n", step, k, math.Float64bits(row[k]))
			}
			_, err := metrics.WriteString(b.String()) // one write: a kill leaves whole rows
			return err
		},
		OnCheckpoint: func(step int, _ string) error {
			if step == hangAfter {
				armed.Store(true)
			}
			return nil
		},
		OnResume: func(step int) error {
			return os.WriteFile(filepath.Join(dir, "resumed.txt"), []byte(strconv.Itoa(step)), 0o644)
		},
	})
	require.NoError(t, err)
}

// resumeChild starts this test binary as TestResumeHelperProcess in dir,
// hanging after step hangAfter's checkpoint when ≥ 0.
func resumeChild(t *testing.T, dir string, hangAfter int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestResumeHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), resumeEnvDir+"="+dir)
	if hangAfter >= 0 {
		cmd.Env = append(cmd.Env, resumeEnvHangAfter+"="+strconv.Itoa(hangAfter))
	}
	cmd.Stderr = os.Stderr
	return cmd
}

// runResumeChild runs a child in dir to the end of its run.
func runResumeChild(t *testing.T, dir string) {
	t.Helper()
	out, err := resumeChild(t, dir, -1).Output()
	require.NoError(t, err, "child in %s:\n%s", dir, out)
}

// resumeRows reads dir/metrics.txt: each step's lines.
func resumeRows(t *testing.T, dir string) map[int][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "metrics.txt"))
	require.NoError(t, err)
	rows := map[int][]string{}
	for line := range strings.Lines(string(b)) {
		step, _, ok := strings.Cut(line, " ")
		require.True(t, ok, "line %q", line)
		n, err := strconv.Atoi(step)
		require.NoError(t, err)
		rows[n] = append(rows[n], line)
	}
	return rows
}

// finalHashes returns the sha256 of the parameters and of the
// optimizer's state of dir's last checkpoint, which must be of the last
// step.
func finalHashes(t *testing.T, dir string) (params, opt [32]byte) {
	t.Helper()
	step, ck, err := checkpoint.Root{Dir: filepath.Join(dir, "ckpt")}.Latest()
	require.NoError(t, err)
	require.Equal(t, resumeSteps, step)
	p, err := os.ReadFile(filepath.Join(ck, agentrl.CheckpointParamsFile))
	require.NoError(t, err)
	o, err := os.ReadFile(filepath.Join(ck, policy.StateFileName))
	require.NoError(t, err)
	return sha256.Sum256(p), sha256.Sum256(o)
}

// TestExactResumeAfterSIGKILL: a run killed with SIGKILL in the middle
// of a step k+1 (k drawn at random from the run's steps, its seed
// logged; set AGENTRL_TEST_RESUME_SEED to repeat one) and resumed from
// its last checkpoint, the one of step k, in a new process ends with the
// parameters and optimizer state of an uninterrupted run bit for bit,
// and logs the same metrics for every step, those before the kill
// included. Each run is a child process of this test binary.
func TestExactResumeAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a transformer in three processes")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(resumeEnvSeed); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	k := 1 + rand.New(rand.NewPCG(seed, 0)).IntN(resumeSteps-1) // 1 … resumeSteps-1
	t.Logf("%s=%d: killing the run in step %d, after the checkpoint of step %d", resumeEnvSeed, seed, k+1, k)

	full := t.TempDir()
	runResumeChild(t, full)

	killed := t.TempDir()
	cmd := resumeChild(t, killed, k)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	ready := false
	for sc.Scan() {
		if sc.Text() == resumeReady {
			ready = true
			break
		}
	}
	require.True(t, ready, "the child ended without reaching step %d", k+1)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child ended with %v", err)

	runResumeChild(t, killed)
	resumed, err := os.ReadFile(filepath.Join(killed, "resumed.txt"))
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(k), string(resumed), "resumed at")

	want, got := resumeRows(t, full), resumeRows(t, killed)
	for step := 1; step <= resumeSteps; step++ {
		require.NotEmpty(t, want[step], "step %d", step)
		require.Equal(t, want[step], got[step], "metrics of step %d (killed after %d)", step, k)
	}
	wantP, wantO := finalHashes(t, full)
	gotP, gotO := finalHashes(t, killed)
	require.Equal(t, wantP, gotP, "parameters")
	require.Equal(t, wantO, gotO, "optimizer state")
}
