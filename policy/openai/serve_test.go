package openai_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/serve"
)

// The served test model: a random tiny Qwen3 over 64 ids with a 48-token
// context and no end-of-sequence token, so that greedy generation runs
// to its bound and the bound shows in the token count.
const (
	servedVocab  = 64
	servedMaxLen = 48
)

// startEngine serves the tiny model as engine plays it and returns its
// URL.
func startEngine(t *testing.T, engine serve.Engine) string {
	t.Helper()
	m, err := policy.New(policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: servedVocab, HiddenSize: 16, IntermediateSize: 32,
		NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
		MaxPositionEmbeddings: servedMaxLen, RMSNormEps: 1e-6, RopeTheta: 1e4,
		Extra: map[string]json.RawMessage{"initializer_range": json.RawMessage("0.5")},
	}, 1)
	require.NoError(t, err)
	srv, err := serve.New(serve.Config{Model: m, Engine: engine})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); _ = srv.Close() })
	return hs.URL
}

// TestUnboundedRequestReachesTheContext reproduces issue 22's first bug:
// a request with MaxNewTokens 0 ("up to the context") sent to vLLM came
// back after 16 tokens with finish_reason "length", because the Sampler
// sent max_tokens null and vLLM reads null as its default of 16. Against
// package serve playing each engine, the generation must instead fill the
// context: 48 − 8 = 40 tokens through vLLM's /v1/completions (prompt +
// max_tokens ≤ max_model_len), 48 − 8 − 1 = 39 through SGLang's /generate
// (SGLang refuses prompt + max_new_tokens ≥ context_len). A bound inside
// the room is kept (10), one beyond it is cut to the room (100 → 40 or
// 39), so that generation ends at the context, as a local model's does,
// instead of being refused.
func TestUnboundedRequestReachesTheContext(t *testing.T) {
	prompt := []int{1, 2, 3, 4, 5, 6, 7, 8}
	for _, c := range []struct {
		name   string
		engine serve.Engine
		api    openai.API
		room   int
	}{
		{"vllm", serve.EngineVLLM, openai.APICompletions, servedMaxLen - len(prompt)},
		{"sglang", serve.EngineSGLang, openai.APISGLangGenerate, servedMaxLen - len(prompt) - 1},
		{"serve's own", "", openai.APICompletions, servedMaxLen - len(prompt)},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := startEngine(t, c.engine)
			s, err := openai.New(openai.Config{BaseURLs: []string{url}, API: c.api, MaxRetries: -1})
			require.NoError(t, err)
			for _, mx := range []struct{ maxNew, want int }{{0, c.room}, {10, 10}, {100, c.room}} {
				gens, err := s.Generate(context.Background(), []lm.GenerateRequest{{Prompt: prompt, Params: lm.SampleParams{MaxNewTokens: mx.maxNew}}})
				require.NoError(t, err, "MaxNewTokens %d", mx.maxNew)
				assert.Len(t, gens[0].Tokens, mx.want, "MaxNewTokens %d", mx.maxNew)
				assert.Equal(t, lm.FinishLength, gens[0].FinishReason)
			}
		})
	}
}

// TestMaxModelLenGiven: Config.MaxModelLen replaces the server's own
// context length; a prompt that leaves no room fails before it is sent.
// With MaxModelLen 20 and an 8-token prompt, vLLM's room is 12.
func TestMaxModelLenGiven(t *testing.T) {
	url := startEngine(t, serve.EngineVLLM)
	s, err := openai.New(openai.Config{BaseURLs: []string{url}, MaxModelLen: 20, MaxRetries: -1})
	require.NoError(t, err)
	gens, err := s.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1, 2, 3, 4, 5, 6, 7, 8}}})
	require.NoError(t, err)
	assert.Len(t, gens[0].Tokens, 12)

	long := make([]int, 20)
	_, err = s.Generate(context.Background(), []lm.GenerateRequest{{Prompt: long}})
	require.ErrorIs(t, err, openai.ErrContextLength)
	assert.ErrorContains(t, err, "a prompt of 20 tokens in a context of 20")
}
