package gemm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/agentrl/agentrl/internal/cputime"
)

// benchShapes are the sizes compared with gonum here and with PyTorch by
// testdata/torch_gemm.py (same names, same shapes): square products and the
// linear layers of a Qwen3-0.6B-sized block (hidden 1024, MLP 3072) over 512
// tokens, forward (y = x·Wᵀ) and both backward products, plus one-token decode.
var benchShapes = []struct {
	name    string
	tA, tB  bool
	m, n, k int
}{
	{"square512", false, false, 512, 512, 512},
	{"square1024", false, false, 1024, 1024, 1024},
	{"linear_fwd_512x3072x1024", false, true, 512, 3072, 1024},
	{"linear_dx_512x1024x3072", false, false, 512, 1024, 3072},
	{"linear_dW_3072x1024x512", true, false, 3072, 1024, 512},
	{"decode_1x3072x1024", false, true, 1, 3072, 1024},
	// examples/arith's main job: an SFT update's 16 sequences of about
	// 225 tokens (3,600 rows) through the MLP's up projection (hidden
	// 128 → 384), its down projection, the down weight's gradient, and a
	// decode step of 64 sequences.
	{"arith_up_3600x384x128", false, true, 3600, 384, 128},
	{"arith_down_3600x128x384", false, true, 3600, 128, 384},
	{"arith_dW_384x128x3600", true, false, 384, 128, 3600},
	{"arith_decode_64x384x128", false, true, 64, 384, 128},
}

func benchOperands(tA, tB bool, m, n, k int) (a []float32, lda int, b []float32, ldb int, c []float32) {
	r := rand.New(rand.NewPCG(5, 6))
	lda, ldb = k, n
	if tA {
		lda = m
	}
	if tB {
		ldb = k
	}
	return randSlice(r, m*k), lda, randSlice(r, k*n), ldb, make([]float32, m*n)
}

// reportGflops reports the wall-clock rate, GFLOP/s, and the rate per
// CPU-second of the process, GFLOP/cpu-s. The machines this is developed on
// are shared, so the wall-clock rate drops whenever others compute; the
// CPU-time rate (for one worker, the single-core speed) is much steadier.
// cpu0 is cputime.Self() taken just before the timed loop.
func reportGflops(b *testing.B, m, n, k int, cpu0 time.Duration) {
	cpu := cputime.Self() - cpu0
	flops := 2 * float64(m) * float64(n) * float64(k) * float64(b.N)
	b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu > 0 {
		b.ReportMetric(flops/cpu.Seconds()/1e9, "GFLOP/cpu-s")
	}
}

// BenchmarkSgemm measures this package's Sgemm with the default kernel and
// all cores, and gonum's pure-Go blas/gonum Sgemm on the same operands.
// Where the default kernel is the AVX-512 one, agentrl-avx2 runs the AVX2
// kernel beside it (the same results, bit for bit).
func BenchmarkSgemm(b *testing.B) {
	avx2, hasAVX2 := avx2Kernel()
	hasAVX2 = hasAVX2 && bestKernel().name != avx2.name
	for _, s := range benchShapes {
		a, lda, bb, ldb, c := benchOperands(s.tA, s.tB, s.m, s.n, s.k)
		b.Run(fmt.Sprintf("agentrl/%s", s.name), func(b *testing.B) {
			e := New()
			cpu0 := cputime.Self()
			for b.Loop() {
				if err := e.Sgemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n); err != nil {
					b.Fatal(err)
				}
			}
			reportGflops(b, s.m, s.n, s.k, cpu0)
		})
		if hasAVX2 {
			b.Run(fmt.Sprintf("agentrl-avx2/%s", s.name), func(b *testing.B) {
				e := New(withKernel(avx2))
				cpu0 := cputime.Self()
				for b.Loop() {
					if err := e.Sgemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n); err != nil {
						b.Fatal(err)
					}
				}
				reportGflops(b, s.m, s.n, s.k, cpu0)
			})
		}
		if strings.Contains(s.name, "decode") {
			// The batch-variant few-row path (WithBatchVariantFewRows).
			b.Run(fmt.Sprintf("agentrl-batch-variant/%s", s.name), func(b *testing.B) {
				e := New(WithBatchVariantFewRows())
				cpu0 := cputime.Self()
				for b.Loop() {
					if err := e.Sgemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n); err != nil {
						b.Fatal(err)
					}
				}
				reportGflops(b, s.m, s.n, s.k, cpu0)
			})
		}
		b.Run(fmt.Sprintf("gonum/%s", s.name), func(b *testing.B) {
			tA, tB := blas.NoTrans, blas.NoTrans
			if s.tA {
				tA = blas.Trans
			}
			if s.tB {
				tB = blas.Trans
			}
			var impl gonum.Implementation
			cpu0 := cputime.Self()
			for b.Loop() {
				impl.Sgemm(tA, tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n)
			}
			reportGflops(b, s.m, s.n, s.k, cpu0)
		})
	}
}

// BenchmarkSgemmGeneric measures the pure-Go micro-kernel (the noasm path).
func BenchmarkSgemmGeneric(b *testing.B) {
	s := benchShapes[0]
	a, lda, bb, ldb, c := benchOperands(s.tA, s.tB, s.m, s.n, s.k)
	e := New(WithGeneric())
	cpu0 := cputime.Self()
	for b.Loop() {
		if err := e.Sgemm(false, false, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n); err != nil {
			b.Fatal(err)
		}
	}
	reportGflops(b, s.m, s.n, s.k, cpu0)
}
