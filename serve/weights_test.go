package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
)

// twoCheckpoints returns two checkpoints of the same architecture whose
// greedy continuations of prompt differ, and those continuations.
func twoCheckpoints(t *testing.T, prompt []int) (a, b string, ga, gb []int) {
	t.Helper()
	a, b = writeCheckpoint(t, 1, 16), writeCheckpoint(t, 2, 16)
	ga, gb = greedy(t, a, prompt, 6), greedy(t, b, prompt, 6)
	require.NotEqual(t, ga, gb)
	return a, b, ga, gb
}

var testPrompt = []int{10, 20, 30}

// TestReload reloads through each API: the generations become those of
// the new checkpoint and the weight version changes.
func TestReload(t *testing.T) {
	a, b, ga, gb := twoCheckpoints(t, testPrompt)
	for _, c := range []struct {
		name    string
		steps   []string // POST path and body, in order
		answer  string   // the last step's body
		version string
	}{
		{"sglang", []string{"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q, "weight_version": "step-1", "load_format": "auto", "flush_cache": true}`, b)},
			`{"success": true, "message": "Succeeded to update model weights.", "num_paused_requests": 0}`, "step-1"},
		{"sglang without a version", []string{"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q}`, b)},
			`{"success": true, "message": "Succeeded to update model weights.", "num_paused_requests": 0}`, "1"},
		{"vllm", []string{"/collective_rpc", fmt.Sprintf(`{"method": "reload_weights", "kwargs": {"weights_path": %q}, "timeout": 60}`, b)},
			`{"results": [null]}`, "1"},
		{"vllm positional", []string{"/collective_rpc", fmt.Sprintf(`{"method": "reload_weights", "args": [null, %q, true]}`, b)},
			`{"results": [null]}`, "1"},
		{"vllm old", []string{
			"/collective_rpc", fmt.Sprintf(`{"method": "update_config", "args": [{"model_config": {"model": %q}, "load_config": {"load_format": "safetensors"}}]}`, b),
			"/collective_rpc", `{"method": "reload_weights"}`},
			`{"results": [null]}`, "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, ts := startServer(t, a, Config{})
			assert.Equal(t, ga, complete(t, ts.URL, greedyBody(testPrompt, 6)).Choices[0].TokenIDs)
			var body []byte
			for i := 0; i < len(c.steps); i += 2 {
				if i > 0 {
					// update_config alone changes no weights.
					assert.Equal(t, ga, complete(t, ts.URL, greedyBody(testPrompt, 6)).Choices[0].TokenIDs)
				}
				var status int
				status, body = post(t, ts.URL+c.steps[i], c.steps[i+1])
				require.Equal(t, http.StatusOK, status, "%s", body)
			}
			assert.JSONEq(t, c.answer, string(body))
			r := complete(t, ts.URL, greedyBody(testPrompt, 6))
			assert.Equal(t, gb, r.Choices[0].TokenIDs)
			assert.Equal(t, c.version, r.Metadata.WeightVersion)
			assert.Equal(t, c.version, s.WeightVersion())
			_, info := get(t, ts.URL+"/model_info")
			var mi struct {
				ModelPath     string `json:"model_path"`
				WeightVersion string `json:"weight_version"`
			}
			require.NoError(t, json.Unmarshal(info, &mi))
			assert.Equal(t, b, mi.ModelPath)
			assert.Equal(t, c.version, mi.WeightVersion)
		})
	}
}

// TestReloadVersions: versions count up from the last integer one.
func TestReloadVersions(t *testing.T) {
	a, b, _, _ := twoCheckpoints(t, testPrompt)
	s, ts := startServer(t, a, Config{WeightVersion: "5"})
	for _, c := range []struct{ body, want string }{
		{fmt.Sprintf(`{"model_path": %q}`, b), "6"},
		{fmt.Sprintf(`{"model_path": %q, "weight_version": "rl-step"}`, a), "rl-step"},
		{fmt.Sprintf(`{"model_path": %q}`, b), "7"},
		{fmt.Sprintf(`{"model_path": %q, "weight_version": "20"}`, a), "20"},
		{fmt.Sprintf(`{"model_path": %q}`, b), "21"},
	} {
		status, body := post(t, ts.URL+"/update_weights_from_disk", c.body)
		require.Equal(t, http.StatusOK, status, "%s", body)
		assert.Equal(t, c.want, s.WeightVersion())
	}
}

// TestDefaultLoadKeepsTheBackend: without Config.Load, a reload puts the
// new weights on the backend of the model served at start (a GPU's, when
// the program chose one), not on policy's default CPU backend, and the
// reloaded model serves the new checkpoint.
func TestDefaultLoadKeepsTheBackend(t *testing.T) {
	a, b, _, gb := twoCheckpoints(t, testPrompt)
	be := device.NewCPU(1) // an instance of its own, told apart from the default by identity
	s, ts := startServer(t, a, Config{Model: loadModel(t, a, policy.WithBackend(be))})
	m, err := s.load(b)
	require.NoError(t, err)
	assert.Same(t, be, m.Backend())
	require.NoError(t, m.Close())

	status, body := post(t, ts.URL+"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q}`, b))
	require.Equal(t, http.StatusOK, status, "%s", body)
	assert.Equal(t, gb, complete(t, ts.URL, greedyBody(testPrompt, 6)).Choices[0].TokenIDs)
}

// TestFailedReload: a checkpoint that does not load or does not fit
// leaves the old weights serving, with the error named.
func TestFailedReload(t *testing.T) {
	a, _, ga, _ := twoCheckpoints(t, testPrompt)
	missing := filepath.Join(t.TempDir(), "missing")
	wider := writeCheckpoint(t, 3, 24)
	s, ts := startServer(t, a, Config{})
	for _, c := range []struct {
		name, path, body string
		status           int
		msg              string
	}{
		{"sglang, missing folder", "/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q}`, missing), 400, "Failed to update weights"},
		{"sglang, other architecture", "/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q}`, wider), 400, "do not fit the served model"},
		{"sglang, unsupported format", "/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q, "load_format": "gguf"}`, a), 400, `load_format "gguf" is not supported`},
		{"vllm, missing folder", "/collective_rpc", fmt.Sprintf(`{"method": "reload_weights", "kwargs": {"weights_path": %q}}`, missing), 400, "reload_weights"},
		{"vllm, other architecture", "/collective_rpc", fmt.Sprintf(`{"method": "reload_weights", "kwargs": {"weights_path": %q}}`, wider), 400, "do not fit the served model"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := post(t, ts.URL+c.path, c.body)
			assert.Equal(t, c.status, status)
			var res struct {
				updateResult
				Detail string `json:"detail"`
			}
			require.NoError(t, json.Unmarshal(body, &res))
			assert.False(t, res.Success)
			assert.Contains(t, res.Message+res.Detail, c.msg)
			r := complete(t, ts.URL, greedyBody(testPrompt, 6))
			assert.Equal(t, ga, r.Choices[0].TokenIDs)
			assert.Equal(t, "0", r.Metadata.WeightVersion)
			assert.Equal(t, "0", s.WeightVersion())
		})
	}
}

// TestBadWeightRequests: malformed reload requests are 400s in each
// API's error shape.
func TestBadWeightRequests(t *testing.T) {
	a := writeCheckpoint(t, 1, 16)
	_, ts := startServer(t, a, Config{})
	// A server started without a ModelPath has nothing to reload by default.
	bare, err := New(Config{Model: loadModelOwned(t, a)})
	require.NoError(t, err)
	noPath := httptest.NewServer(bare)
	t.Cleanup(noPath.Close)
	t.Cleanup(func() { _ = bare.Close() })
	for _, c := range []struct {
		name, url, body string
		want            string // the whole body, as JSON
	}{
		{"rpc not JSON", ts.URL + "/collective_rpc", `{`, ""},
		{"rpc no method", ts.URL + "/collective_rpc", `{"args": []}`, `{"detail": "Missing 'method' in request body"}`},
		{"rpc unknown method", ts.URL + "/collective_rpc", `{"method": "sleep"}`,
			`{"detail": "collective_rpc method \"sleep\" is not supported by this server: use reload_weights or update_config"}`},
		{"rpc unknown kwarg", ts.URL + "/collective_rpc", `{"method": "reload_weights", "kwargs": {"path": "x"}}`,
			`{"detail": "reload_weights() got an unexpected keyword argument 'path'"}`},
		{"rpc too many args", ts.URL + "/collective_rpc", `{"method": "reload_weights", "args": [null, "x", true, 1]}`,
			`{"detail": "reload_weights() takes 3 arguments but 4 were given"}`},
		{"rpc iterator", ts.URL + "/collective_rpc", `{"method": "reload_weights", "kwargs": {"weights_iterator": [1]}}`, ""},
		{"rpc not checkpoint format", ts.URL + "/collective_rpc", `{"method": "reload_weights", "kwargs": {"weights_path": "x", "is_checkpoint_format": false}}`, ""},
		{"rpc other override", ts.URL + "/collective_rpc", `{"method": "update_config", "args": [{"model_config": {"max_model_len": 8}}]}`,
			`{"detail": "update_config: model_config.max_model_len cannot be changed on this server"}`},
		{"rpc unknown section", ts.URL + "/collective_rpc", `{"method": "update_config", "args": [{"cache_config": {}}]}`, ""},
		{"rpc no overrides", ts.URL + "/collective_rpc", `{"method": "update_config"}`, ""},
		{"rpc nothing to reload", noPath.URL + "/collective_rpc", `{"method": "reload_weights"}`, ""},
		{"sglang not JSON", ts.URL + "/update_weights_from_disk", `[]`, ""},
		{"sglang no path", ts.URL + "/update_weights_from_disk", `{"load_format": "auto"}`,
			`{"object": "error", "message": "model_path is required", "type": "Bad Request", "param": null, "code": 400}`},
		{"sglang bad mode", ts.URL + "/pause_generation", `{"mode": "freeze"}`,
			`{"object": "error", "message": "Invalid mode \"freeze\": must be one of 'abort', 'retract', 'in_place'", "type": "Bad Request", "param": null, "code": 400}`},
		{"vllm bad mode", ts.URL + "/pause?mode=freeze", ``, `{"error": "Invalid mode \"freeze\": must be one of 'abort', 'wait', 'keep'"}`},
		{"vllm bad flag", ts.URL + "/pause?clear_cache=maybe", ``, `{"error": "clear_cache: \"maybe\" is not a boolean"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := post(t, c.url, c.body)
			assert.Equal(t, http.StatusBadRequest, status, "%s", body)
			assert.True(t, json.Valid(body), "%s", body)
			if c.want != "" {
				assert.JSONEq(t, c.want, string(body))
			}
		})
	}
}

// loadModelOwned loads a model to hand to a Server, which closes it.
func loadModelOwned(t *testing.T, dir string) *policy.Model {
	t.Helper()
	m, err := policy.Load(dir, policy.WithDecoder(idDecode))
	require.NoError(t, err)
	return m
}

// blockingGen makes the server's first n generations wait until release
// is closed (or their context ends) before running; started receives one
// value per generation that begins.
type blockingGen struct {
	n       atomic.Int64
	started chan struct{}
	release chan struct{}
}

func newBlockingGen(s *Server, n int) *blockingGen {
	b := &blockingGen{started: make(chan struct{}, 64), release: make(chan struct{})}
	b.n.Store(int64(n))
	s.gen = func(ctx context.Context, m *policy.Model, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
		b.started <- struct{}{}
		if b.n.Add(-1) >= 0 {
			select {
			case <-b.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return m.Generate(ctx, reqs)
	}
	return b
}

// async runs a completion request in the background.
func async(t *testing.T, base string, body any) <-chan response {
	t.Helper()
	ch := make(chan response, 1)
	go func() { ch <- complete(t, base, body) }()
	return ch
}

// TestReloadWaitsForRequestsInFlight is the invariant in order: a reload
// waits for the completion running on the old weights (which answers
// with the old version and the old tokens), holds back the completion
// that arrives meanwhile, and admits it on the new weights.
func TestReloadWaitsForRequestsInFlight(t *testing.T) {
	a, b, ga, gb := twoCheckpoints(t, testPrompt)
	s, ts := startServer(t, a, Config{})
	bg := newBlockingGen(s, 1)
	first := async(t, ts.URL, greedyBody(testPrompt, 6))
	<-bg.started
	reloaded := make(chan []byte, 1)
	go func() {
		_, body := post(t, ts.URL+"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q}`, b))
		reloaded <- body
	}()
	waitFor(t, "the reload to wait for the request in flight", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.swapping
	})
	second := async(t, ts.URL, greedyBody(testPrompt, 6))
	waitFor(t, "the second request to be held back", func() bool { return s.waitingCount() == 1 })
	select {
	case <-reloaded:
		t.Fatal("the reload finished while a request ran on the old weights")
	default:
	}
	close(bg.release)
	r1 := <-first
	assert.Equal(t, "0", r1.Metadata.WeightVersion)
	assert.Equal(t, ga, r1.Choices[0].TokenIDs)
	// One request was held back during the swap.
	assert.JSONEq(t, `{"success": true, "message": "Succeeded to update model weights.", "num_paused_requests": 1}`, string(<-reloaded))
	r2 := <-second
	assert.Equal(t, "1", r2.Metadata.WeightVersion)
	assert.Equal(t, gb, r2.Choices[0].TokenIDs)
}

// TestConcurrentReloads: completions racing with reloads through every
// API each come entirely from one version — the tokens are the greedy
// continuation of the checkpoint that metadata.weight_version names, or
// for one that a reload in abort mode cut, its start.
func TestConcurrentReloads(t *testing.T) {
	a, b, ga, gb := twoCheckpoints(t, testPrompt)
	_, ts := startServer(t, a, Config{MaxSessions: 4})
	// Versions 0, 2, 4 are checkpoint a; 1, 3, 5 checkpoint b.
	want := map[string][]int{"0": ga, "2": ga, "4": ga, "1": gb, "3": gb, "5": gb}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	seen := make([]map[string]int, 8)
	for w := range seen {
		seen[w] = map[string]int{}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := complete(t, ts.URL, greedyBody(testPrompt, 6))
				v, c := r.Metadata.WeightVersion, r.Choices[0]
				if c.FinishReason == "abort" {
					// The reload with abort_all_requests cut it: the
					// tokens it had are the start of what the version
					// it names generates.
					if !assert.LessOrEqual(t, len(c.TokenIDs), len(want[v])) || !assert.Equal(t, want[v][:len(c.TokenIDs)], c.TokenIDs, "weight version %s", v) {
						return
					}
					seen[w]["abort"]++
					continue
				}
				if !assert.Equal(t, want[v], c.TokenIDs, "weight version %s", v) {
					return
				}
				seen[w][v]++
			}
		})
	}
	reloads := []string{
		"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q}`, b),
		"/collective_rpc", fmt.Sprintf(`{"method": "reload_weights", "kwargs": {"weights_path": %q}}`, a),
		"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q, "abort_all_requests": true}`, b),
		"/collective_rpc", fmt.Sprintf(`{"method": "update_config", "args": [{"model_config": {"model": %q}}]}`, a),
		"/collective_rpc", `{"method": "reload_weights"}`,
		"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q}`, b),
	}
	for i := 0; i < len(reloads); i += 2 {
		status, body := post(t, ts.URL+reloads[i], reloads[i+1])
		require.Equal(t, http.StatusOK, status, "%s", body)
	}
	close(stop)
	wg.Wait()
	total := 0
	for _, m := range seen {
		for _, n := range m {
			total += n
		}
	}
	assert.Positive(t, total)
}

