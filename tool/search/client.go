package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ClientConfig configures a Client. URL is required; every other zero
// field takes the default named on it, which is verl's where verl has one
// (verl/tools/utils/search_r1_like_utils.py and verl/tools/search_tool.py).
type ClientConfig struct {
	// URL is the retrieval server's /retrieve endpoint
	// (http://127.0.0.1:8000/retrieve) or its base URL, to which
	// "/retrieve" is added. Required.
	URL string
	// HTTPClient sends the requests; default a client without a global
	// timeout (each attempt has its own) that keeps MaxConcurrent idle
	// connections to the server.
	HTTPClient *http.Client
	// Headers are added to every request (an API gateway's key, say).
	Headers map[string]string
	// TopK is the number of documents asked for per query; default 3
	// (verl's topk).
	TopK int
	// AttemptTimeout bounds one HTTP attempt, from sending the request to
	// reading the whole answer; default 30 s (verl's DEFAULT_TIMEOUT,
	// which requests applies to connecting and to each read).
	AttemptTimeout time.Duration
	// MaxAttempts is how many times a request is sent before it fails;
	// default 10 (verl's MAX_RETRIES, which counts attempts). Negative:
	// 1, no retry. With verl's defaults a server that hangs holds a call
	// for 10 × 30 s plus 45 s of waits: bound calls with the context (the
	// rollout engine's ToolTimeout) where that is too long.
	MaxAttempts int
	// RetryDelay is verl's INITIAL_RETRY_DELAY: after the k-th attempt
	// fails, the client waits k × RetryDelay before the next; default
	// 1 s. Only failures verl retries are retried: HTTP 500, 502, 503
	// and 504, connection errors and timed-out attempts. Other statuses
	// and malformed answers fail at once.
	RetryDelay time.Duration
	// MaxBatch is the most queries one request carries when Search
	// gathers concurrent calls into one request; default 64.
	MaxBatch int
	// BatchWait is how long the first call of a batch waits for others
	// to join it before the batch is sent (a batch reaching MaxBatch
	// queries is sent at once); default 2 ms. Negative: no gathering,
	// each Search call is a request of its own.
	BatchWait time.Duration
	// MaxConcurrent bounds the requests in flight; default 16.
	MaxConcurrent int
	// MaxResponseBytes bounds a response body; default 64 MiB.
	MaxResponseBytes int64
}

// Failure kinds of an *Error, the "error" metadata of a failed search
// result.
const (
	// KindTimeout: the last attempt ran past AttemptTimeout.
	KindTimeout = "timeout"
	// KindHTTPStatus: the server answered with a status other than 200.
	KindHTTPStatus = "http_status"
	// KindTransport: the connection failed (refused, reset, closed
	// early).
	KindTransport = "transport"
	// KindMalformed: the answer is not a /retrieve response for the
	// queries sent (not JSON, no "result", a different number of lists,
	// a document without "contents"), or is larger than
	// MaxResponseBytes.
	KindMalformed = "malformed_response"
)

// Error is the error of a request that failed after its attempts.
type Error struct {
	// Kind is KindTimeout, KindHTTPStatus, KindTransport or KindMalformed,
	// from the last attempt.
	Kind string
	// StatusCode is the HTTP status of the last attempt, for
	// KindHTTPStatus.
	StatusCode int
	// Attempts is how many attempts were made.
	Attempts int
	// URL is the endpoint.
	URL string
	// Err is the last attempt's error.
	Err error
}

// Error says what failed, where and after how many attempts.
func (e *Error) Error() string {
	return fmt.Sprintf("search: POST %s failed after %d attempt(s): %v", e.URL, e.Attempts, e.Err)
}

// Unwrap returns the last attempt's error.
func (e *Error) Unwrap() error { return e.Err }

// statusError is an attempt's non-200 answer.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.code, e.body)
}

// Stats counts what a Client did since it was made.
type Stats struct {
	// Calls and Queries count the Search calls and their queries.
	Calls, Queries int64
	// Requests counts the /retrieve requests (a batch of calls is one),
	// Attempts their HTTP attempts, Retries the attempts after a first.
	Requests, Attempts, Retries int64
	// Failed counts the requests that failed after their attempts, and
	// the next four split them by Error.Kind.
	Failed                                int64
	Timeouts, HTTPErrors, TransportErrors int64
	MalformedResponses                    int64
	// Batched counts the Search calls that shared their request with
	// another call.
	Batched int64
}

// Client speaks the retrieval-server API of Search-R1 (POST /retrieve):
// it sends batches of queries, retries as verl does, bounds the requests
// in flight, and gathers concurrent Search calls — one per trajectory
// during a rollout — into shared requests, which retrieval servers answer
// in one batch. It is safe for concurrent use and holds no goroutine
// between calls.
type Client struct {
	cfg      ClientConfig
	endpoint string
	sem      chan struct{}

	mu      sync.Mutex
	pending *batch // the batch calls join, nil when none gathers

	calls, queries, requests, attempts, retries atomic.Int64
	failed, timeouts, httpErrors, transport     atomic.Int64
	malformed, batched                          atomic.Int64
}

