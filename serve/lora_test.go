package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
)

// writeAdapter attaches an adapter of cfg to the checkpoint in base, A
// drawn from seed and B drawn too (so that, unlike a fresh adapter, it
// changes what the model computes), saves it as a PEFT folder and returns
// the folder.
func writeAdapter(t *testing.T, base string, cfg policy.LoRAConfig, seed uint64) string {
	t.Helper()
	m := loadModel(t, base)
	require.NoError(t, m.AddLoRA(cfg, seed))
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, p := range m.Params() {
		if strings.Contains(p.Name, "lora_B") {
			for i := range p.Data {
				p.Data[i] = float32(rng.NormFloat64() * 0.5)
			}
		}
	}
	dir := t.TempDir()
	require.NoError(t, m.SaveAdapter(dir, lm.AdapterSaveOptions{}))
	return dir
}

// adapterReference generates reqs on a fresh copy of the checkpoint in
// base with the adapter in dir attached: what the server's answers for
// the adapter must decode to.
func adapterReference(t *testing.T, base, dir string, reqs ...lm.GenerateRequest) []lm.Generation {
	t.Helper()
	m := loadModel(t, base)
	require.NoError(t, m.LoadAdapter(dir))
	gens, err := m.Generate(context.Background(), reqs)
	require.NoError(t, err)
	return gens
}

var (
	allLinear = policy.LoRAConfig{Rank: 4, Alpha: 8, TargetModules: []string{policy.LoRAAllLinear}}
	rsLoRA    = policy.LoRAConfig{Rank: 3, Alpha: 5, UseRSLoRA: true, TargetModules: []string{"q_proj", "v_proj", "down_proj"}}
	greedyReq = lm.GenerateRequest{Prompt: testPrompt, Params: lm.SampleParams{MaxNewTokens: 6, Logprobs: true}}
)

// modelList is GET /v1/models as a client reads it.
type modelList struct {
	Data []struct {
		ID          string  `json:"id"`
		Root        *string `json:"root"`
		Parent      *string `json:"parent"`
		MaxModelLen *int    `json:"max_model_len"`
	} `json:"data"`
}

func listModels(t *testing.T, base string) modelList {
	t.Helper()
	status, body := get(t, base+"/v1/models")
	require.Equal(t, http.StatusOK, status)
	var l modelList
	require.NoError(t, json.Unmarshal(body, &l))
	return l
}

func modelIDs(l modelList) []string {
	var ids []string
	for _, c := range l.Data {
		ids = append(ids, c.ID)
	}
	return ids
}

