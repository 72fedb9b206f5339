// Package agentrl is a Go SDK for reinforcement learning of tool-using LLM
// agents, after "Demystifying Reinforcement Learning in Agentic Reasoning"
// (Yu et al., 2025, arXiv:2510.11701): SFT on real tool-use trajectories,
// then GRPO-TCR — GRPO with token-level loss aggregation, clip-higher and
// overlong reward shaping — with a code interpreter called inside the
// rollout.
//
// One RL step, as data:
//
//	dataset ──prompts──▶ rollout.Engine ◀──▶ lm.Sampler (local transformer | remote server)
//	                          │  ▲
//	                          ▼  │ tool calls / results
//	                        tool.Tool (sandbox, SandboxFusion, calculator)
//	                          │
//	               trajectories (token ids, loss mask, sampler log-probs, turns, tool calls)
//	                          ▼
//	 reward.Func ─scores─▶ advantage.Estimator ─advantages─▶ loss ◀─log-probs─ lm.Trainable
//	                                                           │
//	                                                 dL/dlogp ─▶ backward ─▶ optimizer step
//
// Trainer runs that step (rollout, rewards, advantages, optional dynamic
// sampling, PPO epochs over mini-batches with gradient accumulation,
// clipping and AdamW), with presets for the paper's recipe (GRPOTCR),
// DAPO and DrGRPO, per-step metrics under verl's names, and checkpoints
// that resume bit for bit. SFTTrainer fine-tunes on token ids with loss
// masks (multi-turn tool-use trajectories, loss on assistant tokens only).
// A Trainer's loss variants and advantage estimators may be the program's
// own (TrainerParts.Losses, TrainerParts.Estimators).
//
// Run is the loop around either trainer's steps: validation, checkpoints
// and resume. What it reports goes through small interfaces, so that the
// root links neither a plotting nor a terminal library: each step's
// metrics row to a MetricsSink (package metrics writes a JSON Lines log,
// package metrics/plot draws its curves), each step to a Recorder
// (package progress shows a progress bar or lines). Package checkpoint
// keeps the crash-safe series of checkpoint folders, and package eval
// computes the validation metrics (mean@n, pass@k, maj@k, best@k).
//
// Beyond one machine, rollouts run on an inference fleet (vLLM or SGLang
// servers, or package serve, which speaks both APIs): package fleet
// samples from the servers and publishes the trainer's weights to them
// (TrainerParts.Sync), and with TrainerConfig.MaxStaleness the next
// steps' rollouts run while the current one trains, each trajectory at
// most that many policy versions stale.
//
// The subpackages can be used on their own: package advantage computes
// group-relative advantages, package loss computes policy-gradient
// objectives and their gradients with respect to the log-probabilities,
// package reward scores responses, package tool runs model-written code in
// a sandbox, package rollout interleaves generation and tool calls, package
// dataset reads verl-format data, package policy holds the model, package
// fleet drives inference servers and package serve is one.
//
// Names and formulas follow verl (verl/trainer/ppo/core_algos.py), so that
// configurations carry over.
package agentrl
