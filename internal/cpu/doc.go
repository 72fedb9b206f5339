// Package cpu is the CPU implementation of policy/backend.Backend: float32
// buffers in Go memory, the paired forward/backward transformer kernels,
// and GEMM through internal/gemm (AVX2+FMA assembly where available),
// and backend.Decoder: a paged KV cache in Go memory and sampling on the
// logits buffers in place. Kernels run on up to GOMAXPROCS goroutines; a
// Backend holds no state beyond its configuration and a pool of sampling
// buffers, and is safe for concurrent use on distinct buffers.
//
// Its kernels are batch-invariant: a row's result (a linear layer's, a
// norm's, attention's, a log-probability's) is the same bits whether it
// is computed alone or among other rows, on one worker or many, and
// attention's whether it runs over packed training sequences or the
// paged KV cache, with any block size and any chunking of the prefill —
// products through internal/gemm's fixed order, softmaxes and norms
// row by row, and SampleRows recording LogProbEntropy's own
// log-probabilities. Gradient sums over rows are split by the shape,
// not by the workers. So the sampler's log-probabilities are the
// trainer's, bit for bit (invariance_test.go checks each kernel).
//
// Its tests run the conformance suite policy/backend/backendtest.
//
// cpu may import only policy/backend and internal packages below it
// (internal/gemm); it must not import package policy, gpu or any package
// above them, nor gorgonia.org/cu.
package cpu
