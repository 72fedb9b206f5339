package main

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/examples/internal/setup/setuptest"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/policy/tokenizer"
)

// qwen3Testdata holds the real Qwen3 tokenizer files, shared with package
// policy/tokenizer rather than copied (tokenizer.json is 11 MB).
const qwen3Testdata = "../../policy/tokenizer/qwen3"

func tinyCheckpoint(t *testing.T) string { return setuptest.TinyCheckpoint(t, qwen3Testdata) }

// runMain runs the program in-process and returns its exit code, stdout
// and stderr.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestTrainLocal runs the program end to end on a tiny random Qwen3 with
// the real tokenizer: two steps with validation before the first and
// after the second, checkpoints, metrics, plot and export; then a resumed third step; then
// a refusal to overwrite the run without -resume.
func TestTrainLocal(t *testing.T) {
	setuptest.NeedPython(t)
	model := tinyCheckpoint(t)
	out := filepath.Join(t.TempDir(), "run")
	args := []string{
		"-model", model, "-train", "testdata/train.jsonl", "-val", "testdata/val.jsonl",
		"-batch", "2", "-n", "2", "-max-response", "12", "-overlong-buffer", "4",
		"-val-every", "2", "-save-every", "1", "-keep", "2", "-sandbox-workers", "1", "-out", out,
	}
	code, stdout, stderr := runMain(t, append(args, "-steps", "2")...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "train: 4 prompts\n")
	// -max-prompt 0: what the context of 4096 leaves beside the 12-token budget.
	assert.Contains(t, stdout, "val: 2 prompts (0 over 4084 tokens left out)")
	assert.Contains(t, stdout, "step 2: checkpoint")

	rows, err := metrics.ReadFile(filepath.Join(out, metricsFile))
	require.NoError(t, err)
	require.Len(t, rows, 3, "validation at step 0, then steps 1 and 2")
	assert.Equal(t, []int{0, 1, 2}, []int{rows[0].Step, rows[1].Step, rows[2].Step})
	assert.Contains(t, rows[0].Values, "val-core/aime_toy/acc/mean@2")
	assert.NotContains(t, rows[0].Values, "critic/score/mean", "step 0 holds validation only")
	assert.NotContains(t, rows[1].Values, "val-core/skywork_code/acc/mean@2", "-val-every 2")
	assert.Contains(t, rows[2].Values, "val-core/skywork_code/acc/mean@2")
	for _, r := range rows[1:] {
		// 2 prompts × 2 samples, each cut at the 12-token budget: a random
		// model never closes its turn.
		assert.Equal(t, 4.0, r.Values["train/trajectories"])
		assert.Equal(t, 1.0, r.Values["actor/updates"])
		assert.LessOrEqual(t, r.Values["response_length/max"], 12.0)
		// Nothing is right: math scores −1, code without a block −1; the
		// overlong penalty (buffer 4 before 12) can only lower that.
		assert.Equal(t, 0.0, r.Values["critic/acc/mean"])
		assert.LessOrEqual(t, r.Values["critic/score/mean"], -1.0)
	}
	for _, f := range []string{plotFile, "checkpoints/latest", "checkpoints/step-2/trainer_state.json", "final/config.json", "final/model.safetensors", "final/tokenizer.json"} {
		assert.FileExists(t, filepath.Join(out, f))
	}
	steps, err := checkpoint.Root{Dir: filepath.Join(out, checkpointsDir)}.Steps()
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2}, steps)

	// The run went on to log step 3 and stopped before its checkpoint:
	// the resumed run cuts that row and logs step 3 once, its own.
	f, err := os.OpenFile(filepath.Join(out, metricsFile), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"step":3,"interrupted":1}` + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	code, stdout, stderr = runMain(t, append(args, "-steps", "3", "-resume")...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "resumed from step 2")
	assert.Contains(t, stdout, "metrics: "+filepath.Join(out, metricsFile)+": cut 1 row logged after step 2, the checkpoint's; the resumed run logs those steps again")
	rows, err = metrics.ReadFile(filepath.Join(out, metricsFile))
	require.NoError(t, err)
	require.Len(t, rows, 4)
	assert.Equal(t, []int{0, 1, 2, 3}, []int{rows[0].Step, rows[1].Step, rows[2].Step, rows[3].Step})
	assert.NotContains(t, rows[3].Values, "interrupted")
	assert.Equal(t, 4.0, rows[3].Values["train/trajectories"])

	code, _, stderr = runMain(t, append(args, "-steps", "4")...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "already holds checkpoints (step 3): pass -resume")
}

// TestTrainRemoteSamplerWithTools runs a step with rollouts from an
// OpenAI-compatible server whose scripted agent calls the code
// interpreter: the Hermes parser, the local sandbox, the tool-result
// rendering and the routed rewards (math through \boxed{}, code through
// the tests) must all work for the answers to score 1.
func TestTrainRemoteSamplerWithTools(t *testing.T) {
	setuptest.NeedPython(t)
	model := tinyCheckpoint(t)
	tok, err := tokenizer.Load(model)
	require.NoError(t, err)
	fake := &setuptest.FakeVLLM{Tok: tok}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runMain(t,
		"-model", model, "-train", "testdata/train.jsonl", "-val", "testdata/val.jsonl",
		"-sampler", srv.URL, "-steps", "1", "-batch", "4", "-n", "2", "-max-response", "256",
		"-overlong-buffer", "16", "-thinking=false", "-sandbox-workers", "2", "-out", out)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr, "does not sync its updates")

	rows, err := metrics.ReadFile(filepath.Join(out, metricsFile))
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, key := range []string{"val-core/aime_toy/acc/mean@2", "val-core/skywork_code/acc/mean@2"} {
		assert.Equal(t, 1.0, rows[0].Values[key], key)
		assert.Equal(t, 1.0, rows[1].Values[key], key)
	}
	st := rows[1].Values
	// 4 prompts × 2 samples: 3 math prompts call the tool once, the code
	// prompt answers directly, and every answer is right (score +1).
	assert.Equal(t, 8.0, st["train/trajectories"])
	assert.Equal(t, 1.0, st["critic/acc/mean"])
	assert.Equal(t, 1.0, st["critic/score/mean"])
	assert.Equal(t, 0.75, st["tool_call_counts/mean"])
	assert.Equal(t, 0.0, st["tool_errors/total"])
	assert.Equal(t, 0.0, st["critic/score/std"])
	// All scores equal: GRPO advantages are 0, so the loss is 0.
	assert.Equal(t, 0.0, st["actor/pg_loss"])
	// Requests: training 3 math prompts × 2 samples × 2 turns + 2 code
	// answers = 14; each of the two validations (before training and at
	// the last step) 1 math prompt × 2 × 2 + 2 code answers = 6.
	calls, afterTool := fake.Counts()
	assert.Equal(t, 14+2*6, calls)
	assert.Equal(t, 6+2*2, afterTool)
}

// TestUsage checks that bad flags and paths exit with status 2 before
// anything is loaded, their cause on the first line of stderr and a
// pointer to -h on the second, nothing more.
func TestUsage(t *testing.T) {
	model := tinyCheckpoint(t)
	base := []string{"-model", model, "-train", "testdata/train.jsonl"}
	with := func(extra ...string) []string { return append(slices.Clone(base), extra...) }
	cases := []struct {
		name string
		args []string
		msg  string // the first line of stderr, after "grpotcr: "
	}{
		{"no flags", nil, "-model is required"},
		{"no train", []string{"-model", model}, "-train is required"},
		{"unknown flag", with("-epochs", "3"), "flag provided but not defined: -epochs"},
		{"missing model", []string{"-model", "no/such/dir", "-train", "testdata/train.jsonl"}, "-model: stat no/such/dir: no such file or directory"},
		{"model without config", []string{"-model", "testdata", "-train", "testdata/train.jsonl"}, "-model: no config.json in testdata"},
		{"missing train", []string{"-model", model, "-train", "testdata/none.jsonl"}, "-train: open testdata/none.jsonl: no such file or directory"},
		{"missing val", with("-val", "testdata/none.parquet"), "-val: open testdata/none.parquet: no such file or directory"},
		{"one sample", with("-n", "1"), "-n 1: group-relative advantages need at least 2 samples per prompt"},
		{"infinite lr", with("-lr", "+Inf"), "-lr +Inf: want a finite, non-negative number"},
		{"top-p over 1", with("-val-top-p", "1.01"), "-val-top-p 1.01: want a number in [0, 1]"},
		{"negative keep", with("-keep", "-1"), "-keep -1: want 0 (all) or more"},
		{"mini-batch", with("-batch", "2", "-n", "2", "-mini-batch", "3"), "-mini-batch 3 does not divide the batch of 4 trajectories (-batch × -n)"},
		{"micro-batch", with("-batch", "2", "-n", "4", "-micro-batch", "3"), "-micro-batch 3 does not divide the mini-batch of 8 trajectories"},
		{"overlong buffer", with("-max-response", "100", "-overlong-buffer", "100"), "-overlong-buffer 100: want 0 ≤ buffer < -max-response 100"},
		{"bad sampler", with("-sampler", "gpu0:8000"), `-sampler: "gpu0:8000" is neither "local" nor an http(s) URL`},
		{"bad sandbox", with("-sandbox", "remote"), `-sandbox: "remote" is neither "local" nor an http(s) URL`},
		{"extra args", with("train.parquet"), `unexpected arguments ["train.parquet"]`},
		{"bad device", with("-device", "cuda:x"), `invalid value "cuda:x" for flag -device: device: invalid choice: device "cuda:x": N in cuda:N must be a device number 0, 1, … (at most 9 digits)`},
		{"bad precision", with("-precision", "FP32"), `invalid value "FP32" for flag -precision: device: invalid choice: precision "FP32": want auto, fp32, tf32 or bf16`},
		{"tf32 on the cpu", with("-device", "cpu", "-precision", "tf32"), "device: invalid choice: -precision tf32 with -device cpu: the CPU backend computes in fp32 only (use auto or fp32, or a CUDA device)"},
		{"lora rank", with("-lora-rank", "-1"), "-lora-rank -1: want 0 (full weights) or more"},
		{"lora alpha", with("-lora-alpha", "NaN"), "-lora-alpha NaN: want a finite, non-negative number"},
		{"staleness", with("-fleet-staleness", "-1"), "-fleet-staleness -1: want 0 (synchronous) or more"},
		{"fleet flags alone", with("-fleet-dir", "shared", "-fleet-staleness", "2"), "-fleet-dir, -fleet-staleness: only with -fleet-servers, the servers to train against"},
		{"fleet without a folder", with("-fleet-servers", "http://gpu0:8000"), "-fleet-servers needs -fleet-dir, the folder the weights are published to, which every server reads under the same path"},
		{"fleet and sampler", with("-fleet-servers", "http://gpu0:8000", "-fleet-dir", "shared", "-sampler", "http://gpu1:8000"), "-fleet-servers and -sampler URL both sample on servers: -fleet-servers trains on-policy (the servers get the weights after every step), -sampler off-policy (they keep theirs); give one"},
		{"fleet url", with("-fleet-servers", "gpu0:8000", "-fleet-dir", "shared"), `-fleet-servers: "gpu0:8000" is not an http(s) URL (want scheme://host:port)`},
		{"fleet url twice", with("-fleet-servers", "http://gpu0:8000,http://gpu0:8000", "-fleet-dir", "shared"), "-fleet-servers: http://gpu0:8000 named twice"},
		{"fleet kind", with("-fleet-servers", "http://gpu0:8000", "-fleet-dir", "shared", "-fleet-kind", "tgi"), `-fleet-kind "tgi": want sglang, vllm or vllm-model-config`},
		{"judge flags alone", with("-judge-model", "m", "-judge-mode", "pointwise"), "-judge-mode, -judge-model: only with -judge-url, the judge's endpoint"},
		{"judge without a model", with("-judge-url", "http://judge:8000/v1"), "-judge-url needs -judge-model, the judge's served model name"},
		{"judge url", with("-judge-url", "judge:8000", "-judge-model", "m"), `-judge-url: "judge:8000" is not an http(s) URL (want scheme://host:port)`},
		{"two judges", with("-judge-url", "http://a:1/v1,http://b:1/v1", "-judge-model", "m"), `-judge-url: want one endpoint, got "http://a:1/v1,http://b:1/v1"`},
		{"judge mode", with("-judge-url", "http://judge:8000/v1", "-judge-model", "m", "-judge-mode", "listwise"), `-judge-mode "listwise": want ranking or pointwise`},
		{"judge rubric", with("-judge-url", "http://judge:8000/v1", "-judge-model", "m", "-judge-rubric", "testdata/none.txt"), "-judge-rubric: open testdata/none.txt: no such file or directory"},
		{"empty mcp", with("-mcp", " "), `invalid value " " for flag -mcp: empty server`},
		{"mcp quote left open", with("-mcp", `npx -y "server`), `invalid value "npx -y \"server" for flag -mcp: splitting the command line: 1:8: reached EOF without closing quote ` + "`\"`"},
		{"mcp only a comment", with("-mcp", "# nothing"), `invalid value "# nothing" for flag -mcp: no command`},
		{"mcp sessions alone", with("-mcp-per-trajectory"), "-mcp-per-trajectory: only with -mcp, the servers"},
		{"search flags alone", with("-search-topk", "5", "-search-format", "search-r1"), "-search-format, -search-topk: only with -search, the retrieval server"},
		{"search url", with("-search", "retriever:8000"), `-search: "retriever:8000" is not an http(s) URL (want scheme://host:port)`},
		{"two search servers", with("-search", "http://a:8000,http://b:8000"), `-search: want one retrieval server, got "http://a:8000,http://b:8000"`},
		{"search topk", with("-search", "http://a:8000", "-search-topk", "0"), "-search-topk 0: want 1 or more"},
		{"search format", with("-search", "http://a:8000", "-search-format", "json"), `-search-format "json": want verl or search-r1`},
		{"fleet version alone", with("-fleet-version", "adopt"), "-fleet-version: only with -fleet-servers, the servers to train against"},
		{"fleet version", with("-fleet-servers", "http://gpu0:8000", "-fleet-dir", "shared", "-fleet-version", "latest"), `invalid value "latest" for flag -fleet-version: want start, adopt, reset or a version number ≥ 0`},
		{"fleet partial alone", with("-fleet-partial"), "-fleet-partial: only with -fleet-servers, the servers to train against"},
		{"fleet partial with lora", with("-fleet-servers", "http://gpu0:8000", "-fleet-dir", "shared", "-fleet-partial", "-lora-rank", "4"), "-fleet-partial with -lora-rank: partial rollouts across adapter updates are not supported (the adapter is switched between turns)"},
		{"unknown rollout correction", with("-rollout-corr", "seq_mis"), `-rollout-corr "seq_mis": want one of ` + strings.Join(loss.RolloutCorrectionPresets(), ", ")},
		{"fleet version with lora", with("-fleet-servers", "http://gpu0:8000", "-fleet-dir", "shared", "-fleet-version", "3", "-lora-rank", "4"), "-fleet-version 3 with -lora-rank: the servers keep the base weights they were started with, whose version is not checked, and load each step's adapter by name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, c.args...)
			assert.Equal(t, 2, code, stderr)
			assert.Empty(t, stdout)
			assert.Equal(t, "grpotcr: "+c.msg+"\n"+setup.HelpPointer("grpotcr")+"\n", stderr)
		})
	}
	code, _, stderr := runMain(t, "-help")
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(stderr, "usage: "+synopsis+"\n"), stderr)
}

