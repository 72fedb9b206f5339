// Package gemm is agentrl's float32 matrix multiply for the CPU backend:
// a cache-blocked, packed, goroutine-parallel GEMM in the style of BLIS/GotoBLAS
// (loops over NC×KC panels of B and MC×KC blocks of A, a register-blocked
// micro-kernel on packed panels), with an AVX2+FMA micro-kernel in Go
// assembly chosen at run time through golang.org/x/sys/cpu, and a pure-Go
// kernel used elsewhere (other architectures, CPUs without AVX2/FMA, and the
// noasm build tag). Products with very few rows (decode, m ≤ 4) skip packing
// and run as dot products (four rows of B per pass) or axpys.
//
// It owns dense row-major float32 GEMM and the vector primitives that share
// its run-time kernel choice: dot, axpy, and the float32 exponential Exp32
// with its vectorized softmax pass Engine.ExpShift (AVX2, float64 sums),
// which the attention and log-softmax kernels of internal/cpu use.
//
// gemm must not import any agentrl package: it sits below internal/cpu and
// knows nothing about transformers or backends.
package gemm
