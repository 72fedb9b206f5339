package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/examples/internal/setup/setuptest"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/runlock"
	"github.com/agentrl/agentrl/tool"
)

// tinyArgs is a configuration that runs every stage in seconds: a
// one-layer model, 3 SFT updates, 1 RL step, 4 evaluation problems.
func tinyArgs(dir string, extra ...string) []string {
	return append([]string{"-out", dir, "-hidden", "32", "-layers", "1", "-heads", "2", "-kv-heads", "1",
		"-head-dim", "16", "-ffn", "64", "-sft-samples", "32", "-sft-steps", "3", "-sft-batch", "8",
		"-rl-steps", "1", "-prompts", "2", "-n", "4", "-eval", "4", "-max-response", "64"}, extra...)
}

// TestRunEndToEnd runs the whole pipeline (SFT, evaluation, GRPO-TCR,
// evaluation, plot, checkpoints) at a tiny size and checks its outputs;
// it asserts nothing about learning.
func TestRunEndToEnd(t *testing.T) {
	for _, toolName := range []string{"auto", "calculator"} {
		t.Run(toolName, func(t *testing.T) {
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			require.NoError(t, run(ctx, tinyArgs(dir, "-tool", toolName), &stdout, &stderr), stderr.String())

			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			last := lines[len(lines)-1]
			var got map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(last), &got), last)
			assert.True(t, strings.HasPrefix(last, `{"sft": `), "the line starts with sft: %s", last)
			require.Contains(t, got, "seconds")
			var secs float64
			require.NoError(t, json.Unmarshal(got["seconds"], &secs))
			assert.Greater(t, secs, 0.0)
			for _, stage := range []string{"sft", "rl"} {
				require.Contains(t, got, stage)
				var m map[string]float64
				require.NoError(t, json.Unmarshal(got[stage], &m))
				for _, k := range []string{"avg@4", "pass@4", "maj@4"} {
					require.Contains(t, m, k, stage)
					assert.GreaterOrEqual(t, m[k], 0.0)
					assert.LessOrEqual(t, m[k], 1.0)
				}
				// pass@k counts a prompt solved by any sample: never below avg@k.
				assert.GreaterOrEqual(t, m["pass@4"], m["avg@4"])
			}
			assert.Contains(t, stdout.String(), "avg@4")
			// Every held-out response is in validation/<step>.jsonl, step 0
			// before RL and 1 after its one step: 4 problems × 4 samples,
			// whose mean acc is the row's avg@4.
			for step, stage := range []string{"sft", "rl"} {
				b, err := os.ReadFile(filepath.Join(dir, "validation", fmt.Sprintf("%d.jsonl", step)))
				require.NoError(t, err, stage)
				rows := strings.Split(strings.TrimSpace(string(b)), "\n")
				require.Len(t, rows, 16, stage)
				correct := 0
				for _, r := range rows {
					var g struct {
						Step int  `json:"step"`
						Acc  bool `json:"acc"`
					}
					require.NoError(t, json.Unmarshal([]byte(r), &g), r)
					assert.Equal(t, step, g.Step)
					if g.Acc {
						correct++
					}
				}
				var m map[string]float64
				require.NoError(t, json.Unmarshal(got[stage], &m))
				assert.InDelta(t, m["avg@4"], float64(correct)/16, 1e-9, stage)
			}
			for _, f := range []string{"metrics.jsonl", "sft_metrics.jsonl", "curves.png", "model/config.json",
				"model/model.safetensors", "model/byte_tokenizer.json", "checkpoints/latest", "checkpoints/step-1/trainer_state.json",
				"sft-model/config.json", "sft-model/byte_tokenizer.json", "heldout.jsonl", "train.jsonl"} {
				_, err := os.Stat(filepath.Join(dir, f))
				assert.NoError(t, err, f)
			}
			// The saved models are checkpoints with a tokenizer.json that
			// the other programs load; the problems are verl prompt sets.
			for _, m := range []string{"model", "sft-model"} {
				bpe, err := tokenizer.Load(filepath.Join(dir, m))
				require.NoError(t, err, m)
				tok, err := newTokenizer()
				require.NoError(t, err)
				assert.Equal(t, tok.VocabSize(), bpe.VocabSize(), m)
				prompts, _, err := agentrl.LoadPrompts(ctx, []string{filepath.Join(dir, "heldout.jsonl")}, bpe, nil, agentrl.PromptOptions{})
				require.NoError(t, err)
				assert.Len(t, prompts, 4, "-eval 4")
				rl, _, err := agentrl.LoadPrompts(ctx, []string{filepath.Join(dir, "train.jsonl")}, bpe, nil, agentrl.PromptOptions{})
				require.NoError(t, err)
				assert.Len(t, rl, 2, "-prompts 2 × -rl-steps 1")
			}
			if toolName == "calculator" {
				assert.Contains(t, stdout.String(), "tool: calculator")
			}
			assert.Contains(t, stderr.String(), "device: ")
		})
	}
}

