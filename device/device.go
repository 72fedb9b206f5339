package device

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl/gpu"
)

// ErrInvalid marks a -device or -precision value, or a combination of
// them, that this package does not accept.
var ErrInvalid = errors.New("device: invalid choice")

// Kind is the kind of device a Spec names.
type Kind int

const (
	// Auto is CUDA device 0 when this binary and machine have one, the
	// CPU otherwise (the default).
	Auto Kind = iota
	// CPU is this machine's CPU.
	CPU
	// CUDA is an NVIDIA GPU through package gpu.
	CUDA
)

// String names the kind as the -device flag spells it.
func (k Kind) String() string {
	switch k {
	case Auto:
		return "auto"
	case CPU:
		return "cpu"
	case CUDA:
		return "cuda"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// maxOrdinalDigits bounds the digits of N in cuda:N, so that every
// accepted N fits an int32 (the CUDA driver's device ordinal).
const maxOrdinalDigits = 9

// Spec is a -device value: a kind and, for CUDA, the device ordinal.
// The zero Spec is auto. Spec implements flag.Value.
type Spec struct {
	Kind Kind
	// Ordinal is the CUDA device number (cuda:N); 0 for the other kinds.
	Ordinal int
}

// ParseSpec reads a -device value: "auto", "cpu", "cuda" (device 0) or
// "cuda:N" with N a decimal device number. Anything else, including
// other spellings, signs and spaces, is an error wrapping ErrInvalid.
func ParseSpec(s string) (Spec, error) {
	switch s {
	case "auto":
		return Spec{Kind: Auto}, nil
	case "cpu":
		return Spec{Kind: CPU}, nil
	case "cuda":
		return Spec{Kind: CUDA}, nil
	}
	n, ok := strings.CutPrefix(s, "cuda:")
	if !ok {
		return Spec{}, fmt.Errorf("%w: device %q: want auto, cpu, cuda or cuda:N", ErrInvalid, s)
	}
	if n == "" || len(n) > maxOrdinalDigits || strings.Trim(n, "0123456789") != "" {
		return Spec{}, fmt.Errorf("%w: device %q: N in cuda:N must be a device number 0, 1, … (at most %d digits)", ErrInvalid, s, maxOrdinalDigits)
	}
	ord, err := strconv.Atoi(n)
	if err != nil { // unreachable with at most 9 digits; kept for safety
		return Spec{}, fmt.Errorf("%w: device %q: %w", ErrInvalid, s, err)
	}
	return Spec{Kind: CUDA, Ordinal: ord}, nil
}

// String is the -device spelling of s: "auto", "cpu" or "cuda:N".
func (s Spec) String() string {
	if s.Kind == CUDA {
		return fmt.Sprintf("cuda:%d", s.Ordinal)
	}
	return s.Kind.String()
}

// Set parses v into s (flag.Value).
func (s *Spec) Set(v string) error {
	p, err := ParseSpec(v)
	if err != nil {
		return err
	}
	*s = p
	return nil
}

// validate reports a Spec that ParseSpec would not produce.
func (s Spec) validate() error {
	switch {
	case s.Kind < Auto || s.Kind > CUDA:
		return fmt.Errorf("%w: device kind %v", ErrInvalid, s.Kind)
	case s.Ordinal < 0:
		return fmt.Errorf("%w: CUDA device number %d is negative", ErrInvalid, s.Ordinal)
	case s.Kind != CUDA && s.Ordinal != 0:
		return fmt.Errorf("%w: device number %d given for %v", ErrInvalid, s.Ordinal, s.Kind)
	}
	return nil
}

// Precision is the precision of the GPU's matrix products (see the
// package doc); the zero value, PrecisionAuto, chooses by model size.
// Precision implements flag.Value.
type Precision int

const (
	// PrecisionAuto is DefaultPrecision of the model (the default).
	PrecisionAuto Precision = iota
	// FP32 is exact float32 (gpu.FP32), the CPU's arithmetic.
	FP32
	// TF32 is cuBLAS's TF32 tensor-core mode (gpu.TF32).
	TF32
	// BF16 multiplies bfloat16-rounded inputs on tensor cores with
	// float32 accumulation, attention included (gpu.BF16).
	BF16
)

// BF16MinHidden is the hidden size from which PrecisionAuto is BF16;
// narrower models get FP32 (see the package doc for the measurements
// behind it). Qwen3-0.6B, the smallest Qwen3, has hidden size 1024.
const BF16MinHidden = 1024

// DefaultPrecision is what PrecisionAuto means for a model of hidden
// size hidden: BF16 from BF16MinHidden on, FP32 below it (and for an
// unknown size, 0).
func DefaultPrecision(hidden int) Precision {
	if hidden >= BF16MinHidden {
		return BF16
	}
	return FP32
}

// ParsePrecision reads a -precision value: "auto", "fp32", "tf32" or
// "bf16". Anything else is an error wrapping ErrInvalid.
func ParsePrecision(s string) (Precision, error) {
	for _, p := range []Precision{PrecisionAuto, FP32, TF32, BF16} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: precision %q: want auto, fp32, tf32 or bf16", ErrInvalid, s)
}

// String is the -precision spelling of p.
func (p Precision) String() string {
	switch p {
	case PrecisionAuto:
		return "auto"
	case FP32:
		return "fp32"
	case TF32:
		return "tf32"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// Set parses v into p (flag.Value).
func (p *Precision) Set(v string) error {
	q, err := ParsePrecision(v)
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Config is the choice the -device and -precision flags make. The zero
// Config is auto with PrecisionAuto.
type Config struct {
	Device    Spec
	Precision Precision
	// BatchVariant gives up the CPU's batch invariance where it costs
	// most, products of at most six rows with the weight stored n×k
	// (decoding a few sequences), for about 2.5 times their speed: the
	// sampler's log-probabilities then differ from the trainer's by
	// float32 rounding instead of being equal to the bit, and runs are
	// reproducible only at one batch composition. It applies to the CPU
	// only.
	BatchVariant bool
	// GPU holds further options for the CUDA backend (profiling, graph
	// tracing, the launch queue), applied after the device and
	// precision; the CPU ignores them.
	GPU []gpu.Option
}

// Flag names and usage texts of RegisterFlags.
const (
	DeviceFlag       = "device"
	PrecisionFlag    = "precision"
	BatchVariantFlag = "batch-variant"

	deviceUsage = "where the model runs: auto (CUDA device 0 when this binary was built with -tags agentrl_cuda " +
		"and the machine has a GPU, the CPU otherwise; the choice and any fallback are printed), cpu, cuda or cuda:N"
	precisionUsage = "precision of the GPU's matrix products: auto (fp32 below hidden size 1024, bf16 from it), " +
		"fp32, tf32 or bf16; the CPU computes in fp32"
	batchVariantUsage = "on the CPU, decode a few sequences about 2.5x faster by giving up batch invariance in products of at most six rows: " +
		"sampled log-probabilities then differ from the trainer's by float32 rounding instead of being equal to the bit"
)

// RegisterFlags defines -device, -precision and -batch-variant on fs,
// writing into c; c's current values are the defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Var(&c.Device, DeviceFlag, deviceUsage)
	fs.Var(&c.Precision, PrecisionFlag, precisionUsage)
	fs.BoolVar(&c.BatchVariant, BatchVariantFlag, c.BatchVariant, batchVariantUsage)
}

// Validate reports a Config that Open refuses whatever the machine:
// values the parsers would not produce, and tf32 or bf16 asked of the
// CPU, which computes in float32 only. All its errors wrap ErrInvalid.
func (c Config) Validate() error {
	if err := c.Device.validate(); err != nil {
		return err
	}
	if c.Precision < PrecisionAuto || c.Precision > BF16 {
		return fmt.Errorf("%w: precision %v", ErrInvalid, c.Precision)
	}
	if c.Device.Kind == CUDA && c.BatchVariant {
		return fmt.Errorf("%w: -%s with -device %v: it applies to the CPU backend only", ErrInvalid, BatchVariantFlag, c.Device)
	}
	if c.Device.Kind == CPU && (c.Precision == TF32 || c.Precision == BF16) {
		return fmt.Errorf("%w: -precision %v with -device cpu: the CPU backend computes in fp32 only (use auto or fp32, or a CUDA device)", ErrInvalid, c.Precision)
	}
	return nil
}

// Args are the command-line arguments that give c to another program
// that registered the flags (a server this program starts).
func (c Config) Args() []string {
	args := []string{"-" + DeviceFlag, c.Device.String(), "-" + PrecisionFlag, c.Precision.String()}
	if c.BatchVariant {
		args = append(args, "-"+BatchVariantFlag)
	}
	return args
}

// String is c as its flags spell it.
func (c Config) String() string {
	s := fmt.Sprintf("-%s %v -%s %v", DeviceFlag, c.Device, PrecisionFlag, c.Precision)
	if c.BatchVariant {
		s += " -" + BatchVariantFlag
	}
	return s
}
