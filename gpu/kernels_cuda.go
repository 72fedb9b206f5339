//go:build agentrl_cuda && cgo

package gpu

import (
	"fmt"
	"math"

	"github.com/agentrl/agentrl/policy/backend"
)

// Every kernel method resolves its buffers (ErrBuffer for foreign or freed
// ones), runs the shared argument checks of policy/backend — in the same
// order as internal/cpu, so that both backends reject a bad call with the
// same error — and then queues its work on the worker thread.

// Gemm computes the (batched) product g (cuBLAS GemmEx in the Backend's
// precision).
func (be *Backend) Gemm(g backend.Gemm, a, b, c backend.Buffer) error {
	v, err := resolveAll(be, "gemm", a, b, c)
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
	return be.enqueue([]*buffer{v[2]}, func() error {
		s := &scratch{be: be}
		defer s.done()
		return be.gemm(s, gemmCall{
			tA: g.TransA, tB: g.TransB, m: g.M, n: g.N, k: g.K, alpha: g.Alpha, beta: g.Beta,
			a: operand{v[0].ptr, opF32}, b: operand{v[1].ptr, opF32}, c: v[2].ptr,
			lda: max(lda, 1), ldb: max(ldb, 1), ldc: max(g.N, 1),
			sA: int64(g.StrideA), sB: int64(g.StrideB), sC: int64(g.StrideC), batch: g.Batch,
		})
	})
}

// LinearForward computes y = x·Wᵀ + bias.
func (be *Backend) LinearForward(s backend.Linear, y, x, w, bias backend.Buffer) error {
	v, err := resolveW(be, "linear", 1<<2|1<<3, y, x, w, bias)
	if err != nil {
		return err
	}
	if err := backend.CheckLinear(s, y, x, w, bias); err != nil {
		return err
	}
	return be.enqueue([]*buffer{v[0]}, func() error {
		sc := &scratch{be: be}
		defer sc.done()
		in, out := max(s.In, 1), max(s.Out, 1)
		xOp, err := be.activation(sc, v[1])
		if err != nil {
			return fmt.Errorf("linear forward: %w", err)
		}
		wOp, err := be.weight(sc, v[2])
		if err != nil {
			return fmt.Errorf("linear forward: %w", err)
		}
		if err := be.gemm(sc, gemmCall{tB: true, m: s.Rows, n: s.Out, k: s.In, alpha: 1,
			a: xOp, lda: in, b: wOp, ldb: in, c: v[0].ptr, ldc: out}); err != nil {
			return fmt.Errorf("linear forward: %w", err)
		}
		if v[3] != nil {
			bp, err := be.widen(sc, v[3])
			if err != nil {
				return fmt.Errorf("linear forward bias: %w", err)
			}
			n := int64(s.Rows) * int64(s.Out)
			return be.elementwise("bias_add", n, v[0].ptr, bp, int32(s.Rows), int32(s.Out))
		}
		return nil
	})
}

// LinearBackward accumulates dx += dy·W, dW += dyᵀ·x and db += Σ_rows dy.
func (be *Backend) LinearBackward(s backend.Linear, dx, dw, db, dy, x, w backend.Buffer) error {
	v, err := resolveW(be, "linear backward", 1<<5, dx, dw, db, dy, x, w)
	if err != nil {
		return err
	}
	if err := backend.CheckLinear(s, dy, x, w, nil); err != nil {
		return err
	}
	if err := backend.CheckLinearGrads(s, dx, dw, db); err != nil {
		return err
	}
	return be.enqueue([]*buffer{v[0], v[1], v[2]}, func() error {
		sc := &scratch{be: be}
		defer sc.done()
		in, out := max(s.In, 1), max(s.Out, 1)
		// dy is an input of both products: convert it once.
		dyOp, err := be.prep(sc, v[3].ptr, int64(s.Rows)*int64(s.Out))
		if err != nil {
			return err
		}
		if v[0] != nil {
			wOp, err := be.weight(sc, v[5])
			if err != nil {
				return fmt.Errorf("linear backward dx: %w", err)
			}
			if err := be.gemm(sc, gemmCall{m: s.Rows, n: s.In, k: s.Out, alpha: 1, beta: 1,
				a: dyOp, lda: out, b: wOp, ldb: in, c: v[0].ptr, ldc: in}); err != nil {
				return fmt.Errorf("linear backward dx: %w", err)
			}
		}
		if v[1] != nil {
			// x's bf16 copy from the forward, when the activation cache
			// still has it.
			xOp, err := be.activation(sc, v[4])
			if err != nil {
				return fmt.Errorf("linear backward dW: %w", err)
			}
			if err := be.gemm(sc, gemmCall{tA: true, m: s.Out, n: s.In, k: s.Rows, alpha: 1, beta: 1,
				a: dyOp, lda: out, b: xOp, ldb: in, c: v[1].ptr, ldc: in}); err != nil {
				return fmt.Errorf("linear backward dW: %w", err)
			}
		}
		if v[2] != nil && s.Out > 0 {
			g := uint32((s.Out + blockElem - 1) / blockElem)
			return be.launch("bias_grad", [3]uint32{g, 1, 1}, [3]uint32{blockElem, 1, 1}, 0, v[2].ptr, v[3].ptr, int32(s.Rows), int32(s.Out))
		}
		return nil
	})
}

