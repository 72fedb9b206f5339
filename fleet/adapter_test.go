package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
)

var (
	allLinear = policy.LoRAConfig{Rank: 4, Alpha: 8, TargetModules: []string{policy.LoRAAllLinear}}
	// rsLoRA scales by Alpha/√Rank = 6/2 = 3, which folded is
	// lora_alpha 3·4 = 12 over r 4.
	rsLoRA = policy.LoRAConfig{Rank: 4, Alpha: 6, UseRSLoRA: true, TargetModules: []string{"q_proj", "v_proj", "up_proj"}}
)

// loraPolicy is a trainer's policy after step optimizer steps, in
// miniature: the tiny model of seed 1 (what the servers serve) with an
// adapter of cfg whose B is drawn from step, so that every step's adapter
// changes the greedy continuations (a fresh adapter, B = 0, would not).
func loraPolicy(t *testing.T, cfg policy.LoRAConfig, step uint64) *policy.Model {
	t.Helper()
	m := tinyModel(t, 1)
	require.NoError(t, m.AddLoRA(cfg, 1))
	rng := rand.New(rand.NewPCG(step, 7))
	for _, p := range m.Params() {
		if strings.Contains(p.Name, "lora_B") {
			for i := range p.Data {
				p.Data[i] = float32(rng.NormFloat64() * 0.5)
			}
		}
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// servedModels lists the ids GET /v1/models answers on a server.
func servedModels(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url + "/v1/models")
	require.NoError(t, err)
	defer resp.Body.Close()
	var l struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&l))
	var ids []string
	for _, c := range l.Data {
		ids = append(ids, c.ID)
	}
	return ids
}

func folders(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestFleetPublishesAdapter publishes three steps' adapters to two
// package serve servers, through vLLM's adapter API, SGLang's, and one
// of each, sampled through /v1/completions and SGLang's /generate: before
// the first publish the fleet samples the base model; after each, every
// generation is exactly the trainer's model's (tokens, and log-probs),
// and the published folder loaded onto a fresh base model gives the
// same; each generation carries its version; every server lists the
// current adapter only, the previous one unloaded; old folders go as for
// full weights (Keep 2).
func TestFleetPublishesAdapter(t *testing.T) {
	ctx := context.Background()
	reqs := greedyReqs(6)
	base, err := tinyModel(t, 1).Generate(ctx, reqs)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		kinds [2]fleet.Kind
		api   openai.API
	}{
		{"vllm", [2]fleet.Kind{fleet.VLLM, fleet.VLLM}, openai.APICompletions},
		{"sglang", [2]fleet.Kind{fleet.SGLang, fleet.SGLang}, openai.APISGLangGenerate},
		{"mixed", [2]fleet.Kind{fleet.SGLang, fleet.VLLMModelConfig}, openai.APICompletions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := kindServers(t, tc.kinds[0], tc.kinds[1])
			dir := t.TempDir()
			f, err := fleet.New(fleet.Config{
				Servers: []fleet.Server{{URL: hs[0].URL, Kind: tc.kinds[0]}, {URL: hs[1].URL, Kind: tc.kinds[1]}},
				Dir:     dir, Adapter: "pol",
				Sampler: openai.Config{API: tc.api, LogprobsMode: openai.ProcessedLogprobs},
			})
			require.NoError(t, err)
			got, err := f.Generate(ctx, reqs)
			require.NoError(t, err)
			for i := range got {
				assert.Equal(t, base[i].Tokens, got[i].Tokens)
				assert.Equal(t, "0", got[i].WeightVersion)
			}
			assert.Empty(t, f.Adapter())

			for step := 1; step <= 3; step++ {
				pol := loraPolicy(t, allLinear, uint64(step))
				want, err := pol.Generate(ctx, reqs)
				require.NoError(t, err)
				require.NotEqual(t, base[0].Tokens, want[0].Tokens, "the adapter must change the continuation")
				require.NoError(t, f.Publish(ctx, step, pol))
				name := fmt.Sprintf("pol-v%08d", step)
				assert.Equal(t, name, f.Adapter())
				assert.Equal(t, name, f.AdapterName(step))
				assert.Equal(t, step, f.Version())

				check := tinyModel(t, 1)
				require.NoError(t, check.LoadAdapter(filepath.Join(dir, fmt.Sprintf("v%08d", step))))
				fromFolder, err := check.Generate(ctx, reqs)
				require.NoError(t, err)
				for range 3 { // requests spread over both servers
					got, err := f.Generate(ctx, reqs)
					require.NoError(t, err)
					for i := range got {
						assert.Equal(t, want[i].Tokens, got[i].Tokens)
						assert.Equal(t, fromFolder[i].Tokens, got[i].Tokens)
						assert.InDeltaSlice(t, want[i].LogProbs, got[i].LogProbs, 1e-5)
						assert.Equal(t, fmt.Sprint(step), got[i].WeightVersion)
					}
				}
				for _, h := range hs {
					assert.Equal(t, []string{"agentrl", name}, servedModels(t, h.URL), "the previous adapter is unloaded")
				}
			}
			assert.Equal(t, []string{"v00000002", "v00000003"}, folders(t, dir))
		})
	}
}

