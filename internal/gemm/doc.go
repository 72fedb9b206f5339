// Package gemm is agentrl's float32 matrix multiply for the CPU backend:
// a cache-blocked, packed, goroutine-parallel GEMM in the style of BLIS/GotoBLAS
// (loops over NC×KC panels of B and MC×KC blocks of A, a register-blocked
// micro-kernel on packed panels), with micro-kernels in Go assembly chosen
// at run time through golang.org/x/sys/cpu — avx512-6x32 (AVX-512F, zmm
// registers, 32-column panels) where the CPU and OS support AVX-512,
// else avx2-fma-6x16 (AVX2+FMA) — and a pure-Go kernel used elsewhere
// (other architectures, CPUs without AVX2/FMA, and the noasm build tag).
// The two assembly kernels compute every element with the same chain of
// fused multiply-adds: their results are the same bits.
//
// Products are batch-invariant: every element of C is one chain of the
// kernel's multiply-adds over k in increasing order, starting from β·C,
// whatever the number of rows, the blocking and the split over workers
// (Engine.Sgemm). The micro-kernel updates C in place rather than adding
// a partial sum per KC block; the last micro-panel of rows, when it has
// fewer rows than the kernel's, runs a kernel for those rows alone
// (products of at most one micro-panel of rows, as in decoding, run it
// over B packed a few micro-panels at a time); and products of at most
// four rows with B stored k×n, which need no packing, run the same chain
// as axpys. So a row of C is the same bits whether it is computed alone
// or in any batch — the property that makes the CPU backend's sampler
// and trainer agree to the bit. Its price is in decoding with B stored
// n×k (a linear layer's weight): the chain runs along k, so B is
// transposed into panels, where a dot product would read it as it is
// (docs/benchmarks.md has the figures).
//
// It owns dense row-major float32 GEMM and the vector primitives that share
// its run-time kernel choice: axpy, and the float32 exponential Exp32
// with its vectorized softmax pass Engine.ExpShift (AVX2, float64 sums),
// which the attention and log-softmax kernels of internal/cpu use.
//
// gemm must not import any agentrl package: it sits below internal/cpu and
// knows nothing about transformers or backends.
package gemm
