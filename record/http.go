package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/agentrl/agentrl/internal/httpjson"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/reward"
)

// SessionHeader is the request header that names a call's session.
const SessionHeader = "X-Session-Id"

// minLogprob is where vLLM clamps returned log-probabilities.
const minLogprob = -9999.0

// ServeHTTP serves the Recorder's routes (see the package
// documentation). Errors are OpenAI's error object {"error": {"message",
// "type", "param", "code"}}, which OpenAI's clients show.
func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	path := req.URL.Path
	session := ""
	if rest, ok := strings.CutPrefix(path, "/sessions/"); ok {
		id, tail, found := strings.Cut(rest, "/")
		if !found || id == "" {
			r.notFound(w, req)
			return
		}
		session, path = id, "/"+tail
		if err := checkSessionID(session); err != nil {
			writeError(w, badRequest("", "%v", err))
			return
		}
	}
	switch {
	case path == "/v1/chat/completions":
		if allow(w, req, http.MethodPost) {
			r.handleChat(w, req, session)
		}
	case path == "/v1/models":
		if allow(w, req, http.MethodGet) {
			r.handleModels(w)
		}
	case session == "" && strings.HasPrefix(path, "/v1/sessions/"):
		id, tail, _ := strings.Cut(strings.TrimPrefix(path, "/v1/sessions/"), "/")
		switch tail {
		case "":
			if allow(w, req, http.MethodGet) {
				r.handleSession(w, id)
			}
		case "reward":
			if allow(w, req, http.MethodPost) {
				r.handleReward(w, req, id)
			}
		default:
			r.notFound(w, req)
		}
	default:
		r.notFound(w, req)
	}
}

// notFound is OpenAI's 404 for an unknown path.
func (r *Recorder) notFound(w http.ResponseWriter, req *http.Request) {
	writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error",
		Message: fmt.Sprintf("Invalid URL (%s %s)", req.Method, req.URL.Path)})
}

// allow answers 405 unless req's method is method.
func allow(w http.ResponseWriter, req *http.Request, method string) bool {
	if req.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
		Message: fmt.Sprintf("Method Not Allowed (%s %s; allowed: %s)", req.Method, req.URL.Path, method)})
	return false
}

// writeError writes OpenAI's error object.
func writeError(w http.ResponseWriter, e *apiError) {
	var param *string
	if e.Param != "" {
		param = &e.Param
	}
	writeJSON(w, e.Status, map[string]any{"error": map[string]any{
		"message": e.Message, "type": e.Type, "param": param, "code": nil,
	}})
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	httpjson.WriteJSON(w, status, v, func(error) []byte {
		return []byte(`{"error": {"message": "encoding the answer failed", "type": "server_error", "param": null, "code": null}}`)
	})
}

// readBody reads a request body of at most maxBodyBytes.
func readBody(w http.ResponseWriter, req *http.Request) ([]byte, bool) {
	body, aerr := httpjson.ReadBody(w, req, maxBodyBytes, "invalid_request_error", "the request body is larger than %d bytes")
	if aerr != nil {
		writeError(w, aerr)
		return nil, false
	}
	return body, true
}

// handleChat serves POST /v1/chat/completions. The session is the
// path's, else the X-Session-Id header's, else the request's "user".
func (r *Recorder) handleChat(w http.ResponseWriter, req *http.Request, session string) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	p, aerr := decodeChat(body)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if session == "" {
		session = req.Header.Get(SessionHeader)
	}
	if session == "" {
		session = p.user
	}
	c, aerr := r.complete(req.Context(), session, p)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	model := r.cfg.Name
	if model == "" {
		model = p.model
	}
	ans := answer{id: "chatcmpl-" + randomHex(16), created: time.Now().Unix(), model: model, c: c, p: p}
	if p.stream {
		r.writeStream(w, ans)
		return
	}
	writeJSON(w, http.StatusOK, r.chatCompletion(ans))
}

// answer is what the response to one call is made of.
type answer struct {
	id      string
	created int64
	model   string
	c       *completion
	p       *chatPlan
}

