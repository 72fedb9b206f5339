package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// refAttention is causal grouped-query attention by the definition, per
// span, head and query row, in float64. Rows in no span stay zero.
func refAttention(a backend.Attention, spans []backend.Span, tq int, q, k, v []float64) (out, lse []float64) {
	d, group := a.HeadDim, a.Heads/a.KVHeads
	qRow, kRow := a.Heads*d, a.KVHeads*d
	out, lse = make([]float64, tq*qRow), make([]float64, tq*a.Heads)
	for _, s := range spans {
		for h := range a.Heads {
			g := h / group
			for i := range s.QLen {
				qr := (s.Q0 + i) * qRow
				lim := s.KLen - s.QLen + i + 1
				sc := make([]float64, lim)
				m := math.Inf(-1)
				for j := range lim {
					kr := (s.K0 + j) * kRow
					var dot float64
					for c := range d {
						dot += q[qr+h*d+c] * k[kr+g*d+c]
					}
					sc[j] = float64(a.Scale) * dot
					m = max(m, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - m)
					sum += sc[j]
				}
				for j := range sc {
					vr := (s.K0 + j) * kRow
					for c := range d {
						out[qr+h*d+c] += sc[j] / sum * v[vr+g*d+c]
					}
				}
				lse[(s.Q0+i)*a.Heads+h] = m + math.Log(sum)
			}
		}
	}
	return out, lse
}

// Attention checks training-time causal attention — packed sequences,
// a right-padded [B, T] batch, MHA/GQA/MQA, a sequence longer than typical
// row blocks — forward (output and log-sum-exp) and backward by finite
// differences for q, k and v.
func Attention(t *testing.T, b backend.Backend, tol Tolerance) {
	cases := []struct {
		name  string
		a     backend.Attention
		tq    int
		spans []backend.Span
	}{
		{"packed_gqa", backend.Attention{Heads: 4, KVHeads: 2, HeadDim: 8}, 9, backend.PackedSpans([]int{3, 5, 1})},
		{"padded_mha", backend.Attention{Heads: 2, KVHeads: 2, HeadDim: 6}, 12, backend.PaddedSpans(6, []int{4, 6})},
		{"long_mqa", backend.Attention{Heads: 2, KVHeads: 1, HeadDim: 4}, 70, backend.PackedSpans([]int{70})},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, b, tol, uint64(80+i))
			a := c.a
			a.Scale = float32(1 / math.Sqrt(float64(a.HeadDim)))
			nq, nk := c.tq*a.Heads*a.HeadDim, c.tq*a.KVHeads*a.HeadDim
			q, k, v := e.randn(nq, 1), e.randn(nk, 1), e.randn(nk, 1)
			qb, kb, vb := e.up(q), e.up(k), e.up(v)
			ob, lb := e.up(e.randn(nq, 1)), e.zeros(c.tq*a.Heads) // out starts dirty: padded rows must be zeroed
			r := e.spanRows(c.tq, c.spans)
			require.NoError(t, b.AttentionForward(a, r, ob, lb, qb, kb, vb))
			wantOut, wantLSE := refAttention(a, c.spans, c.tq, q, k, v)
			e.close("out", e.down(ob), wantOut)
			e.close("lse", e.down(lb), wantLSE)

			wt := e.randn(nq, 1)
			pq, pk, pv := e.randn(nq, 1), e.randn(nk, 1), e.randn(nk, 1)
			dq, dk, dv := e.up(pq), e.up(pk), e.up(pv)
			require.NoError(t, b.AttentionBackward(a, r, dq, dk, dv, e.up(wt), qb, kb, vb, ob, lb))
			loss := func() float64 {
				o, _ := refAttention(a, c.spans, c.tq, q, k, v)
				return dotw(wt, o)
			}
			e.close("dq", e.grad(dq, pq), fdGrad(q, nil, loss))
			e.close("dk", e.grad(dk, pk), fdGrad(k, nil, loss))
			e.close("dv", e.grad(dv, pv), fdGrad(v, nil, loss))
		})
	}
}

