package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/rollout"
)

// completion is one answered chat call: what the client is told.
type completion struct {
	prompt  []int
	choices []choice // n of them
	params  lm.SampleParams
}

// choice is one of a call's n answers: its generation and the reply
// made of it.
type choice struct {
	gen   lm.Generation
	reply Reply
}

// admission is a call admitted into its session: its index there and a
// copy of the session's recorded calls to build its prompt on.
type admission struct {
	id      string
	index   int
	opts    SessionOptions
	history *session // calls recorded so far (not shared)
}

// admit registers a call of session id with n choices (creating the
// session), or returns nil for a call without a session.
func (r *Recorder) admit(id string, n int) (*admission, *apiError) {
	if id == "" {
		if r.cfg.RequireSession {
			return nil, badRequest("user", "no session: send the header X-Session-Id, the request's \"user\", or use the base URL /sessions/{id}/v1")
		}
		return nil, nil
	}
	if err := checkSessionID(id); err != nil {
		return nil, badRequest("user", "%v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[id]
	if !ok {
		s = r.newSessionLocked(id)
	}
	if s.s.Reward != nil {
		return nil, &apiError{Status: http.StatusConflict, Type: "invalid_request_error", Param: "user",
			Message: fmt.Sprintf("session %q has ended: its reward is set", id)}
	}
	r.clock++
	s.used = r.clock
	s.pending++
	a := &admission{id: id, index: s.order, opts: s.s.Options,
		history: &session{calls: slices.Clone(s.calls), indexes: slices.Clone(s.indexes)}}
	s.order += n // one admission index per choice
	return a, nil
}

// release ends an admission that was not recorded.
func (r *Recorder) release(a *admission) {
	if a == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sessions[a.id]; ok {
		s.pending--
	}
}

// complete runs one chat call: it admits it into its session, builds
// the token-faithful prompt, samples its n choices (one batch of n
// requests), parses the tool calls and records the call before
// returning, so that a reward posted after the answer finds it. Each
// choice is recorded as a Call of its own.
func (r *Recorder) complete(ctx context.Context, sessionID string, p *chatPlan) (*completion, *apiError) {
	a, aerr := r.admit(sessionID, p.n)
	if aerr != nil {
		return nil, aerr
	}
	recorded := false
	defer func() {
		if !recorded {
			r.release(a)
		}
	}()
	var hist *session
	if a != nil {
		hist = a.history
	}
	pp, err := r.buildPrompt(hist, p)
	if err != nil {
		return nil, badRequest("messages", "rendering the chat template: %v", err)
	}
	params := p.params
	if a != nil && a.opts.Params != nil {
		params = sessionParams(p.params, *a.opts.Params, a.index)
	}
	params.Logprobs, params.TopLogprobs = true, p.topLogprobs
	if aerr := r.checkLength(len(pp.tokens), &params, p.maxTokensSet); aerr != nil {
		return nil, aerr
	}
	reqs := make([]lm.GenerateRequest, p.n)
	for i := range reqs {
		reqs[i] = lm.GenerateRequest{Prompt: pp.tokens, Params: choiceParams(params, i)}
	}
	if a != nil {
		// The sampler's session (its cache of the conversation) follows
		// the first choice.
		reqs[0].Session = samplerSession(a.id)
	}
	start := time.Now()
	gens, err := r.cfg.Sampler.Generate(ctx, reqs)
	if err != nil {
		return nil, generationError(ctx, err)
	}
	latency := time.Since(start)
	if len(gens) != p.n {
		return nil, internalError(fmt.Errorf("the sampler returned %d generations for %d requests", len(gens), p.n))
	}
	out := &completion{prompt: pp.tokens, params: params, choices: make([]choice, p.n)}
	for i, g := range gens {
		if len(g.LogProbs) != len(g.Tokens) || g.RawLogProbs != nil && len(g.RawLogProbs) != len(g.Tokens) {
			return nil, internalError(fmt.Errorf("the sampler returned %d tokens with %d log-probabilities (%d raw)", len(g.Tokens), len(g.LogProbs), len(g.RawLogProbs)))
		}
		if p.topLogprobs > 0 && len(g.TopLogProbs) != len(g.Tokens) {
			return nil, internalError(fmt.Errorf("the sampler returned %d lists of top log-probabilities for %d tokens", len(g.TopLogProbs), len(g.Tokens)))
		}
		out.choices[i] = choice{gen: g, reply: r.reply(pp.tokens, g, p)}
	}
	if a == nil {
		r.mu.Lock()
		r.stats.Unrecorded++
		r.mu.Unlock()
		return out, nil
	}
	calls := make([]*Call, p.n)
	for i, ch := range out.choices {
		g := ch.gen
		calls[i] = &Call{
			Messages: p.messages, Tools: p.tools, Options: p.options,
			Prompt: pp.tokens, Tokens: slices.Clone(g.Tokens),
			LogProbs: slices.Clone(g.LogProbs), RawLogProbs: slices.Clone(g.RawLogProbs),
			Finish: g.FinishReason, StopToken: g.StopToken, StopString: g.StopString,
			WeightVersion: g.WeightVersion, CachedTokens: g.CachedTokens, Params: reqs[i].Params,
			Reply: ch.reply, Reused: pp.reused, Drift: pp.drift, Choice: i, Start: start, Latency: latency,
		}
	}
	recorded = r.record(a, calls)
	return out, nil
}

// choiceParams are the sampling parameters of choice i of a call: the
// call's, with a seed of its own for i > 0 when the call has a seed
// (SplitMix64's increment added i times, then its finaliser), so that
// the choices differ and each is reproducible.
func choiceParams(p lm.SampleParams, i int) lm.SampleParams {
	if i == 0 || p.Seed == nil {
		return p
	}
	z := *p.Seed + uint64(i)*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	p.Seed = &z
	return p
}

// record files the calls of one admission (its choices, in order)
// under its session unless the session was taken or evicted meanwhile;
// it reports whether it released the admission.
func (r *Recorder) record(a *admission, calls []*Call) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[a.id]
	if !ok {
		return true // gone: nothing to release
	}
	s.pending--
	for i, c := range calls {
		s.calls = append(s.calls, c)
		s.indexes = append(s.indexes, a.index+i)
		r.stats.Calls++
		if c.Reused >= 0 {
			r.stats.Reused++
		}
		if c.Drift {
			r.stats.Drifted++
		}
	}
	return true
}

// sessionParams are the sampling parameters of call k of a session
// whose options fix them (SessionOptions.Params).
func sessionParams(req, fixed lm.SampleParams, k int) lm.SampleParams {
	p := fixed
	p.Stop = append(slices.Clone(fixed.Stop), req.Stop...)
	if req.MaxNewTokens > 0 && (p.MaxNewTokens == 0 || req.MaxNewTokens < p.MaxNewTokens) {
		p.MaxNewTokens = req.MaxNewTokens
	}
	if fixed.Seed != nil {
		s := *fixed.Seed + uint64(k)
		p.Seed = &s
	}
	return p
}

// checkLength applies MaxContext: a prompt that fills the context is
// refused, max_tokens beyond the room left is refused, and without
// max_tokens the room left bounds the generation.
func (r *Recorder) checkLength(n int, p *lm.SampleParams, explicit bool) *apiError {
	ctxLen := r.cfg.MaxContext
	if ctxLen == 0 {
		return nil
	}
	if n >= ctxLen {
		return badRequest("messages", "This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", ctxLen, n)
	}
	room := ctxLen - n
	switch {
	case explicit && p.MaxNewTokens > room:
		return badRequest("max_tokens", "max_tokens is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).", p.MaxNewTokens, ctxLen, n, p.MaxNewTokens, ctxLen, n)
	case p.MaxNewTokens == 0 || p.MaxNewTokens > room:
		p.MaxNewTokens = room
	}
	return nil
}

// generationError maps a failed generation to its answer.
func generationError(ctx context.Context, err error) *apiError {
	switch {
	case ctx.Err() != nil:
		return badRequest("", "client disconnected: %v", ctx.Err())
	case errors.Is(err, lm.ErrSampling):
		return badRequest("", "%v", err)
	case errors.Is(err, ErrUnavailable):
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Message: err.Error()}
	}
	return internalError(err)
}

