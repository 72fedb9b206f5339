package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrl/agentrl/lm"
	"golang.org/x/sync/errgroup"
)

// ErrConfig is wrapped by New's error for an invalid Config.
var ErrConfig = errors.New("openai: invalid configuration")

// ErrWeightVersion is wrapped by the error for a response generated with
// other weights than Config.WeightVersion says the servers hold.
var ErrWeightVersion = errors.New("openai: server serves another weight version")

// ErrUnbounded is wrapped by the error for a request with no bound on its
// new tokens (lm.SampleParams.MaxNewTokens 0: up to the context) sent to
// a server whose context length is unknown: neither Config.MaxModelLen
// nor the server's GET /v1/models gives it. Such a request is never sent:
// vLLM would read a missing or null max_tokens as 16 tokens.
var ErrUnbounded = errors.New("openai: no bound on the new tokens and the server's context length is unknown")

// ErrContextLength is wrapped by the error for a prompt that leaves no
// room for a new token in the server's context.
var ErrContextLength = errors.New("openai: prompt leaves no room in the server's context")

// HTTPError is a non-200 answer. 5xx and 429 answers are retried, other
// statuses are not.
type HTTPError struct {
	URL        string
	StatusCode int
	// Body is the start of the response body (vLLM's or SGLang's error
	// JSON).
	Body string
}

// Error names the URL, the status and the server's answer.
func (e *HTTPError) Error() string {
	return fmt.Sprintf("openai: POST %s: status %d: %s", e.URL, e.StatusCode, e.Body)
}

// API names the HTTP API through which a Sampler generates.
type API string

const (
	// APICompletions is the OpenAI-compatible POST /v1/completions with
	// vLLM's extensions (vllm/entrypoints/openai/protocol.py,
	// CompletionRequest): token ids in as "prompt", token ids out as
	// choices[].token_ids or "token_id:N" in logprobs.tokens
	// (return_tokens_as_token_ids). vLLM and package serve speak it; the
	// zero value of API means it.
	APICompletions API = "completions"
	// APISGLangGenerate is SGLang's native POST /generate
	// (python/sglang/srt/entrypoints/http_server.py; the request is
	// GenerateReqInput in python/sglang/srt/managers/io_struct.py):
	// "input_ids" in, "output_ids" and meta_info.output_token_logprobs
	// ([logprob, token id, text] per token) out. SGLang's own
	// /v1/completions returns decoded text in logprobs.tokens, never
	// token ids, so this is how SGLang servers are sampled. Package serve
	// speaks it too.
	APISGLangGenerate API = "sglang-generate"
)

