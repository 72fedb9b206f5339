package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/lm"
)

// call is one request a recorder saw.
type call struct {
	Path, Query string
	Body        map[string]any
}

// recorder is a control-plane peer that records every request and
// answers as the real servers do on success (SGLang's {"success": true}
// for /update_weights_from_disk and its LoRAUpdateOutput for the adapter
// endpoints, vLLM's {"status": ...} for /pause and /resume, an empty 200
// for /collective_rpc, its "Success: …" text for the adapter endpoints).
// answer, when set, may answer instead (returning true).
type recorder struct {
	mu     sync.Mutex
	calls  []call
	answer func(w http.ResponseWriter, r *http.Request, c call) bool
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := call{Path: r.URL.Path, Query: r.URL.RawQuery}
	if b, _ := io.ReadAll(r.Body); len(b) > 0 {
		if err := json.Unmarshal(b, &c.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	rec.mu.Lock()
	rec.calls = append(rec.calls, c)
	rec.mu.Unlock()
	if rec.answer != nil && rec.answer(w, r, c) {
		return
	}
	switch c.Path {
	case "/update_weights_from_disk":
		fmt.Fprint(w, `{"success":true,"message":"Succeeded to update model weights.","num_paused_requests":0}`)
	case "/pause":
		fmt.Fprint(w, `{"status":"paused"}`)
	case "/resume":
		fmt.Fprint(w, `{"status":"resumed"}`)
	case "/pause_generation", "/continue_generation":
		fmt.Fprint(w, `{"message":"ok","status":"ok"}`)
	case "/collective_rpc":
	case "/load_lora_adapter", "/unload_lora_adapter":
		fmt.Fprint(w, `{"success":true,"error_message":"","loaded_adapters":{}}`)
	case "/v1/load_lora_adapter":
		fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", c.Body["lora_name"])
	case "/v1/unload_lora_adapter":
		fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", c.Body["lora_name"])
	default:
		http.NotFound(w, r)
	}
}

func (rec *recorder) seen() []call {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]call(nil), rec.calls...)
}

// weights is a lm.Saver whose checkpoint is one config.json naming it.
type weights struct {
	tag string
	err error
}

