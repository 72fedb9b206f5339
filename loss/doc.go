// Package loss computes policy-gradient objectives over batches of
// per-token log-probabilities — PPO clip with clip-higher and dual-clip,
// GSPO, CISPO, GPG, SAPO and geometric-mean variants — with verl's
// aggregation modes, entropy bonus, KL penalties and truncated importance
// sampling, verl's rollout correction (importance weights and rejection
// for tokens another engine or an older policy sampled, and the metrics
// of that mismatch), and returns the loss together with its exact
// gradient with respect to the log-probabilities and the entropy.
//
// An objective is a Variant whose Loss writes the formula with Expr
// methods on the batch's quantities (Vars: the ratio, log-ratio,
// advantages, mask, old, reference and rollout log-probs, entropy), for
// instance PPO's clipped term as
//
//	negA := v.Advantages().Neg()
//	r := v.Ratio()
//	return negA.Mul(r).Max(negA.Mul(r.Clip(1-ε, 1+ε)))
//
// with numbers as constants, broadcasting between per-token, per-sequence
// and scalar values, Min, Max, Clip, Where, Exp, Log, Tanh, Sigmoid and
// StopGradient, and masked per-sequence sums and means (SeqSum, SeqMean)
// for sequence-level objectives such as GSPO. The first error met while
// building is kept and returned once, by Compute. The expressions are
// gorgonia nodes, differentiated symbolically, so a user-registered
// variant gets exact gradients too; Vars.Inputs, Vars.Wrap and Expr.Node
// reach gorgonia for what the methods lack. The built-in modes are
// written this way.
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
// to Variants; its zero value holds the built-ins and Register adds user
// objectives, which then run through the same Compute path.
//
// loss and advantage follow one set of conventions: a name is a typed
// string (Mode here, advantage.Estimator there) with a constant for every
// built-in, spelled as verl spells it; the name is a field of the Config
// (Config.Mode, advantage.Config.Estimator), so that one value describes
// the computation; a zero field means verl's default, so Config{} is
// verl's default configuration (a field whose zero would be a meaningful
// setting different from its default is a pointer, nil meaning the
// default, as advantage.Config.Gamma is; loss has none); a Registry's
// zero value (and a nil *Registry) holds the built-ins, Register adds a
// name but never replaces one, Names is sorted, and a Registry is safe
// for concurrent use; and Compute(cfg, batch) runs the built-ins. Here a
// Computer over the Registry computes, as it caches compiled graphs;
// advantage has nothing to cache, and its Registry computes itself.
//
// # Rollout correction
//
// Config.RolloutCorrection is verl's rollout correction
// (algorithm.rollout_correction), for tokens that another engine (vLLM,
// SGLang: other kernels, bf16) or an older policy sampled. Its knobs carry
// verl's names, each from RolloutCorrectionConfig in
// verl/trainer/config/algorithm.py, with the formulas of
// verl/trainer/ppo/rollout_corr_helper.py:
//
//	RolloutIS                rollout_is                  "token" | "sequence": truncated IS weight, detached
//	                                                     (compute_rollout_correction_weights)
//	RolloutISThreshold       rollout_is_threshold        truncation, default 2
//	RolloutISBatchNormalize  rollout_is_batch_normalize  weights divided by their batch mean
//	RolloutRS                rollout_rs                  rejection options token_k1..3, seq_sum_k1..3,
//	                                                     seq_mean_k1..3 (seq_mean_k1: geometric mean),
//	                                                     seq_max_k2..3 (compute_rollout_rejection_mask)
//	RolloutRSThreshold       rollout_rs_threshold        "lower_upper" for k1, an upper bound for k2/k3
//	BypassMode               bypass_mode                 the rollout's log-probs as the old policy
//	                                                     (apply_bypass_mode; compute_policy_loss_bypass_mode
//	                                                     in verl/trainer/ppo/core_algos.py)
//	LossType                 loss_type                   "ppo_clip" | "reinforce" in bypass mode
//	                                                     (compute_policy_loss_reinforce)
//
// RolloutCorrectionPreset names verl's presets (Token-TIS, Seq-TIS, Seq-MIS,
// Geo-RS, K3-RS and their bypass forms). The weights multiply each token's
// policy loss as verl's compute_policy_loss_* functions multiply
// rollout_is_weights; rejected tokens leave the loss's numerator and
// denominator, as verl's modified response_mask does (slime's PR #657
// fixed a denominator that kept them). Compute reports the weights' and
// the rejection's statistics under verl's rollout_corr/ keys. Config.TISCap
// is the Token-TIS case under its older name (verl's tis_imp_ratio_cap).
//
// MismatchMetrics is the step-level measurement: verl's
// rollout_corr/ off-policy metrics (KL, k3, perplexities, χ²;
// compute_offpolicy_metrics) and training/rollout_probs_diff_* (verl's
// calculate_debug_metrics in verl/utils/debug/metrics.py) from the
// trainer's recomputed old log-probs and the sampler's, per data source.
//
// In verl's decoupled mode the trainer recomputes the old log-probs and
// logs MismatchMetrics of them every step; Compute, given
// Batch.RolloutLogProbs, weights and rejects. Bypass mode is the root
// package's TrainerConfig.OldLogProbs "rollout" (verl's apply_bypass_mode
// sets old_log_probs to rollout_log_probs): the old log-probs are the
// sampler's, Compute refuses a batch whose RolloutLogProbs differ from
// them, and it measures and corrects the current policy against them.
//
// The elementwise operations that gorgonia v0.9.18 lacks and the losses
// need — Min, Max, Clamp, Where and StopGradient — are gorgonia Ops with
// symbolic derivatives, usable in Variant.Build.
//
// Package losstest holds the checks an objective should pass: those every
// objective must pass, and the REINFORCE check for a Variant that declares
// ReducesToREINFORCE.
//
// loss depends on nothing else in agentrl except internal packages.
package loss
