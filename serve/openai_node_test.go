package serve

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
)

// clientError is what OpenAI's Node client makes of a refusal: the
// status, the message it shows, and the error object it read.
type clientError struct {
	Status  int    `json:"status"`
	Message string `json:"message"`
	Error   struct {
		Type string `json:"type"`
	} `json:"error"`
}

// TestOpenAINodeClient drives the server with OpenAI's official Node
// client (testdata/openai_client.js; set AGENTRL_OPENAI_NODE_MODULES to a
// node_modules folder holding the npm package openai, as
// .ci/openai_node.sh does; skipped otherwise) and checks what the client
// makes of each answer: top log-probabilities for logprobs 2, 16 tokens
// without max_tokens, the model list and one model, and errors whose
// message the client shows (not "(no body)").
func TestOpenAINodeClient(t *testing.T) {
	mods := os.Getenv("AGENTRL_OPENAI_NODE_MODULES")
	if mods == "" {
		t.Skip("set AGENTRL_OPENAI_NODE_MODULES to a node_modules folder with the npm package openai")
	}
	dir := writeCheckpoint(t, 1, 16)
	prompt := []int{10, 20, 30}
	ref := reference(t, dir, lm.GenerateRequest{Prompt: prompt, Params: lm.SampleParams{MaxNewTokens: 3, Logprobs: true, TopLogprobs: 2}})[0]
	_, ts := startServer(t, dir, Config{Name: "tiny", Encode: byteEncode})
	script, err := filepath.Abs("testdata/openai_client.js")
	require.NoError(t, err)
	cmd := exec.Command("node", script, ts.URL, "tiny")
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Logf("node: %s", exit.Stderr)
	}
	require.NoError(t, err)
	var r struct {
		TopLogprobs struct {
			Choices []struct {
				Text     string `json:"text"`
				Logprobs struct {
					Tokens        []string             `json:"tokens"`
					TokenLogprobs []float64            `json:"token_logprobs"`
					TopLogprobs   []map[string]float64 `json:"top_logprobs"`
				} `json:"logprobs"`
			} `json:"choices"`
		} `json:"topLogprobs"`
		TextPrompt struct {
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		} `json:"textPrompt"`
		NoMaxTokens struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		} `json:"noMaxTokens"`
		Models []string `json:"models"`
		Model  struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"model"`
		UnknownModel, WrongModel, TooManyLogprobs, UnknownRoute clientError
	}
	require.NoError(t, json.Unmarshal(out, &r), "%s", out)

	// logprobs 2: the sampled (greedy) token and the two most likely, of
	// which it is the first.
	require.Len(t, r.TopLogprobs.Choices, 1)
	lp := r.TopLogprobs.Choices[0].Logprobs
	require.Len(t, lp.TopLogprobs, len(ref.Tokens))
	for i, id := range ref.Tokens {
		require.Len(t, ref.TopLogProbs[i], 2)
		assert.Equal(t, ref.TopLogProbs[i][0].Token, id, "greedy draws the most likely token")
		want := map[string]float64{}
		for _, c := range ref.TopLogProbs[i] {
			want[idDecode([]int{c.Token})] = float64(c.RawLogProb)
		}
		assert.Len(t, lp.TopLogprobs[i], 2, "position %d", i)
		for k, v := range want {
			assert.InDelta(t, v, lp.TopLogprobs[i][k], 1e-6, "position %d, %s", i, k)
		}
		assert.Equal(t, idDecode([]int{id}), lp.Tokens[i])
		assert.InDelta(t, float64(ref.RawLogProbs[i]), lp.TokenLogprobs[i], 1e-6)
	}
	assert.Equal(t, idDecode(ref.Tokens), r.TopLogprobs.Choices[0].Text)

	assert.Equal(t, 2, r.TextPrompt.Usage.PromptTokens, "the text prompt \"hi\", byte by byte")
	assert.Equal(t, 2, r.TextPrompt.Usage.CompletionTokens)
	assert.Equal(t, 16, r.NoMaxTokens.Usage.CompletionTokens, "OpenAI's default max_tokens")
	assert.Equal(t, "length", r.NoMaxTokens.Choices[0].FinishReason)
	assert.Equal(t, []string{"tiny"}, r.Models)
	assert.Equal(t, "tiny", r.Model.ID)
	assert.Equal(t, "model", r.Model.Object)
	assert.Equal(t, testMaxLen, r.Model.MaxModelLen)

	for _, c := range []struct {
		name   string
		got    clientError
		status int
		msg    string
	}{
		{"unknown model", r.UnknownModel, 404, "404 The model `gpt-4` does not exist."},
		{"completion naming an unknown model", r.WrongModel, 404, "404 The model `gpt-4` does not exist."},
		{"logprobs above the cap", r.TooManyLogprobs, 400, "400 Requested sample logprobs of 21, which is greater than max allowed: 20"},
		{"unknown route", r.UnknownRoute, 404, "404 Invalid URL (POST /v1/embeddings)"},
	} {
		assert.Equal(t, c.status, c.got.Status, c.name)
		assert.Equal(t, c.msg, c.got.Message, c.name)
		assert.NotEmpty(t, c.got.Error.Type, c.name)
	}
}
