package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/agentrl/agentrl/policy/backend"
)

func randBuf(b *testing.B, be *Backend, n int, r *rand.Rand) backend.Buffer {
	b.Helper()
	buf, err := be.Alloc(n)
	if err != nil {
		b.Fatal(err)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	if err := be.Upload(buf, 0, x); err != nil {
		b.Fatal(err)
	}
	return buf
}

// mustRows makes Rows of n rows at positions 0…n−1 with spans.
func mustRows(b testing.TB, be *Backend, n int, spans []backend.Span) backend.Rows {
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(i)
	}
	r, err := be.NewRows(pos, spans)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// Attention at a Qwen3-0.6B-like layout (16 query heads, 8 KV heads,
// head dim 128) over 512 packed tokens (two sequences of 256).
func BenchmarkAttention(b *testing.B) {
	be := New()
	r := rand.New(rand.NewPCG(1, 1))
	a := backend.Attention{Heads: 16, KVHeads: 8, HeadDim: 128, Scale: float32(1 / math.Sqrt(128))}
	const t = 512
	spans := mustRows(b, be, t, backend.PackedSpans([]int{256, 256}))
	q := randBuf(b, be, t*16*128, r)
	k, v := randBuf(b, be, t*8*128, r), randBuf(b, be, t*8*128, r)
	out, lse := randBuf(b, be, t*16*128, r), randBuf(b, be, t*16, r)
	dq, dk, dv := randBuf(b, be, t*16*128, r), randBuf(b, be, t*8*128, r), randBuf(b, be, t*8*128, r)
	// Causal: Σ over spans of L(L+1)/2 scores per head, 2 GEMMs of 2·D flops.
	flops := 2.0 * 2 * 128 * 16 * 2 * (256 * 257 / 2)
	b.Run("forward", func(b *testing.B) {
		for b.Loop() {
			if err := be.AttentionForward(a, spans, out, lse, q, k, v); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("backward", func(b *testing.B) {
		for b.Loop() {
			if err := be.AttentionBackward(a, spans, dq, dk, dv, out, q, k, v, out, lse); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(2.5*flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("decode", func(b *testing.B) {
		// One new token per sequence against 256 cached keys.
		dspans := mustRows(b, be, 2, []backend.Span{{Q0: 0, QLen: 1, K0: 0, KLen: 256}, {Q0: 1, QLen: 1, K0: 256, KLen: 256}})
		q1, o1, l1 := randBuf(b, be, 2*16*128, r), randBuf(b, be, 2*16*128, r), randBuf(b, be, 2*16, r)
		for b.Loop() {
			if err := be.AttentionForward(a, dspans, o1, l1, q1, k, v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// LogProbEntropy over 256 positions, hidden 1024, a 32,768-token
// vocabulary (a fifth of Qwen's, to keep the benchmark short; the cost is
// linear in the vocabulary).
func BenchmarkLogProbEntropy(b *testing.B) {
	be := New()
	r := rand.New(rand.NewPCG(2, 2))
	s := backend.LMHead{Rows: 256, Dim: 1024, Vocab: 32768}
	h, w := randBuf(b, be, s.Rows*s.Dim, r), randBuf(b, be, s.Vocab*s.Dim, r)
	lp, ent, lse := randBuf(b, be, s.Rows, r), randBuf(b, be, s.Rows, r), randBuf(b, be, s.Rows, r)
	dh, dw := randBuf(b, be, s.Rows*s.Dim, r), randBuf(b, be, s.Vocab*s.Dim, r)
	targets := make([]int32, s.Rows)
	for i := range targets {
		targets[i] = int32(r.IntN(s.Vocab))
	}
	flops := 2.0 * float64(s.Rows) * float64(s.Dim) * float64(s.Vocab)
	b.Run("forward", func(b *testing.B) {
		for b.Loop() {
			if err := be.LogProbEntropy(s, targets, lp, ent, lse, h, w); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("backward", func(b *testing.B) {
		for b.Loop() {
			if err := be.LogProbEntropyBackward(s, targets, dh, dw, lp, ent, h, w, lse, ent); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(3*flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

// RMSNorm and SwiGLU at 512 tokens of a 1024/3072-wide block: memory-bound
// passes, reported as time per call.
func BenchmarkElementwise(b *testing.B) {
	be := New()
	r := rand.New(rand.NewPCG(3, 3))
	x, w := randBuf(b, be, 512*1024, r), randBuf(b, be, 1024, r)
	out, rstd := randBuf(b, be, 512*1024, r), randBuf(b, be, 512, r)
	b.Run("rmsnorm_fwd", func(b *testing.B) {
		for b.Loop() {
			if err := be.RMSNormForward(512, 1024, 1e-6, out, rstd, x, w); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rmsnorm_bwd", func(b *testing.B) {
		for b.Loop() {
			if err := be.RMSNormBackward(512, 1024, out, w, x, x, w, rstd); err != nil {
				b.Fatal(err)
			}
		}
	})
	g, u, o := randBuf(b, be, 512*3072, r), randBuf(b, be, 512*3072, r), randBuf(b, be, 512*3072, r)
	b.Run("swiglu_fwd", func(b *testing.B) {
		for b.Loop() {
			if err := be.SwiGLUForward(o, g, u); err != nil {
				b.Fatal(err)
			}
		}
	})
}
