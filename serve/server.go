package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/record"
)

// DefaultName is the served model name when Config.Name is empty.
const DefaultName = "agentrl"

// ErrConfig is wrapped by New's error for an invalid Config.
var ErrConfig = errors.New("serve: invalid configuration")

// Engine names an inference engine whose defaults a Server follows
// where they differ from this server's own (Config.Engine).
type Engine string

const (
	// EngineVLLM follows vLLM's OpenAI-compatible server: no weight
	// version is reported, as vLLM reports none: completions carry no
	// "metadata", and /generate's meta_info, /model_info and
	// /get_weight_version (SGLang's, which vLLM lacks) give
	// weight_version null.
	EngineVLLM Engine = "vllm"
	// EngineSGLang follows SGLang's server: the weights start at version
	// "default" (--weight-version, python/sglang/srt/server_args.py); an
	// /update_weights_from_disk without weight_version keeps the version
	// (the tokenizer manager sets it only when one is given); and a
	// /generate whose explicit max_new_tokens with the prompt reaches the
	// context length is refused (TokenizerManager._validate_one_request:
	// prompt + max_new_tokens ≥ context_len).
	EngineSGLang Engine = "sglang"
)

// defaultMaxTokens bounds a completion whose max_tokens is absent or
// null, with every Engine: 16, the default of OpenAI's completions API,
// of vLLM's CompletionRequest (vllm/entrypoints/openai/completion/
// protocol.py: max_tokens defaults to 16, and normalize_null_max_tokens
// turns an explicit null into that default) and of SGLang's
// (sglang/srt/entrypoints/openai/protocol.py). Generating up to the
// context instead made a request that forgot max_tokens run for tens of
// seconds; clients that want more say so (policy/openai always does).
const defaultMaxTokens = 16

// ErrClosed is returned for work asked of a closed Server; over HTTP it
// is a 503.
var ErrClosed = errors.New("serve: server closed")

// Causes with which the server cancels a generation in flight.
var (
	// errAborted: a pause or a weight update in abort mode; the request
	// answers with finish_reason "abort" and what it generated so far
	// (the model returns it for a cancellation caused by
	// lm.ErrInterrupted).
	errAborted = fmt.Errorf("serve: request aborted: %w", lm.ErrInterrupted)
	// errRetracted: SGLang's pause mode "retract"; the request starts
	// over once generation continues.
	errRetracted = errors.New("serve: request retracted")
)