// EmbeddingForward gathers rows of the table.
func (be *Backend) EmbeddingForward(out, table backend.Buffer, ids []int32, dim int) error {
	v, err := resolveW(be, "embedding", 1<<1, out, table)
	if err != nil {
		return err
	}
	if err := backend.CheckEmbedding(out, table, ids, dim); err != nil {
		return err
	}
	st := be.stageInts(ids)
	return be.enqueue([]*buffer{v[0]}, func() error {
		sc := &scratch{be: be}
		defer sc.done()
		defer func() { _ = be.unstage(st) }()
		idp := st.addr()
		n := int64(len(ids)) * int64(dim)
		if v[1].half {
			return be.elementwise("embedding_fwd_bf16", n, v[0].ptr, v[1].ptr, idp, int32(len(ids)), int32(dim))
		}
		return be.elementwise("embedding_fwd", n, v[0].ptr, v[1].ptr, idp, int32(len(ids)), int32(dim))
	})
}

// EmbeddingBackward adds output gradients into the table gradient: each
// id's rows in increasing position, as the CPU backend adds them, so the
// result is the same bits on every run and on both backends (the ids are
// grouped on the host, embeddingGroups; no atomics).
func (be *Backend) EmbeddingBackward(dtable, dout backend.Buffer, ids []int32, dim int) error {
	v, err := resolveAll(be, "embedding backward", dtable, dout)
	if err != nil {
		return err
	}
	if err := backend.CheckEmbedding(dout, dtable, ids, dim); err != nil {
		return err
	}
	grp, u := embeddingGroups(ids)
	st := be.stageInts(grp)
	return be.enqueue([]*buffer{v[0]}, func() error {
		defer func() { _ = be.unstage(st) }()
		if u == 0 {
			return nil
		}
		return be.elementwise("embedding_bwd", int64(u)*int64(dim), v[0].ptr, v[1].ptr, st.addr(), int32(u), int32(dim))
	})
}

// RMSNormForward normalizes each row by its root mean square (a block of
// rowThreads(dim) threads per row).
func (be *Backend) RMSNormForward(rows, dim int, eps float32, out, rstd, x, w backend.Buffer) error {
	v, err := resolveW(be, "rmsnorm", 1<<3, out, rstd, x, w)
	if err != nil {
		return err
	}
	if err := backend.CheckRMSNorm(rows, dim, eps, true, out, rstd, x, w); err != nil {
		return err
	}
	return be.enqueue([]*buffer{v[0], v[1]}, func() error {
		var rp devPtr
		if v[1] != nil {
			rp = v[1].ptr
		}
		sc := &scratch{be: be}
		defer sc.done()
		wp, err := be.widen(sc, v[3])
		if err != nil {
			return err
		}
		return be.launch("rmsnorm_fwd", [3]uint32{uint32(rows), 1, 1}, [3]uint32{rowThreads(dim), 1, 1}, 0,
			v[0].ptr, rp, v[2].ptr, wp, int32(rows), int32(dim), eps)
	})
}

