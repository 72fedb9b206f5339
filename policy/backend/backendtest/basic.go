package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// Memory checks Alloc (zeroed), Upload/Download at offsets, Copy and Fill.
func Memory(t *testing.T, b backend.Backend, tol Tolerance) {
	e := newEnv(t, b, tol, 1)
	buf := e.zeros(10)
	require.Equal(t, 10, buf.Len())
	require.Equal(t, make([]float64, 10), e.down(buf), "Alloc must zero")

	require.NoError(t, b.Upload(buf, 3, []float32{1, 2, 3}))
	require.Equal(t, []float64{0, 0, 0, 1, 2, 3, 0, 0, 0, 0}, e.down(buf))
	part := make([]float32, 2)
	require.NoError(t, b.Download(part, buf, 4))
	require.Equal(t, []float32{2, 3}, part)

	other := e.up([]float64{9, 8, 7, 6})
	require.NoError(t, b.Copy(buf, 7, other, 1, 3))
	require.Equal(t, []float64{0, 0, 0, 1, 2, 3, 0, 8, 7, 6}, e.down(buf))
	// Non-overlapping ranges of one buffer: the KV-cache append pattern.
	require.NoError(t, b.Copy(buf, 0, buf, 3, 3))
	require.Equal(t, []float64{1, 2, 3, 1, 2, 3, 0, 8, 7, 6}, e.down(buf))

	require.NoError(t, b.Fill(buf, -0.5))
	for _, v := range e.down(buf) {
		require.Equal(t, -0.5, v)
	}
	require.NoError(t, b.Free(buf))
	require.NoError(t, b.Free(other))
}

func refGemm(g backend.Gemm, a, bm, c []float64) []float64 {
	out := append([]float64(nil), c...)
	for bt := range max(g.Batch, 1) {
		oa, ob, oc := bt*g.StrideA, bt*g.StrideB, bt*g.StrideC
		for i := range g.M {
			for j := range g.N {
				var s float64
				for p := range g.K {
					var av, bv float64
					if g.TransA {
						av = a[oa+p*g.M+i]
					} else {
						av = a[oa+i*g.K+p]
					}
					if g.TransB {
						bv = bm[ob+j*g.K+p]
					} else {
						bv = bm[ob+p*g.N+j]
					}
					s += av * bv
				}
				prev := 0.0
				if g.Beta != 0 {
					prev = float64(g.Beta) * c[oc+i*g.N+j]
				}
				out[oc+i*g.N+j] = float64(g.Alpha)*s + prev
			}
		}
	}
	return out
}

// Gemm checks products of all transpose combinations, alpha and beta, and
// strided batches, against the triple loop.
func Gemm(t *testing.T, b backend.Backend, tol Tolerance) {
	cases := []backend.Gemm{
		{M: 1, N: 1, K: 1, Alpha: 1},
		{M: 7, N: 5, K: 3, Alpha: 1},
		{M: 7, N: 5, K: 3, Alpha: 0.5, Beta: 1, TransA: true},
		{M: 13, N: 40, K: 70, Alpha: -1, Beta: 0.25, TransB: true},
		{M: 33, N: 17, K: 64, Alpha: 2, TransA: true, TransB: true},
		{M: 70, N: 70, K: 70, Alpha: 1, Beta: 1},
		{M: 3, N: 300, K: 50, Alpha: 1, TransB: true}, // decode-like: few rows
		{M: 4, N: 6, K: 5, Alpha: 1, Batch: 3, StrideA: 20, StrideB: 30, StrideC: 24},
		{M: 4, N: 6, K: 5, Alpha: 1, Beta: 0.5, Batch: 2, StrideA: 0, StrideB: 35, StrideC: 30, TransB: true},
	}
	for i, g := range cases {
		t.Run(fmt.Sprintf("%d_%dx%dx%d", i, g.M, g.N, g.K), func(t *testing.T) {
			e := newEnv(t, b, tol, uint64(10+i))
			batch := max(g.Batch, 1)
			na := (batch-1)*g.StrideA + g.M*g.K
			nb := (batch-1)*g.StrideB + g.K*g.N
			nc := (batch-1)*g.StrideC + g.M*g.N
			a, bm, c := e.randn(na, 1), e.randn(nb, 1), e.randn(nc, 1)
			cb := e.up(c)
			require.NoError(t, b.Gemm(g, e.up(a), e.up(bm), cb))
			e.close("C", e.down(cb), refGemm(g, a, bm, c))
		})
	}
}

func refLinear(s backend.Linear, x, w, bias []float64) []float64 {
	y := make([]float64, s.Rows*s.Out)
	for r := range s.Rows {
		for o := range s.Out {
			var acc float64
			for i := range s.In {
				acc += x[r*s.In+i] * w[o*s.In+i]
			}
			if bias != nil {
				acc += bias[o]
			}
			y[r*s.Out+o] = acc
		}
	}
	return y
}