// TestToolCacheSameRun: the tool cache changes nothing a run learns or
// reports: with and without it, the held-out responses and the trained
// weights are the same bytes (the job is bit-reproducible), and the
// cached run says how its calls were served.
func TestToolCacheSameRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dirs := map[string]string{}
	for _, cache := range []string{"0", "4096"} {
		dir := t.TempDir()
		dirs[cache] = dir
		var stdout, stderr bytes.Buffer
		require.NoError(t, run(ctx, tinyArgs(dir, "-tool", "auto", "-tool-cache", cache), &stdout, &stderr), stderr.String())
		if cache == "0" {
			assert.NotContains(t, stderr.String(), "answered by an identical call")
		} else {
			assert.Regexp(t, `: \d+ calls, \d+ run, \d+ answered by an identical call`, stderr.String())
		}
	}
	for _, f := range []string{"validation/0.jsonl", "validation/1.jsonl", "sft-model/model.safetensors", "model/model.safetensors"} {
		a, err := os.ReadFile(filepath.Join(dirs["0"], f))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dirs["4096"], f))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(a, b), "%s differs with the tool cache", f)
	}
}

// -init starts RL from a saved SFT policy: no SFT runs, and the SFT row
// of the table is that policy's evaluation, the same as in the run that
// saved it (evaluation is seeded).
func TestRunFromSavedSFTModel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first := t.TempDir()
	var out1 bytes.Buffer
	require.NoError(t, run(ctx, tinyArgs(first, "-tool", "calculator"), &out1, &bytes.Buffer{}))
	second := t.TempDir()
	var out2, stderr bytes.Buffer
	require.NoError(t, run(ctx, tinyArgs(second, "-tool", "calculator", "-init", filepath.Join(first, "sft-model")), &out2, &stderr), stderr.String())
	sftRow := func(s string) string {
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "SFT ") {
				return l
			}
		}
		return ""
	}
	assert.NotEmpty(t, sftRow(out1.String()))
	assert.Equal(t, sftRow(out1.String()), sftRow(out2.String()))
	assert.NotContains(t, stderr.String(), "sft:")
	_, err := os.Stat(filepath.Join(second, "sft-model"))
	assert.True(t, os.IsNotExist(err), "no SFT, no sft-model folder")

	err = run(ctx, tinyArgs(t.TempDir(), "-tool", "calculator", "-init", filepath.Join(first, "missing")), &bytes.Buffer{}, &bytes.Buffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-init")
}

// -sft-tool-first trains on the curriculum: twice the same SFT model,
// to the bit, and not the one of the usual mix.
func TestSFTToolFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sftModel := func(extra ...string) []byte {
		dir := t.TempDir()
		var stderr bytes.Buffer
		args := tinyArgs(dir, append([]string{"-tool", "calculator", "-rl-steps", "0", "-sft-steps", "4"}, extra...)...)
		require.NoError(t, run(ctx, args, &bytes.Buffer{}, &stderr), stderr.String())
		if len(extra) > 0 {
			assert.Contains(t, stderr.String(), "4 updates of 8, the first 50% on tool calls only")
		}
		b, err := os.ReadFile(filepath.Join(dir, "sft-model", "model.safetensors"))
		require.NoError(t, err)
		return b
	}
	a, b := sftModel("-sft-tool-first", "0.5"), sftModel("-sft-tool-first", "0.5")
	assert.True(t, bytes.Equal(a, b), "the same seed gives the same bits")
	assert.False(t, bytes.Equal(a, sftModel()), "the curriculum changes the batches")
}

