package agentrl_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/rollout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pTarget is p(c | "a") under the transformer, from its logits.
func pTarget(t *testing.T, m *policy.Model) float64 {
	lg, err := m.Logits([]int{tokA})
	require.NoError(t, err)
	row := lg.Data().([]float32)
	mx := math.Inf(-1)
	for _, x := range row {
		mx = math.Max(mx, float64(x))
	}
	s := 0.0
	for _, x := range row {
		s += math.Exp(float64(x) - mx)
	}
	return math.Exp(float64(row[tokC])-mx) / s
}

func newTransformerBandit(t *testing.T, cfg agentrl.TrainerConfig) (*agentrl.Trainer, *policy.Model) {
	return newTransformerBanditInit(t, cfg, nil)
}

// newTransformerBanditInit is newTransformerBandit with config.json's
// initializer_range set (nil: transformers' 0.02).
func newTransformerBanditInit(t *testing.T, cfg agentrl.TrainerConfig, initRange json.RawMessage) (*agentrl.Trainer, *policy.Model) {
	pc := policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 4, HiddenSize: 16, IntermediateSize: 32,
		NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
		MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
	}
	if initRange != nil {
		pc.Extra = map[string]json.RawMessage{"initializer_range": initRange}
	}
	m, err := policy.New(pc, 3, policy.WithDecoder(alphaTokenizer{banditAlphabet}.Decode))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4)})
	require.NoError(t, err)
	return tr, m
}

// TestResumeWithTransformer: resuming the transformer's run from a
// checkpoint gives bit for bit the step an uninterrupted run takes.
func TestResumeWithTransformer(t *testing.T) {
	ctx := context.Background()
	cfg := banditConfig()
	cfg.Optimizer.LR = 0.02
	cfg.MicroBatchSize = 8
	a, ma := newTransformerBandit(t, cfg)
	for range 2 {
		_, err := a.Step(ctx)
		require.NoError(t, err)
	}
	dir := t.TempDir()
	require.NoError(t, a.SaveTo(dir))
	want, err := a.Step(ctx)
	require.NoError(t, err)

	b, mb := newTransformerBandit(t, cfg)
	require.NoError(t, b.LoadFrom(dir))
	got, err := b.Step(ctx)
	require.NoError(t, err)
	assert.Equal(t, want.LossMetrics, got.LossMetrics)
	assert.Equal(t, want.GradNorm, got.GradNorm)
	pa, pb := ma.Params(), mb.Params()
	require.Equal(t, len(pa), len(pb))
	for i := range pa {
		assert.Equal(t, pa[i].Data, pb[i].Data, pa[i].Name)
	}
}

// TestTrainerWithTransformer runs the bandit with the real transformer
// (a tiny Qwen3 over the 4-token alphabet) as both sampler and trainable:
// the trainer's contract with policy.Model, end to end.
func TestTrainerWithTransformer(t *testing.T) {
	ctx := context.Background()
	cfg := banditConfig()
	cfg.Optimizer.LR = 0.02
	tr, m := newTransformerBandit(t, cfg)
	p0 := pTarget(t, m)
	var first agentrl.StepMetrics
	for i := range 8 {
		st, err := tr.Step(ctx)
		require.NoError(t, err)
		if i == 0 {
			first = st
		}
	}
	// Small random weights: the start is close to uniform, and the first
	// update compares the policy with itself.
	assert.InDelta(t, 0.25, p0, 0.05)
	assert.InDelta(t, math.Log(4), first.Entropy, 0.05)
	assert.Zero(t, first.PGClipFrac)
	assert.Greater(t, pTarget(t, m), p0+0.1, "p(c|a) rises under GRPO")
}

// hostOnly hides *policy.Model's DevicePolicy, so that the trainer steps
// AdamW over Params.
type hostOnly struct{ lm.Trainable }

// TestTrainerDeviceOptimizer: with a *policy.Model the trainer keeps the
// training state on the model's backend (policy.DeviceAdamW), and trains
// as AdamW over host Params does: the same first-step loss (same
// gradients), the same policy after 4 steps to float32 rounding (the
// clip's norm is a float64 sum in another order).
func TestTrainerDeviceOptimizer(t *testing.T) {
	ctx := context.Background()
	cfg := banditConfig()
	cfg.Optimizer.LR = 0.02
	dev, md := newTransformerBandit(t, cfg)
	_, ok := dev.Optimizer().(*policy.DeviceAdamW)
	require.True(t, ok, "%T", dev.Optimizer())

	_, mh := newTransformerBandit(t, cfg)
	parts := transformerParts(t, mh)
	parts.Policy = hostOnly{mh}
	host, err := agentrl.NewTrainer(cfg, parts)
	require.NoError(t, err)
	_, ok = host.Optimizer().(*policy.AdamW)
	require.True(t, ok, "%T", host.Optimizer())

	for i := range 4 {
		a, err := dev.Step(ctx)
		require.NoError(t, err)
		b, err := host.Step(ctx)
		require.NoError(t, err)
		if i == 0 {
			assert.Equal(t, b.LossMetrics, a.LossMetrics)
			assert.InDelta(t, b.GradNorm, a.GradNorm, 1e-12*b.GradNorm)
		}
	}
	assert.InDelta(t, pTarget(t, mh), pTarget(t, md), 1e-5)
}
