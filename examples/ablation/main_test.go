package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/examples/internal/setup/setuptest"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/runlock"
)

// sftModel saves a fresh one-layer model over the task's byte tokenizer
// as examples/arith saves its sft-model, to start runs from.
func sftModel(t *testing.T) string {
	t.Helper()
	tok, err := arith.NewTokenizer()
	require.NoError(t, err)
	eos, ok := tok.TokenID(arith.ImEnd)
	require.True(t, ok)
	raw, err := json.Marshal(map[string]any{
		"model_type": "qwen3", "vocab_size": tok.VocabSize(), "hidden_size": 32, "intermediate_size": 64,
		"num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
		"max_position_embeddings": 512, "rope_theta": 10000, "tie_word_embeddings": true, "eos_token_id": eos,
		"torch_dtype": "float32",
	})
	require.NoError(t, err)
	cfg, err := policy.ParseConfig(raw)
	require.NoError(t, err)
	m, err := policy.New(cfg, 1)
	require.NoError(t, err)
	defer m.Close()
	dir := filepath.Join(t.TempDir(), "sft-model")
	require.NoError(t, m.Save(dir, lm.SaveOptions{}))
	require.NoError(t, arith.WriteTokenizerInfo(dir, tok))
	return dir
}

// tinyArgs run a grid in seconds: 2 RL steps of 2 prompts × 4 samples
// in mini-batches of 4 (two updates a step, so that clipping can act),
// 4 held-out problems.
func tinyArgs(init, out string, extra ...string) []string {
	return append([]string{"-init", init, "-out", out, "-rl-steps", "2", "-prompts", "2", "-n", "4", "-mini-batch", "4",
		"-eval", "4", "-max-response", "64", "-tight-response", "32", "-tool", "calculator", "-smooth", "1"}, extra...)
}

func runArgs(ctx context.Context, args []string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	o, err := parseFlags(args, &errOut)
	if err == nil {
		err = runOptions(ctx, o, &out, &errOut)
	}
	return out.String(), errOut.String(), err
}

// summary is the part of summary.json the tests read.
type summary struct {
	Seeds    []uint64 `json:"seeds"`
	Device   string   `json:"device"`
	Variants []struct {
		Name, Setting string
	} `json:"variants"`
	Tables map[string][]struct {
		Variant string
		N       int
		Mean    float64
	} `json:"tables"`
	Runs []struct {
		Variant string
		Seed    uint64
		Final   map[string]float64
	} `json:"runs"`
}

func readSummary(t *testing.T, dir string) summary {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	require.NoError(t, err)
	var s summary
	require.NoError(t, json.Unmarshal(b, &s))
	return s
}