// TestFleetAdapterFolding: an rsLoRA adapter is published with its
// scale folded into lora_alpha (use_rslora false, lora_alpha 12 for scale
// 3 at r 4) when an SGLang server reads it, since SGLang computes
// lora_alpha/r whatever use_rslora says; as trained (lora_alpha 6,
// use_rslora true) when only vLLM servers do. Either way the servers
// generate what the trainer's model does.
func TestFleetAdapterFolding(t *testing.T) {
	ctx := context.Background()
	reqs := greedyReqs(4)
	pol := loraPolicy(t, rsLoRA, 1)
	want, err := pol.Generate(ctx, reqs)
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		kinds  []fleet.Kind
		alpha  float64
		rslora bool
	}{
		{"vllm only", []fleet.Kind{fleet.VLLM}, 6, true},
		{"sglang", []fleet.Kind{fleet.SGLang}, 12, false},
		{"one sglang among vllm", []fleet.Kind{fleet.VLLM, fleet.SGLang}, 12, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := servers(t, len(tc.kinds), 1, nil)
			var ss []fleet.Server
			for i, k := range tc.kinds {
				ss = append(ss, fleet.Server{URL: hs[i].URL, Kind: k})
			}
			dir := t.TempDir()
			f, err := fleet.New(fleet.Config{Servers: ss, Dir: dir, Adapter: "pol"})
			require.NoError(t, err)
			require.NoError(t, f.Publish(ctx, 5, pol))
			data, err := os.ReadFile(filepath.Join(dir, "v00000005", policy.AdapterConfigFileName))
			require.NoError(t, err)
			var cfg struct {
				R         int     `json:"r"`
				LoRAAlpha float64 `json:"lora_alpha"`
				UseRSLoRA bool    `json:"use_rslora"`
			}
			require.NoError(t, json.Unmarshal(data, &cfg))
			assert.Equal(t, 4, cfg.R)
			assert.InDelta(t, tc.alpha, cfg.LoRAAlpha, 1e-9)
			assert.Equal(t, tc.rslora, cfg.UseRSLoRA)
			got, err := f.Generate(ctx, reqs)
			require.NoError(t, err)
			for i := range got {
				assert.Equal(t, want[i].Tokens, got[i].Tokens)
			}
		})
	}
}

// TestFleetAdapterTurnsNeverMix: generations run without pause while
// adapters are published again and again; every generation is what the
// policy of the version it reports produces, never a mix, and sampling
// goes on while the servers load each adapter.
func TestFleetAdapterTurnsNeverMix(t *testing.T) {
	ctx := context.Background()
	hs := servers(t, 2, 1, nil)
	f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: hs[0].URL}, {URL: hs[1].URL, Kind: fleet.VLLM}}, Dir: t.TempDir(), Adapter: "pol"})
	require.NoError(t, err)
	reqs := greedyReqs(4)
	pols := map[string]*policy.Model{"0": tinyModel(t, 1)}
	want := map[string][]lm.Generation{}
	for v := 1; v <= 3; v++ {
		pols[fmt.Sprint(v)] = loraPolicy(t, allLinear, uint64(v))
	}
	for v, m := range pols {
		want[v], err = m.Generate(ctx, reqs)
		require.NoError(t, err)
	}

	seen := publishWhileSampling(t, f, reqs, want, func(v int) {
		require.NoError(t, f.Publish(ctx, v, pols[fmt.Sprint(v)]))
	})
	assert.Positive(t, seen["0"])
	assert.Positive(t, seen["3"])
}

// refuseAdapters answers the adapter loads of server 1 with its engine's
// refusal (vLLM's ErrorResponse 500, SGLang's LoRAUpdateOutput with
// success false) instead of loading.
func refuseAdapters(i int, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case i != 1:
		case r.URL.Path == "/v1/load_lora_adapter":
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"message":"CUDA out of memory","type":"InternalServerError","param":null,"code":500}}`)
			return
		case r.URL.Path == "/load_lora_adapter":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"success":false,"error_message":"LoRA adapter with rank 4 is incompatible with the current LoRA memory pool configuration.","loaded_adapters":{}}`)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TestFleetAdapterServerRefuses: a server that refuses the adapter, or is
