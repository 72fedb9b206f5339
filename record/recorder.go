package record

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// Errors of the Recorder's Go API; over HTTP they become OpenAI error
// objects with the status each names.
var (
	// ErrConfig is wrapped by New's error for an invalid Config.
	ErrConfig = errors.New("record: invalid configuration")
	// ErrUnknownSession: no session has that id (404).
	ErrUnknownSession = errors.New("record: unknown session")
	// ErrSessionEnded: the session's reward is set; it takes no more
	// calls and no second reward (409).
	ErrSessionEnded = errors.New("record: session ended")
	// ErrSessionExists: Open was given the id of a session that already
	// exists (409).
	ErrSessionExists = errors.New("record: session exists")
	// ErrBadSession: a session id that is empty, longer than
	// MaxSessionID bytes, or holds a control character, a space or a
	// slash (400).
	ErrBadSession = errors.New("record: bad session id")
)

// MaxSessionID is the longest session id accepted, in bytes.
const MaxSessionID = 256

// DefaultMaxSessions bounds the sessions a Recorder keeps when
// Config.MaxSessions is 0.
const DefaultMaxSessions = 4096

// Template renders a conversation and the tools' schemas into prompt
// text as a model's chat template does: *tokenizer.ChatTemplate is one,
// and TemplateFunc makes one of a tokenizer's ApplyChatTemplate.
type Template interface {
	Render(messages []tokenizer.Message, tools []json.RawMessage, opts tokenizer.ChatOptions) (string, error)
}

// TemplateFunc is a Template given as a function, such as
// (*tokenizer.BPE).ApplyChatTemplate.
type TemplateFunc func(messages []tokenizer.Message, tools []json.RawMessage, opts tokenizer.ChatOptions) (string, error)

// Render calls f.
func (f TemplateFunc) Render(messages []tokenizer.Message, tools []json.RawMessage, opts tokenizer.ChatOptions) (string, error) {
	return f(messages, tools, opts)
}

// Config configures a Recorder. Sampler, Template and Tokenizer are
// required; every other field's zero value means the default given on
// it.
type Config struct {
	// Sampler generates the completions: the policy being trained
	// (*policy.Model), a fleet of inference servers (*fleet.Fleet), or
	// anything else that continues token ids.
	Sampler lm.Sampler
	// Template renders the request's messages and tools with the model's
	// chat template, generation prompt included.
	Template Template
	// Tokenizer encodes the rendered prompt and decodes what was sampled.
	Tokenizer rollout.Tokenizer
	// EOS are the model's end-of-turn token ids; the first one's text
	// is what the chat template writes at the end of an assistant
	// message (Qwen's "<|im_end|>"). Nil means the Tokenizer's EOSIDs()
	// when it has that method (tokenizer.BPE and tokenizer.Bytes do).
	EOS []int
	// ToolFormat parses tool calls out of the sampled text; a zero
	// value means Hermes <tool_call> JSON (rollout.ToolFormatByName
	// "hermes"), Qwen2.5's and Qwen3's. rollout.ToolFormatFromTemplate
	// picks the format of a model's own template.
	ToolFormat rollout.ToolFormat
	// Name is the model name the answers report; empty means the name
	// the request gave. Requests are never refused for their "model":
	// agents written against another API name theirs.
	Name string
	// LogprobsMode picks the log-probabilities returned to clients:
	// openai.RawLogprobs (the default) or openai.ProcessedLogprobs, as
	// vLLM's --logprobs-mode. Both are recorded either way.
	LogprobsMode openai.LogprobsMode
	// MaxContext, when positive, is the model's context length: a
	// prompt that fills it is refused, and a call without max_tokens
	// generates at most the room left. Zero leaves both to the sampler.
	MaxContext int
	// MaxSessions bounds the sessions kept; when a new one would pass
	// it, the one least recently used is dropped (Stats.Evicted counts
	// them). Zero means DefaultMaxSessions. Take sessions once their
	// episodes end (Source does).
	MaxSessions int
	// RequireSession refuses calls that name no session (400). Without
	// it they are answered and not recorded (Stats.Unrecorded).
	RequireSession bool
}

