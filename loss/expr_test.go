package loss_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"

	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/loss/losstest"
)

// exprBatch is a 3×4 batch from losstest.RandomBatch (a mask-0 gap at
// (0,1), an all-padding last row) as float64 rows, for the expected values.
type exprBatch struct {
	b                  loss.Batch
	lp, old, adv, mask [][]float64
	n                  float64 // Σ mask, the token-mean divisor
}

func newExprBatch(t *testing.T) exprBatch {
	t.Helper()
	b := losstest.RandomBatch(rand.New(rand.NewPCG(21, 22)), 3, 4)
	r, err := losstest.RowsOf(b)
	require.NoError(t, err)
	widen := func(v [][]float32) [][]float64 {
		out := make([][]float64, len(v))
		for i, row := range v {
			for _, x := range row {
				out[i] = append(out[i], float64(x))
			}
		}
		return out
	}
	e := exprBatch{b: b, lp: widen(r.LogProbs), old: widen(r.OldLogProbs), adv: widen(r.Advantages), mask: widen(r.Mask)}
	for _, row := range e.mask {
		for _, m := range row {
			e.n += m
		}
	}
	return e
}

// computeExpr registers l as a variant and computes it under token-mean.
func computeExpr(t *testing.T, b loss.Batch, l func(v *loss.Vars) loss.Expr) (loss.Result, error) {
	t.Helper()
	reg := loss.NewRegistry()
	require.NoError(t, reg.Register("expr", loss.Variant{Loss: l}))
	return loss.NewComputer(reg).Compute(loss.Config{Mode: "expr"}, b)
}