// TestAdapterServes loads one adapter through vLLM's endpoint and an
// rsLoRA one through SGLang's, and samples through policy/openai over
// both APIs: a request naming an adapter generates what the checkpoint
// with that adapter attached generates (tokens and log-probabilities),
// one naming none the base model's; /v1/models lists the adapters under
// the served model; once unloaded, an adapter is refused in each API's
// way and no longer listed.
func TestAdapterServes(t *testing.T) {
	base := writeCheckpoint(t, 1, 16)
	a := writeAdapter(t, base, allLinear, 7)
	r := writeAdapter(t, base, rsLoRA, 8)
	want := map[string]lm.Generation{
		"":  reference(t, base, greedyReq)[0],
		"a": adapterReference(t, base, a, greedyReq)[0],
		"r": adapterReference(t, base, r, greedyReq)[0],
	}
	require.NotEqual(t, want[""].Tokens, want["a"].Tokens, "the adapter must change the greedy continuation")
	require.NotEqual(t, want[""].Tokens, want["r"].Tokens, "the adapter must change the greedy continuation")

	_, ts := startServer(t, base, Config{LogprobsMode: openai.ProcessedLogprobs, Name: "tiny", WeightVersion: "3"})
	status, body := post(t, ts.URL+"/v1/load_lora_adapter", fmt.Sprintf(`{"lora_name": "a", "lora_path": %q}`, a))
	require.Equal(t, http.StatusOK, status, "%s", body)
	assert.Equal(t, "Success: LoRA adapter 'a' added successfully.", string(body))
	status, body = post(t, ts.URL+"/load_lora_adapter", fmt.Sprintf(`{"lora_name": "r", "lora_path": %q, "pinned": true}`, r))
	require.Equal(t, http.StatusOK, status, "%s", body)
	assert.JSONEq(t, fmt.Sprintf(`{"success": true, "error_message": "", "loaded_adapters": {"a": %q, "r": %q}}`, a, r), string(body))

	for _, api := range []openai.API{openai.APICompletions, openai.APISGLangGenerate} {
		for _, name := range []string{"a", "", "r"} {
			t.Run(string(api)+"/"+name, func(t *testing.T) {
				s, err := openai.New(openai.Config{BaseURLs: []string{ts.URL}, API: api, LogprobsMode: openai.ProcessedLogprobs,
					Adapter: func() string { return name }})
				require.NoError(t, err)
				got, err := s.Generate(context.Background(), []lm.GenerateRequest{greedyReq})
				require.NoError(t, err)
				assert.Equal(t, want[name].Tokens, got[0].Tokens)
				assert.InDeltaSlice(t, want[name].LogProbs, got[0].LogProbs, 1e-6)
				assert.Equal(t, want[name].FinishReason, got[0].FinishReason)
				assert.Equal(t, "3", got[0].WeightVersion, "an adapter runs on the base weights' version")
			})
		}
	}
	// vLLM names the adapter that answered; the served name is the base.
	assert.Equal(t, "a", complete(t, ts.URL, map[string]any{"prompt": testPrompt, "model": "a", "max_tokens": 1}).Model)
	assert.Equal(t, "tiny", complete(t, ts.URL, map[string]any{"prompt": testPrompt, "model": "tiny", "max_tokens": 1}).Model)

	l := listModels(t, ts.URL)
	require.Equal(t, []string{"tiny", "a", "r"}, modelIDs(l))
	assert.Nil(t, l.Data[0].Parent)
	assert.Equal(t, testMaxLen, *l.Data[0].MaxModelLen)
	for i, dir := range []string{a, r} {
		c := l.Data[i+1]
		assert.Equal(t, "tiny", *c.Parent)
		assert.Equal(t, dir, *c.Root)
		assert.Nil(t, c.MaxModelLen)
	}

	status, body = post(t, ts.URL+"/v1/unload_lora_adapter", `{"lora_name": "a"}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	assert.Equal(t, "Success: LoRA adapter 'a' removed successfully.", string(body))
	assert.Equal(t, []string{"tiny", "r"}, modelIDs(listModels(t, ts.URL)))
	status, body = post(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"prompt": %s, "model": "a"}`, ints(testPrompt)))
	assert.Equal(t, http.StatusNotFound, status)
	assert.JSONEq(t, `{"error": {"message": "The model `+"`a`"+` does not exist.", "type": "NotFoundError", "param": "model", "code": 404}}`, string(body))
	status, body = post(t, ts.URL+"/generate", fmt.Sprintf(`{"input_ids": %s, "lora_path": "a"}`, ints(testPrompt)))
	assert.Equal(t, http.StatusBadRequest, status)
	assert.JSONEq(t, `{"error": {"message": "The following requested LoRA adapters are not loaded: a\nLoaded adapters: odict_keys(['r'])."}}`, string(body))

	status, body = post(t, ts.URL+"/unload_lora_adapter", `{"lora_name": "r"}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	assert.JSONEq(t, `{"success": true, "error_message": "", "loaded_adapters": {}}`, string(body))
	assert.Equal(t, []string{"tiny"}, modelIDs(listModels(t, ts.URL)))
}

func ints(ids []int) string {
	b, _ := json.Marshal(ids)
	return string(b)
}

// TestAdapterEndpointErrors sends good and bad requests to the four
// adapter endpoints; each refusal comes in its engine's shape — vLLM's
// ErrorResponse with the status as code, SGLang's LoRAUpdateOutput with
// success false, or SGLang's validation error — and the server keeps
// serving what it served.
func TestAdapterEndpointErrors(t *testing.T) {
	base := writeCheckpoint(t, 1, 16)
	a := writeAdapter(t, base, allLinear, 7)
	wide := writeAdapter(t, writeCheckpoint(t, 2, 32), allLinear, 7) // another architecture
	missing := t.TempDir()                                           // no adapter in it
	_, ts := startServer(t, base, Config{})
	status, body := post(t, ts.URL+"/v1/load_lora_adapter", fmt.Sprintf(`{"lora_name": "a", "lora_path": %q}`, a))
	require.Equal(t, http.StatusOK, status, "%s", body)

	type vllmError struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    int     `json:"code"`
		} `json:"error"`
	}
	vllm := []struct {
		name, path, body string
		status           int
		typ, msg         string
	}{
		{"not JSON", "/v1/load_lora_adapter", `{`, 400, "BadRequestError", "JSON decode error"},
		{"not an object", "/v1/load_lora_adapter", `[]`, 400, "BadRequestError", "must be a JSON object"},
		{"no lora_name", "/v1/load_lora_adapter", `{"lora_path": "x"}`, 400, "BadRequestError", "lora_name: Field required"},
		{"null lora_path", "/v1/load_lora_adapter", `{"lora_name": "b", "lora_path": null}`, 400, "BadRequestError", "lora_path: Field required"},
		{"lora_name a number", "/v1/load_lora_adapter", `{"lora_name": 5, "lora_path": "x"}`, 400, "BadRequestError", "lora_name: want a string"},
		{"empty lora_name", "/v1/load_lora_adapter", `{"lora_name": "", "lora_path": "x"}`, 400, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided."},
		{"duplicate", "/v1/load_lora_adapter", fmt.Sprintf(`{"lora_name": "a", "lora_path": %q}`, a), 400, "InvalidUserInput",
			"The lora adapter 'a' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True."},
		{"no adapter there", "/v1/load_lora_adapter", fmt.Sprintf(`{"lora_name": "b", "lora_path": %q}`, missing), 404, "NotFoundError",
			"Loading lora b failed: No adapter found for " + missing},
		{"no such folder", "/v1/load_lora_adapter", `{"lora_name": "b", "lora_path": "/nonexistent/adapter"}`, 404, "NotFoundError",
			"Loading lora b failed: No adapter found for /nonexistent/adapter"},
		{"another architecture", "/v1/load_lora_adapter", fmt.Sprintf(`{"lora_name": "b", "lora_path": %q}`, wide), 400, "BadRequestError", "shape"},
		{"the served name", "/v1/load_lora_adapter", fmt.Sprintf(`{"lora_name": %q, "lora_path": %q}`, DefaultName, a), 400, "InvalidUserInput", "is the served model's name"},
		{"unload not JSON", "/v1/unload_lora_adapter", `{"lora_name"`, 400, "BadRequestError", "JSON decode error"},
		{"unload no name", "/v1/unload_lora_adapter", `{}`, 400, "BadRequestError", "lora_name: Field required"},
		{"unload empty name", "/v1/unload_lora_adapter", `{"lora_name": ""}`, 400, "InvalidUserInput", "'lora_name' needs to be provided to unload a LoRA adapter."},
		{"unload unknown", "/v1/unload_lora_adapter", `{"lora_name": "zz", "lora_int_id": 3}`, 404, "NotFoundError", "The lora adapter 'zz' cannot be found."},
	}
	for _, c := range vllm {
		t.Run("vllm/"+c.name, func(t *testing.T) {
			status, body := post(t, ts.URL+c.path, c.body)
			assert.Equal(t, c.status, status, "%s", body)
			var e vllmError
			require.NoError(t, json.Unmarshal(body, &e), "%s", body)
			assert.Equal(t, c.typ, e.Error.Type)
			assert.Equal(t, c.status, e.Error.Code)
			assert.Contains(t, e.Error.Message, c.msg)
		})
	}

	sglang := []struct {
		name, path, body string
		result           string // the LoRAUpdateOutput, or "" for a validation error
		msg              string
	}{
		{"not JSON", "/load_lora_adapter", `{`, "", "JSON decode error"},
		{"no lora_path", "/load_lora_adapter", `{"lora_name": "b"}`, "", "lora_path: Field required"},
		{"pinned a string", "/load_lora_adapter", `{"lora_name": "b", "lora_path": "x", "pinned": "yes"}`, "", "pinned: want a boolean"},
		{"duplicate", "/load_lora_adapter", fmt.Sprintf(`{"lora_name": "a", "lora_path": %q}`, a),
			fmt.Sprintf(`{"success": false, "error_message": "Failed to load LoRA adapter a because it is already loaded", "loaded_adapters": {"a": %q}}`, a), ""},
		{"no adapter there", "/load_lora_adapter", fmt.Sprintf(`{"lora_name": "b", "lora_path": %q}`, missing), "-", "no such file or directory"},
		{"another architecture", "/load_lora_adapter", fmt.Sprintf(`{"lora_name": "b", "lora_path": %q}`, wide), "-", "shape"},
		{"empty name", "/load_lora_adapter", fmt.Sprintf(`{"lora_name": "", "lora_path": %q}`, a), "-", "name and its folder are required"},
		{"unload no name", "/unload_lora_adapter", `{"lora_id": "x"}`, "", "lora_name: Field required"},
		{"unload unknown", "/unload_lora_adapter", `{"lora_name": "zz"}`,
			`{"success": false, "error_message": "LoRA with name zz does not exist. Loaded LoRAs: odict_keys(['a'])", "loaded_adapters": null}`, ""},
	}
	for _, c := range sglang {
		t.Run("sglang/"+c.name, func(t *testing.T) {
			status, body := post(t, ts.URL+c.path, c.body)
			assert.Equal(t, http.StatusBadRequest, status, "%s", body)
			switch c.result {
			case "":
				var e struct {
					Object  string `json:"object"`
					Message string `json:"message"`
					Code    int    `json:"code"`
				}
				require.NoError(t, json.Unmarshal(body, &e), "%s", body)
				assert.Equal(t, "error", e.Object)
				assert.Equal(t, 400, e.Code)
				assert.Contains(t, e.Message, c.msg)
			case "-":
				var res loraUpdateResult
				require.NoError(t, json.Unmarshal(body, &res), "%s", body)
				assert.False(t, res.Success)
				assert.Contains(t, res.ErrorMessage, c.msg)
				assert.Equal(t, map[string]string{"a": a}, res.LoadedAdapters)
			default:
				assert.JSONEq(t, c.result, string(body))
			}
		})
	}

	for _, p := range []string{"/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/load_lora_adapter", "/unload_lora_adapter"} {
		status, _ := get(t, ts.URL+p)
		assert.Equal(t, http.StatusMethodNotAllowed, status, p)
	}
	// /generate's lora_path.
	for _, c := range []struct{ body, msg string }{
		{`{"input_ids": [1], "lora_path": 5}`, "lora_path must be a string, null or a list of them"},
		{`{"input_ids": [[1], [2]], "lora_path": ["a"]}`, "lora_path has 1 entries for 2 prompts"},
		{`{"input_ids": [[1], [2]], "lora_path": ["a", null]}`, "different adapters within one request are not supported"},
		{`{"input_ids": [1], "lora_path": "b"}`, "The following requested LoRA adapters are not loaded: b\nLoaded adapters: odict_keys(['a'])."},
	} {
		status, body := post(t, ts.URL+"/generate", c.body)
		assert.Equal(t, http.StatusBadRequest, status, "%s", body)
		assert.Contains(t, string(body), strings.ReplaceAll(c.msg, "\n", `\n`))
	}
	// Still serving the adapter and only it.
	assert.Equal(t, []string{DefaultName, "a"}, modelIDs(listModels(t, ts.URL)))
	got := adapterReference(t, base, a, greedyReq)[0].Tokens
	assert.Equal(t, got, complete(t, ts.URL, map[string]any{"prompt": testPrompt, "model": "a", "max_tokens": 6, "temperature": 0, "return_token_ids": true}).Choices[0].TokenIDs)
	var batch []sglangAnswer
	generate(t, ts.URL, map[string]any{"input_ids": [][]int{testPrompt, testPrompt}, "lora_path": []string{"a", "a"}, "sampling_params": map[string]any{"temperature": 0, "max_new_tokens": 6}}, &batch)
	require.Len(t, batch, 2)
	assert.Equal(t, got, batch[1].OutputIDs)
}

// TestAdapterInPlace: vLLM's load_inplace replaces the adapter loaded
// under the name; later requests sample from the new one.
func TestAdapterInPlace(t *testing.T) {
	base := writeCheckpoint(t, 1, 16)
	a1, a2 := writeAdapter(t, base, allLinear, 7), writeAdapter(t, base, allLinear, 9)
	g1, g2 := adapterReference(t, base, a1, greedyReq)[0].Tokens, adapterReference(t, base, a2, greedyReq)[0].Tokens
	require.NotEqual(t, g1, g2)
	_, ts := startServer(t, base, Config{})
	body := func(dir string, inplace bool) string {
		return fmt.Sprintf(`{"lora_name": "a", "lora_path": %q, "load_inplace": %t}`, dir, inplace)
	}
	status, out := post(t, ts.URL+"/v1/load_lora_adapter", body(a1, false))
	require.Equal(t, http.StatusOK, status, "%s", out)
	sample := map[string]any{"prompt": testPrompt, "model": "a", "max_tokens": 6, "temperature": 0, "return_token_ids": true}
	assert.Equal(t, g1, complete(t, ts.URL, sample).Choices[0].TokenIDs)
	status, out = post(t, ts.URL+"/v1/load_lora_adapter", body(a2, true))
	require.Equal(t, http.StatusOK, status, "%s", out)
	assert.Equal(t, g2, complete(t, ts.URL, sample).Choices[0].TokenIDs)
	l := listModels(t, ts.URL)
	assert.Equal(t, []string{DefaultName, "a"}, modelIDs(l))
	assert.Equal(t, a2, *l.Data[1].Root)
}

// TestAdapterUnloadWaitsForRequests: an unload refuses new requests for
// the adapter at once but returns only once the one in flight on it has
// finished, which it does on the adapter, as SGLang's unload waits.
func TestAdapterUnloadWaitsForRequests(t *testing.T) {
	for _, path := range []string{"/v1/unload_lora_adapter", "/unload_lora_adapter"} {
		t.Run(path, func(t *testing.T) {
			base := writeCheckpoint(t, 1, 16)
			a := writeAdapter(t, base, allLinear, 7)
			want := adapterReference(t, base, a, greedyReq)[0].Tokens
			s, ts := startServer(t, base, Config{})
			require.NoError(t, s.LoadAdapter(context.Background(), "a", a))
			bg := newBlockingGen(s, 1)
			sample := map[string]any{"prompt": testPrompt, "model": "a", "max_tokens": 6, "temperature": 0, "return_token_ids": true}
			first := async(t, ts.URL, sample)
			<-bg.started
			unloaded := make(chan int, 1)
			go func() {
				status, _ := post(t, ts.URL+path, `{"lora_name": "a"}`)
				unloaded <- status
			}()
			waitFor(t, "the adapter to be taken off the list", func() bool { return len(s.Adapters()) == 0 })
			status, _ := post(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"prompt": %s, "model": "a"}`, ints(testPrompt)))
			assert.Equal(t, http.StatusNotFound, status, "new requests are refused at once")
			select {
			case <-unloaded:
				t.Fatal("the unload returned while a request ran on the adapter")
			default:
			}
			close(bg.release)
			assert.Equal(t, want, (<-first).Choices[0].TokenIDs)
			assert.Equal(t, http.StatusOK, <-unloaded)
		})
	}
}

