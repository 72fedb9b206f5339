package backendtest

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// Optimizer checks a backend's backend.Optimizer, when it has one (it is
// skipped otherwise): AdamW equals backend.AdamWUpdate on the host bit for
// bit over three steps with and without weight decay (AdamWUpdate itself
// is checked against torch.optim.AdamW in package policy), GradNorm equals
// a float64 sum of squares to 1e-12 relative and propagates NaN and Inf,
// Scale multiplies exactly, and bad arguments are errors.
func Optimizer(t *testing.T, b backend.Backend, _ Tolerance) {
	opt, ok := b.(backend.Optimizer)
	if !ok {
		t.Skipf("%s has no backend.Optimizer", b.Name())
	}
	e := newEnv(t, b, Tolerance{}, 17)
	// Lengths across the CPU backend's parallel split and a GPU block.
	for _, n := range []int{1, 1000, 70001} {
		for _, decay := range []float64{0, 0.01} {
			p, g := e.randn(n, 1), e.randn(n, 0.1)
			host := toF32(p)
			grad := toF32(g)
			hm, hv := make([]float32, n), make([]float32, n)
			bp, bg, bm, bv := e.up(p), e.up(g), e.zeros(n), e.zeros(n)
			for s := int64(1); s <= 3; s++ {
				step := backend.AdamWStep{LR: 1e-3 * float64(s), Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: decay, Step: s}
				k, err := step.Scalars()
				require.NoError(t, err)
				backend.AdamWUpdate(host, grad, hm, hv, k)
				require.NoError(t, opt.AdamW(step, bp, bg, bm, bv))
			}
			for name, pair := range map[string][2][]float32{"param": {host, downF32(e, bp)}, "m": {hm, downF32(e, bm)}, "v": {hv, downF32(e, bv)}} {
				for i := range pair[0] {
					if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
						t.Fatalf("AdamW n=%d decay=%v: %s[%d] = %v, AdamWUpdate gives %v", n, decay, name, i, pair[1][i], pair[0][i])
					}
				}
			}
		}
	}

	a, c := e.randn(70001, 2), e.randn(5, 1)
	var want float64
	for _, x := range append(append([]float64(nil), a...), c...) {
		want += x * x
	}
	ba, bc := e.up(a), e.up(c)
	got, err := opt.GradNorm(ba, bc)
	require.NoError(t, err)
	assert.InDelta(t, math.Sqrt(want), got, 1e-12*math.Sqrt(want), "GradNorm")
	empty, err := opt.GradNorm()
	require.NoError(t, err)
	assert.Zero(t, empty, "the norm of nothing")

	require.NoError(t, opt.Scale(0.25, bc))
	for i, x := range downF32(e, bc) {
		assert.Equal(t, float32(c[i])*0.25, x, "Scale[%d]", i)
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		nb := e.up([]float64{1, 2, float64(bad)})
		norm, err := opt.GradNorm(ba, nb)
		require.NoError(t, err)
		assert.True(t, math.IsNaN(norm) || math.IsInf(norm, 1), "a %v gradient gives norm %v", bad, norm)
		assert.ErrorIs(t, opt.Scale(bad, nb), backend.ErrArg)
	}

	one := e.zeros(3)
	good := backend.AdamWStep{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1}
	for _, s := range []backend.AdamWStep{
		{LR: -1, Beta1: 0.9, Beta2: 0.999, Step: 1},
		{LR: math.NaN(), Beta1: 0.9, Beta2: 0.999, Step: 1},
		{LR: 1e-3, Beta1: 1, Beta2: 0.999, Step: 1},
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Step: 0},
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: -1, Step: 1},
	} {
		assert.ErrorIs(t, opt.AdamW(s, one, one, e.zeros(3), e.zeros(3)), backend.ErrArg, "%+v", s)
	}
	assert.ErrorIs(t, opt.AdamW(good, one, e.zeros(4), e.zeros(3), e.zeros(3)), backend.ErrShape)
	assert.Error(t, opt.AdamW(good, one, nil, e.zeros(3), e.zeros(3)))
	_, err = opt.GradNorm(one, nil)
	assert.Error(t, err)
	assert.Error(t, opt.Scale(1, nil))
}

func toF32(x []float64) []float32 {
	f := make([]float32, len(x))
	for i, v := range x {
		f[i] = float32(v)
	}
	return f
}

func downF32(e *env, b backend.Buffer) []float32 {
	f := make([]float32, b.Len())
	require.NoError(e.t, e.b.Download(f, b, 0))
	return f
}