// Each elementwise operation against its value and derivative written out
// by hand: L = Σ m·f / N (token-mean), dL/dlogπ = m·f' / N. x is logπ
// (in [−3, −0.05]), o is logπ_old, a is A. Every case is also checked
// against finite differences.
func TestExprElementwise(t *testing.T) {
	e := newExprBatch(t)
	sig := func(z float64) float64 { return 1 / (1 + math.Exp(-z)) }
	ind := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, tc := range []struct {
		name string
		expr func(v *loss.Vars) loss.Expr
		f    func(x, o, a float64) float64
		df   func(x, o, a float64) float64
	}{
		{"Neg", func(v *loss.Vars) loss.Expr { return v.LogProbs().Neg() },
			func(x, o, a float64) float64 { return -x }, func(x, o, a float64) float64 { return -1 }},
		{"Abs", func(v *loss.Vars) loss.Expr { return v.LogProbs().Abs() },
			func(x, o, a float64) float64 { return -x }, func(x, o, a float64) float64 { return -1 }},
		{"Square", func(v *loss.Vars) loss.Expr { return v.LogProbs().Square() },
			func(x, o, a float64) float64 { return x * x }, func(x, o, a float64) float64 { return 2 * x }},
		{"Sqrt", func(v *loss.Vars) loss.Expr { return v.LogProbs().Neg().Sqrt() },
			func(x, o, a float64) float64 { return math.Sqrt(-x) }, func(x, o, a float64) float64 { return -0.5 / math.Sqrt(-x) }},
		{"Exp", func(v *loss.Vars) loss.Expr { return v.LogProbs().Exp() },
			func(x, o, a float64) float64 { return math.Exp(x) }, func(x, o, a float64) float64 { return math.Exp(x) }},
		{"Log", func(v *loss.Vars) loss.Expr { return v.LogProbs().Neg().Log() },
			func(x, o, a float64) float64 { return math.Log(-x) }, func(x, o, a float64) float64 { return 1 / x }},
		{"Tanh", func(v *loss.Vars) loss.Expr { return v.LogProbs().Tanh() },
			func(x, o, a float64) float64 { return math.Tanh(x) }, func(x, o, a float64) float64 { return 1 - math.Tanh(x)*math.Tanh(x) }},
		{"Sigmoid", func(v *loss.Vars) loss.Expr { return v.LogProbs().Sigmoid() },
			func(x, o, a float64) float64 { return sig(x) }, func(x, o, a float64) float64 { return sig(x) * (1 - sig(x)) }},
		{"Sign", func(v *loss.Vars) loss.Expr { return v.Advantages().Sign().Mul(v.LogProbs()) },
			func(x, o, a float64) float64 { return math.Copysign(1, a) * x }, func(x, o, a float64) float64 { return math.Copysign(1, a) }},
		{"Add number", func(v *loss.Vars) loss.Expr { return v.LogProbs().Add(2).Square() },
			func(x, o, a float64) float64 { return (x + 2) * (x + 2) }, func(x, o, a float64) float64 { return 2 * (x + 2) }},
		{"Sub number", func(v *loss.Vars) loss.Expr { return v.LogProbs().Sub(0.5).Square() },
			func(x, o, a float64) float64 { return (x - 0.5) * (x - 0.5) }, func(x, o, a float64) float64 { return 2 * (x - 0.5) }},
		{"Mul int", func(v *loss.Vars) loss.Expr { return v.LogProbs().Mul(3) },
			func(x, o, a float64) float64 { return 3 * x }, func(x, o, a float64) float64 { return 3 }},
		{"Div float32", func(v *loss.Vars) loss.Expr { return v.LogProbs().Div(float32(4)) },
			func(x, o, a float64) float64 { return x / 4 }, func(x, o, a float64) float64 { return 0.25 }},
		{"Const Sub", func(v *loss.Vars) loss.Expr { return v.Const(1).Sub(v.LogProbs()) },
			func(x, o, a float64) float64 { return 1 - x }, func(x, o, a float64) float64 { return -1 }},
		{"Const Div", func(v *loss.Vars) loss.Expr { return v.Const(2).Div(v.LogProbs()) },
			func(x, o, a float64) float64 { return 2 / x }, func(x, o, a float64) float64 { return -2 / (x * x) }},
		{"Mul Expr", func(v *loss.Vars) loss.Expr { return v.LogProbs().Mul(v.Advantages()) },
			func(x, o, a float64) float64 { return x * a }, func(x, o, a float64) float64 { return a }},
		{"Div Expr", func(v *loss.Vars) loss.Expr { return v.OldLogProbs().Div(v.LogProbs()) },
			func(x, o, a float64) float64 { return o / x }, func(x, o, a float64) float64 { return -o / (x * x) }},
		{"Min number", func(v *loss.Vars) loss.Expr { return v.LogProbs().Min(-0.7) },
			func(x, o, a float64) float64 { return math.Min(x, -0.7) }, func(x, o, a float64) float64 { return ind(x <= -0.7) }},
		{"Max number", func(v *loss.Vars) loss.Expr { return v.LogProbs().Max(-0.7) },
			func(x, o, a float64) float64 { return math.Max(x, -0.7) }, func(x, o, a float64) float64 { return ind(x >= -0.7) }},
		{"Min Expr", func(v *loss.Vars) loss.Expr { return v.LogProbs().Min(v.OldLogProbs()) },
			func(x, o, a float64) float64 { return math.Min(x, o) }, func(x, o, a float64) float64 { return ind(x <= o) }},
		{"Max scalar Expr", func(v *loss.Vars) loss.Expr { return v.LogProbs().Max(v.Const(-0.7)) },
			func(x, o, a float64) float64 { return math.Max(x, -0.7) }, func(x, o, a float64) float64 { return ind(x >= -0.7) }},
		{"Clip", func(v *loss.Vars) loss.Expr { return v.LogProbs().Clip(-1, -0.3) },
			func(x, o, a float64) float64 { return math.Min(math.Max(x, -1), -0.3) },
			func(x, o, a float64) float64 { return ind(x >= -1 && x <= -0.3) }},
		{"GT", func(v *loss.Vars) loss.Expr { return v.LogProbs().GT(-0.7).Mul(v.LogProbs()) },
			func(x, o, a float64) float64 { return ind(x > -0.7) * x }, func(x, o, a float64) float64 { return ind(x > -0.7) }},
		{"GE", func(v *loss.Vars) loss.Expr { return v.Advantages().GE(0).Mul(v.LogProbs()) },
			func(x, o, a float64) float64 { return ind(a >= 0) * x }, func(x, o, a float64) float64 { return ind(a >= 0) }},
		{"LT", func(v *loss.Vars) loss.Expr { return v.LogProbs().LT(v.OldLogProbs()).Mul(v.LogProbs()) },
			func(x, o, a float64) float64 { return ind(x < o) * x }, func(x, o, a float64) float64 { return ind(x < o) }},
		{"LE", func(v *loss.Vars) loss.Expr { return v.Advantages().LE(0.3).Mul(v.LogProbs()) },
			func(x, o, a float64) float64 { return ind(a <= 0.3) * x }, func(x, o, a float64) float64 { return ind(a <= 0.3) }},
		{"Where numbers", func(v *loss.Vars) loss.Expr {
			return v.Where(v.Advantages().GE(0), 1, 0.25).Mul(v.LogProbs())
		}, func(x, o, a float64) float64 { return (0.25 + 0.75*ind(a >= 0)) * x },
			func(x, o, a float64) float64 { return 0.25 + 0.75*ind(a >= 0) }},
		{"Where Exprs", func(v *loss.Vars) loss.Expr {
			return v.Where(v.Advantages().LT(0), v.LogProbs().Square(), v.LogProbs().Mul(v.Const(3)))
		}, func(x, o, a float64) float64 { return ind(a < 0)*x*x + ind(a >= 0)*3*x },
			func(x, o, a float64) float64 { return ind(a < 0)*2*x + ind(a >= 0)*3 }},
		{"StopGradient", func(v *loss.Vars) loss.Expr { return v.LogProbs().StopGradient().Mul(v.LogProbs()) },
			func(x, o, a float64) float64 { return x * x }, func(x, o, a float64) float64 { return x }},
		{"LogRatio", func(v *loss.Vars) loss.Expr { return v.LogRatio().Square() },
			func(x, o, a float64) float64 { return (x - o) * (x - o) }, func(x, o, a float64) float64 { return 2 * (x - o) }},
		{"Ratio", func(v *loss.Vars) loss.Expr { return v.Ratio() },
			func(x, o, a float64) float64 { return math.Exp(x - o) }, func(x, o, a float64) float64 { return math.Exp(x - o) }},
		// log(1 + y) must not disturb 1 + y, used again outside the log.
		{"Log of 1+y shared", func(v *loss.Vars) loss.Expr {
			s := v.LogProbs().Neg().Add(1)
			return s.Log().Mul(s)
		}, func(x, o, a float64) float64 { return (1 - x) * math.Log(1-x) },
			func(x, o, a float64) float64 { return -math.Log(1-x) - 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want float64
			wantGrad := make([]float64, 0, 12)
			for i, row := range e.lp {
				for j, x := range row {
					o, a, m := e.old[i][j], e.adv[i][j], e.mask[i][j]
					want += m * tc.f(x, o, a) / e.n
					wantGrad = append(wantGrad, m*tc.df(x, o, a)/e.n)
				}
			}
			res, err := computeExpr(t, e.b, tc.expr)
			require.NoError(t, err)
			assert.InDelta(t, want, res.Loss, 1e-12*math.Max(1, math.Abs(want)))
			assert.InDeltaSlice(t, wantGrad, grads(res), 1e-7)

			reg := loss.NewRegistry()
			require.NoError(t, reg.Register("expr", loss.Variant{Loss: tc.expr}))
			assert.NoError(t, losstest.CheckGradient(loss.NewComputer(reg), loss.Config{Mode: "expr"}, e.b))
		})
	}
}

