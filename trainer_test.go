package agentrl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
	"github.com/agentrl/agentrl/tool/tooltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bandit task of these tests: alphabet "abcd", every prompt is "a",
// the policy answers one token, and the reward is 1 for "c", 0 otherwise.
const (
	banditAlphabet = "abcd"
	tokA, tokC     = 0, 2
)

func banditReward(_ context.Context, in reward.Input) (reward.Output, error) {
	if in.Response == "c" {
		return reward.Output{Score: 1, Acc: true, Pred: in.Response}, nil
	}
	return reward.Output{Score: 0, Pred: in.Response}, nil
}

// banditConfig is GRPO-TCR on the bandit: 2 prompts × 8 samples, one
// token per response, one update per step, no weight decay, lr 0.1.
func banditConfig() agentrl.TrainerConfig {
	c := agentrl.GRPOTCR()
	c.PromptsPerStep = 2
	c.SamplesPerPrompt = 8
	c.MiniBatchSize = 0
	c.MicroBatchSize = 0
	c.Sampling = lm.SampleParams{Temperature: 1, MaxNewTokens: 1}
	c.Optimizer = policy.AdamWConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	c.Overlong = nil
	c.Seed = 7
	return c
}

// banditPrompts are n prompts "a", whose ground truth is the answer the
// bandit's reward pays for.
func banditPrompts(n int) []agentrl.Prompt {
	ps := make([]agentrl.Prompt, n)
	for i := range ps {
		ps[i] = agentrl.Prompt{ID: fmt.Sprint("p", i), Tokens: []int{tokA}, GroundTruth: "c"}
	}
	return ps
}

// newBandit wires cfg to the bandit: the tabular model, an engine with an
// 8-token response budget, f and four prompts.
func newBandit(t testing.TB, cfg agentrl.TrainerConfig, f reward.Func) (*agentrl.Trainer, *tabular) {
	t.Helper()
	return newBanditParts(t, cfg, agentrl.TrainerParts{Reward: f}, 8)
}

// newBanditParts is newBandit with the engine's response budget and the
// optional parts (registries, metrics) given; Policy, Engine and Prompts
// are filled in.
func newBanditParts(t testing.TB, cfg agentrl.TrainerConfig, parts agentrl.TrainerParts, budget int) (*agentrl.Trainer, *tabular) {
	t.Helper()
	m := newTabular(banditAlphabet)
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: budget})
	require.NoError(t, err)
	parts.Policy, parts.Engine, parts.Prompts = m, eng, banditPrompts(4)
	tr, err := agentrl.NewTrainer(cfg, parts)
	require.NoError(t, err)
	return tr, m
}

// TestTabularGradients checks the test model's closed-form backward
// against central finite differences of L = Σ c·logp + Σ e·H.
func TestTabularGradients(t *testing.T) {
	m := newTabular("abc")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range m.w {
		m.w[i] = float32(rng.NormFloat64())
	}
	seqs := [][]int{{0, 1, 2, 2, 0}, {2, 1}}
	cl := [][]float32{{0, 0.5, -1, 2, 0.3}, {0, -0.7}}
	ce := [][]float32{{0, 0.2, 0.1, -0.4, 1}, {0, 0.9}}
	batch := lm.TokenBatch{Tokens: seqs, Temperature: 0.7}
	objective := func() float64 {
		st, _, err := m.Forward(context.Background(), batch, false)
		require.NoError(t, err)
		s := 0.0
		for b := range seqs {
			for i := range seqs[b] {
				s += float64(cl[b][i])*float64(st.LogProbs[b][i]) + float64(ce[b][i])*float64(st.Entropy[b][i])
			}
		}
		return s
	}
	_, back, err := m.Forward(context.Background(), batch, true)
	require.NoError(t, err)
	require.NoError(t, back(context.Background(), cl, ce))
	const h = 1e-2
	for i := range m.w {
		w0 := m.w[i]
		m.w[i] = w0 + h
		up := objective()
		m.w[i] = w0 - h
		down := objective()
		m.w[i] = w0
		assert.InDelta(t, (up-down)/(2*h), float64(m.g[i]), 2e-3, "table[%d]", i)
	}
}

