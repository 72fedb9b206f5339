package policytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentrl/agentrl/lm"
)

// ErrNoScript is returned by a Sampler asked to continue a conversation
// it has no scripted response left for.
var ErrNoScript = errors.New("policytest: no scripted response")

// Response is one scripted generation.
type Response struct {
	// Tokens are the generated ids. When nil, Text is encoded with the
	// Sampler's Encode func.
	Tokens []int
	Text   string
	// LogProbs, when not nil, are returned as the tokens' log-probabilities
	// (it must be as long as the tokens). When nil and the request asked
	// for log-probabilities, token t gets DefaultLogProb(t).
	LogProbs []float32
	// Finish is the finish reason reported when the request's stop
	// conditions do not end the scripted tokens early; empty means
	// lm.FinishLength (the script ran out as a token budget would).
	Finish lm.FinishReason
	// Err is returned instead of a generation.
	Err error
	// Delay is waited before answering; Block waits until the context
	// ends. Either way a context that ends first makes Generate return
	// its error.
	Delay time.Duration
	Block bool
}

// Text returns a Response generating text.
func Text(s string) Response { return Response{Text: s} }

// Tokens returns a Response generating ids.
func Tokens(ids ...int) Response { return Response{Tokens: ids} }

// Error returns a Response failing with err.
func Error(err error) Response { return Response{Err: err} }

// DefaultLogProb is the log-probability the Sampler reports for token t
// when its response has no LogProbs: -t/1000, so that a test can check
// that log-probabilities stay aligned with their tokens.
func DefaultLogProb(t int) float32 { return -float32(t) / 1000 }

// Config configures a Sampler. The zero value replays token responses
// only: no end-of-sequence ids (generations end at a request's
// StopTokenIDs, its MaxNewTokens or the script's end), and a text
// response or a request with Stop strings is an error, for want of
// Encode or Decode.
type Config struct {
	// Encode turns a Response's Text into ids; required for text responses.
	Encode func(string) []int
	// Decode turns ids into text; required to honour Stop strings.
	Decode func([]int) string
	// EOS are the end-of-sequence ids that end a generation as
	// lm.FinishStopToken, in addition to a request's StopTokenIDs.
	EOS []int
}

// Sampler is a lm.Sampler and lm.SessionCloser that replays
// scripted responses, for deterministic tests of pipelines, in the manner
// of net/http/httptest.
//
// Responses are chosen in this order: responses queued with Enqueue, one
// per request in arrival order; then the script of the conversation the
// request belongs to — a session (GenerateRequest.Session) follows the
// script registered with Handle whose prefix is the longest prefix of the
// session's first prompt, one response per turn; then the default script
// set with HandleDefault. Requests without a session are matched by
// prompt alone and always get the script's first response.
//
// Scripted tokens are cut short as a real sampler would: at a stop token
// (the EOS ids or the request's StopTokenIDs, kept as the last token), at
// a Stop string (the token completing it kept; see lm.StopChecker),
// or at MaxNewTokens.
//
// A Sampler is safe for concurrent use.
type Sampler struct {
	cfg Config

	mu       sync.Mutex
	queue    []Response
	scripts  []script
	fallback []Response
	sessions map[string]*session
	requests []lm.GenerateRequest
	batches  []int
	closed   []string
}

type script struct {
	prefix    []int
	responses []Response
}

type session struct {
	responses []Response
	next      int
}

// New returns a Sampler with no scripts.
func New(cfg Config) *Sampler {
	return &Sampler{cfg: cfg, sessions: make(map[string]*session)}
}

// Enqueue adds responses given to the next requests, one each, in
// arrival order, before any script is consulted.
func (s *Sampler) Enqueue(responses ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, responses...)
}

// Handle registers the turn-by-turn script of conversations whose first
// prompt starts with prefix.
func (s *Sampler) Handle(prefix []int, responses ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts = append(s.scripts, script{prefix: slices.Clone(prefix), responses: responses})
}

// HandleText is Handle with a prefix given as text, encoded with Encode.
func (s *Sampler) HandleText(prefix string, responses ...Response) {
	s.Handle(s.cfg.Encode(prefix), responses...)
}

// HandleDefault sets the script of conversations no Handle prefix matches.
func (s *Sampler) HandleDefault(responses ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = responses
}

// Requests returns a copy of every request received, in arrival order.
func (s *Sampler) Requests() []lm.GenerateRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]lm.GenerateRequest, len(s.requests))
	for i, r := range s.requests {
		r.Prompt = slices.Clone(r.Prompt)
		r.Params.Stop = slices.Clone(r.Params.Stop)
		r.Params.StopTokenIDs = slices.Clone(r.Params.StopTokenIDs)
		out[i] = r
	}
	return out
}

// Batches returns the size of every Generate call, in order.
func (s *Sampler) Batches() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batches)
}

// Closed returns the sessions closed with CloseSession, in order.
func (s *Sampler) Closed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.closed)
}

// CloseSession records the session as closed and forgets its position in
// its script.
func (s *Sampler) CloseSession(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = append(s.closed, id)
	delete(s.sessions, id)
}

