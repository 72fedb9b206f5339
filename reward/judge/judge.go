package judge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"
)

// ErrConfig reports an invalid configuration.
var ErrConfig = errors.New("judge: invalid configuration")

// Message is one chat message to the judging model.
type Message struct {
	// Role is "system", "user" or "assistant".
	Role string `json:"role"`
	// Content is the message's text.
	Content string `json:"content"`
}

// Config says which model judges and how it is called. BaseURL and Model
// are required; every other zero field means the default in its comment.
type Config struct {
	// BaseURL is the endpoint's OpenAI-compatible root, the part before
	// /chat/completions: "http://127.0.0.1:8000/v1" for vLLM, SGLang or
	// package serve, "https://api.openai.com/v1" for OpenAI's API.
	BaseURL string
	// APIKeyEnv names the environment variable that holds the API key,
	// sent as a bearer token; it must be set when named. Empty sends no
	// key (a local server). The key itself is never configured as text,
	// so that it stays out of configs, logs and checkpoints.
	APIKeyEnv string
	// Model is the served model name the requests ask for.
	Model string
	// Render, when set, makes the judge a completions client: the
	// messages are rendered to one prompt text (typically the judging
	// model's chat template) and sent to /completions, for servers that
	// serve a model without a chat endpoint. It is called concurrently,
	// once per request. Nil sends the messages to /chat/completions.
	Render func([]Message) (string, error)
	// Temperature of the judge's sampling; 0 is greedy.
	Temperature float64
	// MaxTokens bounds one reply (max_completion_tokens in chat,
	// max_tokens in completions); zero means 1024.
	MaxTokens int
	// Stop lists stop strings sent with each request; nil sends none.
	Stop []string
	// Concurrency bounds the requests in flight at once, over every
	// reward built from this Judge; zero means 8.
	Concurrency int
	// Timeout is the deadline of one request, from sending it to the
	// whole reply; zero means 60 s. A request past it is abandoned,
	// counted in Stats.Timeouts and retried.
	Timeout time.Duration
	// Retries is how many times a failed request (a connection error, a
	// timeout, HTTP 408, 409, 429 or 5xx) is sent again before the
	// judgement is given up as failed; zero means 3, negative means none.
	// Other HTTP errors (400, 401, 404, …) are not retried.
	Retries int
	// BackoffBase and BackoffMax shape the wait before retry k (from 0):
	// b = min(BackoffMax, BackoffBase·2^k), then a uniform draw from
	// [b/2, b] ("equal jitter"), raised to the server's Retry-After when
	// it sends one, never above BackoffMax. Zero means 500 ms and 30 s.
	BackoffBase, BackoffMax time.Duration
	// Seed seeds the jitter's random source.
	Seed uint64
	// CacheSize bounds the verdicts kept, least recently used first out,
	// keyed by a hash of the model, the sampling settings and the whole
	// request (rubric, task, reference and response(s)); zero means 4096,
	// negative turns the cache off. Only verdicts that parsed are kept.
	CacheSize int
	// HTTPClient sends the requests; nil means a client of its own over
	// http.DefaultTransport. Deadlines come from contexts, so it needs no
	// Timeout.
	HTTPClient *http.Client
}

// Defaults of the zero Config fields.
const (
	defaultMaxTokens   = 1024
	defaultConcurrency = 8
	defaultTimeout     = 60 * time.Second
	defaultRetries     = 3
	defaultBackoffBase = 500 * time.Millisecond
	defaultBackoffMax  = 30 * time.Second
	defaultCacheSize   = 4096
	// maxFlightJoins bounds how often a judgement waits on an identical
	// one in flight whose caller then left, before it asks on its own.
	maxFlightJoins = 3
)

