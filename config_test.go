package agentrl_test

import (
	"math"
	"testing"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/advantage"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/reward"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPresetsValidate(t *testing.T) {
	for name, c := range map[string]agentrl.TrainerConfig{
		"GRPOTCR": agentrl.GRPOTCR(), "DAPO": agentrl.DAPO(), "DrGRPO": agentrl.DrGRPO(),
	} {
		assert.NoError(t, c.Validate(), name)
	}
}

// TestPresetValues pins the papers' values (see the presets' comments
// for the sources).
func TestPresetValues(t *testing.T) {
	g := agentrl.GRPOTCR()
	assert.Equal(t, advantage.Config{Estimator: advantage.GRPO}, g.Advantage)
	assert.Equal(t, loss.Config{Mode: loss.ModeVanilla, Agg: loss.AggTokenMean, ClipLow: 0.2, ClipHigh: 0.28, ClipC: 10}, g.Loss)
	assert.Nil(t, g.DynamicSampling)
	assert.Nil(t, g.LoRA)
	require.NotNil(t, g.Overlong)
	assert.Equal(t, reward.OverlongConfig{Buffer: 4096, Factor: 1}, *g.Overlong)
	assert.Equal(t, 20480, agentrl.RecipeMaxResponseTokens)
	assert.Equal(t, 16, g.SamplesPerPrompt)

	d := agentrl.DAPO()
	assert.Equal(t, 0.2, d.Loss.ClipLow)
	assert.Equal(t, 0.28, d.Loss.ClipHigh)
	assert.Equal(t, loss.AggTokenMean, d.Loss.Agg)
	require.NotNil(t, d.DynamicSampling)
	assert.Equal(t, agentrl.DynamicSamplingConfig{Metric: agentrl.FilterByAcc, MaxGenBatches: 10}, *d.DynamicSampling)
	assert.NotNil(t, d.Overlong)
	assert.Zero(t, d.Loss.KLCoef)

	r := agentrl.DrGRPO()
	assert.Equal(t, advantage.Config{Estimator: advantage.DrGRPO}, r.Advantage)
	assert.Equal(t, loss.AggSeqMeanTokenSumNorm, r.Loss.Agg)
	assert.Nil(t, r.Overlong)
}

// An empty Advantage.Estimator is grpo, as advantage.Config{} is.
func TestTrainerConfigEmptyEstimatorIsGRPO(t *testing.T) {
	c := agentrl.GRPOTCR()
	c.Advantage = advantage.Config{}
	assert.NoError(t, c.Validate())
}

func TestTrainerConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*agentrl.TrainerConfig)
		field string
	}{
		{"unknown estimator", func(c *agentrl.TrainerConfig) { c.Advantage.Estimator = "ppo2" }, "TrainerConfig.Advantage.Estimator"},
		{"gae needs a critic", func(c *agentrl.TrainerConfig) { c.Advantage.Estimator = advantage.GAE }, "TrainerConfig.Advantage.Estimator"},
		{"remax needs baselines", func(c *agentrl.TrainerConfig) { c.Advantage.Estimator = advantage.ReMax }, "TrainerConfig.Advantage.Estimator"},
		{"negative epsilon", func(c *agentrl.TrainerConfig) { c.Advantage.Epsilon = -1 }, "TrainerConfig.Advantage"},
		{"gamma above 1", func(c *agentrl.TrainerConfig) { c.Advantage.Gamma = new(1.5) }, "TrainerConfig.Advantage"},
		{"dual clip ≤ 1", func(c *agentrl.TrainerConfig) { c.Loss.ClipC = 0.5 }, "ClipC"},
		{"unknown aggregation", func(c *agentrl.TrainerConfig) { c.Loss.Agg = "mean" }, "Agg"},
		{"unknown loss mode", func(c *agentrl.TrainerConfig) { c.Loss.Mode = "ppo3" }, "TrainerConfig.Loss"},
		{"NaN KL coefficient", func(c *agentrl.TrainerConfig) { c.Loss.KLCoef = math.NaN() }, "KLCoef"},
		{"no prompts per step", func(c *agentrl.TrainerConfig) { c.PromptsPerStep = 0 }, "TrainerConfig.PromptsPerStep"},
		{"no samples", func(c *agentrl.TrainerConfig) { c.SamplesPerPrompt = -1 }, "TrainerConfig.SamplesPerPrompt"},
		{"mini batch too big", func(c *agentrl.TrainerConfig) { c.MiniBatchSize = 1000 }, "TrainerConfig.MiniBatchSize"},
		{"mini batch not a divisor", func(c *agentrl.TrainerConfig) { c.MiniBatchSize = 100 }, "TrainerConfig.MiniBatchSize"},
		{"micro batch not a divisor", func(c *agentrl.TrainerConfig) { c.MicroBatchSize = 7 }, "TrainerConfig.MicroBatchSize"},
		{"negative epochs", func(c *agentrl.TrainerConfig) { c.PPOEpochs = -1 }, "TrainerConfig.PPOEpochs"},
		{"negative gen batches", func(c *agentrl.TrainerConfig) {
			c.DynamicSampling = &agentrl.DynamicSamplingConfig{MaxGenBatches: -1}
		}, "TrainerConfig.DynamicSampling.MaxGenBatches"},
		{"infinite grad clip", func(c *agentrl.TrainerConfig) { c.MaxGradNorm = math.Inf(1) }, "TrainerConfig.MaxGradNorm"},
		{"bad old log-probs", func(c *agentrl.TrainerConfig) { c.OldLogProbs = "vllm" }, "TrainerConfig.OldLogProbs"},
		{"bad filter metric", func(c *agentrl.TrainerConfig) {
			c.DynamicSampling = &agentrl.DynamicSamplingConfig{Metric: "len"}
		}, "TrainerConfig.DynamicSampling.Metric"},
		{"negative temperature", func(c *agentrl.TrainerConfig) { c.Sampling.Temperature = -1 }, "TrainerConfig.Sampling.Temperature"},
		{"bad top-p", func(c *agentrl.TrainerConfig) { c.Sampling.TopP = 2 }, "TrainerConfig.Sampling"},
		{"negative learning rate", func(c *agentrl.TrainerConfig) { c.Optimizer.LR = -1 }, "TrainerConfig.Optimizer.LR"},
		{"beta1 of 1", func(c *agentrl.TrainerConfig) { c.Optimizer.Beta1 = 1 }, "TrainerConfig.Optimizer.Beta1"},
		{"NaN weight decay", func(c *agentrl.TrainerConfig) { c.Optimizer.WeightDecay = math.NaN() }, "TrainerConfig.Optimizer.WeightDecay"},
		{"overlong without buffer", func(c *agentrl.TrainerConfig) { c.Overlong.Buffer = 0 }, "TrainerConfig.Overlong"},
		{"overlong buffer over budget", func(c *agentrl.TrainerConfig) { c.Overlong.MaxLen = 100 }, "TrainerConfig.Overlong"},
		{"overlong NaN factor", func(c *agentrl.TrainerConfig) { c.Overlong.Factor = math.NaN() }, "TrainerConfig.Overlong"},
		{"negative reward limit", func(c *agentrl.TrainerConfig) { c.Reward.Limit = -2 }, "TrainerConfig.Reward.Limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := agentrl.GRPOTCR()
			tc.edit(&c)
			err := c.Validate()
			require.ErrorIs(t, err, agentrl.ErrTrainerConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestSFTConfigValidate(t *testing.T) {
	good := agentrl.SFTConfig{BatchSize: 4, Optimizer: banditConfig().Optimizer}
	require.NoError(t, good.Validate())
	// The zero AdamWConfig is torch's AdamW (policy.AdamWConfig.WithDefaults).
	require.NoError(t, agentrl.SFTConfig{BatchSize: 4}.Validate())
	cases := []struct {
		name  string
		edit  func(*agentrl.SFTConfig)
		field string
	}{
		{"zero batch", func(c *agentrl.SFTConfig) { c.BatchSize = 0 }, "SFTConfig.BatchSize"},
		{"micro not a divisor", func(c *agentrl.SFTConfig) { c.MicroBatchSize = 3 }, "SFTConfig.MicroBatchSize"},
		{"negative epochs", func(c *agentrl.SFTConfig) { c.Epochs = -1 }, "SFTConfig.Epochs"},
		{"negative clip", func(c *agentrl.SFTConfig) { c.MaxGradNorm = -1 }, "SFTConfig.MaxGradNorm"},
		{"infinite lr", func(c *agentrl.SFTConfig) { c.Optimizer.LR = math.Inf(1) }, "SFTConfig.Optimizer.LR"},
		{"negative eps", func(c *agentrl.SFTConfig) { c.Optimizer.Eps = -1 }, "SFTConfig.Optimizer.Eps"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			err := c.Validate()
			require.ErrorIs(t, err, agentrl.ErrTrainerConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}
