//go:build agentrl_cuda && cgo

package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/policy/backend/backendtest"
)

// newOrSkip opens the GPU, or skips the test on a machine without one —
// unless AGENTRL_REQUIRE_GPU is set (scripts/gpu_check.sh sets it), where a
// missing GPU is a failure. A failure must be ErrNoDriver or ErrNoDevice:
// reaching this line at all shows that a missing driver did not exit.
func newOrSkip(t testing.TB, opts ...Option) *Backend {
	t.Helper()
	be, err := New(context.Background(), opts...)
	if err != nil {
		require.True(t, errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice), "unexpected error: %v", err)
		if os.Getenv("AGENTRL_REQUIRE_GPU") != "" {
			t.Fatalf("AGENTRL_REQUIRE_GPU is set but no GPU: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	t.Cleanup(func() { require.NoError(t, be.Close()) })
	t.Logf("backend: %s", be.Name())
	return be
}

// TestNoDriverIsAnError runs everywhere with the tag: on a machine without
// a driver New returns ErrNoDriver (the process does not exit, unlike with
// gorgonia.org/cu); with one it opens the device.
func TestNoDriverIsAnError(t *testing.T) {
	be, err := New(context.Background())
	if err != nil {
		require.True(t, errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice), "%v", err)
		t.Logf("no GPU here, as expected on a build machine: %v", err)
		return
	}
	require.NoError(t, be.Close())
	require.ErrorIs(t, be.Fill(nil, 0), backend.ErrBuffer)
	_, err = be.Alloc(1)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, be.Close(), "Close is idempotent")
}

// TestMissingCuBLASIsAnError: a device whose cuBLAS cannot be loaded is
// refused with ErrNoCuBLAS (not opened on the slow tiled GEMM without a
// word), unless the tiled GEMM is allowed; then Name says it runs.
func TestMissingCuBLASIsAnError(t *testing.T) {
	t.Setenv(AllowNoCuBLASEnv, "")
	missing := WithCuBLAS("libcublas-not-installed.so.99")
	if _, err := New(context.Background(), missing); !errors.Is(err, ErrNoCuBLAS) {
		newOrSkip(t) // no GPU here: skip (or fail under AGENTRL_REQUIRE_GPU)
		t.Fatalf("New without cuBLAS: %v, want ErrNoCuBLAS", err)
	}
	be := newOrSkip(t, missing, WithCuBLASFallback(true))
	require.Contains(t, be.Name(), "no cuBLAS")
	t.Setenv(AllowNoCuBLASEnv, "1")
	be = newOrSkip(t, missing)
	require.Contains(t, be.Name(), "no cuBLAS", "%s=1 allows it too", AllowNoCuBLASEnv)
}

func TestConformanceFP32(t *testing.T) {
	be := newOrSkip(t, WithPrecision(FP32))
	require.False(t, be.TensorCoreAttention(8), "FP32 keeps float32 attention")
	backendtest.Run(t, be, backendtest.DefaultTolerance())
}

// The fallback GEMM kernel (no cuBLAS) in FP32 meets the same tolerance.
func TestConformanceFP32NoCuBLAS(t *testing.T) {
	backendtest.Run(t, newOrSkip(t, WithPrecision(FP32), WithCuBLAS()), backendtest.DefaultTolerance())
}

// bf16Tolerance: GEMM inputs rounded to 8 significant bits (relative error
// 2^-9 each), float32 accumulation; the suite's products have K ≤ 70.
func bf16Tolerance() backendtest.Tolerance { return backendtest.Tolerance{Abs: 1e-2, Rel: 2e-2} }

// TestConformanceBF16 runs the suite with bf16 GEMM inputs and attention on
// tensor cores: the suite's head dims (2 to 8) run on the 64-wide kernels,
// zero-padded, so its attention and finite-difference gradient checks
// exercise the tensor-core forward and backward (the single-token decode
// spans go to split-K decoding in float32).
func TestConformanceBF16(t *testing.T) {
	be := newOrSkip(t, WithPrecision(BF16))
	require.True(t, be.TensorCoreAttention(8), "attention must run on tensor cores here")
	backendtest.Run(t, be, bf16Tolerance())
}

func TestConformanceBF16NoCuBLAS(t *testing.T) {
	be := newOrSkip(t, WithPrecision(BF16), WithCuBLAS())
	require.True(t, be.TensorCoreAttention(8), "attention must run on tensor cores here")
	backendtest.Run(t, be, bf16Tolerance())
}

func TestConformanceTF32(t *testing.T) {
	backendtest.Run(t, newOrSkip(t, WithPrecision(TF32)), backendtest.Tolerance{Abs: 5e-3, Rel: 5e-3})
}

