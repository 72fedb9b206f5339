package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/openai"
)

// fakeVLLM answers /v1/completions as vLLM does for a token-id prompt with
// logprobs and return_tokens_as_token_ids: the completion is the prompt's
// ids plus 1000, and each token's log-prob is -id/10000. before, when not
// nil, runs first and may answer instead (returning true).
type fakeVLLM struct {
	calls  atomic.Int64
	before func(w http.ResponseWriter, r *http.Request, call int64) bool
	mu     sync.Mutex
	bodies []map[string]any
	auth   []string
}

func (f *fakeVLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	call := f.calls.Add(1)
	if r.URL.Path != "/v1/completions" || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"not found","code":404}}`, http.StatusNotFound)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json","code":400}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	if f.before != nil && f.before(w, r, call) {
		return
	}
	var ids, lps, toks []string
	for _, v := range body["prompt"].([]any) {
		id := int(v.(float64)) + 1000
		ids = append(ids, fmt.Sprint(id))
		toks = append(toks, fmt.Sprintf(`"token_id:%d"`, id))
		lps = append(lps, fmt.Sprint(-float64(id)/10000))
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"cmpl-x","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"…",`+
		`"logprobs":{"text_offset":[],"token_logprobs":[%s],"tokens":[%s],"top_logprobs":null},`+
		`"finish_reason":"stop","stop_reason":"</tool_call>","prompt_logprobs":null}],`+
		`"usage":{"prompt_tokens":%d,"total_tokens":0,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":2}}}`,
		strings.Join(lps, ","), strings.Join(toks, ","), len(ids), len(ids))
}

func (f *fakeVLLM) requests() int { return int(f.calls.Load()) }

func newSampler(t *testing.T, urls []string, mod func(*openai.Config)) *openai.Sampler {
	t.Helper()
	cfg := openai.Config{BaseURLs: urls, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, RequestTimeout: 5 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	s, err := openai.New(cfg)
	require.NoError(t, err)
	return s
}

// req has a token bound: the fakes list no context length, and a request
// without one is refused before it is sent (TestUnboundedRequests).
var req = lm.GenerateRequest{Prompt: []int{1, 2}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 16, Logprobs: true, Stop: []string{"</tool_call>"}}}

// want is what fakeVLLM answers to req.
var want = lm.Generation{
	Tokens: []int{1001, 1002}, LogProbs: []float32{-0.1001, -0.1002}, RawLogProbs: []float32{-0.1001, -0.1002},
	FinishReason: lm.FinishStop, StopString: "</tool_call>", CachedTokens: 2,
}

