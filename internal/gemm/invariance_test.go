package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chainGemm computes C as Sgemm documents it, one element at a time:
// c ← beta·c (0 when beta is 0), then c ← c + (alpha·a_ip)·b_pj for p in
// increasing order with the kernel's multiply-add — the AVX2 kernel's
// fused one through its axpy on one element, the generic kernel's Go
// `c += x·y`. It shares no code with Sgemm's paths but the primitive.
func chainGemm(kern kernel, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := range m {
		for j := range n {
			acc := beta * c[i*ldc+j]
			if beta == 0 {
				acc = 0
			}
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
				x := alpha * av
				if kern.axpy != nil {
					y := []float32{acc}
					kern.axpy(x, []float32{bv}, y)
					acc = y[0]
				} else {
					acc += x * bv
				}
			}
			c[i*ldc+j] = acc
		}
	}
}

type gemmCase struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
}

func (g gemmCase) String() string {
	return fmt.Sprintf("tA=%v tB=%v %dx%dx%d a=%v b=%v", g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.beta)
}

// operands returns A, B and C with strides wider than the matrices.
func (g gemmCase) operands(r *rand.Rand) (a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	lda, ldb, ldc = g.k+3, g.n+1, g.n+2
	ar, br := g.m, g.k
	if g.transA {
		lda, ar = g.m+1, g.k
	}
	if g.transB {
		ldb, br = g.k+2, g.n
	}
	return randSlice(r, ar*lda), lda, randSlice(r, br*ldb), ldb, randSlice(r, g.m*ldc), ldc
}

func gemmCases() []gemmCase {
	var cs []gemmCase
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		for _, sh := range [][3]int{{1, 1, 1}, {23, 17, 7}, {23, 100, 33}, {17, 70, 300}, {9, 33, 600}, {30, 3100, 5}} {
			for _, ab := range [][2]float32{{1, 0}, {0.37, 1}, {-1.5, 0.25}} {
				cs = append(cs, gemmCase{tr[0], tr[1], sh[0], sh[1], sh[2], ab[0], ab[1]})
			}
		}
	}
	return cs
}

// TestSgemmIsTheDocumentedChain: every element of every path (few rows,
// blocked, edge tiles, k over the KC block, parallel splits) is the
// chain of multiply-adds Sgemm's doc states, bit for bit.
func TestSgemmIsTheDocumentedChain(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for name, e := range engines() {
		for _, g := range gemmCases() {
			a, lda, b, ldb, c, ldc := g.operands(r)
			want := append([]float32(nil), c...)
			chainGemm(e.kern, g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, want, ldc)
			// Every row count from 1 to m: the first rows alone.
			for _, rows := range []int{1, 2, 3, 4, 5, 6, 7, g.m} {
				rows = min(rows, g.m)
				got := append([]float32(nil), c...)
				require.NoError(t, e.Sgemm(g.transA, g.transB, rows, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, got, ldc))
				require.Equal(t, math.Float32bits(want[0]), math.Float32bits(got[0]), "%s %v rows %d", name, g, rows)
				require.Equal(t, want[:(rows-1)*ldc+g.n], got[:(rows-1)*ldc+g.n], "%s %v rows %d", name, g, rows)
			}
		}
	}
}

// TestSgemmRowsAreBatchInvariant: a row (and a column) of C is the same
// bits whether computed alone or inside products of 1, 3, 5, 17 or all
// rows at any offset, with 1, 2 or 3 workers.
func TestSgemmRowsAreBatchInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, kind := range []string{"best", "generic"} {
		for _, g := range gemmCases() {
			a, lda, b, ldb, c, ldc := g.operands(r)
			var full []float32
			for _, workers := range []int{1, 2, 3} {
				opts := []Option{WithWorkers(workers)}
				if kind == "generic" {
					opts = append(opts, WithGeneric())
				}
				e := New(opts...)
				got := append([]float32(nil), c...)
				require.NoError(t, e.Sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, got, ldc))
				if full == nil {
					full = got
				}
				require.Equal(t, full, got, "%s/%d %v: workers change the bits", kind, workers, g)
				for _, bs := range []int{1, 3, 5, 17} {
					for r0 := 0; r0 < g.m; r0 += bs {
						rows := min(bs, g.m-r0)
						sub := append([]float32(nil), c...)
						aOff := r0 * lda
						if g.transA {
							aOff = r0
						}
						require.NoError(t, e.Sgemm(g.transA, g.transB, rows, g.n, g.k, g.alpha, a[aOff:], lda, b, ldb, g.beta, sub[r0*ldc:], ldc))
						require.Equal(t, full[r0*ldc:(r0+rows)*ldc], sub[r0*ldc:(r0+rows)*ldc], "%s/%d %v rows [%d,%d)", kind, workers, g, r0, r0+rows)
					}
				}
				// Windows of columns [j0, j0+w): B's columns (rows when
				// transB) and C's.
				for _, win := range [][2]int{{0, 1}, {5, 16}, {g.n / 2, 33}, {g.n - 3, 3}} {
					j0, cols := max(win[0], 0), min(win[1], g.n-max(win[0], 0))
					if cols <= 0 {
						continue
					}
					sub := append([]float32(nil), c...)
					bOff := j0
					if g.transB {
						bOff = j0 * ldb
					}
					require.NoError(t, e.Sgemm(g.transA, g.transB, g.m, cols, g.k, g.alpha, a, lda, b[bOff:], ldb, g.beta, sub[j0:], ldc))
					for i := range g.m {
						require.Equal(t, full[i*ldc+j0:i*ldc+j0+cols], sub[i*ldc+j0:i*ldc+j0+cols], "%s/%d %v columns [%d,%d) row %d", kind, workers, g, j0, j0+cols, i)
					}
				}
			}
		}
	}
}

