//go:build agentrl_cuda && cgo

package gpu

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// TestLMHeadBackwardBytes runs LogProbEntropyBackward in BF16 precision
// through cuBLAS under two chunk plans — every row with the vocabulary
// cut in 128-column chunks (issue #37's plan), and chunks of 8 rows over
// the whole vocabulary (the shape of the plan before) — and checks the
// bytes its products moved against lmBackwardBytes, the count written
// out from the loops: in Counters.GemmBytes and, under the emulator's
// fake cuBLAS, in the library's own count (FAKECUDA_GEMM_BYTES), which
// is reckoned independently from cuBLAS's column-major arguments. The
// two plans' gradients agree to float32 rounding (they add the chunks'
// products in another order).
func TestLMHeadBackwardBytes(t *testing.T) {
	const rows, vocab, dim = 48, 700, 32
	s := backend.LMHead{Rows: rows, Dim: dim, Vocab: vocab}
	file := filepath.Join(t.TempDir(), "gemm-bytes")
	t.Setenv("FAKECUDA_GEMM_BYTES", file)
	fakeBytes := func() (int64, bool) {
		b, err := os.ReadFile(file)
		if err != nil {
			return 0, false // a real cuBLAS writes nothing
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		require.NoError(t, err)
		return n, true
	}
	rng := rand.New(rand.NewPCG(3, 7))
	randn := func(n int, sd float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * sd)
		}
		return x
	}
	h, w := randn(rows*dim, 1), randn(vocab*dim, 0.2)
	targets := make([]int32, rows)
	for i := range targets {
		targets[i] = int32(rng.IntN(vocab))
	}
	dlogp, dent := randn(rows, 1), randn(rows, 0.5)

	grads := map[string][2][]float32{}
	for _, plan := range []struct {
		name string
		b    lmBudget
	}{
		{"all rows, 128 columns", lmBudget{elems: rows * 128, minCols: 128}},
		{"8 rows, every column", lmBudget{elems: 8 * vocab, minCols: vocab}},
	} {
		be := newOrSkip(t, WithPrecision(BF16), withLMBudget(plan.b))
		if be.blas == nil {
			t.Skip("needs cuBLAS: GemmBytes counts its products")
		}
		up := func(x []float32) backend.Buffer {
			b, err := be.Alloc(len(x))
			require.NoError(t, err)
			require.NoError(t, be.Upload(b, 0, x))
			return b
		}
		hb, wb, gl, ge := up(h), up(w), up(dlogp), up(dent)
		logp, ent, lse := up(make([]float32, rows)), up(make([]float32, rows)), up(make([]float32, rows))
		dh, dw := up(make([]float32, rows*dim)), up(make([]float32, vocab*dim))
		require.NoError(t, be.LogProbEntropy(s, targets, logp, ent, lse, hb, wb))
		before, err := be.Counters()
		require.NoError(t, err)
		fake0, fake := fakeBytes()
		require.NoError(t, be.LogProbEntropyBackward(s, targets, dh, dw, gl, ge, hb, wb, lse, ent))
		after, err := be.Counters()
		require.NoError(t, err)
		want := lmBackwardBytes(rows, vocab, dim, plan.b)
		nr, nc := lmChunk(rows, vocab, plan.b)
		t.Logf("%s (%d × %d chunks): %d bytes moved by %d products", plan.name, nr, nc, after.GemmBytes-before.GemmBytes, after.Gemms-before.Gemms)
		require.Equal(t, want, int64(after.GemmBytes-before.GemmBytes), "Counters.GemmBytes")
		if fake1, ok := fakeBytes(); fake && ok {
			require.Equal(t, want, fake1-fake0, "the fake cuBLAS's own count")
		}
		g := [2][]float32{make([]float32, rows*dim), make([]float32, vocab*dim)}
		require.NoError(t, be.Download(g[0], dh, 0))
		require.NoError(t, be.Download(g[1], dw, 0))
		grads[plan.name] = g
	}
	a, b := grads["all rows, 128 columns"], grads["8 rows, every column"]
	for k := range 2 {
		var scale float64
		for _, x := range a[k] {
			scale = max(scale, float64(abs32(x)))
		}
		for i := range a[k] {
			require.InDelta(t, a[k][i], b[k][i], 1e-5*scale, "gradient %d element %d", k, i)
		}
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