// RMSNormBackward accumulates dx (a block per row) and dw (a
// deterministic two-stage reduction over the rows: dwPlan).
func (be *Backend) RMSNormBackward(rows, dim int, dx, dw, dout, x, w, rstd backend.Buffer) error {
	v, err := resolveW(be, "rmsnorm backward", 1<<4, dx, dw, dout, x, w, rstd)
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
	return be.enqueue([]*buffer{v[0], v[1]}, func() error {
		sc := &scratch{be: be}
		defer sc.done()
		if v[0] != nil {
			wp, err := be.widen(sc, v[4])
			if err != nil {
				return err
			}
			if err := be.launch("rmsnorm_bwd_dx", [3]uint32{uint32(rows), 1, 1}, [3]uint32{rowThreads(dim), 1, 1}, 0,
				v[0].ptr, v[2].ptr, v[3].ptr, wp, v[5].ptr, int32(rows), int32(dim)); err != nil {
				return err
			}
		}
		if v[1] == nil || rows == 0 || dim == 0 {
			return nil
		}
		// dw in two deterministic stages (kernels.cu): partial sums of
		// row chunks per column, then the chunks of each column.
		chunks, chunkRows := dwPlan(rows)
		part, err := sc.get(8 * chunks * dim)
		if err != nil {
			return err
		}
		if err := be.launch("rmsnorm_dw_partial", [3]uint32{uint32((dim + dwCols - 1) / dwCols), uint32(chunks), 1}, [3]uint32{dwCols, dwLanes, 1}, 0,
			part, v[2].ptr, v[3].ptr, v[5].ptr, int32(rows), int32(dim), int32(chunkRows)); err != nil {
			return err
		}
		warps := int64(dim) * 32
		return be.launch("rmsnorm_dw_finish", [3]uint32{uint32((warps + blockElem - 1) / blockElem), 1, 1}, [3]uint32{blockElem, 1, 1}, 0,
			v[1].ptr, part, int32(chunks), int32(dim))
	})
}

// RoPEForward applies rotary position embeddings (rotate_half layout);
// the positions and frequencies come from r's device copies.
func (be *Backend) RoPEForward(heads, headDim int, r backend.Rows, freqs []float32, out, x backend.Buffer) error {
	v, err := resolveAll(be, "rope", out, x)
	if err != nil {
		return err
	}
	gr, err := be.rowsOf("rope", r)
	if err != nil {
		return err
	}
	if err := backend.CheckRoPE(heads, headDim, &gr.l, freqs, out, x); err != nil {
		return err
	}
	return be.rope(heads, headDim, gr, freqs, v[0], v[1], 1, false)
}

// RoPEBackward accumulates dx += Rᵀ·dout: the rotation by −angle.
func (be *Backend) RoPEBackward(heads, headDim int, r backend.Rows, freqs []float32, dx, dout backend.Buffer) error {
	v, err := resolveAll(be, "rope backward", dx, dout)
	if err != nil {
		return err
	}
	gr, err := be.rowsOf("rope backward", r)
	if err != nil {
		return err
	}
	if err := backend.CheckRoPE(heads, headDim, &gr.l, freqs, dx, dout); err != nil {
		return err
	}
	if dx == dout {
		return fmt.Errorf("%w: rope backward dx and dout are the same buffer", backend.ErrShape)
	}
	return be.rope(heads, headDim, gr, freqs, v[0], v[1], -1, true)
}

func (be *Backend) rope(heads, headDim int, r *rows, freqs []float32, out, x *buffer, sign float32, accumulate bool) error {
	n := r.Len()
	if n == 0 {
		return nil
	}
	// The positions and this table are staged once for the rows.
	pos, fs := r.stagedPos(be), r.stagedFreqs(be, freqs)
	return be.enqueue([]*buffer{out}, func() error {
		total := int64(n) * int64(heads) * int64(headDim/2)
		return be.elementwise("rope", total, out.ptr, x.ptr, pos.addr(), fs.addr(), int32(n), int32(heads), int32(headDim), sign, b2i(accumulate))
	})
}

// checkHeadDim reports the attention kernels' head-dim limit (8 channels
// per lane of a warp), a limit the CPU backend does not have.
func checkHeadDim(a backend.Attention) error {
	if a.HeadDim > attMaxHead {
		return fmt.Errorf("%w: attention head dim %d exceeds the GPU kernels' limit %d", backend.ErrArg, a.HeadDim, attMaxHead)
	}
	return nil
}

