package serve

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/agentrl/agentrl/lm"
)

// FuzzDecodeCompletion feeds arbitrary bodies to the /v1/completions
// decoder: it must never panic, every refusal must be a 4xx with a
// message, and what it accepts must be a batch that Model.Generate takes
// (non-empty prompts of known ids that leave room in the context, valid
// sampling parameters, prompts × n requests).
func FuzzDecodeCompletion(f *testing.F) {
	for _, s := range []string{
		`{"prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0, "logprobs": 1, "return_token_ids": true}`,
		`{"prompt": [[1], [2, 3]], "n": 2, "seed": -5, "stop": ["<1>"], "stop_token_ids": [7]}`,
		`{"prompt": "hello", "top_p": 0.5, "top_k": -1, "min_p": 0.1, "stop": "x"}`,
		`{"prompt": ["a", ""], "model": "agentrl"}`,
		`{"prompt": [257, 258], "max_tokens": 95}`,
		`{"prompt": [1], "n": 1e3, "seed": 9223372036854775807}`,
		`{"prompt": [1], "stream": false, "echo": false, "best_of": 1, "repetition_penalty": 1}`,
		`{"prompt": [[]]}`, `[]`, `{`, `null`, `{"prompt": [1.0]}`,
		`{"prompt": [1], "logprobs": 20}`, `{"prompt": [1], "logprobs": -1}`, `{"prompt": [1], "logprobs": 0, "max_tokens": null}`,
	} {
		f.Add([]byte(s))
	}
	lim := limits{vocab: testVocab, maxLen: testMaxLen, encode: byteEncode, decode: idDecode}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodeCompletion(body, lim)
		if err != nil {
			if err.Status < 400 || err.Status >= 500 || err.Message == "" || http.StatusText(err.Status) == "" {
				t.Fatalf("refusal %d %q for %q", err.Status, err.Message, body)
			}
			return
		}
		if p.n < 1 || len(p.prompts) == 0 || len(p.reqs) != len(p.prompts)*p.n || len(p.reqs) > maxChoices {
			t.Fatalf("%d prompts × n %d gave %d requests for %q", len(p.prompts), p.n, len(p.reqs), body)
		}
		for i, r := range p.reqs {
			if len(r.Prompt) == 0 || len(r.Prompt) >= testMaxLen {
				t.Fatalf("request %d: prompt of %d tokens accepted from %q", i, len(r.Prompt), body)
			}
			for _, id := range r.Prompt {
				if id < 0 || id >= testVocab {
					t.Fatalf("request %d: token %d accepted from %q", i, id, body)
				}
			}
			if err := lm.CheckSampleParams(r.Params); err != nil {
				t.Fatalf("request %d: %v, from %q", i, err, body)
			}
			if r.Params.MaxNewTokens < 1 || len(r.Prompt)+r.Params.MaxNewTokens > testMaxLen {
				t.Fatalf("request %d: max_tokens %d unbounded or past the context, from %q", i, r.Params.MaxNewTokens, body)
			}
			if r.Params.TopLogprobs > maxLogprobs || r.Params.TopLogprobs != p.topLogprobs {
				t.Fatalf("request %d: %d top log-probs (plan %d), from %q", i, r.Params.TopLogprobs, p.topLogprobs, body)
			}
			for _, s := range r.Params.Stop {
				if s == "" {
					t.Fatalf("request %d: empty stop string accepted from %q", i, body)
				}
			}
		}
	})
}

