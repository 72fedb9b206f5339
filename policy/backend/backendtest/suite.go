package backendtest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// Tolerance bounds the difference between a backend's result and the
// float64 reference: element i passes when
// |got_i − want_i| ≤ Abs + Rel·max_j |want_j|, the scale of the whole
// result (so that near-zero elements of a large result are not held to a
// relative bound that float32 arithmetic cannot meet).
type Tolerance struct{ Abs, Rel float64 }

// DefaultTolerance suits float32 kernels with float64 reductions on the
// suite's small shapes.
func DefaultTolerance() Tolerance { return Tolerance{Abs: 1e-5, Rel: 2e-4} }

// Run runs every check of the suite as a subtest.
func Run(t *testing.T, b backend.Backend, tol Tolerance) {
	checks := []struct {
		name string
		f    func(*testing.T, backend.Backend, Tolerance)
	}{
		{"Memory", Memory},
		{"Gemm", Gemm},
		{"Linear", Linear},
		{"Embedding", Embedding},
		{"RMSNorm", RMSNorm},
		{"RoPE", RoPE},
		{"RoPEGolden", RoPEGolden},
		{"Attention", Attention},
		{"AttentionDecode", AttentionDecode},
		{"SwiGLU", SwiGLU},
		{"AddAxpy", AddAxpy},
		{"LogProbEntropy", LogProbEntropy},
		{"LogProbEntropyChunked", LogProbEntropyChunked},
		{"Logits", Logits},
		{"Optimizer", Optimizer},
		{"Initializer", Initializer},
		{"Rows", Rows},
		{"ZeroSizes", ZeroSizes},
		{"Errors", Errors},
	}
	if _, ok := b.(backend.Decoder); ok {
		checks = append(checks, struct {
			name string
			f    func(*testing.T, backend.Backend, Tolerance)
		}{"Decoder", Decoder})
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.f(t, b, tol) })
	}
}

// env bundles what a check needs: the backend under test, the tolerance
// and a seeded generator (every check is deterministic).
type env struct {
	t   *testing.T
	b   backend.Backend
	tol Tolerance
	rng *rand.Rand
}

func newEnv(t *testing.T, b backend.Backend, tol Tolerance, seed uint64) *env {
	return &env{t: t, b: b, tol: tol, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
}

// in returns e reporting to t (a subtest of e's test), with the same
// backend, tolerance and generator.
func (e *env) in(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// randn returns n standard normal values rounded to float32, so that the
// backend and the float64 reference see identical inputs.
func (e *env) randn(n int, scale float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(float32(e.rng.NormFloat64() * scale))
	}
	return x
}

func (e *env) up(x []float64) backend.Buffer {
	e.t.Helper()
	buf, err := e.b.Alloc(len(x))
	require.NoError(e.t, err)
	f := make([]float32, len(x))
	for i, v := range x {
		f[i] = float32(v)
	}
	require.NoError(e.t, e.b.Upload(buf, 0, f))
	return buf
}

// rows makes the backend's Rows of pos and spans, freed when the test ends.
func (e *env) rows(pos []int32, spans []backend.Span) backend.Rows {
	e.t.Helper()
	r, err := e.b.NewRows(pos, spans)
	require.NoError(e.t, err)
	require.Equal(e.t, len(pos), r.Len())
	e.t.Cleanup(func() { require.NoError(e.t, e.b.FreeRows(r)) })
	return r
}

// spanRows makes Rows of n rows at positions 0…n−1 grouped into spans,
// for attention calls (whose results do not depend on the positions).
func (e *env) spanRows(n int, spans []backend.Span) backend.Rows {
	e.t.Helper()
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(i)
	}
	return e.rows(pos, spans)
}

func (e *env) zeros(n int) backend.Buffer {
	e.t.Helper()
	buf, err := e.b.Alloc(n)
	require.NoError(e.t, err)
	return buf
}

func (e *env) down(buf backend.Buffer) []float64 {
	e.t.Helper()
	f := make([]float32, buf.Len())
	require.NoError(e.t, e.b.Download(f, buf, 0))
	x := make([]float64, len(f))
	for i, v := range f {
		x[i] = float64(v)
	}
	return x
}

// grad returns the gradient a backward added to buf on top of prior.
func (e *env) grad(buf backend.Buffer, prior []float64) []float64 {
	e.t.Helper()
	g := e.down(buf)
	for i := range g {
		g[i] -= prior[i]
	}
	return g
}

func (e *env) close(name string, got, want []float64) {
	e.t.Helper()
	require.Len(e.t, got, len(want), name)
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	bound := e.tol.Abs + e.tol.Rel*scale
	for i := range want {
		require.False(e.t, math.IsNaN(got[i]), "%s[%d] is NaN", name, i)
		require.InDelta(e.t, want[i], got[i], bound, "%s[%d] (scale %.3g)", name, i, scale)
	}
}

// fdGrad returns central finite differences of loss with respect to the
// coordinates idx of x (all coordinates when idx is nil), perturbing x in
// place by ±h and restoring it. loss runs the float64 reference, so the
// differences are accurate to ~1e-9.
func fdGrad(x []float64, idx []int, loss func() float64) []float64 {
	const h = 1e-5
	g := make([]float64, len(x))
	if idx == nil {
		idx = make([]int, len(x))
		for i := range idx {
			idx[i] = i
		}
	}
	for _, i := range idx {
		old := x[i]
		x[i] = old + h
		lp := loss()
		x[i] = old - h
		lm := loss()
		x[i] = old
		g[i] = (lp - lm) / (2 * h)
	}
	return g
}

// dotw is the loss Σ w ⊙ out that turns an output into a scalar.
func dotw(w, out []float64) float64 {
	var s float64
	for i := range w {
		s += w[i] * out[i]
	}
	return s
}

// pick keeps only the coordinates idx of g (for partial FD checks).
func pick(g []float64, idx []int) []float64 {
	out := make([]float64, len(idx))
	for j, i := range idx {
		out[j] = g[i]
	}
	return out
}
