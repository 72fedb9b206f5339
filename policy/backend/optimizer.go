package backend

import (
	"fmt"
	"math"
)

// AdamWStep is one step of torch.optim.AdamW (amsgrad off): the
// hyperparameters, the learning rate of this step (after any schedule)
// and the 1-based step count t.
type AdamWStep struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	Step                               int64
}

// AdamWScalars are the float32 constants of one AdamW step, computed in
// float64 and rounded once, in the order torch's _single_tensor_adamw
// uses them:
//
//	θ ← θ·(1 − lr·λ)                      (when λ ≠ 0)
//	m ← β1·m + (1 − β1)·g
//	v ← β2·v + (1 − β2)·g²
//	θ ← θ − lr/(1 − β1^t) · m / (√v / √(1 − β2^t) + ε)
type AdamWScalars struct {
	Decay, B1, OB1, B2, OB2, NegStep, BC2Sqrt, Eps float32
	UseDecay                                       bool
}

// Scalars validates s and returns its constants; an out-of-domain value
// is an error wrapping ErrArg.
func (s AdamWStep) Scalars() (AdamWScalars, error) {
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !ok(s.LR) || s.LR < 0:
		return AdamWScalars{}, fmt.Errorf("%w: AdamW LR = %g, want a finite value ≥ 0", ErrArg, s.LR)
	case !ok(s.Beta1) || s.Beta1 < 0 || s.Beta1 >= 1:
		return AdamWScalars{}, fmt.Errorf("%w: AdamW Beta1 = %g, want 0 ≤ Beta1 < 1", ErrArg, s.Beta1)
	case !ok(s.Beta2) || s.Beta2 < 0 || s.Beta2 >= 1:
		return AdamWScalars{}, fmt.Errorf("%w: AdamW Beta2 = %g, want 0 ≤ Beta2 < 1", ErrArg, s.Beta2)
	case !ok(s.Eps) || s.Eps < 0:
		return AdamWScalars{}, fmt.Errorf("%w: AdamW Eps = %g, want a finite value ≥ 0", ErrArg, s.Eps)
	case !ok(s.WeightDecay) || s.WeightDecay < 0:
		return AdamWScalars{}, fmt.Errorf("%w: AdamW WeightDecay = %g, want a finite value ≥ 0", ErrArg, s.WeightDecay)
	case s.Step < 1:
		return AdamWScalars{}, fmt.Errorf("%w: AdamW Step = %d, want ≥ 1", ErrArg, s.Step)
	}
	t := float64(s.Step)
	bc1 := 1 - math.Pow(s.Beta1, t)
	bc2 := 1 - math.Pow(s.Beta2, t)
	return AdamWScalars{
		Decay:    float32(1 - s.LR*s.WeightDecay),
		B1:       float32(s.Beta1),
		OB1:      float32(1 - s.Beta1),
		B2:       float32(s.Beta2),
		OB2:      float32(1 - s.Beta2),
		NegStep:  float32(-s.LR / bc1),
		BC2Sqrt:  float32(math.Sqrt(bc2)),
		Eps:      float32(s.Eps),
		UseDecay: s.WeightDecay != 0,
	}, nil
}

// AdamWUpdate applies the elementwise AdamW update with constants k to
// data from grad, updating the moments m and v in place; the slices
// must be at least len(data) long. The explicit float32 conversions round
// every product, which also forbids the compiler from fusing
// multiply-adds, so results match torch's separate kernels bit for bit.
// It is the reference that every backend's Optimizer.AdamW reproduces.
func AdamWUpdate(data, grad, m, v []float32, k AdamWScalars) {
	grad, m, v = grad[:len(data)], m[:len(data)], v[:len(data)]
	for j := range data {
		p := data[j]
		if k.UseDecay {
			p = p * k.Decay
		}
		g := grad[j]
		mj := float32(m[j]*k.B1) + float32(g*k.OB1)
		vj := float32(v[j]*k.B2) + float32(float32(k.OB2*g)*g)
		denom := float32(float32(math.Sqrt(float64(vj)))/k.BC2Sqrt) + k.Eps
		data[j] = p + float32(k.NegStep*float32(mj/denom))
		m[j], v[j] = mj, vj
	}
}

// Optimizer is implemented by backends that keep a model's training
// state in their own buffers: the optimizer step and the gradient
// measures run where the weights and gradients are, and nothing is
// copied to the host per step. Both of this project's backends implement
// it.
type Optimizer interface {
	// AdamW applies one AdamW step to param from grad, updating the
	// moments m and v in place, bit for bit as AdamWUpdate. The four
	// buffers must have the same length.
	AdamW(step AdamWStep, param, grad, m, v Buffer) error
	// GradNorm returns the L2 norm of all the buffers taken together,
	// accumulated in float64; a NaN or infinite element gives a NaN or
	// infinite norm.
	GradNorm(grads ...Buffer) (float64, error)
	// Scale multiplies every element of x by alpha (gradient clipping).
	Scale(alpha float32, x Buffer) error
}
