package device

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/backend"
)

// BuildTag is the build tag that compiles CUDA support into package gpu
// (with cgo): go build -tags agentrl_cuda. No dependency of this module
// uses it; the plain tag cuda is gorgonia's.
const BuildTag = "agentrl_cuda"

// NewCPU returns the CPU backend: float32 buffers in Go memory and the
// paired forward/backward kernels, with GEMM in AVX2/FMA assembly where
// the CPU has it, on up to workers goroutines (workers ≤ 0: GOMAXPROCS).
// It also implements backend.Optimizer, so a model's training state can
// stay in its buffers (policy.Model.NewDeviceAdamW). It is the backend
// policy.New and policy.Load use when given none; programs outside this
// module choose it through here.
func NewCPU(workers int) backend.Backend {
	if workers > 0 {
		return cpu.New(cpu.WithWorkers(workers))
	}
	return cpu.New()
}

// Device is an opened backend and how it was chosen. Close it after the
// models that run on it.
type Device struct {
	be       backend.Backend
	gpu      *gpu.Backend // nil on the CPU
	cfg      Config       // what was opened: cpu or cuda:N, and the precision in force
	fallback error        // why auto chose the CPU; nil otherwise
	desc     string
}

// Open opens the backend c chooses for a model of configuration model,
// whose hidden size sets PrecisionAuto (DefaultPrecision) and whose head
// dim the description's attention kernels refer to; a zero
// policy.Config means an unknown model (fp32 under PrecisionAuto).
//
// cpu always succeeds. cuda:N returns the GPU's error, wrapped: in a
// binary built without BuildTag it wraps gpu.ErrNotCompiled, on a machine
// without a driver or such a device gpu.ErrNoDriver or gpu.ErrNoDevice.
// auto opens CUDA device 0 and, when that fails for any reason but ctx
// ending, the CPU, keeping the reason in Fallback. Errors of c itself
// wrap ErrInvalid (Config.Validate).
func Open(ctx context.Context, c Config, model policy.Config) (*Device, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch c.Device.Kind {
	case CPU:
		return openCPU(c, nil), nil
	case CUDA:
		d, err := openCUDA(ctx, c, model)
		if err != nil {
			return nil, fmt.Errorf("device %v: %w", c.Device, err)
		}
		return d, nil
	}
	d, err := openCUDA(ctx, Config{Device: Spec{Kind: CUDA}, Precision: c.Precision}, model)
	if err == nil {
		if c.BatchVariant {
			d.desc += "; -" + BatchVariantFlag + " applies to the CPU only"
		}
		return d, nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	return openCPU(c, err), nil
}

// openCUDA opens device c.Device.Ordinal in c's precision, resolved for
// model.
func openCUDA(ctx context.Context, c Config, model policy.Config) (*Device, error) {
	p, why := c.Precision, "as asked"
	if p == PrecisionAuto {
		p = DefaultPrecision(model.HiddenSize)
		why = autoReason(model.HiddenSize)
	}
	g, err := gpu.New(ctx, append([]gpu.Option{gpu.WithDevice(c.Device.Ordinal), gpu.WithPrecision(gpuPrecision(p))}, c.GPU...)...)
	if err != nil {
		if errors.Is(err, gpu.ErrNotCompiled) {
			return nil, fmt.Errorf("this binary was built without the %s build tag: %w", BuildTag, err)
		}
		return nil, err
	}
	d := &Device{be: g, gpu: g, cfg: Config{Device: c.Device, Precision: p, GPU: c.GPU}}
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %s; precision %v (%s)", c.Device, g.Name(), p, why)
	if hd := model.HeadDim; hd > 0 {
		kernels := "fp32 kernels"
		if g.TensorCoreAttention(hd) {
			kernels = "bf16 tensor cores"
		}
		fmt.Fprintf(&b, "; attention at head dim %d on %s", hd, kernels)
	}
	d.desc = b.String()
	return d, nil
}

// autoReason explains DefaultPrecision(hidden).
func autoReason(hidden int) string {
	switch {
	case hidden <= 0:
		return fmt.Sprintf("auto: model size unknown, fp32 below hidden size %d", BF16MinHidden)
	case hidden >= BF16MinHidden:
		return fmt.Sprintf("auto: hidden size %d ≥ %d", hidden, BF16MinHidden)
	}
	return fmt.Sprintf("auto: hidden size %d < %d", hidden, BF16MinHidden)
}

// openCPU opens the CPU backend; fallback is why auto came to it.
func openCPU(c Config, fallback error) *Device {
	var be backend.Backend
	if c.BatchVariant {
		be = cpu.New(cpu.WithBatchVariantFewRows())
	} else {
		be = NewCPU(0)
	}
	d := &Device{be: be, cfg: Config{Device: Spec{Kind: CPU}, Precision: FP32, BatchVariant: c.BatchVariant}, fallback: fallback}
	var b strings.Builder
	fmt.Fprintf(&b, "cpu: %s, fp32", be.Name())
	if fallback != nil {
		fmt.Fprintf(&b, "; auto chose the CPU: %v", fallback)
		if c.Precision == TF32 || c.Precision == BF16 {
			fmt.Fprintf(&b, "; -precision %v applies to CUDA only", c.Precision)
		}
	}
	d.desc = b.String()
	return d
}

// gpuPrecision maps a resolved Precision to package gpu's.
func gpuPrecision(p Precision) gpu.Precision {
	switch p {
	case TF32:
		return gpu.TF32
	case BF16:
		return gpu.BF16
	}
	return gpu.FP32
}

// Backend is the opened backend, to pass to policy.WithBackend.
func (d *Device) Backend() backend.Backend { return d.be }

// Config is what was opened, as flags: cpu (precision fp32) or cuda:N
// with the precision in force, never auto. Its Args give another
// process of the program the same device.
func (d *Device) Config() Config { return d.cfg }

// Fallback is why auto chose the CPU: the GPU's error (wrapping
// gpu.ErrNotCompiled, gpu.ErrNoDriver, gpu.ErrNoDevice or another);
// nil when the device is what was asked for.
func (d *Device) Fallback() error { return d.fallback }

// String describes the device in one line: the backend's name (for a
// GPU: its name, compute capability, driver, GEMM library, precision and
// attention kernels), the precision and why it was chosen, and, after a
// fallback, why the CPU was chosen.
func (d *Device) String() string { return d.desc }

// Close releases the GPU (package gpu's Backend.Close: its memory,
// context and thread); on the CPU it does nothing. Close the models on
// the device first; Close may be called more than once.
func (d *Device) Close() error {
	if d.gpu == nil {
		return nil
	}
	return d.gpu.Close()
}
