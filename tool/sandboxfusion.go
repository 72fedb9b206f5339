package tool

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SandboxFusionConfig configures a SandboxFusion client. URL is required;
// every other zero field takes the default named on it (python, 10 s
// compile and run timeouts, 1024 MB, 16 requests in flight, 3 retries with
// 250 ms–5 s backoff, 64 MiB responses).
type SandboxFusionConfig struct {
	// URL is the server's base URL (http://host:8080) or its /run_code
	// endpoint. Required.
	URL string
	// HTTPClient sends the requests; default a client without a global
	// timeout (each attempt has its own, see AttemptTimeout).
	HTTPClient *http.Client
	// Headers are added to every request (an API gateway's key, say).
	Headers map[string]string
	// Language is the default language of requests that name none;
	// default "python".
	Language string
	// CompileTimeout is sent as compile_timeout; default 10 s.
	CompileTimeout time.Duration
	// RunTimeout is sent as run_timeout when a request has no Timeout;
	// default 10 s.
	RunTimeout time.Duration
	// MemoryLimitMB is sent as memory_limit_MB when a request has no
	// MemoryBytes; default 1024. Negative: -1, no limit.
	MemoryLimitMB int
	// MaxConcurrent bounds the requests in flight; default 16.
	MaxConcurrent int
	// MaxRetries is how many times a request is retried after a transport
	// error, a timed-out attempt, HTTP 429 or 5xx; default 3. Negative:
	// no retries.
	MaxRetries int
	// BackoffBase is the first retry's mean delay, doubled on each retry
	// (with jitter) up to BackoffMax; defaults 250 ms and 5 s. A
	// Retry-After header, when present, is honoured instead.
	BackoffBase, BackoffMax time.Duration
	// AttemptTimeout bounds one HTTP attempt; default the request's
	// compile and run timeouts plus 30 s.
	AttemptTimeout time.Duration
	// MaxResponseBytes bounds a response body; default 64 MiB.
	MaxResponseBytes int64
}

// SandboxFusion is a client of a SandboxFusion server
// (github.com/bytedance/SandboxFusion), the engine verl and Open-AgentRL
// use to run code at cluster scale. It speaks POST /run_code, retries
// with backoff, and bounds its concurrency. It is safe for concurrent use
// and implements Executor.
type SandboxFusion struct {
	cfg      SandboxFusionConfig
	base     string // the server's base URL
	endpoint string // base + "/run_code"
	sem      chan struct{}
}

// RunCodeRequest is SandboxFusion's /run_code request body.
type RunCodeRequest struct {
	Code           string  `json:"code"`
	Language       string  `json:"language"`
	CompileTimeout float64 `json:"compile_timeout"`
	RunTimeout     float64 `json:"run_timeout"`
	MemoryLimitMB  int     `json:"memory_limit_MB"`
	Stdin          string  `json:"stdin"`
	// Files maps relative paths to base64 contents.
	Files      map[string]string `json:"files"`
	FetchFiles []string          `json:"fetch_files"`
}

// CommandRunResult is SandboxFusion's result of one command (compile or
// run). Status is "Finished", "Error" or "TimeLimitExceeded".
type CommandRunResult struct {
	Status        string   `json:"status"`
	ExecutionTime *float64 `json:"execution_time"`
	ReturnCode    *int     `json:"return_code"`
	Stdout        *string  `json:"stdout"`
	Stderr        *string  `json:"stderr"`
}

// RunCodeResponse is SandboxFusion's /run_code response body. Status is
// "Success", "Failed" (a command failed) or "SandboxError".
type RunCodeResponse struct {
	Status          string            `json:"status"`
	Message         string            `json:"message"`
	CompileResult   *CommandRunResult `json:"compile_result"`
	RunResult       *CommandRunResult `json:"run_result"`
	ExecutorPodName *string           `json:"executor_pod_name"`
	Files           map[string]string `json:"files"`
}

// HTTPStatusError is returned when the server answers with a status other
// than 200 (after the retries, for retryable ones).
type HTTPStatusError struct {
	StatusCode int
	Body       string
}

// Error says which status the server answered, with the start of its body.
func (e *HTTPStatusError) Error() string {
	return fmt.Sprintf("sandboxfusion: HTTP %d: %s", e.StatusCode, e.Body)
}

