package policy

import "math"

// Schedule gives the learning-rate multiplier for an optimizer step, as a
// torch LambdaLR's lr_lambda: step is the number of updates already
// applied (0 for the first update).
type Schedule interface {
	Factor(step int64) float64
}

// ConstantSchedule is a constant learning rate after an optional linear
// warmup, as verl's get_constant_schedule_with_warmup and transformers'
// get_constant_schedule_with_warmup: step/WarmupSteps during the warmup,
// then 1. Note that the first update (step 0) of a warmup has factor 0.
type ConstantSchedule struct {
	WarmupSteps int64
}

// Factor implements Schedule.
func (s ConstantSchedule) Factor(step int64) float64 {
	if step < s.WarmupSteps {
		return float64(step) / float64(max(1, s.WarmupSteps))
	}
	return 1
}

// CosineSchedule is a linear warmup followed by a cosine decay to
// MinLRRatio, as verl's get_cosine_schedule_with_warmup
// (verl/utils/torch_functional.py) and, with MinLRRatio 0, transformers'
// get_cosine_schedule_with_warmup:
//
//	step < W:  step / max(1, W)
//	otherwise: max(r, r + (1 − r)·½·(1 + cos(2π·c·p))),  p = (step − W) / max(1, T − W)
//
// with W = WarmupSteps, T = TotalSteps, r = MinLRRatio and c = NumCycles
// (0 means the usual 0.5: one half cosine from 1 down to r at step T).
type CosineSchedule struct {
	WarmupSteps, TotalSteps int64
	MinLRRatio              float64
	NumCycles               float64
}

// Factor implements Schedule.
func (s CosineSchedule) Factor(step int64) float64 {
	if step < s.WarmupSteps {
		return float64(step) / float64(max(1, s.WarmupSteps))
	}
	cycles := s.NumCycles
	if cycles == 0 {
		cycles = 0.5
	}
	p := float64(step-s.WarmupSteps) / float64(max(1, s.TotalSteps-s.WarmupSteps))
	x := math.Cos(math.Pi * cycles * 2 * p)
	r := s.MinLRRatio
	return max(r, r+(1-r)*0.5*(1+x))
}

// WSDSchedule is warmup–stable–decay (Hu et al. 2024, MiniCPM,
// arXiv:2404.06395; Hägele et al. 2024, arXiv:2405.18392): a linear
// warmup, the peak rate held, then a cosine decay to MinLRRatio over the
// last DecaySteps of TotalSteps:
//
//	step < W:          step / max(1, W)
//	step < T − D:      1
//	otherwise:         r + (1 − r)·½·(1 + cos(π·min(1, p))),  p = (step − (T − D)) / max(1, D)
//
// with W = WarmupSteps, T = TotalSteps, D = DecaySteps (at most T − W;
// 0: no decay, ConstantSchedule) and r = MinLRRatio. Unlike CosineSchedule, the rate stays at its peak
// until the decay: a run whose loss sits on a plateau for a while (a
// circuit that has not formed yet) keeps the full rate however long the
// plateau lasts, and still ends annealed.
type WSDSchedule struct {
	WarmupSteps, DecaySteps, TotalSteps int64
	MinLRRatio                          float64
}

// Factor implements Schedule.
func (s WSDSchedule) Factor(step int64) float64 {
	if step < s.WarmupSteps {
		return float64(step) / float64(max(1, s.WarmupSteps))
	}
	d := min(s.DecaySteps, s.TotalSteps-s.WarmupSteps)
	start := s.TotalSteps - d
	if d <= 0 || step < start {
		return 1
	}
	p := min(1, float64(step-start)/float64(max(1, d)))
	r := s.MinLRRatio
	return r + (1-r)*0.5*(1+math.Cos(math.Pi*p))
}
