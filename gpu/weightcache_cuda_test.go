//go:build agentrl_cuda && cgo

package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// TestWeightCacheSeesEveryWrite: a BF16 backend with the weight cache
// multiplies a weight W (LinearForward), then every method that can write
// a buffer writes W in turn, and the next product must equal the product
// on a backend without the cache given W's new contents (bit for bit: the
// same conversion and GEMM). Between writes the copy is reused (hits, no
// conversion). With cuBLAS and with the fallback GEMM (bf16-rounded float32
// copies).
func TestWeightCacheSeesEveryWrite(t *testing.T) {
	for _, gemm := range []struct {
		name string
		opts []Option
	}{{"cublas", nil}, {"fallback", []Option{WithCuBLAS()}}} {
		t.Run(gemm.name, func(t *testing.T) {
			be := newOrSkip(t, append([]Option{WithPrecision(BF16)}, gemm.opts...)...)
			plain := newOrSkip(t, append([]Option{WithPrecision(BF16), WithWeightCache(false)}, gemm.opts...)...)
			rng := rand.New(rand.NewPCG(21, 22))
			const n = 64 // W is 8×8
			lin := backend.Linear{Rows: 5, In: 8, Out: 8}
			x := randn(rng, lin.Rows*lin.In, 1)
			xb, xp := upload(t, be, x), upload(t, plain, x)
			w := upload(t, be, randn(rng, n, 1))
			buf := func(m int) backend.Buffer { return upload(t, be, randn(rng, m, 1)) }
			ids := []int32{0, 3, 7, 3, 1, 2, 6, 5}

			// product checks LinearForward through the cache against the
			// plain backend on W's current contents, and returns the
			// allocator statistics after it.
			product := func(what string) CacheStats {
				t.Helper()
				y := upload(t, be, make([]float32, lin.Rows*lin.Out))
				require.NoError(t, be.LinearForward(lin, y, xb, w, nil), what)
				wp := upload(t, plain, download(t, be, w))
				yp := upload(t, plain, make([]float32, lin.Rows*lin.Out))
				require.NoError(t, plain.LinearForward(lin, yp, xp, wp, nil))
				got, want := download(t, be, y), download(t, plain, yp)
				for i := range want {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%s: y[%d] = %v, want %v", what, i, got[i], want[i])
				}
				return be.Stats()
			}
			s0 := product("first use")
			require.Equal(t, uint64(1), s0.WeightConversions)
			s1 := product("unchanged")
			require.Equal(t, s0.WeightConversions, s1.WeightConversions, "an unchanged weight is not converted again")
			require.Equal(t, s0.WeightHits+1, s1.WeightHits)
			require.NotZero(t, s1.WeightBytes)

			att := backend.Attention{Heads: 2, KVHeads: 1, HeadDim: 4, Scale: 0.5} // q, out: 8 rows × 2 heads × 4 = 64
			spans := backend.PackedSpans([]int{8})
			head := backend.LMHead{Rows: 8, Dim: 4, Vocab: 8, InvTemp: 1}
			headRows := backend.LMHead{Rows: 64, Dim: 2, Vocab: 3, InvTemp: 1}
			targets := make([]int32, 64)
			for i := range targets {
				targets[i] = int32(i % 3)
			}
			h32 := backend.LMHead{Rows: 32, Dim: 2, Vocab: 3, InvTemp: 1} // dh: 32×2 = 64
			freqs := backend.RoPEFreqs(10000, 4)
			pos := seqRows(t, be, 8, spans)
			writers := []struct {
				name  string
				write func() error
			}{
				{"Upload", func() error { return be.Upload(w, 3, []float32{1, 2, 3}) }},
				{"Copy", func() error { return be.Copy(w, 10, buf(20), 0, 20) }},
				{"Fill", func() error { return be.Fill(w, 0.25) }},
				{"Gemm", func() error { return be.Gemm(backend.Gemm{M: 8, N: 8, K: 3, Alpha: 1}, buf(24), buf(24), w) }},
				{"LinearForward", func() error {
					return be.LinearForward(backend.Linear{Rows: 8, In: 3, Out: 8}, w, buf(24), buf(24), nil)
				}},
				{"LinearBackward dx", func() error {
					return be.LinearBackward(backend.Linear{Rows: 8, In: 8, Out: 3}, w, nil, nil, buf(24), buf(64), buf(24))
				}},
				{"LinearBackward dW", func() error {
					return be.LinearBackward(backend.Linear{Rows: 3, In: 8, Out: 8}, nil, w, nil, buf(24), buf(24), buf(64))
				}},
				{"EmbeddingForward", func() error { return be.EmbeddingForward(w, buf(64), ids, 8) }},
				{"EmbeddingBackward", func() error { return be.EmbeddingBackward(w, buf(64), ids, 8) }},
				{"RMSNormForward", func() error { return be.RMSNormForward(8, 8, 1e-6, w, nil, buf(64), buf(8)) }},
				{"RMSNormBackward", func() error { return be.RMSNormBackward(8, 8, w, nil, buf(64), buf(64), buf(8), buf(8)) }},
				{"RoPEForward", func() error { return be.RoPEForward(2, 4, pos, freqs, w, buf(64)) }},
				{"RoPEBackward", func() error { return be.RoPEBackward(2, 4, pos, freqs, w, buf(64)) }},
				{"AttentionForward", func() error { return be.AttentionForward(att, pos, w, nil, buf(64), buf(32), buf(32)) }},
				{"AttentionBackward", func() error {
					q, k, v := buf(64), buf(32), buf(32)
					o, l := buf(64), buf(16)
					if err := be.AttentionForward(att, pos, o, l, q, k, v); err != nil {
						return err
					}
					return be.AttentionBackward(att, pos, w, nil, nil, buf(64), q, k, v, o, l)
				}},
				{"SwiGLUForward", func() error { return be.SwiGLUForward(w, buf(64), buf(64)) }},
				{"SwiGLUBackward", func() error { return be.SwiGLUBackward(w, nil, buf(64), buf(64), buf(64)) }},
				{"Add", func() error { return be.Add(w, buf(64), buf(64)) }},
				{"Axpy", func() error { return be.Axpy(0.5, buf(64), w) }},
				{"LogProbEntropy", func() error {
					return be.LogProbEntropy(headRows, targets, w, nil, buf(64), buf(128), buf(6))
				}},
				{"LogProbEntropyBackward", func() error {
					l := buf(32)
					if err := be.LogProbEntropy(h32, targets[:32], buf(32), nil, l, buf(64), buf(6)); err != nil {
						return err
					}
					return be.LogProbEntropyBackward(h32, targets[:32], w, nil, buf(32), nil, buf(64), buf(6), l, nil)
				}},
				{"Logits", func() error { return be.Logits(head, []int32{0, 1, 2, 3, 4, 5, 6, 7}, w, buf(32), buf(32)) }},
				{"AdamW", func() error {
					v := upload(t, be, make([]float32, 64)) // second moments must be ≥ 0
					return be.AdamW(AdamWStep{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1}, w, buf(64), buf(64), v)
				}},
				{"Scale", func() error { return be.Scale(-2, w) }},
			}
			for _, wr := range writers {
				before := download(t, be, w)
				require.NoError(t, wr.write(), wr.name)
				require.NotEqual(t, before, download(t, be, w), "%s must change W for the check to mean anything", wr.name)
				// (Writers that multiply weights of their own convert those.)
				s0 := be.Stats()
				s := product("after " + wr.name)
				if wr.name == "AdamW" && gemm.name == "cublas" {
					// AdamW's pass (run by the download above) writes the
					// updated weight's bf16 copy itself: the product finds
					// it current, made once, by the pass.
					require.Equal(t, s0.WeightConversions, s.WeightConversions, "after AdamW: W's copy rewritten by the pass")
					require.Equal(t, s0.WeightHits+1, s.WeightHits, "after AdamW")
					continue
				}
				require.Equal(t, s0.WeightConversions+1, s.WeightConversions, "after %s: W converted again", wr.name)
			}
			held := be.Stats().WeightBytes
			require.NoError(t, be.Free(w))
			require.Equal(t, held-be.Stats().WeightBytes, s1.WeightBytes, "freeing W frees its copy")
		})
	}
}