// The response bodies, in OpenAI's shape (openai-python's
// types/chat/chat_completion.py and chat_completion_chunk.py), with
// vLLM's return_token_ids extension.
type (
	chatCompletion struct {
		ID                string       `json:"id"`
		Object            string       `json:"object"`
		Created           int64        `json:"created"`
		Model             string       `json:"model"`
		Choices           []chatChoice `json:"choices"`
		Usage             *chatUsage   `json:"usage"`
		SystemFingerprint *string      `json:"system_fingerprint"`
		PromptTokenIDs    []int        `json:"prompt_token_ids,omitempty"`
	}
	chatChoice struct {
		Index        int           `json:"index"`
		Message      outMessage    `json:"message"`
		Logprobs     *chatLogprobs `json:"logprobs"`
		FinishReason string        `json:"finish_reason"`
		TokenIDs     []int         `json:"token_ids,omitempty"`
	}
	outMessage struct {
		Role      string        `json:"role"`
		Content   *string       `json:"content"`
		Refusal   *string       `json:"refusal"`
		ToolCalls []outToolCall `json:"tool_calls,omitempty"`
	}
	outToolCall struct {
		Index    *int        `json:"index,omitempty"` // in stream deltas
		ID       string      `json:"id,omitempty"`
		Type     string      `json:"type,omitempty"`
		Function outFunction `json:"function"`
	}
	outFunction struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
	chatLogprobs struct {
		Content []tokenLogprob `json:"content"`
		Refusal []tokenLogprob `json:"refusal"`
	}
	tokenLogprob struct {
		Token       string       `json:"token"`
		Logprob     float64      `json:"logprob"`
		Bytes       []int        `json:"bytes"`
		TopLogprobs []topLogprob `json:"top_logprobs"`
	}
	topLogprob struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	}
	chatUsage struct {
		PromptTokens        int           `json:"prompt_tokens"`
		CompletionTokens    int           `json:"completion_tokens"`
		TotalTokens         int           `json:"total_tokens"`
		PromptTokensDetails promptDetails `json:"prompt_tokens_details"`
	}
	promptDetails struct {
		CachedTokens int `json:"cached_tokens"`
	}
	chatChunk struct {
		ID                string        `json:"id"`
		Object            string        `json:"object"`
		Created           int64         `json:"created"`
		Model             string        `json:"model"`
		Choices           []chunkChoice `json:"choices"`
		SystemFingerprint *string       `json:"system_fingerprint"`
		Usage             *chatUsage    `json:"usage,omitempty"`
		PromptTokenIDs    []int         `json:"prompt_token_ids,omitempty"`
	}
	chunkChoice struct {
		Index        int           `json:"index"`
		Delta        chunkDelta    `json:"delta"`
		Logprobs     *chatLogprobs `json:"logprobs"`
		FinishReason *string       `json:"finish_reason"`
		TokenIDs     []int         `json:"token_ids,omitempty"`
	}
	chunkDelta struct {
		Role      string        `json:"role,omitempty"`
		Content   *string       `json:"content,omitempty"`
		ToolCalls []outToolCall `json:"tool_calls,omitempty"`
	}
)

// usage counts the call's tokens: the prompt once, the tokens of
// every choice.
func (c *completion) usage() *chatUsage {
	n := 0
	for _, ch := range c.choices {
		n += len(ch.gen.Tokens)
	}
	return &chatUsage{
		PromptTokens: len(c.prompt), CompletionTokens: n, TotalTokens: len(c.prompt) + n,
		PromptTokensDetails: promptDetails{CachedTokens: c.choices[0].gen.CachedTokens},
	}
}

// chatCompletion is the non-streaming answer.
func (r *Recorder) chatCompletion(a answer) chatCompletion {
	out := chatCompletion{ID: a.id, Object: "chat.completion", Created: a.created, Model: a.model, Usage: a.c.usage()}
	for i, c := range a.c.choices {
		rp := c.reply
		msg := outMessage{Role: "assistant"}
		if !rp.Null {
			content := rp.Content
			msg.Content = &content
		}
		for _, tc := range rp.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, outToolCall{ID: tc.ID, Type: "function",
				Function: outFunction{Name: tc.Name, Arguments: argumentsString(tc.Arguments)}})
		}
		ch := chatChoice{Index: i, Message: msg, FinishReason: rp.FinishReason}
		if a.p.logprobs {
			ch.Logprobs = &chatLogprobs{Content: r.tokenLogprobs(c.gen, 0, len(c.gen.Tokens)), Refusal: nil}
		}
		if a.p.returnTokenIDs {
			ch.TokenIDs = c.gen.Tokens
		}
		out.Choices = append(out.Choices, ch)
	}
	if a.p.returnTokenIDs {
		out.PromptTokenIDs = a.c.prompt
	}
	return out
}