func TestGenerate(t *testing.T) {
	f := &fakeVLLM{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := newSampler(t, []string{srv.URL + "/v1/"}, func(c *openai.Config) { c.APIKey = "k3y"; c.Model = "qwen" })
	gens, err := s.Generate(context.Background(), []lm.GenerateRequest{req, {Prompt: []int{5}, Params: lm.SampleParams{MaxNewTokens: 3}}})
	require.NoError(t, err)
	require.Len(t, gens, 2)
	assert.Equal(t, want, gens[0])
	assert.Equal(t, []int{1005}, gens[1].Tokens)
	assert.Nil(t, gens[1].LogProbs, "not asked for")
	assert.Equal(t, []string{"Bearer k3y", "Bearer k3y"}, f.auth)
	for _, b := range f.bodies {
		assert.Equal(t, "qwen", b["model"])
		assert.Equal(t, true, b["return_tokens_as_token_ids"])
	}
}

func TestFailoverWhenABackendIsDown(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // connection refused from now on
	f := &fakeVLLM{}
	live := httptest.NewServer(f)
	defer live.Close()
	s := newSampler(t, []string{deadURL, live.URL}, nil)
	for range 4 {
		gens, err := s.Generate(context.Background(), []lm.GenerateRequest{req})
		require.NoError(t, err)
		assert.Equal(t, want, gens[0])
	}
	assert.Equal(t, 4, f.requests())
}

func TestRetry(t *testing.T) {
	cases := []struct {
		name     string
		before   func(w http.ResponseWriter, r *http.Request, call int64) bool
		mod      func(*openai.Config)
		calls    int
		ok       bool
		status   int
		contains string
	}{
		{
			name: "500 then 200",
			before: func(w http.ResponseWriter, _ *http.Request, call int64) bool {
				if call == 1 {
					http.Error(w, `{"error":{"message":"engine dead","code":500}}`, http.StatusInternalServerError)
					return true
				}
				return false
			},
			calls: 2, ok: true,
		},
		{
			name: "429 then 200: rate limiting is retried",
			before: func(w http.ResponseWriter, _ *http.Request, call int64) bool {
				if call == 1 {
					http.Error(w, `{"error":{"message":"too many requests","code":429}}`, http.StatusTooManyRequests)
					return true
				}
				return false
			},
			calls: 2, ok: true,
		},
		{
			name: "400 is not retried",
			before: func(w http.ResponseWriter, _ *http.Request, _ int64) bool {
				http.Error(w, `{"error":{"message":"This model's maximum context length is 4096 tokens","code":400}}`, http.StatusBadRequest)
				return true
			},
			calls: 1, status: 400, contains: "maximum context length",
		},
		{
			name: "slow answer times out, then retried",
			before: func(w http.ResponseWriter, r *http.Request, call int64) bool {
				if call == 1 {
					select {
					case <-r.Context().Done():
					case <-time.After(5 * time.Second):
					}
					return true
				}
				return false
			},
			mod:   func(c *openai.Config) { c.RequestTimeout = 50 * time.Millisecond },
			calls: 2, ok: true,
		},
		{
			name: "503 every time: retries run out",
			before: func(w http.ResponseWriter, _ *http.Request, _ int64) bool {
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
				return true
			},
			mod:   func(c *openai.Config) { c.MaxRetries = 2 },
			calls: 3, status: 503, contains: "3 attempts failed",
		},
		{
			name: "no retries",
			before: func(w http.ResponseWriter, _ *http.Request, _ int64) bool {
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
				return true
			},
			mod:   func(c *openai.Config) { c.MaxRetries = -1 },
			calls: 1, status: 503, contains: "1 attempts failed",
		},
		{
			name: "malformed 200 is not retried",
			before: func(w http.ResponseWriter, _ *http.Request, _ int64) bool {
				fmt.Fprint(w, `{"choices":[{"text":"hi","finish_reason":"stop"}]}`)
				return true
			},
			calls: 1, contains: "no token ids",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeVLLM{before: tc.before}
			srv := httptest.NewServer(f)
			defer srv.Close()
			s := newSampler(t, []string{srv.URL}, tc.mod)
			gens, err := s.Generate(context.Background(), []lm.GenerateRequest{req})
			assert.Equal(t, tc.calls, f.requests())
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, want, gens[0])
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.contains)
			var he *openai.HTTPError
			if tc.status != 0 {
				require.ErrorAs(t, err, &he)
				assert.Equal(t, tc.status, he.StatusCode)
			} else {
				assert.ErrorIs(t, err, openai.ErrBadResponse)
			}
		})
	}
}

func TestCancelReturnsPromptly(t *testing.T) {
	entered := make(chan struct{}, 1)
	f := &fakeVLLM{before: func(_ http.ResponseWriter, r *http.Request, _ int64) bool {
		entered <- struct{}{}
		<-r.Context().Done()
		return true
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := newSampler(t, []string{srv.URL}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Generate(ctx, []lm.GenerateRequest{req})
		errc <- err
	}()
	<-entered
	cancel()
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("Generate did not return after cancel")
	}
	assert.Equal(t, 1, f.requests(), "no retry after cancel")
}

func TestLoadBalancing(t *testing.T) {
	// With hold set, the next request to reach either server is held
	// until release is closed.
	var hold atomic.Bool
	held := make(chan string, 1)
	release := make(chan struct{})
	hook := func(name string) func(http.ResponseWriter, *http.Request, int64) bool {
		return func(http.ResponseWriter, *http.Request, int64) bool {
			if hold.CompareAndSwap(true, false) {
				held <- name
				<-release
			}
			return false
		}
	}
	a, b := &fakeVLLM{before: hook("a")}, &fakeVLLM{before: hook("b")}
	sa, sb := httptest.NewServer(a), httptest.NewServer(b)
	defer sa.Close()
	defer sb.Close()
	s := newSampler(t, []string{sa.URL, sb.URL}, nil)

	// Idle servers take turns.
	for range 4 {
		_, err := s.Generate(context.Background(), []lm.GenerateRequest{req})
		require.NoError(t, err)
	}
	assert.Equal(t, 2, a.requests())
	assert.Equal(t, 2, b.requests())

	// While one request is held by a server, the next ones all go to the
	// other, which has fewer in flight.
	hold.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := s.Generate(context.Background(), []lm.GenerateRequest{req})
		done <- err
	}()
	busy := <-held
	for range 3 {
		_, err := s.Generate(context.Background(), []lm.GenerateRequest{req})
		require.NoError(t, err)
	}
	if busy == "a" {
		assert.Equal(t, []int{3, 5}, []int{a.requests(), b.requests()})
	} else {
		assert.Equal(t, []int{5, 3}, []int{a.requests(), b.requests()})
	}
	close(release)
	require.NoError(t, <-done)
}

