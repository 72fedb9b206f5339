package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/examples/internal/setup/setuptest"
	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/serve"
)

// engineServer is package serve over the checkpoint in dir, playing the
// engine of kind with its defaults (serve.Config.Engine), under the name
// "tiny"; it counts the POSTs to each path.
type engineServer struct {
	*httptest.Server
	mu    sync.Mutex
	posts map[string]int
}

func (s *engineServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts[path]
}

func startEngine(t *testing.T, dir string, kind fleet.Kind) *engineServer {
	t.Helper()
	engine := serve.EngineSGLang
	if kind != fleet.SGLang {
		engine = serve.EngineVLLM
	}
	return startServe(t, dir, engine)
}

// startServe is startEngine playing engine ("": package serve's own
// defaults).
func startServe(t *testing.T, dir string, engine serve.Engine) *engineServer {
	t.Helper()
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	m, err := policy.Load(dir, policy.WithDecoder(tok.Decode))
	require.NoError(t, err)
	srv, err := serve.New(serve.Config{Model: m, ModelPath: dir, Name: "tiny", Encode: tok.Encode, Decode: tok.Decode,
		LogprobsMode: openai.ProcessedLogprobs, Engine: engine})
	require.NoError(t, err)
	es := &engineServer{posts: map[string]int{}}
	es.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			es.mu.Lock()
			es.posts[r.URL.Path]++
			es.mu.Unlock()
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { es.Close(); srv.Close() })
	return es
}

// TestTrainFleet trains on-policy against servers playing vLLM and
// SGLang (package serve with their defaults): the rollouts are sampled
// there at most one step ahead, the weights — or, with -lora-rank, the
// adapters — are published to every server after each step, and the last
// published version is the trained policy the program exports.
func TestTrainFleet(t *testing.T) {
	setuptest.NeedPython(t)
	for _, c := range []struct {
		name    string
		kind    fleet.Kind
		servers int
		lora    bool
		update  string // the path a publication POSTs once to each server
		sample  string // the path of a sampling request
	}{
		{"vllm, full weights", fleet.VLLM, 2, false, "/pause", "/v1/completions"},
		{"sglang, full weights", fleet.SGLang, 1, false, "/update_weights_from_disk", "/generate"},
		{"vllm, LoRA", fleet.VLLM, 1, true, "/v1/load_lora_adapter", "/v1/completions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			model := tinyCheckpoint(t)
			var urls []string
			var servers []*engineServer
			for range c.servers {
				s := startEngine(t, model, c.kind)
				servers = append(servers, s)
				urls = append(urls, s.URL)
			}
			out, shared := filepath.Join(t.TempDir(), "run"), t.TempDir()
			args := []string{
				"-model", model, "-train", "testdata/train.jsonl", "-steps", "2", "-batch", "2", "-n", "2",
				"-max-response", "12", "-overlong-buffer", "4", "-sandbox-workers", "1", "-out", out,
				"-fleet-servers", strings.Join(urls, ","), "-fleet-kind", string(c.kind), "-fleet-dir", shared, "-served-model", "tiny",
			}
			if c.lora {
				args = append(args, "-lora-rank", "4", "-lora-alpha", "8")
			}
			code, stdout, stderr := runMain(t, args...)
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Contains(t, stderr, fmt.Sprintf("grpotcr: fleet: %d %s servers (%s) checked", c.servers, c.kind, strings.Join(urls, ", ")))
			if c.lora {
				assert.Contains(t, stderr, "grpotcr: trains LoRA adapters only (rank 4, alpha 8) on q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj: ")
			} else {
				assert.Contains(t, stderr, "grpotcr: trains all ")
			}
			assert.NotContains(t, stderr, "does not sync its updates")

			rows, err := metrics.ReadFile(filepath.Join(out, metricsFile))
			require.NoError(t, err)
			require.Len(t, rows, 2)
			for _, r := range rows {
				assert.Equal(t, 4.0, r.Values["train/trajectories"])
				assert.LessOrEqual(t, r.Values["async/staleness_max"], 1.0, "-fleet-staleness 1")
				assert.Contains(t, r.Values, "timing_s/sync_weights")
			}
			// Every server sampled, and took the three publications:
			// version 0 before the first step (the trainer makes sure the
			// servers hold the policy it trains), then after steps 1 and 2.
			for i, s := range servers {
				assert.Positive(t, s.count(c.sample), "server %d sampled", i)
				assert.Equal(t, 3, s.count(c.update), "server %d: %v", i, s.posts)
			}
			ents, err := os.ReadDir(shared)
			require.NoError(t, err)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			assert.Equal(t, []string{"v00000001", "v00000002"}, names)
			last := filepath.Join(shared, "v00000002")
			if c.lora {
				assert.FileExists(t, filepath.Join(last, policy.AdapterConfigFileName))
				assert.NoFileExists(t, filepath.Join(last, "model.safetensors"))
				return
			}
			// The servers' last weights are the trained policy's.
			published, err := os.ReadFile(filepath.Join(last, "model.safetensors"))
			require.NoError(t, err)
			final, err := os.ReadFile(filepath.Join(out, finalDir, "model.safetensors"))
			require.NoError(t, err)
			assert.Equal(t, final, published)
		})
	}
}

