package losstest_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/loss/losstest"
)

var (
	modes = []loss.Mode{loss.ModeVanilla, loss.ModeGSPO, loss.ModeCISPO, loss.ModeGPG, loss.ModeSAPO, loss.ModeGeoMean}
	aggs  = []loss.Agg{loss.AggTokenMean, loss.AggSeqMeanTokenSum, loss.AggSeqMeanTokenMean, loss.AggSeqMeanTokenSumNorm}
	kls   = []loss.KLType{loss.KLK1, loss.KLK2, loss.KLK3, loss.KLAbs, loss.KLK3Plus}
)

func TestBuiltinsPassAllChecks(t *testing.T) {
	c := loss.NewComputer(nil)
	i := 0
	for _, mode := range modes {
		for _, agg := range aggs {
			for _, kl := range kls {
				cfg := loss.Config{Mode: mode, Agg: agg, KLType: kl, ClipLow: 0.2, ClipHigh: 0.28, ClipC: 3,
					EntropyCoef: 0.01, KLCoef: 0.05}
				if i%2 == 0 {
					cfg.TISCap = 2
				}
				i++
				t.Run(fmt.Sprintf("%s/%s/%s", mode, agg, kl), func(t *testing.T) {
					losstest.CheckAll(t, c, cfg)
				})
			}
		}
	}
}

// ClipLow ≥ 1 (no lower bound on the ratio, MiniMax-M1's CISPO setting)
// passes the same checks.
func TestNoLowerBoundPassesAllChecks(t *testing.T) {
	c := loss.NewComputer(nil)
	for _, mode := range []loss.Mode{loss.ModeCISPO, loss.ModeVanilla} {
		cfg := loss.Config{Mode: mode, ClipLow: 10, ClipHigh: 0.28, ClipC: 10, KLCoef: 0.05}
		t.Run(string(mode), func(t *testing.T) { losstest.CheckAll(t, c, cfg) })
	}
}

// The checks must be able to fail: each broken variant below violates
// exactly the property one check guards.
func TestChecksCatchBrokenVariants(t *testing.T) {
	reg := loss.NewRegistry()
	// reads padding: the loss sums log-probs without the mask
	require.NoError(t, reg.Register("leaky", loss.Variant{Build: func(in *loss.Inputs) (loss.Term, error) {
		pt, err := gorgonia.HadamardProd(in.LogProbs, in.Advantages)
		if err != nil {
			return loss.Term{}, err
		}
		s, err := gorgonia.Sum(pt)
		if err != nil {
			return loss.Term{}, err
		}
		s, err = gorgonia.Neg(s)
		return loss.Term{Scalar: s}, err
	}}))
	// a baseline that ignores the advantage: −(A + 0.1)·logπ
	require.NoError(t, reg.Register("biased", loss.Variant{Build: func(in *loss.Inputs) (loss.Term, error) {
		a, err := gorgonia.Add(in.Advantages, gorgonia.NewConstant(0.1))
		if err != nil {
			return loss.Term{}, err
		}
		pt, err := gorgonia.HadamardProd(in.LogProbs, a)
		if err != nil {
			return loss.Term{}, err
		}
		pt, err = gorgonia.Neg(pt)
		return loss.Term{PerToken: pt}, err
	}}))
	// twice the REINFORCE gradient
	require.NoError(t, reg.Register("double", loss.Variant{Build: func(in *loss.Inputs) (loss.Term, error) {
		pt, err := gorgonia.HadamardProd(in.LogProbs, in.Advantages)
		if err != nil {
			return loss.Term{}, err
		}
		pt, err = gorgonia.Mul(pt, gorgonia.NewConstant(-2.0))
		return loss.Term{PerToken: pt}, err
	}}))
	c := loss.NewComputer(reg)
	b := losstest.RandomBatch(rand.New(rand.NewPCG(1, 2)), 4, 6)
	rng := rand.New(rand.NewPCG(3, 4))

	assert.ErrorContains(t, losstest.CheckPadding(c, loss.Config{Mode: "leaky"}, b, rng), "padding")
	assert.ErrorContains(t, losstest.CheckZeroAdvantage(c, loss.Config{Mode: "biased"}, b), "A = 0")
	assert.ErrorContains(t, losstest.CheckREINFORCE(c, loss.Config{Mode: "double"}, b, loss.AggTokenMean), "REINFORCE")
	// the correct variants pass the checks the broken ones fail
	assert.NoError(t, losstest.CheckPadding(c, loss.Config{Mode: "double"}, b, rng))
	assert.NoError(t, losstest.CheckREINFORCE(c, loss.Config{Mode: loss.ModeGPG}, b, loss.AggTokenMean))
}

