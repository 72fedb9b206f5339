package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/openai"
)

func u64(v uint64) *uint64 { return &v }

// conformanceCases are requests whose answers the policy/openai Sampler
// must decode into exactly what Model.Generate returns for them, covering
// every way a generation ends. prompt is the common prompt; eos the
// checkpoint's end-of-sequence token, g its greedy continuation.
func conformanceCases(prompt []int, g []int) []struct {
	name   string
	req    lm.GenerateRequest
	finish lm.FinishReason
} {
	long := make([]int, testMaxLen-3)
	for i := range long {
		long[i] = (7 * i) % 256
	}
	return []struct {
		name   string
		req    lm.GenerateRequest
		finish lm.FinishReason
	}{
		// Greedy decoding reaches the checkpoint's EOS (g ends with it).
		{"greedy until end of sequence", lm.GenerateRequest{Prompt: prompt, Params: lm.SampleParams{Logprobs: true}}, lm.FinishStopToken},
		// g[1] is not EOS, so stop_reason is the id.
		{"greedy until a stop token", lm.GenerateRequest{Prompt: prompt, Params: lm.SampleParams{StopTokenIDs: []int{g[1]}, Logprobs: true}}, lm.FinishStopToken},
		// idDecode renders g[1] as "<g1>", which appears first with it.
		{"greedy until a stop string", lm.GenerateRequest{Prompt: prompt, Params: lm.SampleParams{Stop: []string{idDecode(g[1:2])}, Logprobs: true}}, lm.FinishStop},
		{"sampled, max tokens", lm.GenerateRequest{Prompt: []int{1, 2, 3}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 12, Seed: u64(7), Logprobs: true}}, lm.FinishLength},
		{"processed sampling", lm.GenerateRequest{Prompt: []int{4, 5}, Params: lm.SampleParams{Temperature: 0.7, TopP: 0.9, TopK: 50, MinP: 0.001, MaxNewTokens: 10, Seed: u64(3), Logprobs: true}}, lm.FinishLength},
		// 93 prompt tokens leave 3 before the 96-token context is full.
		{"context limit", lm.GenerateRequest{Prompt: long, Params: lm.SampleParams{Temperature: 1, Seed: u64(11), Logprobs: true}}, lm.FinishLength},
	}
}

// TestSamplerConformance is the check against the real client: answers
// of the server decode through policy/openai's Sampler into the
// model's own generations — same token ids, same log-probabilities
// (raw or processed, per LogprobsMode, as the client files them), same
// finish reason, stop token and stop string.
func TestSamplerConformance(t *testing.T) {
	prompt := []int{72, 105, 33}
	// A first checkpoint gives the greedy continuation; the third token
	// becomes the end-of-sequence token of the served one (the weights
	// are the same, so greedy decoding stops there).
	g := greedy(t, writeCheckpoint(t, 1, 16), prompt, 6)
	dir := writeCheckpoint(t, 1, 16, g[2])
	g = greedy(t, dir, prompt, 0)
	require.GreaterOrEqual(t, len(g), 3, "greedy decoding stops at the third token at the latest: %v", g)
	for _, mode := range []openai.LogprobsMode{openai.RawLogprobs, openai.ProcessedLogprobs} {
		t.Run(string(mode), func(t *testing.T) {
			_, ts := startServer(t, dir, Config{LogprobsMode: mode})
			sampler, err := openai.New(openai.Config{BaseURLs: []string{ts.URL}, Model: DefaultName, LogprobsMode: mode})
			require.NoError(t, err)
			for _, c := range conformanceCases(prompt, g) {
				t.Run(c.name, func(t *testing.T) {
					want := reference(t, dir, c.req)[0]
					require.Equal(t, c.finish, want.FinishReason, "the case must end as named")
					got, err := sampler.Generate(context.Background(), []lm.GenerateRequest{c.req})
					require.NoError(t, err)
					assert.Equal(t, want.Tokens, got[0].Tokens)
					assert.Equal(t, want.FinishReason, got[0].FinishReason)
					assert.Equal(t, want.StopToken, got[0].StopToken)
					assert.Equal(t, want.StopString, got[0].StopString)
					assert.Equal(t, 0, got[0].CachedTokens)
					assertLogprobsMode(t, mode, c.req.Params, want, got[0])
				})
			}
		})
	}
}

