//go:build agentrl_cuda && cgo

package gpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// uploadBF16 makes a bf16 buffer holding x (rounded by Upload).
func uploadBF16(t testing.TB, be *Backend, x []float32) backend.Buffer {
	t.Helper()
	b, err := be.AllocBF16(len(x))
	require.NoError(t, err)
	require.NoError(t, be.Upload(b, 0, x))
	return b
}

// rounded is x rounded to bfloat16 on the host (bf16FromFloat32, torch's
// rounding), as float32.
func rounded(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = roundBF16(v)
	}
	return out
}

func requireBits(t *testing.T, what string, want, got []float32) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%s[%d] = %v, want %v", what, i, got[i], want[i])
	}
}

// TestBF16WeightsMatchRounded: every kernel that reads a weight computes
// from a bf16 buffer exactly what it computes from a float32 buffer
// holding the same values rounded to bfloat16 on the host — bit for bit,
// since in BF16 precision the products multiply the float32 weight's
// bf16 conversion (which is those bits), and the embedding, the norms and
// the bias read the widened values, which are the rounded float32 ones.
// With cuBLAS (the bf16 buffer is the GEMM's operand) and with the
// fallback GEMM (a widened copy in the weight cache).
func TestBF16WeightsMatchRounded(t *testing.T) {
	for _, gemm := range []struct {
		name string
		opts []Option
	}{{"cublas", nil}, {"fallback", []Option{WithCuBLAS()}}} {
		t.Run(gemm.name, func(t *testing.T) {
			be := newOrSkip(t, append([]Option{WithPrecision(BF16)}, gemm.opts...)...)
			rng := rand.New(rand.NewPCG(36, 1))
			// weight returns the same weight as a bf16 buffer and as a
			// float32 buffer of the host-rounded values.
			weight := func(n int) (half, full backend.Buffer) {
				w := randn(rng, n, 0.5)
				return uploadBF16(t, be, w), upload(t, be, rounded(w))
			}
			zeros := func(n int) backend.Buffer { return upload(t, be, make([]float32, n)) }
			act := func(n int) backend.Buffer { return upload(t, be, randn(rng, n, 1)) }
			// both runs call with the bf16 weights and then with the
			// float32 ones, each into fresh outputs, and compares them.
			both := func(what string, outs []int, call func(w int, out []backend.Buffer) error) {
				t.Helper()
				var got [2][][]float32
				for w := range 2 {
					bufs := make([]backend.Buffer, len(outs))
					for i, n := range outs {
						bufs[i] = zeros(n)
					}
					require.NoError(t, call(w, bufs), "%s (weights %d)", what, w)
					for _, b := range bufs {
						got[w] = append(got[w], download(t, be, b))
					}
				}
				for i := range outs {
					requireBits(t, what, got[1][i], got[0][i])
				}
			}

			lin := backend.Linear{Rows: 5, In: 24, Out: 16}
			wh, wf := weight(lin.Out * lin.In)
			bh, bf := weight(lin.Out)
			x, dy := act(lin.Rows*lin.In), act(lin.Rows*lin.Out)
			pick := func(w int, h, f backend.Buffer) backend.Buffer { return [2]backend.Buffer{h, f}[w] }
			both("LinearForward", []int{lin.Rows * lin.Out}, func(w int, o []backend.Buffer) error {
				return be.LinearForward(lin, o[0], x, pick(w, wh, wf), pick(w, bh, bf))
			})
			both("LinearBackward", []int{lin.Rows * lin.In, lin.Out * lin.In, lin.Out}, func(w int, o []backend.Buffer) error {
				return be.LinearBackward(lin, o[0], o[1], o[2], dy, x, pick(w, wh, wf))
			})

			const vocab, dim = 40, 12
			eh, ef := weight(vocab * dim)
			ids := []int32{3, 0, 39, 3, 17, 5}
			both("EmbeddingForward", []int{len(ids) * dim}, func(w int, o []backend.Buffer) error {
				return be.EmbeddingForward(o[0], pick(w, eh, ef), ids, dim)
			})

			const rows = 7
			nh, nf := weight(dim)
			xn, dn := act(rows*dim), act(rows*dim)
			rstd := zeros(rows)
			require.NoError(t, be.RMSNormForward(rows, dim, 1e-6, zeros(rows*dim), rstd, xn, nf))
			both("RMSNormForward", []int{rows * dim, rows}, func(w int, o []backend.Buffer) error {
				return be.RMSNormForward(rows, dim, 1e-6, o[0], o[1], xn, pick(w, nh, nf))
			})
			both("RMSNormBackward", []int{rows * dim, dim}, func(w int, o []backend.Buffer) error {
				return be.RMSNormBackward(rows, dim, o[0], o[1], dn, xn, pick(w, nh, nf), rstd)
			})

			head := backend.LMHead{Rows: rows, Dim: dim, Vocab: vocab, InvTemp: 1 / 0.7}
			targets := []int32{1, 39, 0, 7, 7, 22, 3}
			h := act(rows * dim)
			lse, ent := zeros(rows), zeros(rows)
			require.NoError(t, be.LogProbEntropy(head, targets, zeros(rows), ent, lse, h, ef))
			both("LogProbEntropy", []int{rows, rows, rows}, func(w int, o []backend.Buffer) error {
				return be.LogProbEntropy(head, targets, o[0], o[1], o[2], h, pick(w, eh, ef))
			})
			dlogp, dent := act(rows), act(rows)
			both("LogProbEntropyBackward", []int{rows * dim, vocab * dim}, func(w int, o []backend.Buffer) error {
				return be.LogProbEntropyBackward(head, targets, o[0], o[1], dlogp, dent, h, pick(w, eh, ef), lse, ent)
			})
			both("Logits", []int{2 * vocab}, func(w int, o []backend.Buffer) error {
				return be.Logits(head, []int32{6, 2}, o[0], h, pick(w, eh, ef))
			})
			if gemm.name == "cublas" {
				// The bf16 weights are the products' operands: only the
				// float32 ones were converted into the weight cache.
				require.NoError(t, be.Synchronize())
				s := be.Stats()
				assert.Equal(t, uint64(2*(lin.Out*lin.In+vocab*dim)), s.WeightBytes, "the weight cache holds copies of the float32 weights only")
			}
		})
	}
}