// TestPauseHoldsRequests: while paused, completions wait (until resume,
// or until their context ends), in vLLM's and SGLang's spellings.
func TestPauseHoldsRequests(t *testing.T) {
	a := writeCheckpoint(t, 1, 16)
	g := greedy(t, a, testPrompt, 6)
	for _, api := range []struct {
		name, pause, resume, pauseAnswer, resumeAnswer string
	}{
		{"vllm", "/pause?mode=wait", "/resume", `{"status": "paused"}`, `{"status": "resumed"}`},
		{"vllm keep", "/pause?mode=keep&clear_cache=false", "/resume", `{"status": "paused"}`, `{"status": "resumed"}`},
		{"sglang", "/pause_generation", "/continue_generation",
			`{"message": "Generation paused successfully.", "status": "ok"}`, `{"message": "Generation continued successfully.", "status": "ok"}`},
		{"sglang in place", "/pause_generation", "/continue_generation",
			`{"message": "Generation paused successfully.", "status": "ok"}`, `{"message": "Generation continued successfully.", "status": "ok"}`},
	} {
		t.Run(api.name, func(t *testing.T) {
			s, ts := startServer(t, a, Config{})
			body := ""
			if api.name == "sglang in place" {
				body = `{"mode": "in_place"}`
			}
			status, out := post(t, ts.URL+api.pause, body)
			require.Equal(t, http.StatusOK, status, "%s", out)
			assert.JSONEq(t, api.pauseAnswer, string(out))
			_, out = get(t, ts.URL+"/is_paused")
			assert.JSONEq(t, `{"is_paused": true}`, string(out))
			status, _ = get(t, ts.URL+"/health")
			assert.Equal(t, http.StatusOK, status, "a paused server is healthy")

			held := async(t, ts.URL, greedyBody(testPrompt, 6))
			waitFor(t, "the request to be held", func() bool { return s.waitingCount() == 1 })
			// A held request whose context ends leaves.
			ctx, cancel := context.WithCancel(context.Background())
			sampler, err := openai.New(openai.Config{BaseURLs: []string{ts.URL}, MaxRetries: -1})
			require.NoError(t, err)
			gone := make(chan error, 1)
			go func() {
				_, err := sampler.Generate(ctx, []lm.GenerateRequest{{Prompt: testPrompt}})
				gone <- err
			}()
			waitFor(t, "the second request to be held", func() bool { return s.waitingCount() == 2 })
			cancel()
			require.ErrorIs(t, <-gone, context.Canceled)
			waitFor(t, "the cancelled request to leave", func() bool { return s.waitingCount() == 1 })
			select {
			case <-held:
				t.Fatal("a request ran while paused")
			default:
			}

			status, out = post(t, ts.URL+api.resume, "")
			require.Equal(t, http.StatusOK, status)
			assert.JSONEq(t, api.resumeAnswer, string(out))
			r := <-held
			assert.Equal(t, g, r.Choices[0].TokenIDs)
			_, out = get(t, ts.URL+"/is_paused")
			assert.JSONEq(t, `{"is_paused": false}`, string(out))
		})
	}
}

