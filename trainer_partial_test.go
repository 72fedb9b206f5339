package agentrl_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/rollout"
)

// cutFleet is a testFleet whose every turn a weight update cuts after
// its first token, as fleet.Config.PartialRollouts does: the first piece
// comes back as lm.FinishAbort tagged tag(version) (the version that
// sampled it, or an older one to break the bound), and the rollout
// engine continues the turn from it.
type cutFleet struct {
	*testFleet
	budget int
	tag    func(v int) int
}

func (c cutFleet) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	out := make([]lm.Generation, len(reqs))
	for i, r := range reqs {
		first := r.Params.MaxNewTokens == c.budget
		if first {
			r.Params.MaxNewTokens = 1
		}
		gens, err := c.testFleet.Generate(ctx, []lm.GenerateRequest{r})
		if err != nil {
			return nil, err
		}
		g := gens[0]
		if first && g.FinishReason == lm.FinishLength {
			v, err := strconv.Atoi(g.WeightVersion)
			if err != nil {
				return nil, err
			}
			g.FinishReason, g.WeightVersion = lm.FinishAbort, strconv.Itoa(c.tag(v))
		}
		out[i] = g
	}
	return out, nil
}

// TestPartialRolloutStaleness: turns cut by weight updates and
// continued train like any other; the step counts them
// (async/partial_turns) and measures staleness token by token; and the
// bound holds token by token: a piece sampled by weights older than
// MaxStaleness allows fails the step, naming the token.
func TestPartialRolloutStaleness(t *testing.T) {
	ctx := context.Background()
	cfg := banditConfig()
	cfg.MaxStaleness = 1
	cfg.Sampling.MaxNewTokens = 4
	newTrainer := func(t *testing.T, tag func(int) int) *agentrl.Trainer {
		f := cutFleet{testFleet: newTestFleet(t), budget: 4, tag: tag}
		m := newTabular(banditAlphabet)
		eng, err := rollout.NewEngine(rollout.Config{Sampler: f, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
		require.NoError(t, err)
		tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4), Sync: f})
		require.NoError(t, err)
		t.Cleanup(func() { tr.Close() })
		return tr
	}

	t.Run("within the bound", func(t *testing.T) {
		tr := newTrainer(t, func(v int) int { return v })
		partial := 0
		for k := 1; k <= 4; k++ {
			st, err := tr.Step(ctx)
			require.NoError(t, err)
			partial += st.PartialTurns
			assert.GreaterOrEqual(t, st.StalenessTokenMean, 0.0)
			assert.LessOrEqual(t, st.StalenessTokenMean, float64(st.StalenessMax))
			mp := st.Map()
			assert.Equal(t, float64(st.PartialTurns), mp["async/partial_turns"])
			assert.Equal(t, st.StalenessTokenMean, mp["async/staleness_token_mean"])
		}
		assert.Positive(t, partial, "turns were cut and continued")
	})

	t.Run("a stale piece breaks it", func(t *testing.T) {
		tr := newTrainer(t, func(v int) int { return max(v-2, 0) })
		var err error
		for k := 1; k <= 8 && err == nil; k++ {
			_, err = tr.Step(ctx)
		}
		require.ErrorIs(t, err, agentrl.ErrTrainer)
		assert.Regexp(t, `token \d+ was sampled with weight version \d+, 2 versions from the policy's \d+ \(MaxStaleness 1\)`, err.Error())
	})
}
