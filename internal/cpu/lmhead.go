package cpu

import (
	"fmt"
	"math"

	"github.com/agentrl/agentrl/internal/gemm"
	"github.com/agentrl/agentrl/policy/backend"
)

// Chunking of the vocabulary projection: a [lmRows, lmVocab] block of
// logits (4 MiB) is the largest piece ever held, whatever the vocabulary
// (151,936 for Qwen) or the number of positions.
const (
	lmRows  = 256
	lmVocab = 4096
)

// LogProbEntropy computes log p(target) and the entropy of softmax(z),
// z = InvTemp·(h·Wᵀ) (the product rounded to float32, then multiplied by
// InvTemp in float32), chunk by chunk with an online log-sum-exp
// (lseState). Each row's result depends on that row alone: the product
// is batch-invariant (gemm.Engine.Sgemm) and the chunks of the
// vocabulary are fixed by its size, so SampleRows, which runs the same
// code on a row of Logits, records the same log-probabilities bit for
// bit.
func (be *Backend) LogProbEntropy(s backend.LMHead, targets []int32, logp, entropy, lse, h, w backend.Buffer) error {
	v, err := be.views("logprob", logp, entropy, lse, h, w)
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
	lpd, ed, ld, hd, wd := v[0], v[1], v[2], v[3], v[4]
	scale := s.Scale()
	z := make([]float32, min(lmRows, s.Rows)*min(lmVocab, s.Vocab))
	for r0 := 0; r0 < s.Rows; r0 += lmRows {
		nr := min(lmRows, s.Rows-r0)
		st, zt := make([]lseState, nr), make([]float64, nr)
		for i := range st {
			st[i] = newLSE()
		}
		for c0 := 0; c0 < s.Vocab; c0 += lmVocab {
			nc := min(lmVocab, s.Vocab-c0)
			if err := be.par.Sgemm(false, true, nr, nc, s.Dim, 1, hd[r0*s.Dim:], s.Dim, wd[c0*s.Dim:], s.Dim, 0, z, nc); err != nil {
				return fmt.Errorf("logprob rows %d, vocab %d: %w", r0, c0, err)
			}
			be.parallelFor(nr, 8, func(lo, hi int) {
				ex := make([]float32, nc)
				for i := lo; i < hi; i++ {
					row := z[i*nc : (i+1)*nc]
					scaleLogits(row, scale)
					if tg := int(targets[r0+i]); tg >= c0 && tg < c0+nc {
						zt[i] = float64(row[tg-c0])
					}
					st[i].add(be.ser, row, ex)
				}
			})
		}
		for i := range nr {
			l := st[i].lse()
			ld[r0+i] = float32(l)
			if targets[r0+i] >= 0 {
				lpd[r0+i] = logProbOf(zt[i], l)
			} else {
				lpd[r0+i] = 0
			}
			if ed != nil {
				ed[r0+i] = float32(l - st[i].t/st[i].s)
			}
		}
	}
	return nil
}

// lseState is the online log-sum-exp of a row of logits taken in chunks,
// in float64: the running maximum m, s = Σ e^(z−m) and t = Σ e^(z−m)·z,
// both rescaled by e^(m_old−m_new) when the maximum grows. At the end
// lse = m + log s and the entropy is lse − t/s, since
// H = −Σ p(z − lse) = lse − E_p[z].
type lseState struct{ m, s, t float64 }

func newLSE() lseState { return lseState{m: math.Inf(-1)} }

// add folds a chunk of logits into st; ex is scratch of len(row).
func (st *lseState) add(eng *gemm.Engine, row, ex []float32) {
	cm := float32(math.Inf(-1))
	for _, x := range row {
		cm = max(cm, x)
	}
	if float64(cm) > st.m {
		f := math.Exp(st.m - float64(cm))
		st.s *= f
		st.t *= f
		st.m = float64(cm)
	}
	copy(ex, row)
	cs := eng.ExpShift(ex, float32(st.m))
	var ct float64
	for j, e := range ex {
		ct += float64(e) * float64(row[j])
	}
	st.s += cs
	st.t += ct
}

// lse is the row's log-sum-exp, m + log s.
func (st *lseState) lse() float64 { return st.m + math.Log(st.s) }

// logProbOf is log p = z_target − lse, rounded to float32.
func logProbOf(zt, lse float64) float32 { return float32(zt - lse) }

// scaleLogits multiplies logits by the inverse temperature in float32
// (nothing to do at 1).
func scaleLogits(z []float32, scale float32) {
	if scale == 1 {
		return
	}
	for j := range z {
		z[j] *= scale
	}
}

