package tool

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeFusion is an httptest server speaking SandboxFusion's /run_code
// protocol (sandbox/server/sandbox_api.py: RunCodeRequest, RunCodeResponse
// with RunStatus Success/Failed/SandboxError and CommandRunStatus
// Finished/Error/TimeLimitExceeded). Each request is answered by the
// handler at the index of its arrival (the last one repeats).
type fakeFusion struct {
	t        *testing.T
	srv      *httptest.Server
	handlers []func(w http.ResponseWriter, req RunCodeRequest)
	mu       sync.Mutex
	requests []RunCodeRequest
	inFlight atomic.Int32
	maxSeen  atomic.Int32
}

func newFakeFusion(t *testing.T, handlers ...func(w http.ResponseWriter, req RunCodeRequest)) *fakeFusion {
	f := &fakeFusion{t: t, handlers: handlers}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := f.inFlight.Add(1)
		defer f.inFlight.Add(-1)
		for {
			m := f.maxSeen.Load()
			if n <= m || f.maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		if r.Method != http.MethodPost || r.URL.Path != "/run_code" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request line", http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req RunCodeRequest
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		f.mu.Lock()
		i := len(f.requests)
		f.requests = append(f.requests, req)
		f.mu.Unlock()
		h := f.handlers[min(i, len(f.handlers)-1)]
		h(w, req)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeFusion) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func reply(body string) func(w http.ResponseWriter, req RunCodeRequest) {
	return func(w http.ResponseWriter, req RunCodeRequest) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

func status(code int) func(w http.ResponseWriter, req RunCodeRequest) {
	return func(w http.ResponseWriter, req RunCodeRequest) { http.Error(w, "upstream trouble", code) }
}

const fusionOK = `{"status": "Success", "message": "", "compile_result": null,
 "run_result": {"status": "Finished", "execution_time": 0.016, "return_code": 0, "stdout": "Hello\n", "stderr": ""},
 "executor_pod_name": null, "files": {}}`

func newTestFusion(t *testing.T, f *fakeFusion, cfg SandboxFusionConfig) *SandboxFusion {
	cfg.URL = f.srv.URL
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase = time.Millisecond
	}
	c, err := NewSandboxFusion(cfg)
	require.NoError(t, err)
	return c
}

func TestSandboxFusionRequestAndSuccess(t *testing.T) {
	f := newFakeFusion(t, reply(fusionOK))
	c := newTestFusion(t, f, SandboxFusionConfig{Headers: map[string]string{"X-Key": "k"}})
	res, err := c.Execute(context.Background(), ExecRequest{
		Code: "print('Hello')", Stdin: "in", Timeout: 3 * time.Second, MemoryBytes: 300 << 20,
		Files: map[string][]byte{"a.txt": []byte("data")},
	})
	require.NoError(t, err)
	assert.Equal(t, StatusOK, res.Status)
	assert.Equal(t, "Hello\n", res.Stdout)
	assert.Equal(t, 0, res.ExitCode)
	assert.Equal(t, 16*time.Millisecond, res.Duration)
	assert.Equal(t, "remote", res.Isolation.Level)

	require.Equal(t, 1, f.count())
	req := f.requests[0]
	assert.Equal(t, "print('Hello')", req.Code)
	assert.Equal(t, "python", req.Language)
	assert.Equal(t, 3.0, req.RunTimeout)
	assert.Equal(t, 10.0, req.CompileTimeout)
	assert.Equal(t, 300, req.MemoryLimitMB)
	assert.Equal(t, "in", req.Stdin)
	assert.Equal(t, map[string]string{"a.txt": base64.StdEncoding.EncodeToString([]byte("data"))}, req.Files)

	// Defaults: run_timeout 10 s, memory 1024 MB.
	_, err = c.Execute(context.Background(), ExecRequest{Code: "1"})
	require.NoError(t, err)
	assert.Equal(t, 10.0, f.requests[1].RunTimeout)
	assert.Equal(t, 1024, f.requests[1].MemoryLimitMB)
}

func TestSandboxFusionResultMapping(t *testing.T) {
	cases := []struct {
		name, body string
		status     ExecStatus
		exit       int
		stdout     string
		stderr     string
	}{
		{"runtime error", `{"status": "Failed", "message": "", "run_result": {"status": "Finished", "execution_time": 0.02, "return_code": 1, "stdout": "", "stderr": "Traceback...\nZeroDivisionError"}}`,
			StatusError, 1, "", "Traceback...\nZeroDivisionError"},
		{"timeout", `{"status": "Failed", "message": "", "run_result": {"status": "TimeLimitExceeded", "execution_time": 10.0, "return_code": null, "stdout": "partial", "stderr": null}}`,
			StatusTimeout, -1, "partial", ""},
		{"compile error", `{"status": "Failed", "message": "", "compile_result": {"status": "Finished", "execution_time": 0.5, "return_code": 1, "stdout": "", "stderr": "error: expected ';'"}, "run_result": null}`,
			StatusError, 1, "", "error: expected ';'"},
		{"sandbox error", `{"status": "SandboxError", "message": "no executor", "run_result": null}`,
			StatusSandboxError, -1, "", ""},
		{"no run result", `{"status": "Failed", "message": ""}`,
			StatusSandboxError, -1, "", ""},
		{"run error status", `{"status": "Failed", "message": "", "run_result": {"status": "Error", "return_code": null}}`,
			StatusError, -1, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFusion(t, reply(tc.body))
			c := newTestFusion(t, f, SandboxFusionConfig{})
			res, err := c.Execute(context.Background(), ExecRequest{Code: "x"})
			require.NoError(t, err)
			assert.Equal(t, tc.status, res.Status)
			assert.Equal(t, tc.exit, res.ExitCode)
			assert.Equal(t, tc.stdout, res.Stdout)
			assert.Equal(t, tc.stderr, res.Stderr)
			assert.Equal(t, 1, f.count(), "a well-formed answer is not retried")
		})
	}
}

