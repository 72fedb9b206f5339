package openai

import (
	"encoding/json"
	"testing"

	"github.com/agentrl/agentrl/lm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sglang builds an SGLang /generate answer for one prompt: output_ids
// ids, then meta_info with the given finish_reason and extra fields.
func sglang(ids, finish, meta string) []byte {
	return []byte(`{"text":"...","output_ids":` + ids + `,"meta_info":{"id":"9f2c","finish_reason":` + finish +
		`,"prompt_tokens":5,"weight_version":"default","completion_tokens":3,"cached_tokens":2,"e2e_latency":0.1` + meta + `}}`)
}

// sgLP3 is meta_info.output_token_logprobs for the tokens 11, 22, 151645
// as SGLang writes it without return_text_in_logprobs: [logprob, id, null].
const sgLP3 = `,"output_token_logprobs":[[-0.5,11,null],[-1.25,22,null],[0.0,151645,null]]`

const sgIDs3 = `[11,22,151645]`

func TestDecodeGenerate(t *testing.T) {
	logp := lm.SampleParams{Logprobs: true, Temperature: 1}
	lps := []float32{-0.5, -1.25, 0}
	toks := []int{11, 22, 151645}
	stopped := func(g lm.Generation) lm.Generation {
		// What every "length" case below shares: the tokens, 2 cached
		// prompt tokens and SGLang's default weight version "default".
		g.Tokens, g.FinishReason, g.CachedTokens, g.WeightVersion = toks, lm.FinishLength, 2, "default"
		return g
	}
	length := `{"type":"length","length":3}`
	cases := []struct {
		name   string
		body   []byte
		params lm.SampleParams
		mode   LogprobsMode
		want   lm.Generation
		err    string
		is     error
	}{
		{
			// SGLang reports an end-of-sequence token as the matched id,
			// the last of output_ids.
			name: "eos: stop matched the last id", body: sglang(sgIDs3, `{"type":"stop","matched":151645}`, sgLP3), params: logp,
			want: lm.Generation{Tokens: toks, LogProbs: lps, RawLogProbs: lps, FinishReason: lm.FinishStopToken, StopToken: 151645,
				CachedTokens: 2, WeightVersion: "default"},
		},
		{
			name: "stop with matched null: the last token", body: sglang(sgIDs3, `{"type":"stop","matched":null}`, sgLP3),
			want: lm.Generation{Tokens: toks, FinishReason: lm.FinishStopToken, StopToken: 151645, CachedTokens: 2, WeightVersion: "default"},
		},
		{
			name: "stop string", body: sglang(sgIDs3, `{"type":"stop","matched":"</tool_call>"}`, sgLP3),
			params: lm.SampleParams{Stop: []string{"\n\n", "</tool_call>"}},
			want: lm.Generation{Tokens: toks, FinishReason: lm.FinishStop, StopString: "</tool_call>", CachedTokens: 2,
				WeightVersion: "default"},
		},
		{name: "length", body: sglang(sgIDs3, length, sgLP3), want: stopped(lm.Generation{})},
		{
			name: "raw mode, temperature 0.7: sampling values unknown", body: sglang(sgIDs3, length, sgLP3),
			params: lm.SampleParams{Logprobs: true, Temperature: 0.7}, mode: RawLogprobs,
			want: stopped(lm.Generation{RawLogProbs: lps}),
		},
		{
			name: "processed mode (package serve)", body: sglang(sgIDs3, length, sgLP3), mode: ProcessedLogprobs,
			params: lm.SampleParams{Logprobs: true, Temperature: 0.7, TopP: 0.9},
			want:   stopped(lm.Generation{LogProbs: lps}),
		},
		{
			// log softmax(logits/0.7) with nothing truncated is the
			// sampling distribution, not the raw one.
			name: "scaled mode, temperature 0.7, no truncation", body: sglang(sgIDs3, length, sgLP3), mode: ScaledLogprobs,
			params: lm.SampleParams{Logprobs: true, Temperature: 0.7, TopP: 1, TopK: -1},
			want:   stopped(lm.Generation{LogProbs: lps}),
		},
		{
			name: "scaled mode, temperature 1, no truncation: both", body: sglang(sgIDs3, length, sgLP3), mode: ScaledLogprobs,
			params: logp, want: stopped(lm.Generation{LogProbs: lps, RawLogProbs: lps}),
		},
		{
			// Greedy: SGLang returns log softmax of the unprocessed logits.
			name: "scaled mode, greedy: raw", body: sglang(sgIDs3, length, sgLP3), mode: ScaledLogprobs,
			params: lm.SampleParams{Logprobs: true}, want: stopped(lm.Generation{RawLogProbs: lps}),
		},
		{
			name: "scaled mode, temperature 0.7 and top-p: neither", body: sglang(sgIDs3, length, sgLP3), mode: ScaledLogprobs,
			params: lm.SampleParams{Logprobs: true, Temperature: 0.7, TopP: 0.9}, want: stopped(lm.Generation{}),
		},
		{
			name: "scaled mode, temperature 1 and top-k: neither", body: sglang(sgIDs3, length, sgLP3), mode: ScaledLogprobs,
			params: lm.SampleParams{Logprobs: true, Temperature: 1, TopK: 20}, want: stopped(lm.Generation{}),
		},
		{
			name: "no output_ids (older SGLang): ids from the log-probs", body: []byte(`{"text":"ab","meta_info":{"finish_reason":` + length + sgLP3 + `}}`),
			params: logp, want: lm.Generation{Tokens: toks, LogProbs: lps, RawLogProbs: lps, FinishReason: lm.FinishLength},
		},
		{
			name: "no log-probs, none asked for", body: sglang(`[5,6]`, length, ""),
			want: lm.Generation{Tokens: []int{5, 6}, FinishReason: lm.FinishLength, CachedTokens: 2, WeightVersion: "default"},
		},
		{
			name: "token texts in the log-probs", body: sglang(`[5]`, length, `,"output_token_logprobs":[[-2,5,"Hi"]]`), params: logp,
			want: lm.Generation{Tokens: []int{5}, LogProbs: []float32{-2}, RawLogProbs: []float32{-2}, FinishReason: lm.FinishLength,
				CachedTokens: 2, WeightVersion: "default"},
		},
		{
			name: "empty generation", body: []byte(`{"output_ids":[],"meta_info":{"finish_reason":{"type":"length","length":0},"output_token_logprobs":[]}}`),
			params: logp, want: lm.Generation{Tokens: []int{}, LogProbs: []float32{}, RawLogProbs: []float32{}, FinishReason: lm.FinishLength},
		},
		{
			name: "weight_version a number", body: []byte(`{"output_ids":[5],"meta_info":{"finish_reason":` + length + `,"weight_version":12}}`),
			want: lm.Generation{Tokens: []int{5}, FinishReason: lm.FinishLength, WeightVersion: "12"},
		},
		{
			name: "weight_version null: unknown", body: []byte(`{"output_ids":[5],"meta_info":{"finish_reason":` + length + `,"weight_version":null}}`),
			want: lm.Generation{Tokens: []int{5}, FinishReason: lm.FinishLength},
		},
		{
			// The tokens generated before the abort, as SGLang returns
			// them (slime's partial rollouts keep them).
			name: "abort: the partial output", body: sglang(sgIDs3, `{"type":"abort","message":"Aborted","status_code":null,"err_type":null}`, sgLP3),
			params: logp, want: lm.Generation{Tokens: []int{11, 22, 151645}, LogProbs: []float32{-0.5, -1.25, 0}, RawLogProbs: []float32{-0.5, -1.25, 0},
				FinishReason: lm.FinishAbort, CachedTokens: 2, WeightVersion: "default"},
		},
		{
			name: "abort before the first token", body: sglang(`[]`, `{"type":"abort","message":"Aborted","status_code":null,"err_type":null}`, ""),
			want: lm.Generation{Tokens: []int{}, FinishReason: lm.FinishAbort, CachedTokens: 2, WeightVersion: "default"},
		},
		{name: "not json", body: []byte(`<html>`), err: "want a JSON object"},
		{name: "a batch answer", body: []byte(`[{"output_ids":[1]}]`), err: "want a JSON object"},
		{name: "broken json", body: []byte(`{"output_ids":[1`), err: "unexpected end of JSON"},
		{name: "no meta_info", body: []byte(`{"text":"x","output_ids":[1]}`), err: "no meta_info"},
		{name: "unfinished", body: sglang(sgIDs3, `null`, sgLP3), err: "no meta_info.finish_reason"},
		{name: "finish_reason a string", body: sglang(sgIDs3, `"stop"`, sgLP3), err: "is not an object with a type"},
		{name: "unknown finish type", body: sglang(sgIDs3, `{"type":"eos"}`, sgLP3), err: `finish_reason type "eos"`},
		{name: "no token ids", body: sglang(`null`, length, ""), err: "no token ids"},
		{name: "ids disagree", body: sglang(`[11,23,151645]`, length, sgLP3), err: "token 1: output_ids has 23, meta_info.output_token_logprobs 22"},
		{name: "fewer log-probs than ids", body: sglang(`[11,22,151645,9]`, length, sgLP3), err: "4 output_ids but 3 meta_info.output_token_logprobs"},
		{name: "negative id", body: sglang(`[-3]`, length, ""), err: "token 0 has id -3"},
		{name: "id not an integer", body: sglang(`[1.5]`, length, ""), err: "cannot unmarshal number 1.5"},
		{name: "missing log-probs", body: sglang(`[11,22]`, length, ""), params: logp, err: "0 meta_info.output_token_logprobs for 2 tokens"},
		{name: "null log-prob", body: sglang(`[11]`, length, `,"output_token_logprobs":[[null,11,null]]`), params: logp, err: "output_token_logprobs[0] is null"},
		{name: "positive log-prob", body: sglang(`[11]`, length, `,"output_token_logprobs":[[0.5,11,null]]`), params: logp, err: "output_token_logprobs[0] is 0.5"},
		{name: "short log-prob entry", body: sglang(`[11]`, length, `,"output_token_logprobs":[[-1]]`), err: "got 1 items"},
		{name: "log-prob entry not a list", body: sglang(`[11]`, length, `,"output_token_logprobs":[{"logprob":-1}]`), err: "want [logprob, token_id, text]"},
		{name: "log-prob id null", body: sglang(`[11]`, length, `,"output_token_logprobs":[[-1,null,null]]`), err: "token id null is not an integer"},
		{name: "log-prob a string", body: sglang(`[11]`, length, `,"output_token_logprobs":[["-1",11,null]]`), err: `logprob "-1" is not a number`},
		{name: "matched is not the last token", body: sglang(sgIDs3, `{"type":"stop","matched":22}`, sgLP3), err: "stopped on token 22, which is not the last token"},
		{name: "matched a stop string not asked for", body: sglang(sgIDs3, `{"type":"stop","matched":"NaN happened"}`, sgLP3), err: `stopped on "NaN happened"`},
		{name: "matched a list", body: sglang(sgIDs3, `{"type":"stop","matched":[151645]}`, sgLP3), err: "neither a token id nor a string"},
		{name: "eos without tokens", body: sglang(`[]`, `{"type":"stop","matched":null}`, ""), err: "no tokens"},
		{name: "weight_version a list", body: sglang(`[5]`, length, `,"weight_version":[1]`), err: "meta_info.weight_version"},
		{name: "negative cached_tokens", body: []byte(`{"output_ids":[5],"meta_info":{"finish_reason":` + length + `,"cached_tokens":-1}}`), err: "cached_tokens -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mode := tc.mode
			if mode == "" {
				mode = RawLogprobs
			}
			g, err := decodeGenerate(tc.body, tc.params, mode)
			if tc.err != "" {
				is := tc.is
				if is == nil {
					is = ErrBadResponse
				}
				require.ErrorIs(t, err, is)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, g)
		})
	}
	// An abort is the server's doing, not a malformed answer.
	g, err := decodeGenerate([]byte(`{"meta_info":{"finish_reason":{"type":"abort"}}}`), logp, RawLogprobs)
	require.NoError(t, err)
	assert.Equal(t, lm.Generation{Tokens: []int{}, LogProbs: []float32{}, RawLogProbs: []float32{}, FinishReason: lm.FinishAbort}, g)
}