// Config configures a Server. Model is required; every other field's zero
// value means the default given on it.
type Config struct {
	// Model generates the completions; required. The Server owns it: it
	// closes it when a reload replaces it, and on Close. Load it with
	// policy.WithDecoder(Decode) for stop strings, and with
	// policy.WithMaxSessions(MaxSessions) when MaxSessions is above
	// policy's default of 64.
	Model *policy.Model
	// ModelPath is the checkpoint folder Model was loaded from. It is
	// reported as "root" by /v1/models and "model_path" by /model_info,
	// and it is what vLLM's reload_weights reloads when the request names
	// no folder. Empty means unknown.
	ModelPath string
	// Name is the served model name: requests naming another model get a
	// 404, as from vLLM. Empty means DefaultName.
	Name string
	// Load reads a checkpoint folder for a weight reload; nil means
	// policy.Load onto Model's backend (WithBackend(Model.Backend()), so
	// that reloaded weights stay on the device the server runs on), with
	// WithDecoder(Decode) when Decode is set and
	// WithMaxSessions(MaxSessions) when MaxSessions is positive.
	Load func(dir string) (*policy.Model, error)
	// Encode, when set, lets prompts be text (a string or a list of
	// strings), as vLLM's tokenizer does; nil means token ids only.
	Encode func(text string) []int
	// Decode, when set, fills the "text" fields and decodes the tokens of
	// logprobs.tokens when return_tokens_as_token_ids is false; it is also
	// what stop strings need. Nil means "text" is empty and tokens are
	// always "token_id:<id>".
	Decode func(ids []int) string
	// LogprobsMode is vLLM's --logprobs-mode: openai.RawLogprobs
	// ("raw_logprobs", the default when empty) returns
	// lm.Generation.RawLogProbs, openai.ProcessedLogprobs
	// ("processed_logprobs") returns Generation.LogProbs.
	LogprobsMode openai.LogprobsMode
	// WeightVersion names the initial weights; empty means "0", or
	// "default" with EngineSGLang, as SGLang starts.
	WeightVersion string
	// Engine makes the server play vLLM (EngineVLLM) or SGLang
	// (EngineSGLang) where their defaults differ from this server's own,
	// so that a client tested against it meets the engine's behaviour: see
	// the constants for what each changes. Both APIs are served either
	// way. Empty keeps this server's own defaults: every completion
	// carries metadata.weight_version, the weights start at version "0",
	// and a reload without a version takes the next integer.
	Engine Engine
	// MaxSessions is how many finished sequences the server keeps in the
	// model's session caches so that a later prompt extending one
	// prefills only its new tokens (vLLM's automatic prefix caching, in
	// the small; usage.prompt_tokens_details.cached_tokens says how many
	// tokens were reused). 0 turns this off. Results never depend on it,
	// only the cost does.
	MaxSessions int
	// Chat, when set, serves OpenAI's chat completions
	// (/v1/chat/completions, streaming and not, with tools) and records
	// every call's prompt and sampled tokens per session, with the
	// routes of package record: its Template and Tokenizer render and
	// encode the conversation (policy/tokenizer's ApplyChatTemplate, the
	// model's own template), its ToolFormat parses tool calls. Its
	// Sampler must be nil: calls generate on the served base weights,
	// admitted as completions are (pauses hold them back, reloads wait
	// for them), and each recorded call names its weight version. An
	// empty Name means the served name, a zero MaxContext the model's
	// context, an empty LogprobsMode this server's. Server.Recorder
	// returns the recorder.
	Chat *record.Config
}

// engine is one set of weights being served: the model, where it came
// from, its version and its prefix cache. A reload replaces the engine
// as a whole. A LoRA adapter is an engine of its own, named, on a copy
// of the base weights; its version is the base weights'.
type engine struct {
	model   *policy.Model
	path    string // the checkpoint folder, or the adapter's folder
	version string
	eos     map[int]bool
	prefix  *prefixCache // nil when Config.MaxSessions is 0

	// Adapters only, under Server.mu.
	name    string            // the adapter's name; "" for the base weights
	lora    policy.LoRAConfig // the adapter's configuration
	seq     uint64            // load order, for /v1/models
	created int64             // load time
	calls   int               // generations admitted and not done
	retired bool              // unloaded or replaced: closed by the last call
}

// limits are what planning a request needs to know about the served
// model; a reload never changes them (sameArchitecture).
type limits struct {
	engine        Engine
	vocab, maxLen int
	encode        func(string) []int
	decode        func([]int) string
}

