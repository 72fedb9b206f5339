package cpu

import (
	"fmt"
	"math"

	"github.com/agentrl/agentrl/internal/gemm"
	"github.com/agentrl/agentrl/policy/backend"
)

// attnBlock is the number of query rows processed together: the scores of
// one block, [attnBlock, keys], are the only score storage, so memory
// grows linearly with the sequence length (as in FlashAttention's row
// blocking) while the products stay large enough for the GEMM kernel.
const attnBlock = 64

// AttentionForward computes causal grouped-query attention per span and
// query head: S = Scale·Q·Kᵀ on a block of query rows (one GEMM), a masked
// softmax in float32 with float64 sums, then O = P·V (a second GEMM).
// Tasks (span, head) run in parallel; each block's scores live in
// per-worker scratch.
func (be *Backend) AttentionForward(a backend.Attention, r backend.Rows, out, lse, q, k, v backend.Buffer) error {
	vs, err := be.views("attention", out, lse, q, k, v)
	if err != nil {
		return err
	}
	cr, err := be.rowsOf("attention", r)
	if err != nil {
		return err
	}
	if err := backend.CheckAttention(a, &cr.l, out, lse, q, k, v, true, false); err != nil {
		return err
	}
	spans := cr.l.Spans
	od, ld, qd, kd, vd := vs[0], vs[1], vs[2], vs[3], vs[4]
	clear(od)
	clear(ld)
	d, group := a.HeadDim, a.Heads/a.KVHeads
	qRow, kRow := a.Heads*d, a.KVHeads*d
	maxK := 0
	for _, s := range spans {
		maxK = max(maxK, s.KLen)
	}
	scratch := make([][]float32, be.workers)
	errs := make([]error, be.workers) // per worker: no shared writes
	be.parallelTasks(len(spans)*a.Heads, func(w, task int) {
		s, h := spans[task/a.Heads], task%a.Heads
		if s.QLen == 0 || errs[w] != nil {
			return
		}
		if scratch[w] == nil {
			scratch[w] = make([]float32, attnBlock*maxK)
		}
		sc := scratch[w]
		g := h / group
		kBase, qBase := s.K0*kRow+g*d, s.Q0*qRow+h*d
		past := s.KLen - s.QLen
		for r0 := 0; r0 < s.QLen; r0 += attnBlock {
			r1 := min(r0+attnBlock, s.QLen)
			nb, nk := r1-r0, past+r1
			if err := be.ser.Sgemm(false, true, nb, nk, d, a.Scale, qd[qBase+r0*qRow:], qRow, kd[kBase:], kRow, 0, sc, nk); err != nil {
				errs[w] = err
				return
			}
			for i := range nb {
				row := sc[i*nk : (i+1)*nk]
				m, sum := be.causalSoftmax(row, past+r0+i+1)
				if ld != nil {
					ld[(s.Q0+r0+i)*a.Heads+h] = m + float32(math.Log(sum))
				}
			}
			if err := be.ser.Sgemm(false, false, nb, d, nk, 1, sc, nk, vd[kBase:], kRow, 0, od[qBase+r0*qRow:], qRow); err != nil {
				errs[w] = err
				return
			}
		}
	})
	for _, e := range errs {
		if e != nil {
			return fmt.Errorf("attention forward: %w", e)
		}
	}
	return nil
}

// causalSoftmax turns the scores row[:lim] into probabilities in place
// (shifted by their maximum m, summing to 1 over sum = Σ exp(x − m)) and
// zeroes the masked row[lim:]; it returns m and sum, whose m + log(sum)
// is the row's log-sum-exp.
func (be *Backend) causalSoftmax(row []float32, lim int) (m float32, sum float64) {
	m = float32(math.Inf(-1))
	for _, x := range row[:lim] {
		m = max(m, x)
	}
	sum = be.ser.ExpShift(row[:lim], m)
	inv := float32(1 / sum)
	for j := range row[:lim] {
		row[j] *= inv
	}
	clear(row[lim:])
	return m, sum
}

