package openai

import (
	"encoding/json"
	"testing"

	"github.com/agentrl/agentrl/lm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// choice builds a vLLM completion response body with one choice.
func choice(fields string) []byte {
	return []byte(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"..."` + fields + `}],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3}}`)
}

const lp3 = `,"logprobs":{"text_offset":[0,1,2],"token_logprobs":[-0.5,-1.25,0.0],"tokens":["token_id:11","token_id:22","token_id:151645"],"top_logprobs":[{"token_id:11":-0.5},{"token_id:22":-1.25},{"token_id:151645":0.0}]}`

func TestDecodeCompletion(t *testing.T) {
	logp := lm.SampleParams{Logprobs: true, Temperature: 1}
	cases := []struct {
		name   string
		body   []byte
		params lm.SampleParams
		mode   LogprobsMode
		want   lm.Generation
		err    string
	}{
		{
			name: "eos: stop with null stop_reason", body: choice(lp3 + `,"finish_reason":"stop","stop_reason":null`), params: logp,
			want: lm.Generation{Tokens: []int{11, 22, 151645}, LogProbs: []float32{-0.5, -1.25, 0}, RawLogProbs: []float32{-0.5, -1.25, 0},
				FinishReason: lm.FinishStopToken, StopToken: 151645},
		},
		{
			// vLLM's abort (a pause or weight update in abort mode):
			// the tokens generated until then.
			name: "abort: the partial output", body: choice(lp3 + `,"finish_reason":"abort"`), params: logp,
			want: lm.Generation{Tokens: []int{11, 22, 151645}, LogProbs: []float32{-0.5, -1.25, 0}, RawLogProbs: []float32{-0.5, -1.25, 0},
				FinishReason: lm.FinishAbort},
		},
		{
			name: "stop token id", body: choice(lp3 + `,"finish_reason":"stop","stop_reason":151645`), params: lm.SampleParams{},
			want: lm.Generation{Tokens: []int{11, 22, 151645}, FinishReason: lm.FinishStopToken, StopToken: 151645},
		},
		{
			name: "stop string", body: choice(lp3 + `,"finish_reason":"stop","stop_reason":"</tool_call>"`), params: lm.SampleParams{},
			want: lm.Generation{Tokens: []int{11, 22, 151645}, FinishReason: lm.FinishStop, StopString: "</tool_call>"},
		},
		{
			name: "length", body: choice(lp3 + `,"finish_reason":"length","stop_reason":null`), params: lm.SampleParams{},
			want: lm.Generation{Tokens: []int{11, 22, 151645}, FinishReason: lm.FinishLength},
		},
		{
			name: "raw logprobs with temperature 0.7: sampling values unknown", body: choice(lp3 + `,"finish_reason":"length"`),
			params: lm.SampleParams{Logprobs: true, Temperature: 0.7},
			want:   lm.Generation{Tokens: []int{11, 22, 151645}, RawLogProbs: []float32{-0.5, -1.25, 0}, FinishReason: lm.FinishLength},
		},
		{
			name: "processed logprobs", body: choice(lp3 + `,"finish_reason":"length"`), mode: ProcessedLogprobs,
			params: lm.SampleParams{Logprobs: true, Temperature: 0.7, TopP: 0.9},
			want:   lm.Generation{Tokens: []int{11, 22, 151645}, LogProbs: []float32{-0.5, -1.25, 0}, FinishReason: lm.FinishLength},
		},
		{
			name: "token_ids field (vLLM >= 0.10.2) without logprobs",
			body: []byte(`{"choices":[{"index":0,"text":"ab","token_ids":[5,6],"finish_reason":"length"}],"usage":{"prompt_tokens":4,"prompt_tokens_details":{"cached_tokens":3}}}`),
			want: lm.Generation{Tokens: []int{5, 6}, FinishReason: lm.FinishLength, CachedTokens: 3},
		},
		{
			name: "empty generation", body: []byte(`{"choices":[{"index":0,"text":"","logprobs":{"tokens":[],"token_logprobs":[]},"finish_reason":"length"}]}`),
			params: logp,
			want:   lm.Generation{Tokens: []int{}, LogProbs: []float32{}, RawLogProbs: []float32{}, FinishReason: lm.FinishLength},
		},
		{
			name: "SGLang's metadata.weight_version, a string",
			body: []byte(`{"choices":[{"index":0,"token_ids":[5],"finish_reason":"length"}],"metadata":{"weight_version":"v7"}}`),
			want: lm.Generation{Tokens: []int{5}, FinishReason: lm.FinishLength, WeightVersion: "v7"},
		},
		{
			name: "weight_version as a number",
			body: []byte(`{"choices":[{"index":0,"token_ids":[5],"finish_reason":"length"}],"metadata":{"weight_version":12}}`),
			want: lm.Generation{Tokens: []int{5}, FinishReason: lm.FinishLength, WeightVersion: "12"},
		},
		{
			name: "null weight_version: unknown",
			body: []byte(`{"choices":[{"index":0,"token_ids":[5],"finish_reason":"length"}],"metadata":{"weight_version":null}}`),
			want: lm.Generation{Tokens: []int{5}, FinishReason: lm.FinishLength},
		},
		{name: "weight_version a list", body: []byte(`{"choices":[{"index":0,"token_ids":[5],"finish_reason":"length"}],"metadata":{"weight_version":[1]}}`), err: "metadata.weight_version"},
		{name: "not json", body: []byte(`<html>`), err: "invalid character"},
		{name: "no choices", body: []byte(`{"choices":[]}`), err: "0 choices, want 1"},
		{name: "no token ids", body: choice(`,"finish_reason":"stop"`), err: "no token ids"},
		{name: "token text instead of ids", body: choice(`,"logprobs":{"tokens":["Hello"],"token_logprobs":[-1]},"finish_reason":"length"`), err: `logprobs.tokens[0]: "Hello" is not "token_id:<id>"`},
		{name: "negative id", body: choice(`,"logprobs":{"tokens":["token_id:-3"],"token_logprobs":[-1]},"finish_reason":"length"`), err: "bad token id"},
		{name: "ids disagree", body: choice(`,"token_ids":[1,2],"logprobs":{"tokens":["token_id:1","token_id:3"],"token_logprobs":[-1,-1]},"finish_reason":"length"`), err: "disagree"},
		{name: "missing logprob", body: choice(`,"logprobs":{"tokens":["token_id:1","token_id:3"],"token_logprobs":[-1]},"finish_reason":"length"`), params: logp, err: "want 2 token log-probs"},
		{name: "null logprob", body: choice(`,"logprobs":{"tokens":["token_id:1"],"token_logprobs":[null]},"finish_reason":"length"`), params: logp, err: "token_logprobs[0] is null"},
		{name: "positive logprob", body: choice(`,"logprobs":{"tokens":["token_id:1"],"token_logprobs":[0.5]},"finish_reason":"length"`), params: logp, err: "token_logprobs[0] is 0.5"},
		{name: "no finish reason", body: choice(lp3 + `,"finish_reason":null`), err: "no finish_reason"},
		{name: "eos without tokens", body: choice(`,"token_ids":[],"finish_reason":"stop"`), err: "no tokens"},
		{name: "bad stop_reason", body: choice(lp3 + `,"finish_reason":"stop","stop_reason":[1]`), err: "neither a token id nor a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mode := tc.mode
			if mode == "" {
				mode = RawLogprobs
			}
			g, err := decodeCompletion(tc.body, tc.params, mode)
			if tc.err != "" {
				require.ErrorIs(t, err, ErrBadResponse)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, g)
		})
	}
}

func TestNewCompletionRequest(t *testing.T) {
	seed := uint64(1<<64 - 1)
	r := newCompletionRequest("qwen", []int{1, 2, 3}, lm.SampleParams{
		Temperature: 1e-6, Seed: &seed, Stop: []string{"</tool_call>", ""}, StopTokenIDs: []int{151645},
	}, 93)
	got, err := json.Marshal(r)
	require.NoError(t, err)
	// Greedy below 1e-5 becomes 0; disabled top-p and top-k become vLLM's
	// 1 and -1; max_tokens is the bound the Sampler worked out (for
	// MaxNewTokens 0, the room the context leaves), never null, which vLLM
	// reads as 16; the seed keeps its 64 bits as an int64; empty stop
	// strings go.
	assert.JSONEq(t, `{"model":"qwen","prompt":[1,2,3],"n":1,"max_tokens":93,"temperature":0,"top_p":1,"top_k":-1,"min_p":0,
		"seed":-1,"stop":["</tool_call>"],"stop_token_ids":[151645],"logprobs":1,"return_tokens_as_token_ids":true,"return_token_ids":true,
		"include_stop_str_in_output":true,"skip_special_tokens":false,"spaces_between_special_tokens":false,"stream":false}`, string(got))

	r = newCompletionRequest("", []int{7}, lm.SampleParams{Temperature: 0.6, TopP: 0.95, TopK: 20, MinP: 0.05, MaxNewTokens: 512}, 512)
	got, err = json.Marshal(r)
	require.NoError(t, err)
	assert.JSONEq(t, `{"prompt":[7],"n":1,"max_tokens":512,"temperature":0.6,"top_p":0.95,"top_k":20,"min_p":0.05,"logprobs":1,
		"return_tokens_as_token_ids":true,"return_token_ids":true,"include_stop_str_in_output":true,"skip_special_tokens":false,
		"spaces_between_special_tokens":false,"stream":false}`, string(got))
}

func FuzzDecodeCompletion(f *testing.F) {
	f.Add(choice(lp3+`,"finish_reason":"stop","stop_reason":null`), true)
	f.Add(choice(lp3+`,"finish_reason":"stop","stop_reason":"x"`), false)
	f.Add([]byte(`{"choices":[{"token_ids":[5,6],"finish_reason":"length"}]}`), true)
	f.Add([]byte(`{"choices":[{"logprobs":{"tokens":["token_id:1"],"token_logprobs":[-1e309]},"finish_reason":"length"}]}`), true)
	f.Fuzz(func(t *testing.T, body []byte, logprobs bool) {
		for _, mode := range []LogprobsMode{RawLogprobs, ProcessedLogprobs} {
			g, err := decodeCompletion(body, lm.SampleParams{Logprobs: logprobs, Temperature: 1}, mode)
			if err != nil {
				continue
			}
			for i, id := range g.Tokens {
				if id < 0 {
					t.Fatalf("token %d: id %d", i, id)
				}
			}
			if logprobs && (len(g.LogProbs) != len(g.Tokens) && len(g.RawLogProbs) != len(g.Tokens)) {
				t.Fatalf("%d log-probs for %d tokens", len(g.LogProbs), len(g.Tokens))
			}
			for _, lp := range append(g.LogProbs, g.RawLogProbs...) {
				if lp != lp || lp > 0 {
					t.Fatalf("log-prob %v", lp)
				}
			}
			switch g.FinishReason {
			case lm.FinishLength, lm.FinishStop, lm.FinishStopToken, lm.FinishAbort:
			default:
				t.Fatalf("finish reason %q", g.FinishReason)
			}
		}
	})
}