func TestSandboxFusionRetries(t *testing.T) {
	t.Run("5xx then success", func(t *testing.T) {
		f := newFakeFusion(t, status(500), status(502), reply(fusionOK))
		c := newTestFusion(t, f, SandboxFusionConfig{MaxRetries: 3})
		res, err := c.Execute(context.Background(), ExecRequest{Code: "x"})
		require.NoError(t, err)
		assert.Equal(t, StatusOK, res.Status)
		assert.Equal(t, 3, f.count())
	})
	t.Run("429 then success", func(t *testing.T) {
		f := newFakeFusion(t, status(429), reply(fusionOK))
		c := newTestFusion(t, f, SandboxFusionConfig{})
		_, err := c.Execute(context.Background(), ExecRequest{Code: "x"})
		require.NoError(t, err)
		assert.Equal(t, 2, f.count())
	})
	t.Run("5xx forever", func(t *testing.T) {
		f := newFakeFusion(t, status(503))
		c := newTestFusion(t, f, SandboxFusionConfig{MaxRetries: 2})
		_, err := c.Execute(context.Background(), ExecRequest{Code: "x"})
		var hs *HTTPStatusError
		require.ErrorAs(t, err, &hs)
		assert.Equal(t, 503, hs.StatusCode)
		assert.Equal(t, 3, f.count(), "one try and two retries")
	})
	t.Run("4xx is not retried", func(t *testing.T) {
		f := newFakeFusion(t, status(400))
		c := newTestFusion(t, f, SandboxFusionConfig{MaxRetries: 5})
		_, err := c.Execute(context.Background(), ExecRequest{Code: "x"})
		var hs *HTTPStatusError
		require.ErrorAs(t, err, &hs)
		assert.Equal(t, 400, hs.StatusCode)
		assert.Equal(t, 1, f.count())
	})
	t.Run("slow attempt times out and is retried", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		slow := func(w http.ResponseWriter, req RunCodeRequest) {
			select {
			case <-release:
			case <-time.After(5 * time.Second):
			}
		}
		f := newFakeFusion(t, slow, reply(fusionOK))
		c := newTestFusion(t, f, SandboxFusionConfig{AttemptTimeout: 100 * time.Millisecond})
		res, err := c.Execute(context.Background(), ExecRequest{Code: "x"})
		require.NoError(t, err)
		assert.Equal(t, StatusOK, res.Status)
		assert.Equal(t, 2, f.count())
	})
	t.Run("malformed body", func(t *testing.T) {
		f := newFakeFusion(t, reply(`{"status": `))
		c := newTestFusion(t, f, SandboxFusionConfig{})
		_, err := c.Execute(context.Background(), ExecRequest{Code: "x"})
		require.ErrorContains(t, err, "decoding response")
		assert.Equal(t, 1, f.count())
	})
	t.Run("unknown status", func(t *testing.T) {
		f := newFakeFusion(t, reply(`{"status": "Maybe"}`))
		c := newTestFusion(t, f, SandboxFusionConfig{})
		_, err := c.Execute(context.Background(), ExecRequest{Code: "x"})
		require.ErrorContains(t, err, `"Maybe"`)
	})
	t.Run("oversized body", func(t *testing.T) {
		f := newFakeFusion(t, reply(fusionOK))
		c := newTestFusion(t, f, SandboxFusionConfig{MaxResponseBytes: 50})
		_, err := c.Execute(context.Background(), ExecRequest{Code: "x"})
		require.ErrorContains(t, err, "exceeds 50 bytes")
	})
	t.Run("server down", func(t *testing.T) {
		f := newFakeFusion(t, reply(fusionOK))
		f.srv.Close()
		c := newTestFusion(t, f, SandboxFusionConfig{MaxRetries: 1})
		_, err := c.Execute(context.Background(), ExecRequest{Code: "x"})
		require.Error(t, err)
	})
	t.Run("context cancelled during backoff", func(t *testing.T) {
		f := newFakeFusion(t, status(500))
		c := newTestFusion(t, f, SandboxFusionConfig{BackoffBase: time.Hour, BackoffMax: time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Execute(ctx, ExecRequest{Code: "x"})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 1, f.count())
	})
}