// NewSandboxFusion returns a client for the server at cfg.URL.
func NewSandboxFusion(cfg SandboxFusionConfig) (*SandboxFusion, error) {
	if cfg.URL == "" {
		return nil, errors.New("tool: SandboxFusionConfig.URL is required")
	}
	if !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://") {
		return nil, fmt.Errorf("tool: SandboxFusionConfig.URL %q must start with http:// or https://", cfg.URL)
	}
	base := strings.TrimSuffix(strings.TrimRight(cfg.URL, "/"), "/run_code")
	endpoint := base + "/run_code"
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Language == "" {
		cfg.Language = "python"
	}
	if cfg.CompileTimeout == 0 {
		cfg.CompileTimeout = 10 * time.Second
	}
	if cfg.RunTimeout == 0 {
		cfg.RunTimeout = 10 * time.Second
	}
	if cfg.MemoryLimitMB == 0 {
		cfg.MemoryLimitMB = 1024
	} else if cfg.MemoryLimitMB < 0 {
		cfg.MemoryLimitMB = -1
	}
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = 16
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 3
	} else if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase = 250 * time.Millisecond
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = 5 * time.Second
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = 64 << 20
	}
	switch {
	case cfg.MaxConcurrent < 0:
		return nil, fmt.Errorf("tool: SandboxFusionConfig.MaxConcurrent = %d, want > 0", cfg.MaxConcurrent)
	case cfg.CompileTimeout < 0 || cfg.RunTimeout < 0 || cfg.AttemptTimeout < 0 || cfg.BackoffBase < 0 || cfg.BackoffMax < 0:
		return nil, errors.New("tool: SandboxFusionConfig durations must not be negative")
	case cfg.MaxResponseBytes < 0:
		return nil, fmt.Errorf("tool: SandboxFusionConfig.MaxResponseBytes = %d, want > 0", cfg.MaxResponseBytes)
	}
	return &SandboxFusion{cfg: cfg, base: base, endpoint: endpoint, sem: make(chan struct{}, cfg.MaxConcurrent)}, nil
}

// ErrSandboxFusionCheck is wrapped by Check's error.
var ErrSandboxFusionCheck = errors.New("tool: SandboxFusion check failed")

// checkTimeout bounds each of Check's requests when the client has no
// AttemptTimeout.
const checkTimeout = 10 * time.Second

// Check makes sure that a SandboxFusion server answers at the client's
// URL before any work is sent to it, so that a dead or mistyped URL fails
// a program at start rather than at its first tool call. It asks GET
// /v1/ping, which SandboxFusion answers with the JSON string "pong"
// (sandbox/server/server.py); a server that answers 404 there (a gateway
// that forwards /run_code only) is asked instead to run print('pong') in
// Python through /run_code, which must succeed and print it. One attempt
// each, without retries, within AttemptTimeout (default 10 s for the
// ping) and ctx. The error wraps ErrSandboxFusionCheck and names the URL
// and the cause: no connection (with the transport's error), an HTTP
// error, or an answer that is not SandboxFusion's.
func (c *SandboxFusion) Check(ctx context.Context) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrSandboxFusionCheck, c.base, fmt.Sprintf(format, a...))
	}
	timeout := c.cfg.AttemptTimeout
	if timeout == 0 {
		timeout = checkTimeout
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(actx, http.MethodGet, c.base+"/v1/ping", nil)
	if err != nil {
		return fail("%v", err)
	}
	hreq.Header.Set("Accept", "application/json")
	for k, v := range c.cfg.Headers {
		hreq.Header.Set(k, v)
	}
	hresp, err := c.cfg.HTTPClient.Do(hreq)
	if err != nil {
		return fmt.Errorf("%w: %s does not answer: %w", ErrSandboxFusionCheck, c.base, err)
	}
	data, err := io.ReadAll(io.LimitReader(hresp.Body, 4096))
	hresp.Body.Close()
	if err != nil {
		return fmt.Errorf("%w: %s: reading GET /v1/ping's answer: %w", ErrSandboxFusionCheck, c.base, err)
	}
	switch {
	case hresp.StatusCode == http.StatusNotFound:
		return c.checkRun(ctx, fail)
	case hresp.StatusCode != http.StatusOK:
		return fail("GET /v1/ping: HTTP %d: %s", hresp.StatusCode, snippet(data))
	}
	var pong string
	if err := json.Unmarshal(data, &pong); err != nil || pong != "pong" {
		return fail(`GET /v1/ping answered %s, not SandboxFusion's "pong"`, snippet(data))
	}
	return nil
}

