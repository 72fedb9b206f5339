package fleet_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/serve"
)

// hide makes the wrapped server answer FastAPI's 404 for paths, as an
// engine started without the flag that adds them.
func hide(paths ...string) func(int, http.Handler) http.Handler {
	return func(_ int, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for _, p := range paths {
				if r.URL.Path == p {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusNotFound)
					fmt.Fprint(w, `{"detail":"Not Found"}`)
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	}
}

// TestCheck: Check passes servers that answer, serve the model named and
// take the fleet's updates, and names each server that does not, with
// what it lacks — changing nothing on any of them.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		engine  serve.Engine
		kind    fleet.Kind
		wrap    func(int, http.Handler) http.Handler
		prepare func(t *testing.T, url string) // before Check
		mod     func(*fleet.Config)
		errs    []string // in the error, besides the server's URL; none: passes
	}{
		{name: "sglang", engine: serve.EngineSGLang, kind: fleet.SGLang},
		{name: "vllm", engine: serve.EngineVLLM, kind: fleet.VLLM},
		{name: "vllm, old reload", engine: serve.EngineVLLM, kind: fleet.VLLMModelConfig},
		{name: "serve's own defaults", kind: fleet.SGLang},
		{name: "model named", engine: serve.EngineSGLang, kind: fleet.SGLang,
			mod: func(c *fleet.Config) { c.Sampler.Model = serve.DefaultName }},
		{name: "vllm adapters", engine: serve.EngineVLLM, kind: fleet.VLLM, mod: func(c *fleet.Config) { c.Adapter = "pol" }},
		{name: "another model", engine: serve.EngineVLLM, kind: fleet.VLLM,
			mod:  func(c *fleet.Config) { c.Sampler.Model = "Qwen/Qwen3-4B" },
			errs: []string{`serves ["agentrl"], not "Qwen/Qwen3-4B" (Config.Sampler.Model)`}},
		{name: "vllm without dev mode", engine: serve.EngineVLLM, kind: fleet.VLLM,
			wrap: hide("/pause", "/resume", "/is_paused", "/collective_rpc"),
			errs: []string{"no GET /is_paused: start vLLM with VLLM_SERVER_DEV_MODE=1"}},
		{name: "vllm without the rpc route", engine: serve.EngineVLLM, kind: fleet.VLLM,
			wrap: hide("/collective_rpc"),
			errs: []string{"no POST /collective_rpc: start vLLM with VLLM_SERVER_DEV_MODE=1"}},
		{name: "vllm without runtime adapters", engine: serve.EngineVLLM, kind: fleet.VLLM,
			wrap: hide("/v1/load_lora_adapter", "/v1/unload_lora_adapter"),
			mod:  func(c *fleet.Config) { c.Adapter = "pol" },
			errs: []string{"no POST /v1/load_lora_adapter: start vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"}},
		{name: "vllm paused", engine: serve.EngineVLLM, kind: fleet.VLLM,
			prepare: func(t *testing.T, url string) {
				resp, err := http.Post(url+"/pause?mode=wait", "application/json", nil)
				require.NoError(t, err)
				resp.Body.Close()
			},
			errs: []string{"is paused (an update that did not finish?): POST /resume to it"}},
		{name: "no model list", engine: serve.EngineSGLang, kind: fleet.SGLang, wrap: hide("/v1/models"),
			errs: []string{`GET /v1/models: status 404: {"detail":"Not Found"}`}},
		{name: "another version", engine: serve.EngineSGLang, kind: fleet.SGLang,
			mod:  func(c *fleet.Config) { c.Version = 3 },
			errs: nil}, // "default" is whatever the server started with
		{name: "another numbered version", kind: fleet.SGLang,
			mod:  func(c *fleet.Config) { c.Version = 3 },
			errs: []string{`"0", but Config.Version is 3`}},
		{name: "another numbered version, adapters", kind: fleet.SGLang,
			mod:  func(c *fleet.Config) { c.Version = 3; c.Adapter = "pol" },
			errs: nil}, // the base weights' version is not checked
	} {
		t.Run(c.name, func(t *testing.T) {
			hs := engineServers(t, 1, 1, c.engine, c.wrap)
			url := hs[0].URL
			if c.prepare != nil {
				c.prepare(t, url)
			}
			cfg := fleet.Config{Servers: []fleet.Server{{URL: url, Kind: c.kind}}, Dir: t.TempDir(), Timeout: 5 * time.Second}
			if c.mod != nil {
				c.mod(&cfg)
			}
			f, err := fleet.New(cfg)
			require.NoError(t, err)
			err = f.Check(ctx)
			if c.errs == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorContains(t, err, url)
			for _, e := range c.errs {
				assert.ErrorContains(t, err, e)
			}
		})
	}
}

