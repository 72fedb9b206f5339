package gpu

import (
	"fmt"
	"math"
)

// AdamWStep is one step of torch.optim.AdamW (amsgrad off) as computed by
// policy.AdamW: the hyperparameters, the learning rate of this step (after
// any schedule) and the 1-based step count t.
type AdamWStep struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	Step                               int64
}

// adamScalars are the float32 constants of one step, computed in float64
// and rounded once, exactly as policy.AdamW.Step does, so that the kernel's
// update matches the CPU optimizer bit for bit.
type adamScalars struct {
	decay, b1, ob1, b2, ob2, negStep, bc2Sqrt, eps float32
	useDecay                                       bool
}

func (s AdamWStep) scalars() (adamScalars, error) {
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !ok(s.LR) || s.LR < 0:
		return adamScalars{}, fmt.Errorf("gpu: AdamW: LR = %g, want a finite value ≥ 0", s.LR)
	case !ok(s.Beta1) || s.Beta1 < 0 || s.Beta1 >= 1:
		return adamScalars{}, fmt.Errorf("gpu: AdamW: Beta1 = %g, want 0 ≤ Beta1 < 1", s.Beta1)
	case !ok(s.Beta2) || s.Beta2 < 0 || s.Beta2 >= 1:
		return adamScalars{}, fmt.Errorf("gpu: AdamW: Beta2 = %g, want 0 ≤ Beta2 < 1", s.Beta2)
	case !ok(s.Eps) || s.Eps < 0:
		return adamScalars{}, fmt.Errorf("gpu: AdamW: Eps = %g, want a finite value ≥ 0", s.Eps)
	case !ok(s.WeightDecay) || s.WeightDecay < 0:
		return adamScalars{}, fmt.Errorf("gpu: AdamW: WeightDecay = %g, want a finite value ≥ 0", s.WeightDecay)
	case s.Step < 1:
		return adamScalars{}, fmt.Errorf("gpu: AdamW: Step = %d, want ≥ 1", s.Step)
	}
	t := float64(s.Step)
	bc1 := 1 - math.Pow(s.Beta1, t)
	bc2 := 1 - math.Pow(s.Beta2, t)
	return adamScalars{
		decay:    float32(1 - s.LR*s.WeightDecay),
		b1:       float32(s.Beta1),
		ob1:      float32(1 - s.Beta1),
		b2:       float32(s.Beta2),
		ob2:      float32(1 - s.Beta2),
		negStep:  float32(-s.LR / bc1),
		bc2Sqrt:  float32(math.Sqrt(bc2)),
		eps:      float32(s.Eps),
		useDecay: s.WeightDecay != 0,
	}, nil
}