// TestRuntimeErrors checks failures after the flags are accepted: exit
// status 1 and a message that names the cause.
func TestRuntimeErrors(t *testing.T) {
	setuptest.NeedPython(t)
	model := tinyCheckpoint(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{\"prompt\": [{\"role\": \"user\", \"content\": \"hi\"}]}\nnot json\n"), 0o644))

	// A budget that fits the tiny model's context of 4096 tokens.
	small := []string{"-max-response", "64", "-overlong-buffer", "16"}
	code, _, stderr := runMain(t, append([]string{"-model", model, "-train", bad, "-sandbox-workers", "1", "-out", filepath.Join(dir, "a")}, small...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "bad.jsonl:2")

	// A tokenizer.json this package cannot run: the flag, the file, the
	// component, once each.
	badTok := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer_config.json"} {
		require.NoError(t, os.Symlink(filepath.Join(model, f), filepath.Join(badTok, f)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(badTok, "tokenizer.json"), []byte(`{"model": {}}`), 0o644))
	code, _, stderr = runMain(t, append([]string{"-model", badTok, "-train", "testdata/train.jsonl", "-sandbox-workers", "1", "-out", filepath.Join(dir, "t")}, small...)...)
	assert.Equal(t, 1, code)
	assert.Equal(t, "grpotcr: model: "+filepath.Join(badTok, "tokenizer.json")+": tokenizer: unsupported pre_tokenizer: no final ByteLevel step; only byte-level BPE is supported\n", stderr)

	// A -prompt-key the rows lack: the field, and what the rows hold.
	code, _, stderr = runMain(t, append([]string{"-model", model, "-train", "testdata/train.jsonl", "-prompt-key", "question", "-sandbox-workers", "1", "-out", filepath.Join(dir, "k")}, small...)...)
	assert.Equal(t, 1, code)
	assert.True(t, strings.HasSuffix(stderr, "grpotcr: -train: testdata/train.jsonl:1: dataset: malformed row: field question: missing (the row has ability, data_source, extra_info, prompt, reward_model)\n"), stderr)

	code, _, stderr = runMain(t, append([]string{"-model", model, "-train", "testdata/train.jsonl", "-batch", "5", "-sandbox-workers", "1", "-out", filepath.Join(dir, "b")}, small...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "4 prompts, fewer than -batch 5")

	// The default budget of 20480 tokens does not fit the tiny model's
	// context: refused before any prompt is read or rolled out (before,
	// the responses were cut by the context and the penalty never fired).
	code, stdout0, stderr := runMain(t, "-model", model, "-train", "testdata/train.jsonl", "-sandbox-workers", "1", "-out", filepath.Join(dir, "m"))
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout0)
	assert.Contains(t, stderr, "grpotcr: -max-response 20480: the model's context is 4096 tokens (max_position_embeddings), prompt and response together: want less")

	// SIGINT cancels the context run gets; here it is cancelled up front.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, errb bytes.Buffer
	code = run(ctx, append([]string{"-model", model, "-train", "testdata/train.jsonl", "-sandbox-workers", "1", "-out", filepath.Join(dir, "c")}, small...), &stdout, &errb)
	assert.Equal(t, 1, code)
	assert.Contains(t, errb.String(), "interrupted")
	assert.Contains(t, errb.String(), "context canceled")

	// -device cuda where this binary or machine has no GPU: status 1 and
	// the reason, before anything trains.
	if gerr := setuptest.CUDAError(t); gerr != nil {
		code, _, stderr = runMain(t, append([]string{"-model", model, "-train", "testdata/train.jsonl", "-device", "cuda:1", "-out", filepath.Join(dir, "d")}, small...)...)
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "grpotcr: model: device cuda:1: ")
		assert.Contains(t, stderr, gerr.Error())
	}
}

