package agentrl_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/rollout"
)

// TestTrainerLoRA trains the transformer bandit through adapters only:
// Params and the optimizer hold the 2·7 adapter tensors of its one layer,
// the policy still learns, and a checkpoint (with its PEFT folder)
// resumes bit for bit.
func TestTrainerLoRA(t *testing.T) {
	ctx := context.Background()
	cfg := banditConfig()
	cfg.Optimizer.LR = 0.02
	cfg.LoRA = &policy.LoRAConfig{Rank: 4, Alpha: 8, TargetModules: []string{policy.LoRAAllLinear}}
	// Embeddings and norms stay frozen under LoRA, so with transformers'
	// 0.02 initialisation the logits can never spread beyond about ±0.3
	// (|h| = √16 after the final norm, |E_row| ≈ 0.02·√16): p(c|a) would
	// stop near e^0.32/(e^0.32 + 3e^−0.1) ≈ 0.34 whatever the adapters
	// learn. A pretrained model's embeddings are far from that; 0.3
	// stands in for them.
	const initRange = "0.3"
	tr, m := newTransformerBanditInit(t, cfg, json.RawMessage(initRange))
	params, err := tr.Optimizer().Params()
	require.NoError(t, err)
	require.Len(t, params, 14)
	assert.Equal(t, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", params[0].Name)
	p0 := pTarget(t, m)
	for range 8 {
		_, err := tr.Step(ctx)
		require.NoError(t, err)
	}
	assert.Greater(t, pTarget(t, m), p0+0.1, "p(c|a) rises under GRPO through the adapters")

	dir := t.TempDir()
	require.NoError(t, tr.SaveTo(dir))
	atCheckpoint := pTarget(t, m)
	got, err := policy.ReadAdapterConfig(filepath.Join(dir, agentrl.CheckpointAdapterDir))
	require.NoError(t, err)
	assert.Equal(t, 4, got.Rank)
	assert.Equal(t, 8.0, got.Alpha)
	want, err := tr.Step(ctx)
	require.NoError(t, err)

	b, mb := newTransformerBanditInit(t, cfg, json.RawMessage(initRange))
	require.NoError(t, b.LoadFrom(dir))
	again, err := b.Step(ctx)
	require.NoError(t, err)
	assert.Equal(t, want.LossMetrics, again.LossMetrics)
	assert.Equal(t, want.GradNorm, again.GradNorm)
	pa, pb := m.Params(), mb.Params()
	for i := range pa {
		assert.Equal(t, pa[i].Data, pb[i].Data, pa[i].Name)
	}

	// The checkpoint's adapter folder, loaded onto the same base weights
	// (config and seed 3), computes what the policy did at the checkpoint.
	base, err := policy.New(m.Config(), 3)
	require.NoError(t, err)
	defer base.Close()
	require.NoError(t, base.LoadAdapter(filepath.Join(dir, agentrl.CheckpointAdapterDir)))
	assert.InDelta(t, atCheckpoint, pTarget(t, base), 1e-6)
}

// transformerParts is the transformer bandit's parts for another config.
func transformerParts(t *testing.T, m *policy.Model) agentrl.TrainerParts {
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	return agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4)}
}

func TestTrainerLoRAErrors(t *testing.T) {
	cfg := banditConfig()
	t.Run("invalid config", func(t *testing.T) {
		c := cfg
		c.LoRA = &policy.LoRAConfig{Rank: 0}
		assert.ErrorIs(t, c.Validate(), agentrl.ErrTrainerConfig)
	})
	t.Run("policy without adapters", func(t *testing.T) {
		c := cfg
		c.LoRA = &policy.LoRAConfig{Rank: 2}
		_, m := newTransformerBandit(t, cfg)
		parts := transformerParts(t, m)
		parts.Policy = newTabular(banditAlphabet)
		_, err := agentrl.NewTrainer(c, parts)
		require.ErrorIs(t, err, agentrl.ErrTrainer)
		assert.Contains(t, err.Error(), "LoRAPolicy")
	})
	t.Run("another adapter already attached", func(t *testing.T) {
		c := cfg
		c.LoRA = &policy.LoRAConfig{Rank: 2}
		_, m := newTransformerBandit(t, cfg)
		require.NoError(t, m.AddLoRA(policy.LoRAConfig{Rank: 4}, 1))
		_, err := agentrl.NewTrainer(c, transformerParts(t, m))
		require.ErrorIs(t, err, agentrl.ErrTrainerConfig)
		assert.Contains(t, err.Error(), "already carries rank 4")
		// The same adapter is kept: a loaded adapter trains on.
		c.LoRA = &policy.LoRAConfig{Rank: 4, TargetModules: []string{"v_proj", "q_proj"}}
		_, err = agentrl.NewTrainer(c, transformerParts(t, m))
		require.NoError(t, err)
	})
	t.Run("resume without the adapter", func(t *testing.T) {
		c := cfg
		c.LoRA = &policy.LoRAConfig{Rank: 2}
		a, _ := newTransformerBandit(t, c)
		dir := t.TempDir()
		require.NoError(t, a.SaveTo(dir))
		b, _ := newTransformerBandit(t, cfg)
		assert.ErrorIs(t, b.LoadFrom(dir), agentrl.ErrCheckpoint)
	})
}