// checkRun is Check through /run_code.
func (c *SandboxFusion) checkRun(ctx context.Context, fail func(string, ...any) error) error {
	rc := RunCodeRequest{Code: "print('pong')", Language: "python", CompileTimeout: c.cfg.CompileTimeout.Seconds(),
		RunTimeout: c.cfg.RunTimeout.Seconds(), MemoryLimitMB: c.cfg.MemoryLimitMB, Files: map[string]string{}, FetchFiles: []string{}}
	body, err := json.Marshal(rc)
	if err != nil {
		return fail("%v", err)
	}
	timeout := c.cfg.AttemptTimeout
	if timeout == 0 {
		timeout = c.cfg.CompileTimeout + c.cfg.RunTimeout + checkTimeout
	}
	resp, _, err := c.attempt(ctx, body, timeout)
	if err != nil {
		return fail("GET /v1/ping: HTTP 404, and POST /run_code: %v", err)
	}
	if res := resp.execResult(); res.Status != StatusOK || res.Stdout != "pong\n" {
		return fail("GET /v1/ping: HTTP 404, and POST /run_code of print('pong') gave %s %q %q %s", res.Status, snippet([]byte(res.Stdout)), snippet([]byte(res.Stderr)), res.Message)
	}
	return nil
}

// snippet is the start of a body, for an error message.
func snippet(data []byte) string {
	if len(data) > 512 {
		return string(data[:512]) + "..."
	}
	return string(data)
}

// Execute runs req on the server and maps the answer to an ExecResult:
// run status Finished with return code 0 is StatusOK, a non-zero code or
// a failed compilation StatusError, TimeLimitExceeded StatusTimeout, and
// a SandboxError StatusSandboxError. The error is non-nil when the server
// cannot be reached or answers with an HTTP error after the retries, or
// ctx ends.
func (c *SandboxFusion) Execute(ctx context.Context, req ExecRequest) (ExecResult, error) {
	if req.Timeout < 0 || req.MemoryBytes < 0 {
		return ExecResult{}, fmt.Errorf("tool: ExecRequest Timeout %v and MemoryBytes %d must not be negative", req.Timeout, req.MemoryBytes)
	}
	rc := RunCodeRequest{
		Code:           req.Code,
		Language:       req.Language,
		CompileTimeout: c.cfg.CompileTimeout.Seconds(),
		RunTimeout:     c.cfg.RunTimeout.Seconds(),
		MemoryLimitMB:  c.cfg.MemoryLimitMB,
		Stdin:          req.Stdin,
		Files:          map[string]string{},
		FetchFiles:     []string{},
	}
	if rc.Language == "" {
		rc.Language = c.cfg.Language
	}
	if req.Timeout > 0 {
		rc.RunTimeout = req.Timeout.Seconds()
	}
	if req.MemoryBytes > 0 {
		rc.MemoryLimitMB = int((req.MemoryBytes + 1<<20 - 1) >> 20)
	}
	for name, data := range req.Files {
		rc.Files[name] = base64.StdEncoding.EncodeToString(data)
	}
	resp, err := c.Run(ctx, rc)
	if err != nil {
		return ExecResult{}, err
	}
	return resp.execResult(), nil
}

func (r RunCodeResponse) execResult() ExecResult {
	res := ExecResult{ExitCode: -1, Isolation: Isolation{Level: "remote", UID: -1}, Message: r.Message}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	if r.Status == "SandboxError" {
		res.Status = StatusSandboxError
		if res.Message == "" {
			res.Message = "the remote sandbox reported an error"
		}
		return res
	}
	if cr := r.CompileResult; cr != nil && (cr.Status != "Finished" || cr.ReturnCode != nil && *cr.ReturnCode != 0) {
		res.Stdout, res.Stderr = str(cr.Stdout), str(cr.Stderr)
		if cr.ReturnCode != nil {
			res.ExitCode = *cr.ReturnCode
		}
		res.Status = StatusError
		if cr.Status == "TimeLimitExceeded" {
			res.Status = StatusTimeout
			res.Message = "compilation timed out"
		}
		return res
	}
	rr := r.RunResult
	if rr == nil {
		res.Status = StatusSandboxError
		if res.Message == "" {
			res.Message = fmt.Sprintf("the remote sandbox returned status %q without a run result", r.Status)
		}
		return res
	}
	res.Stdout, res.Stderr = str(rr.Stdout), str(rr.Stderr)
	if rr.ReturnCode != nil {
		res.ExitCode = *rr.ReturnCode
	}
	if rr.ExecutionTime != nil {
		res.Duration = time.Duration(*rr.ExecutionTime * float64(time.Second))
	}
	switch {
	case rr.Status == "TimeLimitExceeded":
		res.Status = StatusTimeout
		res.ExitCode = -1
		if res.Message == "" {
			res.Message = "execution timed out"
		}
	case rr.Status == "Finished" && rr.ReturnCode != nil && *rr.ReturnCode == 0:
		res.Status = StatusOK
	default:
		res.Status = StatusError
	}
	return res
}