// TestCompletionShape checks the fields a client reads, derived by hand
// from the test detokeniser ("<id>" per token).
func TestCompletionShape(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	prompt := []int{10, 20, 30}
	g := greedy(t, dir, prompt, 3)
	_, ts := startServer(t, dir, Config{})
	r := complete(t, ts.URL, map[string]any{
		"model": DefaultName, "prompt": prompt, "max_tokens": 3, "temperature": 0,
		"logprobs": 1, "return_token_ids": true,
	})
	assert.True(t, strings.HasPrefix(r.ID, "cmpl-"), r.ID)
	assert.Equal(t, "text_completion", r.Object)
	assert.Equal(t, DefaultName, r.Model)
	assert.NotZero(t, r.Created)
	require.Len(t, r.Choices, 1)
	c := r.Choices[0]
	assert.Equal(t, 0, c.Index)
	assert.Equal(t, g, c.TokenIDs)
	assert.Equal(t, prompt, c.PromptTokenIDs)
	assert.Equal(t, "length", c.FinishReason)
	assert.JSONEq(t, "null", string(c.StopReason))
	assert.Equal(t, idDecode(g), c.Text)
	// Decoded tokens "<a>", "<b>", "<c>": offsets start at 0 and advance
	// by each token string's length.
	toks := []string{idDecode(g[:1]), idDecode(g[1:2]), idDecode(g[2:3])}
	assert.Equal(t, toks, c.Logprobs.Tokens)
	assert.Equal(t, []int{0, len(toks[0]), len(toks[0]) + len(toks[1])}, c.Logprobs.TextOffset)
	for i, tok := range toks {
		assert.Equal(t, map[string]float64{tok: c.Logprobs.TokenLogprobs[i]}, c.Logprobs.TopLogprobs[i])
	}
	// 3 prompt tokens, 3 generated.
	assert.Equal(t, 3, r.Usage.PromptTokens)
	assert.Equal(t, 3, r.Usage.CompletionTokens)
	assert.Equal(t, 6, r.Usage.TotalTokens)
	assert.Equal(t, "0", r.Metadata.WeightVersion)

	// Without logprobs and token ids the fields are null.
	status, body := post(t, ts.URL+"/v1/completions", `{"prompt": [10, 20, 30], "max_tokens": 2}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var raw struct {
		Choices []map[string]json.RawMessage `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(body, &raw))
	for _, k := range []string{"logprobs", "token_ids", "prompt_token_ids", "stop_reason"} {
		assert.JSONEq(t, "null", string(raw.Choices[0][k]), k)
	}
}

// TestStopText checks the text of each stop: vLLM drops a stop token's
// text and cuts a stop string, unless include_stop_str_in_output.
func TestStopText(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	prompt := []int{10, 20, 30}
	g := greedy(t, dir, prompt, 4)
	require.NotEqual(t, g[0], g[1], "the stops below must come at the second token")
	_, ts := startServer(t, dir, Config{})
	for _, c := range []struct {
		name    string
		body    map[string]any
		include bool
		text    string // by hand, from "<id>" per token
		reason  string // stop_reason as JSON
	}{
		{"stop token", map[string]any{"stop_token_ids": []int{g[1]}}, false, idDecode(g[:1]), jsonOf(g[1])},
		{"stop token included", map[string]any{"stop_token_ids": []int{g[1]}}, true, idDecode(g[:2]), jsonOf(g[1])},
		{"stop string", map[string]any{"stop": idDecode(g[1:2])}, false, idDecode(g[:1]), jsonOf(idDecode(g[1:2]))},
		{"stop string included", map[string]any{"stop": []string{idDecode(g[1:2])}}, true, idDecode(g[:2]), jsonOf(idDecode(g[1:2]))},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := greedyBody(prompt, 4)
			for k, v := range c.body {
				body[k] = v
			}
			body["include_stop_str_in_output"] = c.include
			r := complete(t, ts.URL, body)
			assert.Equal(t, g[:2], r.Choices[0].TokenIDs, "the tokens are kept either way")
			assert.Equal(t, "stop", r.Choices[0].FinishReason)
			assert.JSONEq(t, c.reason, string(r.Choices[0].StopReason))
			assert.Equal(t, c.text, r.Choices[0].Text)
		})
	}
}

