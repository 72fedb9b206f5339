package main

import (
	"fmt"
	"strings"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/ablation"
	"github.com/agentrl/agentrl/loss"
)

// task is what a variant changes outside the trainer's configuration:
// the rollout engine and the reward.
type task struct {
	// tight runs with the -tight-response budget instead of
	// -max-response (the overlong shaping's MaxLen follows, and its
	// buffer is a quarter of it, as arith.RLConfig sets).
	tight bool
	// maxToolCalls bounds a trajectory's tool calls; 0 keeps the
	// engine's 3 (arith.EngineConfig).
	maxToolCalls int
	// toolBonus shapes wrong answers with Open-AgentRL's tool bonus
	// (reward.DefaultToolBonus).
	toolBonus bool
}

// entry is one variant of the catalogue.
type entry struct {
	variant ablation.Variant
	task    task
}

// defaultVariants cover the paper's algorithm findings (clip-higher,
// aggregation, overlong shaping under a tight budget, entropy) and the
// tool-call frequency; user-spo, the example of a user's loss, runs when
// named.
const defaultVariants = "grpo-tcr,clip-sym,no-clip,seq-mean,no-overlong,overlong-tight,no-overlong-tight,entropy,calls-1,tool-bonus"

// userSPO is the mode name of the example user loss.
const userSPO loss.Mode = "spo"

// catalogue returns the built-in variants: edits of the task's GRPO-TCR
// (arith.RLConfig: grpo advantages, token-mean, clip 0.2/0.28, dual-clip
// 10, overlong shaping with a buffer of a quarter of the budget).
func catalogue() ([]entry, error) {
	spo, err := spoRegistry()
	if err != nil {
		return nil, err
	}
	return []entry{
		{variant: ablation.Variant{Name: "grpo-tcr",
			Description: "the baseline, the main job's RL stage: clip 0.2/0.28, dual-clip 10, token-mean, overlong shaping"}},
		{variant: ablation.Variant{Name: "clip-sym", Description: "symmetric clip 0.2/0.2 (no clip-higher)",
			Edit: func(c *agentrl.TrainerConfig) { c.Loss.ClipHigh = 0.2 }}},
		{variant: ablation.Variant{Name: "no-clip",
			Description: "no clipping: ε_low 1 (no lower bound), ε_high and dual-clip c 1e9 (above the loss's largest ratio, e^20)",
			Edit: func(c *agentrl.TrainerConfig) {
				c.Loss.ClipLow, c.Loss.ClipHigh, c.Loss.ClipC = 1, 1e9, 1e9
			}}},
		{variant: ablation.Variant{Name: "seq-mean", Description: "sequence-mean aggregation (seq-mean-token-mean) instead of token-mean",
			Edit: func(c *agentrl.TrainerConfig) { c.Loss.Agg = loss.AggSeqMeanTokenMean }}},
		{variant: ablation.Variant{Name: "no-overlong", Description: "no overlong shaping",
			Edit: func(c *agentrl.TrainerConfig) { c.Overlong = nil }}},
		{variant: ablation.Variant{Name: "overlong-tight", Description: "overlong shaping under the tight budget (-tight-response)"},
			task: task{tight: true}},
		{variant: ablation.Variant{Name: "no-overlong-tight", Description: "no overlong shaping, under the tight budget (-tight-response)",
			Edit: func(c *agentrl.TrainerConfig) { c.Overlong = nil }},
			task: task{tight: true}},
		{variant: ablation.Variant{Name: "entropy", Description: "entropy bonus 0.001 (verl's former actor.entropy_coeff default; now 0)",
			Edit: func(c *agentrl.TrainerConfig) { c.Loss.EntropyCoef = 0.001 }}},
		{variant: ablation.Variant{Name: "calls-1", Description: "deliberative: at most 1 tool call per trajectory (the engine's MaxToolCalls, 3 in the baseline)"},
			task: task{maxToolCalls: 1}},
		{variant: ablation.Variant{Name: "tool-bonus",
			Description: "frequent calls rewarded: Open-AgentRL's tool bonus, a wrong answer +0.1 per tool round up to −0.6"},
			task: task{toolBonus: true}},
		{variant: ablation.Variant{Name: "user-spo",
			Description: "a user's loss from a loss.Registry: SPO's quadratic penalty −(r·A − |A|/(2ε)·(r−1)²), ε = 0.2",
			Losses:      spo,
			Edit: func(c *agentrl.TrainerConfig) {
				c.Loss.Mode = userSPO
				c.Loss.ClipLow, c.Loss.ClipHigh = 0.2, 0.2 // ε
			}}},
	}, nil
}

// selectVariants returns the catalogue entries names lists, in its
// order; "all" names the whole catalogue.
func selectVariants(names []string) ([]entry, error) {
	all, err := catalogue()
	if err != nil {
		return nil, err
	}
	if len(names) == 1 && names[0] == "all" {
		return all, nil
	}
	byName := make(map[string]entry, len(all))
	known := make([]string, len(all))
	for i, e := range all {
		byName[e.variant.Name] = e
		known[i] = e.variant.Name
	}
	seen := map[string]bool{}
	out := make([]entry, 0, len(names))
	for _, n := range names {
		e, ok := byName[n]
		switch {
		case !ok:
			return nil, fmt.Errorf("-variants: unknown variant %q (known: %s, or all)", n, strings.Join(known, ", "))
		case seen[n]:
			return nil, fmt.Errorf("-variants: %q named twice", n)
		}
		seen[n] = true
		out = append(out, e)
	}
	return out, nil
}

// spoRegistry holds SPO (Simple Policy Optimization, Xie et al. 2024,
// arXiv:2401.16025) as a user registers a loss of their own, after
// loss's ExampleRegistry_Register: PPO's clip replaced by a quadratic
// penalty,
//
//	L_t = −(r·A − |A|/(2ε)·(r − 1)²),  r = exp(logπ − logπ_old),  ε = ClipHigh.
func spoRegistry() (*loss.Registry, error) {
	reg := loss.NewRegistry()
	err := reg.Register(userSPO, loss.Variant{ReducesToREINFORCE: true, Loss: func(v *loss.Vars) loss.Expr {
		r, a, eps := v.Ratio(), v.Advantages(), v.Config().ClipHigh
		return r.Mul(a).Sub(a.Abs().Mul(r.Sub(1).Square()).Mul(1 / (2 * eps))).Neg()
	}})
	if err != nil {
		return nil, fmt.Errorf("registering %s: %w", userSPO, err)
	}
	return reg, nil
}