// TestGRPOStepRaisesTargetProbability trains the bandit. Derivation of the
// first step: the table starts at 0, so p(·|a) is uniform (1/4) and the
// old log-probs equal the new ones (ratio 1, nothing clipped). With
// token-mean over N one-token responses, dL/dlogp_i = −A_i/N, and
// ∂logp_i/∂z_k = δ(k,tok_i) − 1/4, so dL/dz_k = −(1/N)Σ_{i:tok_i=k} A_i +
// (1/4N)Σ_i A_i, where the last sum is 0 because GRPO advantages are
// centred per group. Correct answers have A > 0 and wrong ones A < 0, so
// the gradient of z_c is negative, that of every other sampled token
// positive, and unsampled tokens get 0. AdamW's first update is
// lr·g/(|g|+ε) ≈ lr·sign(g) (gradient clipping rescales g, which does
// not change its sign), so z_c = +lr and every other z_k ∈ {−lr, 0}:
// p(c|a) ≥ e^lr/(e^lr + 3) after step 1, with equality only if no wrong
// token was sampled — and 2 groups × 8 samples at p = 1/4 sample some.
func TestGRPOStepRaisesTargetProbability(t *testing.T) {
	ctx := context.Background()
	tr, m := newBandit(t, banditConfig(), banditReward)
	require.InDelta(t, 0.25, m.prob(tokA, tokC), 1e-12)

	m1, err := tr.Step(ctx)
	require.NoError(t, err)
	lr := 0.1
	bound := math.Exp(lr) / (math.Exp(lr) + 3)
	p1 := m.prob(tokA, tokC)
	assert.Greater(t, p1, bound, "p(c|a) after one step")
	// z_c moved by lr (to float32 rounding and Adam's ε).
	assert.InDelta(t, lr, float64(m.w[tokA*4+tokC]), 1e-6)
	assert.Equal(t, 1, m1.Updates)
	assert.Equal(t, 16, m1.Trajectories)
	assert.InDelta(t, 0.1, m1.LR, 1e-12)
	assert.Zero(t, m1.PGClipFrac, "first update compares the policy with itself")
	assert.InDelta(t, m1.Acc, m1.RewardMean, 1e-12, "reward is 1 exactly when correct")
	assert.InDelta(t, 1, m1.ResponseLenMean, 0)
	assert.Equal(t, 1.0, m1.OverlongFrac, "every response is cut by its 1-token turn budget")
	// The entropy reported is that of the uniform distribution, ln 4.
	assert.InDelta(t, math.Log(4), m1.Entropy, 1e-5)

	prev := p1
	for range 9 {
		_, err := tr.Step(ctx)
		require.NoError(t, err)
	}
	p10 := m.prob(tokA, tokC)
	assert.Greater(t, p10, prev, "p(c|a) keeps rising")
	assert.Greater(t, p10, 0.6, "ten steps of lr 0.1 move p(c|a) well past its start")
	assert.Equal(t, 10, tr.StepsDone())
}

// TestGradientAccumulation: with one-token responses the token-mean of a
// micro-batch times its share of the mini-batch sums to the token-mean of
// the mini-batch, so accumulating 4 micro-batches gives the same update
// as one pass over the 16 trajectories (to float32 rounding).
func TestGradientAccumulation(t *testing.T) {
	ctx := context.Background()
	full, mf := newBandit(t, banditConfig(), banditReward)
	cfg := banditConfig()
	cfg.MicroBatchSize = 4
	acc, ma := newBandit(t, cfg, banditReward)
	for range 3 {
		a, err := full.Step(ctx)
		require.NoError(t, err)
		b, err := acc.Step(ctx)
		require.NoError(t, err)
		assert.InDelta(t, a.GradNorm, b.GradNorm, 1e-6)
	}
	assert.InDeltaSlice(t, toF64(mf.w), toF64(ma.w), 1e-5)
}

// TestMiniBatchesAndEpochs: two mini-batches and two epochs make four
// updates per step, and after the first update the ratio moves away from 1
// (ppo_kl becomes non-zero).
func TestMiniBatchesAndEpochs(t *testing.T) {
	cfg := banditConfig()
	cfg.MiniBatchSize = 8
	cfg.PPOEpochs = 2
	cfg.ShuffleMiniBatches = true
	tr, m := newBandit(t, cfg, banditReward)
	st, err := tr.Step(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 4, st.Updates)
	assert.Equal(t, int64(4), tr.Optimizer().Steps())
	assert.NotZero(t, st.PPOKL)
	assert.Greater(t, m.prob(tokA, tokC), 0.25)
}