// Recorder serves OpenAI's chat completions over an lm.Sampler and
// records, per session, every call's exact prompt tokens, sampled tokens
// and log-probabilities, from which Trajectories makes token-faithful
// rollout trajectories. It is an http.Handler (see the package
// documentation for its routes) and is safe for concurrent use.
type Recorder struct {
	cfg       Config
	eos       []int
	eot       string // the text of the end-of-turn token eos[0]
	parser    rollout.Parser
	closer    lm.SessionCloser // the Sampler's, or nil
	processed bool

	mu       sync.Mutex
	sessions map[string]*session
	clock    uint64 // use counter, for least-recently-used eviction
	stats    Stats
}

// Stats counts what a Recorder has done since New.
type Stats struct {
	// Calls is the number of chat completions recorded, each of a
	// request's n choices counted.
	Calls int
	// Reused is the number of recorded calls whose prompt reused the
	// exact tokens of an earlier call's answer that the agent sent
	// back, instead of rendering it again.
	Reused int
	// Drifted is the number of recorded calls whose prompt, rendered and
	// tokenised from the messages alone, would have differed from the
	// tokens the recorder sent to the sampler: re-tokenisation drift
	// that reusing the sampled tokens avoided.
	Drifted int
	// Unrecorded is the number of calls answered without a session.
	Unrecorded int
	// Evicted is the number of sessions dropped to respect MaxSessions.
	Evicted int
}

