package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/agentrl/agentrl/lm"
)

// ErrAborted is wrapped by the error for a generation the server aborted
// (SGLang's finish_reason {"type": "abort"}, vLLM's "abort": a pause or a
// weight update in abort mode, an /abort_request) when Config.Partial is
// not set. It is tried again, on another server when there is one, like
// a 5xx answer.
var ErrAborted = errors.New("openai: generation aborted by the server")

// generateRequest is the body of SGLang's POST /generate for one prompt
// of token ids: the fields of GenerateReqInput
// (python/sglang/srt/managers/io_struct.py) that the Sampler sets.
type generateRequest struct {
	InputIDs       []int            `json:"input_ids"`
	SamplingParams generateSampling `json:"sampling_params"`
	// ReturnLogprob is always set: meta_info.output_token_logprobs also
	// carries the token ids, which are checked against output_ids.
	ReturnLogprob bool `json:"return_logprob"`
	// LogprobStartLen -1: log-probabilities of the output tokens only
	// (GenerateReqInput's default).
	LogprobStartLen int  `json:"logprob_start_len"`
	TopLogprobsNum  int  `json:"top_logprobs_num"`
	Stream          bool `json:"stream"`
	// LoraPath names the loaded LoRA adapter that generates (SGLang looks
	// it up by name in its LoRARegistry); empty is the base model.
	LoraPath string `json:"lora_path,omitempty"`
}

// generateSampling is SGLang's sampling_params
// (python/sglang/srt/sampling/sampling_params.py, SamplingParams).
type generateSampling struct {
	// MaxNewTokens is always a number (an absent field is SGLang's
	// default of 128): the Sampler's bound for the server.
	MaxNewTokens int      `json:"max_new_tokens"`
	Temperature  float64  `json:"temperature"`
	TopP         float64  `json:"top_p"`
	TopK         int      `json:"top_k"` // -1 disables; SGLang refuses 0
	MinP         float64  `json:"min_p"`
	Stop         []string `json:"stop,omitempty"`
	StopTokenIDs []int    `json:"stop_token_ids,omitempty"`
	// SamplingSeed is honoured by servers started with
	// --enable-deterministic-inference and ignored by others; it is sent
	// only when set, as SGLang releases before it refuse the field.
	SamplingSeed *int64 `json:"sampling_seed,omitempty"`
	// The text fields keep "text" whole; the Sampler reads token ids only.
	SkipSpecialTokens          bool `json:"skip_special_tokens"`
	SpacesBetweenSpecialTokens bool `json:"spaces_between_special_tokens"`
	NoStopTrim                 bool `json:"no_stop_trim"`
}

// newGenerateRequest maps policy parameters onto SGLang's, with the
// conventions of newCompletionRequest: greedy below
// lm.GreedyTemperature is temperature 0 (SGLang's own threshold,
// _SAMPLING_EPS, is 1e-6), disabled top-p is 1 and disabled top-k -1,
// empty stop strings are dropped and the 64 bits of the seed are kept as
// an int64; maxTokens (never 0) is max_new_tokens.
func newGenerateRequest(prompt []int, p lm.SampleParams, maxTokens int) generateRequest {
	r := generateRequest{
		InputIDs: prompt, ReturnLogprob: true, LogprobStartLen: -1,
		SamplingParams: generateSampling{
			MaxNewTokens: maxTokens,
			Temperature:  p.Temperature, TopP: p.TopP, TopK: p.TopK, MinP: p.MinP,
			StopTokenIDs: p.StopTokenIDs, NoStopTrim: true,
		},
	}
	sp := &r.SamplingParams
	for _, s := range p.Stop {
		if s != "" {
			sp.Stop = append(sp.Stop, s)
		}
	}
	if p.Temperature < lm.GreedyTemperature {
		sp.Temperature = 0
	}
	if p.TopP == 0 {
		sp.TopP = 1
	}
	if p.TopK == 0 {
		sp.TopK = -1
	}
	if p.Seed != nil {
		s := int64(*p.Seed)
		sp.SamplingSeed = &s
	}
	return r
}

// generateResponse is SGLang's answer to a single /generate request
// (tokenizer_manager.py, _handle_batch_output): the fields read here.
type generateResponse struct {
	// OutputIDs are every generated token, a stop token included
	// (releases before late 2025 leave them out).
	OutputIDs []int `json:"output_ids"`
	MetaInfo  *struct {
		// FinishReason is {"type": "stop", "matched": id | string},
		// {"type": "length", "length": n} or {"type": "abort", "message"}
		// (schedule_batch.py, FINISH_*.to_json); null while unfinished.
		FinishReason json.RawMessage `json:"finish_reason"`
		CachedTokens *int            `json:"cached_tokens"`
		// OutputTokenLogprobs holds [logprob, token id, text or null] per
		// generated token (tokenizer_manager.py,
		// detokenize_logprob_tokens).
		OutputTokenLogprobs []logprobEntry  `json:"output_token_logprobs"`
		WeightVersion       json.RawMessage `json:"weight_version"`
	} `json:"meta_info"`
}