func TestConcurrencyLimit(t *testing.T) {
	var cur, peak atomic.Int64
	f := &fakeVLLM{before: func(_ http.ResponseWriter, _ *http.Request, _ int64) bool {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		cur.Add(-1)
		return false
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := newSampler(t, []string{srv.URL}, func(c *openai.Config) { c.MaxConcurrency = 2 })
	reqs := make([]lm.GenerateRequest, 8)
	for i := range reqs {
		reqs[i] = req
	}
	gens, err := s.Generate(context.Background(), reqs)
	require.NoError(t, err)
	assert.Len(t, gens, 8)
	assert.Equal(t, int64(2), peak.Load())
}

func TestConfigAndRequestErrors(t *testing.T) {
	for _, cfg := range []openai.Config{
		{},
		{BaseURLs: []string{"localhost:8000"}},
		{BaseURLs: []string{"ftp://x"}},
		{BaseURLs: []string{"http://x"}, LogprobsMode: "logits"},
		{BaseURLs: []string{"http://x"}, RequestTimeout: -1},
		{BaseURLs: []string{"http://x"}, MaxModelLen: -1},
	} {
		_, err := openai.New(cfg)
		assert.ErrorIs(t, err, openai.ErrConfig, "%+v", cfg)
	}
	s := newSampler(t, []string{"http://127.0.0.1:1"}, nil)
	_, err := s.Generate(context.Background(), []lm.GenerateRequest{{}})
	assert.ErrorContains(t, err, "request 0: empty prompt")
	_, err = s.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1}, Params: lm.SampleParams{TopP: -1}}})
	assert.ErrorIs(t, err, lm.ErrSampling)
	// Top log-probabilities are refused rather than answered without.
	_, err = s.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1}, Params: lm.SampleParams{MaxNewTokens: 1, Logprobs: true, TopLogprobs: 2}}})
	assert.ErrorIs(t, err, lm.ErrSampling)
	assert.ErrorContains(t, err, "top log-probabilities (TopLogprobs 2) are not supported by this sampler")
	gens, err := s.Generate(context.Background(), nil)
	assert.NoError(t, err)
	assert.Empty(t, gens)
}