func toF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestResumeEquivalence: stopping after two steps and resuming from the
// checkpoint gives bit for bit the same third step as running on.
func TestResumeEquivalence(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"grpo-tcr", "dapo"} {
		t.Run(name, func(t *testing.T) {
			cfg := banditConfig()
			if name == "dapo" {
				cfg = agentrl.DAPO()
				base := banditConfig()
				cfg.PromptsPerStep, cfg.SamplesPerPrompt = base.PromptsPerStep, base.SamplesPerPrompt
				cfg.MiniBatchSize, cfg.MicroBatchSize = 8, 4
				cfg.Sampling, cfg.Optimizer, cfg.Seed = base.Sampling, base.Optimizer, base.Seed
				cfg.Optimizer.Schedule = policy.CosineSchedule{WarmupSteps: 1, TotalSteps: 20}
				cfg.Overlong.Buffer = 4
			}
			root := checkpoint.Root{Dir: filepath.Join(t.TempDir(), "ckpt")}

			a, ma := newBandit(t, cfg, banditReward)
			for range 2 {
				_, err := a.Step(ctx)
				require.NoError(t, err)
			}
			dir, err := a.SaveCheckpoint(ctx, root, 2)
			require.NoError(t, err)
			assert.Equal(t, "step-2", filepath.Base(dir))
			want, err := a.Step(ctx)
			require.NoError(t, err)

			b, mb := newBandit(t, cfg, banditReward)
			ok, err := b.Resume(root)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, 2, b.StepsDone())
			got, err := b.Step(ctx)
			require.NoError(t, err)

			assert.Equal(t, want.Step, got.Step)
			assert.Equal(t, want.Loss, got.Loss)
			assert.Equal(t, want.RewardMean, got.RewardMean)
			assert.Equal(t, want.GradNorm, got.GradNorm)
			assert.Equal(t, want.LR, got.LR)
			assert.Equal(t, want.LossMetrics, got.LossMetrics)
			assert.Equal(t, ma.w, mb.w, "parameters bit for bit")
			assert.Equal(t, a.Optimizer().Steps(), b.Optimizer().Steps())
		})
	}
}

func TestResumeWithoutCheckpoint(t *testing.T) {
	tr, _ := newBandit(t, banditConfig(), banditReward)
	ok, err := tr.Resume(checkpoint.Root{Dir: t.TempDir()})
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestLoadCheckpointMismatch(t *testing.T) {
	ctx := context.Background()
	a, _ := newBandit(t, banditConfig(), banditReward)
	_, err := a.Step(ctx)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, a.SaveTo(dir))

	cfg := banditConfig()
	cfg.Seed = 8
	b, _ := newBandit(t, cfg, banditReward)
	err = b.LoadFrom(dir)
	require.ErrorIs(t, err, agentrl.ErrCheckpoint)
	assert.Contains(t, err.Error(), "seed")

	// A policy with another vocabulary has a table of another size.
	m := newTabular("abcde")
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{"abcde"}, MaxResponseTokens: 8})
	require.NoError(t, err)
	c, err := agentrl.NewTrainer(banditConfig(), agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4)})
	require.NoError(t, err)
	err = c.LoadFrom(dir)
	require.ErrorIs(t, err, agentrl.ErrCheckpoint)
	assert.Contains(t, err.Error(), `"table"`)
}

// TestDynamicSampling: with a reward every sample gets, every group has
// zero variance and dynamic sampling gives up after MaxGenBatches.
func TestDynamicSampling(t *testing.T) {
	ctx := context.Background()
	cfg := banditConfig()
	cfg.DynamicSampling = &agentrl.DynamicSamplingConfig{MaxGenBatches: 2}
	constant := func(context.Context, reward.Input) (reward.Output, error) {
		return reward.Output{Score: 1, Acc: true}, nil
	}
	tr, _ := newBandit(t, cfg, constant)
	_, err := tr.Step(ctx)
	require.ErrorIs(t, err, dataset.ErrTooManyGenBatches)

	tr, _ = newBandit(t, cfg, banditReward)
	st, err := tr.Step(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, st.KeptGroups)
	assert.GreaterOrEqual(t, st.GenBatches, 1)
	assert.Equal(t, 16, st.Trajectories)
}

// TestOverlongShaping: with the engine's 4-token budget and a 2-token
// buffer, a response of L tokens loses (L − 2)/2 (DAPO), so 4-token
// responses score 1 − 1 = 0 when right and −1 when wrong. The budget
// reaches the penalty from the engine alone.
func TestOverlongShaping(t *testing.T) {
	cfg := banditConfig()
	cfg.Sampling.MaxNewTokens = 4
	cfg.Overlong = &reward.OverlongConfig{Buffer: 2, Factor: 1}
	alwaysRight := func(context.Context, reward.Input) (reward.Output, error) {
		return reward.Output{Score: 1, Acc: true}, nil
	}
	tr, _ := newBanditParts(t, cfg, agentrl.TrainerParts{Reward: alwaysRight}, 4)
	st, err := tr.Step(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 4.0, st.ResponseLenMean)
	assert.Equal(t, 0.0, st.RewardMean)
	assert.Equal(t, 1.0, st.Acc)
}