// AttentionForward computes causal GQA attention: split-K flash-decoding
// when every span is a decode step over a KV cache (see decodePlan), else
// the flash-style tiled kernel for prefill and training — on tensor cores
// (bf16 products, float32 softmax) or in float32, as AttentionKernels and
// the head dim decide. Rows in no span get zero output and log-sum-exp.
func (be *Backend) AttentionForward(a backend.Attention, r backend.Rows, out, lse, q, k, v backend.Buffer) error {
	vs, err := resolveAll(be, "attention", out, lse, q, k, v)
	if err != nil {
		return err
	}
	gr, err := be.rowsOf("attention", r)
	if err != nil {
		return err
	}
	if err := backend.CheckAttention(a, &gr.l, out, lse, q, k, v, true, false); err != nil {
		return err
	}
	if err := checkHeadDim(a); err != nil {
		return err
	}
	hd := a.HeadDim
	return be.enqueue([]*buffer{vs[0], vs[1]}, func() error {
		sc := &scratch{be: be}
		defer sc.done()
		var lp devPtr
		if vs[1] != nil {
			lp = vs[1].ptr
			if err := be.memset(lp, 0, vs[1].n); err != nil {
				return err
			}
		}
		if err := be.memset(vs[0].ptr, 0, vs[0].n); err != nil {
			return err
		}
		dec, err := gr.devDecode(be)
		if err != nil {
			return err
		}
		if dec.ok {
			nr, splits, chunk, rp := dec.nr, dec.splits, dec.chunk, dec.rows.ptr
			slots := nr * a.Heads * splits
			ml, err := sc.get(4 * 2 * slots)
			if err != nil {
				return err
			}
			pacc, err := sc.get(4 * slots * hd)
			if err != nil {
				return err
			}
			if err := be.launch("attn_decode_partial", [3]uint32{uint32(nr), uint32(a.Heads), uint32(splits)}, [3]uint32{32, 1, 1}, attnDecodeSmem(hd),
				ml, pacc, vs[2].ptr, vs[3].ptr, vs[4].ptr, rp, int32(a.Heads), int32(a.KVHeads), int32(hd), a.Scale, int32(chunk)); err != nil {
				return err
			}
			return be.launch("attn_decode_combine", [3]uint32{uint32(nr), uint32(a.Heads), 1}, [3]uint32{32, 1, 1}, 0,
				vs[0].ptr, lp, ml, pacc, rp, int32(a.Heads), int32(hd), int32(splits))
		}
		tc, useTC := be.tensorCores(hd)
		rows := attRows
		if useTC {
			rows = tcRows
		}
		tiles, err := gr.devTiles(be, rows)
		if err != nil {
			return err
		}
		if tiles.n == 0 {
			return nil
		}
		tp := tiles.ptr
		grid := [3]uint32{uint32(tiles.n / 4), uint32(a.Heads), 1}
		if useTC {
			return be.launch(tc.fwdName(), grid, [3]uint32{tcThreads, 1, 1}, tc.fwdSmem(),
				vs[0].ptr, lp, vs[2].ptr, vs[3].ptr, vs[4].ptr, tp, int32(a.Heads), int32(a.KVHeads), int32(hd), a.Scale)
		}
		return be.launch("attn_fwd", grid, [3]uint32{32 * attRows, 1, 1}, attnFwdSmem(hd),
			vs[0].ptr, lp, vs[2].ptr, vs[3].ptr, vs[4].ptr, tp, int32(a.Heads), int32(a.KVHeads), int32(hd), a.Scale)
	})
}

// tensorCores reports whether attention of head dim hd runs on the
// tensor-core kernels (see AttentionKernels), and which instantiation.
func (be *Backend) tensorCores(hd int) (tcKernel, bool) {
	if !be.cfg.tensorCoreAttention(hd) {
		return tcKernel{}, false
	}
	return tcFor(hd)
}

