//go:build agentrl_cuda && cgo

package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/policy/backend"
)

// Benchmarks run each shape on the GPU (in every precision where it
// matters) and on internal/cpu with the same inputs, and report achieved
// FLOP rates, so `go test -bench` prints the GPU/CPU comparison side by
// side; see RUN_ON_GPU.md for the command.

type benchBackend struct {
	name string
	be   backend.Backend
	sync func() error
}

func benchBackends(b *testing.B) []benchBackend {
	out := []benchBackend{}
	for _, p := range []Precision{BF16, TF32, FP32} {
		g := newOrSkip(b, WithPrecision(p))
		out = append(out, benchBackend{"gpu-" + p.String(), g, g.Synchronize})
	}
	c := cpu.New()
	return append(out, benchBackend{"cpu", c, func() error { return nil }})
}

func benchUpload(b *testing.B, be backend.Backend, n int, rng *rand.Rand) backend.Buffer {
	buf, err := be.Alloc(n)
	if err != nil {
		b.Fatal(err)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	if err := be.Upload(buf, 0, x); err != nil {
		b.Fatal(err)
	}
	return buf
}

func run(b *testing.B, bb benchBackend, flops float64, f func() error) {
	if err := f(); err != nil { // warm-up: JIT, cuBLAS heuristics, cache
		b.Fatal(err)
	}
	if err := bb.sync(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
		if err := bb.sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkGemm: C = A·Bᵀ, 2048³ (the Linear layout).
func BenchmarkGemm(b *testing.B) {
	const n = 2048
	for _, bb := range benchBackends(b) {
		b.Run(bb.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			x, y, z := benchUpload(b, bb.be, n*n, rng), benchUpload(b, bb.be, n*n, rng), benchUpload(b, bb.be, n*n, rng)
			g := backend.Gemm{M: n, N: n, K: n, Alpha: 1, TransB: true}
			run(b, bb, 2*n*n*n, func() error { return bb.be.Gemm(g, x, y, z) })
		})
	}
}

// attention shape: 4 packed sequences of 512, 16 query heads, 4 KV heads,
// head dim hd (128: a Qwen3-1.7B-like layer); scripts/sdpa_bench.py's
// defaults.
func attnShape(hd int) (backend.Attention, []backend.Span, int) {
	a := backend.Attention{Heads: 16, KVHeads: 4, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd)))}
	return a, backend.PackedSpans([]int{512, 512, 512, 512}), 2048
}

// attnHeadDims are the head dims the attention benchmarks run, one
// sub-benchmark each (hd128/…, hd64/…).
var attnHeadDims = []int{128, 64}

// causal attention FLOPs: 2 products of T²/2·D per head and sequence.
func attnFlops(a backend.Attention, spans []backend.Span) float64 {
	var f float64
	for _, s := range spans {
		f += 2 * 2 * float64(s.QLen) * float64(s.KLen) / 2 * float64(a.HeadDim) * float64(a.Heads)
	}
	return f
}

// attnBackends are the attention kernels side by side: the GPU's
// tensor-core and float32 kernels (FP32 GEMM precision: attention uses no
// GEMM) and the CPU backend.
func attnBackends(b *testing.B) []benchBackend {
	out := []benchBackend{}
	for _, k := range []AttentionKernels{AttentionTensorCores, AttentionFP32} {
		g := newOrSkip(b, WithPrecision(FP32), WithAttention(k))
		out = append(out, benchBackend{"gpu-attn-" + k.String(), g, g.Synchronize})
	}
	c := cpu.New()
	return append(out, benchBackend{"cpu", c, func() error { return nil }})
}

// BenchmarkAttentionForward: tensor cores against the float32 kernel (and
// the CPU); scripts/sdpa_bench.py times PyTorch's
// scaled_dot_product_attention on the same shape for comparison.
func BenchmarkAttentionForward(b *testing.B) {
	backends := attnBackends(b)
	for _, hd := range attnHeadDims {
		a, spans, t := attnShape(hd)
		for _, bb := range backends {
			b.Run(fmt.Sprintf("hd%d/%s", hd, bb.name), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(2, 2))
				q, k, v := benchUpload(b, bb.be, t*a.Heads*a.HeadDim, rng), benchUpload(b, bb.be, t*a.KVHeads*a.HeadDim, rng), benchUpload(b, bb.be, t*a.KVHeads*a.HeadDim, rng)
				o, l := benchUpload(b, bb.be, t*a.Heads*a.HeadDim, rng), benchUpload(b, bb.be, t*a.Heads, rng)
				r := seqRows(b, bb.be, t, spans)
				run(b, bb, attnFlops(a, spans), func() error { return bb.be.AttentionForward(a, r, o, l, q, k, v) })
			})
		}
	}
}