// gone, makes Publish fail naming it; the other takes it, the fleet moves
// to the new version, and sampling passes over the server without the
// adapter (it refuses the adapter's name), so that every generation is
// the new policy's.
func TestFleetAdapterServerRefuses(t *testing.T) {
	ctx := context.Background()
	reqs := greedyReqs(4)
	pol := loraPolicy(t, allLinear, 1)
	want, err := pol.Generate(ctx, reqs)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		kind fleet.Kind
		api  openai.API
		dead bool
		msg  string
	}{
		{"vllm refuses", fleet.VLLM, openai.APICompletions, false, "status 500"},
		{"sglang refuses", fleet.SGLang, openai.APISGLangGenerate, false, `not successful: "LoRA adapter with rank 4 is incompatible`},
		{"vllm gone", fleet.VLLM, openai.APICompletions, true, "connection refused"},
		{"sglang gone", fleet.SGLang, openai.APISGLangGenerate, true, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := servers(t, 2, 1, refuseAdapters)
			f, err := fleet.New(fleet.Config{
				Servers: []fleet.Server{{URL: hs[0].URL, Kind: tc.kind}, {URL: hs[1].URL, Kind: tc.kind}},
				Dir:     t.TempDir(), Adapter: "pol", Timeout: 2 * time.Second,
				Sampler: openai.Config{API: tc.api, MaxRetries: 2, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond},
			})
			require.NoError(t, err)
			if tc.dead {
				hs[1].Close()
			}
			err = f.Publish(ctx, 1, pol)
			require.ErrorIs(t, err, fleet.ErrUpdate)
			assert.ErrorContains(t, err, fmt.Sprintf("%s server %s: adapter pol-v00000001", tc.kind, hs[1].URL))
			assert.ErrorContains(t, err, tc.msg)
			assert.NotContains(t, err.Error(), hs[0].URL)
			assert.Equal(t, 1, f.Version(), "the other server took version 1")
			assert.Equal(t, "pol-v00000001", f.Adapter())
			for range 4 {
				got, err := f.Generate(ctx, reqs)
				require.NoError(t, err)
				for i := range got {
					assert.Equal(t, want[i].Tokens, got[i].Tokens)
					assert.Equal(t, "1", got[i].WeightVersion)
				}
			}
		})
	}
}

// adapterWeights is a lm.AdapterSaver whose adapter is one
// adapter_config.json naming it.
type adapterWeights struct {
	weights
	saved *lm.AdapterSaveOptions
}

func (w adapterWeights) SaveAdapter(dir string, opts lm.AdapterSaveOptions) error {
	if w.err != nil {
		return w.err
	}
	if w.saved != nil {
		*w.saved = opts
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, policy.AdapterConfigFileName), []byte(`{"tag":"`+w.tag+`"}`), 0o644)
}

// TestPublishAdapterRequests pins the requests of each server kind
// against the engines' adapter APIs (vLLM's LoadLoRAAdapterRequest and
// UnloadLoRAAdapterRequest, SGLang's LoadLoRAAdapterReqInput and
// UnloadLoRAAdapterReqInput): the first publish loads, the next loads
// the new adapter and unloads the old; no pause, no weight reload; the
// options SaveAdapter gets (BF16 from Config.Save, FoldScale for SGLang).
func TestPublishAdapterRequests(t *testing.T) {
	for _, tc := range []struct {
		kind fleet.Kind
		want func(d3, d4 string) []call
		fold bool
	}{
		{fleet.SGLang, func(d3, d4 string) []call {
			return []call{
				{Path: "/load_lora_adapter", Body: map[string]any{"lora_name": "pol-v00000003", "lora_path": d3, "pinned": false}},
				{Path: "/load_lora_adapter", Body: map[string]any{"lora_name": "pol-v00000004", "lora_path": d4, "pinned": false}},
				{Path: "/unload_lora_adapter", Body: map[string]any{"lora_name": "pol-v00000003"}},
			}
		}, true},
		{fleet.VLLM, func(d3, d4 string) []call {
			return []call{
				{Path: "/v1/load_lora_adapter", Body: map[string]any{"lora_name": "pol-v00000003", "lora_path": d3}},
				{Path: "/v1/load_lora_adapter", Body: map[string]any{"lora_name": "pol-v00000004", "lora_path": d4}},
				{Path: "/v1/unload_lora_adapter", Body: map[string]any{"lora_name": "pol-v00000003"}},
			}
		}, false},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			rec := &recorder{}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			root := t.TempDir()
			f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: srv.URL, Kind: tc.kind}}, Dir: root, Adapter: "pol",
				Save: lm.SaveOptions{DType: "BF16"}})
			require.NoError(t, err)
			var opts lm.AdapterSaveOptions
			require.NoError(t, f.Publish(context.Background(), 3, adapterWeights{weights{tag: "three"}, &opts}))
			assert.Equal(t, lm.AdapterSaveOptions{DType: "BF16", FoldScale: tc.fold}, opts)
			require.NoError(t, f.Publish(context.Background(), 4, adapterWeights{weights: weights{tag: "four"}}))
			assert.Equal(t, tc.want(filepath.Join(root, "v00000003"), filepath.Join(root, "v00000004")), rec.seen())
			b, err := os.ReadFile(filepath.Join(root, "v00000004", policy.AdapterConfigFileName))
			require.NoError(t, err)
			assert.JSONEq(t, `{"tag":"four"}`, string(b))
			assert.Equal(t, 4, f.Version())
		})
	}
}

