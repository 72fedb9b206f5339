package cpu

import (
	"fmt"
	"math"

	"github.com/agentrl/agentrl/policy/backend"
)

// Gemm runs the (batched) product g through internal/gemm.
func (be *Backend) Gemm(g backend.Gemm, a, b, c backend.Buffer) error {
	v, err := be.views("gemm", a, b, c)
	if err != nil {
		return err
	}
	if err := backend.CheckGemm(g, a, b, c); err != nil {
		return err
	}
	lda, ldb := g.K, g.N
	if g.TransA {
		lda = g.M
	}
	if g.TransB {
		ldb = g.K
	}
	for i := range max(g.Batch, 1) {
		err := be.par.Sgemm(g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha,
			v[0][i*g.StrideA:], max(lda, 1), v[1][i*g.StrideB:], max(ldb, 1), g.Beta, v[2][i*g.StrideC:], max(g.N, 1))
		if err != nil {
			return fmt.Errorf("gemm batch %d: %w", i, err)
		}
	}
	return nil
}

// LinearForward computes y = x·Wᵀ + bias.
func (be *Backend) LinearForward(s backend.Linear, y, x, w, bias backend.Buffer) error {
	v, err := be.views("linear", y, x, w, bias)
	if err != nil {
		return err
	}
	if err := backend.CheckLinear(s, y, x, w, bias); err != nil {
		return err
	}
	yd, xd, wd, bd := v[0], v[1], v[2], v[3]
	if err := be.par.Sgemm(false, true, s.Rows, s.Out, s.In, 1, xd, max(s.In, 1), wd, max(s.In, 1), 0, yd, max(s.Out, 1)); err != nil {
		return fmt.Errorf("linear forward: %w", err)
	}
	if bd != nil {
		be.parallelFor(s.Rows, 64, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				row := yd[r*s.Out : (r+1)*s.Out]
				for j, b := range bd {
					row[j] += b
				}
			}
		})
	}
	return nil
}

// LinearBackward accumulates dx += dy·W, dW += dyᵀ·x and db += Σ_rows dy.
func (be *Backend) LinearBackward(s backend.Linear, dx, dw, db, dy, x, w backend.Buffer) error {
	v, err := be.views("linear backward", dx, dw, db, dy, x, w)
	if err != nil {
		return err
	}
	if err := backend.CheckLinear(s, dy, x, w, nil); err != nil {
		return err
	}
	if err := backend.CheckLinearGrads(s, dx, dw, db); err != nil {
		return err
	}
	dxd, dwd, dbd, dyd, xd, wd := v[0], v[1], v[2], v[3], v[4], v[5]
	in, out := max(s.In, 1), max(s.Out, 1)
	if dxd != nil {
		if err := be.par.Sgemm(false, false, s.Rows, s.In, s.Out, 1, dyd, out, wd, in, 1, dxd, in); err != nil {
			return fmt.Errorf("linear backward dx: %w", err)
		}
	}
	if dwd != nil {
		if err := be.par.Sgemm(true, false, s.Out, s.In, s.Rows, 1, dyd, out, xd, in, 1, dwd, in); err != nil {
			return fmt.Errorf("linear backward dW: %w", err)
		}
	}
	if dbd != nil {
		// Column sums in float64, split over columns.
		be.parallelFor(s.Out, 64, func(lo, hi int) {
			acc := make([]float64, hi-lo)
			for r := range s.Rows {
				row := dyd[r*s.Out+lo : r*s.Out+hi]
				for j, g := range row {
					acc[j] += float64(g)
				}
			}
			for j, a := range acc {
				dbd[lo+j] += float32(a)
			}
		})
	}
	return nil
}

// EmbeddingForward gathers rows of the table.
func (be *Backend) EmbeddingForward(out, table backend.Buffer, ids []int32, dim int) error {
	v, err := be.views("embedding", out, table)
	if err != nil {
		return err
	}
	if err := backend.CheckEmbedding(out, table, ids, dim); err != nil {
		return err
	}
	o, t := v[0], v[1]
	for i, id := range ids {
		copy(o[i*dim:(i+1)*dim], t[int(id)*dim:(int(id)+1)*dim])
	}
	return nil
}

// EmbeddingBackward scatter-adds output gradients into the table gradient.
// It runs serially: repeated ids would race under a row split, and the
// cost is one pass over dout.
func (be *Backend) EmbeddingBackward(dtable, dout backend.Buffer, ids []int32, dim int) error {
	v, err := be.views("embedding backward", dtable, dout)
	if err != nil {
		return err
	}
	if err := backend.CheckEmbedding(dout, dtable, ids, dim); err != nil {
		return err
	}
	dt, do := v[0], v[1]
	for i, id := range ids {
		dst := dt[int(id)*dim : (int(id)+1)*dim]
		for j, g := range do[i*dim : (i+1)*dim] {
			dst[j] += g
		}
	}
	return nil
}