func jsonOf(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// TestBatchedPromptsAndSamples: prompts × n choices, prompt-major, sample
// i of each prompt drawn with seed+i as vLLM does, in one request.
func TestBatchedPromptsAndSamples(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	prompts := [][]int{{5, 6, 7}, {8, 9}}
	_, ts := startServer(t, dir, Config{})
	r := complete(t, ts.URL, map[string]any{
		"prompt": prompts, "n": 3, "seed": 40, "temperature": 1, "max_tokens": 5, "logprobs": 0,
		"return_tokens_as_token_ids": true, "return_token_ids": true,
	})
	require.Len(t, r.Choices, 6)
	// The server sends the six samples in one Generate call; so does the
	// reference (log-probs can differ in the last bit with the batch's
	// make-up, tokens do not).
	var reqs []lm.GenerateRequest
	for _, pr := range prompts {
		for i := range 3 {
			reqs = append(reqs, lm.GenerateRequest{Prompt: pr, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 5, Seed: u64(40 + uint64(i)), Logprobs: true}})
		}
	}
	wants := reference(t, dir, reqs...)
	completion := 0
	for k, want := range wants {
		c := r.Choices[k]
		assert.Equal(t, k, c.Index)
		assert.Equal(t, want.Tokens, c.TokenIDs, "prompt %d sample %d", k/3, k%3)
		assert.Equal(t, reqs[k].Prompt, c.PromptTokenIDs)
		require.Len(t, c.Logprobs.Tokens, len(want.Tokens))
		for j, id := range want.Tokens {
			assert.Equal(t, "token_id:"+jsonOf(id), c.Logprobs.Tokens[j])
			assert.Equal(t, float64(want.RawLogProbs[j]), c.Logprobs.TokenLogprobs[j])
		}
		completion += len(want.Tokens)
	}
	// vLLM counts each prompt once: 3 + 2.
	assert.Equal(t, 5, r.Usage.PromptTokens)
	assert.Equal(t, completion, r.Usage.CompletionTokens)
	assert.Equal(t, 5+completion, r.Usage.TotalTokens)
}

// TestTextPrompts: with Encode, a string or a list of strings is a
// prompt.
func TestTextPrompts(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	_, ts := startServer(t, dir, Config{Encode: byteEncode})
	// byteEncode("hi") = [104, 105].
	g := greedy(t, dir, []int{104, 105}, 3)
	r := complete(t, ts.URL, map[string]any{"prompt": "hi", "max_tokens": 3, "temperature": 0, "return_token_ids": true})
	assert.Equal(t, []int{104, 105}, r.Choices[0].PromptTokenIDs)
	assert.Equal(t, g, r.Choices[0].TokenIDs)
	r = complete(t, ts.URL, map[string]any{"prompt": []string{"hi", "a"}, "max_tokens": 3, "temperature": 0, "return_token_ids": true})
	require.Len(t, r.Choices, 2)
	assert.Equal(t, []int{97}, r.Choices[1].PromptTokenIDs)
}