func TestNewGenerateRequest(t *testing.T) {
	seed := uint64(1<<64 - 1)
	r := newGenerateRequest([]int{1, 2, 3}, lm.SampleParams{
		Temperature: 1e-6, Seed: &seed, Stop: []string{"</tool_call>", ""}, StopTokenIDs: []int{151645}, Logprobs: true,
	}, 92)
	got, err := json.Marshal(r)
	require.NoError(t, err)
	// Greedy below 1e-5 becomes 0; disabled top-p and top-k become
	// SGLang's 1 and -1 (it refuses top_k 0); max_new_tokens is the bound
	// the Sampler worked out, always a number (an absent field would be
	// SGLang's 128); the seed keeps its 64 bits as an int64 (2^64-1 reads
	// -1); empty stop strings go; log-probs are asked for output tokens
	// only (-1).
	assert.JSONEq(t, `{"input_ids":[1,2,3],"sampling_params":{"max_new_tokens":92,"temperature":0,"top_p":1,"top_k":-1,"min_p":0,
		"stop":["</tool_call>"],"stop_token_ids":[151645],"sampling_seed":-1,"skip_special_tokens":false,"spaces_between_special_tokens":false,
		"no_stop_trim":true},"return_logprob":true,"logprob_start_len":-1,"top_logprobs_num":0,"stream":false}`, string(got))

	r = newGenerateRequest([]int{7}, lm.SampleParams{Temperature: 0.6, TopP: 0.95, TopK: 20, MinP: 0.05, MaxNewTokens: 512}, 512)
	got, err = json.Marshal(r)
	require.NoError(t, err)
	// Without a seed no sampling_seed is sent (SGLang releases without
	// the field refuse it); log-probs are always asked for, as their ids
	// check output_ids.
	assert.JSONEq(t, `{"input_ids":[7],"sampling_params":{"max_new_tokens":512,"temperature":0.6,"top_p":0.95,"top_k":20,"min_p":0.05,
		"skip_special_tokens":false,"spaces_between_special_tokens":false,"no_stop_trim":true},"return_logprob":true,
		"logprob_start_len":-1,"top_logprobs_num":0,"stream":false}`, string(got))
}