// Config configures a Sampler. BaseURLs is required; every other field's
// zero value means the default given on it: vLLM's completions API, no
// API key, a client of the Sampler's own, 10-minute attempts, 4 retries
// with 200ms–10s backoff, a 5s cooldown, 256 requests in flight and the
// server's default log-probabilities.
type Config struct {
	// BaseURLs are the servers, such as "http://10.0.0.5:8000" or
	// "http://10.0.0.5:8000/v1". With APICompletions requests go to
	// <base>/v1/completions, with APISGLangGenerate to <base>/generate
	// (a trailing /v1 is dropped: "http://10.0.0.5:30000/v1" posts to
	// "http://10.0.0.5:30000/generate"). At least one is required.
	BaseURLs []string
	// API is the servers' API; empty means APICompletions. All BaseURLs
	// speak the same one.
	API API
	// Model is sent as "model" with APICompletions; vLLM serves one model
	// and may take it empty. SGLang's /generate has no such field.
	Model string
	// Adapter, when set, is called once per request and names the LoRA
	// adapter that generates it; "" means the base model. With
	// APICompletions the name is sent as "model" in place of Model (vLLM
	// addresses an adapter loaded through /v1/load_lora_adapter or
	// --lora-modules by its name, vllm/entrypoints/openai/models/serving.py),
	// with APISGLangGenerate as "lora_path" (GenerateReqInput.lora_path,
	// which names an adapter loaded through /load_lora_adapter). A server
	// that does not hold the adapter — vLLM's 404 for an unknown model,
	// SGLang's 400 "not loaded" — or a completion whose "model" names
	// another model fails with an error wrapping ErrWeightVersion and is
	// tried on another server like a 5xx answer, as a server that missed
	// a weight update is. Package fleet sets it to publish adapters.
	Adapter func() string
	// APIKey, when set, is sent as "Authorization: Bearer <APIKey>".
	APIKey string
	// Client sends the requests; nil means a client of its own. Its
	// Timeout, if any, bounds every attempt on top of RequestTimeout.
	Client *http.Client
	// RequestTimeout bounds each attempt; 0 means 10 minutes.
	RequestTimeout time.Duration
	// MaxRetries is how many times a request is retried after a
	// connection error, a timeout, a 429 (too many requests) or a 5xx
	// answer (never after another 4xx);
	// 0 means 4, negative means none.
	MaxRetries int
	// BackoffBase and BackoffMax shape the wait before a retry on a
	// server already tried: BackoffBase·2^k capped at BackoffMax, half of
	// it fixed and half drawn at random (jitter). 0 means 200ms and 10s.
	BackoffBase, BackoffMax time.Duration
	// Cooldown is how long a server that failed is avoided while another
	// is available; 0 means 5s.
	Cooldown time.Duration
	// MaxConcurrency bounds the requests in flight across all servers;
	// 0 means 256.
	MaxConcurrency int
	// LogprobsMode says what log-probabilities the servers return (vLLM's
	// --logprobs-mode); empty means the API's default: RawLogprobs for
	// APICompletions (vLLM's default), ScaledLogprobs for
	// APISGLangGenerate (SGLang's default; RawLogprobs when SGLang runs
	// with SGLANG_RETURN_ORIGINAL_LOGPROB=1). Package serve returns
	// RawLogprobs or ProcessedLogprobs, per its own Config.LogprobsMode,
	// through either API.
	LogprobsMode LogprobsMode
	// MaxModelLen is the servers' context length in tokens, as they
	// report it (vLLM's --max-model-len, SGLang's context length). Every
	// request is sent with a concrete token bound — vLLM turns a missing
	// or null max_tokens into 16 (vllm/entrypoints/openai/completion/
	// protocol.py, CompletionRequest.normalize_null_max_tokens) — so a
	// request whose MaxNewTokens is 0 ("up to the context") needs the
	// context length: it gets max_tokens (max_new_tokens) = MaxModelLen −
	// prompt length, one less for SGLang, which refuses prompt +
	// max_new_tokens ≥ its context length (TokenizerManager.
	// _validate_one_request). 0 means each server's own: the
	// max_model_len of GET /v1/models (the card of Model, or the first
	// that gives one; vLLM's and SGLang's both report it), read the first
	// time a request needs it and kept. A server that reports none cannot
	// take such requests (ErrUnbounded). Where the length is known, a
	// MaxNewTokens beyond the room left is cut to it, so that generation
	// ends at the context as a local model's does rather than being
	// refused; a prompt that leaves no room fails with ErrContextLength.
	MaxModelLen int
	// WeightVersion, when set, is called before each attempt with the
	// index in BaseURLs of the server about to be tried, and returns the
	// weight version that server must be serving ("" checks nothing
	// there: a fleet whose update API cannot name versions on a server
	// leaves that server's unchecked). A response that
	// reports another version (SGLang's and package serve's
	// "metadata.weight_version" from /v1/completions and
	// "meta_info.weight_version" from /generate) fails with an error
	// wrapping ErrWeightVersion that names the server, and is tried on another
	// server like a 5xx answer. Responses without a version (vLLM's) are
	// not checked. nil checks nothing.
	WeightVersion func(server int) string
	// Partial makes a generation that the server aborted — a pause or a
	// weight update in abort mode, finish_reason "abort" (vLLM) or
	// {"type": "abort"} (SGLang) — come back as it is, lm.FinishAbort
	// with the tokens and log-probabilities generated until then and the
	// weight version that generated them, for the caller to continue
	// from (a partial rollout: package rollout continues the turn).
	// Without it the request is tried again from the start, and fails
	// with an error wrapping ErrAborted when no try is left.
	Partial bool
}

// Sampler is a lm.Sampler over vLLM-compatible /v1/completions
// servers or SGLang /generate servers (Config.API): it sends token ids
// and reads back token ids and per-token log-probabilities, never text.
// Each request goes to the server with the fewest requests in flight
// (round robin among equals), avoiding servers that failed recently;
// failed attempts are retried on another server with exponential backoff
// and jitter. A Sampler is safe for concurrent use.
type Sampler struct {
	cfg      Config
	client   *http.Client
	backends []*backend
	slots    chan struct{}
	rr       atomic.Uint64
}