// TestMalformedRequests: every refusal is a 4xx with vLLM's error body
// {"error": {"message", "type", "param", "code"}} and a message that says
// what is wrong.
func TestMalformedRequests(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	_, ts := startServer(t, dir, Config{})
	tooLong := strings.Repeat("1,", testMaxLen-1) + "1" // 96 tokens: no room left
	cases := []struct {
		name, body string
		status     int
		msg        string
	}{
		{"not JSON", `{`, 400, "JSON decode error"},
		{"not an object", `[1, 2]`, 400, "must be a JSON object"},
		{"no prompt", `{"max_tokens": 4}`, 400, "prompt is required"},
		{"null prompt", `{"prompt": null}`, 400, "prompt is required"},
		{"empty prompt", `{"prompt": []}`, 400, "The decoder prompt cannot be empty"},
		{"empty prompt in a batch", `{"prompt": [[1], []]}`, 400, "The decoder prompt cannot be empty"},
		{"id out of vocabulary", `{"prompt": [1, 258]}`, 400, "Token id 258 is out of vocabulary"},
		{"negative id", `{"prompt": [-1]}`, 400, "Token id -1 is out of vocabulary"},
		{"fractional id", `{"prompt": [1.5]}`, 400, "integers"},
		{"mixed prompt", `{"prompt": [1, "a"]}`, 400, "integers"},
		{"object prompt", `{"prompt": {"a": 1}}`, 400, "prompt must be"},
		{"text without a tokenizer", `{"prompt": "hello"}`, 400, "need a tokenizer"},
		{"prompt too long", `{"prompt": [` + tooLong + `]}`, 400, "maximum context length is 96 tokens. However, your request has 96 input tokens"},
		{"max_tokens past the context", `{"prompt": [1, 2], "max_tokens": 95}`, 400, "'max_tokens' or 'max_completion_tokens' is too large: 95"},
		{"max_tokens 0", `{"prompt": [1], "max_tokens": 0}`, 400, "max_tokens must be at least 1, got 0."},
		{"n 0", `{"prompt": [1], "n": 0}`, 400, "n must be at least 1, got 0."},
		{"n too large", `{"prompt": [[1], [2]], "n": 4000}`, 400, "more than 4096"},
		{"n a string", `{"prompt": [1], "n": "two"}`, 400, "n: want an integer in range, got JSON string"},
		{"seed out of range", `{"prompt": [1], "seed": 1e30}`, 400, "seed: want an integer in range"},
		{"negative temperature", `{"prompt": [1], "temperature": -1}`, 400, "temperature must be non-negative"},
		{"top_p 0", `{"prompt": [1], "top_p": 0}`, 400, "top_p must be in (0, 1], got 0."},
		{"top_k -2", `{"prompt": [1], "top_k": -2}`, 400, "top_k must be 0 (disable), or at least 1, got -2."},
		{"min_p 2", `{"prompt": [1], "min_p": 2}`, 400, "min_p must be in [0, 1], got 2."},
		{"negative logprobs", `{"prompt": [1], "logprobs": -2}`, 400, "`logprobs` must be a positive value or -1."},
		{"logprobs of the whole vocabulary", `{"prompt": [1], "logprobs": -1}`, 400, "Requested sample logprobs of 258, which is greater than max allowed: 20"},
		{"too many logprobs", `{"prompt": [1], "logprobs": 21}`, 400, "greater than max allowed: 20"},
		{"empty stop string", `{"prompt": [1], "stop": ["a", ""]}`, 400, "stop cannot contain an empty string."},
		{"stop a number", `{"prompt": [1], "stop": 5}`, 400, "stop must be a string or a list of strings"},
		{"stream", `{"prompt": [1], "stream": true}`, 400, "stream is not supported"},
		{"echo", `{"prompt": [1], "echo": true}`, 400, "echo is not supported"},
		{"penalty", `{"prompt": [1], "presence_penalty": 0.5}`, 400, "presence_penalty is not supported"},
		{"prompt logprobs", `{"prompt": [1], "prompt_logprobs": 1}`, 400, "prompt_logprobs is not supported"},
		{"unknown model", `{"model": "gpt-4", "prompt": [1]}`, 404, "The model `gpt-4` does not exist."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := post(t, ts.URL+"/v1/completions", c.body)
			assert.Equal(t, c.status, status, "%s", body)
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &e), "%s", body)
			assert.Contains(t, e.Error.Message, c.msg)
			assert.Equal(t, c.status, e.Error.Code)
			assert.NotEmpty(t, e.Error.Type)
		})
	}
}

