package agentrl

import (
	"fmt"
	"slices"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// LoRAPolicy is a policy that can train low-rank adapters instead of its
// full weights; *policy.Model is one. TrainerConfig.LoRA and
// SFTConfig.LoRA need it.
type LoRAPolicy interface {
	// AddLoRA attaches fresh adapters (B = 0) and freezes the rest.
	AddLoRA(cfg policy.LoRAConfig, seed uint64) error
	// LoRA returns the attached adapter's configuration, if any.
	LoRA() (policy.LoRAConfig, bool)
}

// attachLoRA gives p the adapter cfg describes, unless cfg is nil. A
// policy that already has an adapter keeps it when it is the same one
// (rank, alpha, scaling, modules), so that a loaded adapter or a resumed
// run trains on; another one is an error.
func attachLoRA(p lm.Trainable, cfg *policy.LoRAConfig, seed uint64, field string) error {
	if cfg == nil {
		return nil
	}
	lp, ok := p.(LoRAPolicy)
	if !ok {
		return fmt.Errorf("%w: %s is set but the policy (%T) cannot carry LoRA adapters (agentrl.LoRAPolicy)", ErrTrainer, field, p)
	}
	if have, ok := lp.LoRA(); ok {
		want, err := cfg.WithDefaults()
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrTrainerConfig, field, err)
		}
		if have.Rank != want.Rank || have.Alpha != want.Alpha || have.UseRSLoRA != want.UseRSLoRA || !slices.Equal(have.TargetModules, want.TargetModules) {
			return fmt.Errorf("%w: %s asks for rank %d, alpha %g, rsLoRA %v on %v, but the policy already carries rank %d, alpha %g, rsLoRA %v on %v",
				ErrTrainerConfig, field, want.Rank, want.Alpha, want.UseRSLoRA, want.TargetModules, have.Rank, have.Alpha, have.UseRSLoRA, have.TargetModules)
		}
		return nil
	}
	if err := lp.AddLoRA(*cfg, seed); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrTrainer, field, err)
	}
	return nil
}

// saveAdapter writes p's LoRA adapter into dir when p carries one.
func saveAdapter(p lm.Trainable, dir string) error {
	lp, ok := p.(LoRAPolicy)
	if !ok {
		return nil
	}
	if _, has := lp.LoRA(); !has {
		return nil
	}
	as, ok := p.(lm.AdapterSaver)
	if !ok {
		return nil
	}
	if err := as.SaveAdapter(dir, lm.AdapterSaveOptions{}); err != nil {
		return fmt.Errorf("agentrl: checkpoint: %w", err)
	}
	return nil
}