// batch is a request gathered from concurrent Search calls.
type batch struct {
	queries []string
	waiters int           // calls waiting for the answer; guarded by Client.mu
	full    chan struct{} // closed when the batch is sealed early (full)
	done    chan struct{} // closed when hits and err are set
	ctx     context.Context
	cancel  context.CancelFunc
	hits    [][]Hit
	err     error
}

// NewClient returns a client of the retrieval server at cfg.URL.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if cfg.URL == "" {
		return nil, errors.New("search: ClientConfig.URL is required")
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("search: ClientConfig.URL %q must be an http:// or https:// URL with a host", cfg.URL)
	}
	endpoint := strings.TrimRight(cfg.URL, "/")
	if !strings.HasSuffix(u.Path, "/retrieve") {
		endpoint += "/retrieve"
	}
	switch {
	case cfg.TopK < 0:
		return nil, fmt.Errorf("search: ClientConfig.TopK = %d, want > 0", cfg.TopK)
	case cfg.MaxBatch < 0:
		return nil, fmt.Errorf("search: ClientConfig.MaxBatch = %d, want > 0", cfg.MaxBatch)
	case cfg.MaxConcurrent < 0:
		return nil, fmt.Errorf("search: ClientConfig.MaxConcurrent = %d, want > 0", cfg.MaxConcurrent)
	case cfg.AttemptTimeout < 0 || cfg.RetryDelay < 0:
		return nil, errors.New("search: ClientConfig.AttemptTimeout and RetryDelay must not be negative")
	case cfg.MaxResponseBytes < 0:
		return nil, fmt.Errorf("search: ClientConfig.MaxResponseBytes = %d, want > 0", cfg.MaxResponseBytes)
	}
	if cfg.TopK == 0 {
		cfg.TopK = 3
	}
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = 30 * time.Second
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 10
	} else if cfg.MaxAttempts < 0 {
		cfg.MaxAttempts = 1
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 64
	}
	if cfg.BatchWait == 0 {
		cfg.BatchWait = 2 * time.Millisecond
	}
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = 16
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = 64 << 20
	}
	if cfg.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = cfg.MaxConcurrent
		cfg.HTTPClient = &http.Client{Transport: tr}
	}
	return &Client{cfg: cfg, endpoint: endpoint, sem: make(chan struct{}, cfg.MaxConcurrent)}, nil
}

// Endpoint returns the URL requests are sent to.
func (c *Client) Endpoint() string { return c.endpoint }

// TopK returns the number of documents asked for per query.
func (c *Client) TopK() int { return c.cfg.TopK }

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	return Stats{
		Calls: c.calls.Load(), Queries: c.queries.Load(),
		Requests: c.requests.Load(), Attempts: c.attempts.Load(), Retries: c.retries.Load(),
		Failed: c.failed.Load(), Timeouts: c.timeouts.Load(), HTTPErrors: c.httpErrors.Load(),
		TransportErrors: c.transport.Load(), MalformedResponses: c.malformed.Load(),
		Batched: c.batched.Load(),
	}
}

// Search retrieves the client's TopK documents, with scores, for each
// query, gathering concurrent calls into shared requests (see
// ClientConfig.BatchWait and MaxBatch). It returns one list of hits per
// query, in order; an error of the server after the retries is an *Error,
// and a ctx that ends returns ctx's error at once (a shared request goes
// on for the other calls).
func (c *Client) Search(ctx context.Context, queries []string) ([][]Hit, error) {
	c.calls.Add(1)
	c.queries.Add(int64(len(queries)))
	if len(queries) == 0 {
		return [][]Hit{}, nil
	}
	if c.cfg.BatchWait < 0 || len(queries) >= c.cfg.MaxBatch {
		return c.Do(ctx, Request{Queries: queries, TopK: c.cfg.TopK, ReturnScores: true})
	}
	b, off := c.join(queries)
	select {
	case <-b.done:
		if b.err != nil {
			return nil, b.err
		}
		return slices.Clip(b.hits[off : off+len(queries)]), nil
	case <-ctx.Done():
		c.leave(b)
		return nil, ctx.Err()
	}
}

// join adds queries to the gathering batch, starting one (and the
// goroutine that sends it) when none gathers, and returns the batch and
// the queries' offset in it.
func (c *Client) join(queries []string) (*batch, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.pending
	if b != nil && len(b.queries)+len(queries) > c.cfg.MaxBatch {
		c.pending = nil
		close(b.full)
		b = nil
	}
	if b == nil {
		ctx, cancel := context.WithCancel(context.Background())
		b = &batch{full: make(chan struct{}), done: make(chan struct{}), ctx: ctx, cancel: cancel}
		c.pending = b
		go c.send(b)
	} else if b.waiters == 1 {
		c.batched.Add(2) // the first call and this one
	} else {
		c.batched.Add(1)
	}
	off := len(b.queries)
	b.queries = append(b.queries, queries...)
	b.waiters++
	if len(b.queries) >= c.cfg.MaxBatch {
		c.pending = nil
		close(b.full)
	}
	return b, off
}

