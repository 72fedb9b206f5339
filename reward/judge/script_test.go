package judge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// step is one scripted answer of the fake judge server.
type step struct {
	// status is the HTTP status; 0 means 200 with reply as the content.
	status int
	reply  string
	// delay holds the answer back (until the client gives up, if sooner).
	delay time.Duration
	// reset closes the connection without an answer.
	reset bool
	// header is added to the answer.
	header map[string]string
	// body, when set, is sent as it is instead of a completion.
	body string
}

// scripted is an httptest server speaking /v1/chat/completions and
// /v1/completions that answers with the steps in order, repeating the
// last, and records what it was sent.
type scripted struct {
	*httptest.Server
	mu        sync.Mutex
	steps     []step
	next      int
	requests  []map[string]any
	headers   []http.Header
	paths     []string
	inFlight  atomic.Int32
	peak      atomic.Int32
	promptTok int
	complTok  int
}

func newScripted(t *testing.T, steps ...step) *scripted {
	t.Helper()
	s := &scripted{steps: steps, promptTok: 11, complTok: 7}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// url is the base URL a Config takes.
func (s *scripted) url() string { return s.URL + "/v1" }

func (s *scripted) serve(w http.ResponseWriter, r *http.Request) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	s.requests = append(s.requests, body)
	s.headers = append(s.headers, r.Header.Clone())
	s.paths = append(s.paths, r.URL.Path)
	st := s.steps[min(s.next, len(s.steps)-1)]
	s.next++
	s.mu.Unlock()
	if st.delay > 0 {
		select {
		case <-time.After(st.delay):
		case <-r.Context().Done():
			return
		}
	}
	if st.reset {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range st.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	if st.status != 0 && st.status != http.StatusOK {
		w.WriteHeader(st.status)
		fmt.Fprintf(w, `{"error": {"message": "scripted %d", "type": "Scripted", "code": %d}}`, st.status, st.status)
		return
	}
	if st.body != "" {
		fmt.Fprint(w, st.body)
		return
	}
	usage := map[string]int{"prompt_tokens": s.promptTok, "completion_tokens": s.complTok, "total_tokens": s.promptTok + s.complTok}
	var res map[string]any
	if r.URL.Path == "/v1/completions" {
		res = map[string]any{"id": "cmpl-1", "object": "text_completion", "created": 0, "model": body["model"],
			"choices": []any{map[string]any{"index": 0, "text": st.reply, "finish_reason": "stop"}}, "usage": usage}
	} else {
		res = map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": st.reply}, "finish_reason": "stop"}},
			"usage":   usage}
	}
	_ = json.NewEncoder(w).Encode(res)
}

// sent returns the number of requests received.
func (s *scripted) sent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// request returns the i-th request body.
func (s *scripted) request(i int) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[i]
}

// messages returns the i-th request's messages as (role, content) pairs.
func (s *scripted) messages(t *testing.T, i int) []Message {
	t.Helper()
	raw, err := json.Marshal(s.request(i)["messages"])
	if err != nil {
		t.Fatal(err)
	}
	var msgs []Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// fast is a Config for the scripted server with short waits.
func fast(url string) Config {
	return Config{BaseURL: url, Model: "judge-model", BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, Timeout: 5 * time.Second}
}
