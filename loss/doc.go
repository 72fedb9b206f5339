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
// loss depends on nothing else in agentrl except internal packages.
package loss