// TestAdapterFollowsReload: an adapter loaded before a reload of the base
// weights runs on the new weights afterwards, with their version, as in
// vLLM and SGLang, where adapters apply to whatever base is loaded.
func TestAdapterFollowsReload(t *testing.T) {
	a, b, _, _ := twoCheckpoints(t, testPrompt)
	ad := writeAdapter(t, a, rsLoRA, 7)
	onA, onB := adapterReference(t, a, ad, greedyReq)[0], adapterReference(t, b, ad, greedyReq)[0]
	require.NotEqual(t, onA.Tokens, onB.Tokens)
	s, ts := startServer(t, a, Config{LogprobsMode: openai.ProcessedLogprobs})
	require.NoError(t, s.LoadAdapter(context.Background(), "ad", ad))
	sampler, err := openai.New(openai.Config{BaseURLs: []string{ts.URL}, LogprobsMode: openai.ProcessedLogprobs, Adapter: func() string { return "ad" }})
	require.NoError(t, err)
	got, err := sampler.Generate(context.Background(), []lm.GenerateRequest{greedyReq})
	require.NoError(t, err)
	assert.Equal(t, onA.Tokens, got[0].Tokens)
	assert.Equal(t, "0", got[0].WeightVersion)

	status, body := post(t, ts.URL+"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q, "weight_version": "7"}`, b))
	require.Equal(t, http.StatusOK, status, "%s", body)
	got, err = sampler.Generate(context.Background(), []lm.GenerateRequest{greedyReq})
	require.NoError(t, err)
	assert.Equal(t, onB.Tokens, got[0].Tokens)
	assert.InDeltaSlice(t, onB.LogProbs, got[0].LogProbs, 1e-6)
	assert.Equal(t, "7", got[0].WeightVersion)
	assert.Equal(t, map[string]string{"ad": ad}, s.Adapters())
}

// TestAdapterConcurrent loads and unloads adapters while requests run on
// the base model and on another adapter: every answer is the one its
// model gives, and nothing races (run with -race).
func TestAdapterConcurrent(t *testing.T) {
	base := writeCheckpoint(t, 1, 16)
	a, b := writeAdapter(t, base, allLinear, 7), writeAdapter(t, base, rsLoRA, 8)
	want := map[string][]int{
		DefaultName: reference(t, base, greedyReq)[0].Tokens,
		"a":         adapterReference(t, base, a, greedyReq)[0].Tokens,
	}
	s, ts := startServer(t, base, Config{MaxSessions: 4})
	require.NoError(t, s.LoadAdapter(context.Background(), "a", a))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, name := range []string{DefaultName, "a", DefaultName, "a"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := complete(t, ts.URL, map[string]any{"prompt": testPrompt, "model": name, "max_tokens": 6, "temperature": 0, "return_token_ids": true})
				assert.Equal(t, want[name], r.Choices[0].TokenIDs, name)
			}
		}()
	}
	for range 3 {
		require.NoError(t, s.LoadAdapter(context.Background(), "b", b))
		require.NoError(t, s.UnloadAdapter(context.Background(), "b"))
	}
	close(stop)
	wg.Wait()
	assert.Equal(t, map[string]string{"a": a}, s.Adapters())
}
