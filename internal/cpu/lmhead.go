package cpu

import (
	"fmt"
	"math"

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
// z = InvTemp·h·Wᵀ, chunk by chunk with an online log-sum-exp. Per row it
// keeps, in float64, the running maximum m, s = Σ e^(z−m) and
// t = Σ e^(z−m)·z (both rescaled by e^(m_old−m_new) when the maximum
// grows); at the end lse = m + log s and H = lse − t/s, since
// H = −Σ p(z − lse) = lse − E_p[z].
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
		m := make([]float64, nr)
		for i := range m {
			m[i] = math.Inf(-1)
		}
		sum, tz, zt := make([]float64, nr), make([]float64, nr), make([]float64, nr)
		for c0 := 0; c0 < s.Vocab; c0 += lmVocab {
			nc := min(lmVocab, s.Vocab-c0)
			if err := be.par.Sgemm(false, true, nr, nc, s.Dim, scale, hd[r0*s.Dim:], s.Dim, wd[c0*s.Dim:], s.Dim, 0, z, nc); err != nil {
				return fmt.Errorf("logprob rows %d, vocab %d: %w", r0, c0, err)
			}
			be.parallelFor(nr, 8, func(lo, hi int) {
				ex := make([]float32, nc)
				for i := lo; i < hi; i++ {
					row := z[i*nc : (i+1)*nc]
					if tg := int(targets[r0+i]); tg >= c0 && tg < c0+nc {
						zt[i] = float64(row[tg-c0])
					}
					cm := float32(math.Inf(-1))
					for _, x := range row {
						cm = max(cm, x)
					}
					if float64(cm) > m[i] {
						f := math.Exp(m[i] - float64(cm))
						sum[i] *= f
						tz[i] *= f
						m[i] = float64(cm)
					}
					copy(ex, row)
					cs := be.ser.ExpShift(ex, float32(m[i]))
					var ct float64
					for j, e := range ex {
						ct += float64(e) * float64(row[j])
					}
					sum[i] += cs
					tz[i] += ct
				}
			})
		}
		for i := range nr {
			l := m[i] + math.Log(sum[i])
			ld[r0+i] = float32(l)
			if targets[r0+i] >= 0 {
				lpd[r0+i] = float32(zt[i] - l)
			} else {
				lpd[r0+i] = 0
			}
			if ed != nil {
				ed[r0+i] = float32(l - tz[i]/sum[i])
			}
		}
	}
	return nil
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
			if err := be.par.Sgemm(false, true, nr, nc, s.Dim, scale, hd[r0*s.Dim:], s.Dim, wd[c0*s.Dim:], s.Dim, 0, z, nc); err != nil {
				return fmt.Errorf("logprob backward rows %d, vocab %d: %w", r0, c0, err)
			}
			be.parallelFor(nr, 8, func(lo, hi int) {
				p := make([]float32, nc)
				for i := lo; i < hi; i++ {
					r := r0 + i
					row := z[i*nc : (i+1)*nc]
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

// Logits projects only the selected rows of h: out = InvTemp·h[rows]·Wᵀ.
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
	if err := be.par.Sgemm(false, true, len(rows), s.Vocab, s.Dim, s.Scale(), sel, s.Dim, wd, s.Dim, 0, od, s.Vocab); err != nil {
		return fmt.Errorf("logits: %w", err)
	}
	return nil
}