// AttentionDecode checks generation with a KV cache: two sequences prefill
// their prompts into per-sequence cache regions, the new tokens' K/V rows
// are appended with Copy, and the new queries (one for the first sequence,
// three for the second, packed in one q) attend to the whole cache. The
// result must equal the last rows of full causal attention over each
// complete sequence.
func AttentionDecode(t *testing.T, b backend.Backend, tol Tolerance) {
	e := newEnv(t, b, tol, 90)
	a := backend.Attention{Heads: 4, KVHeads: 2, HeadDim: 8}
	a.Scale = float32(1 / math.Sqrt(float64(a.HeadDim)))
	qRow, kRow := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	const capacity = 16
	lens, news := []int{6, 9}, []int{1, 3}

	kCache, vCache := e.zeros(2*capacity*kRow), e.zeros(2*capacity*kRow)
	var decodeQ []float64
	var decodeSpans []backend.Span
	var want []float64
	for sq, l := range lens {
		q, k, v := e.randn(l*qRow, 1), e.randn(l*kRow, 1), e.randn(l*kRow, 1)
		full, _ := refAttention(a, backend.PackedSpans([]int{l}), l, q, k, v)
		n := news[sq]
		p := l - n
		// Prefill: the prompt's K/V go straight into the cache region.
		kp, vp := e.up(k[:p*kRow]), e.up(v[:p*kRow])
		require.NoError(t, b.Copy(kCache, sq*capacity*kRow, kp, 0, p*kRow))
		require.NoError(t, b.Copy(vCache, sq*capacity*kRow, vp, 0, p*kRow))
		po := e.zeros(p * qRow)
		require.NoError(t, b.AttentionForward(a, e.spanRows(p, backend.PackedSpans([]int{p})), po, nil, e.up(q[:p*qRow]), kp, vp))
		e.close(fmt.Sprintf("prefill %d", sq), e.down(po), full[:p*qRow])
		// Append the new tokens' K/V rows after the prompt.
		kn, vn := e.up(k[p*kRow:]), e.up(v[p*kRow:])
		require.NoError(t, b.Copy(kCache, (sq*capacity+p)*kRow, kn, 0, n*kRow))
		require.NoError(t, b.Copy(vCache, (sq*capacity+p)*kRow, vn, 0, n*kRow))
		decodeSpans = append(decodeSpans, backend.Span{Q0: len(decodeQ) / qRow, QLen: n, K0: sq * capacity, KLen: l})
		decodeQ = append(decodeQ, q[p*qRow:]...)
		want = append(want, full[p*qRow:]...)
	}
	out := e.zeros(len(decodeQ))
	lse := e.zeros(len(decodeQ) / a.HeadDim)
	require.NoError(t, b.AttentionForward(a, e.spanRows(len(decodeQ)/qRow, decodeSpans), out, lse, e.up(decodeQ), kCache, vCache))
	e.close("decode", e.down(out), want)
}

func refLMHead(s backend.LMHead, targets []int32, h, w []float64) (logp, ent, lse []float64) {
	logp, ent, lse = make([]float64, s.Rows), make([]float64, s.Rows), make([]float64, s.Rows)
	z := make([]float64, s.Vocab)
	for r := range s.Rows {
		m := math.Inf(-1)
		for j := range s.Vocab {
			var dot float64
			for c := range s.Dim {
				dot += h[r*s.Dim+c] * w[j*s.Dim+c]
			}
			z[j] = float64(s.Scale()) * dot
			m = max(m, z[j])
		}
		var sum, tz float64
		for _, x := range z {
			p := math.Exp(x - m)
			sum += p
			tz += p * x
		}
		lse[r] = m + math.Log(sum)
		// H = −Σ p (z − lse) = lse − Σ p z.
		ent[r] = lse[r] - tz/sum
		if targets[r] >= 0 {
			logp[r] = z[targets[r]] - lse[r]
		}
	}
	return logp, ent, lse
}

// LogProbEntropy checks log p(target), entropy and log-sum-exp of
// softmax(InvTemp·h·Wᵀ), including a row without target, and the backward
// from dL/dlogp and dL/dH to h and W by finite differences, with and
// without the entropy term.
func LogProbEntropy(t *testing.T, b backend.Backend, tol Tolerance) {
	e := newEnv(t, b, tol, 100)
	s := backend.LMHead{Rows: 5, Dim: 6, Vocab: 11, InvTemp: float32(1 / 0.7)}
	targets := []int32{3, 0, 10, -1, 3}
	h, w := e.randn(s.Rows*s.Dim, 1), e.randn(s.Vocab*s.Dim, 1)
	checkLMHead(e, s, targets, h, w, nil, nil)
}

// LogProbEntropyChunked repeats LogProbEntropy on a vocabulary and a row
// count large enough to span several chunks of any reasonable chunking
// (4,200 × 260), checking the backward on sampled coordinates, among them
// vocabulary rows at 4,095/4,096 and 2,047/2,048.
func LogProbEntropyChunked(t *testing.T, b backend.Backend, tol Tolerance) {
	e := newEnv(t, b, tol, 101)
	s := backend.LMHead{Rows: 260, Dim: 8, Vocab: 4200, InvTemp: 1}
	targets := make([]int32, s.Rows)
	for i := range targets {
		targets[i] = int32(e.rng.IntN(s.Vocab))
	}
	targets[7], targets[8] = 4095, 4096
	h, w := e.randn(s.Rows*s.Dim, 0.5), e.randn(s.Vocab*s.Dim, 0.5)
	var hIdx, wIdx []int
	for range 6 {
		hIdx = append(hIdx, e.rng.IntN(len(h)))
		wIdx = append(wIdx, e.rng.IntN(len(w)))
	}
	for _, row := range []int{2047, 2048, 4095, 4096, 4199} {
		wIdx = append(wIdx, row*s.Dim+e.rng.IntN(s.Dim))
	}
	hIdx = append(hIdx, 7*s.Dim, 8*s.Dim+3)
	checkLMHead(e, s, targets, h, w, hIdx, wIdx)
}