func (w weights) Save(dir string, _ lm.SaveOptions) error {
	if w.err != nil {
		return w.err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"tag":"`+w.tag+`"}`), 0o644)
}

func newFleet(t *testing.T, servers ...fleet.Server) (*fleet.Fleet, string) {
	t.Helper()
	dir := t.TempDir()
	f, err := fleet.New(fleet.Config{Servers: servers, Dir: dir, Timeout: 500 * time.Millisecond})
	require.NoError(t, err)
	return f, dir
}

// TestPublishRequests pins the requests of each server kind against the
// servers' real APIs: SGLang's UpdateWeightFromDiskReqInput alone
// (io_struct.py; no pause, see TestSGLangUpdateWithOtherClients), vLLM's
// dev-mode /pause — mode=wait for current releases, and
// wait_for_inflight_requests=true for older ones that read only it —
// /collective_rpc and /resume.
func TestPublishRequests(t *testing.T) {
	for _, tc := range []struct {
		kind fleet.Kind
		want func(dir string) []call
	}{
		{"", func(dir string) []call { // the zero Kind is SGLang
			return []call{
				{Path: "/update_weights_from_disk", Body: map[string]any{"model_path": dir, "weight_version": "3", "flush_cache": true, "abort_all_requests": false}},
			}
		}},
		{fleet.VLLM, func(dir string) []call {
			return []call{
				{Path: "/pause", Query: "mode=wait&wait_for_inflight_requests=true"},
				{Path: "/collective_rpc", Body: map[string]any{"method": "reload_weights", "kwargs": map[string]any{"weights_path": dir}}},
				{Path: "/resume"},
			}
		}},
		{fleet.VLLMModelConfig, func(dir string) []call {
			return []call{
				{Path: "/pause", Query: "mode=wait&wait_for_inflight_requests=true"},
				{Path: "/collective_rpc", Body: map[string]any{"method": "update_config", "args": []any{map[string]any{"model_config": map[string]any{"model": dir}}}}},
				{Path: "/collective_rpc", Body: map[string]any{"method": "reload_weights"}},
				{Path: "/resume"},
			}
		}},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			rec := &recorder{}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			f, root := newFleet(t, fleet.Server{URL: srv.URL, Kind: tc.kind})
			assert.Equal(t, 0, f.Version())
			require.NoError(t, f.Publish(context.Background(), 3, weights{tag: "three"}))
			assert.Equal(t, 3, f.Version())
			dir := filepath.Join(root, "v00000003")
			assert.Equal(t, tc.want(dir), rec.seen())
			b, err := os.ReadFile(filepath.Join(dir, "config.json"))
			require.NoError(t, err)
			assert.JSONEq(t, `{"tag":"three"}`, string(b))
		})
	}
}

// TestPublishRequestsPartial pins the requests of Config.PartialRollouts:
// SGLang's update with abort_all_requests true (the requests in flight
// answer what they generated, then the update loads), vLLM's pause in
// mode "abort" (AsyncLLM.pause_generation's default) before the reload.
func TestPublishRequestsPartial(t *testing.T) {
	for _, tc := range []struct {
		kind fleet.Kind
		want func(dir string) []call
	}{
		{fleet.SGLang, func(dir string) []call {
			return []call{
				{Path: "/update_weights_from_disk", Body: map[string]any{"model_path": dir, "weight_version": "3", "flush_cache": true, "abort_all_requests": true}},
			}
		}},
		{fleet.VLLM, func(dir string) []call {
			return []call{
				{Path: "/pause", Query: "mode=abort"},
				{Path: "/collective_rpc", Body: map[string]any{"method": "reload_weights", "kwargs": map[string]any{"weights_path": dir}}},
				{Path: "/resume"},
			}
		}},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			rec := &recorder{}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			root := t.TempDir()
			f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: srv.URL, Kind: tc.kind}}, Dir: root, PartialRollouts: true})
			require.NoError(t, err)
			require.NoError(t, f.Publish(context.Background(), 3, weights{tag: "three"}))
			assert.Equal(t, 3, f.Version())
			assert.Equal(t, tc.want(filepath.Join(root, "v00000003")), rec.seen())
		})
	}
}

// TestPublishFailures: a server that refuses, dies mid-update or hangs
// makes Publish fail naming it, and is sent nothing else (SGLang's
// update pauses nothing, so nothing is left paused); the fleet moves to
// the new version when another server took it, and stays when none did.
func TestPublishFailures(t *testing.T) {
	refuse := func(w http.ResponseWriter, _ *http.Request, c call) bool {
		if c.Path != "/update_weights_from_disk" {
			return false
		}
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"success":false,"message":"Failed to load: no such file","num_paused_requests":0}`)
		return true
	}
	die := func(w http.ResponseWriter, _ *http.Request, c call) bool {
		if c.Path != "/update_weights_from_disk" {
			return false
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // the process died mid-update
		}
		return true
	}
	hang := func(_ http.ResponseWriter, r *http.Request, c call) bool {
		if c.Path != "/update_weights_from_disk" {
			return false
		}
		<-r.Context().Done() // never answers before the client gives up
		return true
	}
	quietFailure := func(w http.ResponseWriter, _ *http.Request, c call) bool {
		if c.Path != "/update_weights_from_disk" {
			return false
		}
		fmt.Fprint(w, `{"success":false,"message":"weights mismatch"}`)
		return true
	}
	for _, tc := range []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request, call) bool
		msg    string
	}{
		{"refused", refuse, "status 400"},
		{"died mid-update", die, "EOF"},
		{"hangs", hang, "deadline exceeded"},
		{"200 without success", quietFailure, `not successful: "weights mismatch"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := &recorder{answer: tc.answer}
			good := &recorder{}
			bs, gs := httptest.NewServer(bad), httptest.NewServer(good)
			defer bs.Close()
			defer gs.Close()

			f, _ := newFleet(t, fleet.Server{URL: bs.URL}, fleet.Server{URL: gs.URL})
			err := f.Publish(context.Background(), 1, weights{})
			require.ErrorIs(t, err, fleet.ErrUpdate)
			assert.ErrorContains(t, err, "sglang server "+bs.URL+": version 1")
			assert.ErrorContains(t, err, tc.msg)
			assert.NotContains(t, err.Error(), gs.URL)
			assert.Equal(t, 1, f.Version(), "the good server took version 1")
			require.Len(t, bad.seen(), 1)
			assert.Equal(t, "/update_weights_from_disk", bad.seen()[0].Path)

			alone, _ := newFleet(t, fleet.Server{URL: bs.URL})
			require.ErrorIs(t, alone.Publish(context.Background(), 1, weights{}), fleet.ErrUpdate)
			assert.Equal(t, 0, alone.Version(), "no server took version 1")
		})
	}
}

// TestPublishResumesVLLM: a vLLM server whose reload fails is resumed
// all the same, so that a failed update does not leave it paused.
func TestPublishResumesVLLM(t *testing.T) {
	rec := &recorder{answer: func(w http.ResponseWriter, _ *http.Request, c call) bool {
		if c.Path != "/collective_rpc" {
			return false
		}
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"detail":"weights do not fit"}`)
		return true
	}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	f, _ := newFleet(t, fleet.Server{URL: srv.URL, Kind: fleet.VLLM})
	err := f.Publish(context.Background(), 1, weights{})
	require.ErrorIs(t, err, fleet.ErrUpdate)
	assert.ErrorContains(t, err, "weights do not fit")
	var paths []string
	for _, c := range rec.seen() {
		paths = append(paths, c.Path)
	}
	assert.Equal(t, []string{"/pause", "/collective_rpc", "/resume"}, paths)
}