// Linear checks y = x·Wᵀ + b with and without bias, and its backward by
// finite differences.
func Linear(t *testing.T, b backend.Backend, tol Tolerance) {
	for i, s := range []backend.Linear{{Rows: 5, In: 7, Out: 3}, {Rows: 9, In: 33, Out: 20}, {Rows: 1, In: 16, Out: 40}} {
		for _, withBias := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d_bias=%v", i, withBias), func(t *testing.T) {
				e := newEnv(t, b, tol, uint64(20+i))
				x, w := e.randn(s.Rows*s.In, 1), e.randn(s.Out*s.In, 0.5)
				var bias []float64
				var bb backend.Buffer
				if withBias {
					bias = e.randn(s.Out, 1)
					bb = e.up(bias)
				}
				xb, wb, yb := e.up(x), e.up(w), e.zeros(s.Rows*s.Out)
				require.NoError(t, b.LinearForward(s, yb, xb, wb, bb))
				e.close("y", e.down(yb), refLinear(s, x, w, bias))

				wt := e.randn(s.Rows*s.Out, 1)
				px, pw := e.randn(len(x), 1), e.randn(len(w), 1)
				dx, dw := e.up(px), e.up(pw)
				var db backend.Buffer
				var pb []float64
				if withBias {
					pb = e.randn(s.Out, 1)
					db = e.up(pb)
				}
				require.NoError(t, b.LinearBackward(s, dx, dw, db, e.up(wt), xb, wb))
				loss := func() float64 { return dotw(wt, refLinear(s, x, w, bias)) }
				e.close("dx", e.grad(dx, px), fdGrad(x, nil, loss))
				e.close("dW", e.grad(dw, pw), fdGrad(w, nil, loss))
				if withBias {
					e.close("db", e.grad(db, pb), fdGrad(bias, nil, loss))
				}
				// nil gradients are skipped, not errors.
				require.NoError(t, b.LinearBackward(s, nil, nil, nil, e.up(wt), xb, wb))
			})
		}
	}
}

// Embedding checks the gather and its scatter-add backward, with repeated
// ids (whose gradients must add up).
func Embedding(t *testing.T, b backend.Backend, tol Tolerance) {
	e := newEnv(t, b, tol, 30)
	const v, dim = 11, 6
	ids := []int32{3, 0, 10, 3, 7, 3}
	table := e.randn(v*dim, 1)
	tb, out := e.up(table), e.zeros(len(ids)*dim)
	require.NoError(t, b.EmbeddingForward(out, tb, ids, dim))
	want := make([]float64, 0, len(ids)*dim)
	for _, id := range ids {
		want = append(want, table[int(id)*dim:(int(id)+1)*dim]...)
	}
	e.close("out", e.down(out), want)

	wt := e.randn(len(ids)*dim, 1)
	prior := e.randn(v*dim, 1)
	dt := e.up(prior)
	require.NoError(t, b.EmbeddingBackward(dt, e.up(wt), ids, dim))
	loss := func() float64 {
		var s float64
		for i, id := range ids {
			for j := range dim {
				s += wt[i*dim+j] * table[int(id)*dim+j]
			}
		}
		return s
	}
	e.close("dtable", e.grad(dt, prior), fdGrad(table, nil, loss))
}

func refRMSNorm(rows, dim int, eps float64, x, w []float64) (out, rstd []float64) {
	out, rstd = make([]float64, rows*dim), make([]float64, rows)
	for r := range rows {
		var ss float64
		for i := range dim {
			ss += x[r*dim+i] * x[r*dim+i]
		}
		rstd[r] = 1 / math.Sqrt(ss/float64(dim)+eps)
		for i := range dim {
			out[r*dim+i] = w[i] * x[r*dim+i] * rstd[r]
		}
	}
	return out, rstd
}

// RMSNorm checks the norm (as a whole-row norm and as Qwen3's per-head
// q_norm with rows = T·heads) and its backward.
func RMSNorm(t *testing.T, b backend.Backend, tol Tolerance) {
	for i, sh := range [][2]int{{4, 16}, {6 * 3, 8}, {2, 130}} {
		t.Run(fmt.Sprintf("%dx%d", sh[0], sh[1]), func(t *testing.T) {
			e := newEnv(t, b, tol, uint64(40+i))
			rows, dim := sh[0], sh[1]
			const eps = 1e-6
			x, w := e.randn(rows*dim, 2), e.randn(dim, 1)
			xb, wb, ob, rb := e.up(x), e.up(w), e.zeros(rows*dim), e.zeros(rows)
			require.NoError(t, b.RMSNormForward(rows, dim, eps, ob, rb, xb, wb))
			wantOut, wantR := refRMSNorm(rows, dim, float64(float32(eps)), x, w)
			e.close("out", e.down(ob), wantOut)
			e.close("rstd", e.down(rb), wantR)
			// rstd is optional in forward (inference).
			require.NoError(t, b.RMSNormForward(rows, dim, eps, ob, nil, xb, wb))

			wt := e.randn(rows*dim, 1)
			px, pw := e.randn(rows*dim, 1), e.randn(dim, 1)
			dx, dw := e.up(px), e.up(pw)
			require.NoError(t, b.RMSNormBackward(rows, dim, dx, dw, e.up(wt), xb, wb, rb))
			loss := func() float64 {
				o, _ := refRMSNorm(rows, dim, float64(float32(eps)), x, w)
				return dotw(wt, o)
			}
			e.close("dx", e.grad(dx, px), fdGrad(x, nil, loss))
			e.close("dw", e.grad(dw, pw), fdGrad(w, nil, loss))
		})
	}
}