// TestBF16BufferMemory: a bf16 buffer's values are rounded on the way in
// (Upload, Fill, Copy from float32: the host's rounding, ties to even,
// bit for bit) and widened on the way out (Download, Copy to float32),
// copies between bf16 buffers keep them, and it takes 2 bytes an element
// of device memory where a float32 buffer takes 4 (the allocator's bytes
// in use, measured).
func TestBF16BufferMemory(t *testing.T) {
	be := newOrSkip(t, WithPrecision(BF16))
	rng := rand.New(rand.NewPCG(36, 2))
	const n = 37
	x := randn(rng, n, 3)
	// Ties: 1 + 2⁻⁸ lies halfway between 1 and 1 + 2⁻⁷ (rounds to even:
	// 1), 1 + 3·2⁻⁸ between 1 + 2⁻⁷ and 1 + 2⁻⁶ (rounds up, to even).
	x[0], x[1] = 1+1.0/256, 1+3.0/256
	want := rounded(x)
	require.Equal(t, float32(1), want[0])
	require.Equal(t, float32(1+1.0/64), want[1])

	h := uploadBF16(t, be, x)
	require.True(t, be.IsBF16(h))
	requireBits(t, "Upload then Download", want, download(t, be, h))

	h2, err := be.AllocBF16(n)
	require.NoError(t, err)
	requireBits(t, "a new bf16 buffer", make([]float32, n), download(t, be, h2))
	f := upload(t, be, x)
	require.NoError(t, be.Copy(h2, 0, f, 0, n))
	requireBits(t, "Copy float32 → bf16", want, download(t, be, h2))

	wide := upload(t, be, make([]float32, n+3))
	require.NoError(t, be.Copy(wide, 3, h, 1, n-1))
	requireBits(t, "Copy bf16 → float32 at offsets", append(make([]float32, 3), want[1:]...), download(t, be, wide)[:n+2])

	h3 := uploadBF16(t, be, make([]float32, n))
	require.NoError(t, be.Copy(h3, 5, h, 2, 11))
	got := download(t, be, h3)
	requireBits(t, "Copy bf16 → bf16", want[2:13], got[5:16])
	requireBits(t, "Copy bf16 → bf16 leaves the rest", make([]float32, 5), got[:5])

	require.NoError(t, be.Fill(h3, 0.3))
	for _, v := range download(t, be, h3) {
		require.Equal(t, roundBF16(0.3), v)
	}
	require.NoError(t, be.Upload(h3, 30, []float32{-2.5, 1e-3}))
	got = download(t, be, h3)
	requireBits(t, "Upload at an offset", []float32{roundBF16(0.3), -2.5, roundBF16(1e-3), roundBF16(0.3)}, got[29:33])

	// Device bytes: 1 Mi elements, 2 MiB as bf16 against 4 MiB.
	const big = 1 << 20
	inUse := func() uint64 {
		require.NoError(t, be.Synchronize())
		return be.Stats().InUse
	}
	before := inUse()
	hb, err := be.AllocBF16(big)
	require.NoError(t, err)
	afterHalf := inUse()
	fb, err := be.Alloc(big)
	require.NoError(t, err)
	afterFull := inUse()
	assert.Equal(t, uint64(2*big), afterHalf-before, "a bf16 buffer of 2²⁰ elements")
	assert.Equal(t, uint64(4*big), afterFull-afterHalf, "a float32 buffer of 2²⁰ elements")
	require.NoError(t, be.Free(hb))
	require.NoError(t, be.Free(fb))
	assert.Equal(t, before, inUse())
}