// TestPublishCheckpointFiles: a checkpoint that cannot be written is an
// error before any server is asked; old checkpoints beyond Keep are
// removed; a version published again replaces its folder; no temporary
// folder is left.
func TestPublishCheckpointFiles(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	f, root := newFleet(t, fleet.Server{URL: srv.URL})

	boom := errors.New("disk full")
	err := f.Publish(context.Background(), 1, weights{err: boom})
	require.ErrorIs(t, err, boom)
	assert.Empty(t, rec.seen())

	for v := 1; v <= 3; v++ {
		require.NoError(t, f.Publish(context.Background(), v, weights{tag: fmt.Sprint(v)}))
	}
	require.NoError(t, f.Publish(context.Background(), 3, weights{tag: "3 again"}))
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"v00000002", "v00000003"}, names, "Keep 2 by default, no temporary folder")
	b, err := os.ReadFile(filepath.Join(root, "v00000003", "config.json"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"tag":"3 again"}`, string(b))
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  fleet.Config
		msg  string
	}{
		{"no servers", fleet.Config{Dir: dir}, "no Servers"},
		{"no folder", fleet.Config{Servers: []fleet.Server{{URL: "http://a"}}}, "Dir is empty"},
		{"bad kind", fleet.Config{Dir: dir, Servers: []fleet.Server{{URL: "http://a", Kind: "tgi"}}}, `Kind "tgi"`},
		{"bad url", fleet.Config{Dir: dir, Servers: []fleet.Server{{URL: "a:b"}}}, "not an http(s) URL"},
		{"negative keep", fleet.Config{Dir: dir, Servers: []fleet.Server{{URL: "http://a"}}, Keep: -1}, "negative"},
		{"partial adapters", fleet.Config{Dir: dir, Servers: []fleet.Server{{URL: "http://a"}}, Adapter: "a", PartialRollouts: true}, "PartialRollouts with Adapter"},
	} {
		_, err := fleet.New(tc.cfg)
		require.ErrorIs(t, err, fleet.ErrConfig, tc.name)
		assert.ErrorContains(t, err, tc.msg, tc.name)
	}
}

// sglangScheduler plays what SGLang does with a weight update while
// another client's request runs, after its source: a generate request
// holds the tokenizer manager's model-update reader lock until it ends;
// /update_weights_from_disk takes the writer lock, which waits for the
// readers — unless generation is paused, when it takes none
// (tokenizer_manager.py, update_weights_from_disk); after loading, the
// scheduler flushes the cache with flush_cache true, and a flush with
// requests in the running batch or the waiting queue fails the assertion
// "Cache flush failed after updating weights", which kills the scheduler
// (scheduler_update_weights_mixin.py). /pause_generation "in_place"
// keeps the running requests in the batch, "retract" moves them to the
// waiting queue, "abort" ends them.
type sglangScheduler struct {
	mu      sync.Mutex
	running int // the other client's requests in the scheduler
	paused  bool
	dead    bool
	done    chan struct{} // closed when the other client's request ends
	log     []string
}

func (s *sglangScheduler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	s.log = append(s.log, r.URL.Path)
	if s.dead {
		s.mu.Unlock()
		http.Error(w, "scheduler died", http.StatusServiceUnavailable)
		return
	}
	switch r.URL.Path {
	case "/pause_generation":
		s.paused = true
		if body["mode"] == "abort" {
			s.running = 0
		}
		s.mu.Unlock()
		fmt.Fprint(w, `{"message":"Generation paused successfully.","status":"ok"}`)
	case "/continue_generation":
		s.paused = false
		s.mu.Unlock()
		fmt.Fprint(w, `{"message":"Generation continued successfully.","status":"ok"}`)
	case "/update_weights_from_disk":
		if !s.paused {
			// The writer lock waits for the running request to end.
			s.mu.Unlock()
			select {
			case <-s.done:
			case <-r.Context().Done():
				return
			}
			s.mu.Lock()
		}
		if body["flush_cache"] != false && s.running > 0 {
			s.dead = true
			s.mu.Unlock()
			http.Error(w, "AssertionError: Cache flush failed after updating weights", http.StatusInternalServerError)
			return
		}
		s.log = append(s.log, "loaded")
		s.mu.Unlock()
		fmt.Fprint(w, `{"success":true,"message":"Succeeded to update model weights.","num_paused_requests":0}`)
	default:
		s.mu.Unlock()
		http.NotFound(w, r)
	}
}

// end ends the other client's request.
func (s *sglangScheduler) end() {
	s.mu.Lock()
	s.running = 0
	s.log = append(s.log, "other client's request ended")
	s.mu.Unlock()
	close(s.done)
}

// TestSGLangUpdateWithOtherClients: the fleet is not the SGLang server's
// only client. Publish must wait for the other client's request to end
// and then update, the scheduler alive; it must not pause generation in
// place first, which with that request in the batch makes the update's
// cache flush kill the scheduler.
func TestSGLangUpdateWithOtherClients(t *testing.T) {
	sched := &sglangScheduler{running: 1, done: make(chan struct{})}
	srv := httptest.NewServer(sched)
	defer srv.Close()
	f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: srv.URL, Kind: fleet.SGLang}}, Dir: t.TempDir(), Timeout: 10 * time.Second})
	require.NoError(t, err)
	published := make(chan error, 1)
	go func() { published <- f.Publish(context.Background(), 1, weights{tag: "one"}) }()
	// The update reaches the server and waits there behind the other
	// client's request (a fixed wait before ending that request let a
	// loaded machine end it before the update had arrived).
	require.Eventually(t, func() bool {
		sched.mu.Lock()
		defer sched.mu.Unlock()
		return slices.Contains(sched.log, "/update_weights_from_disk")
	}, 10*time.Second, time.Millisecond)
	select {
	case err := <-published:
		t.Fatalf("Publish returned while another client's request ran: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	sched.end()
	require.NoError(t, <-published)
	sched.mu.Lock()
	defer sched.mu.Unlock()
	assert.False(t, sched.dead)
	assert.Equal(t, []string{"/update_weights_from_disk", "other client's request ended", "loaded"}, sched.log)
	assert.Equal(t, 1, f.Version())
}