// RMSNormForward normalizes each row by its root mean square.
func (be *Backend) RMSNormForward(rows, dim int, eps float32, out, rstd, x, w backend.Buffer) error {
	v, err := be.views("rmsnorm", out, rstd, x, w)
	if err != nil {
		return err
	}
	if err := backend.CheckRMSNorm(rows, dim, eps, true, out, rstd, x, w); err != nil {
		return err
	}
	od, rd, xd, wd := v[0], v[1], v[2], v[3]
	be.parallelFor(rows, max(1, 4096/dim), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr := xd[r*dim : (r+1)*dim]
			var ss float64
			for _, a := range xr {
				ss += float64(a) * float64(a)
			}
			rs := float32(1 / math.Sqrt(ss/float64(dim)+float64(eps)))
			if rd != nil {
				rd[r] = rs
			}
			or := od[r*dim : (r+1)*dim]
			for i, a := range xr {
				or[i] = wd[i] * (a * rs)
			}
		}
	})
	return nil
}

// normChunk is the values per chunk of rows in RMSNormBackward's sum
// of dw.
const normChunk = 1 << 14

// RMSNormBackward accumulates the gradients of RMSNorm:
// with y_i = w_i·x_i·r and r = (Σx²/D + eps)^(−1/2), ∂r/∂x_k = −r³x_k/D, so
// dx_k = r·w_k·g_k − (r³/D)·x_k·Σ_i g_i·w_i·x_i and dw_i = Σ_rows g_i·x_i·r.
func (be *Backend) RMSNormBackward(rows, dim int, dx, dw, dout, x, w, rstd backend.Buffer) error {
	v, err := be.views("rmsnorm backward", dx, dw, dout, x, w, rstd)
	if err != nil {
		return err
	}
	if err := backend.CheckRMSNorm(rows, dim, 0, false, dout, rstd, x, w); err != nil {
		return err
	}
	if dx != nil && dx.Len() != rows*dim {
		return fmt.Errorf("%w: rmsnorm dx has %d elements, want %d", backend.ErrShape, dx.Len(), rows*dim)
	}
	if dw != nil && dw.Len() != dim {
		return fmt.Errorf("%w: rmsnorm dw has %d elements, want %d", backend.ErrShape, dw.Len(), dim)
	}
	dxd, dwd, gd, xd, wd, rd := v[0], v[1], v[2], v[3], v[4], v[5]
	// dw is summed over chunks of rows fixed by the shape, not by the
	// workers, and the chunks' partial sums are added in order: the
	// result does not depend on the number of workers.
	per := max(1, normChunk/dim)
	nc := (rows + per - 1) / per
	var partial [][]float64
	if dwd != nil {
		partial = make([][]float64, nc)
	}
	be.parallelTasks(nc, func(_, t int) {
		lo, hi := t*per, min((t+1)*per, rows)
		var acc []float64
		if partial != nil {
			acc = make([]float64, dim)
			partial[t] = acc
		}
		for r := lo; r < hi; r++ {
			xr, gr := xd[r*dim:(r+1)*dim], gd[r*dim:(r+1)*dim]
			rs := float64(rd[r])
			if acc != nil {
				for i, g := range gr {
					acc[i] += float64(g) * float64(xr[i]) * rs
				}
			}
			if dxd == nil {
				continue
			}
			var dot float64
			for i, g := range gr {
				dot += float64(g) * float64(wd[i]) * float64(xr[i])
			}
			c := rs * rs * rs / float64(dim) * dot
			dr := dxd[r*dim : (r+1)*dim]
			for i, g := range gr {
				dr[i] += float32(rs*float64(wd[i])*float64(g) - c*float64(xr[i]))
			}
		}
	})
	if dwd != nil {
		for i := range dwd {
			var s float64
			for _, p := range partial {
				s += p[i]
			}
			dwd[i] += float32(s)
		}
	}
	return nil
}

// RoPEForward applies rotary position embeddings (rotate_half layout).
func (be *Backend) RoPEForward(heads, headDim int, r backend.Rows, freqs []float32, out, x backend.Buffer) error {
	v, err := be.views("rope", out, x)
	if err != nil {
		return err
	}
	cr, err := be.rowsOf("rope", r)
	if err != nil {
		return err
	}
	if err := backend.CheckRoPE(heads, headDim, &cr.l, freqs, out, x); err != nil {
		return err
	}
	be.rope(heads, headDim, cr, freqs, v[0], v[1], 1, false)
	return nil
}