// TestGridEndToEnd runs 2 variants (the baseline and the user's SPO
// loss) × 2 seeds from a saved model, checks the tables, plots, summary
// and run folders, and runs the grid again: the same seeds give the same
// results. It asserts nothing about learning.
func TestGridEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	init := sftModel(t)
	first := t.TempDir()
	stdout, stderr, err := runArgs(ctx, tinyArgs(init, first, "-variants", "grpo-tcr,user-spo", "-seeds", "1,2"))
	require.NoError(t, err, stderr)

	for _, m := range []string{"avg@4", "pass@4", "tool_calls", "no_tool", "train_acc", "pg_clipfrac", "entropy", "truncated"} {
		assert.Contains(t, stdout, "variant   "+m+": mean ± 95% CI", m)
	}
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "grpo-tcr ") || strings.HasPrefix(l, "user-spo ") {
			assert.True(t, strings.HasSuffix(l, "(2)"), "two seeds per row: %q", l)
		}
	}
	assert.Contains(t, stdout, "budget 64 tokens, ≤ 3 tool calls: avg@4")
	assert.Contains(t, stderr, "done user-spo seed 2 (4/4)")
	assert.Equal(t, 1, strings.Count(stderr, "device: "), "one device for the grid")

	for _, f := range []string{"curves.png", "tool-calls.png"} {
		fh, err := os.Open(filepath.Join(first, f))
		require.NoError(t, err, f)
		_, err = png.Decode(fh)
		fh.Close()
		assert.NoError(t, err, f)
	}
	for _, run := range []string{"grpo-tcr/seed-1", "grpo-tcr/seed-2", "user-spo/seed-1", "user-spo/seed-2"} {
		rows, err := metrics.ReadFile(filepath.Join(first, run, "metrics.jsonl"))
		require.NoError(t, err, run)
		require.Len(t, rows, 3, "steps 0 (the SFT evaluation), 1 and 2 (with the final evaluation)")
		assert.Contains(t, rows[0].Values, "val-core/arith/acc/mean@4")
		assert.Contains(t, rows[2].Values, "val-core/arith/acc/mean@4")
		assert.Contains(t, rows[1].Values, "critic/acc/mean")
		_, err = os.Stat(filepath.Join(first, run, "result.json"))
		assert.NoError(t, err)
	}

	s := readSummary(t, first)
	assert.Contains(t, stderr, "device: "+s.Device, "summary.json names the device the run printed")
	assert.Equal(t, []uint64{1, 2}, s.Seeds)
	require.Len(t, s.Variants, 2)
	assert.Equal(t, "user-spo", s.Variants[1].Name)
	require.Len(t, s.Tables["avg@4"], 2)
	assert.Equal(t, 2, s.Tables["avg@4"][0].N)
	require.Len(t, s.Runs, 4)
	for i, want := range []struct {
		v    string
		seed uint64
	}{{"grpo-tcr", 1}, {"grpo-tcr", 2}, {"user-spo", 1}, {"user-spo", 2}} {
		assert.Equal(t, want.v, s.Runs[i].Variant)
		assert.Equal(t, want.seed, s.Runs[i].Seed)
		for _, k := range []string{"avg@4", "pass@4", "maj@4", "tool_calls", "no_tool", "pg_clipfrac", "entropy", "truncated", "train_acc"} {
			assert.Contains(t, s.Runs[i].Final, k)
		}
	}

	// Again, into another folder: the same runs.
	second := t.TempDir()
	_, stderr, err = runArgs(ctx, tinyArgs(init, second, "-variants", "grpo-tcr,user-spo", "-seeds", "1,2", "-parallel", "2"))
	require.NoError(t, err, stderr)
	again := readSummary(t, second)
	require.Len(t, again.Runs, 4)
	for i, r := range s.Runs {
		a := again.Runs[i]
		// With the batch-invariant CPU kernels every value is the same
		// bit for bit, whether the runs go one or two at a time.
		for _, k := range []string{"avg@4", "pass@4", "maj@4", "tool_calls", "no_tool", "train_acc", "truncated", "pg_clipfrac", "entropy"} {
			assert.Equal(t, r.Final[k], a.Final[k], "%s seed %d: %s", r.Variant, r.Seed, k)
		}
	}
}

