package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/openai"
)

// fakeSGLang answers POST /generate with the body answer(call) returns,
// status 200, and records the requests. Correct answers are tested
// against package serve, which speaks the same API over a real model;
// this double serves the malformed and the aborted ones.
type fakeSGLang struct {
	calls  atomic.Int64
	answer func(call int64) string
	mu     sync.Mutex
	bodies []map[string]any
}

func (f *fakeSGLang) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	call := f.calls.Add(1)
	if r.URL.Path != "/generate" || r.Method != http.MethodPost {
		http.Error(w, `{"detail":"Not Found"}`, http.StatusNotFound)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, f.answer(call))
}

// sglangOK is a well-formed answer: tokens 7 and 8 with log-probs -0.5
// and -0.25, stopped on the stop token 8, weight version v.
func sglangOK(v string) string {
	return `{"text":"","output_ids":[7,8],"meta_info":{"id":"a1","finish_reason":{"type":"stop","matched":8},"prompt_tokens":2,` +
		`"weight_version":"` + v + `","completion_tokens":2,"cached_tokens":1,"output_token_logprobs":[[-0.5,7,null],[-0.25,8,null]]}}`
}

var sgReq = lm.GenerateRequest{Prompt: []int{1, 2}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 16, Logprobs: true, StopTokenIDs: []int{8}}}

func TestSGLangGenerate(t *testing.T) {
	f := &fakeSGLang{answer: func(int64) string { return sglangOK("default") }}
	srv := httptest.NewServer(f)
	defer srv.Close()
	// A base written for the OpenAI-compatible API: /v1 is dropped.
	s := newSampler(t, []string{srv.URL + "/v1"}, func(c *openai.Config) { c.API = openai.APISGLangGenerate; c.Model = "ignored" })
	gens, err := s.Generate(context.Background(), []lm.GenerateRequest{sgReq})
	require.NoError(t, err)
	// Temperature 1 with nothing truncated: SGLang's scaled log-probs are
	// both the raw and the sampling ones.
	assert.Equal(t, lm.Generation{
		Tokens: []int{7, 8}, LogProbs: []float32{-0.5, -0.25}, RawLogProbs: []float32{-0.5, -0.25},
		FinishReason: lm.FinishStopToken, StopToken: 8, CachedTokens: 1, WeightVersion: "default",
	}, gens[0])
	require.Len(t, f.bodies, 1)
	b := f.bodies[0]
	assert.Equal(t, []any{1.0, 2.0}, b["input_ids"])
	assert.Equal(t, true, b["return_logprob"])
	assert.NotContains(t, b, "model", "GenerateReqInput has no model")
	assert.Equal(t, []any{8.0}, b["sampling_params"].(map[string]any)["stop_token_ids"])
}

// TestSGLangMalformed: answers that break the API are errors wrapping
// ErrBadResponse that name the server, and are not retried.
func TestSGLangMalformed(t *testing.T) {
	for _, c := range []struct{ name, answer, msg string }{
		{"text only (SGLang's /v1/completions shape)", `{"choices":[{"text":"hi","logprobs":{"tokens":["hi"]}}]}`, "no meta_info"},
		{"no token ids", `{"text":"hi","meta_info":{"finish_reason":{"type":"length","length":2}}}`, "no token ids"},
		{"ids and log-probs disagree", `{"output_ids":[7,9],"meta_info":{"finish_reason":{"type":"length"},` +
			`"output_token_logprobs":[[-0.5,7,null],[-0.25,8,null]]}}`, "token 1: output_ids has 9, meta_info.output_token_logprobs 8"},
		{"a log-prob short", `{"output_ids":[7,8],"meta_info":{"finish_reason":{"type":"length"},"output_token_logprobs":[[-0.5,7,null]]}}`,
			"2 output_ids but 1 meta_info.output_token_logprobs"},
		{"unfinished", `{"output_ids":[7],"meta_info":{"finish_reason":null,"output_token_logprobs":[[-0.5,7,null]]}}`, "no meta_info.finish_reason"},
		{"a batch answer", `[` + sglangOK("0") + `]`, "want a JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeSGLang{answer: func(int64) string { return c.answer }}
			srv := httptest.NewServer(f)
			defer srv.Close()
			s := newSampler(t, []string{srv.URL}, func(c *openai.Config) { c.API = openai.APISGLangGenerate })
			_, err := s.Generate(context.Background(), []lm.GenerateRequest{sgReq})
			require.ErrorIs(t, err, openai.ErrBadResponse)
			assert.ErrorContains(t, err, "POST "+srv.URL+"/generate: ")
			assert.ErrorContains(t, err, c.msg)
			assert.Equal(t, 1, int(f.calls.Load()))
		})
	}
}