// TestRolloutCorrectionFlag: -rollout-corr puts verl's preset of that
// name into the loss, field for field as loss.RolloutCorrectionPreset
// gives it, and a bypass preset takes the sampler's log-probabilities as
// the old policy's (the trainer refuses bypass with recomputed ones);
// without the flag nothing is corrected and the old log-probabilities
// are recomputed, as agentrl.GRPOTCR has it.
func TestRolloutCorrectionFlag(t *testing.T) {
	model := tinyCheckpoint(t)
	cases := []struct {
		preset string
		old    agentrl.OldLogProbsSource
		want   loss.RolloutCorrection
	}{
		{"", agentrl.OldLogProbsRecompute, loss.RolloutCorrection{}},
		{"decoupled_seq_is_rs", agentrl.OldLogProbsRecompute, loss.RolloutCorrection{
			RolloutIS: loss.ISSequence, RolloutISThreshold: loss.DefaultISThreshold,
			RolloutRS: loss.RSSeqSumK1, RolloutRSThreshold: "0.5_2.0"}},
		{"decoupled_token_is", agentrl.OldLogProbsRecompute, loss.RolloutCorrection{
			RolloutIS: loss.ISToken, RolloutISThreshold: loss.DefaultISThreshold}},
		{"bypass_ppo_clip", agentrl.OldLogProbsRollout, loss.RolloutCorrection{
			BypassMode: true, LossType: loss.BypassPPOClip}},
	}
	for _, c := range cases {
		t.Run(c.preset, func(t *testing.T) {
			args := []string{"-model", model, "-train", "testdata/train.jsonl"}
			if c.preset != "" {
				args = append(args, "-rollout-corr", c.preset)
			}
			var stderr bytes.Buffer
			o, err := parseFlags(args, &stderr)
			require.NoError(t, err, stderr.String())
			cfg := trainerConfig(o, false)
			assert.Equal(t, c.want, cfg.Loss.RolloutCorrection)
			assert.Equal(t, c.old, cfg.OldLogProbs)
			require.NoError(t, cfg.Validate())
		})
	}
}