// Every variant of the catalogue trains (one step of one seed), and
// each writes its setting.
func TestEveryVariantRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := t.TempDir()
	stdout, stderr, err := runArgs(ctx, tinyArgs(sftModel(t), out, "-variants", "all", "-seeds", "7", "-rl-steps", "1"))
	require.NoError(t, err, stderr)
	s := readSummary(t, out)
	all, err := catalogue()
	require.NoError(t, err)
	require.Len(t, s.Runs, len(all))
	settings := map[string]string{}
	for _, v := range s.Variants {
		settings[v.Name] = v.Setting
	}
	assert.Equal(t, "budget 64 tokens, ≤ 3 tool calls", settings["grpo-tcr"])
	assert.Equal(t, "budget 32 tokens, ≤ 3 tool calls", settings["overlong-tight"])
	assert.Equal(t, "budget 32 tokens, ≤ 3 tool calls", settings["no-overlong-tight"])
	assert.Equal(t, "budget 64 tokens, ≤ 1 tool calls", settings["calls-1"])
	// One SFT evaluation per setting: three settings.
	assert.Equal(t, 3, strings.Count(stderr, "evaluating the SFT policy"))
	// One seed: the tables say that an interval needs two, and claim none.
	assert.Contains(t, stdout, "(one seed: no interval; -seeds with two or more gives one)")
	assert.Contains(t, stdout, "(one seed: an interval needs two)")
	assert.NotRegexp(t, `[0-9] ± [0-9]`, stdout)
	assert.NotContains(t, stderr, "notice: one update per step", "-mini-batch 4 of 8")

	_, stderr, err = runArgs(ctx, tinyArgs(sftModel(t), t.TempDir(), "-variants", "grpo-tcr,no-clip", "-seeds", "1", "-rl-steps", "1", "-mini-batch", "0"))
	require.NoError(t, err, stderr)
	assert.Contains(t, stderr, "notice: one update per step (-mini-batch 0, the step's 8 trajectories): the PPO ratio stays 1, so no-clip trains as grpo-tcr does")
	assert.Contains(t, stdout, "budget 32 tokens, ≤ 3 tool calls: avg@4")
}

// The catalogue's edits of the task's GRPO-TCR, each checked against
// the field it names; every one validates with its registry.
func TestCatalogueEdits(t *testing.T) {
	base := arith.RLConfig(arith.RLOptions{Prompts: 8, N: 8, Temperature: 1, MaxResponse: 128, LR: 2e-4, Seed: 1})
	all, err := catalogue()
	require.NoError(t, err)
	got := map[string]agentrl.TrainerConfig{}
	tasks := map[string]task{}
	for _, e := range all {
		c, err := e.variant.Apply(base)
		require.NoError(t, err, e.variant.Name)
		got[e.variant.Name] = c
		tasks[e.variant.Name] = e.task
		assert.NotEmpty(t, e.variant.Description, e.variant.Name)
	}
	for _, name := range strings.Split(defaultVariants, ",") {
		assert.Contains(t, got, name, "a default variant is in the catalogue")
	}
	edited := func(f func(*agentrl.TrainerConfig)) agentrl.TrainerConfig {
		c := base
		o := *base.Overlong
		c.Overlong = &o
		f(&c)
		return c
	}
	assert.Equal(t, base, got["grpo-tcr"])
	assert.Equal(t, edited(func(c *agentrl.TrainerConfig) { c.Loss.ClipHigh = 0.2 }), got["clip-sym"])
	assert.Equal(t, edited(func(c *agentrl.TrainerConfig) { c.Loss.ClipLow, c.Loss.ClipHigh, c.Loss.ClipC = 1, 1e9, 1e9 }), got["no-clip"])
	assert.Equal(t, edited(func(c *agentrl.TrainerConfig) { c.Loss.Agg = loss.AggSeqMeanTokenMean }), got["seq-mean"])
	assert.Equal(t, edited(func(c *agentrl.TrainerConfig) { c.Overlong = nil }), got["no-overlong"])
	assert.Equal(t, base, got["overlong-tight"], "the budget is the engine's: the configuration is the baseline's")
	assert.Equal(t, edited(func(c *agentrl.TrainerConfig) { c.Overlong = nil }), got["no-overlong-tight"])
	assert.Equal(t, edited(func(c *agentrl.TrainerConfig) { c.Loss.EntropyCoef = 0.001 }), got["entropy"])
	assert.Equal(t, base, got["calls-1"])
	assert.Equal(t, base, got["tool-bonus"])
	assert.Equal(t, edited(func(c *agentrl.TrainerConfig) {
		c.Loss.Mode, c.Loss.ClipLow, c.Loss.ClipHigh = userSPO, 0.2, 0.2
	}), got["user-spo"])

	assert.Equal(t, task{tight: true}, tasks["overlong-tight"])
	assert.Equal(t, task{tight: true}, tasks["no-overlong-tight"])
	assert.Equal(t, task{maxToolCalls: 1}, tasks["calls-1"])
	assert.Equal(t, task{toolBonus: true}, tasks["tool-bonus"])
}