func randn(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

func upload(t testing.TB, b backend.Backend, x []float32) backend.Buffer {
	t.Helper()
	buf, err := b.Alloc(len(x))
	require.NoError(t, err)
	require.NoError(t, b.Upload(buf, 0, x))
	return buf
}

func download(t testing.TB, b backend.Backend, buf backend.Buffer) []float32 {
	t.Helper()
	x := make([]float32, buf.Len())
	require.NoError(t, b.Download(x, buf, 0))
	return x
}

// closeRel requires |got − want| ≤ rel·max|want| element by element.
// seqRows makes be's Rows of n rows at positions 0…n−1 with spans, freed
// when the test ends.
func seqRows(t testing.TB, be backend.Backend, n int, spans []backend.Span) backend.Rows {
	t.Helper()
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(i)
	}
	r, err := be.NewRows(pos, spans)
	require.NoError(t, err)
	t.Cleanup(func() { _ = be.FreeRows(r) })
	return r
}

func closeRel(t *testing.T, name string, got, want []float32, rel float64) {
	t.Helper()
	require.Len(t, got, len(want))
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	for i := range want {
		require.False(t, math.IsNaN(float64(got[i])), "%s[%d] is NaN", name, i)
		require.InDelta(t, want[i], got[i], rel*scale+1e-6, "%s[%d]", name, i)
	}
}

// TestBF16GemmUsesBF16Inputs pins what BF16 precision computes: the exact
// product of bf16-rounded inputs accumulated in float32, so the result is
// compared with a float64 product of roundBF16(a), roundBF16(b) at a
// float32-accumulation tolerance — far tighter than the distance to the
// unrounded product, which the test also checks is visible.
func TestBF16GemmUsesBF16Inputs(t *testing.T) {
	for _, opts := range [][]Option{{WithPrecision(BF16)}, {WithPrecision(BF16), WithCuBLAS()}} {
		be := newOrSkip(t, opts...)
		rng := rand.New(rand.NewPCG(1, 2))
		const m, n, k = 64, 96, 512
		a, b := randn(rng, m*k, 1), randn(rng, k*n, 1)
		c := make([]float32, m*n)
		cb := upload(t, be, c)
		require.NoError(t, be.Gemm(backend.Gemm{M: m, N: n, K: k, Alpha: 1}, upload(t, be, a), upload(t, be, b), cb))
		got := download(t, be, cb)
		var maxExact, maxRounded float64
		for i := range m {
			for j := range n {
				var sr, se float64
				for p := range k {
					sr += float64(roundBF16(a[i*k+p])) * float64(roundBF16(b[p*n+j]))
					se += float64(a[i*k+p]) * float64(b[p*n+j])
				}
				maxRounded = max(maxRounded, math.Abs(float64(got[i*n+j])-sr))
				maxExact = max(maxExact, math.Abs(float64(got[i*n+j])-se))
			}
		}
		// float32 accumulation of 512 terms of size ~1: error ≲ 1e-3.
		require.Less(t, maxRounded, 2e-3, "%s", be.Name())
		require.Greater(t, maxExact, 10*maxRounded, "bf16 rounding must be visible")
	}
}