// TestPublishAdapterFailures: a server that refuses the adapter, dies
// while loading it or hangs makes Publish fail naming it, and the fleet
// moves to the new adapter when another server took it and stays when
// none did; a name already loaded (a version published again) is
// unloaded and loaded again; an old adapter the server no longer has
// counts as unloaded, while an unload that fails otherwise is reported
// with the new version serving.
func TestPublishAdapterFailures(t *testing.T) {
	on := func(path string, answer func(w http.ResponseWriter)) func(http.ResponseWriter, *http.Request, call) bool {
		return func(w http.ResponseWriter, _ *http.Request, c call) bool {
			if c.Path != path {
				return false
			}
			answer(w)
			return true
		}
	}
	status := func(code int, body string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) { w.WriteHeader(code); fmt.Fprint(w, body) }
	}
	die := func(w http.ResponseWriter) {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}
	for _, tc := range []struct {
		name   string
		kind   fleet.Kind
		answer func(http.ResponseWriter, *http.Request, call) bool
		msg    string
	}{
		{"vllm refused", fleet.VLLM, on("/v1/load_lora_adapter", status(404, `{"error":{"message":"Loading lora pol-v00000001 failed: No adapter found for /x","type":"NotFoundError","param":null,"code":404}}`)), "status 404"},
		{"sglang refused", fleet.SGLang, on("/load_lora_adapter", status(400, `{"success":false,"error_message":"bad rank","loaded_adapters":{}}`)), `status 400: not successful: "bad rank"`},
		{"sglang 200 without success", fleet.SGLang, on("/load_lora_adapter", status(200, `{"success":false,"error_message":"quiet"}`)), `not successful: "quiet"`},
		{"sglang not its answer", fleet.SGLang, on("/load_lora_adapter", status(200, `ok`)), "is not SGLang's LoRAUpdateOutput"},
		{"died", fleet.VLLM, on("/v1/load_lora_adapter", die), "EOF"},
		{"hangs", fleet.SGLang, func(_ http.ResponseWriter, r *http.Request, c call) bool {
			if c.Path != "/load_lora_adapter" {
				return false
			}
			<-r.Context().Done()
			return true
		}, "deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, good := &recorder{answer: tc.answer}, &recorder{}
			bs, gs := httptest.NewServer(bad), httptest.NewServer(good)
			defer bs.Close()
			defer gs.Close()
			f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: bs.URL, Kind: tc.kind}, {URL: gs.URL, Kind: tc.kind}},
				Dir: t.TempDir(), Adapter: "pol", Timeout: 300 * time.Millisecond})
			require.NoError(t, err)
			err = f.Publish(context.Background(), 1, adapterWeights{weights: weights{tag: "1"}})
			require.ErrorIs(t, err, fleet.ErrUpdate)
			assert.ErrorContains(t, err, fmt.Sprintf("%s server %s: adapter pol-v00000001", tc.kind, bs.URL))
			assert.ErrorContains(t, err, tc.msg)
			assert.NotContains(t, err.Error(), gs.URL)
			assert.Equal(t, 1, f.Version())
			assert.Equal(t, "pol-v00000001", f.Adapter())

			alone, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: bs.URL, Kind: tc.kind}}, Dir: t.TempDir(), Adapter: "pol",
				Timeout: 300 * time.Millisecond})
			require.NoError(t, err)
			require.ErrorIs(t, alone.Publish(context.Background(), 1, adapterWeights{}), fleet.ErrUpdate)
			assert.Equal(t, 0, alone.Version(), "no server took version 1")
			assert.Empty(t, alone.Adapter(), "still the base model")
		})
	}

	t.Run("already loaded", func(t *testing.T) {
		for _, tc := range []struct {
			kind         fleet.Kind
			load, unload string
			refusal      func(w http.ResponseWriter)
		}{
			{fleet.VLLM, "/v1/load_lora_adapter", "/v1/unload_lora_adapter", status(400, `{"error":{"message":"The lora adapter 'pol-v00000001' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.","type":"InvalidUserInput","param":null,"code":400}}`)},
			{fleet.SGLang, "/load_lora_adapter", "/unload_lora_adapter", status(400, `{"success":false,"error_message":"Failed to load LoRA adapter pol-v00000001 because it is already loaded","loaded_adapters":{}}`)},
		} {
			first := true
			rec := &recorder{answer: func(w http.ResponseWriter, _ *http.Request, c call) bool {
				if c.Path == tc.load && first {
					first = false
					tc.refusal(w)
					return true
				}
				return false
			}}
			srv := httptest.NewServer(rec)
			f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: srv.URL, Kind: tc.kind}}, Dir: t.TempDir(), Adapter: "pol"})
			require.NoError(t, err)
			require.NoError(t, f.Publish(context.Background(), 1, adapterWeights{}), tc.kind)
			var paths []string
			for _, c := range rec.seen() {
				paths = append(paths, c.Path)
			}
			assert.Equal(t, []string{tc.load, tc.unload, tc.load}, paths, tc.kind)
			srv.Close()
		}
	})

	t.Run("old adapter gone or not unloaded", func(t *testing.T) {
		for _, tc := range []struct {
			kind       fleet.Kind
			unload     string
			gone, fail func(w http.ResponseWriter)
		}{
			{fleet.VLLM, "/v1/unload_lora_adapter",
				status(404, `{"error":{"message":"The lora adapter 'pol-v00000001' cannot be found.","type":"NotFoundError","param":null,"code":404}}`),
				status(500, `{"error":{"message":"Failed to remove lora adapter","type":"InternalServerError","param":null,"code":500}}`)},
			{fleet.SGLang, "/unload_lora_adapter",
				status(400, `{"success":false,"error_message":"LoRA with name pol-v00000001 does not exist. Loaded LoRAs: odict_keys([])","loaded_adapters":null}`),
				status(400, `{"success":false,"error_message":"unload failed","loaded_adapters":{}}`)},
		} {
			var answer func(w http.ResponseWriter)
			rec := &recorder{answer: func(w http.ResponseWriter, _ *http.Request, c call) bool {
				if c.Path == tc.unload {
					answer(w)
					return true
				}
				return false
			}}
			srv := httptest.NewServer(rec)
			f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: srv.URL, Kind: tc.kind}}, Dir: t.TempDir(), Adapter: "pol"})
			require.NoError(t, err)
			require.NoError(t, f.Publish(context.Background(), 1, adapterWeights{}))
			answer = tc.gone
			require.NoError(t, f.Publish(context.Background(), 2, adapterWeights{}), "%s: a restarted server no longer holds version 1", tc.kind)
			answer = tc.fail
			err = f.Publish(context.Background(), 3, adapterWeights{})
			require.ErrorIs(t, err, fleet.ErrUpdate, tc.kind)
			assert.ErrorContains(t, err, "unloading the previous adapter pol-v00000002 (it serves pol-v00000003)")
			assert.Equal(t, 3, f.Version())
			srv.Close()
		}
	})
}

// TestPublishAdapterWithoutAdapter: with Config.Adapter set, a policy
// that cannot save an adapter, or a model without one, is refused before
// anything is written or sent.
func TestPublishAdapterWithoutAdapter(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	root := t.TempDir()
	f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: srv.URL}}, Dir: root, Adapter: "pol"})
	require.NoError(t, err)
	for _, tc := range []struct {
		w   lm.Saver
		msg string
	}{
		{weights{tag: "full"}, "fleet_test.weights cannot save an adapter (it is not a lm.AdapterSaver)"},
		{tinyModel(t, 1), "the *policy.Model has no adapter (add one with AddLoRA or LoadAdapter)"},
	} {
		err := f.Publish(context.Background(), 1, tc.w)
		require.ErrorIs(t, err, fleet.ErrNoAdapter)
		assert.ErrorContains(t, err, `Config.Adapter is "pol"`)
		assert.ErrorContains(t, err, tc.msg)
	}
	boom := errors.New("disk full")
	require.ErrorIs(t, f.Publish(context.Background(), 1, adapterWeights{weights: weights{err: boom}}), boom)
	assert.Empty(t, rec.seen())
	assert.Empty(t, folders(t, root))
	assert.Equal(t, 0, f.Version())
}