// no-clip clips nothing, where GRPO-TCR clips: of three tokens, one at
// ratio e^19 with A > 0 (above 1+ε_high = 1.28, and below e^20, the
// loss's largest ratio) and one at e^−19 with A < 0 (below 1−ε_low =
// 0.8) are clipped by GRPO-TCR (pg_clipfrac 2/3) and not by no-clip; the
// third, A < 0 at ratio e^19 > c = 10, hits GRPO-TCR's dual clip
// (pg_clipfrac_lower 1/3), not no-clip's c = 1e9 > e^20.
func TestNoClipClipsNothing(t *testing.T) {
	all, err := catalogue()
	require.NoError(t, err)
	cfgs := map[string]loss.Config{}
	base := arith.RLConfig(arith.RLOptions{Prompts: 8, N: 8, Temperature: 1, MaxResponse: 128, LR: 2e-4, Seed: 1})
	for _, e := range all {
		c, err := e.variant.Apply(base)
		require.NoError(t, err)
		cfgs[e.variant.Name] = c.Loss
	}
	dense := func(v ...float32) *tensor.Dense {
		return tensor.New(tensor.WithShape(1, len(v)), tensor.WithBacking(v))
	}
	b := loss.Batch{
		LogProbs:    dense(-1, -20, -1),
		OldLogProbs: dense(-20, -1, -20),
		Advantages:  dense(1, -1, -1),
		Mask:        dense(1, 1, 1),
	}
	for _, tc := range []struct {
		name            string
		clipfrac, lower float64
	}{
		{"grpo-tcr", 2.0 / 3, 1.0 / 3}, // tokens 0 (high) and 1 (low) of 3 clipped; token 2 dual-clipped
		{"no-clip", 0, 0},
	} {
		res, err := loss.Compute(cfgs[tc.name], b)
		require.NoError(t, err, tc.name)
		assert.InDelta(t, tc.clipfrac, res.Metrics["pg_clipfrac"], 1e-6, tc.name)
		assert.InDelta(t, tc.lower, res.Metrics["pg_clipfrac_lower"], 1e-6, tc.name)
		assert.False(t, math.IsNaN(res.Loss))
	}
}