// TestToolMetricsAndLog runs a scripted tool-using policy: every
// trajectory calls the echo tool once, then a missing tool once, then
// answers; the tabular model (over bytes) is the trainable policy.
func TestToolMetricsAndLog(t *testing.T) {
	ctx := context.Background()
	tok := alphaTokenizer{byteAlphabet()}
	s := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode})
	s.HandleDefault(
		policytest.Text(`<tool_call>{"name": "echo", "arguments": {"x": 1}}</tool_call>`),
		policytest.Text(`<tool_call>{"name": "nope", "arguments": {}}</tool_call>`),
		policytest.Response{Text: `the answer is \boxed{2}`, Finish: lm.FinishStopToken},
	)
	eng, err := rollout.NewEngine(rollout.Config{
		Sampler: s, Tokenizer: tok, Tools: []tool.Tool{tooltest.Echo("echo")}, MaxTurns: 4, MaxResponseTokens: 4096,
	})
	require.NoError(t, err)
	m := newTabular(byteAlphabet())
	math, err := reward.MathFunc(reward.DefaultMathConfig())
	require.NoError(t, err)
	var log bytes.Buffer
	cfg := banditConfig()
	cfg.Sampling = lm.SampleParams{Temperature: 1}
	cfg.OldLogProbs = agentrl.OldLogProbsRollout
	prompts := []agentrl.Prompt{{ID: "q1", Text: "1+1=", GroundTruth: "2"}, {ID: "q2", Text: "3-1=", GroundTruth: "2"}}
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: math, Prompts: prompts, Metrics: metrics.NewLogger(&log)})
	require.NoError(t, err)
	st, err := tr.Step(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2.0, st.ToolCallsMean)
	assert.Equal(t, 16, st.ToolErrors, "the call of the unknown tool fails in each of 16 trajectories")
	assert.Equal(t, 1.0, st.Acc)
	assert.Equal(t, 1.0, st.RewardMean)
	assert.Zero(t, st.OverlongFrac)
	// Every reward is equal, so every advantage and gradient is 0.
	assert.Zero(t, st.GradNorm)

	rows, err := metrics.Read(&log)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, 1, rows[0].Step)
	assert.Equal(t, 2.0, rows[0].Values["tool_call_counts/mean"])
	assert.Equal(t, 1.0, rows[0].Values["critic/acc/mean"])
}

// TestNewTrainerErrors: missing or inconsistent parts are errors naming
// the part.
func TestNewTrainerErrors(t *testing.T) {
	m := newTabular(banditAlphabet)
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	good := agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4)}
	cases := []struct {
		name string
		edit func(*agentrl.TrainerConfig, *agentrl.TrainerParts)
		want string
	}{
		{"no policy", func(_ *agentrl.TrainerConfig, p *agentrl.TrainerParts) { p.Policy = nil }, "Policy"},
		{"no engine", func(_ *agentrl.TrainerConfig, p *agentrl.TrainerParts) { p.Engine = nil }, "Engine"},
		{"no reward", func(_ *agentrl.TrainerConfig, p *agentrl.TrainerParts) { p.Reward = nil }, "Reward"},
		{"no prompts", func(_ *agentrl.TrainerConfig, p *agentrl.TrainerParts) { p.Prompts = nil }, "Prompts"},
		{"too few prompts", func(_ *agentrl.TrainerConfig, p *agentrl.TrainerParts) { p.Prompts = p.Prompts[:1] }, "PromptsPerStep"},
		{"kl without reference", func(c *agentrl.TrainerConfig, _ *agentrl.TrainerParts) { c.Loss.KLCoef = 0.01 }, "Reference"},
		{"two prompt forms", func(_ *agentrl.TrainerConfig, p *agentrl.TrainerParts) {
			p.Prompts = banditPrompts(4)
			p.Prompts[2].Text = "a"
		}, "Prompts[2]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, parts := banditConfig(), good
			c.edit(&cfg, &parts)
			_, err := agentrl.NewTrainer(cfg, parts)
			require.ErrorIs(t, err, agentrl.ErrTrainer)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// TestKLWithReference: a reference equal to the starting policy gives KL
// 0 on the first micro-batch, and the loss adds KLCoef·kl afterwards.
func TestKLWithReference(t *testing.T) {
	cfg := banditConfig()
	cfg.Loss.KLCoef = 0.5
	cfg.Loss.KLType = "k3"
	m := newTabular(banditAlphabet)
	ref := newTabular(banditAlphabet)
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Reference: ref, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4)})
	require.NoError(t, err)
	st, err := tr.Step(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st.KL)
	st, err = tr.Step(context.Background())
	require.NoError(t, err)
	assert.Greater(t, st.KL, 0.0, "the policy has moved away from the reference")
	assert.Equal(t, make([]float32, 16), ref.w, "the reference is never updated")
}

