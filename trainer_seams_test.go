package agentrl_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/advantage"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// importanceWeighted is the user objective of these tests: the
// unclipped importance-weighted policy gradient L_t = −A_t·r_t with
// r_t = exp(logπ_t − logπ_old,t). At r = 1 its gradient −A·r equals the
// gradient of GPG's −A·logπ, so one step with either from the same state
// moves the weights identically. Its metric "iw_pg/ratio" (the masked
// mean ratio, 1 at the first update) shows that it was the one run.
func importanceWeighted() loss.Variant {
	return loss.Variant{Metrics: func(d *loss.Data) map[string]float64 {
		r := make([]float64, len(d.LogProbs))
		for i := range r {
			r[i] = math.Exp(d.LogProbs[i] - d.OldLogProbs[i])
		}
		return map[string]float64{"iw_pg/ratio": d.MaskedMean(r)}
	}, Loss: func(v *loss.Vars) loss.Expr {
		return v.Ratio().Mul(v.Advantages()).Neg()
	}}
}

// TestTrainerUserLoss: a loss variant registered by the program trains
// through TrainerParts.Losses; without the registry its name is rejected.
func TestTrainerUserLoss(t *testing.T) {
	ctx := context.Background()
	reg := loss.NewRegistry()
	require.NoError(t, reg.Register("iw_pg", importanceWeighted()))

	cfg := banditConfig()
	cfg.Loss = loss.Config{Mode: "iw_pg", Agg: loss.AggTokenMean}

	m := newTabular(banditAlphabet)
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	_, err = agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4)})
	require.ErrorIs(t, err, agentrl.ErrTrainerConfig)
	assert.ErrorContains(t, err, "TrainerConfig.Loss")
	assert.ErrorContains(t, err, "iw_pg")
	assert.ErrorIs(t, cfg.Validate(), agentrl.ErrTrainerConfig, "Validate resolves the built-in modes only")
	assert.NoError(t, cfg.ValidateWith(reg, nil))

	mine, mm := newBanditParts(t, cfg, agentrl.TrainerParts{Reward: banditReward, Losses: reg}, 8)
	gpgCfg := cfg
	gpgCfg.Loss.Mode = loss.ModeGPG
	gpg, mg := newBanditParts(t, gpgCfg, agentrl.TrainerParts{Reward: banditReward}, 8)

	a, err := mine.Step(ctx)
	require.NoError(t, err)
	b, err := gpg.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, a.Updates)
	// One update from the same weights on the same rollout (same seed):
	// equal gradients at ratio 1, so equal weights after the update.
	assert.InDeltaSlice(t, mg.w, mm.w, 1e-6)
	assert.NotEqual(t, mm.w, newTabular(banditAlphabet).w, "the update moved the weights")
	// Masked mean of r = 1: 16/(16 + 1e-8).
	assert.InDelta(t, 1.0, a.LossMetrics["iw_pg/ratio"], 1e-8)
	assert.NotContains(t, b.LossMetrics, "iw_pg/ratio")
}

// TestTrainerUserEstimator: an estimator registered by the program
// computes the advantages through TrainerParts.Estimators.
func TestTrainerUserEstimator(t *testing.T) {
	calls := 0
	// "sign": +1 on every token of a trajectory scored above 0.5, −1 below.
	sign := advantage.EstimatorFunc(func(in advantage.Input, _ advantage.Config) (advantage.Output, error) {
		calls++
		out := advantage.Output{Advantages: make([][]float32, len(in.Mask)), Returns: make([][]float32, len(in.Mask))}
		for i, m := range in.Mask {
			a := float32(-1)
			if in.Scores[i] > 0.5 {
				a = 1
			}
			out.Advantages[i] = make([]float32, len(m))
			out.Returns[i] = make([]float32, len(m))
			for t, v := range m {
				out.Advantages[i][t] = a * v
				out.Returns[i][t] = a * v
			}
		}
		return out, nil
	})
	reg := advantage.NewRegistry()
	require.NoError(t, reg.Register("sign", sign))

	cfg := banditConfig()
	cfg.Advantage.Estimator = "sign"
	err := cfg.Validate()
	require.ErrorIs(t, err, agentrl.ErrTrainerConfig)
	assert.ErrorContains(t, err, "TrainerConfig.Advantage.Estimator")

	tr, m := newBanditParts(t, cfg, agentrl.TrainerParts{Reward: banditReward, Estimators: reg}, 8)
	before := m.prob(tokA, tokC)
	for range 3 {
		_, err := tr.Step(context.Background())
		require.NoError(t, err)
	}
	assert.Equal(t, 3, calls)
	assert.Greater(t, m.prob(tokA, tokC), before)
}