// TestRouting: unknown paths and methods answer as FastAPI does.
func TestRouting(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	_, ts := startServer(t, dir, Config{})
	for _, c := range []struct {
		method, path string
		status       int
		allow, body  string
	}{
		{http.MethodGet, "/v1/completions", http.StatusMethodNotAllowed, "POST",
			`{"error": {"message": "Method Not Allowed (GET /v1/completions; allowed: POST)", "type": "MethodNotAllowedError", "param": null, "code": 405}}`},
		{http.MethodDelete, "/flush_cache", http.StatusMethodNotAllowed, "GET, POST",
			`{"error": {"message": "Method Not Allowed (DELETE /flush_cache; allowed: GET, POST)", "type": "MethodNotAllowedError", "param": null, "code": 405}}`},
		{http.MethodPost, "/v1/models/agentrl", http.StatusMethodNotAllowed, "GET",
			`{"error": {"message": "Method Not Allowed (POST /v1/models/agentrl; allowed: GET)", "type": "MethodNotAllowedError", "param": null, "code": 405}}`},
		{http.MethodGet, "/v1/chat", http.StatusNotFound, "",
			`{"error": {"message": "Invalid URL (GET /v1/chat)", "type": "NotFoundError", "param": null, "code": 404}}`},
		{http.MethodPost, "/v1/embeddings", http.StatusNotFound, "",
			`{"error": {"message": "Invalid URL (POST /v1/embeddings)", "type": "NotFoundError", "param": null, "code": 404}}`},
		{http.MethodGet, "/v1/models/", http.StatusNotFound, "",
			`{"error": {"message": "Invalid URL (GET /v1/models/)", "type": "NotFoundError", "param": null, "code": 404}}`},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			req, err := http.NewRequest(c.method, ts.URL+c.path, nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			assert.Equal(t, c.status, resp.StatusCode)
			assert.Equal(t, c.allow, resp.Header.Get("Allow"))
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			assert.JSONEq(t, c.body, string(body))
		})
	}
}