// Per-sequence reductions and broadcasting against the same hand sums:
// S_b = Σ_t m·x, n_b = Σ_t m, B = 3 rows (the last one empty).
func TestExprSequences(t *testing.T) {
	e := newExprBatch(t)
	rows := len(e.lp)
	s, n := make([]float64, rows), make([]float64, rows)
	for i := range rows {
		for j, x := range e.lp[i] {
			s[i] += e.mask[i][j] * x
			n[i] += e.mask[i][j]
		}
	}
	require.Zero(t, n[rows-1], "RandomBatch's last row is padding")
	for _, tc := range []struct {
		name string
		expr func(v *loss.Vars) loss.Expr
		// want returns the loss and dL/dx at (i, j), before masking
		want func() (float64, func(i, j int) float64)
	}{
		// L = (1/B) Σ_b S_b, dL/dx = m/B
		{"SeqSum Mean", func(v *loss.Vars) loss.Expr { return v.LogProbs().SeqSum().Mean() },
			func() (float64, func(i, j int) float64) {
				return (s[0] + s[1] + s[2]) / 3, func(i, j int) float64 { return 1.0 / 3 }
			}},
		// L = Σ_b S_b / max(n_b, 1), dL/dx = m / max(n_b, 1)
		{"SeqMean Sum", func(v *loss.Vars) loss.Expr { return v.LogProbs().SeqMean().Sum() },
			func() (float64, func(i, j int) float64) {
				return s[0]/n[0] + s[1]/n[1], func(i, j int) float64 { return 1 / math.Max(n[i], 1) }
			}},
		// [B,T]·[B] per token under token-mean: L = Σ_b S_b² / N,
		// dL/dx = 2·S_b·m / N
		{"broadcast [B,T] by [B]", func(v *loss.Vars) loss.Expr { return v.LogProbs().Mul(v.LogProbs().SeqSum()) },
			func() (float64, func(i, j int) float64) {
				return (s[0]*s[0] + s[1]*s[1]) / e.n, func(i, j int) float64 { return 2 * s[i] / e.n }
			}},
		{"broadcast [B] by [B,T]", func(v *loss.Vars) loss.Expr { return v.LogProbs().SeqSum().Mul(v.LogProbs()) },
			func() (float64, func(i, j int) float64) {
				return (s[0]*s[0] + s[1]*s[1]) / e.n, func(i, j int) float64 { return 2 * s[i] / e.n }
			}},
		// x − mean_b(x) sums to zero over each row's tokens: L = 0, and
		// dL/dx = (1 − n_b·(1/n_b))/N = 0
		{"Sub [B]", func(v *loss.Vars) loss.Expr { return v.LogProbs().Sub(v.LogProbs().SeqMean()) },
			func() (float64, func(i, j int) float64) { return 0, func(i, j int) float64 { return 0 } }},
		// Max of a token and its row's mean, the gradient splitting between
		// the token (where x ≥ mean) and, through the mean, every token of
		// the row: L = Σ m·max(x, μ_b)/N, dL/dx_j = [x_j ≥ μ]/N + k_b/(n_b·N)
		// with k_b the row's tokens below their mean.
		{"Max [B]", func(v *loss.Vars) loss.Expr { return v.LogProbs().Max(v.LogProbs().SeqMean()) },
			func() (float64, func(i, j int) float64) {
				var l float64
				below := make([]float64, rows)
				for i := range rows {
					for j, x := range e.lp[i] {
						mu := s[i] / math.Max(n[i], 1)
						l += e.mask[i][j] * math.Max(x, mu) / e.n
						if e.mask[i][j] == 1 && x < mu {
							below[i]++
						}
					}
				}
				return l, func(i, j int) float64 {
					g := below[i] / (math.Max(n[i], 1) * e.n)
					if e.lp[i][j] >= s[i]/math.Max(n[i], 1) {
						g += 1 / e.n
					}
					return g
				}
			}},
		// a per-sequence condition picks per-token values
		{"Where [B] condition", func(v *loss.Vars) loss.Expr {
			return v.Where(v.LogProbs().SeqSum().LT(s[0]-1e-3), v.LogProbs(), 0)
		}, func() (float64, func(i, j int) float64) {
			var l float64
			for i := range rows {
				if s[i] < s[0]-1e-3 {
					for j, x := range e.lp[i] {
						l += e.mask[i][j] * x / e.n
					}
				}
			}
			return l, func(i, j int) float64 {
				if s[i] < s[0]-1e-3 {
					return 1 / e.n
				}
				return 0
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := computeExpr(t, e.b, tc.expr)
			require.NoError(t, err)
			wantLoss, wantGrad := tc.want()
			assert.InDelta(t, wantLoss, res.Loss, 1e-12*math.Max(1, math.Abs(wantLoss)))
			var want []float64
			for i := range rows {
				for j := range e.lp[i] {
					want = append(want, e.mask[i][j]*wantGrad(i, j))
				}
			}
			assert.InDeltaSlice(t, want, grads(res), 1e-7)
		})
	}
}

// The optional inputs: an objective may use the reference and rollout
// log-probs and the entropy; using the entropy gives it a gradient.
func TestExprOptionalInputs(t *testing.T) {
	b := handBatch()
	b.RefLogProbs = mat(2, 3, -1.2, -0.7, -1.2, -0.7, 0, 0)
	b.RolloutLogProbs = mat(2, 3, -1.5, -1, -0.5, -2, 0, 0)
	b.Entropy = mat(2, 3, 1, 2, 3, 4, 9, 9)
	// L_t = (logπ − ref) + 0.5·rollout − 0.1·H, token-mean over 4 tokens:
	// dL/dlogπ = 1/4, dL/dH = −0.1/4 on the real tokens.
	res, err := computeExpr(t, b, func(v *loss.Vars) loss.Expr {
		return v.LogProbs().Sub(v.RefLogProbs()).Add(v.RolloutLogProbs().Mul(0.5)).Sub(v.Entropy().Mul(0.1))
	})
	require.NoError(t, err)
	// Σ(logπ − ref) = 0.2 + 0.2 + 0.2 + 0.2, Σ rollout = −5, Σ H = 10
	assert.InDelta(t, (0.8+0.5*-5-0.1*10)/4, res.Loss, 1e-7)
	assert.InDeltaSlice(t, []float64{0.25, 0.25, 0.25, 0.25, 0, 0}, grads(res), 1e-7)
	require.NotNil(t, res.GradEntropy)
	ge := res.GradEntropy.Float32s()
	assert.InDeltaSlice(t, []float32{-0.025, -0.025, -0.025, -0.025, 0, 0}, ge, 1e-7)

	// an entropy used only through StopGradient has a zero gradient
	res, err = computeExpr(t, b, func(v *loss.Vars) loss.Expr {
		return v.LogProbs().Mul(v.Entropy().StopGradient())
	})
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 0, 0, 0, 0, 0}, res.GradEntropy.Float32s())
	assert.InDeltaSlice(t, []float64{0.25, 0.5, 0.75, 1, 0, 0}, grads(res), 1e-7)

	// TIS: the weights are min(exp(old − rollout), cap); TISWeights says
	// whether they exist.
	reg := loss.NewRegistry()
	var sawTIS []bool
	require.NoError(t, reg.Register("tis", loss.Variant{Loss: func(v *loss.Vars) loss.Expr {
		w, ok := v.TISWeights()
		sawTIS = append(sawTIS, ok)
		if !ok {
			return v.LogProbs().SeqSum().Mean()
		}
		return v.LogProbs().Mul(w).SeqSum().Mean()
	}}))
	c := loss.NewComputer(reg)
	plain, err := c.Compute(loss.Config{Mode: "tis"}, b)
	require.NoError(t, err)
	weighted, err := c.Compute(loss.Config{Mode: "tis", TISCap: 2}, b)
	require.NoError(t, err)
	assert.Equal(t, []bool{false, true}, sawTIS)
	// rows: (−1 −0.5 −1) and (−0.5); mean over 2 rows
	assert.InDelta(t, (-2.5-0.5)/2, plain.Loss, 1e-7)
	w := func(old, roll float64) float64 { return math.Min(math.Exp(old-roll), 2) }
	want := (-1*w(-1, -1.5) - 0.5*w(-1, -1) - 1*w(-1+math.Ln2, -0.5) - 0.5*w(-2, -2)) / 2
	assert.InDelta(t, want, weighted.Loss, 1e-6)
}

