package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// searchR1Server replays Search-R1's retrieval_server.py: it reads the
// QueryRequest, answers each query with the documents of docs whose
// contents contain the query (a stand-in for the retriever, at most topk,
// topk 0 or null meaning 3, the server's default), and writes the body as
// FastAPI does, json.dumps(..., separators=(",", ":"), ensure_ascii=False)
// of {"result": [[{"document": doc, "score": s}, ...]]} with return_scores,
// of {"result": [[doc, ...]]} without. It records the requests.
type searchR1Server struct {
	docs []string // corpus rows, as JSON objects
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	header http.Header
	body   map[string]any
}

func (s *searchR1Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil || r.URL.Path != "/retrieve" || r.Method != http.MethodPost {
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"detail":"bad request"}`)
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, recorded{r.Header.Clone(), body})
	s.mu.Unlock()
	topk := 3
	if k, ok := body["topk"].(float64); ok && k > 0 {
		topk = int(k)
	}
	scores, _ := body["return_scores"].(bool)
	var out strings.Builder
	out.WriteString(`{"result":[`)
	for qi, q := range body["queries"].([]any) {
		if qi > 0 {
			out.WriteString(",")
		}
		out.WriteString("[")
		n := 0
		for di, doc := range s.docs {
			var d struct{ Contents string }
			_ = json.Unmarshal([]byte(doc), &d)
			if n == topk || !strings.Contains(strings.ToLower(d.Contents), strings.ToLower(q.(string))) {
				continue
			}
			if n > 0 {
				out.WriteString(",")
			}
			if scores {
				fmt.Fprintf(&out, `{"document":%s,"score":%v}`, doc, 0.9-0.1*float64(di))
			} else {
				out.WriteString(doc)
			}
			n++
		}
		out.WriteString("]")
	}
	out.WriteString("]}")
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, out.String())
}

func (s *searchR1Server) requests() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.reqs...)
}

var zooDocs = []string{
	`{"id":"0","contents":"\"Fox\"\nThe fox lives in a den."}`,
	`{"id":"1","contents":"\"Hen\"\nThe hen fears the fox."}`,
	`{"id":"2","contents":"\"Owl\"\nThe owl hunts at night."}`,
}

func newClient(t *testing.T, url string, cfg ClientConfig) *Client {
	t.Helper()
	cfg.URL = url
	c, err := NewClient(cfg)
	require.NoError(t, err)
	return c
}

func TestClientAgainstSearchR1Shape(t *testing.T) {
	srv := &searchR1Server{docs: zooDocs}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := newClient(t, hs.URL, ClientConfig{BatchWait: -1, Headers: map[string]string{"X-Key": "k"}})
	assert.Equal(t, hs.URL+"/retrieve", c.Endpoint())

	hits, err := c.Search(context.Background(), []string{"fox", "owl", "zebra"})
	require.NoError(t, err)
	require.Len(t, hits, 3)
	require.Len(t, hits[0], 2)
	assert.Equal(t, "0", hits[0][0].Document.ID)
	assert.Equal(t, `"Fox"`, hits[0][0].Document.Title())
	assert.Equal(t, "The fox lives in a den.", hits[0][0].Document.Text())
	assert.Equal(t, 0.9, hits[0][0].Score)
	assert.True(t, hits[0][0].HasScore)
	assert.Equal(t, "1", hits[0][1].Document.ID)
	assert.Equal(t, "2", hits[1][0].Document.ID)
	assert.Empty(t, hits[2])

	// The request is verl's: queries, topk 3, return_scores true, JSON
	// content type and accept headers.
	reqs := srv.requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, map[string]any{"queries": []any{"fox", "owl", "zebra"}, "topk": 3.0, "return_scores": true}, reqs[0].body)
	assert.Equal(t, "application/json", reqs[0].header.Get("Content-Type"))
	assert.Equal(t, "application/json", reqs[0].header.Get("Accept"))
	assert.Equal(t, "k", reqs[0].header.Get("X-Key"))

	// Do sends a request as it is: bare documents without scores.
	hits, err = c.Do(context.Background(), Request{Queries: []string{"the"}, TopK: 2})
	require.NoError(t, err)
	require.Len(t, hits[0], 2)
	assert.False(t, hits[0][0].HasScore)
	assert.Equal(t, "\"Hen\"\nThe hen fears the fox.", hits[0][1].Document.Contents)

	st := c.Stats()
	assert.Equal(t, Stats{Calls: 1, Queries: 3, Requests: 2, Attempts: 2}, st)
}

func TestNewClientErrors(t *testing.T) {
	for _, cfg := range []ClientConfig{
		{},
		{URL: "localhost:8000"},
		{URL: "ftp://x/retrieve"},
		{URL: "http:///retrieve"},
		{URL: "http://x", TopK: -1},
		{URL: "http://x", MaxBatch: -1},
		{URL: "http://x", MaxConcurrent: -2},
		{URL: "http://x", AttemptTimeout: -time.Second},
		{URL: "http://x", MaxResponseBytes: -1},
	} {
		_, err := NewClient(cfg)
		assert.Error(t, err, "%+v", cfg)
	}
	c, err := NewClient(ClientConfig{URL: "http://127.0.0.1:8000/retrieve"})
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:8000/retrieve", c.Endpoint())
	assert.Equal(t, 3, c.TopK())
}

// flaky answers the first failures requests with status code (or hangs,
// or garbage), then as srv.
type flaky struct {
	srv      http.Handler
	failures int32
	fail     func(w http.ResponseWriter, r *http.Request)
	calls    atomic.Int32
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.calls.Add(1) <= f.failures {
		f.fail(w, r)
		return
	}
	f.srv.ServeHTTP(w, r)
}

func status(code int) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
		fmt.Fprintf(w, "status %d", code)
	}
}

// hang reads the request, then answers nothing until the client goes
// (the server notices a closed connection only once the body is read).
func hang(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

func garbage(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>oops</html>") }

func TestClientRetries(t *testing.T) {
	fast := ClientConfig{BatchWait: -1, RetryDelay: time.Millisecond, AttemptTimeout: 200 * time.Millisecond, MaxAttempts: 4}
	tests := []struct {
		name     string
		failures int32
		fail     func(http.ResponseWriter, *http.Request)
		calls    int32  // requests the server saw
		kind     string // "" when the search succeeds
		code     int
	}{
		{"500 then success", 2, status(500), 3, "", 0},
		{"502 503 504 retried", 3, status(503), 4, "", 0},
		{"500 always", 100, status(500), 4, KindHTTPStatus, 500},
		{"504 always", 100, status(504), 4, KindHTTPStatus, 504},
		{"404 not retried", 100, status(404), 1, KindHTTPStatus, 404},
		{"422 not retried", 100, status(422), 1, KindHTTPStatus, 422},
		{"429 not retried, as verl", 100, status(429), 1, KindHTTPStatus, 429},
		{"501 not retried, as verl", 100, status(501), 1, KindHTTPStatus, 501},
		{"garbage not retried", 100, garbage, 1, KindMalformed, 0},
		{"hang then success", 1, hang, 2, "", 0},
		{"hang always", 100, hang, 4, KindTimeout, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &flaky{srv: &searchR1Server{docs: zooDocs}, failures: tt.failures, fail: tt.fail}
			hs := httptest.NewServer(f)
			defer hs.Close()
			c := newClient(t, hs.URL, fast)
			hits, err := c.Search(context.Background(), []string{"fox"})
			assert.Equal(t, tt.calls, f.calls.Load())
			st := c.Stats()
			assert.Equal(t, int64(tt.calls), st.Attempts)
			assert.Equal(t, int64(tt.calls-1), st.Retries)
			if tt.kind == "" {
				require.NoError(t, err)
				assert.Len(t, hits[0], 2)
				assert.Zero(t, st.Failed)
				return
			}
			var se *Error
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.kind, se.Kind)
			assert.Equal(t, tt.code, se.StatusCode)
			assert.Equal(t, int(tt.calls), se.Attempts)
			assert.Equal(t, hs.URL+"/retrieve", se.URL)
			assert.Equal(t, int64(1), st.Failed)
			assert.Equal(t, int64(1), st.Timeouts+st.HTTPErrors+st.TransportErrors+st.MalformedResponses)
		})
	}
}

// TestClientRetryDelays checks verl's linear backoff: k × RetryDelay after
// the k-th failed attempt.
func TestClientRetryDelays(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer hs.Close()
	const d = 40 * time.Millisecond
	c := newClient(t, hs.URL, ClientConfig{BatchWait: -1, RetryDelay: d, MaxAttempts: 4})
	_, err := c.Search(context.Background(), []string{"x"})
	require.Error(t, err)
	require.Len(t, at, 4)
	for k := 1; k < 4; k++ {
		assert.GreaterOrEqual(t, at[k].Sub(at[k-1]), time.Duration(k)*d, "gap after attempt %d", k)
	}
}

func TestClientTransportErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	c := newClient(t, "http://"+addr, ClientConfig{BatchWait: -1, RetryDelay: time.Millisecond, MaxAttempts: 3})
	_, err = c.Search(context.Background(), []string{"x"})
	var se *Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, KindTransport, se.Kind)
	assert.Equal(t, 3, se.Attempts)
	assert.Equal(t, int64(1), c.Stats().TransportErrors)

	// A server that closes the connection without an answer.
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer hs.Close()
	c = newClient(t, hs.URL, ClientConfig{BatchWait: -1, RetryDelay: time.Millisecond, MaxAttempts: 2})
	_, err = c.Search(context.Background(), []string{"x"})
	require.ErrorAs(t, err, &se)
	assert.Equal(t, KindTransport, se.Kind)
	assert.Equal(t, 2, se.Attempts)
}

func TestClientMalformedAnswers(t *testing.T) {
	bodies := map[string]string{
		"wrong number of lists":     `{"result":[[],[]]}`,
		"no result":                 `{"detail":"x"}`,
		"document without contents": `{"result":[[{"document":{"id":"0"},"score":1}]]}`,
		"too large":                 `{"result":[[{"id":"0","contents":"` + strings.Repeat("x", 2000) + `"}]]}`,
		"truncated":                 `{"result":[[{"id":"0","con`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				fmt.Fprint(w, body)
			}))
			defer hs.Close()
			c := newClient(t, hs.URL, ClientConfig{BatchWait: -1, RetryDelay: time.Millisecond, MaxResponseBytes: 1000})
			_, err := c.Search(context.Background(), []string{"x"})
			var se *Error
			require.ErrorAs(t, err, &se)
			assert.Equal(t, KindMalformed, se.Kind)
			assert.ErrorIs(t, err, ErrMalformed)
			assert.Equal(t, int32(1), calls.Load(), "not retried")
		})
	}
}