func BenchmarkAttentionBackward(b *testing.B) {
	backends := attnBackends(b)
	for _, hd := range attnHeadDims {
		a, spans, t := attnShape(hd)
		for _, bb := range backends {
			b.Run(fmt.Sprintf("hd%d/%s", hd, bb.name), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(3, 3))
				nq, nk := t*a.Heads*a.HeadDim, t*a.KVHeads*a.HeadDim
				q, k, v := benchUpload(b, bb.be, nq, rng), benchUpload(b, bb.be, nk, rng), benchUpload(b, bb.be, nk, rng)
				o, l := benchUpload(b, bb.be, nq, rng), benchUpload(b, bb.be, t*a.Heads, rng)
				r := seqRows(b, bb.be, t, spans)
				if err := bb.be.AttentionForward(a, r, o, l, q, k, v); err != nil {
					b.Fatal(err)
				}
				do, dq, dk, dv := benchUpload(b, bb.be, nq, rng), benchUpload(b, bb.be, nq, rng), benchUpload(b, bb.be, nk, rng), benchUpload(b, bb.be, nk, rng)
				// Backward: 5 products of the forward's size (FlashAttention-2's
				// count; the tensor-core and float32 kernels recompute S and dP
				// in both the dQ and the dK/dV kernel, 7 products, to avoid atomics).
				run(b, bb, 2.5*attnFlops(a, spans), func() error { return bb.be.AttentionBackward(a, r, dq, dk, dv, do, q, k, v, o, l) })
			})
		}
	}
}

// BenchmarkDecode: 32 sequences, one new token each, against 2,048 cached
// keys (split-K decoding).
func BenchmarkDecode(b *testing.B) {
	a := backend.Attention{Heads: 16, KVHeads: 4, HeadDim: 128, Scale: float32(1 / math.Sqrt(128))}
	const seqs, ctx = 32, 2048
	spans := make([]backend.Span, seqs)
	for i := range spans {
		spans[i] = backend.Span{Q0: i, QLen: 1, K0: i * ctx, KLen: ctx}
	}
	for _, bb := range benchBackends(b)[2:] {
		b.Run(bb.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(4, 4))
			q := benchUpload(b, bb.be, seqs*a.Heads*a.HeadDim, rng)
			k, v := benchUpload(b, bb.be, seqs*ctx*a.KVHeads*a.HeadDim, rng), benchUpload(b, bb.be, seqs*ctx*a.KVHeads*a.HeadDim, rng)
			o, l := benchUpload(b, bb.be, seqs*a.Heads*a.HeadDim, rng), benchUpload(b, bb.be, seqs*a.Heads, rng)
			r := seqRows(b, bb.be, seqs, spans)
			run(b, bb, 4*seqs*ctx*float64(a.HeadDim*a.Heads), func() error { return bb.be.AttentionForward(a, r, o, l, q, k, v) })
		})
	}
}

// BenchmarkLogProbEntropy: 512 positions, hidden 1024, vocabulary 32,768.
func BenchmarkLogProbEntropy(b *testing.B) {
	s := backend.LMHead{Rows: 512, Dim: 1024, Vocab: 32768, InvTemp: 1}
	targets := make([]int32, s.Rows)
	for i := range targets {
		targets[i] = int32(i * 61 % s.Vocab)
	}
	for _, bb := range benchBackends(b) {
		b.Run(bb.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(5, 5))
			h, w := benchUpload(b, bb.be, s.Rows*s.Dim, rng), benchUpload(b, bb.be, s.Vocab*s.Dim, rng)
			lp, e, l := benchUpload(b, bb.be, s.Rows, rng), benchUpload(b, bb.be, s.Rows, rng), benchUpload(b, bb.be, s.Rows, rng)
			run(b, bb, 2*float64(s.Rows)*float64(s.Dim)*float64(s.Vocab), func() error { return bb.be.LogProbEntropy(s, targets, lp, e, l, h, w) })
		})
	}
}
