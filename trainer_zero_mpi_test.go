//go:build agentrl_mpi && cgo

package agentrl_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/rollout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZeROMPI: under mpirun, ZeRO-1 and ZeRO-2 over MPI end three steps
// with plain data parallelism's weights within float32 reduction-order
// error (the bound of TestZeROMatchesDataParallel), every rank with the
// same model; and each rank holds 1/N of a data-parallel rank's
// optimizer state (and at ZeRO-2 of its gradients), up to the last
// unit's padding, as the buffers the optimizers allocated say
// (policy.Memory); at ZeRO-2 no rank ever holds the whole gradient (the
// model's six layers hold most of it, one at a time).
func TestZeROMPI(t *testing.T) {
	comm := needMPI(t)
	ctx := context.Background()
	const steps = 3
	n := comm.Size()
	cfg := dpConfig(0, 2)
	cfg.PromptsPerStep = 4 * n
	dp, dpParams := newDPTrainer(t, "deep", cfg, agentrl.DataParallel{Comm: comm, BucketBytes: 256}, nil)
	var plain agentrl.StepMetrics
	for range steps {
		var err error
		plain, err = dp.Step(ctx)
		require.NoError(t, err)
	}
	ref := flat(dpParams())
	for _, stage := range []int{agentrl.ShardOptimizer, agentrl.ShardGradients} {
		t.Run(fmt.Sprintf("ZeRO-%d", stage), func(t *testing.T) {
			tr, params := newDPTrainer(t, "deep", cfg, agentrl.DataParallel{Comm: comm, BucketBytes: 256, ZeRO: stage}, nil)
			var last agentrl.StepMetrics
			for range steps {
				var err error
				last, err = tr.Step(ctx)
				require.NoError(t, err)
			}
			mine := flat(params())
			diff := maxAbsDiff(ref, mine)
			sameOnEveryRank(t, comm, mine, "weights")
			assert.Less(t, diff, 1e-6)
			lay := tr.Optimizer().(*policy.ShardedAdamW).Layout()
			padding := int64(lay.Units*lay.Unit - lay.Elements)
			mem := last.Memory
			assert.Equal(t, plain.Memory.Weights, mem.Weights, "the whole weights on every rank")
			assert.Equal(t, plain.Memory.Optimizer+8*padding, int64(n)*mem.Optimizer, "1/N of the optimizer state")
			if stage == agentrl.ShardGradients {
				assert.Equal(t, plain.Memory.Gradients+4*padding, int64(n)*mem.Gradients, "1/N of the gradients")
				assert.Less(t, mem.GradientsPeak, plain.Memory.Gradients, "never the whole gradient")
			}
			t.Logf("rank %d of %d, ZeRO-%d: max |θ(ZeRO) − θ(data parallel)| = %.3g over %d weights after %d steps; per rank: optimizer %d B (data parallel %d B), gradients %d B held, %d B at most (data parallel %d B); %d B reduce-scattered, %d B all-gathered in step %d",
				comm.Rank(), n, stage, diff, len(mine), steps, mem.Optimizer, plain.Memory.Optimizer, mem.Gradients, mem.GradientsPeak, plain.Memory.Gradients,
				last.ZeRO.ReduceScatterBytes, last.ZeRO.AllGatherBytes, steps)
		})
	}
}

// TestZeROMPICheckpoint: a ZeRO-2 checkpoint written by the ranks in
// parallel (each its shard) resumes at N ranks to the uninterrupted
// job's next step, bit for bit, and at one rank to the same weights and
// moments, whose next step on the whole batch is the job's within
// reduction-order error.
func TestZeROMPICheckpoint(t *testing.T) {
	comm := needMPI(t)
	ctx := context.Background()
	cfg := dpConfig(0, 2)
	cfg.PromptsPerStep = 4 * comm.Size()
	root := checkpoint.Root{Dir: filepath.Join(sharedTempDir(t, comm), "zero")}
	d := agentrl.DataParallel{Comm: comm, BucketBytes: 256, ZeRO: agentrl.ShardGradients, AllowWorldSizeChange: true}

	tr, params := newDPTrainer(t, "transformer", cfg, d, nil)
	for range 2 {
		_, err := tr.Step(ctx)
		require.NoError(t, err)
	}
	dir, err := tr.SaveCheckpoint(ctx, root, 0)
	require.NoError(t, err)
	saved := params()
	_, err = tr.Step(ctx)
	require.NoError(t, err)
	next := params()
	for r := range comm.Size() {
		assert.FileExists(t, filepath.Join(dir, policy.ShardFileName(r, comm.Size())))
	}

	again, againParams := newDPTrainer(t, "transformer", cfg, d, nil)
	ok, err := again.Resume(root)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = again.Step(ctx)
	require.NoError(t, err)
	assert.Equal(t, flat(next), flat(againParams()), "resumed at %d ranks: the job's next step", comm.Size())

	one, oneParams := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{AllowWorldSizeChange: true}, nil)
	require.NoError(t, one.LoadFrom(dir))
	assert.Equal(t, flat(saved), flat(oneParams()), "resumed at one rank: the checkpoint's weights")
	_, err = one.Step(ctx)
	require.NoError(t, err)
	diff := maxAbsDiff(flat(next), flat(oneParams()))
	t.Logf("rank %d: one process's step from the %d ranks' checkpoint is within %.3g of the job's", comm.Rank(), comm.Size(), diff)
	assert.Less(t, diff, 1e-6)
	require.NoError(t, comm.Barrier(ctx)) // rank 0's folder outlives the others' reads
}