type backend struct {
	index    int // in Config.BaseURLs
	url      string
	models   string // GET /v1/models, where the context length is read
	inflight atomic.Int64
	// probing holds a token while the context length is read.
	probing  chan struct{}
	mu       sync.Mutex
	downTill time.Time
	// ctxLen is the server's context length (0: it reports none) once
	// ctxKnown; under mu.
	ctxLen   int
	ctxKnown bool
}

// New checks cfg and returns a Sampler.
func New(cfg Config) (*Sampler, error) {
	if len(cfg.BaseURLs) == 0 {
		return nil, fmt.Errorf("%w: no BaseURLs", ErrConfig)
	}
	if cfg.RequestTimeout < 0 || cfg.BackoffBase < 0 || cfg.BackoffMax < 0 || cfg.Cooldown < 0 || cfg.MaxConcurrency < 0 || cfg.MaxModelLen < 0 {
		return nil, fmt.Errorf("%w: negative duration or limit", ErrConfig)
	}
	s := &Sampler{cfg: cfg, client: cfg.Client}
	endpoint, defaultMode := completionsURL, RawLogprobs
	switch cfg.API {
	case "", APICompletions:
		s.cfg.API = APICompletions
	case APISGLangGenerate:
		endpoint, defaultMode = generateURL, ScaledLogprobs
	default:
		return nil, fmt.Errorf("%w: API %q, want %q or %q", ErrConfig, cfg.API, APICompletions, APISGLangGenerate)
	}
	switch cfg.LogprobsMode {
	case "":
		s.cfg.LogprobsMode = defaultMode
	case RawLogprobs, ProcessedLogprobs, ScaledLogprobs:
	default:
		return nil, fmt.Errorf("%w: LogprobsMode %q", ErrConfig, cfg.LogprobsMode)
	}
	for i, base := range cfg.BaseURLs {
		u, err := endpoint(base)
		if err != nil {
			return nil, fmt.Errorf("%w: BaseURLs[%d]: %v", ErrConfig, i, err)
		}
		m, err := ModelsURL(base)
		if err != nil {
			return nil, fmt.Errorf("%w: BaseURLs[%d]: %v", ErrConfig, i, err)
		}
		s.backends = append(s.backends, &backend{index: i, url: u, models: m, probing: make(chan struct{}, 1)})
	}
	if s.client == nil {
		s.client = &http.Client{}
	}
	if s.cfg.RequestTimeout == 0 {
		s.cfg.RequestTimeout = 10 * time.Minute
	}
	switch {
	case s.cfg.MaxRetries == 0:
		s.cfg.MaxRetries = 4
	case s.cfg.MaxRetries < 0:
		s.cfg.MaxRetries = 0
	}
	if s.cfg.BackoffBase == 0 {
		s.cfg.BackoffBase = 200 * time.Millisecond
	}
	if s.cfg.BackoffMax == 0 {
		s.cfg.BackoffMax = 10 * time.Second
	}
	if s.cfg.Cooldown == 0 {
		s.cfg.Cooldown = 5 * time.Second
	}
	if s.cfg.MaxConcurrency == 0 {
		s.cfg.MaxConcurrency = 256
	}
	s.slots = make(chan struct{}, s.cfg.MaxConcurrency)
	return s, nil
}

// completionsURL is <base>/v1/completions (a base that already ends in
// /v1 or /completions keeps it).
func completionsURL(base string) (string, error) {
	return endpointURL(base, func(p string) string {
		switch {
		case strings.HasSuffix(p, "/completions"):
			return p
		case strings.HasSuffix(p, "/v1"):
			return p + "/completions"
		default:
			return p + "/v1/completions"
		}
	})
}

// ModelsURL is the GET /v1/models of a server given by a base URL as
// Config.BaseURLs takes them: "http://h:8000", "http://h:8000/v1",
// "http://h:8000/v1/completions" and "http://h:30000/generate" all give
// "http://h:8000/v1/models" (h:30000 for the last). vLLM and SGLang list
// their served model there, with its context length (max_model_len).
func ModelsURL(base string) (string, error) {
	return endpointURL(base, func(p string) string {
		p = strings.TrimSuffix(p, "/completions")
		p = strings.TrimSuffix(p, "/generate")
		p = strings.TrimSuffix(p, "/v1")
		return p + "/v1/models"
	})
}