// TestTrainFleetFailsFast: servers that cannot serve the fleet stop the
// program before the model is loaded, naming the server and the cause.
func TestTrainFleetFailsFast(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	model := tinyCheckpoint(t)
	out := filepath.Join(t.TempDir(), "run")
	code, _, stderr := runMain(t, "-model", model, "-train", "testdata/train.jsonl", "-out", out,
		"-fleet-servers", dead.URL, "-fleet-kind", "vllm", "-fleet-dir", t.TempDir())
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "grpotcr: -fleet-servers: ")
	assert.Contains(t, stderr, dead.URL)
	assert.Contains(t, stderr, "does not answer")
	assert.NotContains(t, stderr, "device: ", "nothing loaded")
	assert.NoDirExists(t, out)
}

// TestTrainFleetSecondRun: package serve with its own defaults, driven
// as a vLLM server, numbers its loads itself, so after a one-step run
// (versions 0 and 1 published, here by a fleet of the test's) it reports
// "2". A second run expecting the weights the server was started with is
// refused before anything is loaded, saying what -fleet-version's values
// do; "adopt" takes the server's number, "reset" publishes the run's
// starting weights before anything samples them (one load more).
func TestTrainFleetSecondRun(t *testing.T) {
	setuptest.NeedPython(t)
	model := tinyCheckpoint(t)
	s := startServe(t, model, "")
	shared := t.TempDir()
	earlier, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: s.URL, Kind: fleet.VLLM}}, Dir: t.TempDir()})
	require.NoError(t, err)
	m, err := policy.Load(model)
	require.NoError(t, err)
	defer m.Close()
	for v := range 2 {
		require.NoError(t, earlier.Publish(context.Background(), v, m))
	}
	args := func(out string, extra ...string) []string {
		return append([]string{
			"-model", model, "-train", "testdata/train.jsonl", "-steps", "1", "-batch", "2", "-n", "2",
			"-max-response", "12", "-overlong-buffer", "4", "-sandbox-workers", "1", "-out", out,
			"-fleet-servers", s.URL, "-fleet-kind", "vllm", "-fleet-dir", shared,
		}, extra...)
	}
	code, stdout, stderr := runMain(t, args(filepath.Join(t.TempDir(), "second"))...)
	assert.Equal(t, 1, code, stdout)
	assert.Contains(t, stderr, s.URL+` "2", but Config.Version is 0`)
	assert.Contains(t, stderr, "(-fleet-version start; -fleet-version adopt takes the servers' number, reset publishes this run's starting weights to them first)")
	assert.NotContains(t, stderr, "device: ", "nothing loaded")

	loads := s.count("/pause")
	code, stdout, stderr = runMain(t, args(filepath.Join(t.TempDir(), "adopt"), "-fleet-version", "adopt")...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr, "published to "+shared+" as version 0 before the first step, then as version k after step k")
	assert.Contains(t, stderr, "grpotcr: fleet: they hold version 2, taken as it is (-fleet-version adopt): the run samples their weights until it publishes its own as version 0 before its first step\n")
	assert.Equal(t, loads+2, s.count("/pause"), "versions 0 and 1")

	loads = s.count("/pause")
	code, stdout, stderr = runMain(t, args(filepath.Join(t.TempDir(), "reset"), "-fleet-version", "reset", "-val", "testdata/val.jsonl", "-val-n", "1")...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr, "grpotcr: fleet: they get this run's starting weights as version 0 before anything samples them (-fleet-version reset)\n")
	assert.Equal(t, loads+3, s.count("/pause"), "the reset, then versions 0 and 1")
}