// wrongGrad is an Evaluator whose reported gradient is off by 1% at one
// position; CheckGradient must notice.
type wrongGrad struct{ *loss.Computer }

func (w wrongGrad) Compute(cfg loss.Config, b loss.Batch) (loss.Result, error) {
	r, err := w.Computer.Compute(cfg, b)
	if err == nil {
		r.GradLogProbs.Float32s()[0] *= 1.01
	}
	return r, err
}

func TestCheckGradientCatchesWrongGradient(t *testing.T) {
	b := losstest.RandomBatch(rand.New(rand.NewPCG(5, 6)), 3, 4)
	c := loss.NewComputer(nil)
	cfg := loss.Config{Mode: loss.ModeGPG}
	require.NoError(t, losstest.CheckGradient(c, cfg, b))
	assert.ErrorContains(t, losstest.CheckGradient(wrongGrad{c}, cfg, b), "LogProbs[0,0]")
}

// tanhGate is the objective L = −w(A)·A·(1 + tanh(r − 1)),
// w(A) = 1 if A ≥ 0 else β, which by design is not REINFORCE at ratio 1
// for A < 0: there its gradient is −β·A·w_agg.
func tanhGate(beta float64, claimREINFORCE bool) loss.Variant {
	return loss.Variant{ReducesToREINFORCE: claimREINFORCE, Loss: func(v *loss.Vars) loss.Expr {
		a := v.Advantages()
		w := v.Where(a.GE(0), 1, beta)
		return w.Mul(a).Mul(v.Ratio().Sub(1).Tanh().Add(1)).Neg()
	}}
}

// Check runs the REINFORCE check only for variants that declare the
// property: the tanh gate passes without the claim and fails with it, with
// the message the issue quotes (half the REINFORCE gradient at A < 0).
func TestCheckRunsDeclaredProperties(t *testing.T) {
	reg := loss.NewRegistry()
	require.NoError(t, reg.Register("tanh_gate", tanhGate(0.5, false)))
	require.NoError(t, reg.Register("tanh_gate_claims", tanhGate(0.5, true)))
	c := loss.NewComputer(reg)

	assert.NoError(t, losstest.Check(c, loss.Config{Mode: "tanh_gate"}))
	err := losstest.Check(c, loss.Config{Mode: "tanh_gate_claims"})
	require.Error(t, err)
	assert.ErrorContains(t, err, "4x6/reinforce: losstest: CheckREINFORCE: d loss/d LogProbs[")
	assert.NotContains(t, err.Error(), "padding")
	assert.NotContains(t, err.Error(), "gradient:")

	// the same suite as subtests
	t.Run("CheckAll", func(t *testing.T) { losstest.CheckAll(t, c, loss.Config{Mode: "tanh_gate"}) })

	err = losstest.Check(c, loss.Config{Mode: "nope"})
	assert.ErrorIs(t, err, loss.ErrUnknownName)
	assert.EqualError(t, err, `losstest: mode "nope" is not registered: unknown name`)
}

// Check uses the aggregation the variant declares: gspo's policy term is
// seq-mean-token-mean whatever Config.Agg says, and the REINFORCE check
// would fail for it under token-mean.
func TestCheckUsesDeclaredAgg(t *testing.T) {
	c := loss.NewComputer(nil)
	cfg := loss.Config{Mode: loss.ModeGSPO, Agg: loss.AggTokenMean}
	assert.NoError(t, losstest.Check(c, cfg))
	b := losstest.RandomBatch(rand.New(rand.NewPCG(1, 2)), 4, 6)
	assert.ErrorContains(t, losstest.CheckREINFORCE(c, cfg, b, loss.AggTokenMean), "REINFORCE")
}

