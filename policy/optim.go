package policy

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// ErrNonFinite marks a NaN or infinite gradient norm or learning rate.
var ErrNonFinite = errors.New("policy: non-finite value")

// AdamWConfig holds the hyperparameters of AdamW, with torch.optim.AdamW's
// names and meaning. The zero value is torch's AdamW without weight decay:
// lr 1e-3, betas (0.9, 0.999), eps 1e-8, no decay, constant schedule. A
// zero LR, Eps or pair of betas means torch's default, because none of
// them is a usable value (see each field); a zero WeightDecay means no
// decay, which differs from torch's default of 0.01. WithDefaults spells
// the zero fields out; DefaultAdamWConfig is torch's defaults, decay
// included.
type AdamWConfig struct {
	// LR is the peak learning rate; each step uses LR × Schedule.Factor.
	// 0 means torch's 1e-3 (a zero rate would never move the parameters).
	LR float64
	// Beta1 and Beta2 are the decay rates of the first and second moment
	// estimates (torch's betas). When both are zero they are torch's
	// (0.9, 0.999); when either is set, both are taken as given, so that
	// Beta1 0 (no momentum) is asked for with its Beta2, such as
	// (0, 0.999).
	Beta1, Beta2 float64
	// Eps is added to the denominator after the bias-corrected square
	// root, as torch does. 0 means torch's 1e-8: with no epsilon, a
	// parameter whose gradients have all been zero divides 0 by 0.
	Eps float64
	// WeightDecay is the decoupled decay: each step multiplies the
	// parameters by 1 - lr·WeightDecay before the Adam update. 0 means no
	// decay, unlike torch.optim.AdamW, whose default (and
	// DefaultAdamWConfig's) is 0.01.
	WeightDecay float64
	// Schedule scales LR per step; nil means constant.
	Schedule Schedule
}

// Torch's AdamW defaults, which zero fields of AdamWConfig stand for
// (WeightDecay aside).
const (
	defaultAdamWLR    = 1e-3
	defaultAdamWBeta1 = 0.9
	defaultAdamWBeta2 = 0.999
	defaultAdamWEps   = 1e-8
)

// DefaultAdamWConfig returns torch.optim.AdamW's defaults: lr 1e-3, betas
// (0.9, 0.999), eps 1e-8, weight_decay 0.01, constant schedule. The first
// four are the zero AdamWConfig's values spelled out; the weight decay is
// not, since the zero value's WeightDecay 0 means no decay.
func DefaultAdamWConfig() AdamWConfig {
	return AdamWConfig{LR: defaultAdamWLR, Beta1: defaultAdamWBeta1, Beta2: defaultAdamWBeta2, Eps: defaultAdamWEps, WeightDecay: 0.01}
}

// WithDefaults returns c with its zero fields spelled out, as NewAdamW
// applies them: LR 0 becomes 1e-3, Eps 0 becomes 1e-8, and Beta1 and
// Beta2 both 0 become (0.9, 0.999). WeightDecay and Schedule are kept (0
// is no decay, nil is constant).
func (c AdamWConfig) WithDefaults() AdamWConfig {
	if c.LR == 0 {
		c.LR = defaultAdamWLR
	}
	if c.Beta1 == 0 && c.Beta2 == 0 {
		c.Beta1, c.Beta2 = defaultAdamWBeta1, defaultAdamWBeta2
	}
	if c.Eps == 0 {
		c.Eps = defaultAdamWEps
	}
	return c
}

// Validate reports what NewAdamW would reject in c, after WithDefaults:
// a negative or non-finite LR, Eps or WeightDecay, or a beta outside
// [0, 1).
func (c AdamWConfig) Validate() error { return c.WithDefaults().validate() }

func (c AdamWConfig) validate() error {
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !ok(c.LR) || c.LR < 0:
		return fmt.Errorf("policy: AdamW: LR = %g, want a finite value ≥ 0", c.LR)
	case !ok(c.Beta1) || c.Beta1 < 0 || c.Beta1 >= 1:
		return fmt.Errorf("policy: AdamW: Beta1 = %g, want 0 ≤ Beta1 < 1", c.Beta1)
	case !ok(c.Beta2) || c.Beta2 < 0 || c.Beta2 >= 1:
		return fmt.Errorf("policy: AdamW: Beta2 = %g, want 0 ≤ Beta2 < 1", c.Beta2)
	case !ok(c.Eps) || c.Eps < 0:
		return fmt.Errorf("policy: AdamW: Eps = %g, want a finite value ≥ 0", c.Eps)
	case !ok(c.WeightDecay) || c.WeightDecay < 0:
		return fmt.Errorf("policy: AdamW: WeightDecay = %g, want a finite value ≥ 0", c.WeightDecay)
	}
	return nil
}

