package gpu

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Errors of New and of the backend's own calls; kernel argument errors
// wrap the sentinels of policy/backend, as on the CPU.
var (
	// ErrNotCompiled: the binary was built without the agentrl_cuda tag (or cgo).
	ErrNotCompiled = errors.New("gpu: CUDA support not compiled in (build with -tags agentrl_cuda and cgo)")
	// ErrNoDriver: libcuda.so.1 could not be loaded or initialized.
	ErrNoDriver = errors.New("gpu: CUDA driver not available")
	// ErrNoDevice: no CUDA device with the requested ordinal, or one below
	// compute capability 8.0.
	ErrNoDevice = errors.New("gpu: no usable CUDA device")
	// ErrCUDA: a driver, cuBLAS or kernel call failed; see *DriverError.
	ErrCUDA = errors.New("gpu: CUDA call failed")
	// ErrClosed: the Backend has been closed.
	ErrClosed = errors.New("gpu: backend closed")
	// ErrNoCuBLAS: New found none of the cuBLAS libraries it looks for,
	// and was not allowed to run every product on its built-in tiled
	// GEMM, many times slower (WithCuBLASFallback, or the environment
	// variable AGENTRL_ALLOW_NO_CUBLAS=1).
	ErrNoCuBLAS = errors.New("gpu: cuBLAS not found")
)

// AllowNoCuBLASEnv is the environment variable that, set to 1, lets New
// run without cuBLAS (see WithCuBLASFallback): for programs that open
// the GPU without options of their own, such as those of package device.
const AllowNoCuBLASEnv = "AGENTRL_ALLOW_NO_CUBLAS"

// DriverError is a failed CUDA driver or cuBLAS call: the function, its
// status code and the driver's description.
type DriverError struct {
	Call string
	Code int
	Msg  string
}

// Error names the driver call, its status code and the driver's message.
func (e *DriverError) Error() string {
	return fmt.Sprintf("gpu: %s failed: status %d (%s)", e.Call, e.Code, e.Msg)
}

// Unwrap makes errors.Is(err, ErrCUDA) true.
func (e *DriverError) Unwrap() error { return ErrCUDA }

// Precision chooses the arithmetic of the matrix products (see the package
// doc); every other kernel is float32 in all modes.
type Precision int

const (
	// BF16 multiplies bfloat16-rounded inputs on tensor cores with float32
	// accumulation (the default).
	BF16 Precision = iota
	// TF32 uses cuBLAS's TF32 tensor-core mode on float32 inputs.
	TF32
	// FP32 is exact float32 GEMM (CUDA cores).
	FP32
)