// tokenLogprobs are OpenAI's logprobs entries of tokens [from, to).
func (r *Recorder) tokenLogprobs(g lm.Generation, from, to int) []tokenLogprob {
	lps := g.RawLogProbs
	if r.processed || lps == nil {
		lps = g.LogProbs
	}
	out := make([]tokenLogprob, 0, to-from)
	for i := from; i < to; i++ {
		text, bs := r.tokenText(g.Tokens[i])
		e := tokenLogprob{Token: text, Logprob: clampLogprob(lps[i]), Bytes: bs, TopLogprobs: []topLogprob{}}
		if g.TopLogProbs != nil {
			for _, c := range g.TopLogProbs[i] {
				v := c.RawLogProb
				if r.processed {
					v = c.LogProb
				}
				t, b := r.tokenText(c.Token)
				e.TopLogprobs = append(e.TopLogprobs, topLogprob{Token: t, Logprob: clampLogprob(v), Bytes: b})
			}
		}
		out = append(out, e)
	}
	return out
}

func clampLogprob(v float32) float64 { return math.Max(float64(v), minLogprob) }

// tokenText is a token's text and its bytes, as OpenAI gives them: the
// tokenizer's bytes of the token when it has TokenBytes (a part of a
// multi-byte character among them), its decoded text otherwise.
func (r *Recorder) tokenText(id int) (string, []int) {
	var raw []byte
	if tb, ok := r.cfg.Tokenizer.(interface{ TokenBytes(int) ([]byte, bool) }); ok {
		raw, _ = tb.TokenBytes(id)
	} else {
		raw = []byte(r.cfg.Tokenizer.Decode([]int{id}))
	}
	bs := make([]int, len(raw))
	for i, b := range raw {
		bs[i] = int(b)
	}
	return strings.ToValidUTF8(string(raw), "\uFFFD"), bs
}

// writeStream writes the answer as OpenAI's server-sent events, for
// each choice in turn (each chunk names its choice's index): a chunk
// naming the role, the content token by token (each token's
// log-probability with it when asked), each tool call (its id and
// name, then its arguments), a chunk with the finish reason (and the
// log-probabilities of the tokens after the content: the tool calls'
// and the stop token's); then the usage when
// stream_options.include_usage, and "data: [DONE]". The chunks are
// written once generation has ended: samplers return whole
// generations.
func (r *Recorder) writeStream(w http.ResponseWriter, a answer) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		buf.WriteString("data: ")
		buf.Write(b)
		buf.WriteString("\n\n")
		_, _ = w.Write(buf.Bytes())
		if flusher != nil {
			flusher.Flush()
		}
	}
	for i := range a.c.choices {
		r.streamChoice(send, a, i)
	}
	if a.p.includeUsage {
		u := chatChunk{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model,
			Choices: []chunkChoice{}, Usage: a.c.usage()}
		send(u)
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// streamChoice sends the chunks of choice i.
func (r *Recorder) streamChoice(send func(any), a answer, i int) {
	chunk := func(c chunkChoice) chatChunk {
		c.Index = i
		return chatChunk{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model, Choices: []chunkChoice{c}}
	}
	g, rp := a.c.choices[i].gen, a.c.choices[i].reply
	empty := ""
	first := chunk(chunkChoice{Delta: chunkDelta{Role: "assistant", Content: &empty}})
	if a.p.returnTokenIDs && i == 0 {
		first.PromptTokenIDs = a.c.prompt
	}
	send(first)

	// The content, token by token: it is a prefix of the decoded text.
	ts := lm.NewTextStream(r.cfg.Tokenizer.Decode, a.c.prompt)
	sent, done := 0, 0
	for k := 0; k < len(g.Tokens) && sent < len(rp.Content); k++ {
		piece := ts.Push(g.Tokens[k])
		if sent+len(piece) > len(rp.Content) {
			piece = rp.Content[sent:]
		}
		c := chunkChoice{Delta: chunkDelta{Content: &piece}}
		if a.p.logprobs {
			c.Logprobs = &chatLogprobs{Content: r.tokenLogprobs(g, k, k+1)}
		}
		if piece != "" || a.p.logprobs {
			send(chunk(c))
		}
		sent += len(piece)
		done = k + 1
	}
	if sent < len(rp.Content) {
		rest := rp.Content[sent:]
		send(chunk(chunkChoice{Delta: chunkDelta{Content: &rest}}))
	}
	for j, tc := range rp.ToolCalls {
		idx := j
		send(chunk(chunkChoice{Delta: chunkDelta{ToolCalls: []outToolCall{{Index: &idx, ID: tc.ID, Type: "function",
			Function: outFunction{Name: tc.Name, Arguments: ""}}}}}))
		send(chunk(chunkChoice{Delta: chunkDelta{ToolCalls: []outToolCall{{Index: &idx,
			Function: outFunction{Arguments: argumentsString(tc.Arguments)}}}}}))
	}
	finish := rp.FinishReason
	last := chunkChoice{FinishReason: &finish}
	if a.p.logprobs && done < len(g.Tokens) {
		last.Logprobs = &chatLogprobs{Content: r.tokenLogprobs(g, done, len(g.Tokens))}
	}
	if a.p.returnTokenIDs {
		last.TokenIDs = g.Tokens
	}
	send(chunk(last))
}

// handleModels serves GET /v1/models: the one model served.
func (r *Recorder) handleModels(w http.ResponseWriter) {
	name := r.cfg.Name
	if name == "" {
		name = "agentrl"
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{
		{"id": name, "object": "model", "created": 0, "owned_by": "agentrl"},
	}})
}