// TestFlagErrors: every mistake on the command line exits with status 2
// before anything runs, its cause on the first line of stderr and a
// pointer to -h on the second, nothing more; -h prints the synopsis.
func TestFlagErrors(t *testing.T) {
	init := sftModel(t)
	empty := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string // the first line of stderr, after "ablation: "
	}{
		{[]string{"-seeds", "1"}, "-init is required: the SFT model folder every run starts from (go run ./examples/arith writes one as <run>/sft-model)"},
		{[]string{"-init", empty}, "-init: no config.json in " + empty},
		{[]string{"-init", init, "-seeds", "1,x"}, `-seeds "1,x": "x" is not a seed (want non-negative integers, comma-separated)`},
		{[]string{"-init", init, "-seeds", "1,2,1"}, `-seeds "1,2,1": seed 1 named twice`},
		{[]string{"-init", init, "-seeds", ""}, `-seeds "": "" is not a seed (want non-negative integers, comma-separated)`},
		{[]string{"-init", init, "-seeds", "1,1000"}, "-seeds: seed 1000 draws its RL prompts from seed + 1 = -eval-seed 1001: the held-out set would be trained on"},
		{[]string{"-init", init, "-variants", "grpo-tcr,,clip-sym"}, `-variants "grpo-tcr,,clip-sym": empty name`},
		{[]string{"-init", init, "-variants", "nope"}, `-variants: unknown variant "nope" (known: ` + "grpo-tcr, clip-sym, no-clip, seq-mean, no-overlong, overlong-tight, no-overlong-tight, entropy, calls-1, tool-bonus, user-spo" + `, or all)`},
		{[]string{"-init", init, "-n", "0"}, "-n 0: want ≥ 1"},
		{[]string{"-init", init, "-rl-steps", "0"}, "-rl-steps 0: want ≥ 1"},
		{[]string{"-init", init, "-prompts", "0"}, "-prompts 0: want ≥ 1"},
		{[]string{"-init", init, "-mini-batch", "-1"}, "-mini-batch -1: want ≥ 0"},
		{[]string{"-init", init, "-eval", "0"}, "-eval 0: want ≥ 1"},
		{[]string{"-init", init, "-max-response", "8"}, "-max-response 8: want ≥ 16"},
		{[]string{"-init", init, "-tight-response", "8"}, "-tight-response 8: want ≥ 16"},
		{[]string{"-init", init, "-parallel", "0"}, "-parallel 0: want ≥ 1"},
		{[]string{"-init", init, "-smooth", "0"}, "-smooth 0: want ≥ 1"},
		{[]string{"-init", init, "-rl-lr", "0"}, "-rl-lr 0: want finite and > 0"},
		{[]string{"-init", init, "-temperature", "-1"}, "-temperature -1: want finite and ≥ 0"},
		{[]string{"-init", init, "-tool", "python"}, `-tool "python": want auto, code_interpreter or calculator`},
		{[]string{"-init", init, "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"-init", init, "-device", "cuda:"}, `invalid value "cuda:" for flag -device: device: invalid choice: device "cuda:": N in cuda:N must be a device number 0, 1, … (at most 9 digits)`},
		{[]string{"-init", init, "-precision", "int8"}, `invalid value "int8" for flag -precision: device: invalid choice: precision "int8": want auto, fp32, tf32 or bf16`},
		{[]string{"-init", init, "-device", "cpu", "-precision", "tf32"}, "device: invalid choice: -precision tf32 with -device cpu: the CPU backend computes in fp32 only (use auto or fp32, or a CUDA device)"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, program(context.Background(), tc.args, &stdout, &stderr), "%v", tc.args)
		assert.Empty(t, stdout.String())
		assert.Equal(t, "ablation: "+tc.want+"\n"+setup.HelpPointer("ablation")+"\n", stderr.String(), "%v", tc.args)
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 0, program(context.Background(), []string{"-h"}, &stdout, &stderr))
	assert.True(t, strings.HasPrefix(stderr.String(), "usage: "+synopsis+"\n"), stderr.String())
	o, err := parseFlags([]string{"-init", init}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2, 3}, o.seeds)
	assert.Equal(t, strings.Split(defaultVariants, ","), o.variants)
	assert.Equal(t, 1, o.parallel)
}

// Errors found before anything trains: an unknown or repeated variant, a
// -mini-batch that does not divide the batch, a missing -init folder, an
// unknown tool.
func TestRunErrors(t *testing.T) {
	ctx := context.Background()
	init := sftModel(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-variants", "grpo-tcr,clip-wide"}, `unknown variant "clip-wide" (known: grpo-tcr, clip-sym,`},
		{[]string{"-variants", "grpo-tcr,grpo-tcr"}, `"grpo-tcr" named twice`},
		{[]string{"-mini-batch", "3"}, "MiniBatchSize: 3 does not divide the batch of 8"},
		{[]string{"-tool", "abacus"}, `-tool "abacus"`},
	} {
		out := t.TempDir()
		_, _, err := runArgs(ctx, tinyArgs(init, out, tc.args...))
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want)
		ents, _ := os.ReadDir(out)
		assert.Empty(t, ents, "nothing written")
	}
	_, _, err := runArgs(ctx, tinyArgs(filepath.Join(t.TempDir(), "missing"), t.TempDir()))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-init")

	if gerr := setuptest.CUDAError(t); gerr != nil {
		out := t.TempDir()
		_, _, err := runArgs(ctx, tinyArgs(init, out, "-device", "cuda"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "device cuda:0: ")
		assert.Contains(t, err.Error(), gerr.Error())
		ents, _ := os.ReadDir(out)
		assert.Empty(t, ents, "nothing written")
	}
}