// New returns a Recorder for cfg.
func New(cfg Config) (*Recorder, error) {
	switch {
	case cfg.Sampler == nil:
		return nil, fmt.Errorf("%w: Sampler is nil", ErrConfig)
	case cfg.Template == nil:
		return nil, fmt.Errorf("%w: Template is nil", ErrConfig)
	case cfg.Tokenizer == nil:
		return nil, fmt.Errorf("%w: Tokenizer is nil", ErrConfig)
	case cfg.MaxContext < 0:
		return nil, fmt.Errorf("%w: MaxContext %d is negative", ErrConfig, cfg.MaxContext)
	case cfg.MaxSessions < 0:
		return nil, fmt.Errorf("%w: MaxSessions %d is negative", ErrConfig, cfg.MaxSessions)
	}
	switch cfg.LogprobsMode {
	case "", openai.RawLogprobs, openai.ProcessedLogprobs:
	default:
		return nil, fmt.Errorf("%w: LogprobsMode %q, want %q or %q", ErrConfig, cfg.LogprobsMode, openai.RawLogprobs, openai.ProcessedLogprobs)
	}
	eos := slices.Clone(cfg.EOS)
	if eos == nil {
		if e, ok := cfg.Tokenizer.(interface{ EOSIDs() []int }); ok {
			eos = e.EOSIDs()
		}
	}
	if len(eos) == 0 {
		return nil, fmt.Errorf("%w: no end-of-turn token: set EOS (the Tokenizer has no EOSIDs)", ErrConfig)
	}
	eot := cfg.Tokenizer.Decode(eos[:1])
	if eot == "" {
		return nil, fmt.Errorf("%w: the end-of-turn token %d decodes to no text", ErrConfig, eos[0])
	}
	tf := cfg.ToolFormat
	if tf.Parser == nil {
		tf, _ = rollout.ToolFormatByName(rollout.FormatHermes)
		cfg.ToolFormat = tf
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	closer, _ := cfg.Sampler.(lm.SessionCloser)
	return &Recorder{
		cfg: cfg, eos: eos, eot: eot, parser: tf.Parser, closer: closer,
		processed: cfg.LogprobsMode == openai.ProcessedLogprobs,
		sessions:  make(map[string]*session),
	}, nil
}

// Session is what a Recorder recorded under one session id.
type Session struct {
	ID string
	// Calls are the session's chat completions in the order they were
	// admitted, a request with n choices giving n consecutive calls.
	Calls []Call
	// Reward is the reward posted for the session (SetReward, or POST
	// /v1/sessions/{id}/reward); nil until one is.
	Reward *reward.Output
	// Options are those Open gave the session.
	Options SessionOptions
}

// Ended reports whether the session's reward is set.
func (s *Session) Ended() bool { return s.Reward != nil }

// Call is one recorded chat completion.
type Call struct {
	// Messages and Tools are the request's conversation and tool
	// schemas as the template rendered them (tool-call arguments given
	// as JSON strings decoded to objects, as vLLM passes them).
	Messages []tokenizer.Message
	Tools    []json.RawMessage
	// Options are the template options (chat_template_kwargs).
	Options map[string]json.RawMessage
	// Prompt is exactly the token sequence the sampler continued.
	Prompt []int
	// Tokens are the sampled tokens, exactly as the sampler returned
	// them, and LogProbs and RawLogProbs their log-probabilities
	// (lm.Generation's; nil when the sampler gave none).
	Tokens      []int
	LogProbs    []float32
	RawLogProbs []float32
	// Finish, StopToken and StopString are the sampler's.
	Finish     lm.FinishReason
	StopToken  int
	StopString string
	// WeightVersion names the weights that sampled the tokens, when the
	// sampler knows; CachedTokens is its count of prompt tokens reused.
	WeightVersion string
	CachedTokens  int
	// Params are the sampling parameters the call ran with.
	Params lm.SampleParams
	// Reply is the assistant message the call answered with.
	Reply Reply
	// Reused is the index, in the session, of the call whose prompt and
	// sampled tokens begin this call's Prompt because the agent sent its
	// Reply back unchanged; −1 when the prompt was rendered from the
	// messages alone.
	Reused int
	// Drift reports that rendering and tokenising the messages alone
	// would have given a Prompt other than the one sampled from.
	Drift bool
	// Choice is which of the request's n choices this call is (0 when
	// n was 1); the choices of one request are consecutive calls with
	// the same Prompt.
	Choice int
	// Start is when the call was admitted, and Latency how long its
	// generation took.
	Start   time.Time
	Latency time.Duration
}

// Reply is the assistant message a call answered with, as the client
// received it.
type Reply struct {
	// Content is the message's text; Null reports that "content" was
	// null (a reply holding only tool calls).
	Content string
	Null    bool
	// ToolCalls are the calls parsed from the sampled text.
	ToolCalls []ToolCall
	// Text is the whole decoded text of the sampled tokens, tool calls
	// included, the stop token left out.
	Text string
	// FinishReason is OpenAI's: "stop", "length" or "tool_calls".
	FinishReason string
}

// ToolCall is one tool call of a Reply, in OpenAI's shape.
type ToolCall struct {
	// ID is the id the client got ("call_…"); tool messages answer it in
	// their tool_call_id.
	ID   string
	Name string
	// Arguments is a JSON object, compact; the client got it as a
	// string.
	Arguments json.RawMessage
	// Raw is the call's text as the model wrote it.
	Raw string
}

// SessionOptions are a session's settings, given to Open before its
// first call.
type SessionOptions struct {
	// Params, when set, fix the sampling of every call of the session,
	// whatever the request asks: temperature, top_p, top_k, min_p and
	// stop strings are these (the request's stop strings are added),
	// max_tokens is the smaller of the two when both are set, and with a
	// Seed, call k of the session samples with Seed+k. A trainer sets them
	// so that an agent's episodes are sampled from the policy it trains,
	// at its temperature and with its seeds.
	Params *lm.SampleParams
}

// session is one session's state.
type session struct {
	s       Session
	used    uint64 // Recorder.clock at the last use
	pending int    // calls admitted and not yet recorded
	order   int    // next call index
	calls   []*Call
	indexes []int // the admission index of each entry of calls
}

// checkSessionID validates a session id.
func checkSessionID(id string) error {
	if id == "" || len(id) > MaxSessionID {
		return fmt.Errorf("%w: %d bytes, want 1 to %d", ErrBadSession, len(id), MaxSessionID)
	}
	for _, r := range id {
		if r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("%w %q: no slashes, spaces or control characters", ErrBadSession, id)
		}
	}
	return nil
}

// NewSessionID returns a fresh random session id, "sess-" and 32 hex
// digits.
func NewSessionID() string { return "sess-" + randomHex(16) }