// AttentionBackward accumulates the attention gradients, recomputing P from
// the saved log-sum-exp (FlashAttention-2's backward, per row block):
// dP = dO·Vᵀ, D_i = Σ_d dO_i·O_i, dS = P ⊙ (dP − D_i), then
// dQ += Scale·dS·K, dK += Scale·dSᵀ·Q and dV += Pᵀ·dO. Tasks are key/value
// heads (the query heads of a group add into the same dK, dV rows, so they
// run in one task); with fewer KV heads than workers the GEMMs themselves
// run in parallel instead.
func (be *Backend) AttentionBackward(a backend.Attention, r backend.Rows, dq, dk, dv, dout, q, k, v, out, lse backend.Buffer) error {
	vs, err := be.views("attention backward", dq, dk, dv, dout, q, k, v, out, lse)
	if err != nil {
		return err
	}
	cr, err := be.rowsOf("attention backward", r)
	if err != nil {
		return err
	}
	if err := backend.CheckAttention(a, &cr.l, dout, lse, q, k, v, false, true); err != nil {
		return err
	}
	spans := cr.l.Spans
	if err := backend.CheckSameLen([]string{"attention out", "attention dout"}, out, dout); err != nil {
		return err
	}
	if err := backend.CheckAttentionGrads(q, k, dq, dk, dv); err != nil {
		return err
	}
	dqd, dkd, dvd, dod, qd, kd, vd, od, ld := vs[0], vs[1], vs[2], vs[3], vs[4], vs[5], vs[6], vs[7], vs[8]
	d, group := a.HeadDim, a.Heads/a.KVHeads
	qRow, kRow := a.Heads*d, a.KVHeads*d
	maxK := 0
	for _, s := range spans {
		maxK = max(maxK, s.KLen)
	}
	eng := be.ser
	if a.KVHeads < be.workers {
		eng = be.par
	}
	errs := make([]error, a.KVHeads)
	be.parallelTasks(a.KVHeads, func(_, g int) {
		p := make([]float32, attnBlock*maxK)
		dp := make([]float32, attnBlock*maxK)
		di := make([]float32, attnBlock)
		for _, s := range spans {
			for h := g * group; h < (g+1)*group; h++ {
				if err := attnBackwardHead(eng, a, s, h, g, qRow, kRow, d, p, dp, di, dqd, dkd, dvd, dod, qd, kd, vd, od, ld); err != nil {
					errs[g] = err
					return
				}
			}
		}
	})
	for _, e := range errs {
		if e != nil {
			return fmt.Errorf("attention backward: %w", e)
		}
	}
	return nil
}

func attnBackwardHead(eng *gemm.Engine, a backend.Attention, s backend.Span, h, g, qRow, kRow, d int, p, dp, di []float32, dqd, dkd, dvd, dod, qd, kd, vd, od, ld []float32) error {
	kBase, qBase := s.K0*kRow+g*d, s.Q0*qRow+h*d
	past := s.KLen - s.QLen
	for r0 := 0; r0 < s.QLen; r0 += attnBlock {
		r1 := min(r0+attnBlock, s.QLen)
		nb, nk := r1-r0, past+r1
		qb, dob := qBase+r0*qRow, qBase+r0*qRow
		if err := eng.Sgemm(false, true, nb, nk, d, a.Scale, qd[qb:], qRow, kd[kBase:], kRow, 0, p, nk); err != nil {
			return err
		}
		if err := eng.Sgemm(false, true, nb, nk, d, 1, dod[dob:], qRow, vd[kBase:], kRow, 0, dp, nk); err != nil {
			return err
		}
		for i := range nb {
			lim := past + r0 + i + 1
			lse := ld[(s.Q0+r0+i)*a.Heads+h]
			pr, dpr := p[i*nk:(i+1)*nk], dp[i*nk:(i+1)*nk]
			var dsum float64
			orow, gorow := od[qb+i*qRow:qb+i*qRow+d], dod[dob+i*qRow:dob+i*qRow+d]
			for c, x := range orow {
				dsum += float64(x) * float64(gorow[c])
			}
			di[i] = float32(dsum)
			eng.ExpShift(pr[:lim], lse)
			for j, pj := range pr[:lim] {
				dpr[j] = pj * (dpr[j] - di[i])
			}
			clear(pr[lim:])
			clear(dpr[lim:])
		}
		if dqd != nil {
			if err := eng.Sgemm(false, false, nb, d, nk, a.Scale, dp, nk, kd[kBase:], kRow, 1, dqd[qb:], qRow); err != nil {
				return err
			}
		}
		if dkd != nil {
			if err := eng.Sgemm(true, false, nk, d, nb, a.Scale, dp, nk, qd[qb:], qRow, 1, dkd[kBase:], kRow); err != nil {
				return err
			}
		}
		if dvd != nil {
			if err := eng.Sgemm(true, false, nk, d, nb, 1, p, nk, dod[dob:], qRow, 1, dvd[kBase:], kRow); err != nil {
				return err
			}
		}
	}
	return nil
}
