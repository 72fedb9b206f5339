package agentrl_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/rollout"
)

// shiftedSampler is the tabular model as a sampler whose recorded
// log-probabilities are its own plus delta: a sampler that disagrees with
// the trainer by a known amount on every token.
type shiftedSampler struct {
	m     *tabular
	delta float32
}

func (s shiftedSampler) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	gens, err := s.m.Generate(ctx, reqs)
	for i := range gens {
		for j := range gens[i].LogProbs {
			gens[i].LogProbs[j] += s.delta
		}
	}
	return gens, err
}

// newShiftedBandit is newBandit whose engine samples through
// shiftedSampler.
func newShiftedBandit(t *testing.T, cfg agentrl.TrainerConfig, delta float32) *agentrl.Trainer {
	t.Helper()
	m := newTabular(banditAlphabet)
	eng, err := rollout.NewEngine(rollout.Config{Sampler: shiftedSampler{m, delta}, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4)})
	require.NoError(t, err)
	return tr
}

// TestMismatchMetricsEveryStep: a recomputing trainer logs verl's
// rollout_corr/ mismatch metrics each step. With the trainer's own model
// as the sampler (the tabular model reports exactly the log-probabilities
// it recomputes) every difference is 0 and the perplexity ratio 1. With a
// sampler whose log-probabilities are the trainer's + δ on every token,
// each response token has rollout − old = δ, so the direct KL estimate
// mean(log π_rollout − log π_old) and |log-ppl difference| are both δ
// and the perplexity ratio exp(±δ). Taking the old log-probabilities from
// the sampler leaves nothing to compare: no mismatch keys.
func TestMismatchMetricsEveryStep(t *testing.T) {
	ctx := context.Background()
	own, _ := newBandit(t, banditConfig(), banditReward)
	st, err := own.Step(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, st.Mismatch)
	row := st.Map()
	for _, k := range []string{"rollout_corr/kl", "rollout_corr/k3_kl", "rollout_corr/log_ppl_diff", "rollout_corr/log_ppl_abs_diff", "training/rollout_probs_diff_max"} {
		require.Contains(t, row, k)
		assert.InDelta(t, 0, row[k], 1e-6, k)
	}
	assert.InDelta(t, 1, row["rollout_corr/ppl_ratio"], 1e-6)

	const delta = 0.1
	shifted := newShiftedBandit(t, banditConfig(), delta)
	st, err = shifted.Step(ctx)
	require.NoError(t, err)
	assert.InDelta(t, delta, st.Mismatch["rollout_corr/kl"], 1e-5)
	assert.InDelta(t, delta, st.Mismatch["rollout_corr/log_ppl_abs_diff"], 1e-5)
	r := st.Mismatch["rollout_corr/ppl_ratio"]
	assert.True(t, almost(r, 1.1051709180756477) || almost(r, 1/1.1051709180756477), "ppl_ratio %v, want exp(±0.1)", r)

	cfg := banditConfig()
	cfg.OldLogProbs = agentrl.OldLogProbsRollout
	byRollout := newShiftedBandit(t, cfg, delta)
	st, err = byRollout.Step(ctx)
	require.NoError(t, err)
	assert.Nil(t, st.Mismatch)
}

func almost(a, b float64) bool { return a-b < 1e-5 && b-a < 1e-5 }

// TestRolloutCorrectionInTheTrainer: a decoupled preset gets the
// sampler's log-probabilities into the loss (its rollout_corr/rollout_is_
// metrics reach the step's row: with δ = 0.1 every token's weight is
// exp(old − rollout) = exp(−0.1)); bypass mode takes the sampler's
// log-probabilities as the old ones and refuses an explicit recompute
// (as GRPOTCR's recipe sets) with a message that says what to set.
func TestRolloutCorrectionInTheTrainer(t *testing.T) {
	ctx := context.Background()
	rc, err := loss.RolloutCorrectionPreset("decoupled_token_is")
	require.NoError(t, err)
	cfg := banditConfig()
	cfg.Loss.RolloutCorrection = rc
	st, err := newShiftedBandit(t, cfg, 0.1).Step(ctx)
	require.NoError(t, err)
	row := st.Map()
	require.Contains(t, row, "rollout_corr/rollout_is_mean")
	assert.InDelta(t, 0.9048374180359595, row["rollout_corr/rollout_is_mean"], 1e-5)
	assert.Contains(t, row, "rollout_corr/kl", "the mismatch is measured too")

	bp, err := loss.RolloutCorrectionPreset("bypass_ppo_clip")
	require.NoError(t, err)
	cfg = banditConfig()
	cfg.Loss.RolloutCorrection = bp
	cfg.OldLogProbs = agentrl.OldLogProbsRollout // GRPOTCR's recipe says recompute
	st, err = newShiftedBandit(t, cfg, 0.1).Step(ctx)
	require.NoError(t, err)
	assert.Nil(t, st.Mismatch, "bypass mode recomputes nothing")

	cfg.OldLogProbs = agentrl.OldLogProbsRecompute
	m := newTabular(banditAlphabet)
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	_, err = agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4)})
	require.ErrorIs(t, err, agentrl.ErrTrainerConfig)
	assert.ErrorContains(t, err, "BypassMode")
}
