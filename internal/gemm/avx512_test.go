package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// specialSlice returns n floats of the given kind: 0 standard normals;
// 1 a mix of normals, subnormals, ±0, tiny values (whose products are
// subnormal or zero) and huge ones (whose products and sums overflow to
// ±Inf, and Inf − Inf to NaN); 2 normals with a few NaNs (of varied
// payloads, quiet and signalling) and ±Infs.
func specialSlice(r *rand.Rand, n, kind int) []float32 {
	s := make([]float32, n)
	for i := range s {
		v := float32(r.NormFloat64())
		switch kind {
		case 1:
			switch u := r.IntN(100); {
			case u < 10:
				v = math.Float32frombits(uint32(r.IntN(1<<23)) | uint32(r.IntN(2))<<31) // subnormal or ±0
			case u < 15:
				v = float32(math.Copysign(0, float64(v)))
			case u < 35:
				v *= 1e-20
			case u < 45:
				v *= 1e30
			}
		case 2:
			switch u := r.IntN(1000); {
			case u < 2:
				v = math.Float32frombits(0x7f800001 + uint32(r.IntN(1<<22)) | uint32(r.IntN(2))<<31) // signalling NaN
			case u < 4:
				v = math.Float32frombits(0x7fc00000 | uint32(r.IntN(1<<22)) | uint32(r.IntN(2))<<31) // quiet NaN
			case u < 7:
				v = float32(math.Inf(1 - 2*r.IntN(2)))
			}
		}
		s[i] = v
	}
	return s
}

func bits(s []float32) []uint32 {
	out := make([]uint32, len(s))
	for i, v := range s {
		out[i] = math.Float32bits(v)
	}
	return out
}

// avx512Cases is a table of products for TestAVX512MatchesAVX2: every
// remainder of m modulo the 6-row micro-panel and past the 144-row MC
// block, n around the 16- and 32-column panels and past the 3072-column
// NC panel, k below, at and above the 256-deep KC block and several
// blocks deep, with both storage orders of A and B, and alpha, beta in
// {1, 0}, {0.37, 1}, {−1.5, 0.25}.
func avx512Cases() []gemmCase {
	var cs []gemmCase
	abs := [][2]float32{{1, 0}, {0.37, 1}, {-1.5, 0.25}}
	i := 0
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		for _, m := range []int{1, 2, 3, 4, 5, 6, 7, 11, 13, 150} {
			for _, n := range []int{1, 15, 17, 31, 32, 33, 65, 129} {
				for _, k := range []int{1, 9, 256, 257, 600} {
					ab := abs[i%len(abs)]
					i++
					cs = append(cs, gemmCase{tr[0], tr[1], m, n, k, ab[0], ab[1]})
				}
			}
		}
		for _, sh := range [][3]int{{13, 3100, 5}, {145, 96, 40}, {300, 70, 300}, {289, 200, 513}, {8, 3105, 260}} {
			for _, ab := range abs {
				cs = append(cs, gemmCase{tr[0], tr[1], sh[0], sh[1], sh[2], ab[0], ab[1]})
			}
		}
	}
	return cs
}

// TestAVX512MatchesAVX2: the AVX-512 kernel's products are the AVX2
// kernel's, bit for bit (NaN payloads included), over avx512Cases on
// normal inputs, inputs with subnormals, ±0 and values whose products
// underflow or overflow, and inputs with NaNs and infinities; with one
// worker and with three (column splits of the panels, parallel
// packing). Small products are also checked against chainGemm, the
// documented chain computed one element at a time with the AVX2 fused
// multiply-add.
func TestAVX512MatchesAVX2(t *testing.T) {
	k512, ok := avx512Kernel()
	if !ok {
		t.Skip("the CPU (or the build) has no AVX-512 kernel")
	}
	k2, ok := avx2Kernel()
	require.True(t, ok, "AVX-512 without the AVX2 kernel")
	ref := New(withKernel(k2), WithWorkers(1))
	engines := []*Engine{New(withKernel(k512), WithWorkers(1)), New(withKernel(k512), WithWorkers(3))}
	require.Equal(t, "avx512-6x32", engines[0].KernelName())
	require.Equal(t, "avx2-fma-6x16", ref.KernelName())
	if best := bestKernel(); best.name != k512.name {
		t.Fatalf("bestKernel is %s on a CPU with AVX-512", best.name)
	}
	r := rand.New(rand.NewPCG(21, 22))
	for ci, g := range avx512Cases() {
		kind := ci % 3
		lda, ldb, ldc := g.k+3, g.n+1, g.n+2
		ar, br := g.m, g.k
		if g.transA {
			lda, ar = g.m+1, g.k
		}
		if g.transB {
			ldb, br = g.k+2, g.n
		}
		a, b, c := specialSlice(r, ar*lda, kind), specialSlice(r, br*ldb, kind), specialSlice(r, g.m*ldc, kind)
		want := append([]float32(nil), c...)
		require.NoError(t, ref.Sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, want, ldc))
		if g.m*g.n*g.k <= 20000 {
			chain := append([]float32(nil), c...)
			chainGemm(k2, g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, chain, ldc)
			require.Equal(t, bits(chain), bits(want), "avx2 vs chain %v kind %d", g, kind)
		}
		for w, e := range engines {
			got := append([]float32(nil), c...)
			require.NoError(t, e.Sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, got, ldc))
			require.Equal(t, bits(want), bits(got), "%s/%d %v kind %d", e.KernelName(), []int{1, 3}[w], g, kind)
		}
	}
}

// TestAVX512KernelsMatchAVX2: each AVX-512 routine against its AVX2
// counterpart on the same packed panels, C not a multiple of anything:
// the full tile (kern6x32 against two kern6x16 calls on the two halves
// of the 32-column panel repacked as 16-column ones) and the partial-row
// kernels for 1 to 5 rows over 1 to 4 panels.
func TestAVX512KernelsMatchAVX2(t *testing.T) {
	k512, ok := avx512Kernel()
	if !ok {
		t.Skip("the CPU (or the build) has no AVX-512 kernel")
	}
	k2, _ := avx2Kernel()
	r := rand.New(rand.NewPCG(23, 24))
	for _, kc := range []int{1, 2, 3, 8, 255, 256} {
		for kind := range 3 {
			const ldc = 4*32 + 3
			a := specialSlice(r, kc*6, kind)
			b32 := specialSlice(r, 4*kc*32, kind) // four 32-column panels
			// The same panels as eight 16-column ones.
			b16 := make([]float32, len(b32))
			for q := range 4 {
				for h := range 2 {
					for p := range kc {
						copy(b16[(2*q+h)*kc*16+p*16:][:16], b32[q*kc*32+p*32+h*16:][:16])
					}
				}
			}
			c0 := specialSlice(r, 6*ldc, kind)
			for rows := 1; rows <= 6; rows++ {
				for np := 1; np <= 4; np++ {
					if rows == 6 && np > 1 {
						continue
					}
					want := append([]float32(nil), c0...)
					got := append([]float32(nil), c0...)
					if rows == 6 {
						k2.micro(kc, a, b16, want, ldc)
						k2.micro(kc, a, b16[kc*16:], want[16:], ldc)
						k512.micro(kc, a, b32, got, ldc)
					} else {
						k2.rows(rows, 2*np, kc, a, b16, kc*16, want, ldc)
						k512.rows(rows, np, kc, a, b32, kc*32, got, ldc)
					}
					require.Equal(t, bits(want), bits(got), fmt.Sprintf("kc=%d kind=%d rows=%d np=%d", kc, kind, rows, np))
				}
			}
		}
	}
}