// -lora-rank trains adapters: the checkpoint carries them as a PEFT
// folder whose base is the SFT model, and the adapter on that base
// computes what the saved (merged) model does.
func TestRunWithLoRA(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(ctx, tinyArgs(dir, "-tool", "calculator", "-lora-rank", "4", "-lora-alpha", "8", "-rl-lr", "0.05"), &stdout, &stderr), stderr.String())
	// The run says what it trains. By hand, for hidden 32, one layer, 2
	// heads and 1 KV head of 16, MLP 64, the byte tokenizer's 270 tokens:
	// rank-4 adapters A (4 × in) and B (out × 4) on q (32→32: 256), k and
	// v (32→16: 192 each), o (32→32: 256), gate and up (32→64: 384
	// each), down (64→32: 384) make 2048 weights; the model has the tied
	// embedding 270 × 32 = 8640, the layer's 1024 + 512 + 512 + 1024
	// (attention) + 16 + 16 (q/k norms) + 3 × 2048 (MLP) + 64 (norms) =
	// 9312 and the final norm's 32: 17984.
	assert.Contains(t, stderr.String(), "rl: trains LoRA adapters only (rank 4, alpha 8) on q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj: 2048 weights, while the 17984 of the model stay frozen\n")
	adapter := filepath.Join(dir, "checkpoints", "step-1", agentrl.CheckpointAdapterDir)
	cfg, err := policy.ReadAdapterConfig(adapter)
	require.NoError(t, err)
	assert.Equal(t, 4, cfg.Rank)
	assert.Equal(t, 8.0, cfg.Alpha)
	assert.Len(t, cfg.TargetModules, 7)
	assert.Equal(t, filepath.Join(dir, "sft-model"), cfg.BaseModel)

	base, err := policy.Load(cfg.BaseModel)
	require.NoError(t, err)
	defer base.Close()
	require.NoError(t, base.LoadAdapter(adapter))
	merged, err := policy.Load(filepath.Join(dir, "model"))
	require.NoError(t, err)
	defer merged.Close()
	ids := []int{1, 40, 50, 60, 70}
	a, err := base.Logits(ids)
	require.NoError(t, err)
	b, err := merged.Logits(ids)
	require.NoError(t, err)
	av, bv := a.Data().([]float32), b.Data().([]float32)
	for i := range av {
		require.InDelta(t, av[i], bv[i], 1e-4, "logit %d", i)
	}
	// The adapter moved: the SFT model alone computes something else.
	sft, err := policy.Load(cfg.BaseModel)
	require.NoError(t, err)
	defer sft.Close()
	c, err := sft.Logits(ids)
	require.NoError(t, err)
	assert.NotEqual(t, c.Data(), b.Data())
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-lora-rank", "-1"},
		{"-lora-alpha", "-2"},
		{"-n", "0"},
		{"-rl-steps", "-1"},
		{"-prompts", "0"},
		{"-eval", "0"},
		{"-sft-samples", "4", "-sft-batch", "8"},
		{"-no-tool-frac", "1.5"},
		{"-sft-tool-first", "NaN"},
		{"-max-response", "8"},
		{"-tool-cache", "-1"},
		{"extra"},
		{"-tool", "abacus"},
		{"-device", "tpu"},
		{"-precision", "fp64"},
		{"-device", "cpu", "-precision", "bf16"},
		{"-fleet-version", "adopt"},
		{"-fleet", "1", "-fleet-version", "reset"},
		{"-fleet-servers", "http://gpu0:8000", "-fleet-dir", "shared", "-fleet-version", "-3"},
		{"-fleet-servers", "http://gpu0:8000", "-fleet-dir", "shared", "-fleet-version", "adopt", "-lora-rank", "4"},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), args, &bytes.Buffer{}, &stderr)
		assert.Error(t, err, "%v", args)
	}
}

// TestDeviceFlag: -device cpu trains on the CPU and says so; -device
// cuda where this binary or machine has no GPU fails before training,
// with the reason.
func TestDeviceFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(ctx, tinyArgs(t.TempDir(), "-tool", "calculator", "-rl-steps", "0", "-device", "cpu"), &stdout, &stderr), stderr.String())
	assert.Contains(t, stderr.String(), "device: cpu: cpu(")
	assert.NotContains(t, stderr.String(), "auto chose")

	gerr := setuptest.CUDAError(t)
	if gerr == nil {
		t.Skip("a GPU opens here")
	}
	dir := t.TempDir()
	stderr.Reset()
	err := run(ctx, tinyArgs(dir, "-tool", "calculator", "-device", "cuda"), &stdout, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "device cuda:0: ")
	assert.Contains(t, err.Error(), gerr.Error())
	_, serr := os.Stat(filepath.Join(dir, "sft_metrics.jsonl"))
	assert.ErrorIs(t, serr, os.ErrNotExist, "nothing trained")
}

