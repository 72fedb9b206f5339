// Package cpu is the CPU implementation of policy/backend.Backend: float32
// buffers in Go memory, the paired forward/backward transformer kernels,
// and GEMM through internal/gemm (AVX2+FMA assembly where available).
// Kernels run on up to GOMAXPROCS goroutines; a Backend holds no state
// beyond its configuration and is safe for concurrent use on distinct
// buffers.
//
// Its tests run the conformance suite policy/backend/backendtest.
//
// cpu may import only policy/backend and internal packages below it
// (internal/gemm); it must not import package policy, gpu or any package
// above them, nor gorgonia.org/cu.
package cpu
