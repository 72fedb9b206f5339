package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// checkResult is the log-prob check of one precision: the largest and the
// mean absolute difference of agentrl's per-token log-probs from
// transformers' float32 ones, over every predicted token, and the bounds
// they must stay within.
type checkResult struct {
	precision           string
	tokens              int
	maxDiff, meanDiff   float64
	maxBound, meanBound float64
}

func (c checkResult) ok() bool { return c.maxDiff <= c.maxBound && c.meanDiff <= c.meanBound }

// checkBounds are the largest and mean differences allowed for a model of
// layers layers in precision p. They start from what DESIGN.md records
// of an H200 run on a Qwen3-shaped model of 4 layers at the full
// vocabulary: largest differences 1.9e-5 in fp32, 7.8e-3 in tf32, 7.3e-2
// in bf16 (mean 1.5e-2). Rounding errors of independent layers add like
// a random walk, so a model of L layers is allowed √(L/4) times those,
// and twice that again as margin: at 28 layers 1.0e-4 (fp32), 4.1e-2
// (tf32), 0.39 (bf16; mean 0.079). The fp32 and tf32 means, not
// measured, get a quarter of their largest bounds. A kernel bug (a wrong
// mask, a lost term) moves log-probs by the spread of the logits, ≈ 0.5
// for these random weights, above every bound but bf16's largest, and
// moves the mean by as much, which no mean bound allows.
func checkBounds(p gpu.Precision, layers int) (maxBound, meanBound float64) {
	f := 2 * math.Sqrt(float64(layers)/4)
	switch p {
	case gpu.FP32:
		return f * 1.9e-5, f * 1.9e-5 / 4
	case gpu.TF32:
		return f * 7.8e-3, f * 7.8e-3 / 4
	default:
		return f * 7.3e-2, f * 1.5e-2
	}
}

// checkPrecisions are the precisions the check runs on the device: fp32,
// whose bound is tight enough to catch any kernel bug, and the benchmark's
// own precision when it is another.
func checkPrecisions(o options) []gpu.Precision {
	if o.device.Kind == device.CPU {
		return []gpu.Precision{gpu.FP32}
	}
	ps := []gpu.Precision{gpu.FP32}
	if o.precision != gpu.FP32 {
		ps = append(ps, o.precision)
	}
	return ps
}

// runCheck compares agentrl's log-probs with transformers' on shape s's
// model (random weights drawn on the device, saved as a Hugging Face
// checkpoint that transformers loads) over random sequences of o.checkLens
// tokens, packed in one batch: the full vocabulary, every layer.
func runCheck(ctx context.Context, o options, s shape) ([]checkResult, error) {
	dir := o.checkDir
	if dir == "" {
		d, err := os.MkdirTemp("", "trainbench-check-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	modelDir := filepath.Join(dir, "model")
	if err := saveRandomModel(ctx, o, s, modelDir); err != nil {
		return nil, fmt.Errorf("making the model: %w", err)
	}
	rng := rand.New(rand.NewPCG(o.seed, 0xc4ec))
	seqs := make([][]int, len(o.checkLens))
	for b, n := range o.checkLens {
		seqs[b] = make([]int, n)
		for i := range seqs[b] {
			seqs[b][i] = rng.IntN(s.cfg.VocabSize)
		}
	}
	if err := writeJSON(filepath.Join(dir, "tokens.json"), map[string]any{"seqs": seqs}); err != nil {
		return nil, err
	}
	type run struct {
		p  gpu.Precision
		lp [][]float32
	}
	var runs []run
	for _, p := range checkPrecisions(o) {
		lp, err := goLogProbs(ctx, o, p, modelDir, seqs)
		if err != nil {
			return nil, fmt.Errorf("agentrl in %v: %w", p, err)
		}
		runs = append(runs, run{p, lp})
	}
	cmd := strings.Fields(o.checkCmd)
	if len(cmd) == 0 {
		return nil, errors.New("no -check-cmd")
	}
	o.logf("log-prob check: %s --dir %s", strings.Join(cmd, " "), dir)
	c := exec.CommandContext(ctx, cmd[0], append(cmd[1:], "--dir", dir)...)
	c.Stdout, c.Stderr = o.log, o.log
	if err := c.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(cmd, " "), err)
	}
	var ref struct {
		LogProbs [][]float64 `json:"logprobs"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		return nil, fmt.Errorf("reference.json: %w", err)
	}
	var out []checkResult
	for _, r := range runs {
		res, err := compareLogProbs(r.lp, ref.LogProbs)
		if err != nil {
			return nil, err
		}
		res.precision = r.p.String()
		res.maxBound, res.meanBound = checkBounds(r.p, s.cfg.NumHiddenLayers)
		out = append(out, res)
	}
	return out, nil
}

// compareLogProbs returns the largest and mean absolute differences of
// got from want over positions 1… of every sequence (position 0 has no
// prediction).
func compareLogProbs(got [][]float32, want [][]float64) (checkResult, error) {
	if len(got) != len(want) {
		return checkResult{}, fmt.Errorf("reference has %d sequences, agentrl %d", len(want), len(got))
	}
	var r checkResult
	var sum float64
	for b := range got {
		if len(got[b]) != len(want[b]) {
			return checkResult{}, fmt.Errorf("sequence %d: reference has %d log-probs, agentrl %d", b, len(want[b]), len(got[b]))
		}
		for i := 1; i < len(got[b]); i++ {
			d := math.Abs(float64(got[b][i]) - want[b][i])
			if math.IsNaN(d) {
				d = math.Inf(1)
			}
			r.maxDiff = max(r.maxDiff, d)
			sum += d
			r.tokens++
		}
	}
	if r.tokens > 0 {
		r.meanDiff = sum / float64(r.tokens)
	}
	return r, nil
}

// saveRandomModel makes shape s's model on the benchmark's device with
// weights drawn there, and saves it as float32 safetensors.
func saveRandomModel(ctx context.Context, o options, s shape, dir string) (err error) {
	be, err := openBackend(ctx, o, false)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeBackend(be)) }()
	m, err := policy.New(s.cfg, o.seed, policy.WithBackend(be), policy.WithBackendInit())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	return m.Save(dir, lm.SaveOptions{DType: safetensors.F32})
}

// goLogProbs loads the checkpoint on the device in precision p and
// returns the per-token log-probs of seqs at temperature 1.
func goLogProbs(ctx context.Context, o options, p gpu.Precision, dir string, seqs [][]int) (lp [][]float32, err error) {
	o.precision = p
	be, err := openBackend(ctx, o, false)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, closeBackend(be)) }()
	m, err := policy.Load(dir, policy.WithBackend(be))
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	st, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs}, false)
	if err != nil {
		return nil, err
	}
	return st.LogProbs, nil
}

func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