// TestFileLogprobs pins where each mode files the server's values, by
// the request's sampling: derived from what each mode's values are (see
// LogprobsMode) — raw values are the sampling ones only at temperature 1
// with nothing truncated, scaled ones (SGLang's) are the sampling ones
// whenever nothing is truncated and decoding is not greedy, and the raw
// ones at temperature 1 or greedy.
func TestFileLogprobs(t *testing.T) {
	lp := []float32{-1}
	type filed struct{ logp, raw bool }
	cases := []struct {
		name string
		p    lm.SampleParams
		want map[LogprobsMode]filed
	}{
		{"temperature 1", lm.SampleParams{Temperature: 1},
			map[LogprobsMode]filed{RawLogprobs: {true, true}, ProcessedLogprobs: {true, false}, ScaledLogprobs: {true, true}}},
		{"temperature 1, top-p 1 and top-k -1 (off)", lm.SampleParams{Temperature: 1, TopP: 1, TopK: -1},
			map[LogprobsMode]filed{RawLogprobs: {true, true}, ProcessedLogprobs: {true, false}, ScaledLogprobs: {true, true}}},
		{"temperature 0.6", lm.SampleParams{Temperature: 0.6},
			map[LogprobsMode]filed{RawLogprobs: {false, true}, ProcessedLogprobs: {true, false}, ScaledLogprobs: {true, false}}},
		{"temperature 0.6, min-p", lm.SampleParams{Temperature: 0.6, MinP: 0.1},
			map[LogprobsMode]filed{RawLogprobs: {false, true}, ProcessedLogprobs: {true, false}, ScaledLogprobs: {false, false}}},
		{"temperature 1, top-p 0.9", lm.SampleParams{Temperature: 1, TopP: 0.9},
			map[LogprobsMode]filed{RawLogprobs: {false, true}, ProcessedLogprobs: {true, false}, ScaledLogprobs: {false, false}}},
		{"greedy", lm.SampleParams{Temperature: 0},
			map[LogprobsMode]filed{RawLogprobs: {false, true}, ProcessedLogprobs: {true, false}, ScaledLogprobs: {false, true}}},
		{"greedy below 1e-5, with top-k", lm.SampleParams{Temperature: 9e-6, TopK: 5},
			map[LogprobsMode]filed{RawLogprobs: {false, true}, ProcessedLogprobs: {true, false}, ScaledLogprobs: {false, true}}},
	}
	for _, c := range cases {
		for mode, want := range c.want {
			var g lm.Generation
			fileLogprobs(&g, lp, c.p, mode)
			assert.Equal(t, want, filed{g.LogProbs != nil, g.RawLogProbs != nil}, "%s, %s", c.name, mode)
		}
	}
}