func TestTrainerErrorsFromParts(t *testing.T) {
	ctx := context.Background()
	failing := func(context.Context, reward.Input) (reward.Output, error) {
		return reward.Output{}, errors.New("verifier down")
	}
	tr, _ := newBandit(t, banditConfig(), failing)
	_, err := tr.Step(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "verifier down")
	assert.Zero(t, tr.StepsDone())

	nan := func(context.Context, reward.Input) (reward.Output, error) {
		return reward.Output{Score: math.NaN()}, nil
	}
	tr, _ = newBandit(t, banditConfig(), nan)
	_, err = tr.Step(ctx)
	require.ErrorIs(t, err, agentrl.ErrTrainer)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	tr, _ = newBandit(t, banditConfig(), banditReward)
	_, err = tr.Step(cctx)
	require.ErrorIs(t, err, context.Canceled)
}

// BenchmarkTrainerStep is one GRPO-TCR step of the bandit (16 one-token
// trajectories): the trainer's orchestration with a model of negligible
// cost.
func BenchmarkTrainerStep(b *testing.B) {
	tr, _ := newBandit(b, banditConfig(), banditReward)
	for b.Loop() {
		if _, err := tr.Step(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOldLogProbSources: the tabular sampler reports exactly the
// log-probabilities the trainable recomputes (same table, temperature 1),
// so taking the old policy from the rollout, or recomputing it and
// weighting by TIS (whose ratio exp(old − rollout) is then 1), gives the
// update of the default recompute path.
func TestOldLogProbSources(t *testing.T) {
	ctx := context.Background()
	ref, mr := newBandit(t, banditConfig(), banditReward)
	_, err := ref.Step(ctx)
	require.NoError(t, err)

	cfg := banditConfig()
	cfg.OldLogProbs = agentrl.OldLogProbsRollout
	a, ma := newBandit(t, cfg, banditReward)
	_, err = a.Step(ctx)
	require.NoError(t, err)
	assert.InDeltaSlice(t, toF64(mr.w), toF64(ma.w), 1e-6)

	cfg = banditConfig()
	cfg.Loss.TISCap = 2
	b, mb := newBandit(t, cfg, banditReward)
	st, err := b.Step(ctx)
	require.NoError(t, err)
	assert.InDelta(t, 1, st.LossMetrics["tis_imp_ratio_mean"], 1e-6)
	assert.InDeltaSlice(t, toF64(mr.w), toF64(mb.w), 1e-6)
}

// TestRolloutErrorNamedOnce: a failed rollout says "rollout" once, as
// the stage it failed in: the engine's own errors carry the word, a
// context's error gets it from the trainer.
func TestRolloutErrorNamedOnce(t *testing.T) {
	tok := alphaTokenizer{byteAlphabet()}
	for _, c := range []struct {
		name   string
		cancel bool
		want   string
	}{
		{"sampler fails", false, `agentrl: step 1: rollout: request 0 ("s0/g0/p0") sample 0: turn 0: generate: policytest: request 0: server down`},
		{"context ends", true, "agentrl: step 1: rollout: context canceled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode})
			s.HandleDefault(policytest.Error(errors.New("server down")))
			eng, err := rollout.NewEngine(rollout.Config{Sampler: s, Tokenizer: tok, MaxTurns: 1, MaxResponseTokens: 16, MaxConcurrent: 1})
			require.NoError(t, err)
			cfg := banditConfig()
			cfg.PromptsPerStep = 1
			tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: newTabular(byteAlphabet()), Engine: eng, Reward: banditReward,
				Prompts: []agentrl.Prompt{{ID: "q1", Text: "1+1=", GroundTruth: "2"}}})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			if c.cancel {
				cancel()
			}
			defer cancel()
			_, err = tr.Step(ctx)
			require.EqualError(t, err, c.want)
			assert.Equal(t, c.cancel, errors.Is(err, context.Canceled))
		})
	}
}