func TestRowsRoundTrip(t *testing.T) {
	b := losstest.RandomBatch(rand.New(rand.NewPCG(8, 9)), 3, 4)
	r, err := losstest.RowsOf(b)
	require.NoError(t, err)
	require.Len(t, r.Advantages, 3)
	require.Len(t, r.Advantages[1], 4)
	assert.Equal(t, b.Advantages.Float32s()[4:8], r.Advantages[1])
	assert.Equal(t, []float32{1, 0, 1, 1}, r.Mask[0], "RandomBatch's tool-output gap")
	assert.Equal(t, []float32{0, 0, 0, 0}, r.Mask[2], "RandomBatch's all-padding row")

	back, err := r.Batch()
	require.NoError(t, err)
	assert.Equal(t, b.LogProbs.Float32s(), back.LogProbs.Float32s())
	assert.Equal(t, b.Entropy.Float32s(), back.Entropy.Float32s())
	assert.Equal(t, []int{3, 4}, []int(back.Mask.Shape()))

	// copies, not views
	r.LogProbs[0][0] = 42
	assert.NotEqual(t, float32(42), b.LogProbs.Float32s()[0])
	assert.NotEqual(t, float32(42), back.LogProbs.Float32s()[0])

	// a hand-written batch without the optional tensors computes
	hand := losstest.Rows{
		LogProbs:    [][]float32{{-1, -2}, {-0.5, -1}},
		OldLogProbs: [][]float32{{-1, -2}, {-0.5, -1}},
		Advantages:  [][]float32{{1, 1}, {-1, -1}},
		Mask:        [][]float32{{1, 1}, {1, 0}},
	}
	hb, err := hand.Batch()
	require.NoError(t, err)
	assert.Nil(t, hb.Entropy)
	res, err := loss.Compute(loss.Config{Mode: loss.ModeGPG}, hb)
	require.NoError(t, err)
	g, err := losstest.Values(res.GradLogProbs)
	require.NoError(t, err)
	// gpg, token-mean over 3 tokens: dL/dlogπ = −A/3, 0 on padding
	assert.InDeltaSlice(t, []float32{-1.0 / 3, -1.0 / 3}, g[0], 1e-7)
	assert.InDeltaSlice(t, []float32{1.0 / 3, 0}, g[1], 1e-7)
}

func TestRowsErrors(t *testing.T) {
	ok := func() losstest.Rows {
		return losstest.Rows{
			LogProbs: [][]float32{{-1, -2}}, OldLogProbs: [][]float32{{-1, -2}},
			Advantages: [][]float32{{1, 1}}, Mask: [][]float32{{1, 1}},
		}
	}
	for name, tc := range map[string]struct {
		edit     func(*losstest.Rows)
		sentinel error
		msg      string
	}{
		"no rows": {func(r *losstest.Rows) { r.LogProbs = nil }, loss.ErrEmptyBatch,
			"losstest: Rows.Batch: LogProbs has 0 rows of 0 values: empty batch"},
		"empty row": {func(r *losstest.Rows) { r.LogProbs = [][]float32{{}} }, loss.ErrEmptyBatch,
			"losstest: Rows.Batch: LogProbs has 1 rows of 0 values: empty batch"},
		"missing mask": {func(r *losstest.Rows) { r.Mask = nil }, loss.ErrMissing,
			"losstest: Rows.Batch: Mask is nil: missing input"},
		"extra row": {func(r *losstest.Rows) { r.Advantages = [][]float32{{1, 1}, {1, 1}} }, loss.ErrShape,
			"losstest: Rows.Batch: Advantages has 2 rows, LogProbs has 1: shape mismatch"},
		"ragged": {func(r *losstest.Rows) { r.Entropy = [][]float32{{1}} }, loss.ErrShape,
			"losstest: Rows.Batch: Entropy row 0 has 1 values, LogProbs row 0 has 2: shape mismatch"},
	} {
		t.Run(name, func(t *testing.T) {
			r := ok()
			tc.edit(&r)
			_, err := r.Batch()
			assert.ErrorIs(t, err, tc.sentinel)
			assert.EqualError(t, err, tc.msg)
		})
	}

	_, err := losstest.Values(nil)
	assert.ErrorIs(t, err, loss.ErrMissing)
	_, err = losstest.Values(&tensor.Dense{})
	assert.ErrorIs(t, err, loss.ErrShape)
	_, err = losstest.Values(tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2})))
	assert.EqualError(t, err, "losstest: Values: shape (2), want [B,T]: shape mismatch")
	_, err = losstest.Values(tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{1, 2})))
	assert.EqualError(t, err, "losstest: Values: dtype float64, want float32: shape mismatch")
	_, err = losstest.RowsOf(loss.Batch{LogProbs: tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{1, 2}))})
	assert.EqualError(t, err, "losstest: RowsOf: Batch.LogProbs: losstest: Values: dtype float64, want float32: shape mismatch")
}