func refRoPE(heads, hd int, pos []int32, freqs []float32, x []float64, sign float64) []float64 {
	out := make([]float64, len(x))
	half := hd / 2
	for t, p := range pos {
		for h := range heads {
			base := (t*heads + h) * hd
			for i := range half {
				ang := sign * float64(p) * float64(freqs[i])
				c, s := math.Cos(ang), math.Sin(ang)
				a, bb := x[base+i], x[base+i+half]
				out[base+i] = a*c - bb*s
				out[base+i+half] = bb*c + a*s
			}
		}
	}
	return out
}

// RoPE checks the rotate_half rotation at arbitrary per-token positions
// (packed sequences restart at 0; a decode step continues at its cache
// length), in place and out of place, and its backward.
func RoPE(t *testing.T, b backend.Backend, tol Tolerance) {
	e := newEnv(t, b, tol, 50)
	const heads, hd = 3, 8
	pos := []int32{0, 1, 2, 0, 1, 37, 5}
	freqs := backend.RoPEFreqs(10000, hd)
	// inv_freq[i] = 10000^(−2i/8): 1, 0.1, 0.01, 0.001.
	e.close("freqs", f64(freqs), []float64{1, 0.1, 0.01, 0.001})
	x := e.randn(len(pos)*heads*hd, 1)
	xb, ob := e.up(x), e.zeros(len(x))
	r := e.rows(pos, nil)
	require.NoError(t, b.RoPEForward(heads, hd, r, freqs, ob, xb))
	want := refRoPE(heads, hd, pos, freqs, x, 1)
	e.close("out", e.down(ob), want)
	require.NoError(t, b.RoPEForward(heads, hd, r, freqs, xb, xb))
	e.close("in place", e.down(xb), want)
	// Another frequency table on the same rows (a backend caching the
	// angles per table must keep them apart).
	freqs2 := backend.RoPEFreqs(500, hd)
	ob2 := e.zeros(len(x))
	require.NoError(t, b.RoPEForward(heads, hd, r, freqs2, ob2, e.up(x)))
	e.close("other freqs", e.down(ob2), refRoPE(heads, hd, pos, freqs2, x, 1))

	wt := e.randn(len(x), 1)
	prior := e.randn(len(x), 1)
	dx := e.up(prior)
	require.NoError(t, b.RoPEBackward(heads, hd, r, freqs, dx, e.up(wt)))
	loss := func() float64 { return dotw(wt, refRoPE(heads, hd, pos, freqs, x, 1)) }
	e.close("dx", e.grad(dx, prior), fdGrad(x, nil, loss))
}

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// SwiGLU checks silu(gate)·up over a range of gates (including large
// magnitudes, where σ saturates) and its backward.
func SwiGLU(t *testing.T, b backend.Backend, tol Tolerance) {
	e := newEnv(t, b, tol, 60)
	g, u := e.randn(40, 3), e.randn(40, 1)
	g[0], g[1] = 30, -30
	ref := func() []float64 {
		out := make([]float64, len(g))
		for i := range g {
			out[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		return out
	}
	gb, ub, ob := e.up(g), e.up(u), e.zeros(len(g))
	require.NoError(t, b.SwiGLUForward(ob, gb, ub))
	e.close("out", e.down(ob), ref())
	wt := e.randn(len(g), 1)
	pg, pu := e.randn(len(g), 1), e.randn(len(g), 1)
	dg, du := e.up(pg), e.up(pu)
	require.NoError(t, b.SwiGLUBackward(dg, du, e.up(wt), gb, ub))
	loss := func() float64 { return dotw(wt, ref()) }
	e.close("dgate", e.grad(dg, pg), fdGrad(g, nil, loss))
	e.close("dup", e.grad(du, pu), fdGrad(u, nil, loss))
}

// AddAxpy checks the residual add and the accumulation that is its
// backward: for out = a + b, ∂L/∂a = ∂L/∂b = dout.
func AddAxpy(t *testing.T, b backend.Backend, tol Tolerance) {
	e := newEnv(t, b, tol, 70)
	x, y := e.randn(33, 1), e.randn(33, 1)
	xb, yb, ob := e.up(x), e.up(y), e.zeros(33)
	require.NoError(t, b.Add(ob, xb, yb))
	want := make([]float64, 33)
	for i := range want {
		want[i] = x[i] + y[i]
	}
	e.close("add", e.down(ob), want)
	require.NoError(t, b.Add(xb, xb, yb)) // out may alias an input
	e.close("add in place", e.down(xb), want)
	require.NoError(t, b.Axpy(-2, yb, ob))
	for i := range want {
		want[i] -= 2 * y[i]
	}
	e.close("axpy", e.down(ob), want)
}