// endpointURL checks that base is an http(s) URL and returns it with its
// path (without a trailing slash) mapped by endpoint.
func endpointURL(base string, endpoint func(path string) string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL", base)
	}
	u.Path = endpoint(strings.TrimRight(u.Path, "/"))
	return u.String(), nil
}

// Generate sends each request concurrently (within MaxConcurrency) and
// returns the generations in order. It fails with the first request that
// fails after its retries, or with ctx's error.
func (s *Sampler) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	for i, r := range reqs {
		if len(r.Prompt) == 0 {
			return nil, fmt.Errorf("openai: request %d: empty prompt", i)
		}
		if err := lm.CheckSampleParams(r.Params); err != nil {
			return nil, fmt.Errorf("openai: request %d: %w", i, err)
		}
		if r.Params.TopLogprobs > 0 {
			return nil, fmt.Errorf("openai: request %d: %w: top log-probabilities (TopLogprobs %d) are not supported by this sampler", i, lm.ErrSampling, r.Params.TopLogprobs)
		}
	}
	out := make([]lm.Generation, len(reqs))
	g, gctx := errgroup.WithContext(ctx)
	for i := range reqs {
		g.Go(func() error {
			gen, err := s.generate(gctx, &reqs[i])
			if err != nil {
				return fmt.Errorf("openai: request %d: %w", i, err)
			}
			out[i] = gen
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return out, nil
}

// retryable marks an attempt error worth another try.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

func (s *Sampler) generate(ctx context.Context, r *lm.GenerateRequest) (lm.Generation, error) {
	adapter := ""
	if s.cfg.Adapter != nil {
		adapter = s.cfg.Adapter()
	}
	// encode is the request's body with maxTokens, which depends on the
	// server's context length.
	encode := func(maxTokens int) ([]byte, error) {
		var req any
		switch s.cfg.API {
		case APISGLangGenerate:
			g := newGenerateRequest(r.Prompt, r.Params, maxTokens)
			g.LoraPath = adapter
			req = g
		default:
			model := s.cfg.Model
			if adapter != "" {
				model = adapter
			}
			req = newCompletionRequest(model, r.Prompt, r.Params, maxTokens)
		}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		return body, nil
	}
	tried := make(map[*backend]bool, len(s.backends))
	// lastOf keeps each server's latest failure, so that the final error
	// names every server that failed this request and why, whichever of
	// them happened to be tried last.
	lastOf := make(map[*backend]error, len(s.backends))
	attempts := s.cfg.MaxRetries + 1
	for a := range attempts {
		b := s.pick(tried)
		if tried[b] {
			// Every server has failed this request: wait before the next round.
			if err := sleep(ctx, s.backoff(a)); err != nil {
				return lm.Generation{}, err
			}
		}
		tried[b] = true
		gen, err := s.attempt(ctx, b, r, encode, adapter)
		if err == nil {
			b.setDown(time.Time{})
			return gen, nil
		}
		if ctx.Err() != nil {
			return lm.Generation{}, ctx.Err()
		}
		var re retryable
		if !errors.As(err, &re) {
			return lm.Generation{}, err
		}
		b.setDown(time.Now().Add(s.cfg.Cooldown))
		lastOf[b] = re.err
	}
	var errs []error
	for _, b := range s.backends {
		if err := lastOf[b]; err != nil {
			errs = append(errs, err)
		}
	}
	return lm.Generation{}, fmt.Errorf("%d attempts failed on %d of %d servers: %w", attempts, len(errs), len(s.backends), errors.Join(errs...))
}

// pick returns the backend to try: one not yet tried for this request and
// not cooling down if possible, then the fewest requests in flight,
// taking turns among equals.
func (s *Sampler) pick(tried map[*backend]bool) *backend {
	now := time.Now()
	start := int(s.rr.Add(1) % uint64(len(s.backends)))
	var best *backend
	var bestKey [3]int64
	for k := range s.backends {
		b := s.backends[(start+k)%len(s.backends)]
		key := [3]int64{0, 0, b.inflight.Load()}
		if tried[b] {
			key[0] = 1
		}
		if b.down(now) {
			key[1] = 1
		}
		if best == nil || less(key, bestKey) {
			best, bestKey = b, key
		}
	}
	return best
}

func less(a, b [3]int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func (b *backend) down(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.Before(b.downTill)
}

func (b *backend) setDown(till time.Time) {
	b.mu.Lock()
	b.downTill = till
	b.mu.Unlock()
}

// backoff is the wait before attempt a (a ≥ 1): half of
// min(BackoffMax, BackoffBase·2^(a-1)) plus a random part up to the other
// half.
func (s *Sampler) backoff(a int) time.Duration {
	d := s.cfg.BackoffBase
	for i := 1; i < a && d < s.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, s.cfg.BackoffMax)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// maxBody bounds a response body: 64 MiB holds the logprobs of far more
// tokens than any context.
const maxBody = 64 << 20

// attempt sends request r, encoded for b's context, to server b.
func (s *Sampler) attempt(ctx context.Context, b *backend, r *lm.GenerateRequest, encode func(maxTokens int) ([]byte, error), adapter string) (lm.Generation, error) {
	p := r.Params
	maxTokens, err := s.maxTokens(ctx, b, len(r.Prompt), p.MaxNewTokens)
	if err != nil {
		return lm.Generation{}, err
	}
	body, err := encode(maxTokens)
	if err != nil {
		return lm.Generation{}, err
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return lm.Generation{}, ctx.Err()
	}
	defer func() { <-s.slots }()
	b.inflight.Add(1)
	defer b.inflight.Add(-1)

	want := ""
	if s.cfg.WeightVersion != nil {
		want = s.cfg.WeightVersion(b.index)
	}
	actx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, b.url, bytes.NewReader(body))
	if err != nil {
		return lm.Generation{}, fmt.Errorf("openai: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if s.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.APIKey)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// Connection errors and timeouts are worth another try; a
		// cancelled ctx is seen by the caller.
		return lm.Generation{}, retryable{fmt.Errorf("openai: POST %s: %w", b.url, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return lm.Generation{}, retryable{fmt.Errorf("openai: POST %s: reading the response: %w", b.url, err)}
	}
	if resp.StatusCode != http.StatusOK {
		he := &HTTPError{URL: b.url, StatusCode: resp.StatusCode, Body: truncate(string(data), 512)}
		// 429 is the server shedding load (vLLM's and most gateways' rate
		// limit), not a fault of the request: like a 5xx, another try,
		// perhaps on another server, can succeed.
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return lm.Generation{}, retryable{he}
		}
		if adapter != "" && s.adapterMissing(resp.StatusCode, data) {
			// Like a server that missed a weight update: another may hold
			// the adapter.
			return lm.Generation{}, retryable{fmt.Errorf("%w: POST %s: adapter %q is not loaded there: %w", ErrWeightVersion, b.url, adapter, he)}
		}
		return lm.Generation{}, he
	}
	if len(data) > maxBody {
		return lm.Generation{}, fmt.Errorf("%w: POST %s: body larger than %d bytes", ErrBadResponse, b.url, maxBody)
	}
	var g lm.Generation
	model := ""
	switch s.cfg.API {
	case APISGLangGenerate:
		g, err = decodeGenerate(data, p, s.cfg.LogprobsMode)
	default:
		g, model, err = decodeCompletionModel(data, p, s.cfg.LogprobsMode)
	}
	if err != nil {
		return lm.Generation{}, fmt.Errorf("POST %s: %w", b.url, err)
	}
	if g.FinishReason == lm.FinishAbort && !s.cfg.Partial {
		// The server, not the request, ended it (a pause or a weight
		// update): another try, perhaps elsewhere, can succeed.
		return lm.Generation{}, retryable{fmt.Errorf("POST %s: %w after %d tokens", b.url, ErrAborted, len(g.Tokens))}
	}
	if adapter != "" && model != "" && model != adapter {
		// vLLM names the adapter that answered: another model's tokens
		// are another policy's.
		return lm.Generation{}, retryable{fmt.Errorf("%w: POST %s: answered by model %q, want adapter %q", ErrWeightVersion, b.url, model, adapter)}
	}
	if want != "" && g.WeightVersion != "" && g.WeightVersion != want {
		// A server that missed an update (or restarted from an old
		// checkpoint) must not contribute tokens: another may be current.
		return lm.Generation{}, retryable{fmt.Errorf("%w: POST %s: weight_version %q, want %q", ErrWeightVersion, b.url, g.WeightVersion, want)}
	}
	if len(g.Tokens) > maxTokens {
		return lm.Generation{}, fmt.Errorf("%w: POST %s: %d tokens for max_tokens %d", ErrBadResponse, b.url, len(g.Tokens), maxTokens)
	}
	return g, nil
}

// maxTokens is the bound on new tokens sent to server b for a prompt of
// promptLen tokens: want (lm.SampleParams.MaxNewTokens), cut to the room
// the server's context leaves where its length is known, or that room
// for want 0. It is never 0: a request the server would read as
// unbounded — or, for vLLM, as bounded at 16 — is not sent.
func (s *Sampler) maxTokens(ctx context.Context, b *backend, promptLen, want int) (int, error) {
	limit, err := s.contextLen(ctx, b, want == 0)
	if err != nil {
		return 0, err
	}
	if limit == 0 {
		if want == 0 {
			return 0, fmt.Errorf("%w: %s lists no max_model_len at GET %s: set lm.SampleParams.MaxNewTokens (a rollout engine's response budget does) or Config.MaxModelLen", ErrUnbounded, b.url, b.models)
		}
		return want, nil
	}
	room := limit - promptLen
	if s.cfg.API == APISGLangGenerate {
		room-- // SGLang refuses prompt + max_new_tokens ≥ context_len
	}
	if room < 1 {
		return 0, fmt.Errorf("%w: POST %s: a prompt of %d tokens in a context of %d", ErrContextLength, b.url, promptLen, limit)
	}
	if want == 0 || want > room {
		return room, nil
	}
	return want, nil
}

// contextLen is server b's context length: Config.MaxModelLen, or what
// b's GET /v1/models reported, read now when need is set and it was not
// read before; 0 when unknown. An answer, with or without a length, is
// kept; a server that could not be asked (a connection error, a 5xx) is
// asked again next time, and the error is retried like a failed attempt.
func (s *Sampler) contextLen(ctx context.Context, b *backend, need bool) (int, error) {
	if s.cfg.MaxModelLen > 0 {
		return s.cfg.MaxModelLen, nil
	}
	if n, known := b.context(); known || !need {
		return n, nil
	}
	select {
	case b.probing <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-b.probing }()
	if n, known := b.context(); known {
		return n, nil // read while this request waited
	}
	n, err := s.readContextLen(ctx, b)
	if err != nil {
		return 0, err
	}
	b.mu.Lock()
	b.ctxLen, b.ctxKnown = n, true
	b.mu.Unlock()
	return n, nil
}

func (b *backend) context() (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ctxLen, b.ctxKnown
}

// maxModelsBody bounds a /v1/models answer.
const maxModelsBody = 4 << 20

// readContextLen asks server b's GET /v1/models for its context length:
// 0 when it answers without one (or without the route); an error,
// retryable, when it cannot be asked.
func (s *Sampler) readContextLen(ctx context.Context, b *backend) (int, error) {
	actx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, b.models, nil)
	if err != nil {
		return 0, fmt.Errorf("openai: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if s.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.APIKey)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, retryable{fmt.Errorf("openai: GET %s: %w", b.models, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsBody))
	if err != nil {
		return 0, retryable{fmt.Errorf("openai: GET %s: reading the answer: %w", b.models, err)}
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return 0, retryable{&HTTPError{URL: b.models, StatusCode: resp.StatusCode, Body: truncate(string(data), 512)}}
	}
	if resp.StatusCode != http.StatusOK {
		return 0, nil
	}
	list, err := ParseModels(data)
	if err != nil {
		return 0, nil
	}
	return list.MaxModelLen(s.cfg.Model), nil
}

// adapterMissing reports whether a refusal says that the adapter a
// request named is not loaded on the server: vLLM answers an unknown
// model with 404 (OpenAIModelRegistry.check_model), SGLang's /generate
// answers 400 "The following requested LoRA adapters are not loaded"
// (lora_registry.py, LoRARegistry.acquire).
func (s *Sampler) adapterMissing(status int, body []byte) bool {
	if s.cfg.API == APISGLangGenerate {
		return status == http.StatusBadRequest && bytes.Contains(body, []byte("not loaded"))
	}
	return status == http.StatusNotFound
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
