package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// refGemm is the textbook triple loop in float64, the oracle for Sgemm.
func refGemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, len(c))
	for i := range c {
		out[i] = float64(c[i])
	}
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			prev := float64(beta) * float64(c[i*ldc+j])
			if beta == 0 {
				prev = 0
			}
			out[i*ldc+j] = float64(alpha)*s + prev
		}
	}
	return out
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func engines() map[string]*Engine {
	return map[string]*Engine{
		"best/1":    New(WithWorkers(1)),
		"best/3":    New(WithWorkers(3)),
		"generic/2": New(WithGeneric(), WithWorkers(2)),
	}
}

func TestSgemmMatchesReference(t *testing.T) {
	shapes := [][3]int{
		{1, 1, 1}, {1, 17, 33}, {3, 40, 7}, {4, 100, 300}, {5, 19, 0},
		{6, 16, 1}, {7, 17, 5}, {13, 33, 260}, {64, 64, 64}, {150, 29, 300},
		{97, 3100, 9},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for name, e := range engines() {
		for _, sh := range shapes {
			for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-1.5, 0.25}} {
					m, n, k := sh[0], sh[1], sh[2]
					tA, tB := tr[0], tr[1]
					lda, ldb, ldc := k+3, n+1, n+2
					ar, br := m, k
					if tA {
						lda, ar = m+1, k
					}
					if tB {
						ldb, br = k+2, n
					}
					a := randSlice(r, ar*lda)
					b := randSlice(r, br*ldb)
					c := randSlice(r, m*ldc)
					want := refGemm(tA, tB, m, n, k, ab[0], a, lda, b, ldb, ab[1], c, ldc)
					got := append([]float32(nil), c...)
					require.NoError(t, e.Sgemm(tA, tB, m, n, k, ab[0], a, lda, b, ldb, ab[1], got, ldc))
					tol := 1e-5 * math.Sqrt(float64(k)+1) * 4
					for i := range got {
						require.InDelta(t, want[i], float64(got[i]), tol*(1+math.Abs(want[i])),
							"%s %v tA=%v tB=%v alpha,beta=%v at %d", name, sh, tA, tB, ab, i)
					}
				}
			}
		}
	}
}

func TestSgemmBetaZeroIgnoresNaN(t *testing.T) {
	// BLAS semantics: with beta = 0, C is written without being read, so a
	// NaN already in C must not leak into the result. 1·1 + 2·3 = 7.
	e := New()
	c := []float32{float32(math.NaN())}
	require.NoError(t, e.Sgemm(false, false, 1, 1, 2, 1, []float32{1, 2}, 2, []float32{1, 3}, 1, 0, c, 1))
	require.Equal(t, float32(7), c[0])
}

func TestSgemmRejectsBadArguments(t *testing.T) {
	e := New()
	a := make([]float32, 6)
	cases := []struct {
		name                       string
		m, n, k, lda, ldb, ldc, lc int
	}{
		{"negative", -1, 2, 3, 3, 2, 2, 6},
		{"short A", 3, 2, 3, 3, 2, 2, 6},
		{"small lda", 2, 2, 3, 2, 2, 2, 4},
		{"short C", 2, 2, 3, 3, 2, 2, 3},
		{"small ldc", 2, 2, 3, 3, 2, 1, 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := e.Sgemm(false, false, tc.m, tc.n, tc.k, 1, a, tc.lda, make([]float32, 6), tc.ldb, 0, make([]float32, tc.lc), tc.ldc)
			require.ErrorIs(t, err, ErrArgs)
		})
	}
}

func TestAxpy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, kern := range []kernel{bestKernel(), genericKernel()} {
		if kern.axpy == nil {
			continue
		}
		for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 100} {
			x, y := randSlice(r, n), randSlice(r, n)
			y2 := append([]float32(nil), y...)
			kern.axpy(-0.75, x, y2)
			for i := range y2 {
				// One fused multiply-add: the exact value rounded once.
				want := float32(math.FMA(-0.75, float64(x[i]), float64(y[i])))
				require.Equal(t, want, y2[i], "%s axpy n=%d i=%d", kern.name, n, i)
			}
		}
	}
}

func ExampleEngine_Sgemm() {
	e := New()
	// [1 2; 3 4] · [5 6; 7 8] = [19 22; 43 50]
	a := []float32{1, 2, 3, 4}
	b := []float32{5, 6, 7, 8}
	c := make([]float32, 4)
	if err := e.Sgemm(false, false, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c)
	// Output: [19 22 43 50]
}

func TestExp32(t *testing.T) {
	// Against float64 math.Exp over the whole finite range, 2 ulp ≈ 2.4e-7
	// relative; special values by definition.
	for x := -87.0; x <= 88.7; x += 0.0137 {
		want := math.Exp(float64(float32(x)))
		got := float64(Exp32(float32(x)))
		require.InEpsilon(t, want, got, 2.5e-7, "Exp32(%v)", x)
	}
	require.Equal(t, float32(1), Exp32(0))
	require.Equal(t, float32(0), Exp32(-100))
	require.True(t, math.IsInf(float64(Exp32(100)), 1))
	require.True(t, math.IsNaN(float64(Exp32(float32(math.NaN())))))
}

func TestExpShift(t *testing.T) {
	// Each kernel's ExpShift against float64 math.Exp, on lengths around
	// the vector width, with arguments from −100 (flushed to 0) to 0 and
	// a NaN that must propagate to its own element only.
	for _, e := range []*Engine{New(), New(WithGeneric())} {
		for _, n := range []int{0, 1, 7, 8, 9, 16, 100} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(-100 + 100*float64(i)/float64(max(n-1, 1)))
			}
			const shift = 3.5
			shifted := make([]float32, n)
			for i := range x {
				shifted[i] = x[i] + shift
			}
			var want float64
			for _, v := range x {
				if v >= -87.33 { // below e^−87.34 results are flushed to 0
					want += math.Exp(float64(v))
				}
			}
			got := e.ExpShift(shifted, shift)
			require.InDelta(t, want, got, 1e-6*want, "%s n=%d sum", e.KernelName(), n)
			for i, v := range x {
				w := math.Exp(float64(v))
				if v < -87.34 {
					w = 0
				}
				require.InDelta(t, w, float64(shifted[i]), 2.5e-7*w+1e-37, "%s n=%d i=%d x=%v", e.KernelName(), n, i, v)
			}
		}
		x := []float32{0, 1, float32(math.NaN()), -1, 0, 0, 0, 0, 2}
		s := e.ExpShift(x, 2)
		require.True(t, math.IsNaN(s), e.KernelName())
		require.True(t, math.IsNaN(float64(x[2])), e.KernelName())
		require.InEpsilon(t, math.Exp(-1), float64(x[1]), 2.5e-7, e.KernelName())
		require.InEpsilon(t, 1, float64(x[8]), 2.5e-7, e.KernelName())
	}
}
