package agentrl_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/advantage"
	"github.com/agentrl/agentrl/eval"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// banditEngine is the bandit's engine with a response budget.
func banditEngine(t *testing.T, s lm.Sampler, budget int) *rollout.Engine {
	t.Helper()
	eng, err := rollout.NewEngine(rollout.Config{Sampler: s, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: budget})
	require.NoError(t, err)
	return eng
}

// TestNewTrainerGroundTruth: prompts without a ground truth are refused,
// by name, unless the reward declares that it needs none; validation
// prompts too. Before, a math reward scored them −1 whatever the
// response.
func TestNewTrainerGroundTruth(t *testing.T) {
	m := newTabular(banditAlphabet)
	prompts := banditPrompts(4)
	prompts[1].GroundTruth, prompts[3].GroundTruth = "", ""
	parts := agentrl.TrainerParts{Policy: m, Engine: banditEngine(t, m, 8), Reward: banditReward, Prompts: prompts}
	_, err := agentrl.NewTrainer(banditConfig(), parts)
	require.ErrorIs(t, err, agentrl.ErrTrainer)
	assert.ErrorContains(t, err, `2 of 4 TrainerParts.Prompts have no GroundTruth: 1 ("p1"), 3 ("p3")`)
	assert.ErrorContains(t, err, "TrainerParts.GroundTruthOptional")

	parts.GroundTruthOptional = true
	_, err = agentrl.NewTrainer(banditConfig(), parts)
	require.NoError(t, err)

	parts.Prompts, parts.GroundTruthOptional = banditPrompts(4), false
	tr, err := agentrl.NewTrainer(banditConfig(), parts)
	require.NoError(t, err)
	_, err = tr.Validate(context.Background(), agentrl.ValidationConfig{Prompts: []agentrl.Prompt{{ID: "v", Tokens: []int{tokA}}}})
	require.ErrorIs(t, err, agentrl.ErrTrainer)
	assert.ErrorContains(t, err, `1 of 1 ValidationConfig.Prompts have no GroundTruth: 0 ("v")`)
}

// promptLengths is a sampler that records the prompt lengths of the
// first turns it is asked for.
type promptLengths struct {
	*tabular
	mu   sync.Mutex
	seen []int
}

func (p *promptLengths) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	p.mu.Lock()
	for _, r := range reqs {
		if !slices.Contains(p.seen, len(r.Prompt)) {
			p.seen = append(p.seen, len(r.Prompt))
		}
	}
	p.mu.Unlock()
	return p.tabular.Generate(ctx, reqs)
}

