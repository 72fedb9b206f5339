package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
	"github.com/agentrl/agentrl/record"
	"github.com/agentrl/agentrl/rollout"
)

// qwenChatCheckpoint writes a random tiny Qwen3 with Qwen3's real
// vocabulary, tokenizer and chat template (as examples/mkmodel makes
// one) and returns its folder and tokenizer.
func qwenChatCheckpoint(t testing.TB, seed uint64) (string, *tokenizer.BPE) {
	t.Helper()
	dir := t.TempDir()
	cfg := policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: qwen3.VocabSize, HiddenSize: 16, IntermediateSize: 32,
		NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
		MaxPositionEmbeddings: 512, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true,
		EOSTokenIDs: []int{qwen3.IMEndID},
	}
	m, err := policy.New(cfg, seed)
	require.NoError(t, err)
	require.NoError(t, m.Save(dir, lm.SaveOptions{}))
	require.NoError(t, m.Close())
	require.NoError(t, qwen3.WriteFiles(dir))
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	return dir, tok
}

// TestChatRealModel runs a three-turn conversation from OpenAI's Go
// client through /v1/chat/completions over a random tiny Qwen3 with
// Qwen3's tokenizer and template (sampled at temperature 1 with a
// seed), and checks that each recorded call is token for token what the
// model sampled — what the server's generations returned, and what a
// fresh copy of the model samples for the recorded prompt and seed —
// and that each later prompt extends the earlier one with the sampled
// tokens themselves, whatever their text decodes to.
func TestChatRealModel(t *testing.T) {
	dir, tok := qwenChatCheckpoint(t, 3)
	var mu sync.Mutex
	var sampled []lm.Generation
	var asked []lm.GenerateRequest
	m, err := policy.Load(dir, policy.WithDecoder(tok.Decode))
	require.NoError(t, err)
	srv, ts := startServer(t, dir, Config{Model: m, Encode: tok.Encode, Decode: tok.Decode, MaxSessions: 8,
		Chat: &record.Config{Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok}})
	gen := srv.gen
	srv.gen = func(ctx context.Context, m *policy.Model, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
		gens, err := gen(ctx, m, reqs)
		if err == nil {
			mu.Lock()
			for i := range reqs {
				asked = append(asked, lm.GenerateRequest{Prompt: slices.Clone(reqs[i].Prompt), Params: reqs[i].Params})
				sampled = append(sampled, gens[i])
			}
			mu.Unlock()
		}
		return gens, err
	}

	client := openai.NewClient(option.WithBaseURL(ts.URL+"/sessions/talk/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello there.")}
	var replies []string
	for turn := range 3 {
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "gpt-4o", Messages: msgs, MaxCompletionTokens: openai.Int(6), Seed: openai.Int(int64(40 + turn)),
			Temperature: openai.Float(1), Logprobs: openai.Bool(true),
		})
		require.NoError(t, err)
		require.Len(t, resp.Choices, 1)
		assert.Equal(t, "agentrl", resp.Model, "the served name")
		replies = append(replies, resp.Choices[0].Message.Content)
		msgs = append(msgs, resp.Choices[0].Message.ToParam(), openai.UserMessage("Tell me more."))
		// The client's log-probabilities are the raw ones of the
		// sampled tokens.
		lps := resp.Choices[0].Logprobs.Content
		require.Len(t, lps, len(sampled[turn].Tokens))
		for i, lp := range lps {
			assert.InDelta(t, float64(sampled[turn].RawLogProbs[i]), lp.Logprob, 1e-6)
		}
	}

	s, ok := srv.Recorder().Session("talk")
	require.True(t, ok)
	require.Len(t, s.Calls, 3)
	require.Len(t, sampled, 3)
	ref := loadModel(t, dir)
	for i, c := range s.Calls {
		assert.Equal(t, asked[i].Prompt, c.Prompt, "call %d: the prompt the model continued", i)
		assert.Equal(t, sampled[i].Tokens, c.Tokens, "call %d: the tokens the model sampled", i)
		assert.Equal(t, sampled[i].LogProbs, c.LogProbs, "call %d", i)
		assert.Equal(t, sampled[i].RawLogProbs, c.RawLogProbs, "call %d", i)
		assert.Equal(t, "0", c.WeightVersion)
		require.NotNil(t, c.Params.Seed)
		assert.Equal(t, uint64(40+i), *c.Params.Seed)
		// A fresh copy of the model samples the same for the recorded
		// prompt and sampling parameters.
		again, err := ref.Generate(context.Background(), []lm.GenerateRequest{{Prompt: c.Prompt, Params: c.Params}})
		require.NoError(t, err)
		assert.Equal(t, c.Tokens, again[0].Tokens, "call %d regenerated", i)
		assert.Equal(t, c.LogProbs, again[0].LogProbs, "call %d regenerated", i)
		assert.Equal(t, replies[i], c.Reply.Content)
		text, err := tok.ApplyChatTemplate(c.Messages, c.Tools, tokenizer.ChatOptions{AddGenerationPrompt: true})
		require.NoError(t, err)
		assert.Equal(t, !slices.Equal(tok.Encode(text), c.Prompt), c.Drift, "call %d: drift is the rendered prompt differing", i)
		if i > 0 {
			assert.Equal(t, i-1, c.Reused, "call %d reuses the answer the client sent back", i)
			prev := slices.Concat(s.Calls[i-1].Prompt, s.Calls[i-1].Tokens)
			require.GreaterOrEqual(t, len(c.Prompt), len(prev))
			assert.Equal(t, prev, c.Prompt[:len(prev)], "call %d extends call %d token for token", i, i-1)
		}
	}
	trajs, err := srv.Recorder().Trajectories(s, record.Reject)
	require.NoError(t, err)
	require.Len(t, trajs, 1)
	assert.Equal(t, slices.Concat(s.Calls[2].Prompt, s.Calls[2].Tokens), trajs[0].Tokens)
	t.Logf("calls whose re-rendered prompt would have drifted: %d of 3", srv.Recorder().Stats().Drifted)
}

