package agentrl

import (
	"github.com/agentrl/agentrl/advantage"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/reward"
)

// RecipeMaxResponseTokens is the response budget of the recipes the
// presets follow: DAPO's and Open-AgentRL's max_response_length = 20480
// tokens (recipe/dapo/test_dapo_qwen3_30b_math.sh in verl;
// recipe/demystify/grpo_tcr_qwen3_4b_test.sh in Open-AgentRL). The budget
// belongs to the rollout engine (rollout.Config.MaxResponseTokens), which
// enforces it and from which the trainer's overlong shaping reads it; use
// this constant there to run the recipes as published.
const RecipeMaxResponseTokens = 20480

// presetOverlongBuffer is the presets' overlong buffer: 4096 tokens with
// penalty factor 1.0, in the same recipes.
const presetOverlongBuffer = 4096

// GRPOTCR returns the configuration of the paper's recipe (Yu et al. 2025,
// "Demystifying Reinforcement Learning in Agentic Reasoning", §4;
// Open-AgentRL recipe/demystify/grpo_tcr_qwen3_4b_test.sh): GRPO
// advantages normalised by the group std; the vanilla PPO objective with
// Token-level aggregation ("token-mean"), Clip-higher (ε_low 0.2, ε_high
// 0.28) and dual-clip c = 10; no KL and no entropy term; overlong Reward
// shaping with a 4096-token buffer and factor 1.0 against the engine's
// response budget (RecipeMaxResponseTokens in the paper); 16 samples per
// prompt, learning rate 4e-6 and gradient clipping at 1.0. Dynamic
// sampling is off, as the paper leaves it out of GRPO-TCR for its cost in
// agentic rollouts; set DynamicSampling to add it.
//
// Batch geometry: PromptsPerStep 16 and SamplesPerPrompt 16 are the
// script's data.train_batch_size and rollout.n, 256 trajectories per step.
// MiniBatchSize 64 (four optimiser updates per step) and MicroBatchSize 8
// are not the script's: its ppo_mini_batch_size of 256 prompts (4096
// trajectories) exceeds the batch, so verl makes one update per step, as
// MiniBatchSize 0 does here, and it cuts micro-batches by tokens
// (use_dynamic_bsz, at most 2560 + 20480 tokens per GPU), which has no
// counterpart here. MicroBatchSize bounds the memory of one
// forward/backward pass; choose it, and MiniBatchSize, for your hardware.
func GRPOTCR() TrainerConfig {
	opt := policy.DefaultAdamWConfig()
	opt.LR = 4e-6
	opt.WeightDecay = 0.1
	return TrainerConfig{
		Advantage: advantage.Config{Estimator: advantage.GRPO},
		Loss: loss.Config{
			Mode:     loss.ModeVanilla,
			Agg:      loss.AggTokenMean,
			ClipLow:  0.2,
			ClipHigh: 0.28,
			ClipC:    10,
		},
		PromptsPerStep:   16,
		SamplesPerPrompt: 16,
		MiniBatchSize:    64,
		MicroBatchSize:   8,
		PPOEpochs:        1,
		Sampling:         lm.SampleParams{Temperature: 1, TopP: 1, TopK: -1},
		OldLogProbs:      OldLogProbsRecompute,
		Optimizer:        opt,
		MaxGradNorm:      1,
		Overlong:         &reward.OverlongConfig{Buffer: presetOverlongBuffer, Factor: 1},
	}
}

// DAPO returns DAPO's configuration (Yu et al. 2025, "DAPO: An Open-Source
// LLM Reinforcement Learning System at Scale"; verl
// recipe/dapo/test_dapo_qwen3_30b_math.sh): GRPO advantages,
// clip-higher (ε_low 0.2, ε_high 0.28) with verl's default dual-clip
// c = 3, token-level aggregation, no KL, dynamic sampling on the accuracy
// with at most 10 generation batches per step, overlong reward shaping
// (buffer 4096, factor 1.0, against the engine's budget: 20480 in the
// recipe), 16 samples per prompt,
// learning rate 1e-6 with 10 warm-up updates, weight decay 0.1 and
// gradient clipping at 1.0.
func DAPO() TrainerConfig {
	c := GRPOTCR()
	c.Loss.ClipC = loss.DefaultClipC
	c.DynamicSampling = &DynamicSamplingConfig{Metric: FilterByAcc, MaxGenBatches: 10}
	c.Optimizer.LR = 1e-6
	c.Optimizer.Schedule = policy.ConstantSchedule{WarmupSteps: 10}
	return c
}

// DrGRPO returns Dr. GRPO's configuration (Liu et al. 2025,
// "Understanding R1-Zero-Like Training: A Critical Perspective"; verl
// docs/algo/drgrpo.md): advantages centred on the group mean without
// division by the std ("drgrpo"), and the per-token losses summed over
// each response and divided by a constant ("seq-mean-token-sum-norm",
// whose divisor defaults to the batch's length T; set Loss.AggDivisor to
// the generation budget for the paper's exact constant); no KL, no
// entropy term, the standard PPO clip 0.2. Sampling, optimiser and
// batch follow GRPOTCR, without overlong shaping.
func DrGRPO() TrainerConfig {
	c := GRPOTCR()
	c.Advantage = advantage.Config{Estimator: advantage.DrGRPO}
	c.Loss = loss.Config{
		Mode:     loss.ModeVanilla,
		Agg:      loss.AggSeqMeanTokenSumNorm,
		ClipLow:  0.2,
		ClipHigh: 0.2,
	}
	c.Overlong = nil
	return c
}