// TestMCPCommand: a stdio server's command line is split as a POSIX
// shell splits words (the expected words written by hand from sh's
// rules), and an http(s) value is an endpoint, not a command.
func TestMCPCommand(t *testing.T) {
	t.Setenv("AGENTRL_TEST_DATA", "/srv/data")
	for _, c := range []struct {
		line string
		want []string
	}{
		{"npx -y @modelcontextprotocol/server-everything", []string{"npx", "-y", "@modelcontextprotocol/server-everything"}},
		{"  npx\t-y   server  ", []string{"npx", "-y", "server"}},
		{`npx -y @modelcontextprotocol/server-filesystem '/data/my files' "/tmp/a b"`, []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/data/my files", "/tmp/a b"}},
		{`server /a\ b`, []string{"server", "/a b"}},
		{`server $AGENTRL_TEST_DATA '$AGENTRL_TEST_DATA'`, []string{"server", "/srv/data", "$AGENTRL_TEST_DATA"}},
	} {
		got, err := mcpCommand(c.line)
		require.NoError(t, err, c.line)
		assert.Equal(t, c.want, got, c.line)
		cfg, err := mcpConfig(c.line, false, time.Second, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, c.want, cfg.Command)
		assert.Empty(t, cfg.URL)
	}
	cfg, err := mcpConfig("https://tools.example/mcp", true, time.Second, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "https://tools.example/mcp", cfg.URL)
	assert.Empty(t, cfg.Command)
	assert.True(t, cfg.PerTrajectory)
	for _, bad := range []string{`a "b`, `a 'b`, "a $(rm -rf x)", "", "   "} {
		_, err := mcpCommand(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// FuzzMCPCommand: any line splits into words or fails with an error,
// never a panic.
func FuzzMCPCommand(f *testing.F) {
	for _, s := range []string{"npx -y server", `a "b c" 'd'`, `a\ b`, "$(x)", "`x`", "a && b", "${X:-y}", "~/x", "{a,b}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words, err := mcpCommand(line)
		if err == nil {
			require.NotEmpty(t, words)
		}
	})
}