// The generator's expressions, evaluated by the exact calculator (an
// evaluator independent of the templates' Go functions), give the gold
// answers; numbers have 2–5 digits and answers are positive.
func TestProblemsAgreeWithCalculator(t *testing.T) {
	calc := &tool.Calculator{}
	probs := generateProblems(3, 300, "t")
	steps := map[int]int{}
	for _, p := range probs {
		v, err := calc.Evaluate(p.Expr)
		require.NoError(t, err, p.Expr)
		assert.Equal(t, p.Answer, mustInt(t, v.String()), p.Expr)
		assert.Positive(t, p.Answer)
		steps[p.Steps]++
		for _, f := range strings.FieldsFunc(p.Expr, func(r rune) bool { return r < '0' || r > '9' }) {
			assert.Contains(t, p.Text, f, "every number of the expression is in the text")
			assert.LessOrEqual(t, len(f), 5)
		}
	}
	assert.Positive(t, steps[2])
	assert.Positive(t, steps[3])
	assert.Equal(t, probs, generateProblems(3, 300, "t"), "same seed, same problems")
	assert.NotEqual(t, probs[0].Text, generateProblems(4, 1, "t")[0].Text)
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var v int64
	require.NoError(t, json.Unmarshal([]byte(s), &v), s)
	return v
}

func TestRoughGuess(t *testing.T) {
	// Two significant digits, truncated: by hand.
	for in, want := range map[int64]string{1195992: "1100000", 98: "98", 7: "7", 12345: "12000"} {
		assert.Equal(t, want, roughGuess(in), in)
	}
}

// An SFT sequence is laid out as the rollout engine lays out a
// trajectory, with the loss on the assistant's tokens only.
func TestBuildSFTLayout(t *testing.T) {
	tok, err := newTokenizer()
	require.NoError(t, err)
	spec := specFor(&tool.Calculator{})
	p := problem{Text: "A farm has 1000 hens and buys 2345 more. Each hen lays 12 eggs. How many eggs are laid?",
		Expr: "(1000+2345)*12", Answer: 40140}
	ctx := context.Background()

	withTool, err := buildSFT(ctx, []problem{p}, tok, spec, 0, 1)
	require.NoError(t, err)
	s := withTool[0]
	require.Len(t, s.Mask, len(s.IDs))
	var trained, all strings.Builder
	for i, id := range s.IDs {
		all.WriteString(tok.Decode([]int{id}))
		if s.Mask[i] == 1 {
			trained.WriteString(tok.Decode([]int{id}))
		}
	}
	call := `<tool_call>{"name": "calculator", "arguments": {"expression": "(1000+2345)*12"}}</tool_call>`
	assert.Equal(t, call+`\boxed{40140}<|im_end|>`, trained.String())
	assert.Equal(t, "<|im_start|>user\n"+p.Text+"<|im_end|>\n<|im_start|>assistant\n"+call+
		"<|im_end|>\n<|im_start|>user\n<tool_response>\n40140\n</tool_response><|im_end|>\n<|im_start|>assistant\n"+
		`\boxed{40140}<|im_end|>`, all.String())

	guess, err := buildSFT(ctx, []problem{p}, tok, spec, 1, 1)
	require.NoError(t, err)
	// Without the tool the assistant writes the expression and a rough
	// value of it (40140 to two significant digits): the copying is the
	// same, the arithmetic is "in its head".
	assert.Equal(t, "<|im_start|>user\n"+p.Text+"<|im_end|>\n<|im_start|>assistant\n"+`(1000+2345)*12 = \boxed{40000}<|im_end|>`,
		tok.Decode(guess[0].IDs))
	for i, id := range guess[0].IDs {
		if i < len(tok.Encode("<|im_start|>user\n"+p.Text+"<|im_end|>\n<|im_start|>assistant\n")) {
			assert.Zero(t, guess[0].Mask[i], "prompt token %d (%q)", i, tok.Decode([]int{id}))
		} else {
			assert.Equal(t, float32(1), guess[0].Mask[i], "response token %d (%q)", i, tok.Decode([]int{id}))
		}
	}

	// The call text parses as the engine parses it.
	calls := rollout.Hermes{}.Parse(call)
	require.Len(t, calls, 1)
	assert.Equal(t, "calculator", calls[0].Name)
	assert.JSONEq(t, `{"expression": "(1000+2345)*12"}`, string(calls[0].Arguments))
}