func (c Config) withDefaults() (Config, error) {
	u, err := url.Parse(c.BaseURL)
	switch {
	case c.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return c, fmt.Errorf("%w: BaseURL %q is not an http(s) URL", ErrConfig, c.BaseURL)
	case c.Model == "":
		return c, fmt.Errorf("%w: Model is required", ErrConfig)
	case c.MaxTokens < 0 || c.Concurrency < 0 || c.Timeout < 0 || c.BackoffBase < 0 || c.BackoffMax < 0:
		return c, fmt.Errorf("%w: MaxTokens, Concurrency, Timeout and the backoffs must not be negative", ErrConfig)
	case c.Temperature < 0 || c.Temperature != c.Temperature:
		return c, fmt.Errorf("%w: Temperature %g", ErrConfig, c.Temperature)
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = defaultMaxTokens
	}
	if c.Concurrency == 0 {
		c.Concurrency = defaultConcurrency
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	switch {
	case c.Retries == 0:
		c.Retries = defaultRetries
	case c.Retries < 0:
		c.Retries = 0
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = defaultBackoffBase
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = defaultBackoffMax
	}
	if c.BackoffMax < c.BackoffBase {
		return c, fmt.Errorf("%w: BackoffMax %v is below BackoffBase %v", ErrConfig, c.BackoffMax, c.BackoffBase)
	}
	if c.CacheSize == 0 {
		c.CacheSize = defaultCacheSize
	}
	return c, nil
}

// Judge is a judging model behind an OpenAI-compatible endpoint. Its
// methods build rewards (Pointwise, Ranking) that share its concurrency
// bound, cache and statistics. It is safe for concurrent use.
type Judge struct {
	cfg    Config
	chat   openai.ChatCompletionService
	comp   openai.CompletionService
	sem    *semaphore.Weighted
	cache  *lru.Cache[string, verdict] // nil when off
	flight singleflight.Group

	mu            sync.Mutex
	rng           *rand.Rand
	total, window Stats
}

// New returns a Judge for cfg. It reads the API key from the environment
// variable cfg.APIKeyEnv names, and sends nothing yet (Check does).
func New(cfg Config) (*Judge, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	key := ""
	if cfg.APIKeyEnv != "" {
		var ok bool
		if key, ok = os.LookupEnv(cfg.APIKeyEnv); !ok || key == "" {
			return nil, fmt.Errorf("%w: environment variable %s (APIKeyEnv) is not set", ErrConfig, cfg.APIKeyEnv)
		}
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	// The services are built without openai.NewClient, which would also
	// take OPENAI_API_KEY, OPENAI_BASE_URL and others from the
	// environment: the judge sends what Config says and nothing else.
	// Retries are the judge's own (counted, seeded, bounded).
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL), option.WithHTTPClient(hc), option.WithMaxRetries(0),
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	j := &Judge{
		cfg:  cfg,
		chat: openai.NewChatCompletionService(opts...),
		comp: openai.NewCompletionService(opts...),
		sem:  semaphore.NewWeighted(int64(cfg.Concurrency)),
		rng:  rand.New(rand.NewPCG(cfg.Seed, 0x6a75646765)),
	}
	if cfg.CacheSize > 0 {
		if j.cache, err = lru.New[string, verdict](cfg.CacheSize); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	return j, nil
}

// Check sends one short request, without retries, and returns its error:
// a program can call it before training to fail at once on a wrong URL,
// key or model name, instead of training on fallback scores.
func (j *Judge) Check(ctx context.Context) error {
	probe := []Message{{Role: "user", Content: "Reply with the word OK."}}
	if _, err := j.requestOnce(ctx, probe, nil); err != nil {
		return fmt.Errorf("judge: %s at %s: %w", j.cfg.Model, j.cfg.BaseURL, err)
	}
	return nil
}

// verdict is what a parsed reply says: one score per judged response,
// with the judge's explanation of each.
type verdict struct {
	scores []float64
	notes  []string
}

// question is one thing to ask the judge: the messages, how to read the
// reply, how often to ask again after a reply that does not parse, and
// what to say when asking again.
type question struct {
	msgs   []Message
	parse  func(reply string) (verdict, error)
	reasks int
	// correct is the message that asks again after a malformed reply; it
	// is given the parse error.
	correct func(error) string
	// format, when set, is the chat request's response_format.
	format *shared.ResponseFormatJSONSchemaParam
}

// noVerdict is the error of a judgement that reached no verdict: every
// reply was malformed, or the requests kept failing. Rewards turn it into
// their fallback score; any other error (the caller's context ended) is
// returned as it is.
type noVerdict struct {
	// replies counts the malformed replies; 0 for failed requests.
	replies int
	err     error
}

func (e *noVerdict) Error() string {
	if e.replies > 0 {
		return fmt.Sprintf("%d malformed replies, the last: %v", e.replies, e.err)
	}
	return "judge failed: " + e.err.Error()
}

func (e *noVerdict) Unwrap() error { return e.err }

// ask returns the verdict on q: from the cache, from an identical
// question in flight, or from the endpoint.
func (j *Judge) ask(ctx context.Context, q question) (verdict, error) {
	key := j.key(q)
	if v, ok := j.cached(key); ok {
		return v, nil
	}
	for joins := 0; joins < maxFlightJoins; joins++ {
		led := false
		ch := j.flight.DoChan(key, func() (any, error) {
			led = true
			return j.resolve(ctx, q, key)
		})
		var r singleflight.Result
		select {
		case <-ctx.Done():
			return verdict{}, ctx.Err()
		case r = <-ch:
		}
		v, _ := r.Val.(verdict)
		if led {
			return v, r.Err
		}
		j.count(func(s *Stats) { s.Shared++ })
		var nv *noVerdict
		if r.Err != nil && !errors.As(r.Err, &nv) && isContextErr(r.Err) && ctx.Err() == nil {
			continue // the caller that asked left before the answer came
		}
		return v, r.Err
	}
	return j.resolve(ctx, q, key)
}

// cached returns the cached verdict under key, counting a hit.
func (j *Judge) cached(key string) (verdict, bool) {
	if j.cache == nil {
		return verdict{}, false
	}
	v, ok := j.cache.Get(key)
	if ok {
		j.count(func(s *Stats) { s.CacheHits++ })
	}
	return v, ok
}

// resolve asks the endpoint, asking again after each malformed reply
// (with the reply and the correction added to the conversation, so that
// a greedy judge does not repeat itself), up to q.reasks times.
func (j *Judge) resolve(ctx context.Context, q question, key string) (v verdict, err error) {
	defer func() {
		if r := recover(); r != nil { // a panic here would end the process (singleflight.DoChan)
			err = &noVerdict{err: fmt.Errorf("panic: %v", r)}
		}
	}()
	if v, ok := j.cached(key); ok {
		return v, nil
	}
	msgs := q.msgs
	var perr error
	for try := 0; try <= q.reasks; try++ {
		reply, err := j.request(ctx, msgs, q.format)
		if err != nil {
			return verdict{}, err
		}
		if v, perr = q.parse(reply); perr == nil {
			if j.cache != nil {
				j.cache.Add(key, v)
			}
			j.count(func(s *Stats) { s.Verdicts++ })
			return v, nil
		}
		j.count(func(s *Stats) { s.Malformed++; s.LastError = perr.Error() })
		msgs = append(msgs[:len(msgs):len(msgs)], Message{Role: "assistant", Content: reply}, Message{Role: "user", Content: q.correct(perr)})
	}
	return verdict{}, &noVerdict{replies: q.reasks + 1, err: perr}
}

// request sends msgs, retrying failed requests with backoff, and returns
// the reply's text. Its errors are the caller's context's, or a
// *noVerdict for a request that kept failing.
func (j *Judge) request(ctx context.Context, msgs []Message, format *shared.ResponseFormatJSONSchemaParam) (string, error) {
	for attempt := 0; ; attempt++ {
		reply, err := j.requestOnce(ctx, msgs, format)
		if err == nil {
			return reply, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		retry, after := retryable(err)
		if !retry || attempt >= j.cfg.Retries {
			j.count(func(s *Stats) { s.Failures++ })
			return "", &noVerdict{err: fmt.Errorf("after %d attempt(s): %w", attempt+1, err)}
		}
		j.count(func(s *Stats) { s.Retries++ })
		t := time.NewTimer(j.backoff(attempt, after))
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

// errTimeout marks a request that ran past Config.Timeout.
var errTimeout = errors.New("request timed out")

// requestOnce sends one request under the concurrency bound and the
// per-request deadline, and records its latency, tokens and outcome.
func (j *Judge) requestOnce(ctx context.Context, msgs []Message, format *shared.ResponseFormatJSONSchemaParam) (string, error) {
	var prompt string
	if j.cfg.Render != nil {
		var err error
		if prompt, err = j.cfg.Render(msgs); err != nil {
			err = fmt.Errorf("%w: %w", errRender, err)
			j.count(func(s *Stats) { s.LastError = err.Error() })
			return "", err
		}
	}
	if err := j.sem.Acquire(ctx, 1); err != nil {
		return "", err
	}
	defer j.sem.Release(1)
	rctx, cancel := context.WithTimeout(ctx, j.cfg.Timeout)
	defer cancel()
	start := time.Now()
	reply, usage, err := j.send(rctx, msgs, prompt, format)
	latency := time.Since(start)
	timedOut := err != nil && errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	if timedOut {
		err = fmt.Errorf("%w after %v: %w", errTimeout, j.cfg.Timeout, err)
	}
	j.count(func(s *Stats) {
		s.Requests++
		s.LatencyTotal += latency
		s.LatencyMax = max(s.LatencyMax, latency)
		s.PromptTokens += usage.PromptTokens
		s.CompletionTokens += usage.CompletionTokens
		if timedOut {
			s.Timeouts++
		}
		if err != nil {
			s.LastError = err.Error()
		}
	})
	return reply, err
}

var (
	// errNoChoice is a successful response without a choice.
	errNoChoice = errors.New("response has no choices")
	// errRender is a Config.Render that failed: sending again would not help.
	errRender = errors.New("render")
)

// send makes one request through the official client: chat completions
// of msgs, or with Config.Render completions of prompt, their rendering.
func (j *Judge) send(ctx context.Context, msgs []Message, prompt string, format *shared.ResponseFormatJSONSchemaParam) (string, openai.CompletionUsage, error) {
	if j.cfg.Render != nil {
		p := openai.CompletionNewParams{
			Model:       openai.CompletionNewParamsModel(j.cfg.Model),
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
			MaxTokens:   openai.Int(int64(j.cfg.MaxTokens)),
			Temperature: openai.Float(j.cfg.Temperature),
		}
		if len(j.cfg.Stop) > 0 {
			p.Stop = openai.CompletionNewParamsStopUnion{OfStringArray: j.cfg.Stop}
		}
		res, err := j.comp.New(ctx, p)
		if err != nil {
			return "", openai.CompletionUsage{}, err
		}
		if len(res.Choices) == 0 {
			return "", res.Usage, errNoChoice
		}
		return res.Choices[0].Text, res.Usage, nil
	}
	p := openai.ChatCompletionNewParams{
		Model:               shared.ChatModel(j.cfg.Model),
		Messages:            make([]openai.ChatCompletionMessageParamUnion, len(msgs)),
		MaxCompletionTokens: openai.Int(int64(j.cfg.MaxTokens)),
		Temperature:         openai.Float(j.cfg.Temperature),
	}
	for i, m := range msgs {
		switch m.Role {
		case "system":
			p.Messages[i] = openai.SystemMessage(m.Content)
		case "assistant":
			p.Messages[i] = openai.AssistantMessage(m.Content)
		default:
			p.Messages[i] = openai.UserMessage(m.Content)
		}
	}
	if len(j.cfg.Stop) > 0 {
		p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: j.cfg.Stop}
	}
	if format != nil {
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: format}
	}
	res, err := j.chat.New(ctx, p)
	if err != nil {
		return "", openai.CompletionUsage{}, err
	}
	if len(res.Choices) == 0 {
		return "", res.Usage, errNoChoice
	}
	return res.Choices[0].Message.Content, res.Usage, nil
}

// retryable says whether a failed request is worth sending again, and
// the wait the server asked for (Retry-After), if any.
func retryable(err error) (bool, time.Duration) {
	if errors.Is(err, errRender) {
		return false, 0
	}
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		return true, 0 // no response: a connection error, a timeout, a body that did not decode
	}
	switch c := apiErr.StatusCode; {
	case c == http.StatusRequestTimeout, c == http.StatusConflict, c == http.StatusTooManyRequests, c >= 500:
		return true, retryAfter(apiErr.Response)
	}
	return false, 0
}

// retryAfter reads the wait a response asks for: retry-after-ms
// (milliseconds, as OpenAI sends it) or Retry-After (seconds or an HTTP
// date).
func retryAfter(res *http.Response) time.Duration {
	if res == nil {
		return 0
	}
	if ms, err := strconv.ParseFloat(res.Header.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := res.Header.Get("Retry-After")
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// backoff is the wait before retry attempt (from 0): equal jitter over
// BackoffBase·2^attempt capped at BackoffMax, raised to after, capped at
// BackoffMax.
func (j *Judge) backoff(attempt int, after time.Duration) time.Duration {
	b := j.cfg.BackoffMax
	if attempt < 62 && j.cfg.BackoffBase<<attempt>>attempt == j.cfg.BackoffBase {
		b = min(b, j.cfg.BackoffBase<<attempt)
	}
	j.mu.Lock()
	d := b/2 + time.Duration(j.rng.Int64N(int64(b/2)+1))
	j.mu.Unlock()
	return min(max(d, after), j.cfg.BackoffMax)
}

// key is the cache key of q: a hash of the model, the sampling settings
// and the messages.
func (j *Judge) key(q question) string {
	h := sha256.New()
	// Encoding these values cannot fail.
	_ = json.NewEncoder(h).Encode(struct {
		Model       string
		Completions bool
		Temperature float64
		MaxTokens   int
		Stop        []string
		Format      *shared.ResponseFormatJSONSchemaParam
		Msgs        []Message
	}{j.cfg.Model, j.cfg.Render != nil, j.cfg.Temperature, j.cfg.MaxTokens, j.cfg.Stop, q.format, q.msgs})
	return hex.EncodeToString(h.Sum(nil))
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