// AttentionBackward accumulates dq, dk, dv (FlashAttention-2's backward:
// D = rowsum(dO ⊙ O), probabilities recomputed from lse; dQ per query row,
// dK and dV per key row, so no atomics), on the same kernels as the
// forward: tensor cores or float32.
func (be *Backend) AttentionBackward(a backend.Attention, r backend.Rows, dq, dk, dv, dout, q, k, v, out, lse backend.Buffer) error {
	vs, err := resolveAll(be, "attention backward", dq, dk, dv, dout, q, k, v, out, lse)
	if err != nil {
		return err
	}
	gr, err := be.rowsOf("attention backward", r)
	if err != nil {
		return err
	}
	if err := backend.CheckAttention(a, &gr.l, dout, lse, q, k, v, false, true); err != nil {
		return err
	}
	if err := backend.CheckSameLen([]string{"attention out", "attention dout"}, out, dout); err != nil {
		return err
	}
	if err := backend.CheckAttentionGrads(q, k, dq, dk, dv); err != nil {
		return err
	}
	if err := checkHeadDim(a); err != nil {
		return err
	}
	if dq == nil && dk == nil && dv == nil {
		return nil
	}
	hd := a.HeadDim
	return be.enqueue([]*buffer{vs[0], vs[1], vs[2]}, func() error {
		sc := &scratch{be: be}
		defer sc.done()
		tc, useTC := be.tensorCores(hd)
		rows, block, dqName, dkdvName, dqSmem, dkdvSmem := attRows, uint32(32*attRows), "attn_bwd_dq", "attn_bwd_dkdv", attnBwdSmem(hd), attnBwdSmem(hd)
		if useTC {
			rows, block, dqName, dkdvName, dqSmem, dkdvSmem = tcRows, tcThreads, tc.dqName(), tc.dkdvName(), tc.dqSmem(), tc.dkdvSmem()
		}
		tiles, err := gr.devTiles(be, rows)
		if err != nil {
			return err
		}
		if tiles.n == 0 {
			return nil
		}
		rowsHeads := vs[8].n // Tq·Heads
		D, err := sc.get(4 * rowsHeads)
		if err != nil {
			return err
		}
		warps := int64(rowsHeads) * 32
		if err := be.launch("attn_bwd_dot", [3]uint32{uint32((warps + blockElem - 1) / blockElem), 1, 1}, [3]uint32{blockElem, 1, 1}, 0,
			D, vs[3].ptr, vs[7].ptr, int32(rowsHeads), int32(hd)); err != nil {
			return err
		}
		if vs[0] != nil {
			if err := be.launch(dqName, [3]uint32{uint32(tiles.n / 4), uint32(a.Heads), 1}, [3]uint32{block, 1, 1}, dqSmem,
				vs[0].ptr, vs[3].ptr, vs[4].ptr, vs[5].ptr, vs[6].ptr, vs[8].ptr, D, tiles.ptr, int32(a.Heads), int32(a.KVHeads), int32(hd), a.Scale); err != nil {
				return err
			}
		}
		if vs[1] == nil && vs[2] == nil {
			return nil
		}
		kt, err := gr.devKeyTiles(be, rows)
		if err != nil {
			return err
		}
		kp := kt.ptr
		var dkp, dvp devPtr
		if vs[1] != nil {
			dkp = vs[1].ptr
		}
		if vs[2] != nil {
			dvp = vs[2].ptr
		}
		return be.launch(dkdvName, [3]uint32{uint32(kt.n / 6), uint32(a.KVHeads), 1}, [3]uint32{block, 1, 1}, dkdvSmem,
			dkp, dvp, vs[3].ptr, vs[4].ptr, vs[5].ptr, vs[6].ptr, vs[8].ptr, D, kp, int32(a.Heads), int32(a.KVHeads), int32(hd), a.Scale)
	})
}

// SwiGLUForward computes out = silu(gate)·up.
func (be *Backend) SwiGLUForward(out, gate, up backend.Buffer) error {
	v, err := resolveAll(be, "swiglu", out, gate, up)
	if err != nil {
		return err
	}
	if err := backend.CheckSameLen([]string{"swiglu out", "swiglu gate", "swiglu up"}, out, gate, up); err != nil {
		return err
	}
	if gate == nil || up == nil {
		return fmt.Errorf("%w: swiglu gate and up must not be nil", backend.ErrBuffer)
	}
	n := int64(v[0].n)
	return be.enqueue([]*buffer{v[0]}, func() error { return be.elementwise("swiglu_fwd", n, v[0].ptr, v[1].ptr, v[2].ptr, n) })
}

// SwiGLUBackward accumulates the gradients of silu(gate)·up.
func (be *Backend) SwiGLUBackward(dgate, dup, dout, gate, up backend.Buffer) error {
	v, err := resolveAll(be, "swiglu backward", dgate, dup, dout, gate, up)
	if err != nil {
		return err
	}
	if err := backend.CheckSameLen([]string{"swiglu dout", "swiglu dgate", "swiglu dup", "swiglu gate", "swiglu up"}, dout, dgate, dup, gate, up); err != nil {
		return err
	}
	if gate == nil || up == nil {
		return fmt.Errorf("%w: swiglu gate and up must not be nil", backend.ErrBuffer)
	}
	n := int64(v[2].n)
	return be.enqueue([]*buffer{v[0], v[1]}, func() error {
		var dg, du devPtr
		if v[0] != nil {
			dg = v[0].ptr
		}
		if v[1] != nil {
			du = v[1].ptr
		}
		return be.elementwise("swiglu_bwd", n, dg, du, v[2].ptr, v[3].ptr, v[4].ptr, n)
	})
}