// logprobEntry is one [logprob, token_id, text] triple.
type logprobEntry struct {
	logprob *float64
	id      int
}

// UnmarshalJSON reads a list whose first two items are a number (or
// null) and an integer token id; a third item, the token's text, is
// ignored.
func (e *logprobEntry) UnmarshalJSON(data []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return fmt.Errorf("want [logprob, token_id, text], got %.40s", data)
	}
	if len(items) < 2 {
		return fmt.Errorf("want [logprob, token_id, text], got %d items", len(items))
	}
	if err := json.Unmarshal(items[0], &e.logprob); err != nil {
		return fmt.Errorf("logprob %.40s is not a number", items[0])
	}
	if err := json.Unmarshal(items[1], &e.id); err != nil || bytes.Equal(bytes.TrimSpace(items[1]), []byte("null")) {
		return fmt.Errorf("token id %.40s is not an integer", items[1])
	}
	return nil
}

// finishReason is meta_info.finish_reason.
type finishReason struct {
	Type    string          `json:"type"`
	Matched json.RawMessage `json:"matched"`
	Message string          `json:"message"`
}

// decodeGenerate turns the body of SGLang's /generate answer to one
// prompt into a Generation: Tokens from output_ids, which must equal the
// ids of meta_info.output_token_logprobs when both are there (either one
// alone will do); log-probabilities from output_token_logprobs, filed per
// mode; the finish reason from meta_info.finish_reason: "stop" with an
// integer "matched" (a stop_token_ids or end-of-sequence token, which
// must be the last token) is FinishStopToken, with a string one of p's
// stop strings FinishStop, with none FinishStopToken on the last token;
// "length" is FinishLength; "abort" FinishAbort, with the tokens
// generated before the server aborted the request (the sampler turns it
// into an error wrapping ErrAborted unless Config.Partial).
// CachedTokens and WeightVersion come from meta_info.cached_tokens and
// meta_info.weight_version.
func decodeGenerate(body []byte, p lm.SampleParams, mode LogprobsMode) (lm.Generation, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return lm.Generation{}, fmt.Errorf("%w: want a JSON object, got %.40q", ErrBadResponse, trimmed)
	}
	var r generateResponse
	if err := json.Unmarshal(trimmed, &r); err != nil {
		return lm.Generation{}, fmt.Errorf("%w: %v", ErrBadResponse, err)
	}
	if r.MetaInfo == nil {
		return lm.Generation{}, fmt.Errorf("%w: no meta_info", ErrBadResponse)
	}
	m := r.MetaInfo
	var g lm.Generation

	var fromLogprobs []int
	if m.OutputTokenLogprobs != nil {
		fromLogprobs = make([]int, len(m.OutputTokenLogprobs))
		for i, e := range m.OutputTokenLogprobs {
			fromLogprobs[i] = e.id
		}
	}
	switch {
	case r.OutputIDs != nil:
		g.Tokens = r.OutputIDs
		if fromLogprobs != nil {
			if err := sameIDs(r.OutputIDs, fromLogprobs); err != nil {
				return lm.Generation{}, err
			}
		}
	case fromLogprobs != nil:
		g.Tokens = fromLogprobs
	}

	reason, err := parseFinishReason(m.FinishReason)
	if err != nil {
		return lm.Generation{}, err
	}
	if g.Tokens == nil && reason.Type == "abort" {
		g.Tokens = []int{} // an abort before the first token may name none
	}
	if g.Tokens == nil {
		return lm.Generation{}, fmt.Errorf("%w: no token ids (neither output_ids nor meta_info.output_token_logprobs)", ErrBadResponse)
	}
	for i, id := range g.Tokens {
		if id < 0 {
			return lm.Generation{}, fmt.Errorf("%w: token %d has id %d", ErrBadResponse, i, id)
		}
	}

	if p.Logprobs {
		if len(m.OutputTokenLogprobs) != len(g.Tokens) {
			return lm.Generation{}, fmt.Errorf("%w: %d meta_info.output_token_logprobs for %d tokens", ErrBadResponse, len(m.OutputTokenLogprobs), len(g.Tokens))
		}
		lp := make([]float32, len(g.Tokens))
		for i, e := range m.OutputTokenLogprobs {
			if v := e.logprob; v == nil || math.IsNaN(*v) || *v > 1e-6 {
				return lm.Generation{}, fmt.Errorf("%w: output_token_logprobs[%d] is %s", ErrBadResponse, i, fmtPtr(v))
			}
			lp[i] = float32(min(*e.logprob, 0))
		}
		fileLogprobs(&g, lp, p, mode)
	}

	if reason.Type == "abort" {
		// What the server generated before it aborted the request (a
		// pause or a weight update in abort mode): the caller decides
		// whether to continue from it (Config.Partial).
		g.FinishReason = lm.FinishAbort
	} else if err := sglangFinish(&g, reason, p); err != nil {
		return lm.Generation{}, err
	}
	if m.CachedTokens != nil {
		if *m.CachedTokens < 0 {
			return lm.Generation{}, fmt.Errorf("%w: meta_info.cached_tokens %d", ErrBadResponse, *m.CachedTokens)
		}
		g.CachedTokens = *m.CachedTokens
	}
	v, err := versionText(m.WeightVersion)
	if err != nil {
		return lm.Generation{}, fmt.Errorf("%w: meta_info.weight_version: %v", ErrBadResponse, err)
	}
	g.WeightVersion = v
	return g, nil
}

