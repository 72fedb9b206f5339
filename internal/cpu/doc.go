// Package cpu is the CPU implementation of policy/backend.Backend: float32
// buffers in Go memory, the paired forward/backward transformer kernels,
// and GEMM through internal/gemm (AVX2+FMA assembly where available),
// and backend.Decoder: a paged KV cache in Go memory and sampling on the
// logits buffers in place. Kernels run on up to GOMAXPROCS goroutines; a
// Backend holds no state beyond its configuration and a pool of sampling
// buffers, and is safe for concurrent use on distinct buffers.
//
// Its tests run the conformance suite policy/backend/backendtest.
//
// cpu may import only policy/backend and internal packages below it
// (internal/gemm); it must not import package policy, gpu or any package
// above them, nor gorgonia.org/cu.
package cpu
