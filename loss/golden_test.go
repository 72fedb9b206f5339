package loss_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/agentrl/agentrl/loss"
)

// golden mirrors testdata/golden.json, written by testdata/gen_golden.py:
// verl's formulas re-implemented in PyTorch 1.13 (Debian python3-torch),
// gradients from torch autograd in float64.
type golden struct {
	Batches []goldenBatch
	Cases   []struct {
		Batch       int
		Mode        loss.Mode
		Agg         loss.Agg
		KLType      loss.KLType `json:"kl_type"`
		ClipLow     float64     `json:"clip_low"`
		ClipHigh    float64     `json:"clip_high"`
		ClipC       float64     `json:"clip_c"`
		TauPos      float64     `json:"tau_pos"`
		TauNeg      float64     `json:"tau_neg"`
		EntropyCoef float64     `json:"entropy_coef"`
		KLCoef      float64     `json:"kl_coef"`
		TISCap      float64     `json:"tis_cap"`
		AggDivisor  float64     `json:"agg_divisor"`
		goldenResult
	}
}

// goldenResult is what a golden case expects Compute to return.
type goldenResult struct {
	Loss        float64
	Metrics     map[string]float64
	GradLogp    []float64 `json:"grad_logp"`
	GradEntropy []float64 `json:"grad_entropy"`
}

// check compares res with w: the loss and w's metrics within tol (the
// metrics must all be there), the float32 gradients within 1e-5 (close5).
func (w goldenResult) check(t *testing.T, res loss.Result, cols int, tol func(got, want float64) bool) {
	t.Helper()
	assert.Truef(t, tol(res.Loss, w.Loss), "loss %v, torch %v", res.Loss, w.Loss)
	for k, want := range w.Metrics {
		got, ok := res.Metrics[k]
		if assert.Truef(t, ok, "metric %q missing", k) {
			assert.Truef(t, tol(got, want), "metric %q = %v, torch %v", k, got, want)
		}
	}
	gl := res.GradLogProbs.Float32s()
	for i, want := range w.GradLogp {
		assert.Truef(t, close5(float64(gl[i]), want), "dL/dlogp[%d,%d] = %v, torch %v", i/cols, i%cols, gl[i], want)
	}
	require.NotNil(t, res.GradEntropy)
	ge := res.GradEntropy.Float32s()
	for i, want := range w.GradEntropy {
		assert.Truef(t, close5(float64(ge[i]), want), "dL/dH[%d,%d] = %v, torch %v", i/cols, i%cols, ge[i], want)
	}
}

// goldenBatch is a batch of the golden files, every input set.
type goldenBatch struct {
	B, T                                        int
	Logp, Old, Adv, Mask, Ref, Rollout, Entropy []float64
}

// batch returns bt as a loss.Batch of float32 tensors.
func (bt goldenBatch) batch() loss.Batch {
	return loss.Batch{
		LogProbs: dense32(bt.B, bt.T, bt.Logp), OldLogProbs: dense32(bt.B, bt.T, bt.Old),
		Advantages: dense32(bt.B, bt.T, bt.Adv), Mask: dense32(bt.B, bt.T, bt.Mask),
		RefLogProbs: dense32(bt.B, bt.T, bt.Ref), RolloutLogProbs: dense32(bt.B, bt.T, bt.Rollout),
		Entropy: dense32(bt.B, bt.T, bt.Entropy),
	}
}

func dense32(rows, cols int, v []float64) *tensor.Dense {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(out))
}

// close reports whether got is within 1e-5 of want, absolutely or relative
// to |want|.
func close5(got, want float64) bool {
	return math.Abs(got-want) <= 1e-5*math.Max(1, math.Abs(want))
}

func TestGoldenPyTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/golden.json")
	require.NoError(t, err)
	var g golden
	require.NoError(t, json.Unmarshal(raw, &g))
	require.Len(t, g.Cases, 6*4*5, "one case per mode × agg × KL type")
	c := loss.NewComputer(nil)
	for _, tc := range g.Cases {
		name := fmt.Sprintf("%s/%s/%s/tis=%v/div=%v", tc.Mode, tc.Agg, tc.KLType, tc.TISCap, tc.AggDivisor)
		t.Run(name, func(t *testing.T) {
			bt := g.Batches[tc.Batch]
			b := bt.batch()
			cfg := loss.Config{Mode: tc.Mode, Agg: tc.Agg, KLType: tc.KLType, ClipLow: tc.ClipLow, ClipHigh: tc.ClipHigh,
				ClipC: tc.ClipC, TauPos: tc.TauPos, TauNeg: tc.TauNeg, EntropyCoef: tc.EntropyCoef, KLCoef: tc.KLCoef,
				TISCap: tc.TISCap, AggDivisor: tc.AggDivisor}
			res, err := c.Compute(cfg, b)
			require.NoError(t, err)
			tc.check(t, res, bt.T, close5)
		})
	}
}