// TestClientContext checks that a context that ends stops a hanging
// request, a retry wait and a wait for a slot, at once.
func TestClientContext(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(hang))
	defer hs.Close()
	c := newClient(t, hs.URL, ClientConfig{BatchWait: -1, MaxConcurrent: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Search(ctx, []string{"x"})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)

	// The retry wait.
	fail := httptest.NewServer(http.HandlerFunc(status(500)))
	defer fail.Close()
	c = newClient(t, fail.URL, ClientConfig{BatchWait: -1, RetryDelay: time.Hour})
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Search(ctx, []string{"x"})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestClientBatching checks that concurrent Search calls share requests
// of at most MaxBatch queries, and each gets its own hits.
func TestClientBatching(t *testing.T) {
	srv := &searchR1Server{docs: zooDocs}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := newClient(t, hs.URL, ClientConfig{BatchWait: time.Second, MaxBatch: 8})

	words := []string{"fox", "owl", "hen", "den", "night", "zebra"}
	const calls = 12
	var wg sync.WaitGroup
	results := make([][][]Hit, calls)
	errs := make([]error, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.Search(context.Background(), []string{words[i%len(words)], "fox"})
		}()
	}
	wg.Wait()
	for i := range calls {
		require.NoError(t, errs[i])
		require.Len(t, results[i], 2)
		want := map[string]int{"fox": 2, "owl": 1, "hen": 1, "den": 1, "night": 1, "zebra": 0}[words[i%len(words)]]
		assert.Len(t, results[i][0], want, "call %d", i)
		assert.Len(t, results[i][1], 2, "call %d", i)
	}
	reqs := srv.requests()
	total := 0
	for _, r := range reqs {
		n := len(r.body["queries"].([]any))
		assert.LessOrEqual(t, n, 8)
		total += n
	}
	assert.Equal(t, 2*calls, total)
	// 24 queries in batches of at most 8: at least 3 requests, and
	// fewer than 12 with a 1 s wait.
	assert.GreaterOrEqual(t, len(reqs), 3)
	assert.Less(t, len(reqs), calls)
	st := c.Stats()
	assert.Equal(t, int64(calls), st.Calls)
	assert.Equal(t, int64(len(reqs)), st.Requests)
	assert.Positive(t, st.Batched)

	// A call of MaxBatch queries or more goes alone, at once.
	long := make([]string, 8)
	for i := range long {
		long[i] = "fox"
	}
	start := time.Now()
	hits, err := c.Search(context.Background(), long)
	require.NoError(t, err)
	assert.Len(t, hits, 8)
	assert.Less(t, time.Since(start), time.Second)
}