// versioned answers like fakeVLLM and reports SGLang's
// metadata.weight_version v.
func versioned(v string) *fakeVLLM {
	f := &fakeVLLM{}
	f.before = func(w http.ResponseWriter, r *http.Request, _ int64) bool {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"index":0,"token_ids":[7],"logprobs":{"tokens":["token_id:7"],"token_logprobs":[-0.5]},`+
			`"finish_reason":"length"}],"metadata":{"weight_version":%q}}`, v)
		return true
	}
	return f
}

// TestWeightVersion: with Config.WeightVersion set, a server that serves
// another version is passed over for one that serves the expected one,
// and when none does the error names the server and both versions.
func TestWeightVersion(t *testing.T) {
	stale, current := versioned("3"), versioned("4")
	ss, cs := httptest.NewServer(stale), httptest.NewServer(current)
	defer ss.Close()
	defer cs.Close()
	want := "4"
	s := newSampler(t, []string{ss.URL, cs.URL}, func(c *openai.Config) {
		c.WeightVersion = func(int) string { return want }
		c.MaxRetries = 1
		c.Cooldown = time.Hour // a stale server, once seen, is avoided
	})
	for range 3 {
		gens, err := s.Generate(context.Background(), []lm.GenerateRequest{req})
		require.NoError(t, err)
		assert.Equal(t, "4", gens[0].WeightVersion)
	}
	assert.Equal(t, 3, current.requests())
	assert.LessOrEqual(t, stale.requests(), 1, "the stale server is tried at most once, then cools down")

	want = "5" // neither serves it
	_, err := s.Generate(context.Background(), []lm.GenerateRequest{req})
	require.ErrorIs(t, err, openai.ErrWeightVersion)
	assert.ErrorContains(t, err, `want "5"`)
	assert.Regexp(t, `POST (`+ss.URL+`|`+cs.URL+`)/v1/completions: weight_version "[34]"`, err.Error())

	// Without the check, any version is taken and reported.
	plain := newSampler(t, []string{ss.URL}, nil)
	gens, err := plain.Generate(context.Background(), []lm.GenerateRequest{req})
	require.NoError(t, err)
	assert.Equal(t, "3", gens[0].WeightVersion)
}

// TestEveryServerFailed: when every server fails a request, the error
// names each server's own latest failure, whichever of them was tried
// last: a dead one (connection refused) and a stale one (another weight
// version), so errors.Is finds ErrWeightVersion on every round. With 3
// attempts over 2 servers the last attempt's server depends on the round
// robin, which is why an error that kept only the last failure made a
// caller's check flaky.
func TestEveryServerFailed(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	stale := httptest.NewServer(versioned("0"))
	defer stale.Close()
	s := newSampler(t, []string{deadURL, stale.URL}, func(c *openai.Config) {
		c.WeightVersion = func(int) string { return "1" }
		c.MaxRetries = 2
	})
	for range 8 {
		_, err := s.Generate(context.Background(), []lm.GenerateRequest{req})
		require.ErrorIs(t, err, openai.ErrWeightVersion)
		assert.ErrorContains(t, err, "3 attempts failed on 2 of 2 servers")
		assert.ErrorContains(t, err, deadURL)
		assert.ErrorContains(t, err, "connection refused")
		assert.ErrorContains(t, err, stale.URL+`/v1/completions: weight_version "0", want "1"`)
	}
}

// modelsServer answers GET /v1/models with status and body, counting the
// requests, and passes every other request to next.
type modelsServer struct {
	status int
	body   string
	gets   atomic.Int64
	next   http.Handler
}

func (m *modelsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/models" {
		m.next.ServeHTTP(w, r)
		return
	}
	m.gets.Add(1)
	w.WriteHeader(m.status)
	fmt.Fprint(w, m.body)
}

// TestUnboundedRequests: a request without a token bound is sent with the
// room the server's context leaves, read once from GET /v1/models
// (fakeVLLM echoes the prompt, so the bound shows only in the request:
// max_model_len 100 − 2 prompt tokens = 98); a server that lists no
// length gets no such request at all (ErrUnbounded, nothing posted), and
// one whose list fails (a 500) is asked again next time.
func TestUnboundedRequests(t *testing.T) {
	unbounded := lm.GenerateRequest{Prompt: []int{1, 2}}
	for _, c := range []struct {
		name     string
		status   int
		body     string
		maxToken float64 // the max_tokens sent; 0: no completion is sent
		err      error
		gets     int64 // GET /v1/models after two requests
	}{
		{"length listed", http.StatusOK, `{"data":[{"id":"m","max_model_len":100}]}`, 98, nil, 1},
		{"no length", http.StatusOK, `{"data":[{"id":"m"}]}`, 0, openai.ErrUnbounded, 1},
		{"no route", http.StatusNotFound, `{"detail":"Not Found"}`, 0, openai.ErrUnbounded, 1},
		{"not a list", http.StatusOK, `<html>`, 0, openai.ErrUnbounded, 1},
		// Each Generate tries twice (MaxRetries 1), and nothing is kept.
		{"server error", http.StatusInternalServerError, `{"error":"boom"}`, 0, nil, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeVLLM{}
			ms := &modelsServer{status: c.status, body: c.body, next: f}
			srv := httptest.NewServer(ms)
			defer srv.Close()
			s := newSampler(t, []string{srv.URL}, func(cfg *openai.Config) { cfg.MaxRetries = 1 })
			for range 2 {
				_, err := s.Generate(context.Background(), []lm.GenerateRequest{unbounded})
				switch {
				case c.maxToken > 0:
					require.NoError(t, err)
				case c.err != nil:
					require.ErrorIs(t, err, c.err)
					assert.ErrorContains(t, err, "lists no max_model_len at GET "+srv.URL+"/v1/models")
				default:
					var he *openai.HTTPError
					require.ErrorAs(t, err, &he)
					assert.Equal(t, http.StatusInternalServerError, he.StatusCode)
				}
			}
			assert.Equal(t, c.gets, ms.gets.Load())
			if c.maxToken == 0 {
				assert.Empty(t, f.bodies, "no request without a bound is sent")
				return
			}
			require.Len(t, f.bodies, 2)
			for _, b := range f.bodies {
				assert.Equal(t, c.maxToken, b["max_tokens"])
			}
			// A bounded request is sent as it is, cut to the room: 98.
			_, err := s.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1, 2}, Params: lm.SampleParams{MaxNewTokens: 500}}})
			require.NoError(t, err)
			assert.Equal(t, 98.0, f.bodies[2]["max_tokens"])
		})
	}
}

// TestBoundedRequestsNeedNoList: with MaxNewTokens set, no context length
// is asked for, and the bound is sent as it is.
func TestBoundedRequestsNeedNoList(t *testing.T) {
	f := &fakeVLLM{}
	ms := &modelsServer{status: http.StatusOK, body: `{"data":[{"id":"m","max_model_len":4}]}`, next: f}
	srv := httptest.NewServer(ms)
	defer srv.Close()
	s := newSampler(t, []string{srv.URL}, nil)
	_, err := s.Generate(context.Background(), []lm.GenerateRequest{req})
	require.NoError(t, err)
	assert.Zero(t, ms.gets.Load())
	assert.Equal(t, 16.0, f.bodies[0]["max_tokens"])
}