// sharedTempDir is rank 0's t.TempDir, named to every rank (the ranks
// of these tests share a file system).
func sharedTempDir(t *testing.T, comm dist.Comm) string {
	t.Helper()
	buf := make(dist.Bytes, 4096)
	if comm.Rank() == 0 {
		copy(buf, t.TempDir())
	}
	require.NoError(t, comm.Broadcast(context.Background(), buf, 0))
	return string(buf[:indexByte(buf, 0)])
}

// TestZeROMPIResumeFromOneRank: a checkpoint written by one process
// (its optimizer state whole) resumes at N ranks under ZeRO-1 and
// ZeRO-2, each rank reading its shard of the moments: the checkpoint's
// weights bit for bit, and after a step one process's next step within
// reduction-order error (1e-6, as TestDataParallelMatchesOneProcess),
// the same model on every rank.
func TestZeROMPIResumeFromOneRank(t *testing.T) {
	comm := needMPI(t)
	ctx := context.Background()
	cfg := dpConfig(0, 2)
	cfg.PromptsPerStep = 4 * comm.Size()
	root := checkpoint.Root{Dir: filepath.Join(sharedTempDir(t, comm), "one")}

	// Every rank runs the one process (the same run: the same seed and
	// batch); rank 0 writes its checkpoint.
	one, oneParams := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{}, nil)
	for range 2 {
		_, err := one.Step(ctx)
		require.NoError(t, err)
	}
	if comm.Rank() == 0 {
		_, err := one.SaveCheckpoint(ctx, root, 0)
		require.NoError(t, err)
	}
	require.NoError(t, comm.Barrier(ctx))
	dir := filepath.Join(root.Dir, checkpoint.DirName(2))
	saved := flat(oneParams())
	_, err := one.Step(ctx)
	require.NoError(t, err)
	next := flat(oneParams())

	for _, stage := range []int{agentrl.ShardOptimizer, agentrl.ShardGradients} {
		t.Run(fmt.Sprintf("ZeRO-%d", stage), func(t *testing.T) {
			tr, params := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{Comm: comm, BucketBytes: 256, ZeRO: stage, AllowWorldSizeChange: true}, nil)
			require.NoError(t, tr.LoadFrom(dir))
			assert.Equal(t, saved, flat(params()), "the checkpoint's weights")
			_, err := tr.Step(ctx)
			require.NoError(t, err)
			mine := flat(params())
			sameOnEveryRank(t, comm, mine, "weights")
			diff := maxAbsDiff(next, mine)
			t.Logf("rank %d, ZeRO-%d at %d ranks from one process's checkpoint: max |θ − θ(one process)| after a step = %.3g", comm.Rank(), stage, comm.Size(), diff)
			assert.Less(t, diff, 1e-6)
		})
	}
	require.NoError(t, comm.Barrier(ctx)) // rank 0's folder outlives the others' reads
}

// zeroScenarioVar names the failure scenario a rank of this test binary
// plays under mpirun (TestMain).
const zeroScenarioVar = "AGENTRL_ZERO_TEST_SCENARIO"

// dieAtReduceScatter is a communicator whose process kills itself
// (SIGKILL) when it enters its at-th reduce-scatter.
type dieAtReduceScatter struct {
	dist.Comm
	at, seen atomic.Int64
}

func (d *dieAtReduceScatter) ReduceScatter(ctx context.Context, send, recv dist.Buf, op dist.Op) error {
	if d.seen.Add(1) == d.at.Load() {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	return d.Comm.ReduceScatter(ctx, send, recv, op)
}

// playZeROScenario is a rank's part in the scenario: a ZeRO-2 job whose
// rank 1 is killed in its third reduce-scatter, during the first step's
// backward. Rank 0 reports what its step says. It returns the exit
// status.
func playZeROScenario(env dist.Env) int {
	ctx := context.Background()
	c, err := dist.Open(ctx, dist.Options{Env: &env, Timeout: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	comm := c
	if env.Rank == 1 {
		d := &dieAtReduceScatter{Comm: c}
		d.at.Store(3)
		comm = d
	}
	m, err := policy.New(policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 4, HiddenSize: 16, IntermediateSize: 32,
		NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
		MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
	}, 3, policy.WithDecoder(alphaTokenizer{banditAlphabet}.Decode))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg := dpConfig(0, 2)
	cfg.PromptsPerStep = 4 * env.Size
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(8),
		DataParallel: agentrl.DataParallel{Comm: comm, BucketBytes: 256, ZeRO: agentrl.ShardGradients}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	start := time.Now()
	_, err = tr.Step(ctx)
	fmt.Fprintf(os.Stderr, "rank %d after %.1fs: %v\n", env.Rank, time.Since(start).Seconds(), err)
	_ = c.Close()
	if err != nil {
		return 3
	}
	return 0
}

// TestZeROMPIScenarioDie: rank 1 of a ZeRO-2 job is killed in the middle
// of the backward's reduce-scatters; the job fails well before the
// one-minute timeout, naming rank 1 — in rank 0's error (its
// reduce-scatter fails: rank 1's connection to the watchdog closed) or
// in mpirun's report, whichever comes first.
func TestZeROMPIScenarioDie(t *testing.T) {
	if mpiComm != nil {
		t.Skip("already a rank: the scenario tests start mpirun themselves")
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("no mpirun on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, "--oversubscribe", "-np", "2", os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), zeroScenarioVar+"=die", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	t.Logf("mpirun after %.1fs: %v\n%s", elapsed.Seconds(), err, out)
	require.Error(t, err, "the job fails")
	require.NoError(t, ctx.Err(), "and does not hang")
	o := string(out)
	assert.True(t, strings.Contains(o, "rank 1 is gone") || strings.Contains(o, "process rank 1"), "names rank 1")
	if strings.Contains(o, "rank 0 after") {
		assert.Contains(t, o, "reduce-scatter", "rank 0 failed in a reduce-scatter")
	}
	assert.Less(t, elapsed, 30*time.Second)
}