// call is one admitted generation: the engine it runs on and the
// cancellation through which pauses and reloads abort it.
type call struct {
	eng    *engine
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// generateFunc runs a batch on a model; tests replace Model.Generate.
type generateFunc func(ctx context.Context, m *policy.Model, reqs []lm.GenerateRequest) ([]lm.Generation, error)

// Server serves a policy.Model over vLLM's and SGLang's HTTP APIs (see
// the package documentation for the endpoints). It is safe for
// concurrent use; create it with New and release it with Close.
type Server struct {
	name          string
	mode          openai.LogprobsMode
	load          func(string) (*policy.Model, error)
	lim           limits
	maxSessions   int
	tokenizerPath string
	created       int64
	routes        map[string]map[string]http.HandlerFunc
	chat          *record.Recorder // nil without Config.Chat
	reloading     chan struct{}    // holds a token while a reload runs
	gen           generateFunc

	mu       sync.Mutex
	eng      *engine
	adapters map[string]*engine // loaded LoRA adapters by name
	lastSeq  uint64             // the last adapter's load order
	lastInt  int                // the last integer weight version, for automatic versions
	rpcPath  string             // vLLM's model_config.model: where reload_weights reads from
	paused   bool               // a pause is in effect: admissions wait
	swapping bool               // a reload is swapping models: admissions wait
	closed   bool
	waiting  int // completions waiting for admission
	calls    map[*call]struct{}
	wake     chan struct{} // closed and replaced whenever the state above changes
}

// New checks cfg and returns a Server that owns cfg.Model.
func New(cfg Config) (*Server, error) {
	if cfg.Model == nil {
		return nil, fmt.Errorf("%w: Model is required", ErrConfig)
	}
	switch cfg.LogprobsMode {
	case "":
		cfg.LogprobsMode = openai.RawLogprobs
	case openai.RawLogprobs, openai.ProcessedLogprobs:
	default:
		return nil, fmt.Errorf("%w: LogprobsMode %q, want %q or %q", ErrConfig, cfg.LogprobsMode, openai.RawLogprobs, openai.ProcessedLogprobs)
	}
	if cfg.MaxSessions < 0 {
		return nil, fmt.Errorf("%w: MaxSessions %d is negative", ErrConfig, cfg.MaxSessions)
	}
	switch cfg.Engine {
	case "", EngineVLLM, EngineSGLang:
	default:
		return nil, fmt.Errorf("%w: Engine %q, want %q, %q or empty", ErrConfig, cfg.Engine, EngineVLLM, EngineSGLang)
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.WeightVersion == "" {
		cfg.WeightVersion = "0"
		if cfg.Engine == EngineSGLang {
			cfg.WeightVersion = "default"
		}
	}
	if cfg.Load == nil {
		opts := []policy.ModelOption{policy.WithBackend(cfg.Model.Backend())}
		if cfg.Decode != nil {
			opts = append(opts, policy.WithDecoder(cfg.Decode))
		}
		if cfg.MaxSessions > 0 {
			opts = append(opts, policy.WithMaxSessions(cfg.MaxSessions))
		}
		cfg.Load = func(dir string) (*policy.Model, error) { return policy.Load(dir, opts...) }
	}
	mc := cfg.Model.Config()
	s := &Server{
		name:        cfg.Name,
		mode:        cfg.LogprobsMode,
		load:        cfg.Load,
		lim:         limits{engine: cfg.Engine, vocab: mc.VocabSize, maxLen: mc.MaxPositionEmbeddings, encode: cfg.Encode, decode: cfg.Decode},
		maxSessions: cfg.MaxSessions,
		created:     time.Now().Unix(),
		reloading:   make(chan struct{}, 1),
		gen: func(ctx context.Context, m *policy.Model, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
			return m.Generate(ctx, reqs)
		},
		rpcPath:  cfg.ModelPath,
		adapters: make(map[string]*engine),
		calls:    make(map[*call]struct{}),
		wake:     make(chan struct{}),
	}
	if cfg.Encode != nil || cfg.Decode != nil {
		s.tokenizerPath = cfg.ModelPath
	}
	if v, err := strconv.Atoi(cfg.WeightVersion); err == nil {
		s.lastInt = v
	}
	if cfg.Chat != nil {
		rec, err := s.newChat(*cfg.Chat)
		if err != nil {
			return nil, err
		}
		s.chat = rec
	}
	s.eng = s.newEngine(cfg.Model, cfg.ModelPath, cfg.WeightVersion)
	s.routes = s.buildRoutes()
	return s, nil
}

func (s *Server) newEngine(m *policy.Model, path, version string) *engine {
	e := &engine{model: m, path: path, version: version, eos: make(map[int]bool)}
	for _, id := range m.EOSTokenIDs() {
		e.eos[id] = true
	}
	if s.maxSessions > 0 {
		e.prefix = newPrefixCache(s.maxSessions)
	}
	return e
}

func (s *Server) buildRoutes() map[string]map[string]http.HandlerFunc {
	get, post := http.MethodGet, http.MethodPost
	routes := map[string]map[string]http.HandlerFunc{}
	add := func(path string, h http.HandlerFunc, methods ...string) {
		routes[path] = map[string]http.HandlerFunc{}
		for _, m := range methods {
			routes[path][m] = h
		}
	}
	add("/v1/completions", s.handleCompletions, post)
	add("/generate", s.handleGenerate, post, http.MethodPut)
	add("/health", s.handleHealth, get)
	add("/v1/models", s.handleModels, get)
	add("/model_info", s.handleModelInfo, get)
	add("/get_model_info", s.handleModelInfo, get)
	add("/get_weight_version", s.handleWeightVersion, get)
	add("/update_weights_from_disk", s.handleUpdateWeightsFromDisk, post)
	add("/collective_rpc", s.handleCollectiveRPC, post)
	add("/pause", s.handlePause, post)
	add("/resume", s.handleResume, post)
	add("/is_paused", s.handleIsPaused, get)
	add("/pause_generation", s.handlePauseGeneration, post)
	add("/continue_generation", s.handleContinueGeneration, post)
	add("/reset_prefix_cache", s.handleResetPrefixCache, post)
	add("/flush_cache", s.handleFlushCache, get, post)
	add("/v1/load_lora_adapter", s.handleVLLMLoadAdapter, post)
	add("/v1/unload_lora_adapter", s.handleVLLMUnloadAdapter, post)
	add("/load_lora_adapter", s.handleSGLangLoadAdapter, post)
	add("/unload_lora_adapter", s.handleSGLangUnloadAdapter, post)
	return routes
}

// ServeHTTP routes a request to its endpoint, GET /v1/models/<id> among
// them. An unknown path is a 404 and a known path with another method a
// 405 (with an Allow header), each with OpenAI's error object
// {"error": {"message", "type", "param", "code"}}, so that OpenAI's
// clients show what went wrong: "Invalid URL (POST /v1/embeddings)"
// as OpenAI's API words an unknown path, or "Method Not Allowed (GET
// /v1/completions; allowed: POST)". (vLLM and SGLang answer FastAPI's
// {"detail": "Not Found"}, which those clients show as "(no body)".)
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.serveChat(w, r) {
		return
	}
	methods, ok := s.routes[r.URL.Path]
	if !ok && strings.HasPrefix(r.URL.Path, modelsPrefix) && len(r.URL.Path) > len(modelsPrefix) {
		methods, ok = map[string]http.HandlerFunc{http.MethodGet: s.handleModel}, true
	}
	if !ok {
		writeOpenAIError(w, &apiError{Status: http.StatusNotFound, Type: "NotFoundError",
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)})
		return
	}
	h, ok := methods[r.Method]
	if !ok {
		allow := make([]string, 0, len(methods))
		for m := range methods {
			allow = append(allow, m)
		}
		sort.Strings(allow)
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeOpenAIError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: "MethodNotAllowedError",
			Message: fmt.Sprintf("Method Not Allowed (%s %s; allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", "))})
		return
	}
	h(w, r)
}

// reported is the weight version the server tells clients for eng's
// weights: nil with EngineVLLM, as vLLM reports none.
func (s *Server) reported(eng *engine) *string {
	if s.lim.engine == EngineVLLM {
		return nil
	}
	v := eng.version
	return &v
}

// WeightVersion returns the version of the weights being served (also
// with EngineVLLM, which tells clients none).
func (s *Server) WeightVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.version
}