// leave records that a call stopped waiting for b; when none waits, b's
// request is cancelled (or never sent).
func (c *Client) leave(b *batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b.waiters--
	if b.waiters == 0 {
		if c.pending == b {
			c.pending = nil
		}
		b.cancel()
	}
}

// send waits until b is full or BatchWait has passed, then sends it.
func (c *Client) send(b *batch) {
	t := time.NewTimer(c.cfg.BatchWait)
	select {
	case <-t.C:
	case <-b.full:
		t.Stop()
	}
	c.mu.Lock()
	if c.pending == b {
		c.pending = nil
	}
	queries := b.queries
	c.mu.Unlock()
	b.hits, b.err = c.Do(b.ctx, Request{Queries: queries, TopK: c.cfg.TopK, ReturnScores: true})
	b.cancel()
	close(b.done)
}

// Do sends one /retrieve request as it is, retrying as configured, and
// returns the hits of each query. The server must answer with one list
// per query. An error of the server after the retries is an *Error; a
// ctx that ends returns ctx's error.
func (c *Client) Do(ctx context.Context, req Request) ([][]Hit, error) {
	if req.Queries == nil {
		req.Queries = []string{}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("search: encoding the request: %w", err)
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.sem }()
	c.requests.Add(1)
	var last error
	attempts := 0
	for attempts < c.cfg.MaxAttempts {
		attempts++
		c.attempts.Add(1)
		if attempts > 1 {
			c.retries.Add(1)
		}
		hits, err := c.attempt(ctx, body, len(req.Queries))
		if err == nil {
			return hits, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		last = err
		if !retryable(err) || attempts == c.cfg.MaxAttempts {
			break
		}
		t := time.NewTimer(time.Duration(attempts) * c.cfg.RetryDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	e := &Error{Kind: kindOf(last), Attempts: attempts, URL: c.endpoint, Err: last}
	c.failed.Add(1)
	switch e.Kind {
	case KindTimeout:
		c.timeouts.Add(1)
	case KindHTTPStatus:
		c.httpErrors.Add(1)
		var se *statusError
		if errors.As(last, &se) {
			e.StatusCode = se.code
		}
	case KindTransport:
		c.transport.Add(1)
	default:
		c.malformed.Add(1)
	}
	return nil, e
}

// errAttemptTimeout marks an attempt that ran past AttemptTimeout.
var errAttemptTimeout = errors.New("the attempt timed out")

// transportError marks a failure of the connection.
type transportError struct{ err error }

func (e transportError) Error() string { return e.err.Error() }
func (e transportError) Unwrap() error { return e.err }

// retryable reports whether verl retries after err: HTTP 500, 502, 503
// and 504, connection errors and timeouts.
func retryable(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		switch se.code {
		case 500, 502, 503, 504:
			return true
		}
		return false
	}
	var te transportError
	return errors.Is(err, errAttemptTimeout) || errors.As(err, &te)
}

func kindOf(err error) string {
	var se *statusError
	var te transportError
	switch {
	case errors.Is(err, errAttemptTimeout):
		return KindTimeout
	case errors.As(err, &se):
		return KindHTTPStatus
	case errors.As(err, &te):
		return KindTransport
	}
	return KindMalformed
}

func (c *Client) attempt(ctx context.Context, body []byte, nQueries int) ([][]Hit, error) {
	actx, cancel := context.WithTimeoutCause(ctx, c.cfg.AttemptTimeout, errAttemptTimeout)
	defer cancel()
	timedOut := func(err error) error {
		if ctx.Err() == nil && errors.Is(context.Cause(actx), errAttemptTimeout) {
			return fmt.Errorf("%w after %v", errAttemptTimeout, c.cfg.AttemptTimeout)
		}
		return transportError{err}
	}
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	for k, v := range c.cfg.Headers {
		hreq.Header.Set(k, v)
	}
	hresp, err := c.cfg.HTTPClient.Do(hreq)
	if err != nil {
		return nil, timedOut(err)
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return nil, timedOut(err)
	}
	if hresp.StatusCode != http.StatusOK {
		return nil, &statusError{code: hresp.StatusCode, body: snippetString(data)}
	}
	if int64(len(data)) > c.cfg.MaxResponseBytes {
		return nil, fmt.Errorf("%w: the response is larger than %d bytes", ErrMalformed, c.cfg.MaxResponseBytes)
	}
	return ParseResponse(data, nQueries)
}

// snippetString returns the start of a response body for an error
// message, unquoted.
func snippetString(b []byte) string {
	const max = 200
	s := strings.ToValidUTF8(string(b[:min(len(b), max)]), "\uFFFD")
	if len(b) > max {
		s += "..."
	}
	return s
}
