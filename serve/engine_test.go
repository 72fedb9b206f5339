package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEngineMaxTokens: a completion's token bound. The test model has no
// end-of-sequence token, so greedy generation runs to the bound: 16 for
// an absent and an explicit null max_tokens alike on every engine, as
// OpenAI's API, vLLM (CompletionRequest.max_tokens = 16,
// normalize_null_max_tokens) and SGLang (CompletionRequest.max_tokens =
// 16) default; an explicit number is that number, up to the context
// (testPrompt's 3 tokens leave 96 − 3 = 93).
func TestEngineMaxTokens(t *testing.T) {
	a := writeCheckpoint(t, 1, 16)
	const room = testMaxLen - 3
	for _, c := range []struct {
		engine Engine
		field  string // the max_tokens member of the body, "" for none
		want   int
	}{
		{"", ``, 16},
		{"", `"max_tokens": null,`, 16},
		{"", `"max_tokens": 5,`, 5},
		{"", `"max_tokens": 93,`, room},
		{EngineVLLM, ``, 16},
		{EngineVLLM, `"max_tokens": null,`, 16},
		{EngineVLLM, `"max_tokens": 5,`, 5},
		{EngineVLLM, `"max_tokens": 40,`, 40},
		{EngineSGLang, ``, 16},
		{EngineSGLang, `"max_tokens": null,`, 16},
	} {
		t.Run(fmt.Sprintf("%s/%s", c.engine, c.field), func(t *testing.T) {
			_, ts := startServer(t, a, Config{Engine: c.engine})
			status, body := post(t, ts.URL+"/v1/completions",
				`{"prompt": [10, 20, 30], `+c.field+` "temperature": 0, "return_token_ids": true}`)
			require.Equal(t, http.StatusOK, status, "%s", body)
			var r response
			require.NoError(t, json.Unmarshal(body, &r))
			assert.Len(t, r.Choices[0].TokenIDs, c.want)
			assert.Equal(t, "length", r.Choices[0].FinishReason)
		})
	}
}

// TestEngineWeightVersion: what each engine reports of its weights.
// vLLM reports none — its completions carry no metadata at all, and the
// SGLang routes it lacks name none — though the server counts reloads
// as its own default does; SGLang starts at "default" and keeps its
// version through a reload that names none; this server's own default
// starts at "0" and counts reloads.
func TestEngineWeightVersion(t *testing.T) {
	a, b, _, _ := twoCheckpoints(t, testPrompt)
	for _, c := range []struct {
		engine Engine
		// start is the initial version; after the reloads without a
		// version, with "7", and without one again.
		start, unnamed, named, after string
	}{
		{"", "0", "1", "7", "8"},
		{EngineSGLang, "default", "default", "7", "7"},
		{EngineVLLM, "0", "1", "7", "8"},
	} {
		t.Run(string(c.engine), func(t *testing.T) {
			s, ts := startServer(t, a, Config{Engine: c.engine})
			status, body := post(t, ts.URL+"/v1/completions", `{"prompt": [10, 20, 30], "max_tokens": 2}`)
			require.Equal(t, http.StatusOK, status, "%s", body)
			var raw map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(body, &raw))
			if c.engine == EngineVLLM {
				assert.NotContains(t, raw, "metadata", "vLLM's CompletionResponse has no metadata")
			} else {
				assert.JSONEq(t, fmt.Sprintf(`{"weight_version": %q}`, c.start), string(raw["metadata"]))
			}
			// reported is what a client reads for version v.
			reported := func(v string) string {
				if c.engine == EngineVLLM {
					return "null"
				}
				return fmt.Sprintf("%q", v)
			}
			_, info := get(t, ts.URL+"/get_weight_version")
			assert.JSONEq(t, `{"weight_version": `+reported(c.start)+`}`, string(info))
			var mi map[string]json.RawMessage
			_, info = get(t, ts.URL+"/model_info")
			require.NoError(t, json.Unmarshal(info, &mi))
			assert.JSONEq(t, reported(c.start), string(mi["weight_version"]))

			for _, step := range []struct{ body, want string }{
				{fmt.Sprintf(`{"model_path": %q}`, b), c.unnamed},
				{fmt.Sprintf(`{"model_path": %q, "weight_version": "7"}`, a), c.named},
				{fmt.Sprintf(`{"model_path": %q}`, b), c.after},
			} {
				status, body := post(t, ts.URL+"/update_weights_from_disk", step.body)
				require.Equal(t, http.StatusOK, status, "%s", body)
				assert.Equal(t, step.want, s.WeightVersion())
			}
			status, body = post(t, ts.URL+"/generate", `{"input_ids": [10, 20, 30], "sampling_params": {"max_new_tokens": 2}}`)
			require.Equal(t, http.StatusOK, status, "%s", body)
			var g struct {
				MetaInfo struct {
					WeightVersion json.RawMessage `json:"weight_version"`
				} `json:"meta_info"`
			}
			require.NoError(t, json.Unmarshal(body, &g))
			assert.JSONEq(t, reported(c.after), string(g.MetaInfo.WeightVersion))
		})
	}
}

