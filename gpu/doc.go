// Package gpu is the CUDA backend for the policy transformer: it implements
// policy/backend.Backend (memory plus paired forward/backward kernels) on an
// NVIDIA GPU and runs the same conformance suite as the CPU backend,
// policy/backend/backendtest.
//
// # Build
//
// The CUDA code sits behind the build tag agentrl_cuda (and needs cgo).
// The tag is the project's own: gorgonia, which every trainer imports
// through package loss, has //go:build cuda files that need cuDNN and
// switch its engine to CUDA, so the plain tag cuda must not be used.
// Without the tag the package still builds, in pure Go, and New returns
// ErrNotCompiled, so programs can try the GPU and fall back to the CPU
// (package device does both behind the -device flag, and
// device.NewCPU is the CPU backend). With the tag
// the package compiles against the CUDA headers (Debian's nvidia-cuda-dev;
// elsewhere set CGO_CFLAGS=-I/usr/local/cuda/include) and links nothing
// from CUDA: the driver (libcuda.so.1) and cuBLAS (libcublas.so.13, .12,
// .11) are opened with dlopen when New runs. A machine without a driver or
// GPU gets an error from New (ErrNoDriver, ErrNoDevice), never an exit.
//
// For that reason the package does not import gorgonia.org/cu: that
// package's init calls cuInit and exits the process when no driver is
// present (cu v0.9.4, cu.go), which would end every program built with the
// tag on a machine without a GPU. The driver calls it would wrap are few
// and are made through a small cgo shim instead (backend_cuda.go).
//
// # Device model
//
// A Backend holds one device's primary context (one context per device),
// made current on one locked OS thread that runs every CUDA call of that
// Backend in order; one stream per Backend; a cuBLAS handle on that stream;
// a caching allocator that keeps freed device blocks by size for reuse; and
// a module of kernels loaded from PTX embedded in the binary (kernels/, made
// by `go generate` with nvcc and committed, so users need no nvcc; compute_90
// PTX on Hopper and newer, compute_80 PTX otherwise, JIT-compiled by the
// driver). Devices of compute capability below 8.0 are refused. Backend
// also implements backend.Optimizer (AdamW, GradNorm, Scale), so a model's
// weights, gradients and AdamW moments can stay in device memory for the
// whole of training.
//
// # Precision
//
// The Backend interface works on float32 buffers, and so does this backend:
// activations, weights (the fp32 master copy), gradients and optimizer state
// are float32 in device memory. Precision chooses what the matrix products
// run on. BF16 (the default) rounds the GEMM inputs to bfloat16 (round to
// nearest even, as torch) into scratch memory inside Gemm, Linear and the
// LM-head kernels, and multiplies them on tensor cores through cuBLAS
// GemmEx / GemmStridedBatchedEx with float32 accumulation and float32
// output; TF32 uses cuBLAS's TF32 tensor-core mode; FP32 is exact float32
// (the mode that meets backendtest.DefaultTolerance). In BF16 precision,
// attention also runs on tensor cores (AttentionKernels): FlashAttention-2
// forward and backward kernels multiply bf16 tiles — q, k, v and dO rounded
// as they are loaded into shared memory, P and dS between the products —
// with mma.sync, while the softmax statistics, the log-sum-exp and every
// accumulator stay float32; head dims up to 128 (smaller ones zero-padded
// to 64 or 128), the float32 kernels above that, for split-K decoding, and
// in the other precisions. All other kernels — norms, RoPE, softmax,
// SwiGLU, the optimizer — compute in float32 with float32 or float64
// reductions in every mode. When cuBLAS cannot be loaded, a tiled float32
// GEMM kernel takes its place (with bf16-rounded inputs in BF16 mode, the
// same numerics without tensor cores).
//
// A pass's positions and attention spans arrive once per batch as a
// backend.Rows (NewRows): the backend copies the positions, RoPE's
// frequencies, the attention tiles and the decode plan to the device at
// their first use and every layer's RoPE and attention call reuses them,
// so a training step makes a fixed number of host-to-device copies (5,
// the small staged arrays in 2 asynchronous ones) and host
// synchronizations (6) whatever its layers (Counters counts them;
// TestTrainStepStructure holds a step to that under the emulator's fake
// driver).
//
// Instrumentation: Counters and ResetCounters count kernel launches,
// cuBLAS products, copies and the calls that make the host wait;
// CacheStats carries the allocator's peaks (PeakInUse, PeakReserved,
// ResetPeak); a Backend made WithProfile(true) records every kernel,
// product and copy between two CUDA events, and Profile sums their device
// time by name. gpu/cmd/trainbench uses all three.
//
// Activations are converted per call into scratch memory from the caching
// allocator. Weights — the W of Linear, LogProbEntropy and Logits — keep
// their converted copy between calls (WithWeightCache, on by default): it
// is made at the first product and made again only after the weight
// buffer has been written, by Upload, Copy, Fill, AdamW or any other call
// that writes it (every writing call marks its outputs, in stream order),
// so a weight updated once per optimizer step is converted once per step,
// not once per micro-batch, forward and backward. The copies cost half the
// fp32 weights' memory (Stats().WeightBytes) and are released with their
// buffers.
//
// # Generation
//
// Backend implements backend.Decoder, so that policy.Model's generation
// runs its decode loop on the device (the kernels of kernels/decode.cu, a
// module of their own): the paged KV cache is one device allocation
// (bfloat16 in BF16 precision, float32 otherwise) sized by the model
// (policy.GenerateOptions); each forward step uploads its layout once
// (block tables, where each new row goes, the split-K plan), then each
// layer appends the step's keys and values with one launch and attends
// over the pages with split-K flash-decoding for decode rows (a warp per
// row, KV head and split, serving every query head of the group, key and
// value tiles staged in shared memory) and a tiled kernel for prefill
// chunks; sampling (sample_rows: greedy, temperature, min-p, top-k and
// top-p by radix selects over the logits' bits, exact fixed-point sums,
// the Philox4x32-10 number of backend.SampleUniform) runs on the logits
// in place, and only 12 bytes per sequence come back.
//
// The host stays out of the step: the calls that only queue device work
// join a launch queue (WithLaunchQueue) and reach the worker thread at
// SampleRows, one round trip per step; the step's small host data (ids,
// positions, RoPE frequencies, the layout, the sampling parameters) is
// staged by the calls and goes up in one asynchronous copy from pinned
// memory before the first launch; and a step whose launches repeat an
// earlier step's (same batch, same buffers) is replayed from a CUDA
// graph (WithCUDAGraphs). Counters reports the launches, products,
// copies, round trips and graph replays, per step what the fake-driver
// tests check (TestDecodeStepStructure, TestDecodeGraphs) and the decode
// benchmark (decodebench) prints.
//
// gpu may import policy/backend and the standard library; it must not import
// package policy, internal/cpu, device or gorgonia.org/cu (its tests import
// policy and internal/cpu as references: AdamW bit for bit, kernels side by
// side; its examples import device).
package gpu
