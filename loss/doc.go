// Package loss computes policy-gradient objectives over batches of
// per-token log-probabilities — PPO clip with clip-higher and dual-clip,
// GSPO, CISPO, GPG, SAPO and geometric-mean variants — with verl's
// aggregation modes, entropy bonus, KL penalties and truncated importance
// sampling, and returns the loss together with its exact gradient with
// respect to the log-probabilities and the entropy.
//
// Objectives are written as gorgonia expressions and differentiated
// symbolically, so a user-registered variant gets exact gradients too.
//
// Names and formulas follow verl (verl/trainer/ppo/core_algos.py), so that
// configurations carry over: Config.Mode is verl's policy_loss.loss_mode,
// Config.Agg its loss_agg_mode, Config.KLType its kl_loss_type, and the
// metrics use verl's actor metric names. Each built-in cites the verl
// function it follows.
//
// Compute builds a float64 graph for the batch's shape, differentiates it
// and evaluates it. A Computer caches compiled graphs per (Config, shape)
// and is the way to call the package repeatedly. A Registry maps mode names
// to Variants; NewRegistry holds the built-ins and Register adds user
// objectives, which then run through the same Compute path.
//
// The elementwise operations that gorgonia v0.9.18 lacks and the losses
// need — Min, Max, Clamp, Where and StopGradient — are gorgonia Ops with
// symbolic derivatives, usable in user variants.
//
// Package losstest holds the checks every objective should pass.
//
// loss depends on nothing else in agentrl except internal packages.
package loss