// Add computes out = a + b.
func (be *Backend) Add(out, a, b backend.Buffer) error {
	v, err := resolveAll(be, "add", out, a, b)
	if err != nil {
		return err
	}
	if a == nil || b == nil {
		return fmt.Errorf("%w: add inputs must not be nil", backend.ErrBuffer)
	}
	if err := backend.CheckSameLen([]string{"add out", "add a", "add b"}, out, a, b); err != nil {
		return err
	}
	n := int64(v[0].n)
	return be.enqueue([]*buffer{v[0]}, func() error { return be.elementwise("add_f32", n, v[0].ptr, v[1].ptr, v[2].ptr, n) })
}

// Axpy accumulates y += alpha·x.
func (be *Backend) Axpy(alpha float32, x, y backend.Buffer) error {
	v, err := resolveAll(be, "axpy", x, y)
	if err != nil {
		return err
	}
	if x == nil {
		return fmt.Errorf("%w: axpy x must not be nil", backend.ErrBuffer)
	}
	if err := backend.CheckSameLen([]string{"axpy y", "axpy x"}, y, x); err != nil {
		return err
	}
	n := int64(v[1].n)
	return be.enqueue([]*buffer{v[1]}, func() error { return be.elementwise("axpy_f32", n, alpha, v[0].ptr, v[1].ptr, n) })
}

// LogProbEntropy computes log p(target), entropy and log-sum-exp of
// softmax(InvTemp·h·Wᵀ) over vocabulary chunks (lmChunk): each chunk of
// logits is one GEMM into scratch, folded into per-row running statistics
// (max, Σe^(z−m), Σe^(z−m)·z in float64) by lm_stats.
func (be *Backend) LogProbEntropy(s backend.LMHead, targets []int32, logp, entropy, lse, h, w backend.Buffer) error {
	v, err := resolveW(be, "logprob", 1<<4, logp, entropy, lse, h, w)
	if err != nil {
		return err
	}
	if err := backend.CheckLMHead(s, targets, h, w, []string{"logp", "entropy", "lse"}, logp, entropy, lse); err != nil {
		return err
	}
	if logp == nil || lse == nil {
		return fmt.Errorf("%w: logprob needs logp and lse buffers", backend.ErrBuffer)
	}
	if targets == nil && s.Rows > 0 {
		return fmt.Errorf("%w: logprob needs %d targets", backend.ErrShape, s.Rows)
	}
	if s.Rows == 0 {
		return nil
	}
	st := be.stageInts(targets)
	return be.enqueue([]*buffer{v[0], v[1], v[2]}, func() error {
		sc := &scratch{be: be}
		defer sc.done()
		defer func() { _ = be.unstage(st) }()
		tp := st.addr()
		hOp, err := be.activation(sc, v[3])
		if err != nil {
			return err
		}
		wOp, err := be.weight(sc, v[4])
		if err != nil {
			return err
		}
		nr, nc := lmChunk(s.Rows, s.Vocab, be.cfg.lm)
		z, err := sc.get(4 * nr * nc)
		if err != nil {
			return err
		}
		st, err := sc.get(8 * 3 * s.Rows)
		if err != nil {
			return err
		}
		zt, err := sc.get(4 * s.Rows)
		if err != nil {
			return err
		}
		m, sum, tz := st, st+devPtr(8*s.Rows), st+devPtr(16*s.Rows)
		g := uint32((s.Rows + blockElem - 1) / blockElem)
		if err := be.launch("lm_init", [3]uint32{g, 1, 1}, [3]uint32{blockElem, 1, 1}, 0, m, sum, tz, zt, int32(s.Rows)); err != nil {
			return err
		}
		for r0 := 0; r0 < s.Rows; r0 += nr {
			rn := min(nr, s.Rows-r0)
			for c0 := 0; c0 < s.Vocab; c0 += nc {
				cn := min(nc, s.Vocab-c0)
				if err := be.lmLogits(sc, s, hOp, wOp, r0, rn, c0, cn, z); err != nil {
					return err
				}
				if err := be.launch("lm_stats", [3]uint32{uint32(rn), 1, 1}, [3]uint32{blockRow, 1, 1}, 0,
					z, int32(cn), int32(c0), tp+devPtr(4*r0), m+devPtr(8*r0), sum+devPtr(8*r0), tz+devPtr(8*r0), zt+devPtr(4*r0)); err != nil {
					return err
				}
			}
		}
		var ep devPtr
		if v[1] != nil {
			ep = v[1].ptr
		}
		return be.launch("lm_finish", [3]uint32{g, 1, 1}, [3]uint32{blockElem, 1, 1}, 0,
			v[0].ptr, ep, v[2].ptr, m, sum, tz, zt, tp, int32(s.Rows))
	})
}