// TestCheckChangesNothing: after Check the servers hold the same weights
// under the same versions, unpaused, and sample as before.
func TestCheckChangesNothing(t *testing.T) {
	ctx := context.Background()
	s := engineServers(t, 1, 1, serve.EngineSGLang, nil)
	v := engineServers(t, 1, 1, serve.EngineVLLM, nil)
	reqs := greedyReqs(3)
	want, err := tinyModel(t, 1).Generate(ctx, reqs)
	require.NoError(t, err)
	for _, c := range []struct {
		url     string
		kind    fleet.Kind
		api     openai.API
		version string // the JSON of what the server reports, before and after
	}{{s[0].URL, fleet.SGLang, openai.APISGLangGenerate, `"default"`}, {v[0].URL, fleet.VLLM, openai.APICompletions, `null`}} {
		f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: c.url, Kind: c.kind}}, Dir: t.TempDir(),
			Sampler: openai.Config{API: c.api, LogprobsMode: openai.ProcessedLogprobs}})
		require.NoError(t, err)
		require.NoError(t, f.Check(ctx))
		require.NoError(t, f.Check(ctx), "twice")
		got, err := f.Generate(ctx, reqs)
		require.NoError(t, err)
		for i := range got {
			assert.Equal(t, want[i].Tokens, got[i].Tokens)
		}
		resp, err := http.Get(c.url + "/is_paused")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.JSONEq(t, `{"is_paused": false}`, string(body))
		resp, err = http.Get(c.url + "/model_info")
		require.NoError(t, err)
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Contains(t, string(body), `"weight_version":`+c.version)
	}
}

// TestCheckServers: every failing server is named, the others not; a
// server that does not answer is one of them; servers that disagree on
// the version they started with fail the check (ErrVersion).
func TestCheckServers(t *testing.T) {
	ctx := context.Background()
	good := engineServers(t, 1, 1, serve.EngineSGLang, nil)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: good[0].URL}, {URL: dead.URL}}, Dir: t.TempDir(), Timeout: time.Second})
	require.NoError(t, err)
	err = f.Check(ctx)
	require.ErrorIs(t, err, fleet.ErrCheck)
	assert.ErrorContains(t, err, "sglang server "+dead.URL+": does not answer")
	assert.NotContains(t, err.Error(), good[0].URL)

	// "default" (SGLang's start) and "0" (serve's own) name the weights
	// differently: the fleet cannot tell which answer is current.
	own := servers(t, 1, 1, nil)
	f, err = fleet.New(fleet.Config{Servers: []fleet.Server{{URL: good[0].URL}, {URL: own[0].URL}}, Dir: t.TempDir()})
	require.NoError(t, err)
	err = f.Check(ctx)
	require.ErrorIs(t, err, fleet.ErrVersion)
	assert.ErrorContains(t, err, fmt.Sprintf(`%s "default", %s "0"`, good[0].URL, own[0].URL))
	_, err = f.Generate(ctx, greedyReqs(1))
	require.ErrorIs(t, err, fleet.ErrVersion, "Generate reads the versions too")
}

// TestCheckSGLangServedName: SGLang names its model after the folder it
// last loaded, so after a Publish a folder inside Dir passes as the
// model; for vLLM, which keeps its name, it does not.
func TestCheckSGLangServedName(t *testing.T) {
	dir := t.TempDir()
	loaded := filepath.Join(dir, "v00000004")
	models := func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"root":%q,"max_model_len":4096}]}`, loaded, loaded)
		case "/is_paused":
			fmt.Fprint(w, `{"is_paused":false}`)
		case "/collective_rpc":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"detail":"Missing 'method' in request body"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"detail":"Not Found"}`)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(models))
	defer srv.Close()
	for _, c := range []struct {
		kind fleet.Kind
		ok   bool
	}{{fleet.SGLang, true}, {fleet.VLLM, false}} {
		f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: srv.URL, Kind: c.kind}}, Dir: dir,
			Sampler: openai.Config{Model: "Qwen/Qwen3-4B"}})
		require.NoError(t, err)
		err = f.Check(context.Background())
		if c.ok {
			assert.NoError(t, err, c.kind)
		} else {
			assert.ErrorIs(t, err, fleet.ErrCheck, c.kind)
		}
	}
}
