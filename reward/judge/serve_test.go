package judge

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/serve"
)

// servedJudge is package serve serving a Qwen3 of random weights (the
// shape examples/mkmodel writes by default) with Qwen3's real tokenizer:
// a real OpenAI-compatible server and a real model, whose replies are
// nonsense. serve has no chat endpoint yet, so the judge renders its
// messages with the model's chat template and calls /v1/completions.
type servedJudge struct {
	url string
	tok *tokenizer.BPE
	mu  sync.Mutex
	// prompts are the texts the judge rendered, in order.
	prompts []string
}

func newServedJudge(t *testing.T) *servedJudge {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a model")
	}
	dir := t.TempDir()
	require.NoError(t, qwen3.WriteFiles(dir))
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	cfg := policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: qwen3.VocabSize, HiddenSize: 64, IntermediateSize: 192,
		NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 16,
		MaxPositionEmbeddings: 4096, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true,
		EOSTokenIDs: []int{qwen3.IMEndID},
	}
	m, err := policy.New(cfg, 1, policy.WithDecoder(tok.Decode))
	require.NoError(t, err)
	srv, err := serve.New(serve.Config{Model: m, Encode: tok.Encode, Decode: tok.Decode})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	return &servedJudge{url: ts.URL + "/v1", tok: tok}
}

// render is Config.Render through Qwen3's chat template, recording what
// it renders.
func (s *servedJudge) render(msgs []Message) (string, error) {
	tm := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		tm[i] = tokenizer.Message{Role: m.Role, Content: m.Content}
	}
	text, err := s.tok.ApplyChatTemplate(tm, nil, tokenizer.ChatOptions{AddGenerationPrompt: true, Vars: map[string]any{"enable_thinking": false}})
	if err == nil {
		s.mu.Lock()
		s.prompts = append(s.prompts, text)
		s.mu.Unlock()
	}
	return text, err
}

// promptTokens counts the tokens of the rendered prompts with the
// tokenizer, independently of the server's usage report.
func (s *servedJudge) promptTokens() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.prompts {
		n += len(s.tok.Encode(p))
	}
	return int64(n)
}

func (s *servedJudge) config() Config {
	return Config{BaseURL: s.url, Model: serve.DefaultName, Render: s.render, MaxTokens: 12, Seed: 1}
}

// TestServeAsJudge runs the judge against package serve (one server for
// the subtests: building the model takes a while).
func TestServeAsJudge(t *testing.T) {
	s := newServedJudge(t)
	t.Run("pointwise", func(t *testing.T) { servedPointwise(t, s) })
	t.Run("ranking", func(t *testing.T) { servedRanking(t, s) })
	t.Run("another model", func(t *testing.T) { servedAnotherModel(t, s) })
}

// servedPointwise: the random model's greedy replies never hold a <score>
// tag, so every judgement is re-asked and then falls back, the same way
// on every run; the server's usage reaches the statistics.
func servedPointwise(t *testing.T, s *servedJudge) {
	j := newJudge(t, s.config())
	require.NoError(t, j.Check(context.Background()))
	j.TakeStats()
	s.mu.Lock()
	s.prompts = nil
	s.mu.Unlock()
	f, err := j.Pointwise(PointwiseConfig{Rubric: "Full marks for the right number.", Reasks: 1, Fallback: -1})
	require.NoError(t, err)
	inputs := []reward.Input{sample, sample}
	inputs[1].Response = "It is 43."
	outs, err := reward.Batch(context.Background(), f, inputs, reward.BatchOptions{})
	require.NoError(t, err)
	for _, o := range outs {
		assert.Equal(t, -1.0, o.Score)
		assert.Contains(t, o.Reason, "judge: no verdict (2 malformed replies, the last: malformed verdict: no <score>N</score> tag)")
	}
	st := j.TakeStats()
	assert.Equal(t, int64(4), st.Requests, "two responses, each asked twice")
	assert.Equal(t, int64(4), st.Malformed)
	assert.Equal(t, int64(2), st.Fallbacks)
	assert.Zero(t, st.Verdicts+st.Failures+st.Retries)
	s.mu.Lock()
	require.Len(t, s.prompts, 4)
	s.mu.Unlock()
	assert.Equal(t, s.promptTokens(), st.PromptTokens, "usage.prompt_tokens is the rendered prompts' length")
	assert.Positive(t, st.CompletionTokens)
	assert.LessOrEqual(t, st.CompletionTokens, int64(4*12))
	assert.Positive(t, st.LatencyMax)

	// Greedy decoding of the same weights: the same replies on a new judge.
	again := newJudge(t, s.config())
	g, err := again.Pointwise(PointwiseConfig{Rubric: "Full marks for the right number.", Reasks: 1, Fallback: -1})
	require.NoError(t, err)
	out, err := g(context.Background(), sample)
	require.NoError(t, err)
	assert.Equal(t, outs[0], out)
	assert.Equal(t, j.Stats().LastError, again.Stats().LastError)
}

// servedRanking: the same for a group verdict.
func servedRanking(t *testing.T, s *servedJudge) {
	j := newJudge(t, s.config())
	g, err := j.Ranking(RankingConfig{Reasks: 1, Fallback: 0.5})
	require.NoError(t, err)
	outs, err := reward.BatchGroups(context.Background(), g, group(), []string{"p", "p", "p", "p"}, reward.BatchOptions{})
	require.NoError(t, err)
	for _, o := range outs {
		assert.Equal(t, 0.5, o.Score)
		assert.Contains(t, o.Reason, "judge: no verdict on the group (2 malformed replies")
	}
	st := j.Stats()
	assert.Equal(t, int64(2), st.Requests)
	assert.Equal(t, int64(2), st.Malformed)
	assert.Equal(t, int64(4), st.Fallbacks)
}

// servedAnotherModel: a model the server does not serve is its 404, which
// no retry cures: one request, a failure, the fallback, and Check says so
// up front.
func servedAnotherModel(t *testing.T, s *servedJudge) {
	cfg := s.config()
	cfg.Model = "no-such-model"
	j := newJudge(t, cfg)
	err := j.Check(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404")
	f, err := j.Pointwise(PointwiseConfig{Rubric: "r", Fallback: -1})
	require.NoError(t, err)
	out, err := f(context.Background(), sample)
	require.NoError(t, err)
	assert.Equal(t, -1.0, out.Score)
	st := j.Stats()
	assert.Equal(t, int64(2), st.Requests)
	assert.Equal(t, int64(1), st.Failures)
	assert.Zero(t, st.Retries)
}