func TestWriteJSONLine(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeJSONLine(&b, 8, []namedEval{{Name: "sft", Eval: arith.Eval{Avg: 0.123456, Pass: 0.5, Maj: 0.25}},
		{Name: "rl", Eval: arith.Eval{Avg: 1, Pass: 1, Maj: 1}}}, 1234567*time.Millisecond))
	assert.Equal(t, `{"sft": {"avg@8": 0.1235, "pass@8": 0.5, "maj@8": 0.25}, "rl": {"avg@8": 1, "pass@8": 1, "maj@8": 1}, "seconds": 1234.6}`+"\n", b.String())
}

// TestUsage: every mistake on the command line exits with status 2
// before anything runs, its cause on the first line of stderr and a
// pointer to -h on the second, nothing more; -h prints the synopsis.
func TestUsage(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		msg  string // the first line of stderr, after "arith: "
	}{
		{"unknown flag", []string{"-steps", "3"}, "flag provided but not defined: -steps"},
		{"extra argument", []string{"x"}, `unexpected arguments ["x"]`},
		{"no samples", []string{"-n", "0"}, "-n 0: want ≥ 1"},
		{"negative steps", []string{"-rl-steps", "-1"}, "-rl-steps -1: want ≥ 0"},
		{"no prompts", []string{"-prompts", "0"}, "-prompts 0: want ≥ 1"},
		{"no eval", []string{"-eval", "0"}, "-eval 0: want ≥ 1"},
		{"eval seed is the SFT seed", []string{"-seed", "7", "-eval-seed", "7"}, "-eval-seed 7 is -seed 7, which draws the SFT problems: the held-out set would be trained on"},
		{"eval seed is the RL seed", []string{"-seed", "1000"}, "-eval-seed 1001 is -seed 1000 + 1, which draws the RL prompts: the held-out set would be trained on"},
		{"sft batch", []string{"-sft-batch", "0"}, "-sft-batch 0: want ≥ 1"},
		{"sft samples", []string{"-sft-samples", "4"}, "-sft-samples 4: want at least -sft-batch 16"},
		{"sft lr", []string{"-sft-lr", "0"}, "-sft-lr 0: want finite and > 0"},
		{"sft schedule", []string{"-sft-schedule", "linear"}, `-sft-schedule "linear": want cosine or wsd`},
		{"sft warm-up", []string{"-sft-warmup", "0"}, "-sft-warmup 0: want within (0, 1)"},
		{"sft decay", []string{"-sft-schedule", "wsd", "-sft-decay", "0.99"}, "-sft-decay 0.99: want within (0, 1 − -sft-warmup]"},
		{"rl lr", []string{"-rl-lr", "NaN"}, "-rl-lr NaN: want finite and > 0"},
		{"temperature", []string{"-temperature", "-1"}, "-temperature -1: want finite and ≥ 0"},
		{"no-tool fraction", []string{"-no-tool-frac", "2"}, "-no-tool-frac 2: want within [0, 1]"},
		{"tool-first fraction", []string{"-sft-tool-first", "1"}, "-sft-tool-first 1: want within [0, 1)"},
		{"negative tool-first", []string{"-sft-tool-first", "-0.1"}, "-sft-tool-first -0.1: want within [0, 1)"},
		{"tool-first without tool calls", []string{"-sft-pairs=false", "-sft-tool-first", "0.3", "-no-tool-frac", "1"}, "-sft-tool-first needs trajectories that call the tool: -no-tool-frac 1 makes none"},
		{"pairs of another share", []string{"-no-tool-frac", "0.3"}, "-no-tool-frac 0.3 needs -sft-pairs=false: -sft-pairs (the default) trains half of every batch without the tool"},
		{"pairs in odd batches", []string{"-sft-batch", "15"}, "-sft-pairs trains half of each batch with the tool: -sft-batch 15 must be even"},
		{"short budget", []string{"-max-response", "8"}, "-max-response 8: want ≥ 16"},
		{"lora rank", []string{"-lora-rank", "-1"}, "-lora-rank -1: want ≥ 0 (0: full weights)"},
		{"lora alpha", []string{"-lora-alpha", "-1"}, "-lora-alpha -1: want finite and ≥ 0 (0: the rank)"},
		{"fleet", []string{"-fleet", "-1"}, "-fleet -1: want ≥ 0"},
		{"staleness", []string{"-fleet-staleness", "-1"}, "-fleet-staleness -1: want ≥ 0"},
		{"two fleets", []string{"-fleet", "2", "-fleet-servers", "http://a:1"}, "-fleet starts servers and -fleet-servers names running ones: give one of them"},
		{"no fleet dir", []string{"-fleet-servers", "http://a:1"}, "-fleet-servers needs -fleet-dir, a folder the servers read the published weights from"},
		{"fleet url", []string{"-fleet-servers", "a:1", "-fleet-dir", dir}, `-fleet-servers: "a:1" is not an http(s) URL (want scheme://host:port)`},
		{"fleet url twice", []string{"-fleet-servers", "http://a:1,http://a:1", "-fleet-dir", dir}, "-fleet-servers: http://a:1 named twice"},
		{"fleet kind", []string{"-fleet", "1", "-fleet-kind", "tgi"}, `-fleet-kind "tgi": want sglang, vllm or vllm-model-config`},
		{"init missing", []string{"-init", dir + "/none"}, "-init: stat " + dir + "/none: no such file or directory"},
		{"init not a model", []string{"-init", dir}, "-init: no config.json in " + dir},
		{"tool", []string{"-tool", "python"}, `-tool "python": want auto, code_interpreter or calculator`},
		{"remote", []string{"-remote", "gpu0:8000"}, `-remote: "gpu0:8000" is not an http(s) URL (want scheme://host:port)`},
		{"tokenizer", []string{"-remote", "http://gpu0:8000", "-tokenizer", dir + "/tokenizer.json"}, "-tokenizer: open " + dir + "/tokenizer.json: no such file or directory"},
		{"device", []string{"-device", "tpu"}, `invalid value "tpu" for flag -device: device: invalid choice: device "tpu": want auto, cpu, cuda or cuda:N`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 2, program(context.Background(), c.args, &stdout, &stderr))
			assert.Empty(t, stdout.String())
			assert.Equal(t, "arith: "+c.msg+"\n"+setup.HelpPointer("arith")+"\n", stderr.String())
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries, "nothing written")
		})
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 0, program(context.Background(), []string{"-h"}, &stdout, &stderr))
	assert.True(t, strings.HasPrefix(stderr.String(), "usage: "+synopsis+"\n"), stderr.String())
	assert.Contains(t, stderr.String(), "-fleet-servers string")
}