// TestEngineSGLangContext: SGLang refuses an explicit max_new_tokens
// that with the prompt reaches the context (prompt + max_new_tokens ≥
// context_len), and caps an absent one; this server's own default caps
// both. A 90-token prompt in the 96-token context leaves room for 6: 5
// passes SGLang (95 < 96), 6 does not (96 ≥ 96).
func TestEngineSGLangContext(t *testing.T) {
	a := writeCheckpoint(t, 1, 16)
	prompt := make([]int, 90)
	for i := range prompt {
		prompt[i] = 1 + i%200
	}
	ids, err := json.Marshal(prompt)
	require.NoError(t, err)
	for _, c := range []struct {
		engine   Engine
		sampling string
		status   int
		tokens   int
	}{
		{EngineSGLang, `{"max_new_tokens": 5}`, http.StatusOK, 5},
		{EngineSGLang, `{"max_new_tokens": 6}`, http.StatusBadRequest, 0},
		{EngineSGLang, `{"max_new_tokens": 50}`, http.StatusBadRequest, 0},
		{EngineSGLang, `{}`, http.StatusOK, 6},
		{EngineSGLang, `{"max_new_tokens": null}`, http.StatusOK, 6},
		{"", `{"max_new_tokens": 6}`, http.StatusOK, 6},
		{"", `{"max_new_tokens": 50}`, http.StatusOK, 6},
	} {
		t.Run(fmt.Sprintf("%s/%s", c.engine, c.sampling), func(t *testing.T) {
			_, ts := startServer(t, a, Config{Engine: c.engine})
			status, body := post(t, ts.URL+"/generate", fmt.Sprintf(`{"input_ids": %s, "sampling_params": %s}`, ids, c.sampling))
			require.Equal(t, c.status, status, "%s", body)
			if c.status != http.StatusOK {
				assert.Contains(t, string(body), "Requested token count exceeds the model's maximum context length of 96 tokens")
				return
			}
			var g struct {
				OutputIDs []int `json:"output_ids"`
			}
			require.NoError(t, json.Unmarshal(body, &g))
			assert.Len(t, g.OutputIDs, c.tokens)
		})
	}
}

// TestUnknownFields: fields the engines ignore are ignored — vLLM's
// OpenAIBaseModel allows extra members of a completion request (with a
// warning), SGLang's request dataclasses ignore unknown members — and
// SGLang's sampling_params, which become SamplingParams(**params), refuse
// an unknown key.
func TestUnknownFields(t *testing.T) {
	a := writeCheckpoint(t, 1, 16)
	for _, engine := range []Engine{"", EngineVLLM, EngineSGLang} {
		t.Run(string(engine), func(t *testing.T) {
			_, ts := startServer(t, a, Config{Engine: engine})
			for _, c := range []struct {
				path, body string
				status     int
			}{
				{"/v1/completions", `{"prompt": [1, 2], "max_tokens": 2, "priority": 0, "request_id": "r1", "vllm_xargs": {"a": 1}, "no_such_field": true}`, http.StatusOK},
				{"/generate", `{"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 2}, "routed_dp_rank": null, "no_such_field": 1}`, http.StatusOK},
				{"/generate", `{"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 2, "no_such_param": 1}}`, http.StatusBadRequest},
				{"/pause_generation", `{"mode": "abort", "no_such_field": 1}`, http.StatusOK},
				{"/continue_generation", `{"torch_empty_cache": true}`, http.StatusOK},
			} {
				status, body := post(t, ts.URL+c.path, c.body)
				assert.Equal(t, c.status, status, "%s %s: %s", c.path, c.body, body)
			}
		})
	}
}

// TestPauseWaitForInflight: wait_for_inflight_requests=true makes a
// pause wait for the request in flight whatever mode says, as current
// vLLM turns it into mode "wait" and older releases read nothing else.
func TestPauseWaitForInflight(t *testing.T) {
	a := writeCheckpoint(t, 1, 16)
	g := greedy(t, a, testPrompt, 6)
	for _, query := range []string{"wait_for_inflight_requests=true", "mode=abort&wait_for_inflight_requests=true", "mode=wait&wait_for_inflight_requests=true"} {
		t.Run(query, func(t *testing.T) {
			s, ts := startServer(t, a, Config{})
			bg := newBlockingGen(s, 1)
			inflight := async(t, ts.URL, greedyBody(testPrompt, 6))
			<-bg.started
			paused := make(chan int, 1)
			go func() {
				status, _ := post(t, ts.URL+"/pause?"+query, "")
				paused <- status
			}()
			waitFor(t, "the pause to take hold", s.isPaused)
			select {
			case <-paused:
				t.Fatal("the pause answered with a request in flight")
			default:
			}
			close(bg.release)
			r := <-inflight
			assert.Equal(t, "length", r.Choices[0].FinishReason, "finished, not aborted")
			assert.Equal(t, g, r.Choices[0].TokenIDs)
			assert.Equal(t, http.StatusOK, <-paused)
		})
	}
}
