package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// TestMain lets the test binary play the two Python scripts in the
// end-to-end test: TRAINBENCH_HELPER=torch prints a RESULT line of fixed
// phases, =check writes reference.json from the checkpoint in --dir with
// the CPU backend (float32, the reference a correct run matches).
func TestMain(m *testing.M) {
	switch os.Getenv("TRAINBENCH_HELPER") {
	case "torch":
		fmt.Println("some log line")
		fmt.Println(`RESULT {"fwd_ms":[1,1,1],"bwd_ms":[2,2,2],"opt_ms":[3,3,3],"peak_allocated":3221225472,"peak_reserved":4294967296,"torch":"T","transformers":"X","device":"D"}`)
		os.Exit(0)
	case "check":
		if err := helperCheck(os.Args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helperCheck(args []string) error {
	dir := args[len(args)-1]
	m, err := policy.Load(filepath.Join(dir, "model"))
	if err != nil {
		return err
	}
	defer m.Close()
	var toks struct{ Seqs [][]int }
	data, err := os.ReadFile(filepath.Join(dir, "tokens.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &toks); err != nil {
		return err
	}
	var ref [][]float64
	for _, s := range toks.Seqs { // one at a time, as the script does
		st, _, err := m.Forward(context.Background(), lm.TokenBatch{Tokens: [][]int{s}}, false)
		if err != nil {
			return err
		}
		row := make([]float64, len(s))
		for i, v := range st.LogProbs[0] {
			row[i] = float64(v)
		}
		ref = append(ref, row)
	}
	return writeJSON(filepath.Join(dir, "reference.json"), map[string]any{"logprobs": ref})
}

// TestEndToEndOnCPU runs the program's whole path on the CPU backend with
// the tiny shape and the test binary as both scripts: the table's
// PyTorch column comes from the fixed phases (1 + 2 + 3 ms per step of
// 2 × 16 tokens: 32 / 0.006 s = 5333 tokens/s, 3.0 GiB peak), and the
// log-prob check passes against the CPU's own per-sequence log-probs
// (packed and unpacked agree to float32 rounding).
func TestEndToEndOnCPU(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	t.Setenv("TRAINBENCH_HELPER", "")
	var stderr bytes.Buffer
	o, err := parseFlags([]string{"-device", "cpu", "-shapes", "tiny", "-steps", "3", "-warmup", "1",
		"-torch", "env TRAINBENCH_HELPER=torch " + exe, "-check-shape", "tiny", "-check-lens", "9,5",
		"-check-cmd", "env TRAINBENCH_HELPER=check " + exe, "-out", t.TempDir()}, &stderr)
	require.NoError(t, err)
	var out bytes.Buffer
	ok, err := run(context.Background(), o, &out)
	require.NoError(t, err, stderr.String())
	rep := out.String()
	t.Log(rep)
	assert.True(t, ok, rep+stderr.String())
	assert.Contains(t, rep, "| tiny | 2×16 |")
	assert.Contains(t, rep, " 5333 |")
	assert.Contains(t, rep, "/ 3.0 |", "PyTorch's peak")
	assert.Contains(t, rep, "| 6 / 1 / 2 / 3 | — / 4.0 |", "PyTorch phases and reserved peak")
	assert.Contains(t, rep, "| fp32 | 12 |", "8 + 4 predicted tokens")
	assert.Contains(t, rep, "torch T, transformers X, D")
	assert.NotContains(t, rep, "Errors:")
	written, err := os.ReadFile(filepath.Join(o.out, "trainbench.md"))
	require.NoError(t, err)
	assert.Equal(t, rep, string(written))
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.Len(t, o.shapes, 3)
	assert.Equal(t, device.CUDA, o.device.Kind)
	assert.Equal(t, gpu.BF16, o.precision)
	assert.Equal(t, []int{512, 300, 64}, o.checkLens)
	assert.Equal(t, "Qwen3-0.6B", o.checkSh.name)

	o, err = parseFlags([]string{"-device", "cpu", "-precision", "bf16"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, gpu.FP32, o.precision, "the CPU computes in fp32")

	for _, args := range [][]string{
		{"-shapes", "qwen3-70b"},
		{"-shapes", "tiny:8"},
		{"-shapes", ","},
		{"-device", "auto"},
		{"-device", "tpu"},
		{"-precision", "fp8"},
		{"-steps", "0"},
		{"-warmup", "-1"},
		{"-peak", "0"},
		{"-check-lens", "1"},
		{"-check-lens", "10,x"},
		{"-check-shape", "nope"},
		{"stray"},
	} {
		_, err := parseFlags(args, io.Discard)
		assert.Error(t, err, "%v", args)
	}
	_, err = parseFlags([]string{"-h"}, io.Discard)
	assert.ErrorIs(t, err, flag.ErrHelp)
}

func TestParseShapes(t *testing.T) {
	s, err := parseShapes("qwen3-4b, tiny:3x40,QWEN3-0.6B")
	require.NoError(t, err)
	require.Len(t, s, 3)
	assert.Equal(t, "Qwen3-4B", s[0].name)
	assert.Equal(t, 4*1024, s[0].tokens())
	assert.Equal(t, []int{40, 40, 40}, s[1].lens())
	assert.Equal(t, 8, s[2].seqs)
	// The published configurations' sizes.
	c := s[0].cfg
	assert.Equal(t, []int{2560, 9728, 36, 32, 8, 128, 151936}, []int{c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.VocabSize})
	for _, sh := range shapes() {
		require.NoError(t, sh.cfg.Validate(), sh.name)
	}
	_, err = parseShapes("tiny:1x1")
	assert.Error(t, err, "a sequence needs two tokens to predict one")
	_, err = parseShapes("tiny:1x1000")
	assert.Error(t, err, "longer than max_position_embeddings 256")
}

// TestCheckBounds: at 28 layers the factor is 2·√7 = 5.2915.
func TestCheckBounds(t *testing.T) {
	f := 2 * math.Sqrt(7)
	cases := []struct {
		p         gpu.Precision
		max, mean float64
	}{
		{gpu.FP32, f * 1.9e-5, f * 1.9e-5 / 4},
		{gpu.TF32, f * 7.8e-3, f * 7.8e-3 / 4},
		{gpu.BF16, f * 7.3e-2, f * 1.5e-2},
	}
	for _, c := range cases {
		mx, mn := checkBounds(c.p, 28)
		assert.InDelta(t, c.max, mx, 1e-15, c.p.String())
		assert.InDelta(t, c.mean, mn, 1e-15, c.p.String())
	}
	mx, _ := checkBounds(gpu.FP32, 4)
	assert.InDelta(t, 3.8e-5, mx, 1e-15, "twice the measured at the measured model's 4 layers")
}

func TestCompareLogProbs(t *testing.T) {
	got := [][]float32{{0, -1, -2}, {5, -3}}
	want := [][]float64{{9, -1.5, -2}, {0, -2}}
	// Position 0 is skipped; differences 0.5, 0, 1: max 1, mean 0.5.
	r, err := compareLogProbs(got, want)
	require.NoError(t, err)
	assert.Equal(t, checkResult{tokens: 3, maxDiff: 1, meanDiff: 0.5}, r)
	r, err = compareLogProbs([][]float32{{0, float32(math.NaN())}}, [][]float64{{0, 1}})
	require.NoError(t, err)
	assert.True(t, math.IsInf(r.maxDiff, 1), "NaN fails every bound")
	_, err = compareLogProbs(got, want[:1])
	assert.Error(t, err)
	_, err = compareLogProbs(got, [][]float64{{0, 0, 0}, {0}})
	assert.Error(t, err)
}

func TestParseTorch(t *testing.T) {
	r, err := parseTorch([]byte("x\nRESULT {\"fwd_ms\":[1.5,2],\"bwd_ms\":[3,4],\"opt_ms\":[1,1],\"peak_allocated\":7,\"torch\":\"2.11\"}\n"))
	require.NoError(t, err)
	require.Len(t, r.steps, 2)
	assert.Equal(t, phases{fwd: 1500 * time.Microsecond, bwd: 3 * time.Millisecond, opt: time.Millisecond}, r.steps[0])
	assert.Equal(t, uint64(7), r.peakInUse)
	step, p := r.medians()
	assert.Equal(t, 6250*time.Microsecond, step, "median of 5.5 and 7 ms")
	assert.Equal(t, 1750*time.Microsecond, p.fwd)
	for _, bad := range []string{"", "RESULT {", `RESULT {"fwd_ms":[1],"bwd_ms":[],"opt_ms":[1]}`, `RESULT {"fwd_ms":[]}`} {
		_, err := parseTorch([]byte(bad))
		assert.Error(t, err, bad)
	}
}

func TestTorchArgs(t *testing.T) {
	s, err := parseShapes("qwen3-0.6b")
	require.NoError(t, err)
	got := strings.Join(torchArgs(options{steps: 5, warmup: 2, seed: 3}, s[0]), " ")
	assert.Equal(t, "--vocab 151936 --hidden 1024 --intermediate 3072 --layers 28 --heads 16 --kv-heads 8 --head-dim 128 --seqs 8 --seq-len 1024 --steps 5 --warmup 2 --rope-theta 1e+06 --seed 3", got)
}

func TestPerStep(t *testing.T) {
	c := gpu.Counters{Launches: 10, HtoDBytes: 7, Kernels: map[string]uint64{"a": 4}}
	assert.Equal(t, gpu.Counters{Launches: 5, HtoDBytes: 3, Kernels: map[string]uint64{"a": 2}}, perStep(c, 2))
}

// TestReportWrittenShapeByShape: a run stopped after its first shape (the
// context cancelled, as a machine's time limit would kill it) has
// already written that shape's row — here its error — to
// OUT/trainbench.md, without the check that never ran.
func TestReportWrittenShapeByShape(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parseFlags([]string{"-device", "cpu", "-shapes", "tiny,tiny", "-steps", "2", "-warmup", "1",
		"-torch", "", "-check-shape", "tiny", "-check-lens", "9,5", "-out", t.TempDir()}, &stderr)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = run(ctx, o, io.Discard)
	require.ErrorIs(t, err, context.Canceled)
	written, err := os.ReadFile(filepath.Join(o.out, "trainbench.md"))
	require.NoError(t, err, stderr.String())
	assert.Contains(t, string(written), "| tiny |")
	assert.NotContains(t, string(written), "Log-prob check")
}