// TestTrainerContext: with a context of 12 tokens and a response budget
// of 8, prompts of more than 4 tokens are left out before any rollout,
// said once on Notes and counted in every step's row; a budget that
// fills the context, or too few prompts left, is an error; a validation
// prompt that does not fit is refused. Before, such prompts were rolled
// out and their responses cut by the context at 12 − len(prompt)
// tokens, short of the budget the overlong penalty measures.
func TestTrainerContext(t *testing.T) {
	ctx := context.Background()
	a := func(n int) []int { return make([]int, n) } // n tokens "a"
	prompts := banditPrompts(5)
	prompts[0].Tokens, prompts[1].Tokens, prompts[2].Tokens = a(4), a(5), a(12)
	m := newTabular(banditAlphabet)
	rec := &promptLengths{tabular: m}
	var notes bytes.Buffer
	parts := agentrl.TrainerParts{Policy: m, Engine: banditEngine(t, rec, 8), Reward: banditReward, Prompts: prompts, ContextLength: 12, Notes: &notes}
	tr, err := agentrl.NewTrainer(banditConfig(), parts)
	require.NoError(t, err)
	assert.Equal(t, "agentrl: 2 of 5 prompts left out: longer than the 4 tokens that the model's context of 12 leaves after the response budget of 8 (the longest has 12); a response the context cuts before its budget ends early, and the overlong penalty never fires\n", notes.String())
	for range 3 {
		st, err := tr.Step(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, st.PromptsLeftOut)
		assert.Equal(t, 2.0, st.Map()["data/prompts_left_out"])
	}
	slices.Sort(rec.seen)
	assert.Equal(t, []int{1, 4}, rec.seen, "only the prompts that fit are rolled out")
	assert.Equal(t, 1, strings.Count(notes.String(), "left out"), "said once")

	_, err = tr.Validate(ctx, agentrl.ValidationConfig{Prompts: []agentrl.Prompt{{ID: "long", Tokens: a(5), GroundTruth: "c"}}})
	require.ErrorIs(t, err, agentrl.ErrTrainer)
	assert.ErrorContains(t, err, "1 of 1 ValidationConfig.Prompts are longer than the 4 tokens")

	for _, tc := range []struct {
		name    string
		edit    func(*agentrl.TrainerParts)
		wantErr string
	}{
		{"budget fills the context", func(p *agentrl.TrainerParts) { p.ContextLength = 8 },
			"the engine's response budget of 8 tokens (rollout.Config.MaxResponseTokens) leaves no room for a prompt in the model's context of 8 tokens"},
		{"too few left", func(p *agentrl.TrainerParts) { p.Prompts = p.Prompts[:3] },
			"1 prompts (2 more left out: longer than the 4 tokens"},
		{"negative context", func(p *agentrl.TrainerParts) { p.ContextLength = -1 }, "ContextLength is -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parts
			tc.edit(&p)
			_, err := agentrl.NewTrainer(banditConfig(), p)
			require.ErrorIs(t, err, agentrl.ErrTrainer)
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// TestTrainerContextFromModel: a *policy.Model's context is its
// max_position_embeddings, without TrainerParts.ContextLength.
func TestTrainerContextFromModel(t *testing.T) {
	m, err := policy.New(policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 4, HiddenSize: 8, IntermediateSize: 16,
		NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 4,
		MaxPositionEmbeddings: 8, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
	}, 1)
	require.NoError(t, err)
	defer m.Close()
	_, err = agentrl.NewTrainer(banditConfig(), agentrl.TrainerParts{Policy: m, Engine: banditEngine(t, m, 8), Reward: banditReward, Prompts: banditPrompts(4)})
	require.ErrorIs(t, err, agentrl.ErrTrainer)
	assert.ErrorContains(t, err, "leaves no room for a prompt in the model's context of 8 tokens")
}

// TestTrainerNotes: greedy sampling of a group-relative estimator is
// said when the trainer is made, and a step whose advantages are all 0
// once per trainer; a run that learns says nothing.
func TestTrainerNotes(t *testing.T) {
	ctx := context.Background()
	constant := func(context.Context, reward.Input) (reward.Output, error) { return reward.Output{Score: -1}, nil }
	for _, tc := range []struct {
		name  string
		edit  func(*agentrl.TrainerConfig)
		rf    reward.Func
		notes []string // the notes' beginnings, in order
	}{
		{"a run that learns", func(*agentrl.TrainerConfig) {}, banditReward, nil},
		{"equal rewards", func(*agentrl.TrainerConfig) {}, constant,
			[]string{"agentrl: step 1: every advantage is 0 (the rewards of every group were equal: mean -1, std 0)"}},
		// (The tabular model samples at temperature 1 when asked for 0,
		// so its groups still vary: the greedy note alone is said.)
		{"greedy GRPO", func(c *agentrl.TrainerConfig) { c.Sampling.Temperature = 0 }, banditReward, []string{
			`agentrl: TrainerConfig.Sampling.Temperature is 0, greedy: the 8 samples of a prompt are one response repeated, so the group-relative advantages of "grpo" are all 0`}},
		{"greedy RLOO", func(c *agentrl.TrainerConfig) {
			c.Sampling.Temperature, c.Advantage = 0, advantage.Config{Estimator: advantage.RLOO}
		}, banditReward, []string{`agentrl: TrainerConfig.Sampling.Temperature is 0, greedy`}},

		{"greedy without groups", func(c *agentrl.TrainerConfig) {
			c.Sampling.Temperature, c.Advantage = 0, advantage.Config{Estimator: advantage.ReinforcePlusPlus}
		}, banditReward, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := banditConfig()
			tc.edit(&cfg)
			var notes bytes.Buffer
			tr, _ := newBanditParts(t, cfg, agentrl.TrainerParts{Reward: tc.rf, Notes: &notes}, 8)
			for range 3 {
				_, err := tr.Step(ctx)
				require.NoError(t, err)
			}
			lines := strings.Split(strings.TrimSuffix(notes.String(), "\n"), "\n")
			if tc.notes == nil {
				assert.Empty(t, notes.String())
				return
			}
			require.Len(t, lines, len(tc.notes), notes.String())
			for i, want := range tc.notes {
				assert.True(t, strings.HasPrefix(lines[i], want), "note %d: %q, want %q…", i, lines[i], want)
			}
		})
	}
}

// TestAdvantageMetrics: two samples per prompt, one answering "c" (1)
// and one "a" (0): GRPO gives (s − mean)/(std + ε) with the sample
// standard deviation (torch.std, unbiased) √½, so ±½/√½ = ±0.7071 on
// the one response token each; the mean is 0.
func TestAdvantageMetrics(t *testing.T) {
	cfg := banditConfig()
	cfg.SamplesPerPrompt = 2
	eng, err := rollout.NewEngine(rollout.Config{Sampler: paritySampler{}, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: newTabular(banditAlphabet), Engine: eng, Reward: banditReward, Prompts: banditPrompts(4)})
	require.NoError(t, err)
	st, err := tr.Step(context.Background())
	require.NoError(t, err)
	if st.RewardStd == 0 {
		t.Skip("the seeds drew one answer for every sample") // paritySampler answers by the seed's parity
	}
	row := st.Map()
	assert.InDelta(t, 0.7071, row["critic/advantages/max"], 1e-3)
	assert.InDelta(t, -0.7071, row["critic/advantages/min"], 1e-3)
	assert.InDelta(t, 0, row["critic/advantages/mean"], 1e-6)
}

// TestGroupReward: a group reward sees the SamplesPerPrompt trajectories
// of each prompt together, with the task's text, and its scores train as
// a reward's do; overlong shaping applies to each member; validation
// groups the N samples of each prompt; reward metrics join the rows.
func TestGroupReward(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var sizes []int
	var tasks []string
	ranking := func(_ context.Context, group []reward.Input) ([]reward.Output, error) {
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(group))
		out := make([]reward.Output, len(group))
		for i, in := range group {
			tasks = append(tasks, in.Prompt)
			if in.Response == "c" {
				out[i] = reward.Output{Score: 1, Acc: true}
			}
		}
		return out, nil
	}
	calls := 0
	metricsOf := func() map[string]float64 {
		calls++
		return map[string]float64{"judge/requests": float64(calls)}
	}
	prompts := banditPrompts(4)
	for i := range prompts {
		prompts[i].Task = "say c"
	}
	m := newTabular(banditAlphabet)
	tr, err := agentrl.NewTrainer(banditConfig(), agentrl.TrainerParts{
		Policy: m, Engine: banditEngine(t, m, 8), GroupReward: ranking, RewardMetrics: metricsOf, Prompts: prompts,
	})
	require.NoError(t, err)
	before := m.prob(tokA, tokC)
	st, err := tr.Step(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int{8, 8}, sizes, "two prompts of eight samples")
	assert.Equal(t, slices.Repeat([]string{"say c"}, 16), tasks)
	assert.Greater(t, m.prob(tokA, tokC), before, "the group reward's scores train")
	assert.Equal(t, 1.0, st.Map()["judge/requests"])

	sizes = nil
	val := tr.Validator(agentrl.ValidationConfig{Prompts: prompts[:3], N: 2})
	row, err := val(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 2, 2}, sizes, "validation groups the samples of each prompt")
	assert.Equal(t, 2.0, row["val-aux/judge/requests"])
	assert.Greater(t, len(row), 1, "the row holds the evaluation's metrics too: %v", row)

	// Overlong shaping: 4-token responses in a 4-token budget with a
	// 2-token buffer lose 1 each (see TestOverlongShaping).
	cfg := banditConfig()
	cfg.Sampling.MaxNewTokens = 4
	cfg.Overlong = &reward.OverlongConfig{Buffer: 2, Factor: 1}
	right := func(_ context.Context, g []reward.Input) ([]reward.Output, error) {
		return slices.Repeat([]reward.Output{{Score: 1, Acc: true}}, len(g)), nil
	}
	shaped, _ := newBanditParts(t, cfg, agentrl.TrainerParts{GroupReward: right}, 4)
	st, err = shaped.Step(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0.0, st.RewardMean)

	for _, tc := range []struct {
		name  string
		parts agentrl.TrainerParts
		want  string
	}{
		{"neither", agentrl.TrainerParts{}, "Reward and GroupReward are nil"},
		{"both", agentrl.TrainerParts{Reward: banditReward, GroupReward: ranking}, "Reward and GroupReward are both set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.parts
			p.Policy, p.Engine, p.Prompts = m, banditEngine(t, m, 8), banditPrompts(4)
			_, err := agentrl.NewTrainer(banditConfig(), p)
			require.ErrorIs(t, err, agentrl.ErrTrainer)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// TestValidatorOnResult: Validator hands each result to OnResult with
// the step.
func TestValidatorOnResult(t *testing.T) {
	tr, _ := newBandit(t, banditConfig(), banditReward)
	var steps []int
	val := tr.Validator(agentrl.ValidationConfig{Prompts: banditPrompts(1), N: 2, OnResult: func(step int, res eval.Result) {
		steps = append(steps, step)
		assert.NotEmpty(t, res.Metrics)
	}})
	_, err := val(context.Background(), 7)
	require.NoError(t, err)
	assert.Equal(t, []int{7}, steps)
}