// FuzzDecodeGenerate feeds arbitrary bodies to the /generate decoder: it
// must never panic, every refusal must be a 4xx with a message, and what
// it accepts must be a batch that Model.Generate takes (non-empty prompts
// of known ids that leave room in the context, valid sampling parameters,
// a new-token bound within the context) with one id per prompt.
func FuzzDecodeGenerate(f *testing.F) {
	for _, s := range []string{
		`{"input_ids": [1, 2, 3], "return_logprob": true, "sampling_params": {"temperature": 0, "max_new_tokens": 4}}`,
		`{"input_ids": [[1], [2, 3]], "rid": "r", "sampling_params": {"sampling_seed": -5, "stop": ["<1>"], "stop_token_ids": [7], "n": 1}}`,
		`{"text": "hello", "sampling_params": {"top_p": 0.5, "top_k": -1, "min_p": 0.1, "stop": "x", "no_stop_trim": true}}`,
		`{"text": ["a", ""], "rid": ["x", "y"], "logprob_start_len": -1, "top_logprobs_num": 0}`,
		`{"input_ids": [257, 258], "sampling_params": {"max_new_tokens": null}}`,
		`{"input_ids": [1], "sampling_params": {"max_new_tokens": 1000, "skip_special_tokens": false, "frequency_penalty": 0}}`,
		`{"input_ids": [1], "sampling_params": {"top_k": 0}}`, `{"input_ids": [1], "sampling_params": {"bogus": 1}}`,
		`{"input_ids": []}`, `[]`, `{`, `null`, `{"input_ids": [1.0]}`, `{"input_ids": [1], "text": "a"}`,
		`{"input_ids": [1], "lora_path": "pol-v00000003"}`, `{"input_ids": [[1], [2]], "lora_path": ["a", "a"]}`,
		`{"input_ids": [[1], [2]], "lora_path": [null, "a"]}`, `{"input_ids": [1], "lora_path": 3}`,
	} {
		f.Add([]byte(s))
	}
	lim := limits{vocab: testVocab, maxLen: testMaxLen, encode: byteEncode, decode: idDecode}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodeGenerate(body, lim)
		if err != nil {
			if err.Status < 400 || err.Status >= 500 || err.Message == "" || http.StatusText(err.Status) == "" {
				t.Fatalf("refusal %d %q for %q", err.Status, err.Message, body)
			}
			return
		}
		if len(p.reqs) == 0 || len(p.reqs) > maxChoices || len(p.rids) != len(p.reqs) || (p.single && len(p.reqs) != 1) {
			t.Fatalf("%d requests, %d ids, single %v from %q", len(p.reqs), len(p.rids), p.single, body)
		}
		for i, r := range p.reqs {
			if len(r.Prompt) == 0 || len(r.Prompt) >= testMaxLen {
				t.Fatalf("request %d: prompt of %d tokens accepted from %q", i, len(r.Prompt), body)
			}
			for _, id := range r.Prompt {
				if id < 0 || id >= testVocab {
					t.Fatalf("request %d: token %d accepted from %q", i, id, body)
				}
			}
			if err := lm.CheckSampleParams(r.Params); err != nil {
				t.Fatalf("request %d: %v, from %q", i, err, body)
			}
			if n := r.Params.MaxNewTokens; n < 1 || len(r.Prompt)+n > testMaxLen {
				t.Fatalf("request %d: max_new_tokens %d for a prompt of %d, from %q", i, n, len(r.Prompt), body)
			}
			if r.Params.Logprobs != p.logprobs {
				t.Fatalf("request %d: logprobs %v, want %v", i, r.Params.Logprobs, p.logprobs)
			}
			for _, s := range r.Params.Stop {
				if s == "" {
					t.Fatalf("request %d: empty stop string accepted from %q", i, body)
				}
			}
		}
	})
}

// FuzzDecodeAdapterRequests feeds arbitrary bodies to the four adapter
// endpoints' decoders: none may panic, every refusal is a 4xx with a
// message, and vLLM's accepts only a non-empty name (and folder, to
// load), as its _check_load_lora_adapter_request does.
func FuzzDecodeAdapterRequests(f *testing.F) {
	for _, s := range []string{
		`{"lora_name": "a", "lora_path": "/x", "load_inplace": true}`, `{"lora_name": "a", "lora_int_id": 3}`,
		`{"lora_name": "a", "lora_path": "/x", "pinned": true, "lora_id": "u"}`, `{"lora_name": ""}`,
		`{"lora_name": null, "lora_path": 5}`, `{}`, `[]`, `{`, `null`, `"a"`, `{"lora_name": "\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for i, decode := range []func([]byte) (adapterRequest, *apiError){decodeVLLMLoad, decodeVLLMUnload, decodeSGLangLoad, decodeSGLangUnload} {
			req, err := decode(body)
			if err != nil {
				if err.Status < 400 || err.Status >= 500 || err.Message == "" || http.StatusText(err.Status) == "" {
					t.Fatalf("decoder %d: refusal %d %q for %q", i, err.Status, err.Message, body)
				}
				continue
			}
			if (i == 0 && (req.name == "" || req.path == "")) || (i == 1 && req.name == "") {
				t.Fatalf("decoder %d: accepted %+v from %q", i, req, body)
			}
			if i != 0 && req.inplace {
				t.Fatalf("decoder %d: load_inplace from %q", i, body)
			}
		}
	})
}

// FuzzParseLoraPath feeds arbitrary lora_path values for n prompts: no
// panic, refusals are 400s with a message, and an accepted value names
// one adapter (or none) for the whole request.
func FuzzParseLoraPath(f *testing.F) {
	for _, s := range []string{`"a"`, `null`, `""`, `["a", "a"]`, `[null, null]`, `["a", null]`, `["a"]`, `5`, `[5]`, `{}`, `[`} {
		f.Add([]byte(s), 2)
	}
	f.Add([]byte(`[]`), 0)
	f.Fuzz(func(t *testing.T, raw []byte, n int) {
		name, err := parseLoraPath(raw, n)
		if err != nil {
			if err.Status != http.StatusBadRequest || err.Message == "" {
				t.Fatalf("refusal %d %q for %q", err.Status, err.Message, raw)
			}
			return
		}
		trimmed := bytes.TrimSpace(raw)
		if len(trimmed) > 0 && trimmed[0] == '[' && n < 1 {
			t.Fatalf("a list accepted for %d prompts: %q gave %q", n, raw, name)
		}
	})
}
