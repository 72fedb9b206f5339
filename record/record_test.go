package record_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
	"github.com/agentrl/agentrl/record"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// chatResp is a non-streaming answer as a client reads it.
type chatResp struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
		TokenIDs     []int  `json:"token_ids"`
	} `json:"choices"`
	PromptTokenIDs []int `json:"prompt_token_ids"`
	Usage          struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// send posts body to path with headers, returning the status and body.
func send(t testing.TB, method, url, body string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// chat posts a chat request that must succeed.
func chat(t testing.TB, url string, body any, header ...string) chatResp {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	status, out := send(t, http.MethodPost, url, string(b), header...)
	require.Equal(t, http.StatusOK, status, "%s", out)
	var r chatResp
	require.NoError(t, json.Unmarshal(out, &r), "%s", out)
	return r
}

func userMsg(s string) map[string]any { return map[string]any{"role": "user", "content": s} }

// TestThinkingIsNotRenderedAgain: Qwen3's template drops an earlier
// answer's <think> block once a new user turn follows, so rendering the
// conversation again would change what the model saw; the recorder's
// prompt keeps the sampled tokens and reports the drift.
func TestThinkingIsNotRenderedAgain(t *testing.T) {
	answer := "<think>\nThe user greets me.\n</think>\n\nHello!" + imEnd
	rec, sp, ts, tok := scripted(t, answer, "Fine."+imEnd)
	msgs := []any{userMsg("Hi")}
	r1 := chat(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": msgs, "user": "u1", "return_token_ids": true})
	require.NotNil(t, r1.Choices[0].Message.Content)
	assert.Equal(t, "<think>\nThe user greets me.\n</think>\n\nHello!", *r1.Choices[0].Message.Content)
	assert.Equal(t, tok.Encode(answer), r1.Choices[0].TokenIDs)
	msgs = append(msgs, map[string]any{"role": "assistant", "content": *r1.Choices[0].Message.Content}, userMsg("How are you?"))
	r2 := chat(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": msgs, "user": "u1", "return_token_ids": true})
	assert.Equal(t, "Fine.", *r2.Choices[0].Message.Content)

	s, ok := rec.Session("u1")
	require.True(t, ok)
	require.Len(t, s.Calls, 2)
	// The template's text after the answer: the "\n" closing it, the
	// user turn, the generation prompt.
	want := slices.Concat(s.Calls[0].Prompt, tok.Encode(answer), tok.Encode("\n<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n"))
	assert.Equal(t, want, s.Calls[1].Prompt)
	assert.Equal(t, want, r2.PromptTokenIDs, "the client's prompt_token_ids")
	assert.Equal(t, sp.reqs[1].Prompt, s.Calls[1].Prompt)
	assert.True(t, s.Calls[1].Drift, "rendering again drops the <think> block")
	rendered, err := tok.ApplyChatTemplate(s.Calls[1].Messages, nil, tokenizer.ChatOptions{AddGenerationPrompt: true})
	require.NoError(t, err)
	assert.NotContains(t, rendered, "The user greets me.")
	st := rec.Stats()
	assert.Equal(t, record.Stats{Calls: 2, Reused: 1, Drifted: 1}, st)
}

// TestLengthFinishedAnswer: an answer cut by max_tokens has no
// <|im_end|>, so the template's whole closing follows its tokens.
func TestLengthFinishedAnswer(t *testing.T) {
	rec, _, ts, tok := scripted(t, "one two three four five", "ok"+imEnd)
	r1 := chat(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": []any{userMsg("Count.")}, "max_tokens": 3}, record.SessionHeader, "h")
	assert.Equal(t, "length", r1.Choices[0].FinishReason)
	msgs := []any{userMsg("Count."), map[string]any{"role": "assistant", "content": *r1.Choices[0].Message.Content}, userMsg("More.")}
	chat(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": msgs}, record.SessionHeader, "h")
	s, _ := rec.Session("h")
	require.Len(t, s.Calls, 2)
	require.Len(t, s.Calls[0].Tokens, 3)
	want := slices.Concat(s.Calls[0].Prompt, s.Calls[0].Tokens, tok.Encode("<|im_end|>\n<|im_start|>user\nMore.<|im_end|>\n<|im_start|>assistant\n"))
	assert.Equal(t, want, s.Calls[1].Prompt)
	assert.Equal(t, 0, s.Calls[1].Reused)
}

// TestRewrittenHistory: an agent that replaces its history with a
// summary sends a prompt that does not extend the first call's; Split
// makes two trajectories, Reject refuses.
func TestRewrittenHistory(t *testing.T) {
	rec, _, ts, _ := scripted(t, "A long answer."+imEnd, "Short."+imEnd, "Done."+imEnd)
	url := ts.URL + "/sessions/agent-7/v1/chat/completions"
	r1 := chat(t, url, map[string]any{"messages": []any{userMsg("Tell me everything.")}})
	msgs := []any{userMsg("Tell me everything."), map[string]any{"role": "assistant", "content": *r1.Choices[0].Message.Content}, userMsg("Go on.")}
	chat(t, url, map[string]any{"messages": msgs})
	// The agent summarises: the history is rewritten.
	chat(t, url, map[string]any{"messages": []any{map[string]any{"role": "system", "content": "Summary: a long answer, then a short one."}, userMsg("Finish.")}})

	s, ok := rec.Session("agent-7")
	require.True(t, ok)
	require.Len(t, s.Calls, 3)
	assert.Equal(t, []int{-1, 0, -1}, []int{s.Calls[0].Reused, s.Calls[1].Reused, s.Calls[2].Reused})
	trajs, err := rec.Trajectories(s, record.Split)
	require.NoError(t, err)
	require.Len(t, trajs, 2, "one rewrite")
	assert.Equal(t, record.StopRewritten, trajs[0].Stop)
	assert.Len(t, trajs[0].Turns, 2)
	assert.Equal(t, rollout.StopNoToolCall, trajs[1].Stop)
	assert.Len(t, trajs[1].Turns, 1)
	assert.Equal(t, slices.Concat(s.Calls[2].Prompt, s.Calls[2].Tokens), trajs[1].Tokens)
	assert.Equal(t, len(s.Calls[2].Prompt), trajs[1].PromptLen)

	_, err = rec.Trajectories(s, record.Reject)
	assert.ErrorIs(t, err, record.ErrRewritten)
	assert.ErrorContains(t, err, "call 2")
	_, err = rec.Trajectories(record.Session{ID: "empty"}, record.Split)
	assert.ErrorIs(t, err, record.ErrNoCalls)
}

// TestToolParsing: tool_choice "none" leaves a call in the text; a
// call the parser cannot read is content, as vLLM answers.
func TestToolParsing(t *testing.T) {
	call := "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>"
	for _, tc := range []struct {
		name, script, choice string
		calls                int
		finish, content      string
	}{
		{"auto", "Let me add.\n" + call + imEnd, "auto", 1, "tool_calls", "Let me add.\n"},
		{"none", call + imEnd, "none", 0, "stop", call},
		{"malformed", "<tool_call>\n{\"name\": \"add\", \"arguments\": [1]}\n</tool_call>" + imEnd, "auto", 0, "stop", "<tool_call>\n{\"name\": \"add\", \"arguments\": [1]}\n</tool_call>"},
		{"no call", "3" + imEnd, "auto", 0, "stop", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, ts, _ := scripted(t, tc.script)
			r := chat(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": []any{userMsg("1+2?")},
				"tools": []json.RawMessage{addTool}, "tool_choice": tc.choice})
			m := r.Choices[0].Message
			assert.Equal(t, tc.finish, r.Choices[0].FinishReason)
			require.Len(t, m.ToolCalls, tc.calls)
			require.NotNil(t, m.Content)
			assert.Equal(t, tc.content, *m.Content)
			if tc.calls == 1 {
				assert.Equal(t, "function", m.ToolCalls[0].Type)
				assert.True(t, strings.HasPrefix(m.ToolCalls[0].ID, "call_"))
				assert.Equal(t, `{"a":1,"b":2}`, m.ToolCalls[0].Function.Arguments)
			}
		})
	}
}

// TestBadRequests: every malformed or unsupported request is an OpenAI
// error object with the status and a message that says what is wrong.
func TestBadRequests(t *testing.T) {
	rec, _, ts, _ := scripted(t, "x"+imEnd)
	require.NoError(t, rec.Open("ended", record.SessionOptions{}))
	require.NoError(t, rec.SetReward("ended", reward.Output{Score: 1}))
	msgs := `[{"role": "user", "content": "hi"}]`
	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		msg                      string
	}{
		{"not JSON", "POST", "/v1/chat/completions", `nope`, nil, 400, "must be a JSON object"},
		{"no messages", "POST", "/v1/chat/completions", `{"model": "m"}`, nil, 400, "messages must be a non-empty list"},
		{"messages not a list", "POST", "/v1/chat/completions", `{"messages": "hi"}`, nil, 400, "messages: want a list"},
		{"unknown role", "POST", "/v1/chat/completions", `{"messages": [{"role": "robot", "content": "x"}]}`, nil, 400, `role "robot"`},
		{"no role", "POST", "/v1/chat/completions", `{"messages": [{"content": "x"}]}`, nil, 400, "role is required"},
		{"user without content", "POST", "/v1/chat/completions", `{"messages": [{"role": "user"}]}`, nil, 400, "content is required"},
		{"image part", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}`, nil, 400, "text only"},
		{"tool calls on a user", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}`, nil, 400, "only allowed on assistant"},
		{"bad arguments", "POST", "/v1/chat/completions", `{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": 3}}]}]}`, nil, 400, "arguments"},
		{"n 0", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "n": 0}`, nil, 400, "n must be between 1 and 128, got 0"},
		{"n 129", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "n": 129}`, nil, 400, "n must be between 1 and 128, got 129"},
		{"tool_choice required", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "tools": [` + string(addTool) + `], "tool_choice": "required"}`, nil, 400, `"required" is not supported`},
		{"named tool_choice", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "tools": [` + string(addTool) + `], "tool_choice": {"type": "function", "function": {"name": "add"}}}`, nil, 400, "named function"},
		{"auto without tools", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "tool_choice": "auto"}`, nil, 400, "needs tools"},
		{"tool without name", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "tools": [{"type": "function", "function": {}}]}`, nil, 400, "function.name is required"},
		{"tool of another type", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "tools": [{"type": "custom"}]}`, nil, 400, `type must be "function"`},
		{"temperature", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "temperature": 3}`, nil, 400, "temperature must be between 0 and 2"},
		{"top_p", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "top_p": 0}`, nil, 400, "top_p"},
		{"max_tokens 0", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "max_tokens": 0}`, nil, 400, "max_tokens must be at least 1"},
		{"max_completion_tokens", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "max_completion_tokens": -1}`, nil, 400, "max_completion_tokens must be at least 1"},
		{"top_logprobs without logprobs", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "top_logprobs": 2}`, nil, 400, "needs logprobs"},
		{"top_logprobs too many", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "logprobs": true, "top_logprobs": 21}`, nil, 400, "between 0 and 20"},
		{"stream_options without stream", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "stream_options": {"include_usage": true}}`, nil, 400, "only allowed when stream"},
		{"empty stop", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "stop": [""]}`, nil, 400, "empty string"},
		{"penalty", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "presence_penalty": 0.5}`, nil, 400, "presence_penalty is not supported"},
		{"json response format", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "response_format": {"type": "json_object"}}`, nil, 400, "response_format"},
		{"functions", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "functions": [{"name": "f"}]}`, nil, 400, "use tools"},
		{"wrong type", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "max_tokens": "many"}`, nil, 400, "max_tokens: want an integer"},
		{"bad session header", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `}`, []string{record.SessionHeader, "a b"}, 400, "bad session id"},
		{"bad session path", "POST", "/sessions/%20/v1/chat/completions", `{"messages": ` + msgs + `}`, nil, 400, "bad session id"},
		{"ended session", "POST", "/v1/chat/completions", `{"messages": ` + msgs + `, "user": "ended"}`, nil, 409, "has ended"},
		{"unknown path", "POST", "/v1/embeddings", `{}`, nil, 404, "Invalid URL (POST /v1/embeddings)"},
		{"unknown session path", "POST", "/sessions/x", `{}`, nil, 404, "Invalid URL"},
		{"wrong method", "GET", "/v1/chat/completions", ``, nil, 405, "Method Not Allowed"},
		{"reward of an unknown session", "POST", "/v1/sessions/nobody/reward", `{"reward": 1}`, nil, 404, "unknown session"},
		{"reward twice", "POST", "/v1/sessions/ended/reward", `{"reward": 1}`, nil, 409, "already has its reward"},
		{"reward missing", "POST", "/v1/sessions/ended/reward", `{"acc": true}`, nil, 400, "reward is required"},
		{"reward not a number", "POST", "/v1/sessions/ended/reward", `{"reward": "high"}`, nil, 400, "reward: want a number"},
		{"unknown session", "GET", "/v1/sessions/nobody", ``, nil, 404, "unknown session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := send(t, tc.method, ts.URL+tc.path, tc.body, tc.header...)
			assert.Equal(t, tc.status, status, "%s", body)
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &e), "%s", body)
			assert.Contains(t, e.Error.Message, tc.msg)
			assert.NotEmpty(t, e.Error.Type)
		})
	}
	assert.Equal(t, 0, rec.Stats().Calls, "no refused request was recorded")
}

// TestSessions: the session API — Open, the session from the header,
// the "user" field or the path, rewards, Take releasing the sampler's
// session, eviction, and RequireSession.
func TestSessions(t *testing.T) {
	tok := qwen(t)
	ps := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: []int{qwen3.IMEndID}})
	ps.HandleDefault(policytest.Response{Text: "ok" + imEnd}, policytest.Response{Text: "ok" + imEnd})
	rec, err := record.New(record.Config{Sampler: ps, Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok, MaxSessions: 2})
	require.NoError(t, err)
	ts := httptest.NewServer(rec)
	defer ts.Close()
	body := map[string]any{"messages": []any{userMsg("hi")}, "user": "from-user"}

	seed := uint64(100)
	require.NoError(t, rec.Open("fixed", record.SessionOptions{Params: &lm.SampleParams{Temperature: 0.5, MaxNewTokens: 9, Seed: &seed, Stop: []string{"END"}}}))
	assert.ErrorIs(t, rec.Open("fixed", record.SessionOptions{}), record.ErrSessionExists)
	assert.ErrorIs(t, rec.Open("a/b", record.SessionOptions{}), record.ErrBadSession)
	assert.ErrorIs(t, rec.Open("", record.SessionOptions{}), record.ErrBadSession)
	assert.Error(t, rec.Open("bad-params", record.SessionOptions{Params: &lm.SampleParams{Temperature: -1}}))

	// The path wins over the header, which wins over "user".
	chat(t, ts.URL+"/sessions/fixed/v1/chat/completions", map[string]any{"messages": []any{userMsg("hi")}, "max_tokens": 5, "temperature": 2, "stop": "STOP"}, record.SessionHeader, "other")
	chat(t, ts.URL+"/sessions/fixed/v1/chat/completions", map[string]any{"messages": []any{userMsg("hi")}, "max_tokens": 50})
	s, ok := rec.Session("fixed")
	require.True(t, ok)
	require.Len(t, s.Calls, 2)
	p := s.Calls[0].Params
	assert.Equal(t, 0.5, p.Temperature, "the session's parameters fix the sampling")
	assert.Equal(t, 5, p.MaxNewTokens, "the smaller max_tokens")
	assert.Equal(t, []string{"END", "STOP"}, p.Stop)
	assert.Equal(t, uint64(100), *p.Seed)
	assert.Equal(t, uint64(101), *s.Calls[1].Params.Seed, "call k samples with Seed+k")
	assert.Equal(t, 9, s.Calls[1].Params.MaxNewTokens)
	assert.True(t, s.Calls[0].Params.Logprobs, "log-probabilities are always recorded")

	chat(t, ts.URL+"/v1/chat/completions", body)
	_, ok = rec.Session("from-user")
	assert.True(t, ok)
	assert.ElementsMatch(t, []string{"fixed", "from-user"}, rec.Sessions())
	// A third session evicts the least recently used one (fixed).
	chat(t, ts.URL+"/v1/chat/completions", body, record.SessionHeader, "from-header")
	assert.ElementsMatch(t, []string{"from-user", "from-header"}, rec.Sessions())
	assert.Equal(t, 1, rec.Stats().Evicted)
	assert.Contains(t, ps.Closed(), "record/fixed", "eviction releases the sampler's session")

	status, out := send(t, http.MethodPost, ts.URL+"/v1/sessions/from-user/reward", `{"reward": 0.5, "acc": false, "reason": "half"}`)
	require.Equal(t, http.StatusOK, status, "%s", out)
	assert.JSONEq(t, `{"id": "from-user", "calls": 1, "reward": 0.5}`, string(out))
	status, out = send(t, http.MethodGet, ts.URL+"/v1/sessions/from-user", "")
	require.Equal(t, http.StatusOK, status)
	var sj struct {
		Calls []struct {
			PromptTokenIDs []int `json:"prompt_token_ids"`
			TokenIDs       []int `json:"token_ids"`
		} `json:"calls"`
		Reward struct {
			Reward float64 `json:"reward"`
			Reason string  `json:"reason"`
		} `json:"reward"`
	}
	require.NoError(t, json.Unmarshal(out, &sj))
	require.Len(t, sj.Calls, 1)
	assert.Equal(t, tok.Encode("ok"+imEnd), sj.Calls[0].TokenIDs)
	assert.Equal(t, "half", sj.Reward.Reason)

	got, ok := rec.Take("from-user")
	require.True(t, ok)
	assert.Equal(t, 0.5, got.Reward.Score)
	assert.True(t, got.Ended())
	_, ok = rec.Session("from-user")
	assert.False(t, ok)
	assert.Contains(t, ps.Closed(), "record/from-user")
	assert.ErrorIs(t, rec.SetReward("from-user", reward.Output{}), record.ErrUnknownSession)

	// Without a session a call is answered, not recorded.
	chat(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": []any{userMsg("hi")}})
	assert.Equal(t, 1, rec.Stats().Unrecorded)

	strict, err := record.New(record.Config{Sampler: ps, Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok, RequireSession: true})
	require.NoError(t, err)
	st := httptest.NewServer(strict)
	defer st.Close()
	status, out = send(t, http.MethodPost, st.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, string(out), "no session")
}

// failing is a sampler that fails, or breaks its contract.
type failing struct {
	err  error
	gens []lm.Generation
}

func (f failing) Generate(context.Context, []lm.GenerateRequest) ([]lm.Generation, error) {
	return f.gens, f.err
}

// TestSamplerFailures: a sampler's error or broken answer is a 500 (or
// 400 for invalid sampling, 503 for an unavailable sampler) and nothing
// is recorded; the context length is enforced.
func TestSamplerFailures(t *testing.T) {
	tok := qwen(t)
	for _, tc := range []struct {
		name   string
		s      lm.Sampler
		status int
		msg    string
	}{
		{"error", failing{err: errors.New("disk on fire")}, 500, "disk on fire"},
		{"sampling", failing{err: lm.ErrSampling}, 400, "sampling"},
		{"unavailable", failing{err: record.ErrUnavailable}, 503, "unavailable"},
		{"no generation", failing{}, 500, "0 generations"},
		{"log-probabilities missing", failing{gens: []lm.Generation{{Tokens: []int{1, 2}}}}, 500, "2 tokens with 0 log-probabilities"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := record.New(record.Config{Sampler: tc.s, Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok})
			require.NoError(t, err)
			ts := httptest.NewServer(rec)
			defer ts.Close()
			status, out := send(t, http.MethodPost, ts.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "user": "s"}`)
			assert.Equal(t, tc.status, status, "%s", out)
			assert.Contains(t, string(out), tc.msg)
			s, _ := rec.Session("s")
			assert.Empty(t, s.Calls)
		})
	}
	t.Run("context", func(t *testing.T) {
		ps := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode})
		ps.HandleDefault(policytest.Response{Text: "a b c d e f g h"})
		rec, err := record.New(record.Config{Sampler: ps, Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok, MaxContext: 14})
		require.NoError(t, err)
		ts := httptest.NewServer(rec)
		defer ts.Close()
		// "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" is
		// 9 tokens: 5 left.
		r := chat(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": []any{userMsg("hi")}})
		assert.Equal(t, 9, r.Usage.PromptTokens)
		assert.Equal(t, 5, r.Usage.CompletionTokens, "the room the context leaves")
		assert.Equal(t, "length", r.Choices[0].FinishReason)
		status, out := send(t, http.MethodPost, ts.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6}`)
		assert.Equal(t, http.StatusBadRequest, status)
		assert.Contains(t, string(out), "maximum context length is 14")
		status, out = send(t, http.MethodPost, ts.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "`+strings.Repeat("hi ", 10)+`"}]}`)
		assert.Equal(t, http.StatusBadRequest, status)
		assert.Contains(t, string(out), "your messages resulted in")
	})
}

