package agentrl_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/advantage"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// banditEnv is the bandit as an environment: it rewards the turn that
// answers its task's ground truth with 1 and ends the episode; with
// panicOdd, the episodes of odd samples panic instead.
type banditEnv struct {
	task     rollout.Task
	panicOdd bool
}

func (e *banditEnv) Open(context.Context) (rollout.Opening, error) { return rollout.Opening{}, nil }

func (e *banditEnv) Step(_ context.Context, a rollout.Action) (rollout.Feedback, error) {
	if e.panicOdd && e.task.Sample%2 == 1 {
		panic("simulator crashed")
	}
	r := 0.0
	if a.Text == e.task.GroundTruth {
		r = 1
	}
	return rollout.Feedback{Done: true, Reward: &r}, nil
}

func (e *banditEnv) Close() error { return nil }

// newEnvBandit is the bandit trained through banditEnv: every token ends
// the model's turn, the reward function scores 0 whatever the answer, so
// that only the environment's turn rewards move the policy.
func newEnvBandit(t *testing.T, est advantage.Estimator, panicOdd bool) (*agentrl.Trainer, *tabular) {
	t.Helper()
	m := newTabular(banditAlphabet, 0, 1, 2, 3)
	eng, err := rollout.NewEngine(rollout.Config{
		Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxTurns: 1,
		Env: func(_ context.Context, task rollout.Task) (rollout.Env, error) {
			return &banditEnv{task: task, panicOdd: panicOdd}, nil
		},
	})
	require.NoError(t, err)
	prompts := banditPrompts(4)
	for i := range prompts {
		prompts[i].GroundTruth = "c"
	}
	cfg := banditConfig()
	cfg.Sampling.MaxNewTokens = 2
	cfg.Advantage.Estimator = est
	zero := func(context.Context, reward.Input) (reward.Output, error) { return reward.Output{}, nil }
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Prompts: prompts, Reward: zero})
	require.NoError(t, err)
	return tr, m
}

// TestEnvTurnRewardsTrain checks that the environment's per-turn rewards
// reach the advantages: with a reward function that scores every answer
// 0, a step of grpo, turn_grpo or gigpo on the environment's rewards
// raises p(c|a) from 1/4, and the step reports the mean turn reward.
func TestEnvTurnRewardsTrain(t *testing.T) {
	for _, est := range []advantage.Estimator{advantage.GRPO, advantage.TurnGRPO, advantage.GiGPO} {
		t.Run(string(est), func(t *testing.T) {
			tr, m := newEnvBandit(t, est, false)
			require.InDelta(t, 0.25, m.prob(tokA, tokC), 1e-12)
			st, err := tr.Step(context.Background())
			require.NoError(t, err)
			assert.Greater(t, m.prob(tokA, tokC), 0.25)
			assert.Zero(t, st.RewardMean, "the reward function scores 0")
			assert.Greater(t, st.TurnRewardMean, 0.0)
			assert.Less(t, st.TurnRewardMean, 1.0)
			assert.Zero(t, st.EnvErrors)
			assert.Equal(t, st.TurnRewardMean, st.Map()["env/turn_reward/mean"])
		})
	}
}

// TestEnvFailuresCountedInStep checks that environments that panic end
// only their trajectories: the step trains on all 16, and counts the 8
// failed ones.
func TestEnvFailuresCountedInStep(t *testing.T) {
	tr, _ := newEnvBandit(t, advantage.GRPO, true)
	st, err := tr.Step(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 16, st.Trajectories)
	assert.Equal(t, 8, st.EnvErrors)
	assert.Equal(t, 8.0, st.Map()["env_errors/total"])
}
