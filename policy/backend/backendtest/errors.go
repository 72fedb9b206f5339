package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// ZeroSizes checks that empty inputs are valid no-ops, not errors:
// zero-length buffers, products with a zero dimension, no tokens, empty
// spans, no rows to project.
func ZeroSizes(t *testing.T, b backend.Backend, tol Tolerance) {
	e := newEnv(t, b, tol, 120)
	empty := e.zeros(0)
	require.Equal(t, 0, empty.Len())
	require.NoError(t, b.Upload(empty, 0, nil))
	require.NoError(t, b.Download(nil, empty, 0))
	require.NoError(t, b.Fill(empty, 1))

	c := e.up([]float64{1, 2, 3})
	// K = 0: C = beta·C. 0.5·[1 2 3] = [0.5 1 1.5].
	require.NoError(t, b.Gemm(backend.Gemm{M: 1, N: 3, K: 0, Alpha: 1, Beta: 0.5}, empty, empty, c))
	require.Equal(t, []float64{0.5, 1, 1.5}, e.down(c))
	require.NoError(t, b.Gemm(backend.Gemm{M: 0, N: 3, K: 2, Alpha: 1}, empty, e.zeros(6), empty))

	w := e.randn(12, 1)
	wb := e.up(w)
	require.NoError(t, b.LinearForward(backend.Linear{Rows: 0, In: 4, Out: 3}, empty, empty, wb, nil))
	require.NoError(t, b.EmbeddingForward(empty, wb, nil, 4))
	require.NoError(t, b.RoPEForward(1, 4, e.rows(nil, nil), backend.RoPEFreqs(1e4, 4), empty, empty))

	a := backend.Attention{Heads: 2, KVHeads: 1, HeadDim: 2, Scale: 1}
	q, k := e.up(e.randn(8, 1)), e.up(e.randn(4, 1))
	out := e.up(e.randn(8, 1))
	require.NoError(t, b.AttentionForward(a, e.spanRows(2, nil), out, nil, q, k, k))
	require.Equal(t, make([]float64, 8), e.down(out), "rows in no span get zero output")
	require.NoError(t, b.AttentionForward(a, e.spanRows(2, []backend.Span{{Q0: 0, QLen: 0, K0: 0, KLen: 2}}), out, nil, q, k, k))

	s := backend.LMHead{Rows: 0, Dim: 4, Vocab: 3}
	require.NoError(t, b.LogProbEntropy(s, nil, empty, empty, empty, empty, wb))
	require.NoError(t, b.Logits(backend.LMHead{Rows: 2, Dim: 4, Vocab: 3}, nil, empty, e.zeros(8), wb))
}

// foreign is a Buffer no backend allocated.
type foreign struct{ n int }

func (f foreign) Len() int { return f.n }