// TestConfig: New refuses what it cannot work with.
func TestConfig(t *testing.T) {
	tok := qwen(t)
	ps := policytest.New(policytest.Config{})
	tpl := record.TemplateFunc(tok.ApplyChatTemplate)
	for _, tc := range []struct {
		name string
		cfg  record.Config
	}{
		{"no sampler", record.Config{Template: tpl, Tokenizer: tok}},
		{"no template", record.Config{Sampler: ps, Tokenizer: tok}},
		{"no tokenizer", record.Config{Sampler: ps, Template: tpl}},
		{"negative context", record.Config{Sampler: ps, Template: tpl, Tokenizer: tok, MaxContext: -1}},
		{"negative sessions", record.Config{Sampler: ps, Template: tpl, Tokenizer: tok, MaxSessions: -1}},
		{"logprobs mode", record.Config{Sampler: ps, Template: tpl, Tokenizer: tok, LogprobsMode: "odd"}},
		{"no end of turn", record.Config{Sampler: ps, Template: tpl, Tokenizer: idTokenizer{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := record.New(tc.cfg)
			assert.ErrorIs(t, err, record.ErrConfig)
		})
	}
}

// idTokenizer has no EOSIDs.
type idTokenizer struct{}

func (idTokenizer) Encode(s string) []int   { return []int{len(s)} }
func (idTokenizer) Decode(ids []int) string { return "" }

// TestConcurrentSessions: sessions called at once stay apart.
func TestConcurrentSessions(t *testing.T) {
	rec, _, ts, tok := scripted(t, "fine"+imEnd, "bye"+imEnd)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			id := "c" + string(rune('a'+i))
			b, _ := json.Marshal(map[string]any{"messages": []any{userMsg("hi")}, "user": id})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", bytes.NewReader(b))
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
	for i := range 8 {
		s, ok := rec.Session("c" + string(rune('a'+i)))
		require.True(t, ok)
		require.Len(t, s.Calls, 1)
		assert.Equal(t, tok.Encode("fine"+imEnd), s.Calls[0].Tokens, "each session's first scripted answer")
	}
}