func FuzzDecodeGenerate(f *testing.F) {
	f.Add(sglang(sgIDs3, `{"type":"stop","matched":151645}`, sgLP3), true, uint8(0))
	f.Add(sglang(sgIDs3, `{"type":"stop","matched":"x"}`, sgLP3), false, uint8(1))
	f.Add(sglang(`[5,6]`, `{"type":"length","length":2}`, ""), false, uint8(2))
	f.Add([]byte(`{"meta_info":{"finish_reason":{"type":"length"},"output_token_logprobs":[[-1e309,1,null]]}}`), true, uint8(2))
	f.Add([]byte(`{"output_ids":[],"meta_info":{"finish_reason":{"type":"abort","message":"x"}}}`), true, uint8(0))
	modes := []LogprobsMode{RawLogprobs, ProcessedLogprobs, ScaledLogprobs}
	f.Fuzz(func(t *testing.T, body []byte, logprobs bool, m uint8) {
		p := lm.SampleParams{Logprobs: logprobs, Temperature: 1, Stop: []string{"x"}}
		g, err := decodeGenerate(body, p, modes[int(m)%len(modes)])
		if err != nil {
			return
		}
		for i, id := range g.Tokens {
			if id < 0 {
				t.Fatalf("token %d: id %d", i, id)
			}
		}
		for _, lps := range [][]float32{g.LogProbs, g.RawLogProbs} {
			if lps != nil && len(lps) != len(g.Tokens) {
				t.Fatalf("%d log-probs for %d tokens", len(lps), len(g.Tokens))
			}
			for _, lp := range lps {
				if lp != lp || lp > 0 {
					t.Fatalf("log-prob %v", lp)
				}
			}
		}
		switch g.FinishReason {
		case lm.FinishLength, lm.FinishAbort:
		case lm.FinishStop:
			if g.StopString != "x" {
				t.Fatalf("stop string %q was not asked for", g.StopString)
			}
		case lm.FinishStopToken:
			if len(g.Tokens) == 0 || g.Tokens[len(g.Tokens)-1] != g.StopToken {
				t.Fatalf("stop token %d is not the last of %v", g.StopToken, g.Tokens)
			}
		default:
			t.Fatalf("finish reason %q", g.FinishReason)
		}
		if g.CachedTokens < 0 {
			t.Fatalf("cached tokens %d", g.CachedTokens)
		}
	})
}