// ErrUnavailable may be wrapped by a Sampler's error for a generation
// that could not run now (a server shutting down, a generation aborted
// by a weight update); the client gets a 503 and may retry.
var ErrUnavailable = errors.New("record: sampler unavailable")

func internalError(err error) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}

// reply builds the assistant message of generation g: its text without
// the stop token (cut at a matched stop string), and, when the request
// gave tools with tool_choice "auto", the tool calls the ToolFormat's
// parser finds, with the text before the first call as the content, as
// vLLM's tool parsers answer. A call the parser cannot read makes the
// whole text the content and no call is returned (vLLM's hermes parser
// does the same).
func (r *Recorder) reply(prompt []int, g lm.Generation, p *chatPlan) Reply {
	text := r.visibleText(prompt, g)
	rp := Reply{Content: text, Text: text, FinishReason: "stop"}
	if g.FinishReason == lm.FinishLength {
		rp.FinishReason = "length"
	}
	if !p.parseTools {
		return rp
	}
	var calls []rollout.ParsedCall
	if sp, ok := r.parser.(rollout.SchemaParser); ok {
		calls = sp.ParseWithSchemas(text, p.tools)
	} else {
		calls = r.parser.Parse(text)
	}
	if len(calls) == 0 {
		return rp
	}
	for _, c := range calls {
		if c.Err != nil {
			return rp
		}
	}
	if at := strings.Index(text, calls[0].Raw); at >= 0 {
		rp.Content = text[:at]
	}
	rp.Null = rp.Content == ""
	for _, c := range calls {
		rp.ToolCalls = append(rp.ToolCalls, ToolCall{ID: "call_" + randomHex(12), Name: c.Name, Arguments: c.Arguments, Raw: c.Raw})
	}
	if rp.FinishReason == "stop" {
		rp.FinishReason = "tool_calls"
	}
	return rp
}

// visibleText decodes the generation as vLLM's detokenizer gives it:
// incrementally after the prompt, the stop token's text left out, a
// matched stop string and what follows it cut.
func (r *Recorder) visibleText(prompt []int, g lm.Generation) string {
	toks := g.Tokens
	if g.FinishReason == lm.FinishStopToken && len(toks) > 0 {
		toks = toks[:len(toks)-1]
	}
	text := r.decodeAfter(prompt, toks)
	if g.FinishReason == lm.FinishStop && g.StopString != "" {
		if at := strings.Index(text, g.StopString); at >= 0 {
			text = text[:at]
		}
	}
	return text
}

// decodeAfter decodes toks incrementally after prompt.
func (r *Recorder) decodeAfter(prompt, toks []int) string {
	ts := lm.NewTextStream(r.cfg.Tokenizer.Decode, prompt)
	var b strings.Builder
	for _, id := range toks {
		b.WriteString(ts.Push(id))
	}
	b.WriteString(ts.Flush())
	return b.String()
}

// argumentsString is a tool call's arguments as the client gets them:
// a JSON string of the compact object.
func argumentsString(args json.RawMessage) string { return string(args) }