// TestPauseWaitsForRequestsInFlight: mode "wait" answers once the
// request in flight has finished, which it does normally.
func TestPauseWaitsForRequestsInFlight(t *testing.T) {
	a := writeCheckpoint(t, 1, 16)
	g := greedy(t, a, testPrompt, 6)
	s, ts := startServer(t, a, Config{})
	bg := newBlockingGen(s, 1)
	inflight := async(t, ts.URL, greedyBody(testPrompt, 6))
	<-bg.started
	paused := make(chan int, 1)
	go func() {
		status, _ := post(t, ts.URL+"/pause?mode=wait", "")
		paused <- status
	}()
	waitFor(t, "the pause to take hold", s.isPaused)
	select {
	case <-paused:
		t.Fatal("the pause answered with a request in flight")
	default:
	}
	close(bg.release)
	assert.Equal(t, g, (<-inflight).Choices[0].TokenIDs)
	assert.Equal(t, http.StatusOK, <-paused)
}

// TestAbort: a pause or reload in abort mode ends the request in flight
// with finish_reason "abort" and, as none was generated yet, no tokens;
// policy/openai without retries fails with ErrAborted, and with
// Config.Partial returns the empty partial generation of version 0.
func TestAbort(t *testing.T) {
	a, b, _, gb := twoCheckpoints(t, testPrompt)
	for _, c := range []struct{ name, path, body, version string }{
		{"vllm pause", "/pause?mode=abort", "", "0"},
		{"vllm pause default", "/pause", "", "0"},
		{"sglang pause", "/pause_generation", `{"mode": "abort"}`, "0"},
		{"sglang reload", "/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q, "abort_all_requests": true}`, b), "0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, ts := startServer(t, a, Config{})
			bg := newBlockingGen(s, 3)
			body := greedyBody(testPrompt, 6)
			body["logprobs"] = 1
			aborted := async(t, ts.URL, body)
			<-bg.started
			sampler, err := openai.New(openai.Config{BaseURLs: []string{ts.URL}, MaxRetries: -1})
			require.NoError(t, err)
			clientErr := make(chan error, 1)
			go func() {
				_, err := sampler.Generate(context.Background(), []lm.GenerateRequest{{Prompt: testPrompt}})
				clientErr <- err
			}()
			<-bg.started
			partial, err := openai.New(openai.Config{BaseURLs: []string{ts.URL}, Partial: true})
			require.NoError(t, err)
			clientGen := make(chan []lm.Generation, 1)
			go func() {
				gens, err := partial.Generate(context.Background(), []lm.GenerateRequest{{Prompt: testPrompt}})
				assert.NoError(t, err)
				clientGen <- gens
			}()
			<-bg.started
			status, out := post(t, ts.URL+c.path, c.body)
			require.Equal(t, http.StatusOK, status, "%s", out)
			r := <-aborted
			require.Len(t, r.Choices, 1)
			assert.Equal(t, "abort", r.Choices[0].FinishReason)
			assert.Equal(t, []int{}, r.Choices[0].TokenIDs)
			assert.Empty(t, r.Choices[0].Text)
			assert.Empty(t, r.Choices[0].Logprobs.Tokens)
			assert.Equal(t, 0, r.Usage.CompletionTokens)
			assert.Equal(t, c.version, r.Metadata.WeightVersion, "no token was generated, on the old weights")
			assert.ErrorIs(t, <-clientErr, openai.ErrAborted)
			assert.Equal(t, []lm.Generation{{Tokens: []int{}, FinishReason: lm.FinishAbort, WeightVersion: c.version}}, <-clientGen)
			if c.path == "/update_weights_from_disk" {
				// The reload happened, and generation goes on.
				r := complete(t, ts.URL, greedyBody(testPrompt, 6))
				assert.Equal(t, gb, r.Choices[0].TokenIDs)
				assert.Equal(t, "1", r.Metadata.WeightVersion)
			}
		})
	}
}