// sameIDs checks that output_ids equal the ids of
// meta_info.output_token_logprobs.
func sameIDs(out, fromLogprobs []int) error {
	if len(out) != len(fromLogprobs) {
		return fmt.Errorf("%w: %d output_ids but %d meta_info.output_token_logprobs", ErrBadResponse, len(out), len(fromLogprobs))
	}
	for i := range out {
		if out[i] != fromLogprobs[i] {
			return fmt.Errorf("%w: token %d: output_ids has %d, meta_info.output_token_logprobs %d", ErrBadResponse, i, out[i], fromLogprobs[i])
		}
	}
	return nil
}

// parseFinishReason reads meta_info.finish_reason, an object with a
// "type".
func parseFinishReason(raw json.RawMessage) (finishReason, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return finishReason{}, fmt.Errorf("%w: no meta_info.finish_reason (is the generation finished?)", ErrBadResponse)
	}
	var f finishReason
	if raw[0] != '{' || json.Unmarshal(raw, &f) != nil {
		return finishReason{}, fmt.Errorf("%w: meta_info.finish_reason %.60s is not an object with a type", ErrBadResponse, raw)
	}
	return f, nil
}

// sglangFinish maps a finish reason other than "abort" onto g.
func sglangFinish(g *lm.Generation, f finishReason, p lm.SampleParams) error {
	switch f.Type {
	case "length":
		g.FinishReason = lm.FinishLength
		return nil
	case "stop":
	default:
		return fmt.Errorf("%w: meta_info.finish_reason type %q", ErrBadResponse, f.Type)
	}
	matched := bytes.TrimSpace(f.Matched)
	switch {
	case len(matched) == 0 || string(matched) == "null":
		if len(g.Tokens) == 0 {
			return fmt.Errorf("%w: stopped on end of sequence with no tokens", ErrBadResponse)
		}
		g.FinishReason = lm.FinishStopToken
		g.StopToken = g.Tokens[len(g.Tokens)-1]
	case matched[0] == '"':
		var s string
		if err := json.Unmarshal(matched, &s); err != nil {
			return fmt.Errorf("%w: finish_reason.matched: %v", ErrBadResponse, err)
		}
		// SGLang also reports a NaN in the logits as the stop string "NaN
		// happened", after replacing the last token.
		if s == "" || !slices.Contains(p.Stop, s) {
			return fmt.Errorf("%w: stopped on %q, which is none of the request's stop strings", ErrBadResponse, s)
		}
		g.FinishReason = lm.FinishStop
		g.StopString = s
	default:
		var id int
		if err := json.Unmarshal(matched, &id); err != nil {
			return fmt.Errorf("%w: finish_reason.matched %.40s is neither a token id nor a string", ErrBadResponse, matched)
		}
		if len(g.Tokens) == 0 || g.Tokens[len(g.Tokens)-1] != id {
			return fmt.Errorf("%w: stopped on token %d, which is not the last token", ErrBadResponse, id)
		}
		g.FinishReason = lm.FinishStopToken
		g.StopToken = id
	}
	return nil
}

// generateURL is <base>/generate: SGLang serves its native API at the
// root, so a base ending in /v1 (the OpenAI-compatible prefix) loses it.
func generateURL(base string) (string, error) {
	return endpointURL(base, func(p string) string {
		switch {
		case strings.HasSuffix(p, "/generate"):
			return p
		case strings.HasSuffix(p, "/v1"):
			return strings.TrimSuffix(p, "/v1") + "/generate"
		default:
			return p + "/generate"
		}
	})
}