// AdamW is the Adam optimizer with decoupled weight decay (Loshchilov &
// Hutter, "Decoupled Weight Decay Regularization", 2019), step for step as
// torch.optim.AdamW (torch 1.13, _single_tensor_adamw, amsgrad off):
//
//	θ ← θ·(1 − lr·λ)
//	m ← β1·m + (1 − β1)·g
//	v ← β2·v + (1 − β2)·g²
//	θ ← θ − lr/(1 − β1^t) · m / (√v / √(1 − β2^t) + ε)
//
// with t the 1-based step count. Moments are float32, as torch keeps them
// for float32 parameters, and each operation rounds to float32 in torch's
// order; scalars are computed in float64 and rounded once. Golden values
// from torch agree to float32 rounding (testdata/gen_adamw.py).
//
// An AdamW is not safe for concurrent use.
type AdamW struct {
	cfg    AdamWConfig
	params []lm.Param
	m, v   [][]float32
	step   int64
}

// NewAdamW returns an optimizer over params, which must have unique,
// non-empty names and gradients as long as their data, with cfg's zero
// fields resolved by AdamWConfig.WithDefaults. The slices are retained:
// the optimizer updates them in place.
func NewAdamW(params []lm.Param, cfg AdamWConfig) (*AdamW, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := checkParams(params); err != nil {
		return nil, err
	}
	o := &AdamW{cfg: cfg, params: append([]lm.Param(nil), params...)}
	o.m = make([][]float32, len(params))
	o.v = make([][]float32, len(params))
	for i, p := range params {
		o.m[i] = make([]float32, len(p.Data))
		o.v[i] = make([]float32, len(p.Data))
	}
	return o, nil
}

func checkParams(params []lm.Param) error {
	seen := make(map[string]bool, len(params))
	for i, p := range params {
		if p.Name == "" {
			return fmt.Errorf("policy: parameter %d has no name", i)
		}
		if seen[p.Name] {
			return fmt.Errorf("policy: duplicate parameter name %q", p.Name)
		}
		seen[p.Name] = true
		if len(p.Grad) != len(p.Data) {
			return fmt.Errorf("policy: parameter %q has %d values but %d gradients", p.Name, len(p.Data), len(p.Grad))
		}
	}
	return nil
}

// Steps is the number of updates applied so far (torch's state["step"]).
func (o *AdamW) Steps() int64 { return o.step }

// Config returns the optimizer's hyperparameters, zero fields resolved
// (AdamWConfig.WithDefaults).
func (o *AdamW) Config() AdamWConfig { return o.cfg }

// LR is the learning rate the next Step will use: LR × Schedule.Factor(Steps()).
func (o *AdamW) LR() float64 { return o.cfg.lrAt(o.step) }

// lrAt is the learning rate after steps updates: LR × Schedule.Factor.
func (c AdamWConfig) lrAt(steps int64) float64 {
	if c.Schedule == nil {
		return c.LR
	}
	return c.LR * c.Schedule.Factor(steps)
}

// Step applies one AdamW update to every parameter from its gradient and
// returns the learning rate it used. It does not clear the gradients.
func (o *AdamW) Step() (lr float64, err error) {
	lr = o.LR()
	if math.IsNaN(lr) || math.IsInf(lr, 0) || lr < 0 {
		return 0, fmt.Errorf("%w: learning rate %g at step %d", ErrNonFinite, lr, o.step)
	}
	c := o.cfg
	k, err := backend.AdamWStep{LR: lr, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay, Step: o.step + 1}.Scalars()
	if err != nil {
		return 0, err
	}
	o.step++
	for i, p := range o.params {
		backend.AdamWUpdate(p.Data, p.Grad, o.m[i], o.v[i], k)
	}
	return lr, nil
}

// GradNorm is the L2 norm of all gradients taken together, accumulated in
// float64.
func GradNorm(params []lm.Param) float64 {
	var s float64
	for _, p := range params {
		for _, g := range p.Grad {
			s += float64(g) * float64(g)
		}
	}
	return math.Sqrt(s)
}

// ClipGradNorm scales all gradients so that their joint L2 norm is at most
// maxNorm and returns the norm before clipping, as
// torch.nn.utils.clip_grad_norm_(params, maxNorm) with
// error_if_nonfinite=True: the scale is min(1, maxNorm/(norm + 1e-6)). A
// NaN or infinite norm returns ErrNonFinite and leaves the gradients
// unchanged, so the caller can skip the step (as verl's dp_actor does).
func ClipGradNorm(params []lm.Param, maxNorm float64) (float64, error) {
	if !(maxNorm > 0) {
		return 0, fmt.Errorf("policy: ClipGradNorm: maxNorm = %g, want > 0", maxNorm)
	}
	norm := GradNorm(params)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		for _, p := range params {
			for j, g := range p.Grad {
				if g != g || math.IsInf(float64(g), 0) {
					return norm, fmt.Errorf("%w: gradient norm %g (first at %s[%d] = %g)", ErrNonFinite, norm, p.Name, j, g)
				}
			}
		}
		return norm, fmt.Errorf("%w: gradient norm overflows", ErrNonFinite)
	}
	coef := maxNorm / (norm + 1e-6)
	if coef < 1 {
		c := float32(coef)
		for _, p := range params {
			for j := range p.Grad {
				p.Grad[j] *= c
			}
		}
	}
	return norm, nil
}