// RoPEBackward accumulates dx += Rᵀ·dout: the rotation by −angle.
func (be *Backend) RoPEBackward(heads, headDim int, r backend.Rows, freqs []float32, dx, dout backend.Buffer) error {
	v, err := be.views("rope backward", dx, dout)
	if err != nil {
		return err
	}
	cr, err := be.rowsOf("rope backward", r)
	if err != nil {
		return err
	}
	if err := backend.CheckRoPE(heads, headDim, &cr.l, freqs, dx, dout); err != nil {
		return err
	}
	if dx == dout {
		return fmt.Errorf("%w: rope backward dx and dout are the same buffer", backend.ErrShape)
	}
	be.rope(heads, headDim, cr, freqs, v[0], v[1], -1, true)
	return nil
}

// rope writes (or, when accumulate, adds) the rotation of x by sign·angle
// into out. Each pair (i, i+half) is read before it is written, so out may
// be x when not accumulating.
func (be *Backend) rope(heads, headDim int, r *rows, freqs []float32, out, x []float32, sign float32, accumulate bool) {
	cos, sin := r.ropeTable(freqs)
	half := headDim / 2
	be.parallelFor(r.Len(), max(1, 2048/(heads*headDim)), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			c, s := cos[t*half:(t+1)*half], sin[t*half:(t+1)*half]
			for h := range heads {
				base := (t*heads + h) * headDim
				xr, or := x[base:base+headDim], out[base:base+headDim]
				for i := range half {
					a, b := xr[i], xr[i+half]
					sn := sign * s[i]
					r0 := a*c[i] - b*sn
					r1 := b*c[i] + a*sn
					if accumulate {
						or[i] += r0
						or[i+half] += r1
					} else {
						or[i] = r0
						or[i+half] = r1
					}
				}
			}
		}
	})
}

// SwiGLUForward computes out = silu(gate)·up (gemm.Engine.SwiGLU).
func (be *Backend) SwiGLUForward(out, gate, up backend.Buffer) error {
	v, err := be.views("swiglu", out, gate, up)
	if err != nil {
		return err
	}
	if err := backend.CheckSameLen([]string{"swiglu out", "swiglu gate", "swiglu up"}, out, gate, up); err != nil {
		return err
	}
	if gate == nil || up == nil {
		return fmt.Errorf("%w: swiglu gate and up must not be nil", backend.ErrBuffer)
	}
	od, gd, ud := v[0], v[1], v[2]
	be.parallelFor(len(od), 1<<14, func(lo, hi int) {
		be.ser.SwiGLU(od[lo:hi], gd[lo:hi], ud[lo:hi])
	})
	return nil
}

// SwiGLUBackward accumulates the gradients of silu(gate)·up:
// d/dg [g·σ(g)] = σ(g)·(1 + g·(1 − σ(g))).
func (be *Backend) SwiGLUBackward(dgate, dup, dout, gate, up backend.Buffer) error {
	v, err := be.views("swiglu backward", dgate, dup, dout, gate, up)
	if err != nil {
		return err
	}
	if err := backend.CheckSameLen([]string{"swiglu dout", "swiglu dgate", "swiglu dup", "swiglu gate", "swiglu up"}, dout, dgate, dup, gate, up); err != nil {
		return err
	}
	if gate == nil || up == nil {
		return fmt.Errorf("%w: swiglu gate and up must not be nil", backend.ErrBuffer)
	}
	dg, du, do, gd, ud := v[0], v[1], v[2], v[3], v[4]
	be.parallelFor(len(do), 1<<14, func(lo, hi int) {
		var dgc, duc []float32
		if dg != nil {
			dgc = dg[lo:hi]
		}
		if du != nil {
			duc = du[lo:hi]
		}
		be.ser.SwiGLUGrad(dgc, duc, do[lo:hi], gd[lo:hi], ud[lo:hi])
	})
	return nil
}

// Add computes out = a + b.
func (be *Backend) Add(out, a, b backend.Buffer) error {
	v, err := be.views("add", out, a, b)
	if err != nil {
		return err
	}
	if a == nil || b == nil {
		return fmt.Errorf("%w: add inputs must not be nil", backend.ErrBuffer)
	}
	if err := backend.CheckSameLen([]string{"add out", "add a", "add b"}, out, a, b); err != nil {
		return err
	}
	od, ad, bd := v[0], v[1], v[2]
	be.parallelFor(len(od), 1<<15, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			od[i] = ad[i] + bd[i]
		}
	})
	return nil
}

// Axpy accumulates y += alpha·x.
func (be *Backend) Axpy(alpha float32, x, y backend.Buffer) error {
	v, err := be.views("axpy", x, y)
	if err != nil {
		return err
	}
	if x == nil {
		return fmt.Errorf("%w: axpy x must not be nil", backend.ErrBuffer)
	}
	if err := backend.CheckSameLen([]string{"axpy y", "axpy x"}, y, x); err != nil {
		return err
	}
	xd, yd := v[0], v[1]
	be.parallelFor(len(yd), 1<<15, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			yd[i] += alpha * xd[i]
		}
	})
	return nil
}