// lmLogits computes the chunk z [rn, cn] = InvTemp·h[r0:r0+rn]·W[c0:c0+cn]ᵀ.
func (be *Backend) lmLogits(sc *scratch, s backend.LMHead, h, w operand, r0, rn, c0, cn int, z devPtr) error {
	return be.gemm(sc, gemmCall{tB: true, m: rn, n: cn, k: s.Dim, alpha: s.Scale(),
		a: offset(h, r0*s.Dim), lda: s.Dim, b: offset(w, c0*s.Dim), ldb: s.Dim, c: z, ldc: cn})
}

// offset advances an operand by n elements of its storage type.
func offset(o operand, n int) operand {
	size := 4
	if o.kind == opBF16 {
		size = 2
	}
	return operand{o.ptr + devPtr(size*n), o.kind}
}

// LogProbEntropyBackward recomputes each logits chunk, turns it into dL/dz
// (lm_dz in place; in BF16 precision through cuBLAS lm_dz_bf16, which
// writes the products' bf16 operand directly) and accumulates
// dh += InvTemp·dZ·W_chunk and dW_chunk += InvTemp·dZᵀ·h with two GEMMs.
func (be *Backend) LogProbEntropyBackward(s backend.LMHead, targets []int32, dh, dw, dlogp, dentropy, h, w, lse, entropy backend.Buffer) error {
	v, err := resolveW(be, "logprob backward", 1<<5, dh, dw, dlogp, dentropy, h, w, lse, entropy)
	if err != nil {
		return err
	}
	if err := backend.CheckLMHead(s, targets, h, w, []string{"dlogp", "dentropy", "lse", "entropy"}, dlogp, dentropy, lse, entropy); err != nil {
		return err
	}
	if err := backend.CheckSameLen([]string{"lm head h", "lm head dh"}, h, dh); err != nil {
		return err
	}
	if err := backend.CheckSameLen([]string{"lm head W", "lm head dW"}, w, dw); err != nil {
		return err
	}
	if dlogp == nil || lse == nil {
		return fmt.Errorf("%w: logprob backward needs dlogp and lse", backend.ErrBuffer)
	}
	if dentropy != nil && entropy == nil {
		return fmt.Errorf("%w: logprob backward with dentropy needs the forward's entropy", backend.ErrBuffer)
	}
	if targets == nil && s.Rows > 0 {
		return fmt.Errorf("%w: logprob backward needs %d targets", backend.ErrShape, s.Rows)
	}
	if (dh == nil && dw == nil) || s.Rows == 0 {
		return nil
	}
	st := be.stageInts(targets)
	return be.enqueue([]*buffer{v[0], v[1]}, func() error {
		sc := &scratch{be: be}
		defer sc.done()
		defer func() { _ = be.unstage(st) }()
		tp := st.addr()
		hOp, err := be.activation(sc, v[4])
		if err != nil {
			return err
		}
		wOp, err := be.weight(sc, v[5])
		if err != nil {
			return err
		}
		nr, nc := lmChunk(s.Rows, s.Vocab, be.cfg.lm)
		z, err := sc.get(4 * nr * nc)
		if err != nil {
			return err
		}
		var gep, ep devPtr
		if v[3] != nil {
			gep, ep = v[3].ptr, v[7].ptr
		}
		var zb devPtr // the bf16 dL/dz chunk, in BF16 precision through cuBLAS
		if be.cfg.precision == BF16 && be.blas != nil {
			if zb, err = sc.get(2 * nr * nc); err != nil {
				return err
			}
		}
		scale := s.Scale()
		for r0 := 0; r0 < s.Rows; r0 += nr {
			rn := min(nr, s.Rows-r0)
			for c0 := 0; c0 < s.Vocab; c0 += nc {
				cn := min(nc, s.Vocab-c0)
				if err := be.lmLogits(sc, s, hOp, wOp, r0, rn, c0, cn, z); err != nil {
					return err
				}
				off := func(p devPtr) devPtr {
					if p == 0 {
						return 0
					}
					return p + devPtr(4*r0)
				}
				var dz operand
				if zb != 0 {
					// BF16 through cuBLAS: the kernel writes the products'
					// bf16 operand itself (no rounding pass over the chunk).
					if err := be.launch("lm_dz_bf16", [3]uint32{uint32(rn), 1, 1}, [3]uint32{blockRow, 1, 1}, 0,
						zb, z, int32(cn), int32(c0), tp+devPtr(4*r0), v[2].ptr+devPtr(4*r0), off(gep), v[6].ptr+devPtr(4*r0), off(ep)); err != nil {
						return err
					}
					dz = operand{zb, opBF16}
				} else {
					if err := be.launch("lm_dz", [3]uint32{uint32(rn), 1, 1}, [3]uint32{blockRow, 1, 1}, 0,
						z, int32(cn), int32(c0), tp+devPtr(4*r0), v[2].ptr+devPtr(4*r0), off(gep), v[6].ptr+devPtr(4*r0), off(ep)); err != nil {
						return err
					}
					if dz, err = be.prep(sc, z, int64(rn)*int64(cn)); err != nil {
						return err
					}
				}
				if v[0] != nil {
					if err := be.gemm(sc, gemmCall{m: rn, n: s.Dim, k: cn, alpha: scale, beta: 1,
						a: dz, lda: cn, b: offset(wOp, c0*s.Dim), ldb: s.Dim, c: v[0].ptr + devPtr(4*r0*s.Dim), ldc: s.Dim}); err != nil {
						return fmt.Errorf("logprob backward dh: %w", err)
					}
				}
				if v[1] != nil {
					if err := be.gemm(sc, gemmCall{tA: true, m: cn, n: s.Dim, k: rn, alpha: scale, beta: 1,
						a: dz, lda: cn, b: offset(hOp, r0*s.Dim), ldb: s.Dim, c: v[1].ptr + devPtr(4*c0*s.Dim), ldc: s.Dim}); err != nil {
						return fmt.Errorf("logprob backward dW: %w", err)
					}
				}
			}
		}
		return nil
	})
}