// ZeroGrad sets every gradient to zero.
func ZeroGrad(params []lm.Param) {
	for _, p := range params {
		clear(p.Grad)
	}
}

// State file format: a safetensors file holding, for each parameter name
// N, the F32 tensors "exp_avg.N" and "exp_avg_sq.N" (torch's state keys),
// with metadata "format" = StateFormat, "step" and the hyperparameters
// (decimal, for inspection). Values are stored exactly, so a restored
// optimizer continues bit for bit.
const (
	StateFormat   = "agentrl.adamw.v1"
	StateFileName = "optimizer.safetensors"
)

// SaveState writes the optimizer's moments and step count to w.
func (o *AdamW) SaveState(w io.Writer) error {
	ts := make([]safetensors.Tensor, 0, 2*len(o.params))
	for i, p := range o.params {
		shape := []int{len(p.Data)}
		ts = append(ts,
			safetensors.Tensor{Name: "exp_avg." + p.Name, DType: safetensors.F32, Shape: shape, Float32: o.m[i]},
			safetensors.Tensor{Name: "exp_avg_sq." + p.Name, DType: safetensors.F32, Shape: shape, Float32: o.v[i]})
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	meta := map[string]string{
		"format": StateFormat, "step": strconv.FormatInt(o.step, 10),
		"beta1": f(o.cfg.Beta1), "beta2": f(o.cfg.Beta2), "eps": f(o.cfg.Eps),
		"weight_decay": f(o.cfg.WeightDecay), "lr": f(o.cfg.LR),
	}
	return safetensors.Write(w, ts, meta)
}

// LoadState restores moments and step count saved by SaveState from r,
// which holds size bytes. Every parameter must be present with its length;
// on any error the optimizer is left unchanged.
func (o *AdamW) LoadState(r io.ReaderAt, size int64) error {
	f, err := safetensors.NewReader(r, size)
	if err != nil {
		return fmt.Errorf("policy: optimizer state: %w", err)
	}
	meta := f.Metadata()
	if meta["format"] != StateFormat {
		return fmt.Errorf("policy: optimizer state: format %q, want %q", meta["format"], StateFormat)
	}
	step, err := strconv.ParseInt(meta["step"], 10, 64)
	if err != nil || step < 0 {
		return fmt.Errorf("policy: optimizer state: step %q is not a non-negative integer", meta["step"])
	}
	want := 2 * len(o.params)
	if n := len(f.Tensors()); n != want {
		return fmt.Errorf("policy: optimizer state holds %d tensors, want %d for %d parameters", n, want, len(o.params))
	}
	m := make([][]float32, len(o.params))
	v := make([][]float32, len(o.params))
	for i, p := range o.params {
		for _, x := range []struct {
			name string
			dst  *[]float32
		}{{"exp_avg." + p.Name, &m[i]}, {"exp_avg_sq." + p.Name, &v[i]}} {
			info, ok := f.Info(x.name)
			if !ok {
				return fmt.Errorf("policy: optimizer state lacks %q", x.name)
			}
			if info.DType != safetensors.F32 || info.NumElements() != len(p.Data) {
				return fmt.Errorf("policy: optimizer state %q is %s %v, want F32 [%d]", x.name, info.DType, info.Shape, len(p.Data))
			}
			*x.dst = make([]float32, len(p.Data))
			if err := f.ReadFloat32(x.name, *x.dst); err != nil {
				return fmt.Errorf("policy: optimizer state: %w", err)
			}
		}
	}
	o.m, o.v, o.step = m, v, step
	return nil
}

// SaveStateFile writes the state to dir/optimizer.safetensors atomically
// and durably (a temporary file, fsynced and renamed over the target, then
// the folder fsynced), readable by the owner only (mode 0600).
func (o *AdamW) SaveStateFile(dir string) error { return saveStateFile(dir, o.SaveState) }

// LoadStateFile restores the state from dir/optimizer.safetensors, or
// from a sharded state in dir (ShardStateIndex) of any number of ranks.
// It reads the moments and step count only: the master weights of a
// sharded state of ShardOptions.BF16Weights (StateInfo.Master) are the
// weights to resume from, which MasterWeights reads.
func (o *AdamW) LoadStateFile(dir string) error { return loadStateFile(dir, o.LoadState) }
