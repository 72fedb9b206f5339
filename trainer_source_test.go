package agentrl_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// engineSource is a RolloutSource over a rollout engine that posts the
// bandit's reward for the even samples and leaves the odd ones to the
// trainer's reward function.
type engineSource struct {
	eng    *rollout.Engine
	posted func(tr *rollout.Trajectory) *reward.Output
}

func (s engineSource) Rollout(ctx context.Context, reqs []rollout.Request) ([]rollout.Trajectory, []*reward.Output, error) {
	trajs, err := s.eng.Run(ctx, reqs)
	if err != nil {
		return nil, nil, err
	}
	outs := make([]*reward.Output, len(trajs))
	for i := range trajs {
		outs[i] = s.posted(&trajs[i])
	}
	return trajs, outs, nil
}

// TestTrainerSource: with TrainerParts.Source, posted rewards are used
// as posted and only the other trajectories reach TrainerParts.Reward
// (2 prompts × 8 samples, 4 odd samples each: 8 calls a step); the
// bandit still learns. Without a Reward an unposted trajectory is an
// error, as are an Engine beside the Source and validation.
func TestTrainerSource(t *testing.T) {
	m := newTabular(banditAlphabet)
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	evenPosted := func(tr *rollout.Trajectory) *reward.Output {
		if tr.Sample%2 == 1 {
			return nil
		}
		out, _ := banditReward(context.Background(), reward.Input{Response: tr.Response})
		return &out
	}
	var calls atomic.Int64
	counted := func(ctx context.Context, in reward.Input) (reward.Output, error) {
		calls.Add(1)
		return banditReward(ctx, in)
	}
	src := engineSource{eng, evenPosted}
	tr, err := agentrl.NewTrainer(banditConfig(), agentrl.TrainerParts{Policy: m, Source: src, Reward: counted, Prompts: banditPrompts(4)})
	require.NoError(t, err)
	before := m.prob(tokA, tokC)
	for range 3 {
		_, err := tr.Step(context.Background())
		require.NoError(t, err)
	}
	assert.EqualValues(t, 3*8, calls.Load())
	assert.Greater(t, m.prob(tokA, tokC), before)

	_, err = tr.Validate(context.Background(), agentrl.ValidationConfig{Prompts: banditPrompts(1), N: 1})
	assert.ErrorContains(t, err, "validation needs TrainerParts.Engine")

	_, err = agentrl.NewTrainer(banditConfig(), agentrl.TrainerParts{Policy: m, Source: src, Engine: eng, Reward: counted, Prompts: banditPrompts(4)})
	assert.ErrorContains(t, err, "both set")

	noReward, err := agentrl.NewTrainer(banditConfig(), agentrl.TrainerParts{Policy: m, Source: src, Prompts: banditPrompts(4)})
	require.NoError(t, err)
	_, err = noReward.Step(context.Background())
	require.ErrorIs(t, err, agentrl.ErrTrainer)
	assert.ErrorContains(t, err, "has no posted reward and TrainerParts.Reward is nil")

	allPosted, err := agentrl.NewTrainer(banditConfig(), agentrl.TrainerParts{Policy: m, Prompts: banditPrompts(4),
		Source: engineSource{eng, func(tr *rollout.Trajectory) *reward.Output { return &reward.Output{Score: float64(tr.Sample % 2)} }}})
	require.NoError(t, err)
	_, err = allPosted.Step(context.Background())
	assert.NoError(t, err)
}