// randomHex returns 2n random hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// Open creates session id with o before its first call. A session
// that a call or Open already made gives ErrSessionExists. Calls to an
// id that no Open made create the session with zero options.
func (r *Recorder) Open(id string, o SessionOptions) error {
	if err := checkSessionID(id); err != nil {
		return err
	}
	if o.Params != nil {
		if err := lm.CheckSampleParams(*o.Params); err != nil {
			return fmt.Errorf("record: session %q: %w", id, err)
		}
		p := *o.Params
		p.Stop = slices.Clone(p.Stop)
		p.StopTokenIDs = slices.Clone(p.StopTokenIDs)
		o.Params = &p
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sessions[id]; ok {
		return fmt.Errorf("%w: %q", ErrSessionExists, id)
	}
	r.newSessionLocked(id).s.Options = o
	return nil
}

// newSessionLocked adds an empty session, evicting the least recently
// used one when the store is full.
func (r *Recorder) newSessionLocked(id string) *session {
	for len(r.sessions) >= r.cfg.MaxSessions {
		var oldest string
		var at uint64
		for k, s := range r.sessions {
			if s.pending == 0 && (oldest == "" || s.used < at) {
				oldest, at = k, s.used
			}
		}
		if oldest == "" {
			break // every session has a call in flight
		}
		delete(r.sessions, oldest)
		r.stats.Evicted++
		r.closeSampler(oldest)
	}
	r.clock++
	s := &session{s: Session{ID: id}, used: r.clock}
	r.sessions[id] = s
	return s
}

// closeSampler releases the sampler's state of a session (its KV
// cache, on a local model).
func (r *Recorder) closeSampler(id string) {
	if r.closer != nil {
		r.closer.CloseSession(samplerSession(id))
	}
}

// samplerSession is the lm.GenerateRequest.Session of a recorded
// session.
func samplerSession(id string) string { return "record/" + id }

// SetReward ends session id with its reward: the session takes no more
// calls. The session must exist (ErrUnknownSession) and have no reward
// yet (ErrSessionEnded); the score must be finite.
func (r *Recorder) SetReward(id string, out reward.Output) error {
	if err := checkFinite(out.Score); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownSession, id)
	}
	if s.s.Reward != nil {
		return fmt.Errorf("%w: %q already has its reward", ErrSessionEnded, id)
	}
	s.s.Reward = &out
	r.clock++
	s.used = r.clock
	return nil
}

// Session returns a copy of what session id holds: its calls recorded
// so far, in admission order, and its reward.
func (r *Recorder) Session(id string) (Session, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[id]
	if !ok {
		return Session{}, false
	}
	return s.snapshot(), true
}

// Take removes session id and returns what it held, releasing the
// sampler's state of it. Calls still generating in it are not recorded.
func (r *Recorder) Take(id string) (Session, bool) {
	r.mu.Lock()
	s, ok := r.sessions[id]
	if ok {
		delete(r.sessions, id)
	}
	r.mu.Unlock()
	if !ok {
		return Session{}, false
	}
	r.closeSampler(id)
	return s.snapshot(), true
}

// snapshot copies the session, its calls sorted by admission.
func (s *session) snapshot() Session {
	out := s.s
	idx := make([]int, len(s.calls))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return s.indexes[a] - s.indexes[b] })
	out.Calls = make([]Call, len(s.calls))
	pos := make(map[int]int, len(idx)) // admission index → position
	for i, j := range idx {
		out.Calls[i] = *s.calls[j]
		pos[s.indexes[j]] = i
	}
	for i := range out.Calls {
		if c := &out.Calls[i]; c.Reused >= 0 {
			if p, ok := pos[c.Reused]; ok {
				c.Reused = p
			} else {
				c.Reused = -1
			}
		}
	}
	if s.s.Reward != nil {
		rw := *s.s.Reward
		out.Reward = &rw
	}
	return out
}

// Sessions returns the ids of the sessions held, in no order.
func (r *Recorder) Sessions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.sessions))
	for id := range r.sessions {
		ids = append(ids, id)
	}
	return ids
}

// Stats returns the Recorder's counts.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}
