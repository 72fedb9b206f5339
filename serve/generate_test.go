package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/openai"
)

// sglangSampler is a policy/openai Sampler speaking SGLang's /generate
// to ts, filing log-probabilities per mode.
func sglangSampler(t *testing.T, url string, mode openai.LogprobsMode, mod func(*openai.Config)) *openai.Sampler {
	t.Helper()
	cfg := openai.Config{BaseURLs: []string{url}, API: openai.APISGLangGenerate, LogprobsMode: mode}
	if mod != nil {
		mod(&cfg)
	}
	s, err := openai.New(cfg)
	require.NoError(t, err)
	return s
}

// TestSGLangConformance is TestSamplerConformance through SGLang's
// /generate: answers decode through policy/openai's Sampler with
// APISGLangGenerate into the model's own generations — the same token
// ids, log-probabilities (raw or processed, per LogprobsMode), finish
// reason, stop token and stop string — with the weight version served.
func TestSGLangConformance(t *testing.T) {
	prompt := []int{72, 105, 33}
	g := greedy(t, writeCheckpoint(t, 1, 16), prompt, 6)
	dir := writeCheckpoint(t, 1, 16, g[2])
	g = greedy(t, dir, prompt, 0)
	require.GreaterOrEqual(t, len(g), 3, "greedy decoding stops at the third token at the latest: %v", g)
	for _, mode := range []openai.LogprobsMode{openai.RawLogprobs, openai.ProcessedLogprobs} {
		t.Run(string(mode), func(t *testing.T) {
			_, ts := startServer(t, dir, Config{LogprobsMode: mode, WeightVersion: "v3"})
			sampler := sglangSampler(t, ts.URL, mode, nil)
			for _, c := range conformanceCases(prompt, g) {
				t.Run(c.name, func(t *testing.T) {
					ref := c.req
					if ref.Params.MaxNewTokens == 0 {
						// The sampler bounds every request, and SGLang
						// refuses prompt + max_new_tokens ≥ the context: it
						// sends the room less one (93 prompt tokens in 96:
						// 2 tokens, where the model alone fills 3).
						ref.Params.MaxNewTokens = testMaxLen - len(ref.Prompt) - 1
					}
					want := reference(t, dir, ref)[0]
					require.Equal(t, c.finish, want.FinishReason, "the case must end as named")
					got, err := sampler.Generate(context.Background(), []lm.GenerateRequest{c.req})
					require.NoError(t, err)
					assert.Equal(t, want.Tokens, got[0].Tokens)
					assert.Equal(t, want.FinishReason, got[0].FinishReason)
					assert.Equal(t, want.StopToken, got[0].StopToken)
					assert.Equal(t, want.StopString, got[0].StopString)
					assert.Equal(t, 0, got[0].CachedTokens)
					assert.Equal(t, "v3", got[0].WeightVersion)
					assertLogprobsMode(t, mode, c.req.Params, want, got[0])
				})
			}
		})
	}
}

// sglangAnswer is a /generate answer as a client reads it.
type sglangAnswer struct {
	Text      string `json:"text"`
	OutputIDs []int  `json:"output_ids"`
	MetaInfo  struct {
		ID                  string            `json:"id"`
		FinishReason        map[string]any    `json:"finish_reason"`
		PromptTokens        int               `json:"prompt_tokens"`
		CompletionTokens    int               `json:"completion_tokens"`
		CachedTokens        int               `json:"cached_tokens"`
		WeightVersion       string            `json:"weight_version"`
		OutputTokenLogprobs []json.RawMessage `json:"output_token_logprobs"`
	} `json:"meta_info"`
}

// generate posts a /generate body that must succeed and decodes the
// answer into out.
func generate(t *testing.T, base string, body any, out any) {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	status, answer := post(t, base+"/generate", string(data))
	require.Equal(t, http.StatusOK, status, "%s", answer)
	require.NoError(t, json.NewDecoder(bytes.NewReader(answer)).Decode(out))
}