// Close stops the server: requests waiting for admission and those
// generating end at once (answering 503), later requests are refused
// with 503, and the model is closed. Close waits only for the
// generations it cancelled to return, which they do at their next
// scheduler step. Shut the http.Server down first to let requests in
// flight finish. Closing twice is a no-op.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancelCallsLocked(ErrClosed)
	s.broadcastLocked()
	// Cancelled generations return at their scheduler's next step.
	_ = s.drainLocked(context.Background())
	eng := s.eng
	adapters := s.adapters
	s.adapters = map[string]*engine{}
	s.mu.Unlock()
	var errs []error
	if err := eng.model.Close(); err != nil {
		errs = append(errs, fmt.Errorf("serve: closing the model: %w", err))
	}
	for name, a := range adapters {
		if err := a.model.Close(); err != nil {
			errs = append(errs, fmt.Errorf("serve: closing adapter %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// broadcastLocked wakes everything waiting on a change of state.
func (s *Server) broadcastLocked() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// waitLocked releases s.mu until the state changes or ctx ends.
func (s *Server) waitLocked(ctx context.Context) error {
	ch := s.wake
	s.mu.Unlock()
	defer s.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drainLocked waits until no generation runs.
func (s *Server) drainLocked(ctx context.Context) error {
	for len(s.calls) > 0 {
		if err := s.waitLocked(ctx); err != nil {
			return err
		}
	}
	return nil
}

// cancelCallsLocked cancels every generation in flight with cause.
func (s *Server) cancelCallsLocked(cause error) {
	for c := range s.calls {
		c.cancel(cause)
	}
}

// admit waits until generation may start — no pause, no swap in
// progress — and registers a call on the current engine, or on the
// loaded adapter of that name (an *unknownAdapterError when none is).
func (s *Server) admit(ctx context.Context, adapter string) (*call, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting++
	defer func() { s.waiting-- }()
	for {
		if s.closed {
			return nil, ErrClosed
		}
		if !s.paused && !s.swapping {
			break
		}
		if err := s.waitLocked(ctx); err != nil {
			return nil, err
		}
	}
	eng := s.eng
	if adapter != "" {
		if eng = s.adapters[adapter]; eng == nil {
			return nil, s.unknownAdapterLocked(adapter)
		}
	}
	cctx, cancel := context.WithCancelCause(ctx)
	c := &call{eng: eng, ctx: cctx, cancel: cancel}
	s.calls[c] = struct{}{}
	eng.calls++
	return c, nil
}

// done unregisters a call; the last call on an unloaded adapter closes
// its model.
func (s *Server) done(c *call) {
	c.cancel(nil)
	s.mu.Lock()
	delete(s.calls, c)
	c.eng.calls--
	last := c.eng.retired && c.eng.calls == 0
	s.broadcastLocked()
	s.mu.Unlock()
	if last {
		_ = c.eng.model.Close()
	}
}

// outcome is what one completion request's generation came to.
type outcome struct {
	// gens are the generations, one per request; when aborted, those
	// the abort cut end with lm.FinishAbort and hold what they
	// generated until then, and gens is nil when the abort came before
	// the model generated anything.
	gens    []lm.Generation
	eng     *engine
	aborted bool
}

// gen returns generation i: what the model generated, or an empty
// aborted one when the abort came first.
func (o outcome) gen(i int) lm.Generation {
	if i < len(o.gens) {
		return o.gens[i]
	}
	return lm.Generation{FinishReason: lm.FinishAbort}
}

// cut reports whether an abort cut any of the n generations.
func (o outcome) cut(n int) bool {
	for i := range n {
		if o.gen(i).FinishReason == lm.FinishAbort {
			return true
		}
	}
	return false
}

// generate runs reqs in one Model.Generate call on the current weights,
// or on the loaded adapter of that name when adapter is not "". A pause
// or reload in abort mode ends it with outcome.aborted, each generation
// it cut holding what it generated on those weights (lm.FinishAbort),
// which outcome.eng names; a retracting
// pause makes it start over, on the weights served when generation
// continues.
func (s *Server) generate(ctx context.Context, reqs []lm.GenerateRequest, n int, adapter string) (outcome, error) {
	for {
		c, err := s.admit(ctx, adapter)
		if err != nil {
			return outcome{}, err
		}
		batch := reqs
		if c.eng.prefix != nil {
			batch = c.eng.prefix.assign(reqs, n)
		}
		gens, err := s.gen(c.ctx, c.eng.model, batch)
		cause := context.Cause(c.ctx)
		aborted := errors.Is(cause, errAborted)
		if err == nil && !aborted && c.eng.prefix != nil {
			// Before done: the model cannot be closed under us. An
			// aborted batch's sequences kept no KV cache.
			c.eng.prefix.record(batch, gens, c.eng.model)
		}
		s.done(c)
		switch {
		case err == nil:
			return outcome{gens: gens, eng: c.eng, aborted: aborted}, nil
		case ctx.Err() != nil:
			return outcome{}, ctx.Err()
		case errors.Is(cause, errRetracted):
			continue
		case errors.Is(cause, errAborted):
			return outcome{eng: c.eng, aborted: true}, nil
		case errors.Is(cause, ErrClosed):
			return outcome{}, ErrClosed
		default:
			return outcome{}, err
		}
	}
}

// pauseMode is how a pause treats the generations in flight.
type pauseMode int

const (
	// pauseAbort cancels them: they answer finish_reason "abort".
	pauseAbort pauseMode = iota
	// pauseWait lets them finish.
	pauseWait
	// pauseRetract cancels them and starts them over after the pause.
	pauseRetract
)

// pause holds new generations back and, per mode, aborts, retracts or
// waits for those in flight; it returns once none runs. With clearCache
// the prefix cache is dropped too. The pause stays in effect even when
// ctx ends while it waits.
func (s *Server) pause(ctx context.Context, mode pauseMode, clearCache bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.paused = true
	s.broadcastLocked()
	switch mode {
	case pauseAbort:
		s.cancelCallsLocked(errAborted)
	case pauseRetract:
		s.cancelCallsLocked(errRetracted)
	}
	if err := s.drainLocked(ctx); err != nil {
		return fmt.Errorf("waiting for the requests in flight: %w", err)
	}
	if clearCache {
		for _, e := range s.enginesLocked() {
			if e.prefix != nil {
				e.prefix.clear(e.model)
			}
		}
	}
	return nil
}

// resume lifts a pause.
func (s *Server) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused = false
	s.broadcastLocked()
}

// isPaused reports whether a pause is in effect.
func (s *Server) isPaused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// reloadOptions are a reload's settings beyond the folder.
type reloadOptions struct {
	version     string // "" means the next integer, unless keepVersion
	keepVersion bool   // "" version keeps the current one (SGLang's way)
	abort       bool   // abort the generations in flight instead of waiting
	keepPause   bool   // leave generation paused afterwards
}

// errLoad marks a checkpoint that failed to load or does not fit.
var errLoad = errors.New("serve: loading weights")

// takeReload waits for the right to change the served models (reloads,
// adapter loads and unloads run one at a time) and returns its release.
func (s *Server) takeReload(ctx context.Context) (release func(), err error) {
	select {
	case s.reloading <- struct{}{}:
		return func() { <-s.reloading }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for another reload: %w", ctx.Err())
	}
}

// reload serves the checkpoint in dir: it loads it while generation goes
// on, then takes the exclusive section — new generations wait, those in
// flight finish (or are aborted) — swaps the models, closes the old one
// and sets the weight version. It returns the new version and how many
// requests were waiting for admission at the swap. On any failure the
// old weights keep serving.
func (s *Server) reload(ctx context.Context, dir string, o reloadOptions) (version string, held int, err error) {
	release, err := s.takeReload(ctx)
	if err != nil {
		return "", 0, err
	}
	defer release()

	s.mu.Lock()
	closed, cur := s.closed, s.eng
	s.mu.Unlock()
	if closed {
		return "", 0, ErrClosed
	}
	if dir == "" {
		return "", 0, fmt.Errorf("%w: no checkpoint folder given", errLoad)
	}
	m, err := s.load(dir)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %w", errLoad, err)
	}
	if err := sameArchitecture(cur.model.Config(), m.Config()); err != nil {
		_ = m.Close()
		return "", 0, fmt.Errorf("%w: %s: %w", errLoad, dir, err)
	}
	// The adapters move onto the new weights: copies of them, prepared
	// while generation goes on, take the adapters' values in the
	// exclusive section below.
	s.mu.Lock()
	olds := s.sortedAdaptersLocked()
	s.mu.Unlock()
	moved, err := s.prepareAdapters(m, olds)
	if err != nil {
		_ = m.Close()
		return "", 0, fmt.Errorf("%w: %s: %w", errLoad, dir, err)
	}
	closeAll := func() {
		_ = m.Close()
		for _, a := range moved {
			_ = a.Close()
		}
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		closeAll()
		return "", 0, ErrClosed
	}
	s.swapping = true
	s.broadcastLocked()
	if o.abort {
		s.cancelCallsLocked(errAborted)
	}
	if err := s.drainLocked(ctx); err != nil || s.closed {
		s.swapping = false
		s.broadcastLocked()
		s.mu.Unlock()
		closeAll()
		if err == nil {
			err = ErrClosed
		}
		return "", 0, fmt.Errorf("waiting for the requests in flight: %w", err)
	}
	// Nothing generates now: the adapters' values can be read.
	if err := copyAdapters(olds, moved); err != nil {
		s.swapping = false
		s.broadcastLocked()
		s.mu.Unlock()
		closeAll()
		return "", 0, fmt.Errorf("%w: %s: %w", errLoad, dir, err)
	}
	version = o.version
	if v, err := strconv.Atoi(version); err == nil {
		s.lastInt = v
	} else if version == "" && o.keepVersion {
		version = s.eng.version
	} else if version == "" {
		s.lastInt++
		version = strconv.Itoa(s.lastInt)
	}
	old := s.eng
	s.eng = s.newEngine(m, dir, version)
	for i, a := range olds {
		e := s.newEngine(moved[i], a.path, version)
		e.name, e.lora, e.seq, e.created = a.name, a.lora, a.seq, a.created
		s.adapters[a.name] = e
	}
	s.rpcPath = dir
	s.swapping = false
	if o.keepPause {
		s.paused = true
	}
	held = s.waiting
	s.broadcastLocked()
	s.mu.Unlock()
	var errs []error
	if err := old.model.Close(); err != nil {
		errs = append(errs, fmt.Errorf("serve: closing the old model: %w", err))
	}
	for _, a := range olds {
		if err := a.model.Close(); err != nil {
			errs = append(errs, fmt.Errorf("serve: closing adapter %q on the old weights: %w", a.name, err))
		}
	}
	return version, held, errors.Join(errs...)
}

// sameArchitecture checks that next can take cur's place: the same model
// type, the same tensors with the same shapes, and the same context
// length (requests are checked against it before they are admitted).
func sameArchitecture(cur, next policy.Config) error {
	if cur.ModelType != next.ModelType {
		return fmt.Errorf("model_type %q, the served model is %q", next.ModelType, cur.ModelType)
	}
	if cur.MaxPositionEmbeddings != next.MaxPositionEmbeddings {
		return fmt.Errorf("max_position_embeddings %d, the served model has %d", next.MaxPositionEmbeddings, cur.MaxPositionEmbeddings)
	}
	shapes := make(map[string][]int)
	for _, t := range next.TensorSpecs() {
		shapes[t.Name] = t.Shape
	}
	if err := cur.CheckTensors(shapes); err != nil {
		return fmt.Errorf("the weights do not fit the served model: %w", err)
	}
	return nil
}

// snapshot returns the current engine and whether the server is closed.
func (s *Server) snapshot() (*engine, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng, s.closed
}

// clearPrefix drops the prefix caches of the base weights and of every
// adapter.
func (s *Server) clearPrefix() {
	s.mu.Lock()
	engines := s.enginesLocked()
	s.mu.Unlock()
	for _, e := range engines {
		if e.prefix != nil {
			e.prefix.clear(e.model)
		}
	}
}

// enginesLocked lists the base engine and the adapters'.
func (s *Server) enginesLocked() []*engine {
	out := []*engine{s.eng}
	for _, a := range s.adapters {
		out = append(out, a)
	}
	return out
}

// modelAdapter maps a request's "model" to the adapter it names: "" for
// an absent or empty name or the served model's, as vLLM takes them.
func (s *Server) modelAdapter(name *string) string {
	if name == nil || *name == s.name {
		return ""
	}
	return *name
}