// rowLogProb is LogProbEntropy's log p(target) for one row of logits at
// temperature 1 (z = h·Wᵀ, as Logits computes it): the same scaling by
// scale, the same vocabulary chunks and the same online log-sum-exp, so
// the same bits. zc and ex are scratch of min(len(z), lmVocab) floats.
func (be *Backend) rowLogProb(z []float32, target int, scale float32, zc, ex []float32) float32 {
	st := newLSE()
	var zt float64
	for c0 := 0; c0 < len(z); c0 += lmVocab {
		nc := min(lmVocab, len(z)-c0)
		row := zc[:nc]
		copy(row, z[c0:c0+nc])
		scaleLogits(row, scale)
		if target >= c0 && target < c0+nc {
			zt = float64(row[target-c0])
		}
		st.add(be.ser, row, ex[:nc])
	}
	return logProbOf(zt, st.lse())
}

// LogProbEntropyBackward recomputes each logits chunk and accumulates
// dh += InvTemp·dZ·W_chunk and dW_chunk += InvTemp·dZᵀ·h with
// dz_j = dlogp·(1[j = target] − p_j) − dH·p_j·(log p_j + H): the first term
// is ∂log p_t/∂z_j, the second ∂H/∂z_j for H = −Σ p log p.
func (be *Backend) LogProbEntropyBackward(s backend.LMHead, targets []int32, dh, dw, dlogp, dentropy, h, w, lse, entropy backend.Buffer) error {
	v, err := be.views("logprob backward", dh, dw, dlogp, dentropy, h, w, lse, entropy)
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
	dhd, dwd, gl, ge, hd, wd, ld, ed := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
	if dhd == nil && dwd == nil {
		return nil
	}
	scale := s.Scale()
	z := make([]float32, min(lmRows, s.Rows)*min(lmVocab, s.Vocab))
	for r0 := 0; r0 < s.Rows; r0 += lmRows {
		nr := min(lmRows, s.Rows-r0)
		for c0 := 0; c0 < s.Vocab; c0 += lmVocab {
			nc := min(lmVocab, s.Vocab-c0)
			// z as the forward computed it: the product, then the scale.
			if err := be.par.Sgemm(false, true, nr, nc, s.Dim, 1, hd[r0*s.Dim:], s.Dim, wd[c0*s.Dim:], s.Dim, 0, z, nc); err != nil {
				return fmt.Errorf("logprob backward rows %d, vocab %d: %w", r0, c0, err)
			}
			be.parallelFor(nr, 8, func(lo, hi int) {
				p := make([]float32, nc)
				for i := lo; i < hi; i++ {
					r := r0 + i
					row := z[i*nc : (i+1)*nc]
					scaleLogits(row, scale)
					l := ld[r]
					var gL, gH, ent float32
					if targets[r] >= 0 {
						gL = gl[r]
					}
					if ge != nil {
						gH, ent = ge[r], ed[r]
					}
					copy(p, row)
					be.ser.ExpShift(p, l)
					for j, x := range row {
						row[j] = -gL*p[j] - gH*p[j]*((x-l)+ent)
					}
					if tg := int(targets[r]); tg >= c0 && tg < c0+nc {
						row[tg-c0] += gL
					}
				}
			})
			if dhd != nil {
				if err := be.par.Sgemm(false, false, nr, s.Dim, nc, scale, z, nc, wd[c0*s.Dim:], s.Dim, 1, dhd[r0*s.Dim:], s.Dim); err != nil {
					return fmt.Errorf("logprob backward dh: %w", err)
				}
			}
			if dwd != nil {
				if err := be.par.Sgemm(true, false, nc, s.Dim, nr, scale, z, nc, hd[r0*s.Dim:], s.Dim, 1, dwd[c0*s.Dim:], s.Dim); err != nil {
					return fmt.Errorf("logprob backward dW: %w", err)
				}
			}
		}
	}
	return nil
}

// Logits projects only the selected rows of h: out = InvTemp·(h[rows]·Wᵀ),
// rounded as LogProbEntropy rounds its logits.
func (be *Backend) Logits(s backend.LMHead, rows []int32, out, h, w backend.Buffer) error {
	v, err := be.views("logits", out, h, w)
	if err != nil {
		return err
	}
	if err := backend.CheckLogits(s, rows, out, h, w); err != nil {
		return err
	}
	od, hd, wd := v[0], v[1], v[2]
	sel := make([]float32, len(rows)*s.Dim)
	for i, r := range rows {
		copy(sel[i*s.Dim:(i+1)*s.Dim], hd[int(r)*s.Dim:(int(r)+1)*s.Dim])
	}
	if err := be.par.Sgemm(false, true, len(rows), s.Vocab, s.Dim, 1, sel, s.Dim, wd, s.Dim, 0, od, s.Vocab); err != nil {
		return fmt.Errorf("logits: %w", err)
	}
	scaleLogits(od[:len(rows)*s.Vocab], s.Scale())
	return nil
}