func TestList(t *testing.T) {
	stdout, _, err := runArgs(context.Background(), []string{"-list"})
	require.NoError(t, err)
	all, err := catalogue()
	require.NoError(t, err)
	for _, e := range all {
		assert.Contains(t, stdout, e.variant.Name)
	}
	assert.Contains(t, stdout, "* grpo-tcr")
	assert.Contains(t, stdout, "  user-spo")
}

// TestRunFolderTaken: a grid's folder that another grid holds, or that
// holds an earlier grid's run logs, is refused before any work, naming
// the holder or the log.
func TestRunFolderTaken(t *testing.T) {
	ctx := context.Background()
	init := sftModel(t)
	out := t.TempDir()
	held, err := runlock.Acquire(out)
	require.NoError(t, err)
	_, stderr, err := runArgs(ctx, tinyArgs(init, out, "-variants", "grpo-tcr", "-seeds", "1"))
	require.ErrorIs(t, err, runlock.ErrLocked)
	assert.ErrorContains(t, err, "run folder "+out+" is in use by "+held.Owner().String())
	assert.NotContains(t, stderr, "device: ")
	require.NoError(t, held.Release())

	log := filepath.Join(out, "grpo-tcr", "seed-1", "metrics.jsonl")
	require.NoError(t, os.MkdirAll(filepath.Dir(log), 0o755))
	require.NoError(t, os.WriteFile(log, []byte(`{"step":0,"val-core/arith/acc/mean@4":0.25}`+"\n"), 0o644))
	_, stderr, err = runArgs(ctx, tinyArgs(init, out, "-variants", "grpo-tcr,user-spo", "-seeds", "1"))
	assert.EqualError(t, err, "-out "+out+" holds an earlier run: "+log+" has 1 row (step 0); choose another -out")
	assert.NotContains(t, stderr, "device: ")
}

// TestRunsAreBitReproducible: two runs of one variant and seed, the
// second at another GOMAXPROCS (the CPU backend's workers follow it),
// log the same metrics at every step, the held-out evaluations
// included, and the same final results, bit for bit; only the values
// that measure time differ. So an ablation's interval is the seeds'
// spread and nothing else.
func TestRunsAreBitReproducible(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	init := sftModel(t)
	var dirs [2]string
	for i, procs := range []int{1, 2} {
		dirs[i] = t.TempDir()
		func() {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			_, stderr, err := runArgs(ctx, tinyArgs(init, dirs[i], "-variants", "grpo-tcr", "-seeds", "3"))
			require.NoError(t, err, stderr)
		}()
	}
	timeless := func(dir string) []metrics.Row {
		rows, err := metrics.ReadFile(filepath.Join(dir, "grpo-tcr", "seed-3", "metrics.jsonl"))
		require.NoError(t, err)
		for _, r := range rows {
			for k := range r.Values {
				if strings.HasPrefix(k, "timing_s/") || strings.HasPrefix(k, "perf/") {
					delete(r.Values, k)
				}
			}
		}
		return rows
	}
	want, got := timeless(dirs[0]), timeless(dirs[1])
	require.Len(t, want, 3, "steps 0, 1 and 2")
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].Step, got[i].Step)
		for k, v := range want[i].Values {
			g, ok := got[i].Values[k]
			require.True(t, ok, "step %d: %s missing", want[i].Step, k)
			// Bits, so that NaN equals NaN and -0 differs from 0.
			require.Equal(t, math.Float64bits(v), math.Float64bits(g), "step %d: %s: %v and %v", want[i].Step, k, v, g)
		}
		require.Len(t, got[i].Values, len(want[i].Values), "step %d", want[i].Step)
	}
	a, b := readSummary(t, dirs[0]), readSummary(t, dirs[1])
	require.Len(t, a.Runs, 1)
	require.Len(t, b.Runs, 1)
	require.Equal(t, a.Runs[0].Final, b.Runs[0].Final)
}