// Generate answers each request with its scripted response. Responses
// with a delay are waited for concurrently; the first error (scripted, a
// missing script, or ctx's) is returned.
func (s *Sampler) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	picked := make([]Response, len(reqs))
	s.mu.Lock()
	s.batches = append(s.batches, len(reqs))
	var pickErr error
	for i, r := range reqs {
		r.Prompt = slices.Clone(r.Prompt)
		s.requests = append(s.requests, r)
		resp, err := s.pickLocked(r)
		if err != nil && pickErr == nil {
			pickErr = fmt.Errorf("policytest: request %d: %w", i, err)
		}
		picked[i] = resp
	}
	s.mu.Unlock()
	if pickErr != nil {
		return nil, pickErr
	}

	var wait time.Duration
	block := false
	for _, p := range picked {
		wait = max(wait, p.Delay)
		block = block || p.Block
	}
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]lm.Generation, len(reqs))
	for i, p := range picked {
		if p.Err != nil {
			return nil, fmt.Errorf("policytest: request %d: %w", i, p.Err)
		}
		g, err := s.render(reqs[i], p)
		if err != nil {
			return nil, fmt.Errorf("policytest: request %d: %w", i, err)
		}
		out[i] = g
	}
	return out, nil
}

func (s *Sampler) pickLocked(r lm.GenerateRequest) (Response, error) {
	if len(s.queue) > 0 {
		resp := s.queue[0]
		s.queue = s.queue[1:]
		return resp, nil
	}
	if r.Session != "" {
		if ss, ok := s.sessions[r.Session]; ok {
			if ss.next >= len(ss.responses) {
				return Response{}, fmt.Errorf("session %q turn %d: %w", r.Session, ss.next, ErrNoScript)
			}
			ss.next++
			return ss.responses[ss.next-1], nil
		}
	}
	responses := s.matchLocked(r.Prompt)
	if len(responses) == 0 {
		return Response{}, fmt.Errorf("prompt of %d tokens: %w", len(r.Prompt), ErrNoScript)
	}
	if r.Session != "" {
		s.sessions[r.Session] = &session{responses: responses, next: 1}
	}
	return responses[0], nil
}

func (s *Sampler) matchLocked(prompt []int) []Response {
	best := -1
	for i, sc := range s.scripts {
		if len(sc.prefix) <= len(prompt) && slices.Equal(sc.prefix, prompt[:len(sc.prefix)]) &&
			(best < 0 || len(sc.prefix) > len(s.scripts[best].prefix)) {
			best = i
		}
	}
	if best >= 0 {
		return s.scripts[best].responses
	}
	return s.fallback
}

// render cuts the scripted tokens at the request's stop conditions.
func (s *Sampler) render(r lm.GenerateRequest, p Response) (lm.Generation, error) {
	ids := p.Tokens
	if ids == nil && p.Text != "" {
		if s.cfg.Encode == nil {
			return lm.Generation{}, errors.New("text response but Config.Encode is nil")
		}
		ids = s.cfg.Encode(p.Text)
	}
	if p.LogProbs != nil && len(p.LogProbs) != len(ids) {
		return lm.Generation{}, fmt.Errorf("scripted LogProbs has %d values for %d tokens", len(p.LogProbs), len(ids))
	}
	params := r.Params
	if params.TopLogprobs > 0 {
		// A script has no alternatives to list; answering without them
		// would be a silent wrong result.
		return lm.Generation{}, fmt.Errorf("%w: top log-probabilities (TopLogprobs %d) are not scripted", lm.ErrSampling, params.TopLogprobs)
	}
	if len(params.Stop) > 0 && s.cfg.Decode == nil {
		return lm.Generation{}, errors.New("request has Stop strings but Config.Decode is nil")
	}
	checker := lm.NewStopChecker(params, s.cfg.EOS)
	var stream *lm.TextStream
	if len(params.Stop) > 0 {
		stream = lm.NewTextStream(s.cfg.Decode, r.Prompt)
	}
	g := lm.Generation{FinishReason: p.Finish}
	if g.FinishReason == "" {
		g.FinishReason = lm.FinishLength
	}
	n := len(ids)
	for i, id := range ids {
		delta := ""
		if stream != nil {
			delta = stream.Push(id)
		}
		if stop, done := checker.Next(id, delta); done {
			n = i + 1
			g.FinishReason = stop.Reason
			g.StopToken = stop.Token
			g.StopString = stop.String
			break
		}
	}
	g.Tokens = slices.Clone(ids[:n])
	if g.FinishReason == lm.FinishStopToken && g.StopToken == 0 && n > 0 {
		g.StopToken = g.Tokens[n-1]
	}
	if params.Logprobs {
		g.LogProbs = make([]float32, n)
		for i, id := range g.Tokens {
			if p.LogProbs != nil {
				g.LogProbs[i] = p.LogProbs[i]
			} else {
				g.LogProbs[i] = DefaultLogProb(id)
			}
		}
	}
	return g, nil
}