// TestChatChoices: n 3 over the real tiny model, twice in one session
// (the second call extending the first's first choice, which the
// server's prefix cache holds): each choice is recorded with its own
// seed and is what a fresh copy of the model samples for it.
func TestChatChoices(t *testing.T) {
	dir, tok := qwenChatCheckpoint(t, 5)
	m, err := policy.Load(dir, policy.WithDecoder(tok.Decode))
	require.NoError(t, err)
	srv, ts := startServer(t, dir, Config{Model: m, Encode: tok.Encode, Decode: tok.Decode, MaxSessions: 8,
		Chat: &record.Config{Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok}})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi.")}
	for turn := range 2 {
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m", Messages: msgs,
			N: openai.Int(3), Seed: openai.Int(9), MaxCompletionTokens: openai.Int(5), User: openai.String("choices")})
		require.NoError(t, err)
		require.Len(t, resp.Choices, 3, "turn %d", turn)
		msgs = append(msgs, resp.Choices[0].Message.ToParam(), openai.UserMessage("And?"))
	}
	s, ok := srv.Recorder().Session("choices")
	require.True(t, ok)
	require.Len(t, s.Calls, 6)
	ref := loadModel(t, dir)
	seeds := map[uint64]bool{}
	for i, c := range s.Calls {
		assert.Equal(t, i%3, c.Choice)
		seeds[*c.Params.Seed] = true
		again, err := ref.Generate(context.Background(), []lm.GenerateRequest{{Prompt: c.Prompt, Params: c.Params}})
		require.NoError(t, err)
		assert.Equal(t, c.Tokens, again[0].Tokens, "call %d regenerated", i)
	}
	assert.Len(t, seeds, 3, "one seed per choice, the same in both turns")
	assert.Equal(t, 0, s.Calls[3].Reused)
	trajs, err := srv.Recorder().Trajectories(s, record.Split)
	require.NoError(t, err)
	require.Len(t, trajs, 5, "the unchosen choices of the first turn and the second turn's extra choices stand alone")
	end := trajs[len(trajs)-1]
	assert.Equal(t, slices.Concat(s.Calls[3].Prompt, s.Calls[3].Tokens), end.Tokens, "the end: the chain of the first choices, the longest")
	assert.Len(t, end.Turns, 2)
	want := rollout.StopNoToolCall
	if s.Calls[3].Reply.FinishReason == "length" {
		want = rollout.StopTurnBudget
	}
	assert.Equal(t, want, end.Stop)
	for _, tr := range trajs[:len(trajs)-1] {
		assert.Equal(t, record.StopRewritten, tr.Stop)
	}
}

// TestChatNotConfigured: without Config.Chat the chat routes answer
// OpenAI's 404, and a Chat with its own Sampler is refused.
func TestChatNotConfigured(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	_, ts := startServer(t, dir, Config{})
	status, body := post(t, ts.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`)
	assert.Equal(t, http.StatusNotFound, status)
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &e))
	assert.Contains(t, e.Error.Message, "Invalid URL (POST /v1/chat/completions)")

	m := loadModel(t, dir)
	_, err := New(Config{Model: m, Chat: &record.Config{Sampler: m}})
	assert.ErrorIs(t, err, ErrConfig)
	_, err = New(Config{Model: m, Chat: &record.Config{}})
	assert.ErrorIs(t, err, ErrConfig, "no template")
}