// String is the precision's flag value: bf16, tf32 or fp32.
func (p Precision) String() string {
	switch p {
	case BF16:
		return "bf16"
	case TF32:
		return "tf32"
	case FP32:
		return "fp32"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// AttentionKernels chooses what attention runs on (see the package doc).
type AttentionKernels int

const (
	// AttentionAuto (the default) runs attention on tensor cores — bf16
	// inputs, float32 softmax and accumulation — in BF16 precision when the
	// head dim is at most 128, and on the float32 kernels otherwise (TF32
	// and FP32 precision, larger head dims).
	AttentionAuto AttentionKernels = iota
	// AttentionFP32 always runs the float32 (CUDA-core) kernels.
	AttentionFP32
	// AttentionTensorCores runs the tensor-core kernels whenever the head
	// dim is at most 128, whatever the GEMM precision.
	AttentionTensorCores
)

// String names the choice as Backend.Name and the benchmarks do.
func (a AttentionKernels) String() string {
	switch a {
	case AttentionAuto:
		return "auto"
	case AttentionFP32:
		return "fp32"
	case AttentionTensorCores:
		return "tensor-cores"
	}
	return fmt.Sprintf("AttentionKernels(%d)", int(a))
}

// Option configures New.
type Option func(*config)

type config struct {
	device      int
	precision   Precision
	attention   AttentionKernels
	weightCache bool
	cacheLimit  int64
	cublas      []string // library names to try; empty: no cuBLAS
	noBLASOK    bool     // none of cublas found: the tiled GEMM, not ErrNoCuBLAS
	profile     bool
	lm          lmBudget // the LM head's logits chunks (lmChunk)
	actCache    int64    // bytes of activation copies kept (WithActivationCache)
	queue       bool     // WithLaunchQueue
	graphs      bool     // WithCUDAGraphs
	graphTrace  io.Writer
}

func defaultConfig() config {
	return config{precision: BF16, weightCache: true, cacheLimit: 1 << 62, cublas: cublasLibraries(), noBLASOK: os.Getenv(AllowNoCuBLASEnv) == "1",
		lm: lmBudget{elems: lmMaxElems, minCols: lmMinVocab}, actCache: defaultActCache, queue: true, graphs: true}
}

func (c config) validate() error {
	if c.device < 0 {
		return fmt.Errorf("%w: device ordinal %d", ErrNoDevice, c.device)
	}
	if c.precision < BF16 || c.precision > FP32 {
		return fmt.Errorf("gpu: unknown precision %v", c.precision)
	}
	if c.attention < AttentionAuto || c.attention > AttentionTensorCores {
		return fmt.Errorf("gpu: unknown attention kernels %v", c.attention)
	}
	if c.cacheLimit < 0 {
		return fmt.Errorf("gpu: negative cache limit %d", c.cacheLimit)
	}
	if c.actCache < 0 {
		return fmt.Errorf("gpu: negative activation cache %d", c.actCache)
	}
	return nil
}

// withLMBudget sets the LM head's chunk budget (tests: several chunks of a
// shape small enough to emulate).
func withLMBudget(b lmBudget) Option { return func(c *config) { c.lm = b } }

// WithLaunchQueue turns the launch queue on or off (default on). With it,
// the calls that only queue device work (kernels, products, Alloc, Free,
// the decode calls) return at once and reach the worker thread together,
// at the next call that needs an answer from it (a Download, SampleRows,
// Synchronize, Counters …) or after queueMax calls: a decode step is one
// round trip to the worker instead of one per call. An error of a queued
// call is returned by that next call, as CUDA reports an asynchronous
// error at the next synchronization; the calls queued after it are
// dropped. Off, every call waits for the worker and returns its own
// errors.
func WithLaunchQueue(on bool) Option { return func(c *config) { c.queue = on } }

// WithCUDAGraphs turns the capture of queued work into CUDA graphs on or
// off (default on; always off when profiling). The work a round trip to
// the worker queues is recorded, launch by launch; the second time the
// same record (the same kernels, shapes and device addresses — a decode
// step of the same batch size over the same blocks) comes, it is captured
// into a graph, and later ones replay that graph with one cuGraphLaunch.
// What differs between such steps (token ids, positions, the step's
// layout, sampling parameters) is uploaded in place before the launch.
// Where capture fails, the work runs as plain launches.
func WithCUDAGraphs(on bool) Option { return func(c *config) { c.graphs = on } }

// WithGraphTrace writes a line to w for every record of queued work (see
// WithCUDAGraphs): its calls, what became of it (sent, captured,
// replayed, not capturable) and, when it differs from the record before
// it, the first call that differs, by index and by the values of both.
// It says why a workload's steps do not replay; w is written from the
// backend's worker thread only.
func WithGraphTrace(w io.Writer) Option { return func(c *config) { c.graphTrace = w } }

// WithDevice selects the CUDA device by ordinal (default 0).
func WithDevice(ordinal int) Option { return func(c *config) { c.device = ordinal } }

// WithPrecision sets the GEMM precision (default BF16).
func WithPrecision(p Precision) Option { return func(c *config) { c.precision = p } }

// WithAttention chooses the attention kernels (default AttentionAuto).
func WithAttention(a AttentionKernels) Option { return func(c *config) { c.attention = a } }

// WithWeightCache turns the cache of converted weights on or off (default
// on). In BF16 precision the backend keeps the bf16 copy of each weight
// that Linear, LogProbEntropy and Logits multiply, and makes it again only
// after the weight buffer has been written (Upload, Copy, Fill, AdamW, any
// kernel output); the copies take half the weights' memory (the whole of
// it without cuBLAS, where they are bf16-rounded float32). Off, weights
// are converted into scratch memory at every call.
func WithWeightCache(on bool) Option { return func(c *config) { c.weightCache = on } }

// defaultActCache is WithActivationCache's default: 2 GiB of bf16
// copies, the inputs of the products of the last ≈ 17 layers of a
// Qwen3-0.6B forward over 8,192 tokens (≈ 117 MiB a layer).
const defaultActCache = 2 << 30

// WithActivationCache bounds the bytes of bf16 activation copies the
// backend keeps (default 2 GiB; 0 turns the cache off). In BF16
// precision through cuBLAS, an activation that products read — the input
// of a projection, the LM head's hidden states — is converted to bf16
// once per write and kept, so that the q, k and v projections (gate and
// up) share one conversion of their input, and the backward's weight
// gradients reuse the forward's copies while they are kept; beyond the
// bound the least recently used are released. The copies count in
// CacheStats.InUse and ActivationBytes.
func WithActivationCache(bytes int64) Option { return func(c *config) { c.actCache = bytes } }

// WithProfile records the device time of every kernel, cuBLAS product and
// copy with a pair of CUDA events (default off), for Backend.Profile: a
// per-kernel breakdown of a computation. The events cost a little host
// time per call; time headline figures without it.
func WithProfile(on bool) Option { return func(c *config) { c.profile = on } }

// tensorCoreAttention reports whether attention with head dim hd runs on
// the tensor-core kernels under c.
func (c config) tensorCoreAttention(hd int) bool {
	if _, ok := tcFor(hd); !ok {
		return false
	}
	switch c.attention {
	case AttentionTensorCores:
		return true
	case AttentionAuto:
		return c.precision == BF16
	}
	return false
}

// attentionName describes c's attention kernels for Backend.Name.
func (c config) attentionName() string {
	if c.tensorCoreAttention(tcMaxHead) {
		return fmt.Sprintf("attention bf16 tensor cores (head dim ≤ %d; fp32 above and for split-K decode)", tcMaxHead)
	}
	return "attention fp32"
}

// WithCacheLimit bounds the bytes of freed device blocks the caching
// allocator keeps for reuse (default: no bound; 0 returns every freed block
// to the driver at once).
func WithCacheLimit(bytes int64) Option { return func(c *config) { c.cacheLimit = bytes } }

// WithCuBLAS sets the cuBLAS libraries to try, in order, instead of the
// default search (libcublas.so.13, .12, .11, libcublas.so, then the same
// in /usr/local/cuda/lib64). With no names cuBLAS is not used and the
// built-in tiled GEMM kernel runs every product. When names are given
// (or by default) and none loads, New fails with ErrNoCuBLAS unless
// WithCuBLASFallback allows the tiled GEMM.
func WithCuBLAS(names ...string) Option {
	return func(c *config) { c.cublas = append([]string(nil), names...) }
}

// WithCuBLASFallback lets New run every product on the built-in tiled
// GEMM when no cuBLAS library can be loaded (ok true), instead of failing
// with ErrNoCuBLAS (the default, unless the environment sets
// AGENTRL_ALLOW_NO_CUBLAS=1). The tiled GEMM computes the same
// products, many times slower; Name says which GEMM runs.
func WithCuBLASFallback(ok bool) Option { return func(c *config) { c.noBLASOK = ok } }

// driverLibraries are the names dlopen tries for the driver API: the
// versioned soname the driver package installs, then the development link.
func driverLibraries() []string { return []string{"libcuda.so.1", "libcuda.so"} }

// cublasLibraries is the default cuBLAS search, newest first, so one binary
// uses whatever CUDA release the machine has (GemmEx and
// GemmStridedBatchedEx keep their ABI from 11 to 13).
func cublasLibraries() []string {
	names := []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}
	for _, n := range names[:3] {
		names = append(names, "/usr/local/cuda/lib64/"+n) // a toolkit the loader was not told of
	}
	return names
}

// noCuBLASError is New's refusal when none of names loads: what was
// looked for, where the libraries usually are, and how to go on without.
func noCuBLASError(names []string) error {
	return fmt.Errorf("%w: none of %v loads; put the folder that holds libcublas.so.12 or .13 on LD_LIBRARY_PATH "+
		"(the pip wheels put it in site-packages/nvidia/cublas/lib for CUDA 12, site-packages/nvidia/cu13/lib for CUDA 13; "+
		"a CUDA toolkit in its lib64), or set %s=1 (WithCuBLASFallback) to run every product on the built-in tiled GEMM, many times slower",
		ErrNoCuBLAS, names, AllowNoCuBLASEnv)
}