// TestRetract: SGLang's "retract" stops the request in flight and runs
// it again once generation continues, on the weights served then.
func TestRetract(t *testing.T) {
	a, b, _, gb := twoCheckpoints(t, testPrompt)
	s, ts := startServer(t, a, Config{})
	bg := newBlockingGen(s, 1)
	retracted := async(t, ts.URL, greedyBody(testPrompt, 6))
	<-bg.started
	status, out := post(t, ts.URL+"/pause_generation", `{"mode": "retract"}`)
	require.Equal(t, http.StatusOK, status, "%s", out)
	// It went back to the queue.
	waitFor(t, "the request to wait", func() bool { return s.waitingCount() == 1 })
	// A reload while paused needs no wait, and keep_pause leaves the
	// server paused.
	status, out = post(t, ts.URL+"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q, "keep_pause": true}`, b))
	require.Equal(t, http.StatusOK, status, "%s", out)
	assert.True(t, s.isPaused())
	status, _ = post(t, ts.URL+"/continue_generation", "{}")
	require.Equal(t, http.StatusOK, status)
	r := <-retracted
	assert.Equal(t, gb, r.Choices[0].TokenIDs)
	assert.Equal(t, "1", r.Metadata.WeightVersion)
	assert.Len(t, bg.started, 1, "it ran a second time")
}

// TestClose: Close ends held and running requests with 503, refuses
// later ones, reports unhealthy, closes the model, and is idempotent.
func TestClose(t *testing.T) {
	a := writeCheckpoint(t, 1, 16)
	s, ts := startServer(t, a, Config{})
	bg := newBlockingGen(s, 1)
	running := make(chan int, 1)
	go func() {
		status, _ := post(t, ts.URL+"/v1/completions", `{"prompt": [1, 2]}`)
		running <- status
	}()
	<-bg.started
	paused := make(chan int, 1)
	go func() {
		status, _ := post(t, ts.URL+"/pause?mode=wait", "")
		paused <- status
	}()
	waitFor(t, "the pause to take hold", s.isPaused)
	held := make(chan int, 1)
	go func() {
		status, _ := post(t, ts.URL+"/v1/completions", `{"prompt": [1, 2]}`)
		held <- status
	}()
	waitFor(t, "the request to be held", func() bool { return s.waitingCount() == 1 })

	require.NoError(t, s.Close())
	assert.Equal(t, http.StatusServiceUnavailable, <-running)
	assert.Equal(t, http.StatusServiceUnavailable, <-held)
	<-paused // the pause took hold before Close; its answer does not matter
	require.NoError(t, s.Close(), "closing twice")

	status, body := post(t, ts.URL+"/v1/completions", `{"prompt": [1, 2]}`)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, string(body), "shutting down")
	status, _ = get(t, ts.URL+"/health")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	status, body = post(t, ts.URL+"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q}`, a))
	assert.Equal(t, http.StatusServiceUnavailable, status, "%s", body)
	status, _ = post(t, ts.URL+"/pause", "")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	_, err := s.eng.model.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1}}})
	assert.ErrorIs(t, err, policy.ErrInput, "the model is closed")
}