// TestSGLangAbort: a generation the server aborted (a pause or weight
// update in abort mode) is tried again; when every try is aborted the
// error wraps ErrAborted.
func TestSGLangAbort(t *testing.T) {
	const aborted = `{"text":"","output_ids":[],"meta_info":{"id":"a1","finish_reason":{"type":"abort","message":"Aborted",` +
		`"status_code":null,"err_type":null},"prompt_tokens":2,"weight_version":"3","completion_tokens":0,"cached_tokens":0}}`
	f := &fakeSGLang{answer: func(call int64) string {
		if call == 1 {
			return aborted
		}
		return sglangOK("4")
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := newSampler(t, []string{srv.URL}, func(c *openai.Config) { c.API = openai.APISGLangGenerate })
	gens, err := s.Generate(context.Background(), []lm.GenerateRequest{sgReq})
	require.NoError(t, err)
	assert.Equal(t, "4", gens[0].WeightVersion)
	assert.Equal(t, 2, int(f.calls.Load()))

	always := &fakeSGLang{answer: func(int64) string { return aborted }}
	srv2 := httptest.NewServer(always)
	defer srv2.Close()
	s = newSampler(t, []string{srv2.URL}, func(c *openai.Config) { c.API = openai.APISGLangGenerate; c.MaxRetries = 2 })
	_, err = s.Generate(context.Background(), []lm.GenerateRequest{sgReq})
	require.ErrorIs(t, err, openai.ErrAborted)
	assert.ErrorContains(t, err, "3 attempts failed")
	assert.Equal(t, 3, int(always.calls.Load()))
}

// TestPartialAbort: with Config.Partial an aborted generation comes
// back at the first try, as the server answered it — its tokens, their
// log-probabilities and the version that generated them — with
// lm.FinishAbort, through either API.
func TestPartialAbort(t *testing.T) {
	const sglangAborted = `{"text":"","output_ids":[7,8],"meta_info":{"id":"a1","finish_reason":{"type":"abort","message":"Aborted",` +
		`"status_code":null,"err_type":null},"prompt_tokens":2,"weight_version":"3","completion_tokens":2,"cached_tokens":0,` +
		`"output_token_logprobs":[[-0.25,7,null],[-2.5,8,null]]}}`
	f := &fakeSGLang{answer: func(int64) string { return sglangAborted }}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := newSampler(t, []string{srv.URL}, func(c *openai.Config) { c.API = openai.APISGLangGenerate; c.Partial = true })
	req := sgReq
	req.Params.Logprobs = true
	gens, err := s.Generate(context.Background(), []lm.GenerateRequest{req})
	require.NoError(t, err)
	// At temperature 1 SGLang's scaled log-probabilities are the raw
	// ones too.
	assert.Equal(t, lm.Generation{Tokens: []int{7, 8}, LogProbs: []float32{-0.25, -2.5}, RawLogProbs: []float32{-0.25, -2.5},
		FinishReason: lm.FinishAbort, WeightVersion: "3"}, gens[0])
	assert.Equal(t, 1, int(f.calls.Load()), "not tried again")
}

// TestSGLangWeightVersion: meta_info.weight_version is checked against
// Config.WeightVersion as metadata.weight_version is for completions.
func TestSGLangWeightVersion(t *testing.T) {
	stale := &fakeSGLang{answer: func(int64) string { return sglangOK("3") }}
	current := &fakeSGLang{answer: func(int64) string { return sglangOK("4") }}
	ss, cs := httptest.NewServer(stale), httptest.NewServer(current)
	defer ss.Close()
	defer cs.Close()
	s := newSampler(t, []string{ss.URL, cs.URL}, func(c *openai.Config) {
		c.API = openai.APISGLangGenerate
		c.WeightVersion = func(int) string { return "4" }
	})
	for range 2 {
		gens, err := s.Generate(context.Background(), []lm.GenerateRequest{sgReq})
		require.NoError(t, err)
		assert.Equal(t, "4", gens[0].WeightVersion)
	}
	only := newSampler(t, []string{ss.URL}, func(c *openai.Config) {
		c.API = openai.APISGLangGenerate
		c.WeightVersion = func(int) string { return "4" }
		c.MaxRetries = -1
	})
	_, err := only.Generate(context.Background(), []lm.GenerateRequest{sgReq})
	require.ErrorIs(t, err, openai.ErrWeightVersion)
	assert.ErrorContains(t, err, `POST `+ss.URL+`/generate: weight_version "3", want "4"`)
}

func TestSGLangConfigErrors(t *testing.T) {
	for _, cfg := range []openai.Config{
		{BaseURLs: []string{"http://x"}, API: "sglang"},
		{BaseURLs: []string{"localhost:30000"}, API: openai.APISGLangGenerate},
		{BaseURLs: []string{"http://x"}, API: openai.APISGLangGenerate, LogprobsMode: "raw_logits"},
	} {
		_, err := openai.New(cfg)
		assert.ErrorIs(t, err, openai.ErrConfig, "%+v", cfg)
	}
}