// A failed operation records its error; later operations do nothing, and
// Compute returns the first error once, wrapped, with its sentinel.
func TestExprErrors(t *testing.T) {
	var fromOther loss.Expr // an expression of an earlier graph
	for _, tc := range []struct {
		name     string
		expr     func(v *loss.Vars) loss.Expr
		sentinel error
		msg      string
	}{
		{"operand type", func(v *loss.Vars) loss.Expr { return v.LogProbs().Add("1").Sub(2).Exp() },
			loss.ErrConfig, "loss: Expr.Add: operand of type string, want an Expr or a number: invalid loss config"},
		{"first error kept", func(v *loss.Vars) loss.Expr {
			x := v.LogProbs().SeqSum().Sum().Clip(2, 1) // fails first
			y := v.LogProbs().Mul([]float64{1})         // would fail too
			return x.Add(y)
		}, loss.ErrConfig, "loss: Expr.Clip: loss: Clamp bounds [2, 1] are not an interval: invalid loss config"},
		{"zero Expr operand", func(v *loss.Vars) loss.Expr { return v.LogProbs().Mul(loss.Expr{}) },
			loss.ErrConfig, "loss: Expr.Mul: operand is the zero Expr: invalid loss config"},
		{"zero Expr returned", func(v *loss.Vars) loss.Expr { return loss.Expr{}.Neg() },
			loss.ErrConfig, "Loss returned the zero Expr or one of another Vars: invalid loss config"},
		{"another Vars", func(v *loss.Vars) loss.Expr { return v.LogProbs().Mul(fromOther) },
			loss.ErrConfig, "loss: Expr.Mul: operand comes from another Vars: invalid loss config"},
		{"Where from another Vars", func(v *loss.Vars) loss.Expr { return v.Where(fromOther, v.LogProbs(), 0) },
			loss.ErrConfig, "loss: Vars.Where: operand comes from another Vars: invalid loss config"},
		{"Sum of tokens", func(v *loss.Vars) loss.Expr { return v.LogProbs().Sum() },
			loss.ErrShape, "loss: Expr.Sum of a [B,T] expression would read padding; use SeqSum: shape mismatch"},
		{"Mean of tokens", func(v *loss.Vars) loss.Expr { return v.LogProbs().Mean() },
			loss.ErrShape, "loss: Expr.Mean of a [B,T] expression would read padding; use SeqMean: shape mismatch"},
		{"SeqSum of sequences", func(v *loss.Vars) loss.Expr { return v.LogProbs().SeqSum().SeqSum().Mean() },
			loss.ErrShape, "loss: Expr.SeqSum of a (2) expression, want [B,T]: shape mismatch"},
		{"per-sequence result", func(v *loss.Vars) loss.Expr { return v.LogProbs().SeqMean() },
			loss.ErrShape, "Loss returned a (2) expression, want [2 3] or a scalar (reduce a per-sequence value with Sum or Mean): shape mismatch"},
		{"NaN bound", func(v *loss.Vars) loss.Expr { return v.LogProbs().Min(math.NaN()) },
			loss.ErrConfig, "loss: Expr.Min: NaN bound: invalid loss config"},
		{"no RefLogProbs", func(v *loss.Vars) loss.Expr { return v.LogProbs().Sub(v.RefLogProbs()) },
			loss.ErrMissing, "loss: Vars.RefLogProbs: Batch.RefLogProbs is nil: missing input"},
		{"no RolloutLogProbs", func(v *loss.Vars) loss.Expr { return v.LogProbs().Sub(v.RolloutLogProbs()) },
			loss.ErrMissing, "loss: Vars.RolloutLogProbs: Batch.RolloutLogProbs is nil: missing input"},
		{"no Entropy", func(v *loss.Vars) loss.Expr { return v.LogProbs().Sub(v.Entropy()) },
			loss.ErrMissing, "loss: Vars.Entropy: Batch.Entropy is nil: missing input"},
		{"Wrap nil", func(v *loss.Vars) loss.Expr { return v.LogProbs().Add(v.Wrap(nil, nil)) },
			loss.ErrConfig, "loss: Vars.Wrap: nil node: invalid loss config"},
		{"Wrap gorgonia error", func(v *loss.Vars) loss.Expr {
			return v.Wrap(gorgonia.HadamardProd(v.Inputs().LogProbs, v.Inputs().Count))
		}, loss.ErrConfig, "loss: Vars.Wrap: "},
		// gorgonia panics on the nil node of a failed Expr; the recorded
		// error is reported, not the panic
		{"gorgonia on a failed Expr", func(v *loss.Vars) loss.Expr {
			return v.Wrap(gorgonia.Softplus(v.LogProbs().Add("x").Node()))
		}, loss.ErrConfig, "loss: Expr.Add: operand of type string, want an Expr or a number: invalid loss config"},
		{"Wrap [T]", func(v *loss.Vars) loss.Expr {
			s, err := gorgonia.Sum(v.Inputs().LogProbs, 0)
			require.NoError(t, err)
			return v.LogProbs().Add(v.Wrap(s, nil))
		}, loss.ErrShape, "has shape (3), want a scalar, [2] or [2 3]: shape mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen error
			res, err := computeExpr(t, handBatch(), func(v *loss.Vars) loss.Expr {
				x := tc.expr(v)
				seen = x.Err()
				if x.Node() != nil {
					seen = v.Err()
				}
				return x
			})
			require.Error(t, err)
			assert.Zero(t, res.Loss)
			assert.ErrorIs(t, err, tc.sentinel)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Contains(t, err.Error(), `loss: mode "expr": `)
			if seen != nil {
				assert.ErrorContains(t, seen, tc.msg, "Err reports the recorded error")
			}
		})
		if tc.name == "operand type" {
			// keep an expression of this graph for the "another Vars" cases
			_, _ = computeExpr(t, handBatch(), func(v *loss.Vars) loss.Expr {
				fromOther = v.LogProbs()
				return v.LogProbs()
			})
		}
	}
}