// TestBF16BufferRefused: a bf16 buffer anywhere but a weight argument
// is an ErrBuffer error (it is not float32 memory); bf16 buffers need
// BF16 precision.
func TestBF16BufferRefused(t *testing.T) {
	be := newOrSkip(t, WithPrecision(BF16))
	h := uploadBF16(t, be, make([]float32, 16))
	f := upload(t, be, make([]float32, 16))
	lin := backend.Linear{Rows: 4, In: 4, Out: 4}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"LinearForward's output", func() error { return be.LinearForward(lin, h, f, f, nil) }},
		{"LinearForward's input", func() error { return be.LinearForward(lin, f, h, f, nil) }},
		{"LinearBackward's dW", func() error { return be.LinearBackward(lin, f, h, nil, f, f, f) }},
		{"Axpy", func() error { return be.Axpy(1, f, h) }},
		{"Add", func() error { return be.Add(f, h, f) }},
		{"AdamW's parameter", func() error {
			return be.AdamW(backend.AdamWStep{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1}, h, f, f, f)
		}},
		{"GradNorm", func() error { _, err := be.GradNorm(h); return err }},
		{"Scale", func() error { return be.Scale(2, h) }},
		{"EmbeddingBackward's table gradient", func() error { return be.EmbeddingBackward(h, f, []int32{0}, 4) }},
	} {
		err := c.call()
		if err == nil {
			err = be.Synchronize()
		}
		assert.ErrorIs(t, err, backend.ErrBuffer, c.name)
	}
	assert.False(t, be.IsBF16(f))
	require.NoError(t, be.Free(h))
	assert.False(t, be.IsBF16(nil))

	fp := newOrSkip(t, WithPrecision(FP32))
	_, err := fp.AllocBF16(8)
	assert.True(t, errors.Is(err, errors.ErrUnsupported), "AllocBF16 in FP32 precision: %v", err)
	_, err = be.AllocBF16(-1)
	assert.ErrorIs(t, err, backend.ErrShape)
}
