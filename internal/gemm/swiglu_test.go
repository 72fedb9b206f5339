package gemm

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// swigluInputs are gate values across Exp32's whole range and its edges:
// ordinary values, the bounds where e^−g saturates to +Inf (g < −88.72283)
// or flushes to 0 (g > 87.33654), the lanes where 2^n needs the two-step
// scaling (e^x for x in (88.03, 88.72]), ±0, ±Inf, NaN and subnormals.
func swigluInputs(n int) []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	edges := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 88.72283, -88.72283, -88.72284, 87.33654, 87.33655,
		-88.1, -88.5, -88.7, -88.03, -87.9, 1e-40, -1e-40, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), 20, -20, 1e30, -1e30}
	x := make([]float32, n)
	for i := range x {
		switch {
		case i < len(edges):
			x[i] = edges[i]
		case i%3 == 0:
			x[i] = float32(r.NormFloat64() * 3)
		case i%3 == 1:
			x[i] = float32((r.Float64()*2 - 1) * 100)
		default:
			x[i] = -88 - float32(r.Float64())
		}
	}
	return x
}

func sameBits(t *testing.T, want, got []float32, what string) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		if math.Float32bits(w) != math.Float32bits(g) && !(w != w && g != g) {
			t.Fatalf("%s: element %d: want %v (%#x), got %v (%#x)", what, i, w, math.Float32bits(w), g, math.Float32bits(g))
		}
	}
}

// TestSwiGLUKernelsAgree: the engine's kernel (AVX2 where the CPU has it)
// gives the generic code's bits for every element, at every length and
// offset (so the split between the vector body and the scalar tail
// changes nothing), with either gradient absent.
func TestSwiGLUKernelsAgree(t *testing.T) {
	e := New()
	const n = 1000
	g := swigluInputs(n)
	r := rand.New(rand.NewPCG(3, 4))
	u, dout := make([]float32, n), make([]float32, n)
	for i := range u {
		u[i], dout[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	for _, c := range []struct{ lo, hi int }{{0, n}, {0, 8}, {0, 7}, {3, 20}, {5, 5}, {1, 999}} {
		want, got := make([]float32, c.hi-c.lo), make([]float32, c.hi-c.lo)
		swigluGeneric(want, g[c.lo:c.hi], u[c.lo:c.hi])
		e.SwiGLU(got, g[c.lo:c.hi], u[c.lo:c.hi])
		sameBits(t, want, got, "swiglu")

		for _, which := range []string{"both", "gate", "up"} {
			base := make([]float32, c.hi-c.lo)
			for i := range base {
				base[i] = float32(i%7) - 3
			}
			mk := func(on bool) []float32 {
				if !on {
					return nil
				}
				return append([]float32(nil), base...)
			}
			wg, wu := mk(which != "up"), mk(which != "gate")
			gg, gu := mk(which != "up"), mk(which != "gate")
			swigluGradGeneric(wg, wu, dout[c.lo:c.hi], g[c.lo:c.hi], u[c.lo:c.hi])
			e.SwiGLUGrad(gg, gu, dout[c.lo:c.hi], g[c.lo:c.hi], u[c.lo:c.hi])
			if wg != nil {
				sameBits(t, wg, gg, "dgate "+which)
			}
			if wu != nil {
				sameBits(t, wu, gu, "dup "+which)
			}
		}
	}
}

// TestSwiGLUValues: silu(g)·u and its derivatives against float64
// references, σ(g) = 1/(1 + e^−g): silu(1) = 1/(1 + e^−1) = 0.7310586,
// d/dg silu(g) at 1 = σ(1)·(1 + 1·(1 − σ(1))) = 0.7310586·1.2689414 =
// 0.9276705; large positive gates pass through (σ → 1), large negative
// ones give 0 (e^−g overflows to +Inf, σ = 0), and NaN propagates.
func TestSwiGLUValues(t *testing.T) {
	e := New()
	g := []float32{1, 1, 1, 1, 1, 1, 1, 1, 100, -100, float32(math.NaN()), 0}
	u := []float32{2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 1, 5}
	out := make([]float32, len(g))
	e.SwiGLU(out, g, u)
	for i := range 8 {
		assert.InDelta(t, 2*0.7310586, out[i], 1e-6)
	}
	assert.Equal(t, float32(300), out[8])
	assert.Equal(t, float32(0), out[9])
	assert.True(t, out[10] != out[10])
	assert.Equal(t, float32(0), out[11])

	dg, du := make([]float32, len(g)), make([]float32, len(g))
	dout := make([]float32, len(g))
	for i := range dout {
		dout[i] = 1
	}
	e.SwiGLUGrad(dg, du, dout, g, u)
	for i := range 8 {
		assert.InDelta(t, 2*0.9276705, dg[i], 1e-6) // dout·u·silu'(1)
		assert.InDelta(t, 0.7310586, du[i], 1e-6)   // dout·silu(1)
	}
	assert.Equal(t, float32(3), dg[8]) // silu'(100) = 1
	assert.Equal(t, float32(100), du[8])
	assert.InDelta(t, 5*0.5, dg[11], 0) // silu'(0) = σ(0) = 1/2
}

func BenchmarkSwiGLU(b *testing.B) {
	const n = 1 << 16
	g, u, out := swigluInputs(n), make([]float32, n), make([]float32, n)
	for _, k := range []struct {
		name string
		e    *Engine
	}{{"kernel", New()}, {"generic", New(WithGeneric())}} {
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(3 * 4 * n)
			for range b.N {
				k.e.SwiGLU(out, g, u)
			}
		})
		b.Run(k.name+"-grad", func(b *testing.B) {
			dg, du := make([]float32, n), make([]float32, n)
			b.SetBytes(7 * 4 * n)
			for range b.N {
				k.e.SwiGLUGrad(dg, du, out, g, u)
			}
		})
	}
}