// An expression that does not depend on LogProbs has no gradient to give.
func TestExprWithoutLogProbs(t *testing.T) {
	_, err := computeExpr(t, handBatch(), func(v *loss.Vars) loss.Expr { return v.Advantages().Neg() })
	assert.ErrorIs(t, err, loss.ErrConfig)
	assert.ErrorContains(t, err, "does it depend on LogProbs?")
}

// The tanh-gated objective of the issue that asked for expressions,
//
//	L_t = −w(A_t)·A_t·(1 + tanh(r_t − 1)),  w(A) = 1 if A ≥ 0 else β,
//
// with r = exp(logπ − logπ_old). By hand: dr/dlogπ = r and
// d tanh(u)/du = 1 − tanh²(u), so
//
//	dL_t/dlogπ_t = −w·A·(1 − tanh²(r − 1))·r,
//
// times 1/N under token-mean. On the hand batch (N = 4 real tokens, β = 0.5):
//
//	(0,1): A = 2, δ = 0.5, r = e^0.5 = 1.6487213, tanh(0.6487213) = 0.5708085,
//	       dL/dlogπ = −2·(1 − 0.3258223)·1.6487213/4 = −0.5557655
//	(0,2): A = −1, w = 0.5, r = 0.5, tanh(−0.5) = −0.4621172,
//	       dL/dlogπ = 0.5·(1 − 0.2135523)·0.5/4 = 0.0491530
//
// and at ratio 1 ((0,0): r = 1, A = 1) it is −A/N = −0.25, REINFORCE's, but
// −β·A/N for A < 0, which is why the variant does not declare
// ReducesToREINFORCE.
func TestTanhGateByHand(t *testing.T) {
	const beta = 0.5
	reg := loss.NewRegistry()
	require.NoError(t, reg.Register("tanh_gate", loss.Variant{Loss: func(v *loss.Vars) loss.Expr {
		a := v.Advantages()
		w := v.Where(a.GE(0), 1, beta)
		return w.Mul(a).Mul(v.Ratio().Sub(1).Tanh().Add(1)).Neg()
	}}))
	c := loss.NewComputer(reg)
	cfg := loss.Config{Mode: "tanh_gate"}
	res, err := c.Compute(cfg, handBatch())
	require.NoError(t, err)
	g := grads(res)
	assert.InDelta(t, -0.25, g[0], 1e-7)
	assert.InDelta(t, -0.5557655, g[1], 1e-6)
	assert.InDelta(t, 0.0491530, g[2], 1e-6)
	// (1,0): A = −1, δ = 1.5, r = 4.4816891: 0.5·(1 − tanh²(3.4816891))·4.4816891/4
	th := math.Tanh(math.Exp(1.5) - 1)
	assert.InDelta(t, 0.5*(1-th*th)*math.Exp(1.5)/4, g[3], 1e-7)
	assert.Equal(t, []float64{0, 0}, g[4:], "padding")
	// the loss: −(1/4)·Σ w·A·(1 + tanh(r − 1))
	want := -(1*(1+math.Tanh(0)) + 2*(1+math.Tanh(math.Exp(0.5)-1)) +
		beta*-1*(1+math.Tanh(-0.5)) + beta*-1*(1+th)) / 4
	assert.InDelta(t, want, res.Loss, 1e-7)

	// and against finite differences, with the rest of the suite
	assert.NoError(t, losstest.CheckGradient(c, cfg, losstest.RandomBatch(rand.New(rand.NewPCG(3, 4)), 3, 5)))
	assert.NoError(t, losstest.Check(c, cfg))
}