// Logits projects only the selected rows of h: out = InvTemp·h[rows]·Wᵀ.
func (be *Backend) Logits(s backend.LMHead, rows []int32, out, h, w backend.Buffer) error {
	v, err := resolveW(be, "logits", 1<<2, out, h, w)
	if err != nil {
		return err
	}
	if err := backend.CheckLogits(s, rows, out, h, w); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	st := be.stageInts(rows)
	return be.enqueue([]*buffer{v[0]}, func() error {
		sc := &scratch{be: be}
		defer sc.done()
		defer func() { _ = be.unstage(st) }()
		rp := st.addr()
		sel, err := sc.get(4 * len(rows) * s.Dim)
		if err != nil {
			return err
		}
		if err := be.elementwise("embedding_fwd", int64(len(rows))*int64(s.Dim), sel, v[1].ptr, rp, int32(len(rows)), int32(s.Dim)); err != nil {
			return err
		}
		wOp, err := be.weight(sc, v[2])
		if err != nil {
			return err
		}
		return be.gemm(sc, gemmCall{tB: true, m: len(rows), n: s.Vocab, k: s.Dim, alpha: s.Scale(),
			a: operand{sel, opF32}, lda: s.Dim, b: wOp, ldb: s.Dim, c: v[0].ptr, ldc: s.Vocab})
	})
}

// RandNormal sets every element i of b to float32(std·NormalAt(seed, i))
// (policy/backend.NormalAt), one thread per element: a model's random
// weights made on the device (backend.Initializer).
func (be *Backend) RandNormal(b backend.Buffer, seed uint64, std float32) error {
	gb, err := resolve(be, "rand normal", b)
	if err != nil {
		return err
	}
	if gb == nil {
		return fmt.Errorf("%w: rand normal of a nil buffer", backend.ErrBuffer)
	}
	if math.IsNaN(float64(std)) || math.IsInf(float64(std), 0) {
		return fmt.Errorf("%w: rand normal std %v", backend.ErrArg, std)
	}
	n := int64(gb.n)
	return be.enqueue([]*buffer{gb}, func() error { return be.elementwise("rand_normal", n, gb.ptr, n, int64(seed), std) })
}