// TestRetrieveModel: GET /v1/models/<id> gives the card /v1/models lists
// under that id, the served model's or an adapter's (whose name may hold
// a slash), and OpenAI's error object, vLLM's message, for another id.
func TestRetrieveModel(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	_, ts := startServer(t, dir, Config{Name: "org/tiny"})
	adapter := writeAdapter(t, dir, allLinear, 3)
	status, body := post(t, ts.URL+"/v1/load_lora_adapter", fmt.Sprintf(`{"lora_name": "team/ad", "lora_path": %q}`, adapter))
	require.Equal(t, http.StatusOK, status, "%s", body)
	status, body = get(t, ts.URL+"/v1/models")
	require.Equal(t, http.StatusOK, status)
	var list struct {
		Data []map[string]any `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Data, 2)
	for _, want := range list.Data {
		id := want["id"].(string)
		status, body := get(t, ts.URL+"/v1/models/"+id)
		require.Equal(t, http.StatusOK, status, "%s: %s", id, body)
		var got map[string]any
		require.NoError(t, json.Unmarshal(body, &got))
		// The permission's id is drawn afresh for each answer.
		delete(got["permission"].([]any)[0].(map[string]any), "id")
		delete(want["permission"].([]any)[0].(map[string]any), "id")
		assert.Equal(t, want, got, id)
	}
	assert.Equal(t, "org/tiny", list.Data[0]["id"])
	assert.Equal(t, "team/ad", list.Data[1]["id"])
	assert.Equal(t, "org/tiny", list.Data[1]["parent"])
	status, body = get(t, ts.URL+"/v1/models/gpt-4")
	assert.Equal(t, http.StatusNotFound, status)
	assert.JSONEq(t, "{\"error\": {\"message\": \"The model `gpt-4` does not exist.\", \"type\": \"NotFoundError\", \"param\": \"model\", \"code\": 404}}", string(body))
}

// TestInfoEndpoints checks /health, /v1/models, /model_info and
// /get_weight_version.
func TestInfoEndpoints(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	_, ts := startServer(t, dir, Config{Name: "tiny", WeightVersion: "v7", Encode: byteEncode})
	status, body := get(t, ts.URL+"/health")
	assert.Equal(t, http.StatusOK, status)
	assert.Empty(t, body)

	status, body = get(t, ts.URL+"/v1/models")
	require.Equal(t, http.StatusOK, status)
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			Root        string `json:"root"`
			MaxModelLen int    `json:"max_model_len"`
			Permission  []struct {
				Object string `json:"object"`
			} `json:"permission"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &models))
	assert.Equal(t, "list", models.Object)
	require.Len(t, models.Data, 1)
	assert.Equal(t, "tiny", models.Data[0].ID)
	assert.Equal(t, "model", models.Data[0].Object)
	assert.Equal(t, dir, models.Data[0].Root)
	assert.Equal(t, testMaxLen, models.Data[0].MaxModelLen)
	assert.Equal(t, "model_permission", models.Data[0].Permission[0].Object)

	for _, path := range []string{"/model_info", "/get_model_info"} {
		status, body = get(t, ts.URL+path)
		require.Equal(t, http.StatusOK, status)
		assert.JSONEq(t, jsonOf(map[string]any{
			"model_path": dir, "tokenizer_path": dir, "is_generation": true, "preferred_sampling_params": nil,
			"weight_version": "v7", "has_image_understanding": false, "has_audio_understanding": false,
			"model_type": "qwen3", "architectures": []string{"Qwen3ForCausalLM"},
		}), string(body))
	}
	status, body = get(t, ts.URL+"/get_weight_version")
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"weight_version": "v7"}`, string(body))

	// The served name is "tiny"; the default name is another model.
	status, _ = post(t, ts.URL+"/v1/completions", `{"model": "agentrl", "prompt": [1]}`)
	assert.Equal(t, http.StatusNotFound, status)
}

// TestPrefixCache: a prompt that extends an earlier sequence reuses its
// cache (cached_tokens) and gets the tokens it gets without.
func TestPrefixCache(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	s, ts := startServer(t, dir, Config{MaxSessions: 2})
	p1 := []int{3, 1, 4, 1, 5}
	r := complete(t, ts.URL, greedyBody(p1, 4))
	g1 := r.Choices[0].TokenIDs
	assert.Equal(t, 0, r.Usage.PromptTokensDetails.CachedTokens)
	// The session holds p1 and the generated tokens but the last: 5 + 3.
	p2 := append(append(append([]int{}, p1...), g1...), 9)
	r = complete(t, ts.URL, greedyBody(p2, 4))
	assert.Equal(t, 8, r.Usage.PromptTokensDetails.CachedTokens)
	assert.Equal(t, greedy(t, dir, p2, 4), r.Choices[0].TokenIDs)

	// Two more unrelated prompts: at most 2 sessions are kept.
	complete(t, ts.URL, greedyBody([]int{7}, 2))
	complete(t, ts.URL, greedyBody([]int{8}, 2))
	assert.Equal(t, 2, s.eng.prefix.len())
	assert.Equal(t, 2, s.eng.model.Sessions())

	status, body := post(t, ts.URL+"/reset_prefix_cache", "")
	assert.Equal(t, http.StatusOK, status)
	assert.Empty(t, body)
	assert.Equal(t, 0, s.eng.prefix.len())
	complete(t, ts.URL, greedyBody([]int{7}, 2))
	status, body = get(t, ts.URL+"/flush_cache")
	assert.Equal(t, http.StatusOK, status)
	assert.True(t, strings.HasPrefix(string(body), "Cache flushed."), "%s", body)
	assert.Equal(t, 0, s.eng.prefix.len())
	assert.Equal(t, 0, s.eng.model.Sessions())
}

// TestNewConfig: New refuses a config it cannot serve.
func TestNewConfig(t *testing.T) {
	m := loadModel(t, writeCheckpoint(t, 1, 16))
	for _, c := range []struct {
		name string
		cfg  Config
		msg  string
	}{
		{"no model", Config{}, "Model is required"},
		{"bad logprobs mode", Config{Model: m, LogprobsMode: "raw_logits"}, `LogprobsMode "raw_logits"`},
		{"negative sessions", Config{Model: m, MaxSessions: -1}, "MaxSessions -1 is negative"},
		{"unknown engine", Config{Model: m, Engine: "tgi"}, `Engine "tgi"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.cfg)
			require.ErrorIs(t, err, ErrConfig)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}

// assertLogprobsMode checks the log-probs a client decoded in mode
// against the model's own generation: processed ones as they are, raw
// ones in RawLogProbs (and also as LogProbs when the sampling did not
// change the distribution: temperature 1, no truncation).
func assertLogprobsMode(t *testing.T, mode openai.LogprobsMode, p lm.SampleParams, want, got lm.Generation) {
	t.Helper()
	unprocessed := p.Temperature == 1 && p.TopP == 0 && p.TopK == 0 && p.MinP == 0
	switch {
	case mode == openai.ProcessedLogprobs:
		assert.Equal(t, want.LogProbs, got.LogProbs)
		assert.Nil(t, got.RawLogProbs)
	case unprocessed:
		assert.Equal(t, want.RawLogProbs, got.RawLogProbs)
		assert.Equal(t, want.RawLogProbs, got.LogProbs)
	default:
		assert.Equal(t, want.RawLogProbs, got.RawLogProbs)
		assert.Nil(t, got.LogProbs)
	}
}