// TestClientBatchCancel checks that a call leaving a shared request does
// not disturb the others, and that the request is cancelled once every
// call has left.
func TestClientBatchCancel(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan int, 4) // the queries of each request that arrives
	var cancelled atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var body struct{ Queries []string }
		_ = json.Unmarshal(data, &body)
		arrived <- len(body.Queries)
		r.Body = io.NopCloser(strings.NewReader(string(data)))
		select {
		case <-release:
			(&searchR1Server{docs: zooDocs}).ServeHTTP(w, r)
		case <-r.Context().Done():
			cancelled.Add(1)
		}
	}))
	defer hs.Close()
	defer close(release)
	// Two calls fill a batch, which is then sent at once.
	c := newClient(t, hs.URL, ClientConfig{BatchWait: 500 * time.Millisecond, MaxBatch: 2})

	// Two calls share a request; the first leaves, the second gets its
	// hits.
	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() {
		_, err := c.Search(ctx1, []string{"owl"})
		done1 <- err
	}()
	done2 := make(chan [][]Hit, 1)
	go func() {
		hits, err := c.Search(context.Background(), []string{"fox"})
		assert.NoError(t, err)
		done2 <- hits
	}()
	assert.Equal(t, 2, <-arrived, "one request carries both calls")
	cancel1()
	assert.ErrorIs(t, <-done1, context.Canceled)
	release <- struct{}{}
	hits := <-done2
	require.Len(t, hits, 1)
	assert.Len(t, hits[0], 2)
	assert.Zero(t, cancelled.Load())

	// A call alone leaves: its request is cancelled.
	ctx3, cancel3 := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel3()
	}()
	_, err := c.Search(ctx3, []string{"hen"})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Eventually(t, func() bool { return cancelled.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
}

func TestErrorText(t *testing.T) {
	e := &Error{Kind: KindHTTPStatus, StatusCode: 500, Attempts: 10, URL: "http://h/retrieve", Err: &statusError{500, "Internal Server Error"}}
	assert.Equal(t, "search: POST http://h/retrieve failed after 10 attempt(s): HTTP 500: Internal Server Error", e.Error())
	assert.True(t, errors.As(error(e), new(*statusError)))
}