// Errors checks that bad calls return errors wrapping the documented
// sentinel — and never panic.
func Errors(t *testing.T, b backend.Backend, tol Tolerance) {
	e := newEnv(t, b, tol, 130)
	x4 := e.zeros(4)
	x6 := e.zeros(6)
	x12 := e.zeros(12)
	freed := e.zeros(4)
	require.NoError(t, b.Free(freed))
	nan := float32(math.NaN())
	a := backend.Attention{Heads: 2, KVHeads: 1, HeadDim: 2, Scale: 1}
	q, k := e.zeros(8), e.zeros(4) // 2 query rows, 2 key rows
	lm := backend.LMHead{Rows: 2, Dim: 2, Vocab: 3}
	cases := []struct {
		name string
		want error
		call func() error
	}{
		{"alloc negative", backend.ErrShape, func() error { _, err := b.Alloc(-1); return err }},
		{"upload past end", backend.ErrShape, func() error { return b.Upload(x4, 2, make([]float32, 3)) }},
		{"download past end", backend.ErrShape, func() error { return b.Download(make([]float32, 5), x4, 0) }},
		{"upload negative offset", backend.ErrShape, func() error { return b.Upload(x4, -1, nil) }},
		{"copy overlapping", backend.ErrShape, func() error { return b.Copy(x6, 0, x6, 2, 3) }},
		{"foreign buffer", backend.ErrBuffer, func() error { return b.Fill(foreign{4}, 0) }},
		{"freed buffer", backend.ErrBuffer, func() error { return b.Upload(freed, 0, []float32{1}) }},
		{"nil buffer", backend.ErrBuffer, func() error { return b.Fill(nil, 0) }},
		{"gemm short C", backend.ErrShape, func() error {
			return b.Gemm(backend.Gemm{M: 2, N: 3, K: 2, Alpha: 1}, x4, x6, x4)
		}},
		{"gemm NaN alpha", backend.ErrArg, func() error {
			return b.Gemm(backend.Gemm{M: 2, N: 2, K: 2, Alpha: nan}, x4, x4, x4)
		}},
		{"gemm overlapping batch outputs", backend.ErrShape, func() error {
			return b.Gemm(backend.Gemm{M: 1, N: 2, K: 2, Alpha: 1, Batch: 2, StrideA: 2, StrideB: 4, StrideC: 1}, x4, x12, x4)
		}},
		{"linear wrong W", backend.ErrShape, func() error {
			return b.LinearForward(backend.Linear{Rows: 2, In: 2, Out: 3}, x6, x4, x4, nil)
		}},
		{"linear wrong bias", backend.ErrShape, func() error {
			return b.LinearForward(backend.Linear{Rows: 2, In: 2, Out: 2}, x4, x4, x4, x6)
		}},
		{"linear wrong dW", backend.ErrShape, func() error {
			return b.LinearBackward(backend.Linear{Rows: 2, In: 2, Out: 2}, nil, x6, nil, x4, x4, x4)
		}},
		{"embedding id too large", backend.ErrIndex, func() error { return b.EmbeddingForward(x4, x6, []int32{1, 3}, 2) }},
		{"embedding negative id", backend.ErrIndex, func() error { return b.EmbeddingBackward(x6, x4, []int32{-1, 0}, 2) }},
		{"embedding table not a multiple", backend.ErrShape, func() error { return b.EmbeddingForward(x4, x6, []int32{0}, 4) }},
		{"rmsnorm zero eps", backend.ErrArg, func() error { return b.RMSNormForward(2, 2, 0, x4, nil, x4, e.zeros(2)) }},
		{"rmsnorm wrong weight", backend.ErrShape, func() error { return b.RMSNormForward(2, 2, 1e-6, x4, nil, x4, x4) }},
		{"rmsnorm backward without rstd", backend.ErrBuffer, func() error {
			return b.RMSNormBackward(2, 2, x4, nil, x4, x4, e.zeros(2), nil)
		}},
		{"rope odd head dim", backend.ErrShape, func() error {
			return b.RoPEForward(1, 3, e.rows([]int32{0}, nil), []float32{1}, e.zeros(3), e.zeros(3))
		}},
		{"rope wrong freqs", backend.ErrShape, func() error { return b.RoPEForward(1, 2, e.rows([]int32{0, 1}, nil), []float32{1, 2}, x4, x4) }},
		{"rope too few rows", backend.ErrShape, func() error { return b.RoPEForward(1, 2, e.rows([]int32{0, 1, 2}, nil), []float32{1}, x4, x4) }},
		{"rope nil rows", backend.ErrBuffer, func() error { return b.RoPEForward(1, 2, nil, []float32{1}, x4, x4) }},
		{"attention heads not a multiple", backend.ErrShape, func() error {
			return b.AttentionForward(backend.Attention{Heads: 3, KVHeads: 2, HeadDim: 2, Scale: 1}, e.spanRows(1, nil), e.zeros(6), nil, e.zeros(6), x4, x4)
		}},
		{"attention span past the keys", backend.ErrShape, func() error {
			return b.AttentionForward(a, e.spanRows(2, []backend.Span{{Q0: 0, QLen: 1, K0: 1, KLen: 2}}), q, nil, q, k, k)
		}},
		{"attention q of other rows", backend.ErrShape, func() error {
			return b.AttentionForward(a, e.spanRows(3, nil), q, nil, q, k, k)
		}},
		{"attention backward overlapping keys", backend.ErrShape, func() error {
			return b.AttentionBackward(a, e.spanRows(2, []backend.Span{{Q0: 0, QLen: 1, K0: 0, KLen: 1}, {Q0: 1, QLen: 1, K0: 0, KLen: 2}}), nil, nil, nil, q, q, k, k, q, x4)
		}},
		{"attention backward without lse", backend.ErrBuffer, func() error {
			return b.AttentionBackward(a, e.spanRows(2, backend.PackedSpans([]int{2})), nil, nil, nil, q, q, k, k, q, nil)
		}},
		{"attention NaN scale", backend.ErrArg, func() error {
			return b.AttentionForward(backend.Attention{Heads: 2, KVHeads: 1, HeadDim: 2, Scale: nan}, e.spanRows(2, nil), q, nil, q, k, k)
		}},
		{"swiglu length mismatch", backend.ErrShape, func() error { return b.SwiGLUForward(x4, x4, x6) }},
		{"add length mismatch", backend.ErrShape, func() error { return b.Add(x4, x6, x4) }},
		{"axpy length mismatch", backend.ErrShape, func() error { return b.Axpy(1, x4, x6) }},
		{"logprob target ≥ vocab", backend.ErrIndex, func() error {
			return b.LogProbEntropy(lm, []int32{0, 3}, e.zeros(2), nil, e.zeros(2), x4, x6)
		}},
		{"logprob targets count", backend.ErrShape, func() error {
			return b.LogProbEntropy(lm, []int32{0}, e.zeros(2), nil, e.zeros(2), x4, x6)
		}},
		{"logprob wrong W", backend.ErrShape, func() error {
			return b.LogProbEntropy(lm, []int32{0, 1}, e.zeros(2), nil, e.zeros(2), x4, x4)
		}},
		{"logprob backward dentropy without entropy", backend.ErrBuffer, func() error {
			return b.LogProbEntropyBackward(lm, []int32{0, 1}, x4, nil, e.zeros(2), e.zeros(2), x4, x6, e.zeros(2), nil)
		}},
		{"logits row out of range", backend.ErrIndex, func() error {
			return b.Logits(lm, []int32{2}, e.zeros(3), x4, x6)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = c.call() }, "bad calls must return errors")
			require.Error(t, err)
			require.ErrorIs(t, err, c.want, fmt.Sprint(err))
		})
	}
}