// TestAgainstCPU runs realistic shapes on the GPU (FP32) and on the CPU
// backend with the same inputs: head dim 128, GQA, packed sequences longer
// than a tile, a decode step over a 1,000-key cache (4 splits), and a
// vocabulary of 40,000 (two chunks).
func TestAgainstCPU(t *testing.T) {
	g := newOrSkip(t, WithPrecision(FP32))
	c := cpu.New()
	rng := rand.New(rand.NewPCG(5, 6))
	both := func(x []float32) (backend.Buffer, backend.Buffer) { return upload(t, g, x), upload(t, c, x) }

	t.Run("attention", func(t *testing.T) {
		a := backend.Attention{Heads: 8, KVHeads: 2, HeadDim: 128, Scale: float32(1 / math.Sqrt(128))}
		spans := backend.PackedSpans([]int{300, 129, 64})
		tq := 493
		q, k, v := randn(rng, tq*8*128, 1), randn(rng, tq*2*128, 1), randn(rng, tq*2*128, 1)
		qg, qc := both(q)
		kg, kc := both(k)
		vg, vc := both(v)
		og, oc := both(make([]float32, len(q)))
		lg, lc := both(make([]float32, tq*8))
		rg, rc := seqRows(t, g, tq, spans), seqRows(t, c, tq, spans)
		require.NoError(t, g.AttentionForward(a, rg, og, lg, qg, kg, vg))
		require.NoError(t, c.AttentionForward(a, rc, oc, lc, qc, kc, vc))
		closeRel(t, "out", download(t, g, og), download(t, c, oc), 1e-4)
		closeRel(t, "lse", download(t, g, lg), download(t, c, lc), 1e-5)
		dout := randn(rng, len(q), 1)
		dog, doc := both(dout)
		dqg, dqc := both(make([]float32, len(q)))
		dkg, dkc := both(make([]float32, len(k)))
		dvg, dvc := both(make([]float32, len(v)))
		require.NoError(t, g.AttentionBackward(a, rg, dqg, dkg, dvg, dog, qg, kg, vg, og, lg))
		require.NoError(t, c.AttentionBackward(a, rc, dqc, dkc, dvc, doc, qc, kc, vc, oc, lc))
		closeRel(t, "dq", download(t, g, dqg), download(t, c, dqc), 1e-4)
		closeRel(t, "dk", download(t, g, dkg), download(t, c, dkc), 1e-4)
		closeRel(t, "dv", download(t, g, dvg), download(t, c, dvc), 1e-4)
	})
	t.Run("decode", func(t *testing.T) {
		a := backend.Attention{Heads: 8, KVHeads: 2, HeadDim: 128, Scale: float32(1 / math.Sqrt(128))}
		spans := []backend.Span{{Q0: 0, QLen: 1, K0: 0, KLen: 1000}, {Q0: 1, QLen: 2, K0: 1000, KLen: 37}}
		q, k, v := randn(rng, 3*8*128, 1), randn(rng, 1037*2*128, 1), randn(rng, 1037*2*128, 1)
		qg, qc := both(q)
		kg, kc := both(k)
		vg, vc := both(v)
		og, oc := both(make([]float32, len(q)))
		lg, lc := both(make([]float32, 3*8))
		require.NoError(t, g.AttentionForward(a, seqRows(t, g, 3, spans), og, lg, qg, kg, vg))
		require.NoError(t, c.AttentionForward(a, seqRows(t, c, 3, spans), oc, lc, qc, kc, vc))
		closeRel(t, "out", download(t, g, og), download(t, c, oc), 1e-4)
		closeRel(t, "lse", download(t, g, lg), download(t, c, lc), 1e-5)
	})
	t.Run("lmhead", func(t *testing.T) {
		s := backend.LMHead{Rows: 300, Dim: 64, Vocab: 40000, InvTemp: 1 / 0.6}
		targets := make([]int32, s.Rows)
		for i := range targets {
			targets[i] = int32(rng.IntN(s.Vocab))
		}
		targets[3], targets[4] = -1, 32768
		h, w := randn(rng, s.Rows*s.Dim, 0.3), randn(rng, s.Vocab*s.Dim, 0.3)
		hg, hc := both(h)
		wg, wc := both(w)
		zero := func(n int) (backend.Buffer, backend.Buffer) { return both(make([]float32, n)) }
		lpg, lpc := zero(s.Rows)
		eg, ec := zero(s.Rows)
		lsg, lsc := zero(s.Rows)
		require.NoError(t, g.LogProbEntropy(s, targets, lpg, eg, lsg, hg, wg))
		require.NoError(t, c.LogProbEntropy(s, targets, lpc, ec, lsc, hc, wc))
		closeRel(t, "logp", download(t, g, lpg), download(t, c, lpc), 1e-5)
		closeRel(t, "entropy", download(t, g, eg), download(t, c, ec), 1e-5)
		closeRel(t, "lse", download(t, g, lsg), download(t, c, lsc), 1e-5)
		gl, ge := randn(rng, s.Rows, 1), randn(rng, s.Rows, 1)
		glg, glc := both(gl)
		geg, gec := both(ge)
		dhg, dhc := zero(len(h))
		dwg, dwc := zero(len(w))
		require.NoError(t, g.LogProbEntropyBackward(s, targets, dhg, dwg, glg, geg, hg, wg, lsg, eg))
		require.NoError(t, c.LogProbEntropyBackward(s, targets, dhc, dwc, glc, gec, hc, wc, lsc, ec))
		closeRel(t, "dh", download(t, g, dhg), download(t, c, dhc), 1e-4)
		closeRel(t, "dW", download(t, g, dwg), download(t, c, dwc), 1e-4)
	})
}