// TestReloadTimeout: a collective_rpc whose timeout runs out while a
// completion runs on the old weights answers 504 and leaves the old
// weights serving; the completion is unaffected.
func TestReloadTimeout(t *testing.T) {
	a, b, ga, _ := twoCheckpoints(t, testPrompt)
	s, ts := startServer(t, a, Config{})
	bg := newBlockingGen(s, 1)
	inflight := async(t, ts.URL, greedyBody(testPrompt, 6))
	<-bg.started
	status, body := post(t, ts.URL+"/collective_rpc", fmt.Sprintf(`{"method": "reload_weights", "kwargs": {"weights_path": %q}, "timeout": 0.05}`, b))
	assert.Equal(t, http.StatusGatewayTimeout, status)
	var e struct {
		Detail string `json:"detail"`
	}
	require.NoError(t, json.Unmarshal(body, &e), "%s", body)
	assert.Contains(t, e.Detail, "collective_rpc reload_weights timed out after 0.05s")
	close(bg.release)
	r := <-inflight
	assert.Equal(t, ga, r.Choices[0].TokenIDs)
	assert.Equal(t, "0", r.Metadata.WeightVersion)
	r = complete(t, ts.URL, greedyBody(testPrompt, 6))
	assert.Equal(t, ga, r.Choices[0].TokenIDs, "the old weights serve")
	assert.Equal(t, "0", s.WeightVersion())
}