func TestSandboxFusionConcurrencyLimit(t *testing.T) {
	slowOK := func(w http.ResponseWriter, req RunCodeRequest) {
		time.Sleep(30 * time.Millisecond)
		reply(fusionOK)(w, req)
	}
	f := newFakeFusion(t, slowOK)
	c := newTestFusion(t, f, SandboxFusionConfig{MaxConcurrent: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Execute(context.Background(), ExecRequest{Code: "x"})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, 8, f.count())
	assert.LessOrEqual(t, f.maxSeen.Load(), int32(2))
}

func TestSandboxFusionConfigErrors(t *testing.T) {
	for _, cfg := range []SandboxFusionConfig{
		{}, {URL: "localhost:8080"}, {URL: "http://x", MaxConcurrent: -1}, {URL: "http://x", RunTimeout: -1},
	} {
		_, err := NewSandboxFusion(cfg)
		assert.Error(t, err, "%+v", cfg)
	}
	c, err := NewSandboxFusion(SandboxFusionConfig{URL: "http://x:1/run_code/"})
	require.NoError(t, err)
	assert.Equal(t, "http://x:1/run_code", c.endpoint)

	// Every zero field but URL takes the default named on it.
	require.NotNil(t, c.cfg.HTTPClient)
	c.cfg.HTTPClient = nil
	assert.Equal(t, SandboxFusionConfig{
		URL: "http://x:1/run_code/", Language: "python",
		CompileTimeout: 10 * time.Second, RunTimeout: 10 * time.Second, MemoryLimitMB: 1024,
		MaxConcurrent: 16, MaxRetries: 3, BackoffBase: 250 * time.Millisecond, BackoffMax: 5 * time.Second,
		MaxResponseBytes: 64 << 20,
	}, c.cfg)
	assert.Equal(t, 16, cap(c.sem))
	// Negative memory and retries mean none.
	c, err = NewSandboxFusion(SandboxFusionConfig{URL: "http://x", MemoryLimitMB: -5, MaxRetries: -1})
	require.NoError(t, err)
	assert.Equal(t, -1, c.cfg.MemoryLimitMB)
	assert.Equal(t, 0, c.cfg.MaxRetries)
}

func TestCodeInterpreterOnSandboxFusion(t *testing.T) {
	f := newFakeFusion(t,
		reply(`{"status": "Failed", "message": "", "run_result": {"status": "Finished", "return_code": 1, "stdout": "partial\n", "stderr": "NameError: x"}}`),
		reply(`{"status": "Failed", "message": "", "run_result": {"status": "TimeLimitExceeded", "stdout": "", "stderr": ""}}`),
		status(500))
	c := newTestFusion(t, f, SandboxFusionConfig{MaxRetries: -1})
	ci, err := NewCodeInterpreterOn(c, OutputBudget{})
	require.NoError(t, err)
	defer ci.Close()
	ctx := context.Background()

	res, err := ci.Call(ctx, json.RawMessage(`{"code": "`+"```python\\nprint(x)\\n```"+`"}`))
	require.NoError(t, err)
	assert.Equal(t, "print(x)", f.requests[0].Code, "the fence is unwrapped before sending")
	assert.Equal(t, "partial\nNameError: x", res.Content)
	assert.True(t, res.Failed)
	assert.Equal(t, "remote", res.Metadata["isolation"])

	res, err = ci.Call(ctx, json.RawMessage(`{"code": "while True: pass"}`))
	require.NoError(t, err)
	assert.Equal(t, "Error: execution timed out", res.Content)
	assert.Equal(t, "timeout", res.Metadata["status"])

	// An unreachable or failing service is the tool's error, not the model's.
	res, err = ci.Call(ctx, json.RawMessage(`{"code": "1"}`))
	require.Error(t, err)
	var hs *HTTPStatusError
	assert.True(t, errors.As(err, &hs))
	assert.True(t, res.Failed)
}

// TestSandboxFusionCheck: Check passes against a server that answers
// SandboxFusion's GET /v1/ping with "pong" (or, where a gateway forwards
// /run_code only, runs print('pong')), and fails with ErrSandboxFusionCheck
// naming the URL for a dead URL and for servers that are not SandboxFusion.
func TestSandboxFusionCheck(t *testing.T) {
	runOK := `{"status":"Success","message":"","run_result":{"status":"Finished","return_code":0,"stdout":"pong\n","stderr":""}}`
	cases := []struct {
		name    string
		handler http.HandlerFunc
		path    string // the URL's path: "" or "/run_code"
		want    string // "" for success, else part of the error
	}{
		{"pong", func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Path == "/v1/ping" && r.Header.Get("X-Key") == "k" {
				io.WriteString(w, `"pong"`)
				return
			}
			http.NotFound(w, r)
		}, "", ""},
		{"pong, URL naming /run_code", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/ping" {
				io.WriteString(w, `"pong"`)
				return
			}
			http.NotFound(w, r)
		}, "/run_code", ""},
		{"gateway forwarding /run_code only", func(w http.ResponseWriter, r *http.Request) {
			var req RunCodeRequest
			if r.URL.Path != "/run_code" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Code != "print('pong')" || req.Language != "python" {
				http.NotFound(w, r)
				return
			}
			io.WriteString(w, runOK)
		}, "", ""},
		{"gateway, broken sandbox", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/run_code" {
				http.NotFound(w, r)
				return
			}
			io.WriteString(w, `{"status":"SandboxError","message":"no runner"}`)
		}, "", "no runner"},
		{"not SandboxFusion", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, "", "HTTP 404"},
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down for maintenance", http.StatusBadGateway)
		}, "", "HTTP 502: down for maintenance"},
		{"another answer", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"status":"ok"}`) }, "", `not SandboxFusion's "pong"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			c, err := NewSandboxFusion(SandboxFusionConfig{URL: srv.URL + tc.path, Headers: map[string]string{"X-Key": "k"}})
			require.NoError(t, err)
			err = c.Check(context.Background())
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrSandboxFusionCheck)
			assert.ErrorContains(t, err, srv.URL)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("dead URL", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close() // nothing listens there any more
		c, err := NewSandboxFusion(SandboxFusionConfig{URL: url})
		require.NoError(t, err)
		start := time.Now()
		err = c.Check(context.Background())
		require.ErrorIs(t, err, ErrSandboxFusionCheck)
		assert.ErrorContains(t, err, url+" does not answer")
		assert.ErrorContains(t, err, "connection refused")
		assert.Less(t, time.Since(start), 5*time.Second, "no retries")
	})
	t.Run("context", func(t *testing.T) {
		block := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-block:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(block)
		c, err := NewSandboxFusion(SandboxFusionConfig{URL: srv.URL})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err = c.Check(ctx)
		require.ErrorIs(t, err, ErrSandboxFusionCheck)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}