// TestAttentionTensorCoresAgainstFP32 runs attention forward and backward
// on the tensor-core kernels and on the float32 kernels of the same GPU
// (both backends in FP32 GEMM precision, so attention is the only
// difference) at realistic shapes: GQA 16/4 at head dim 128 over packed
// sequences longer than a 64-row tile, MHA 8/8 at head dim 64 with a
// KV-cache prefix (chunked prefill), and head dim 80 (padded to 128).
//
// The differences are the bf16 rounding of q, k, v, dO and of P and dS
// (relative 2⁻⁸ each, see kernels/emu/check.cc's derivation): outputs
// within 1% of their largest magnitude, gradients within 2%, lse within
// 0.02 absolute (scores of |s| ≲ 10 with relative error ~2⁻⁸/√hd). The
// test also requires the difference to be visible, so that a silent fall
// back to float32 fails it.
func TestAttentionTensorCoresAgainstFP32(t *testing.T) {
	tc := newOrSkip(t, WithPrecision(FP32), WithAttention(AttentionTensorCores))
	ref := newOrSkip(t, WithPrecision(FP32), WithAttention(AttentionFP32))
	cases := []struct {
		name   string
		a      backend.Attention
		spans  []backend.Span
		tq, tk int
	}{
		{"gqa16/4_hd128", backend.Attention{Heads: 16, KVHeads: 4, HeadDim: 128}, backend.PackedSpans([]int{150, 67, 3}), 220, 220},
		{"mha8/8_hd64_prefix", backend.Attention{Heads: 8, KVHeads: 8, HeadDim: 64},
			[]backend.Span{{Q0: 0, QLen: 70, K0: 0, KLen: 200}, {Q0: 70, QLen: 9, K0: 200, KLen: 9}}, 79, 209},
		{"hd80", backend.Attention{Heads: 4, KVHeads: 2, HeadDim: 80}, backend.PackedSpans([]int{90}), 90, 90},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := c.a
			a.Scale = float32(1 / math.Sqrt(float64(a.HeadDim)))
			require.True(t, tc.cfg.tensorCoreAttention(a.HeadDim))
			rng := rand.New(rand.NewPCG(11, uint64(i)))
			nq, nk := c.tq*a.Heads*a.HeadDim, c.tk*a.KVHeads*a.HeadDim
			q, k, v, dout := randn(rng, nq, 1), randn(rng, nk, 1), randn(rng, nk, 1), randn(rng, nq, 1)
			type result struct{ out, lse, dq, dk, dv []float32 }
			runOn := func(be *Backend) result {
				qb, kb, vb, db := upload(t, be, q), upload(t, be, k), upload(t, be, v), upload(t, be, dout)
				ob, lb := upload(t, be, make([]float32, nq)), upload(t, be, make([]float32, c.tq*a.Heads))
				r := seqRows(t, be, c.tq, c.spans)
				require.NoError(t, be.AttentionForward(a, r, ob, lb, qb, kb, vb))
				dq, dk, dv := upload(t, be, make([]float32, nq)), upload(t, be, make([]float32, nk)), upload(t, be, make([]float32, nk))
				require.NoError(t, be.AttentionBackward(a, r, dq, dk, dv, db, qb, kb, vb, ob, lb))
				return result{download(t, be, ob), download(t, be, lb), download(t, be, dq), download(t, be, dk), download(t, be, dv)}
			}
			got, want := runOn(tc), runOn(ref)
			closeRel(t, "out", got.out, want.out, 1e-2)
			for i := range want.lse {
				require.InDelta(t, want.lse[i], got.lse[i], 0.02, "lse[%d]", i)
			}
			closeRel(t, "dq", got.dq, want.dq, 2e-2)
			closeRel(t, "dk", got.dk, want.dk, 2e-2)
			closeRel(t, "dv", got.dv, want.dv, 2e-2)
			// Log the largest differences relative to each tensor's largest
			// magnitude (the tolerances above are 1% and 2%).
			rel := func(g, w []float32) (float64, float64) {
				var d, s float64
				for i := range w {
					d = max(d, math.Abs(float64(g[i]-w[i])))
					s = max(s, math.Abs(float64(w[i])))
				}
				return d, d / s
			}
			diff, r := rel(got.out, want.out)
			require.Greater(t, diff, 1e-4, "the tensor-core output must show bf16 rounding")
			_, rq := rel(got.dq, want.dq)
			_, rk := rel(got.dk, want.dk)
			_, rv := rel(got.dv, want.dv)
			dl, _ := rel(got.lse, want.lse)
			t.Logf("tensor cores − float32, largest difference / largest magnitude: out %.2g, dq %.2g, dk %.2g, dv %.2g; lse %.2g absolute", r, rq, rk, rv, dl)
		})
	}
}

