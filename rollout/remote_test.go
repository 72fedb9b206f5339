package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/rollout"
)

// TestRemoteSamplerEndToEnd runs the engine against openai.Sampler and a
// server that answers /v1/completions as vLLM does: the turn is chosen by
// how many tool responses the prompt holds, and a turn stops on the
// </tool_call> stop string with that token kept. The prompts the server
// received must be the trajectory so far, token for token. The engine
// bounds the trajectories by turns only, so each turn is sent the room
// the context leaves (GET /v1/models' max_model_len, 4096, less the
// prompt so far).
func TestRemoteSamplerEndToEnd(t *testing.T) {
	turns := []string{
		"<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"n\": 1}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"n\": 2}}\n</tool_call>",
		"Done.<|im_end|>",
	}
	var mu sync.Mutex
	var prompts [][]int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model","max_model_len":4096}]}`)
			return
		}
		var body struct {
			Prompt    []int    `json:"prompt"`
			Stop      []string `json:"stop"`
			MaxTokens int      `json:"max_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if body.MaxTokens != 4096-len(body.Prompt) {
			http.Error(w, fmt.Sprintf("max_tokens %d for a prompt of %d", body.MaxTokens, len(body.Prompt)), http.StatusBadRequest)
			return
		}
		mu.Lock()
		prompts = append(prompts, body.Prompt)
		mu.Unlock()
		turn := 0
		for _, id := range body.Prompt {
			if id == toolRespOpen {
				turn++
			}
		}
		ids := enc(turns[turn])
		finish, stop := `"stop"`, `null`
		if slices.Contains(body.Stop, "</tool_call>") {
			if i := slices.Index(ids, toolCallClose); i >= 0 {
				ids, stop = ids[:i+1], `"</tool_call>"`
			}
		}
		toks, lps := make([]string, len(ids)), make([]string, len(ids))
		for i, id := range ids {
			toks[i] = fmt.Sprintf(`"token_id:%d"`, id)
			lps[i] = "-0.25"
		}
		fmt.Fprintf(w, `{"choices":[{"index":0,"text":"","logprobs":{"tokens":[%s],"token_logprobs":[%s]},"finish_reason":%s,"stop_reason":%s}]}`,
			strings.Join(toks, ","), strings.Join(lps, ","), finish, stop)
	}))
	defer srv.Close()
	s, err := openai.New(openai.Config{BaseURLs: []string{srv.URL}})
	require.NoError(t, err)
	e := newEngine(t, s, nil)
	// Temperature 1 without truncation: vLLM's raw log-probs are the
	// sampling ones, so LogProbs is filled as well as RawLogProbs.
	trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt, N: 3, Params: lm.SampleParams{Temperature: 1}}})
	require.NoError(t, err)
	want := enc(prompt + turns[0] + glue(`echo:{"n":1}`) + turns[1] + glue(`echo:{"n":2}`) + turns[2])
	for _, tr := range trajs {
		assert.Equal(t, want, tr.Tokens)
		assert.Equal(t, rollout.StopNoToolCall, tr.Stop)
		for i, m := range tr.Mask {
			if m == 1 {
				assert.Equal(t, float32(-0.25), tr.LogProbs[i])
				assert.Equal(t, float32(-0.25), tr.RawLogProbs[i])
			}
		}
	}
	require.Len(t, prompts, 9)
	for _, p := range prompts {
		assert.Equal(t, want[:len(p)], p, "every prompt is a prefix of the trajectory")
	}
	// The third turn's prompt plus its generation is the trajectory.
	last := trajs[0].Turns[2]
	assert.Equal(t, want[:last.Start], prompts[slices.IndexFunc(prompts, func(p []int) bool { return len(p) == last.Start })])
	assert.Equal(t, len(want), last.End)
}