// TestSFTLoRA fine-tunes adapters only: the loss falls, Params are the
// adapters, and an invalid or impossible LoRA config is refused.
func TestSFTLoRA(t *testing.T) {
	ctx := context.Background()
	_, m := newTransformerBanditInit(t, banditConfig(), json.RawMessage("0.3"))
	data := []agentrl.SFTSample{{IDs: []int{0, 2, 1, 3, 2}, Mask: []float32{0, 1, 1, 1, 1}}}
	cfg := agentrl.SFTConfig{BatchSize: 1, Epochs: 30, Optimizer: policy.AdamWConfig{LR: 0.02}, Seed: 1,
		LoRA: &policy.LoRAConfig{Rank: 2, TargetModules: []string{policy.LoRAAllLinear}}}
	tr, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: m, Data: data})
	require.NoError(t, err)
	first, err := tr.Loss(ctx, data)
	require.NoError(t, err)
	require.NoError(t, tr.Train(ctx, nil))
	last, err := tr.Loss(ctx, data)
	require.NoError(t, err)
	assert.Less(t, last, first/2, "loss %v → %v", first, last)
	assert.Len(t, m.Params(), 14, "the adapters alone")

	bad := cfg
	bad.LoRA = &policy.LoRAConfig{Rank: 2, TargetModules: []string{"lm_head"}}
	assert.ErrorIs(t, bad.Validate(), agentrl.ErrTrainerConfig)
	bad.LoRA = &policy.LoRAConfig{Rank: 2}
	_, err = agentrl.NewSFTTrainer(bad, agentrl.SFTParts{Policy: newTabular(banditAlphabet), Data: data})
	assert.ErrorIs(t, err, agentrl.ErrTrainer)
}

// TestSFTThenRLKeepsWeights: an RL trainer built on the model an SFT
// trainer just trained (both keep the state on the model's backend)
// starts from the fine-tuned weights, with or without adapters.
func TestSFTThenRLKeepsWeights(t *testing.T) {
	for _, lora := range []bool{false, true} {
		ctx := context.Background()
		_, m := newTransformerBanditInit(t, banditConfig(), json.RawMessage("0.3"))
		data := []agentrl.SFTSample{{IDs: []int{0, 2, 1, 3, 2}, Mask: []float32{0, 1, 1, 1, 1}}}
		sft, err := agentrl.NewSFTTrainer(agentrl.SFTConfig{BatchSize: 1, Epochs: 20, Optimizer: policy.AdamWConfig{LR: 0.02}}, agentrl.SFTParts{Policy: m, Data: data})
		require.NoError(t, err)
		before, err := sft.Loss(ctx, data)
		require.NoError(t, err)
		require.NoError(t, sft.Train(ctx, nil))
		after, err := sft.Loss(ctx, data)
		require.NoError(t, err)
		require.Less(t, after, before/2)

		cfg := banditConfig()
		if lora {
			cfg.LoRA = &policy.LoRAConfig{Rank: 2}
		}
		_, err = agentrl.NewTrainer(cfg, transformerParts(t, m))
		require.NoError(t, err)
		// A fresh SFT trainer only measures: its loss is the model's.
		probe, err := agentrl.NewSFTTrainer(agentrl.SFTConfig{BatchSize: 1}, agentrl.SFTParts{Policy: m, Data: data})
		require.NoError(t, err)
		now, err := probe.Loss(ctx, data)
		require.NoError(t, err)
		assert.InDelta(t, after, now, 1e-9, "lora %v: RL starts from the SFT weights", lora)
	}
}