// TestGenerateShape checks the fields of an answer, derived by hand from
// the test detokeniser ("<id>" per token) and the greedy continuation.
func TestGenerateShape(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	g := greedy(t, dir, testPrompt, 3)
	_, ts := startServer(t, dir, Config{WeightVersion: "7"})
	var a sglangAnswer
	generate(t, ts.URL, map[string]any{
		"input_ids": testPrompt, "rid": "req-1", "return_logprob": true, "return_text_in_logprobs": true,
		"sampling_params": map[string]any{"temperature": 0, "max_new_tokens": 3},
	}, &a)
	assert.Equal(t, g, a.OutputIDs)
	assert.Equal(t, idDecode(g), a.Text)
	m := a.MetaInfo
	assert.Equal(t, "req-1", m.ID)
	// 3 new tokens reached max_new_tokens 3.
	assert.Equal(t, map[string]any{"type": "length", "length": 3.0}, m.FinishReason)
	assert.Equal(t, 3, m.PromptTokens)
	assert.Equal(t, 3, m.CompletionTokens)
	assert.Equal(t, 0, m.CachedTokens)
	assert.Equal(t, "7", m.WeightVersion)
	// Raw log-probs (the default mode) of greedy decoding: the model's.
	want := reference(t, dir, lm.GenerateRequest{Prompt: testPrompt, Params: lm.SampleParams{MaxNewTokens: 3, Logprobs: true}})[0]
	require.Len(t, m.OutputTokenLogprobs, 3)
	for i, e := range m.OutputTokenLogprobs {
		assert.JSONEq(t, fmt.Sprintf(`[%s, %d, %q]`, jsonOf(float64(want.RawLogProbs[i])), g[i], idDecode(g[i:i+1])), string(e))
	}

	// Without return_logprob there are none; without
	// return_text_in_logprobs their texts are null.
	status, body := post(t, ts.URL+"/generate", `{"input_ids": [10, 20, 30], "sampling_params": {"max_new_tokens": 2}}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var raw struct {
		MetaInfo map[string]json.RawMessage `json:"meta_info"`
	}
	require.NoError(t, json.Unmarshal(body, &raw))
	assert.NotContains(t, raw.MetaInfo, "output_token_logprobs")
	assert.Len(t, raw.MetaInfo["id"], 34, "a random id: 32 hex digits, quoted")
	generate(t, ts.URL, map[string]any{"input_ids": testPrompt, "return_logprob": true, "sampling_params": map[string]any{"max_new_tokens": 1}}, &a)
	require.Len(t, a.MetaInfo.OutputTokenLogprobs, 1)
	var entry []any
	require.NoError(t, json.Unmarshal(a.MetaInfo.OutputTokenLogprobs[0], &entry))
	assert.Nil(t, entry[2])

	// No max_new_tokens is SGLang's 128, capped by the context: 96 - 3
	// tokens fit after the prompt; null is up to the context too.
	generate(t, ts.URL, map[string]any{"input_ids": testPrompt}, &a)
	assert.Equal(t, map[string]any{"type": "length", "length": 93.0}, a.MetaInfo.FinishReason)
	assert.Len(t, a.OutputIDs, 93)
	generate(t, ts.URL, map[string]any{"input_ids": testPrompt, "sampling_params": map[string]any{"max_new_tokens": nil, "temperature": 0}}, &a)
	assert.Equal(t, greedy(t, dir, testPrompt, 0), a.OutputIDs)
	assert.Equal(t, 93, a.MetaInfo.CompletionTokens)
}

// TestGenerateBatch: a list of prompts gets a list of answers in order,
// with rid as the prefix of their ids.
func TestGenerateBatch(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	_, ts := startServer(t, dir, Config{Encode: byteEncode})
	var answers []sglangAnswer
	generate(t, ts.URL, map[string]any{
		"input_ids": [][]int{testPrompt, {5, 6}}, "rid": "b", "sampling_params": map[string]any{"temperature": 0, "max_new_tokens": 4},
	}, &answers)
	require.Len(t, answers, 2)
	assert.Equal(t, greedy(t, dir, testPrompt, 4), answers[0].OutputIDs)
	assert.Equal(t, greedy(t, dir, []int{5, 6}, 4), answers[1].OutputIDs)
	assert.Equal(t, []string{"b_0", "b_1"}, []string{answers[0].MetaInfo.ID, answers[1].MetaInfo.ID})
	assert.Equal(t, []int{3, 2}, []int{answers[0].MetaInfo.PromptTokens, answers[1].MetaInfo.PromptTokens})

	// Text prompts through Encode: byteEncode("hi") = [104, 105]; a
	// string is one prompt (an object), a list a batch (a list).
	var one sglangAnswer
	generate(t, ts.URL, map[string]any{"text": "hi", "sampling_params": map[string]any{"temperature": 0, "max_new_tokens": 3}}, &one)
	assert.Equal(t, greedy(t, dir, []int{104, 105}, 3), one.OutputIDs)
	generate(t, ts.URL, map[string]any{"text": []string{"hi", "a"}, "rid": []string{"x", "y"},
		"sampling_params": map[string]any{"temperature": 0, "max_new_tokens": 3}}, &answers)
	require.Len(t, answers, 2)
	assert.Equal(t, greedy(t, dir, []int{97}, 3), answers[1].OutputIDs)
	assert.Equal(t, "y", answers[1].MetaInfo.ID)

	// Seeded sampling is reproducible and is the model's own.
	req := lm.GenerateRequest{Prompt: testPrompt, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 8, Seed: u64(1<<63 + 5)}}
	var s sglangAnswer
	// The seed travels as an int64: 2^63 + 5 reads -(2^63) + 5.
	generate(t, ts.URL, map[string]any{"input_ids": testPrompt, "sampling_params": map[string]any{"max_new_tokens": 8, "sampling_seed": int64(-1<<63 + 5)}}, &s)
	assert.Equal(t, reference(t, dir, req)[0].Tokens, s.OutputIDs)
}

// TestGenerateStopText: SGLang drops a stop token's text and cuts a stop
// string unless no_stop_trim; output_ids keep every token either way,
// and finish_reason.matched is the token or the string.
func TestGenerateStopText(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	g := greedy(t, dir, testPrompt, 4)
	require.NotEqual(t, g[0], g[1], "the stops below must come at the second token")
	_, ts := startServer(t, dir, Config{})
	for _, c := range []struct {
		name    string
		params  map[string]any
		noTrim  bool
		text    string // by hand, from "<id>" per token
		matched any
	}{
		{"stop token", map[string]any{"stop_token_ids": []int{g[1]}}, false, idDecode(g[:1]), float64(g[1])},
		{"stop token kept", map[string]any{"stop_token_ids": []int{g[1]}}, true, idDecode(g[:2]), float64(g[1])},
		{"stop string", map[string]any{"stop": idDecode(g[1:2])}, false, idDecode(g[:1]), idDecode(g[1:2])},
		{"stop string kept", map[string]any{"stop": []string{idDecode(g[1:2])}}, true, idDecode(g[:2]), idDecode(g[1:2])},
	} {
		t.Run(c.name, func(t *testing.T) {
			params := map[string]any{"temperature": 0, "max_new_tokens": 4, "no_stop_trim": c.noTrim}
			for k, v := range c.params {
				params[k] = v
			}
			var a sglangAnswer
			generate(t, ts.URL, map[string]any{"input_ids": testPrompt, "sampling_params": params}, &a)
			assert.Equal(t, g[:2], a.OutputIDs)
			assert.Equal(t, map[string]any{"type": "stop", "matched": c.matched}, a.MetaInfo.FinishReason)
			assert.Equal(t, c.text, a.Text)
		})
	}
}

// TestGenerateMalformed: every refusal is a 4xx with SGLang's error body
// {"error": {"message"}} and a message that says what is wrong.
func TestGenerateMalformed(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	_, ts := startServer(t, dir, Config{})
	tooLong := strings.Repeat("1,", testMaxLen-1) + "1" // 96 tokens: no room left
	cases := []struct{ name, body, msg string }{
		{"not JSON", `{`, "JSON decode error"},
		{"not an object", `[1]`, "must be a JSON object"},
		{"no prompt", `{"sampling_params": {}}`, "Either text, input_ids or input_embeds should be provided."},
		{"both prompts", `{"input_ids": [1], "text": "a"}`, "either text or input_ids, not both"},
		{"empty input_ids", `{"input_ids": []}`, "input_ids cannot be empty."},
		{"empty prompt in a batch", `{"input_ids": [[1], []]}`, "The decoder prompt cannot be empty"},
		{"input_ids a string", `{"input_ids": "1 2"}`, "input_ids must be a list"},
		{"fractional id", `{"input_ids": [1.5]}`, "input_ids must be a list of integer token ids"},
		{"mixed batch", `{"input_ids": [[1], 2]}`, "input_ids must be a list"},
		{"id out of vocabulary", `{"input_ids": [1, 258]}`, "Token id 258 is out of vocabulary"},
		{"prompt too long", `{"input_ids": [` + tooLong + `]}`, "maximum context length is 96 tokens"},
		{"text without a tokenizer", `{"text": "hello"}`, "need a tokenizer"},
		{"text a number", `{"text": 5}`, "text must be a string or a list of strings"},
		{"empty text list", `{"text": []}`, "text cannot be an empty list"},
		{"temperature", `{"input_ids": [1], "sampling_params": {"temperature": -1}}`, "temperature must be a non-negative finite number, got -1."},
		{"top_p 0", `{"input_ids": [1], "sampling_params": {"top_p": 0}}`, "top_p must be in (0, 1], got 0."},
		{"top_k 0", `{"input_ids": [1], "sampling_params": {"top_k": 0}}`, "top_k must be -1 (disable) or at least 1, got 0."},
		{"min_p 2", `{"input_ids": [1], "sampling_params": {"min_p": 2}}`, "min_p must be in [0, 1], got 2."},
		{"max_new_tokens -1", `{"input_ids": [1], "sampling_params": {"max_new_tokens": -1}}`, "max_new_tokens must be at least 0, got -1."},
		{"max_new_tokens 0", `{"input_ids": [1], "sampling_params": {"max_new_tokens": 0}}`, "prefill only"},
		{"max_new_tokens a string", `{"input_ids": [1], "sampling_params": {"max_new_tokens": "8"}}`, "want an integer in range or null"},
		{"temperature a string", `{"input_ids": [1], "sampling_params": {"temperature": "hot"}}`, "sampling_params: temperature: want a number, got JSON string"},
		{"unknown sampling field", `{"input_ids": [1], "sampling_params": {"max_tokens": 8}}`, `sampling_params: unknown field "max_tokens"`},
		{"sampling_params a list", `{"input_ids": [1], "sampling_params": [{}]}`, "a list of sampling_params"},
		{"sampling_params a string", `{"input_ids": [1], "sampling_params": "greedy"}`, "sampling_params must be an object"},
		{"empty stop", `{"input_ids": [1], "sampling_params": {"stop": [""]}}`, "stop cannot contain an empty string."},
		{"n 2", `{"input_ids": [1], "sampling_params": {"n": 2}}`, "parallel sampling is not supported"},
		{"penalty", `{"input_ids": [1], "sampling_params": {"frequency_penalty": 0.5}}`, "sampling_params.frequency_penalty is not supported"},
		{"regex", `{"input_ids": [1], "sampling_params": {"regex": "a+"}}`, "sampling_params.regex is not supported"},
		{"ignore_eos", `{"input_ids": [1], "sampling_params": {"ignore_eos": true}}`, "sampling_params.ignore_eos is not supported"},
		{"stream", `{"input_ids": [1], "stream": true}`, "stream is not supported"},
		{"input log-probs", `{"input_ids": [1], "return_logprob": true, "logprob_start_len": 0}`, "only -1"},
		{"top log-probs", `{"input_ids": [1], "return_logprob": true, "top_logprobs_num": 5}`, "top_logprobs_num is not supported by this server's /generate; its /v1/completions returns top log-probabilities (logprobs N)"},
		{"return_logprob a list", `{"input_ids": [1], "return_logprob": [true]}`, "return_logprob: want a boolean"},
		{"images", `{"input_ids": [1], "image_data": "a.png"}`, "image_data is not supported"},
		{"rid a number", `{"input_ids": [1], "rid": 5}`, "The rid should be a string or a list of strings."},
		{"rids too few", `{"input_ids": [[1], [2]], "rid": ["a"]}`, "The specified rids length mismatch"},
		{"rids repeated", `{"input_ids": [[1], [2]], "rid": ["a", "a"]}`, "Duplicate request IDs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := post(t, ts.URL+"/generate", c.body)
			assert.Equal(t, http.StatusBadRequest, status, "%s", body)
			var e struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &e), "%s", body)
			assert.Contains(t, e.Error.Message, c.msg)
		})
	}
	// PUT is POST, as in SGLang; GET is not allowed.
	status, body := do(t, http.MethodPut, ts.URL+"/generate", `{"input_ids": [1], "sampling_params": {"max_new_tokens": 1}}`)
	assert.Equal(t, http.StatusOK, status, "%s", body)
	status, _ = get(t, ts.URL+"/generate")
	assert.Equal(t, http.StatusMethodNotAllowed, status)
}

// TestGenerateAbort: a pause or reload in abort mode ends a /generate in
// flight with finish_reason {"type": "abort"} and no tokens; the SGLang
// sampler tries it again, which after a reload runs on the new weights.
func TestGenerateAbort(t *testing.T) {
	a, b, _, gb := twoCheckpoints(t, testPrompt)
	s, ts := startServer(t, a, Config{})
	bg := newBlockingGen(s, 2)
	aborted := make(chan sglangAnswer, 1)
	go func() {
		var out sglangAnswer
		generate(t, ts.URL, map[string]any{"input_ids": testPrompt, "return_logprob": true, "sampling_params": map[string]any{"temperature": 0, "max_new_tokens": 6}}, &out)
		aborted <- out
	}()
	<-bg.started
	sampler := sglangSampler(t, ts.URL, openai.RawLogprobs, nil)
	retried := make(chan []lm.Generation, 1)
	go func() {
		gens, err := sampler.Generate(context.Background(), []lm.GenerateRequest{{Prompt: testPrompt, Params: lm.SampleParams{MaxNewTokens: 6}}})
		assert.NoError(t, err)
		retried <- gens
	}()
	<-bg.started
	status, out := post(t, ts.URL+"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q, "abort_all_requests": true}`, b))
	require.Equal(t, http.StatusOK, status, "%s", out)
	r := <-aborted
	assert.Equal(t, "abort", r.MetaInfo.FinishReason["type"])
	assert.Equal(t, []int{}, r.OutputIDs)
	assert.Empty(t, r.Text)
	assert.Empty(t, r.MetaInfo.OutputTokenLogprobs)
	assert.Equal(t, "0", r.MetaInfo.WeightVersion, "no token was generated, on the old weights")
	gens := <-retried
	require.Len(t, gens, 1)
	assert.Equal(t, gb, gens[0].Tokens, "the retry ran on the new weights")
	assert.Equal(t, "1", gens[0].WeightVersion)

	// Without retries, the abort is the client's error.
	bg = newBlockingGen(s, 1)
	once := sglangSampler(t, ts.URL, openai.RawLogprobs, func(c *openai.Config) { c.MaxRetries = -1 })
	errc := make(chan error, 1)
	go func() {
		_, err := once.Generate(context.Background(), []lm.GenerateRequest{{Prompt: testPrompt}})
		errc <- err
	}()
	<-bg.started
	status, out = post(t, ts.URL+"/pause_generation", `{"mode": "abort"}`)
	require.Equal(t, http.StatusOK, status, "%s", out)
	assert.ErrorIs(t, <-errc, openai.ErrAborted)
	status, _ = post(t, ts.URL+"/continue_generation", "")
	assert.Equal(t, http.StatusOK, status)
}

// TestGeneratePrefixCache: meta_info.cached_tokens reports the prefix a
// later turn reused, as usage does for completions.
func TestGeneratePrefixCache(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	_, ts := startServer(t, dir, Config{MaxSessions: 2})
	p1 := []int{3, 1, 4, 1, 5}
	sampler := sglangSampler(t, ts.URL, openai.RawLogprobs, nil)
	first, err := sampler.Generate(context.Background(), []lm.GenerateRequest{{Prompt: p1, Params: lm.SampleParams{MaxNewTokens: 4}}})
	require.NoError(t, err)
	assert.Equal(t, 0, first[0].CachedTokens)
	// The session holds p1 and the generated tokens but the last: 5 + 3.
	p2 := append(append(append([]int{}, p1...), first[0].Tokens...), 9)
	second, err := sampler.Generate(context.Background(), []lm.GenerateRequest{{Prompt: p2, Params: lm.SampleParams{MaxNewTokens: 4}}})
	require.NoError(t, err)
	assert.Equal(t, 8, second[0].CachedTokens)
	assert.Equal(t, greedy(t, dir, p2, 4), second[0].Tokens)
}