// rewardRequest is the body of POST /v1/sessions/{id}/reward.
type rewardRequest struct {
	Reward *float64 `json:"reward"`
	Acc    *bool    `json:"acc"`
	Pred   *string  `json:"pred"`
	Reason *string  `json:"reason"`
}

// handleReward serves POST /v1/sessions/{id}/reward {"reward", "acc",
// "pred", "reason"}: it ends the session with that reward.
func (r *Recorder) handleReward(w http.ResponseWriter, req *http.Request, id string) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	var rr rewardRequest
	if err := httpjson.UnmarshalObject(body, &rr); err != nil {
		writeError(w, badRequest("", "%v", err))
		return
	}
	if rr.Reward == nil {
		writeError(w, badRequest("reward", "reward is required: a number"))
		return
	}
	out := reward.Output{Score: *rr.Reward}
	if rr.Acc != nil {
		out.Acc = *rr.Acc
	}
	if rr.Pred != nil {
		out.Pred = *rr.Pred
	}
	if rr.Reason != nil {
		out.Reason = *rr.Reason
	}
	if err := r.SetReward(id, out); err != nil {
		writeError(w, sessionError(err))
		return
	}
	s, _ := r.Session(id)
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "calls": len(s.Calls), "reward": out.Score})
}

// sessionError maps an error of the session API to its answer.
func sessionError(err error) *apiError {
	e := &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: err.Error()}
	switch {
	case errors.Is(err, ErrUnknownSession):
		e.Status = http.StatusNotFound
	case errors.Is(err, ErrSessionEnded), errors.Is(err, ErrSessionExists):
		e.Status = http.StatusConflict
	}
	return e
}

// sessionJSON is GET /v1/sessions/{id}'s answer.
type sessionJSON struct {
	ID     string      `json:"id"`
	Calls  []callJSON  `json:"calls"`
	Reward *rewardJSON `json:"reward"`
}

type rewardJSON struct {
	Reward float64 `json:"reward"`
	Acc    bool    `json:"acc"`
	Pred   string  `json:"pred"`
	Reason string  `json:"reason"`
}

type callJSON struct {
	PromptTokenIDs []int     `json:"prompt_token_ids"`
	TokenIDs       []int     `json:"token_ids"`
	Logprobs       []float32 `json:"logprobs"`
	RawLogprobs    []float32 `json:"raw_logprobs"`
	FinishReason   string    `json:"finish_reason"`
	WeightVersion  string    `json:"weight_version"`
	Reused         int       `json:"reused"`
	Drift          bool      `json:"drift"`
	Choice         int       `json:"choice"`
	Content        *string   `json:"content"`
	ToolCalls      []string  `json:"tool_calls"`
}

// handleSession serves GET /v1/sessions/{id}: what is recorded.
func (r *Recorder) handleSession(w http.ResponseWriter, id string) {
	s, ok := r.Session(id)
	if !ok {
		writeError(w, sessionError(fmt.Errorf("%w: %q", ErrUnknownSession, id)))
		return
	}
	out := sessionJSON{ID: s.ID, Calls: make([]callJSON, len(s.Calls))}
	if s.Reward != nil {
		out.Reward = &rewardJSON{Reward: s.Reward.Score, Acc: s.Reward.Acc, Pred: s.Reward.Pred, Reason: s.Reward.Reason}
	}
	for i, c := range s.Calls {
		cj := callJSON{PromptTokenIDs: c.Prompt, TokenIDs: c.Tokens, Logprobs: c.LogProbs, RawLogprobs: c.RawLogProbs,
			FinishReason: c.Reply.FinishReason, WeightVersion: c.WeightVersion, Reused: c.Reused, Drift: c.Drift,
			Choice: c.Choice, ToolCalls: []string{}}
		if !c.Reply.Null {
			content := c.Reply.Content
			cj.Content = &content
		}
		for _, tc := range c.Reply.ToolCalls {
			cj.ToolCalls = append(cj.ToolCalls, tc.ID)
		}
		out.Calls[i] = cj
	}
	writeJSON(w, http.StatusOK, out)
}
