package record_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
	"github.com/agentrl/agentrl/record"
)

// fixed is a sampler that always writes the same text (a tool call, then
// the end of turn), cut at max_tokens, with top log-probabilities when
// asked: any request the Recorder lets through gets an answer.
type fixed struct{ ids []int }

func (f fixed) Generate(_ context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	out := make([]lm.Generation, len(reqs))
	for i, r := range reqs {
		ids, finish := f.ids, lm.FinishStopToken
		if m := r.Params.MaxNewTokens; m > 0 && m < len(ids) {
			ids, finish = ids[:m], lm.FinishLength
		}
		g := lm.Generation{Tokens: ids, LogProbs: make([]float32, len(ids)), FinishReason: finish}
		if finish == lm.FinishStopToken {
			g.StopToken = ids[len(ids)-1]
		}
		if r.Params.TopLogprobs > 0 {
			for _, id := range ids {
				g.TopLogProbs = append(g.TopLogProbs, []lm.TokenLogProb{{Token: id}})
			}
		}
		out[i] = g
	}
	return out, nil
}

// FuzzChatRequest posts arbitrary bodies to the chat route of a
// session: every answer is a 200 (a JSON completion, or a stream ending
// in [DONE]) or a 4xx with OpenAI's error object, never a 5xx or a
// panic; the session's reward route is fuzzed with the same bodies.
func FuzzChatRequest(f *testing.F) {
	tok := qwen(f)
	ids := tok.Encode(`Sure. <tool_call>
{"name": "add", "arguments": {"a": 1, "b": 2}}
</tool_call>`)
	ids = append(ids, qwen3.IMEndID)
	rec, err := record.New(record.Config{Sampler: fixed{ids}, Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok, MaxContext: 4096})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		`{"messages": [{"role": "user", "content": "hi"}]}`,
		`{"messages": [{"role": "user", "content": "hi"}], "tools": [` + string(addTool) + `], "stream": true, "logprobs": true, "top_logprobs": 2, "n": 2}`,
		`{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "3"}], "max_tokens": 3, "stop": ["x"], "user": "u"}`,
		`{"messages": [{"role": "developer", "content": "d"}], "tool_choice": "required"}`,
		`{"reward": 1, "acc": true}`,
		`[]`, `{"messages": "x"}`, `{"n": 1e9}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, path := range []string{"/sessions/fz/v1/chat/completions", "/v1/sessions/fz/reward"} {
			w := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			rec.ServeHTTP(w, req)
			switch {
			case w.Code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream"):
				if !strings.HasSuffix(w.Body.String(), "data: [DONE]\n\n") {
					t.Fatalf("%s: the stream does not end with [DONE]: %q", path, w.Body.String())
				}
			case w.Code == http.StatusOK:
				if !json.Valid(w.Body.Bytes()) {
					t.Fatalf("%s: invalid JSON answer %q", path, w.Body.String())
				}
			case w.Code >= 400 && w.Code < 500:
				var e struct {
					Error *struct {
						Message string `json:"message"`
						Type    string `json:"type"`
					} `json:"error"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
					t.Fatalf("%s: %d without OpenAI's error object: %q", path, w.Code, w.Body.String())
				}
			default:
				t.Fatalf("%s: status %d for %q: %s", path, w.Code, body, bytes.TrimSpace(w.Body.Bytes()))
			}
		}
		rec.Take("fz") // each input starts a fresh session
	})
}