// TestOverlongBudgetFromEngine: the overlong penalty's MaxLen is the
// engine's response budget; an engine without one, or a MaxLen that
// disagrees with it, is a configuration error.
func TestOverlongBudgetFromEngine(t *testing.T) {
	cases := []struct {
		name   string
		maxLen int
		engine rollout.Config
		err    string // "" = accepted
	}{
		{"from the engine", 0, rollout.Config{MaxResponseTokens: 8}, ""},
		{"equal to the engine's", 8, rollout.Config{MaxResponseTokens: 8}, ""},
		{"differs from the engine's", 6, rollout.Config{MaxResponseTokens: 8}, "MaxLen 6 differs from the rollout engine's response budget 8"},
		{"engine without a budget", 0, rollout.Config{MaxTurns: 2}, "rollout.Config.MaxResponseTokens is 0"},
		{"explicit, engine without a budget", 6, rollout.Config{MaxTurns: 2}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := banditConfig()
			cfg.Overlong = &reward.OverlongConfig{MaxLen: tc.maxLen, Buffer: 2, Factor: 1}
			m := newTabular(banditAlphabet)
			ec := tc.engine
			ec.Sampler, ec.Tokenizer = m, alphaTokenizer{banditAlphabet}
			eng, err := rollout.NewEngine(ec)
			require.NoError(t, err)
			_, err = agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4)})
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, agentrl.ErrTrainerConfig)
			assert.ErrorContains(t, err, "TrainerConfig.Overlong")
			assert.ErrorContains(t, err, tc.err)
		})
	}
}

// TestPromptRewardInput: a two-turn trajectory (3-token prompt, 2
// generated tokens, 3 tool-result tokens, 1 generated token) with two
// tool calls of which one reported a reward. By hand: Turns 2, ToolCalls
// 2, ToolRewards [0.5], ResponseTokens 2 + 1 = 3, ToolTokens 9 − 3 − 3 = 3.
func TestPromptRewardInput(t *testing.T) {
	half := 0.5
	tr := rollout.Trajectory{
		Tokens:    []int{1, 2, 3, 4, 5, 6, 7, 8, 9},
		Mask:      []float32{0, 0, 0, 1, 1, 0, 0, 0, 1},
		PromptLen: 3,
		Response:  "ab<tool_response>xyz</tool_response>c",
		Turns:     []rollout.Turn{{Start: 3, End: 5, ResultEnd: 8}, {Start: 8, End: 9, ResultEnd: 9}},
		ToolCalls: []rollout.ToolCall{{Turn: 0, Result: tool.Result{Reward: &half}}, {Turn: 0}},
	}
	p := agentrl.Prompt{GroundTruth: "42", DataSource: "math", Extra: map[string]any{"index": 7}}
	assert.Equal(t, reward.Input{
		Response: "ab<tool_response>xyz</tool_response>c", GroundTruth: "42", DataSource: "math",
		Extra: map[string]any{"index": 7}, Turns: 2, ToolCalls: 2, ToolRewards: []float64{0.5},
		ResponseTokens: 3, ToolTokens: 3,
	}, p.RewardInput(&tr))
}