// TestPackT: each kernel's packT transposes eight rows of B into the
// first eight columns of a panel of its width, leaving the others alone.
func TestPackT(t *testing.T) {
	var kerns []kernel
	for _, get := range []func() (kernel, bool){avx2Kernel, avx512Kernel} {
		if k, ok := get(); ok {
			kerns = append(kerns, k)
		}
	}
	if len(kerns) == 0 {
		t.Skip("the kernels transpose in Go")
	}
	r := rand.New(rand.NewPCG(15, 16))
	for _, kern := range kerns {
		nr := kern.nr
		for _, k8 := range []int{0, 8, 16, 64} {
			lds := k8 + 5
			src := randSlice(r, 8*lds)
			dst := make([]float32, max(k8, 1)*nr)
			for i := range dst {
				dst[i] = -1
			}
			kern.packT(k8, src, lds, dst)
			for p := range k8 {
				for c := range nr {
					want := float32(-1) // the rest of the panel is untouched
					if c < 8 {
						want = src[c*lds+p]
					}
					require.Equal(t, want, dst[p*nr+c], "%s k8=%d p=%d c=%d", kern.name, k8, p, c)
				}
			}
		}
	}
}

func TestPackA(t *testing.T) {
	kern := bestKernel()
	if kern.packRows == nil {
		t.Skip("the kernel packs A in Go")
	}
	r := rand.New(rand.NewPCG(17, 18))
	const alpha = 0.37
	for _, k := range []int{0, 1, 8, 9, 24} {
		// A stored m×k: six rows of k values, stride k+3.
		lds := k + 3
		src := randSlice(r, 6*lds)
		k8 := k &^ 7
		dst := make([]float32, 6*k8+2)
		kern.packRows(k8, src, lds, alpha, dst)
		for p := range k8 {
			for i := range 6 {
				require.Equal(t, alpha*src[i*lds+p], dst[p*6+i], "rows k8=%d p=%d i=%d", k8, p, i)
			}
		}
		// A stored k×m: k rows of (at least) six values, stride 7.
		src = randSlice(r, max(k*7, 1))
		dst = make([]float32, 6*k+2)
		kern.packCols(k, src, 7, alpha, dst)
		for p := range k {
			for i := range 6 {
				require.Equal(t, alpha*src[p*7+i], dst[p*6+i], "cols k=%d p=%d i=%d", k, p, i)
			}
		}
	}
}

// TestBatchVariantFewRows: with WithBatchVariantFewRows, products of at
// most MR rows with B stored n×k agree with the batch-invariant chain to
// float32 rounding (relative 1e-5 of the sum of |terms|), for every
// column count (groups of four and the columns after them), k with and
// without a tail past a multiple of 8, A stored either way, beta ≠ 0;
// products of more rows are unchanged to the bit.
func TestBatchVariantFewRows(t *testing.T) {
	inv, fast := New(), New(WithBatchVariantFewRows())
	if fast.kern.dot4 == nil {
		t.Skip("no dot kernel on this CPU or build")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct {
		m, n, k int
		transA  bool
	}{{1, 3072, 1024, false}, {1, 7, 13, false}, {3, 9, 8, true}, {6, 384, 128, false}, {2, 5, 3, false}, {7, 64, 64, false}} {
		lda := c.k
		if c.transA {
			lda = c.m
		}
		a := make([]float32, c.m*c.k)
		b := make([]float32, c.n*c.k)
		c0 := make([]float32, c.m*c.n)
		for i := range a {
			a[i] = float32(r.NormFloat64())
		}
		for i := range b {
			b[i] = float32(r.NormFloat64())
		}
		for i := range c0 {
			c0[i] = float32(r.NormFloat64())
		}
		want, got := append([]float32(nil), c0...), append([]float32(nil), c0...)
		require.NoError(t, inv.Sgemm(c.transA, true, c.m, c.n, c.k, 0.5, a, lda, b, c.k, 2, want, c.n))
		require.NoError(t, fast.Sgemm(c.transA, true, c.m, c.n, c.k, 0.5, a, lda, b, c.k, 2, got, c.n))
		if c.m > fast.kern.mr {
			assert.Equal(t, want, got, "%d rows: the invariant path", c.m)
			continue
		}
		for i := range c.m {
			for j := range c.n {
				var mag float64
				for p := range c.k {
					av := a[i*c.k+p]
					if c.transA {
						av = a[p*c.m+i]
					}
					mag += math.Abs(float64(av) * float64(b[j*c.k+p]))
				}
				mag = 2*math.Abs(float64(c0[i*c.n+j])) + 0.5*mag
				assert.InDelta(t, want[i*c.n+j], got[i*c.n+j], 1e-5*mag+1e-30, "%dx%dx%d element (%d,%d)", c.m, c.n, c.k, i, j)
			}
		}
	}
}
