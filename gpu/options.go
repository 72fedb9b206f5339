package gpu

import (
	"errors"
	"fmt"
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
)

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
	profile     bool
}

func defaultConfig() config {
	return config{precision: BF16, weightCache: true, cacheLimit: 1 << 62, cublas: cublasLibraries()}
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
	return nil
}

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
// default search (libcublas.so.13, .12, .11, libcublas.so). With no names
// cuBLAS is not used and the built-in tiled GEMM kernel runs every product.
func WithCuBLAS(names ...string) Option {
	return func(c *config) { c.cublas = append([]string(nil), names...) }
}

// driverLibraries are the names dlopen tries for the driver API: the
// versioned soname the driver package installs, then the development link.
func driverLibraries() []string { return []string{"libcuda.so.1", "libcuda.so"} }

// cublasLibraries is the default cuBLAS search, newest first, so one binary
// uses whatever CUDA release the machine has (GemmEx and
// GemmStridedBatchedEx keep their ABI from 11 to 13).
func cublasLibraries() []string {
	return []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}
}
