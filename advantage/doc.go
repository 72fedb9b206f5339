// Package advantage computes per-token advantages and returns from
// per-trajectory scores, with the estimators and names of verl
// (verl/trainer/ppo/core_algos.py): grpo, drgrpo, rloo,
// reinforce_plus_plus, reinforce_plus_plus_baseline, gpg, opo, remax,
// grpo_passk and gae.
//
// advantage depends on nothing else in agentrl.
package advantage