// Run sends one /run_code request, retrying as configured, and returns
// the server's answer as it is.
func (c *SandboxFusion) Run(ctx context.Context, req RunCodeRequest) (RunCodeResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return RunCodeResponse{}, fmt.Errorf("tool: sandboxfusion: encoding request: %w", err)
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return RunCodeResponse{}, ctx.Err()
	}
	defer func() { <-c.sem }()

	attemptTimeout := c.cfg.AttemptTimeout
	if attemptTimeout == 0 {
		attemptTimeout = time.Duration((req.CompileTimeout+req.RunTimeout)*float64(time.Second)) + 30*time.Second
	}
	var lastErr error
	for attempt := 0; ; attempt++ {
		resp, retryAfter, err := c.attempt(ctx, body, attemptTimeout)
		if err == nil {
			return resp, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			return RunCodeResponse{}, ctx.Err()
		}
		if !retryable(err) || attempt >= c.cfg.MaxRetries {
			break
		}
		delay := retryAfter
		if delay <= 0 {
			// Exponential backoff with jitter in [d/2, d).
			d := c.cfg.BackoffMax
			if attempt < 30 {
				d = min(c.cfg.BackoffBase<<attempt, c.cfg.BackoffMax)
			}
			delay = d/2 + rand.N(d/2+1)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return RunCodeResponse{}, ctx.Err()
		}
	}
	return RunCodeResponse{}, fmt.Errorf("tool: sandboxfusion %s: %w", c.endpoint, lastErr)
}

// errAttemptTimeout marks an attempt that ran past AttemptTimeout.
var errAttemptTimeout = errors.New("sandboxfusion: attempt timed out")

// transportError marks an error of the HTTP transport (connection refused,
// reset), which is retried.
type transportError struct{ err error }

func (e transportError) Error() string { return e.err.Error() }
func (e transportError) Unwrap() error { return e.err }

func retryable(err error) bool {
	var hs *HTTPStatusError
	if errors.As(err, &hs) {
		return hs.StatusCode == http.StatusTooManyRequests || hs.StatusCode >= 500
	}
	var te transportError
	return errors.Is(err, errAttemptTimeout) || errors.As(err, &te)
}

func (c *SandboxFusion) attempt(ctx context.Context, body []byte, timeout time.Duration) (RunCodeResponse, time.Duration, error) {
	actx, cancel := context.WithTimeoutCause(ctx, timeout, errAttemptTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return RunCodeResponse{}, 0, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	for k, v := range c.cfg.Headers {
		hreq.Header.Set(k, v)
	}
	hresp, err := c.cfg.HTTPClient.Do(hreq)
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(actx), errAttemptTimeout) {
			return RunCodeResponse{}, 0, errAttemptTimeout
		}
		return RunCodeResponse{}, 0, transportError{err}
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(actx), errAttemptTimeout) {
			return RunCodeResponse{}, 0, errAttemptTimeout
		}
		return RunCodeResponse{}, 0, transportError{err}
	}
	if int64(len(data)) > c.cfg.MaxResponseBytes {
		return RunCodeResponse{}, 0, fmt.Errorf("sandboxfusion: response body exceeds %d bytes", c.cfg.MaxResponseBytes)
	}
	if hresp.StatusCode != http.StatusOK {
		var retryAfter time.Duration
		if s, err := strconv.Atoi(hresp.Header.Get("Retry-After")); err == nil && s >= 0 {
			retryAfter = min(time.Duration(s)*time.Second, c.cfg.BackoffMax)
		}
		return RunCodeResponse{}, retryAfter, &HTTPStatusError{StatusCode: hresp.StatusCode, Body: snippet(data)}
	}
	resp, err := parseRunCodeResponse(data)
	return resp, 0, err
}

// parseRunCodeResponse decodes a /run_code response body and checks its
// status.
func parseRunCodeResponse(data []byte) (RunCodeResponse, error) {
	var resp RunCodeResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return RunCodeResponse{}, fmt.Errorf("sandboxfusion: decoding response: %w", err)
	}
	switch resp.Status {
	case "Success", "Failed", "SandboxError":
	default:
		return RunCodeResponse{}, fmt.Errorf("sandboxfusion: response status %q is not Success, Failed or SandboxError", resp.Status)
	}
	return resp, nil
}