// TestAdamWMatchesPolicy: three steps of the adamw kernel against
// policy.AdamW, bit for bit.
func TestAdamWMatchesPolicy(t *testing.T) {
	be := newOrSkip(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 10007
	data, grad := randn(rng, n, 1), make([]float32, n)
	pb := upload(t, be, data)
	gb := upload(t, be, grad)
	mb, vb := upload(t, be, make([]float32, n)), upload(t, be, make([]float32, n))
	cfg := policy.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
	opt, err := policy.NewAdamW([]lm.Param{{Name: "p", Data: data, Grad: grad}}, cfg)
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		copy(grad, randn(rng, n, 0.1))
		require.NoError(t, be.Upload(gb, 0, grad))
		lr, err := opt.Step()
		require.NoError(t, err)
		require.NoError(t, be.AdamW(AdamWStep{LR: lr, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: cfg.Eps, WeightDecay: cfg.WeightDecay, Step: step}, pb, gb, mb, vb))
		got := download(t, be, pb)
		for i := range data {
			require.Equal(t, math.Float32bits(data[i]), math.Float32bits(got[i]), "step %d element %d", step, i)
		}
	}
	require.ErrorIs(t, be.AdamW(AdamWStep{LR: 1, Step: 0}, pb, gb, mb, vb), backend.ErrArg)
	require.ErrorIs(t, be.AdamW(AdamWStep{LR: 1, Step: 1}, pb, gb, mb, upload(t, be, []float32{1})), backend.ErrShape)
}

func TestGradNormAndScale(t *testing.T) {
	be := newOrSkip(t)
	// ‖(3, 4)‖ with (12) in a second buffer: √(9 + 16 + 144) = 13.
	a, b := upload(t, be, []float32{3, 4}), upload(t, be, []float32{12})
	n, err := be.GradNorm(a, b)
	require.NoError(t, err)
	require.Equal(t, 13.0, n)
	require.NoError(t, be.Scale(0.5, a))
	require.Equal(t, []float32{1.5, 2}, download(t, be, a))
	rng := rand.New(rand.NewPCG(9, 9))
	big := randn(rng, 1<<20, 1)
	var want float64
	for _, x := range big {
		want += float64(x) * float64(x)
	}
	n, err = be.GradNorm(upload(t, be, big))
	require.NoError(t, err)
	require.InEpsilon(t, math.Sqrt(want), n, 1e-12)
	bad := upload(t, be, []float32{1, float32(math.Inf(1))})
	n, err = be.GradNorm(bad)
	require.NoError(t, err)
	require.True(t, math.IsInf(n, 1))
	require.ErrorIs(t, be.Scale(float32(math.NaN()), a), backend.ErrArg)
}

func TestCachingAllocatorOnDevice(t *testing.T) {
	be := newOrSkip(t)
	b1, err := be.Alloc(1000)
	require.NoError(t, err)
	require.NoError(t, be.Fill(b1, 3))
	require.NoError(t, be.Free(b1))
	before := be.Stats()
	b2, err := be.Alloc(1000)
	require.NoError(t, err)
	after := be.Stats()
	require.Equal(t, before.Hits+1, after.Hits, "a freed block of the same size is reused")
	require.Equal(t, make([]float32, 1000), download(t, be, b2), "reused blocks are zeroed")
}

// TestConcurrentUse: goroutines sharing one Backend on distinct buffers.
func TestConcurrentUse(t *testing.T) {
	be := newOrSkip(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x, err := be.Alloc(4096)
			if err != nil {
				errs[i] = err
				return
			}
			for range 50 {
				if err := be.Axpy(1, x, x); err != nil {
					errs[i] = err
					return
				}
			}
			got := make([]float32, 1)
			if err := be.Download(got, x, 0); err != nil || got[0] != 0 {
				errs[i] = fmt.Errorf("goroutine %d: %v, %v", i, got, err)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// TestEmbeddingBackwardBits: the table gradient of ids that repeat (300
// positions over 7 ids) is the CPU backend's to the bit, twice in a row:
// each id's rows are added in increasing position, no atomics.
func TestEmbeddingBackwardBits(t *testing.T) {
	g := newOrSkip(t, WithPrecision(FP32))
	c := cpu.New()
	rng := rand.New(rand.NewPCG(9, 10))
	const n, dim, vocab = 300, 24, 11
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(7)) * 3 % vocab
	}
	dout := randn(rng, n*dim, 1)
	table := randn(rng, vocab*dim, 1)
	want := upload(t, c, table)
	require.NoError(t, c.EmbeddingBackward(want, upload(t, c, dout), ids, dim))
	for run := range 2 {
		got := upload(t, g, table)
		require.NoError(t, g.EmbeddingBackward(got, upload(t, g, dout), ids, dim))
		require.Equal(t, download(t, c, want), download(t, g, got), "run %d", run)
	}
}