func checkLMHead(e *env, s backend.LMHead, targets []int32, h, w []float64, hIdx, wIdx []int) {
	t, b := e.t, e.b
	hb, wb := e.up(h), e.up(w)
	lp, ent, lse := e.zeros(s.Rows), e.zeros(s.Rows), e.zeros(s.Rows)
	require.NoError(t, b.LogProbEntropy(s, targets, lp, ent, lse, hb, wb))
	wantLP, wantEnt, wantLSE := refLMHead(s, targets, h, w)
	e.close("logp", e.down(lp), wantLP)
	e.close("entropy", e.down(ent), wantEnt)
	e.close("lse", e.down(lse), wantLSE)
	// entropy is optional.
	require.NoError(t, b.LogProbEntropy(s, targets, lp, nil, lse, hb, wb))
	e.close("logp without entropy", e.down(lp), wantLP)

	// Finite differences of the reference's (logp, entropy) per perturbed
	// coordinate, shared by the two losses below.
	ref := func() []float64 {
		l, en, _ := refLMHead(s, targets, h, w)
		return append(l, en...)
	}
	jh, jw := fdJacobian(h, hIdx, ref), fdJacobian(w, wIdx, ref)
	for _, withEntropy := range []bool{true, false} {
		gl, ge := e.randn(s.Rows, 1), e.randn(s.Rows, 1)
		var geb, entb backend.Buffer
		if withEntropy {
			geb, entb = e.up(ge), ent
		} else {
			clear(ge)
		}
		ph, pw := e.randn(len(h), 1), e.randn(len(w), 1)
		dh, dw := e.up(ph), e.up(pw)
		require.NoError(t, b.LogProbEntropyBackward(s, targets, dh, dw, e.up(gl), geb, hb, wb, lse, entb))
		wt := append(append([]float64(nil), gl...), ge...)
		name := fmt.Sprintf("entropy=%v", withEntropy)
		e.close("dh "+name, pick(e.grad(dh, ph), jh.idx), jh.grad(wt))
		e.close("dW "+name, pick(e.grad(dw, pw), jw.idx), jw.grad(wt))
	}
}

// jacobian holds finite-difference columns ∂f/∂x_i for coordinates idx.
type jacobian struct {
	idx  []int
	cols [][]float64
}

// grad returns, for each coordinate, ∂(wt·f)/∂x_i.
func (j jacobian) grad(wt []float64) []float64 {
	g := make([]float64, len(j.idx))
	for n, col := range j.cols {
		g[n] = dotw(wt, col)
	}
	return g
}

// fdJacobian is fdGrad for a vector-valued reference f.
func fdJacobian(x []float64, idx []int, f func() []float64) jacobian {
	const h = 1e-5
	if idx == nil {
		idx = make([]int, len(x))
		for i := range idx {
			idx[i] = i
		}
	}
	j := jacobian{idx: idx}
	for _, i := range idx {
		old := x[i]
		x[i] = old + h
		fp := f()
		x[i] = old - h
		fm := f()
		x[i] = old
		for k := range fp {
			fp[k] = (fp[k] - fm[k]) / (2 * h)
		}
		j.cols = append(j.cols, fp)
	}
	return j
}

// Logits checks the projection of selected rows only.
func Logits(t *testing.T, b backend.Backend, tol Tolerance) {
	e := newEnv(t, b, tol, 110)
	s := backend.LMHead{Rows: 5, Dim: 6, Vocab: 13, InvTemp: 2}
	rows := []int32{4, 0, 4}
	h, w := e.randn(s.Rows*s.Dim, 1), e.randn(s.Vocab*s.Dim, 1)
	out := e.zeros(len(rows) * s.Vocab)
	require.NoError(t, b.Logits(s, rows, out, e.up(h), e.up(w)))
	want := make([]float64, 0, len(rows)*s.Vocab)
	for _, r := range rows {
		for j := range s.Vocab {
			var dot float64
			for c := range s.Dim {
				dot += h[int(r)*s.Dim+c] * w[j*s.Dim+c]
			}
			want = append(want, 2*dot)
		}
	}
	e.close("logits", e.down(out), want)
}