// TestRunFolderTaken: a run folder that a run holds, or whose metrics
// logs hold an earlier run's rows, is refused before any work, naming
// the holder or the log.
func TestRunFolderTaken(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	held, err := runlock.Acquire(dir)
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	err = run(ctx, tinyArgs(dir, "-tool", "calculator"), &stdout, &stderr)
	require.ErrorIs(t, err, runlock.ErrLocked)
	assert.EqualError(t, err, "-out: runlock: run folder "+dir+" is in use by "+held.Owner().String()+": wait for that run to end, stop it, or choose another folder")
	require.NoError(t, held.Release())

	for _, log := range []string{"metrics.jsonl", "sft_metrics.jsonl"} {
		dir := t.TempDir()
		path := filepath.Join(dir, log)
		require.NoError(t, os.WriteFile(path, []byte(`{"step":1,"loss":2}`+"\n"+`{"step":2,"loss":1}`+"\n"), 0o644))
		stderr.Reset()
		err = run(ctx, tinyArgs(dir, "-tool", "calculator"), &stdout, &stderr)
		require.Error(t, err)
		assert.EqualError(t, err, "-out "+dir+" holds an earlier run: "+path+" has 2 rows (steps 1…2); choose another -out")
		assert.NotContains(t, stderr.String(), "device: ", "nothing done")
		assert.NoFileExists(t, filepath.Join(dir, runlock.FileName))
	}
}
