// Package backend defines the compute layer under the policy transformer:
// the Backend interface of paired forward/backward kernels (GEMM, linear,
// embedding, RMSNorm, RoPE, causal GQA attention with a KV cache, SwiGLU,
// residual add, chunked log-softmax/gather/entropy over the vocabulary and
// last-position logits) on opaque float32 buffers that the backend owns,
// the shape types these kernels take, and the argument checks every
// implementation shares so that all of them reject the same bad calls with
// the same errors.
//
// Backends that run generation's decode loop in their own memory also
// implement Decoder: a paged KV cache (block tables, one append and one
// attention call per layer per step) and sampling over logits that never
// leave the device, by the rule SampleRow documents (vLLM's truncations,
// a Philox4x32-10 number per token). HostSampler is that rule on the
// host, and HostDecoder a Decoder for any backend, made of its Memory and
// Kernels (the generation of backends without a Decoder of their own).
//
// The transformer in package policy is written once over this interface,
// so one model definition runs on every backend; internal/cpu implements
// it for the CPU and package gpu for CUDA, and both run the conformance
// suite in policy/backend/backendtest.
//
// Conventions shared by all kernels:
//   - Tensors are dense, row-major float32; the doc comment of each method
//     gives their shapes, e.g. x [T, D] means T rows of D values.
//   - Every backward kernel accumulates: it adds its gradient into the
//     buffers it is given (dx += …, dW += …), like llm.c. Callers zero
//     gradient buffers before a backward pass; accumulation is what residual
//     branches and tied embeddings need. A nil gradient buffer skips that
//     gradient.
//   - Positions and attention spans, which every layer's RoPE and
//     attention call reads, come in a Rows that NewRows makes once per
//     pass: a device backend copies them (and what it derives from them)
//     to the device once per batch, not once per layer. Token ids and
//     targets, read once per pass, are host []int32 slices that a device
//     backend copies per call.
//   - Long reductions (norms, softmax sums, bias and norm-weight gradients,
//     entropy) accumulate in float64; GEMM accumulates in float32, as BLAS
//     sgemm and cuBLAS do.
//   - Bad arguments (sizes that do not match buffer lengths, out-of-range
//     ids, buffers of another backend) are reported as errors wrapping
//     ErrShape, ErrIndex, ErrBuffer or ErrArg, never as panics.
//
// backend must not import any other agentrl package (it sits below
// policy, internal/cpu and gpu), and must not import gorgonia.org/cu.
package backend
