package agentrl

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// DevicePolicy is a policy that can keep its training state — weights,
// gradients and optimizer moments — on its compute backend, so that no
// weight crosses to the host per step (*policy.Model is one). The RL and
// SFT trainers then step a policy.DeviceAdamW instead of AdamW over
// Params.
type DevicePolicy interface {
	NewDeviceAdamW(cfg policy.AdamWConfig) (*policy.DeviceAdamW, error)
}

// newOptimizer returns the policy's backend-resident AdamW when it has
// one and its backend can run it, otherwise AdamW over its Params.
func newOptimizer(p lm.Trainable, cfg policy.AdamWConfig) (policy.Optimizer, error) {
	if dev, ok := p.(DevicePolicy); ok {
		opt, err := dev.NewDeviceAdamW(cfg)
		if err == nil {
			return opt, nil
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return nil, fmt.Errorf("%w: optimizer: %w", ErrTrainer, err)
		}
		// A backend without backend.Optimizer: the host optimizer.
	}
	opt, err := policy.NewAdamW(p.Params(), cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: optimizer: %w", ErrTrainer, err)
	}
	return opt, nil
}

// clipOrMeasure clips the gradients to maxNorm (when > 0) or measures
// their norm; a non-finite norm is policy.ErrNonFinite either way, which
// the trainers answer by skipping the update, as verl's dp_actor does.
// A sharded optimizer's norm is a collective, under ctx.
func clipOrMeasure(ctx context.Context, opt policy.Optimizer, maxNorm float64) (float64, error) {
	c, collective := opt.(collectiveOptimizer)
	var norm float64
	var err error
	switch {
	case maxNorm > 0 && collective:
		return c.ClipGradNormContext(ctx, maxNorm)
	case maxNorm > 0:
		return opt.ClipGradNorm(maxNorm)
	case collective:
		norm, err = c.GradNormContext(ctx)
	default:
		norm, err = opt.GradNorm()
	}
	if err == nil && (math.IsNaN(norm) || math.IsInf(norm, 0)) {
		err = fmt.Errorf("%w: gradient norm %g", policy.ErrNonFinite, norm)
	}
	return norm, err
}
