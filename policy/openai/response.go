package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl/lm"
)

// ErrBadResponse is wrapped by the error for a response that is not a
// valid completion (missing token ids, mismatched lengths, an unknown
// finish reason). Such responses are not retried.
var ErrBadResponse = errors.New("openai: malformed completion response")

// completionRequest is the body of POST /v1/completions, with vLLM's
// extra sampling parameters (vllm/entrypoints/openai/protocol.py,
// CompletionRequest).
type completionRequest struct {
	Model  string `json:"model,omitempty"`
	Prompt []int  `json:"prompt"`
	N      int    `json:"n"`
	// MaxTokens is always a number: vLLM reads an absent or null
	// max_tokens as its default of 16 (normalize_null_max_tokens).
	MaxTokens   int      `json:"max_tokens"`
	Temperature float64  `json:"temperature"`
	TopP        float64  `json:"top_p"`
	TopK        int      `json:"top_k"`
	MinP        float64  `json:"min_p"`
	Seed        *int64   `json:"seed,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	StopTokens  []int    `json:"stop_token_ids,omitempty"`
	Logprobs    int      `json:"logprobs"`
	// Token ids come back as "token_id:123" in logprobs.tokens, and
	// (vLLM ≥ 0.10.2) as choices[].token_ids.
	TokensAsIDs    bool `json:"return_tokens_as_token_ids"`
	ReturnTokenIDs bool `json:"return_token_ids"`
	IncludeStopStr bool `json:"include_stop_str_in_output"`
	SkipSpecial    bool `json:"skip_special_tokens"`
	SpacesBetween  bool `json:"spaces_between_special_tokens"`
	Stream         bool `json:"stream"`
}

// completionResponse is vLLM's CompletionResponse, the fields we read.
type completionResponse struct {
	// Model is the model that answered: vLLM names the LoRA adapter the
	// request addressed (serving_models.py, model_name).
	Model   *string `json:"model"`
	Choices []struct {
		Index    int    `json:"index"`
		Text     string `json:"text"`
		TokenIDs []int  `json:"token_ids"`
		Logprobs *struct {
			Tokens        []string   `json:"tokens"`
			TokenLogprobs []*float64 `json:"token_logprobs"`
		} `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		PromptTokensDetails *struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	// Metadata is SGLang's (python/sglang/srt/entrypoints/openai/
	// serving_completions.py): the weight version that generated the
	// response, which package serve reports too.
	Metadata *struct {
		WeightVersion json.RawMessage `json:"weight_version"`
	} `json:"metadata"`
}

// LogprobsMode says what log-probabilities the server returns, as vLLM's
// --logprobs-mode.
type LogprobsMode string

const (
	// RawLogprobs (vLLM's default "raw_logprobs"): log-softmax of the
	// unprocessed logits. They fill Generation.RawLogProbs, and also
	// Generation.LogProbs when the request's sampling leaves the
	// distribution unchanged (temperature 1, no top-p, top-k or min-p);
	// otherwise LogProbs stays nil, as the sampling distribution's values
	// are unknown.
	RawLogprobs LogprobsMode = "raw_logprobs"
	// ProcessedLogprobs ("processed_logprobs", vLLM ≥ 0.10.2): after
	// temperature and truncation, the behaviour policy's values; they
	// fill Generation.LogProbs.
	ProcessedLogprobs LogprobsMode = "processed_logprobs"
	// ScaledLogprobs ("scaled_logprobs"): log-softmax of the logits
	// divided by the temperature, before top-k, top-p and min-p, and of
	// the unprocessed logits for greedy decoding: what SGLang returns by
	// default (python/sglang/srt/layers/sampler.py, Sampler.forward;
	// releases of early 2025 also renormalised them over the top-p
	// nucleus). Such a value is the sampling one only when the request
	// truncates nothing (top-p, top-k and min-p off) and does not decode
	// greedily: then it fills Generation.LogProbs. It is the raw one only
	// for greedy decoding or for temperature 1 with nothing truncated:
	// then it fills Generation.RawLogProbs. A request that both scales
	// and truncates gets neither. An SGLang server started with
	// SGLANG_RETURN_ORIGINAL_LOGPROB=1 returns raw values instead: use
	// RawLogprobs for it.
	ScaledLogprobs LogprobsMode = "scaled_logprobs"
)

// fileLogprobs files the log-probabilities a server returned for g's
// tokens under mode (see LogprobsMode): into LogProbs, RawLogProbs, both
// or neither, as far as sampling with p makes them those values.
func fileLogprobs(g *lm.Generation, lp []float32, p lm.SampleParams, mode LogprobsMode) {
	switch mode {
	case ProcessedLogprobs:
		g.LogProbs = lp
	case ScaledLogprobs:
		greedy := p.Temperature < lm.GreedyTemperature
		truncates := (p.TopP != 0 && p.TopP != 1) || (p.TopK != 0 && p.TopK != -1) || p.MinP != 0
		switch {
		case greedy:
			g.RawLogProbs = lp
		case unprocessed(p):
			g.RawLogProbs = lp
			g.LogProbs = slices.Clone(lp)
		case !truncates:
			g.LogProbs = lp
		}
	default:
		g.RawLogProbs = lp
		if unprocessed(p) {
			g.LogProbs = slices.Clone(lp)
		}
	}
}

// decodeCompletion turns a response body into a Generation.
func decodeCompletion(body []byte, p lm.SampleParams, mode LogprobsMode) (lm.Generation, error) {
	g, _, err := decodeCompletionModel(body, p, mode)
	return g, err
}

// decodeCompletionModel is decodeCompletion that also returns the
// response's "model" ("" when absent or null).
func decodeCompletionModel(body []byte, p lm.SampleParams, mode LogprobsMode) (lm.Generation, string, error) {
	var r completionResponse
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&r); err != nil {
		return lm.Generation{}, "", fmt.Errorf("%w: %v", ErrBadResponse, err)
	}
	if len(r.Choices) != 1 {
		return lm.Generation{}, "", fmt.Errorf("%w: %d choices, want 1", ErrBadResponse, len(r.Choices))
	}
	c := r.Choices[0]
	var g lm.Generation

	// Token ids: choices[0].token_ids, else logprobs.tokens.
	var fromLogprobs []int
	if c.Logprobs != nil {
		fromLogprobs = make([]int, len(c.Logprobs.Tokens))
		for i, s := range c.Logprobs.Tokens {
			id, err := parseTokenID(s)
			if err != nil {
				return lm.Generation{}, "", fmt.Errorf("%w: logprobs.tokens[%d]: %v", ErrBadResponse, i, err)
			}
			fromLogprobs[i] = id
		}
	}
	switch {
	case c.TokenIDs != nil:
		g.Tokens = c.TokenIDs
		if c.Logprobs != nil && !equalInts(c.TokenIDs, fromLogprobs) {
			return lm.Generation{}, "", fmt.Errorf("%w: token_ids and logprobs.tokens disagree", ErrBadResponse)
		}
	case c.Logprobs != nil:
		g.Tokens = fromLogprobs
	default:
		return lm.Generation{}, "", fmt.Errorf("%w: no token ids (neither token_ids nor logprobs)", ErrBadResponse)
	}
	for i, id := range g.Tokens {
		if id < 0 {
			return lm.Generation{}, "", fmt.Errorf("%w: token %d has id %d", ErrBadResponse, i, id)
		}
	}
	if g.Tokens == nil {
		g.Tokens = []int{}
	}

	if p.Logprobs {
		if c.Logprobs == nil || len(c.Logprobs.TokenLogprobs) != len(g.Tokens) {
			return lm.Generation{}, "", fmt.Errorf("%w: want %d token log-probs", ErrBadResponse, len(g.Tokens))
		}
		lp := make([]float32, len(g.Tokens))
		for i, v := range c.Logprobs.TokenLogprobs {
			if v == nil || math.IsNaN(*v) || *v > 1e-6 {
				return lm.Generation{}, "", fmt.Errorf("%w: token_logprobs[%d] is %s", ErrBadResponse, i, fmtPtr(v))
			}
			lp[i] = float32(min(*v, 0))
		}
		fileLogprobs(&g, lp, p, mode)
	}

	if c.FinishReason == nil {
		return lm.Generation{}, "", fmt.Errorf("%w: no finish_reason", ErrBadResponse)
	}
	switch *c.FinishReason {
	case "length":
		g.FinishReason = lm.FinishLength
	case "abort":
		// vLLM's FinishReason.ABORT (a pause or weight update in abort
		// mode): the tokens generated until then.
		g.FinishReason = lm.FinishAbort
	case "stop":
		if err := stopReason(&g, c.StopReason); err != nil {
			return lm.Generation{}, "", err
		}
	default:
		return lm.Generation{}, "", fmt.Errorf("%w: finish_reason %q", ErrBadResponse, *c.FinishReason)
	}
	if r.Usage != nil && r.Usage.PromptTokensDetails != nil && r.Usage.PromptTokensDetails.CachedTokens != nil {
		g.CachedTokens = *r.Usage.PromptTokensDetails.CachedTokens
	}
	if r.Metadata != nil {
		v, err := versionText(r.Metadata.WeightVersion)
		if err != nil {
			return lm.Generation{}, "", fmt.Errorf("%w: metadata.weight_version: %v", ErrBadResponse, err)
		}
		g.WeightVersion = v
	}
	model := ""
	if r.Model != nil {
		model = *r.Model
	}
	return g, model, nil
}

// stopReason maps vLLM's stop_reason for finish_reason "stop": null is an
// end-of-sequence token (the last token), an integer a stop_token_ids
// token, a string a stop string.
func stopReason(g *lm.Generation, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		if len(g.Tokens) == 0 {
			return fmt.Errorf("%w: stopped on end of sequence with no tokens", ErrBadResponse)
		}
		g.FinishReason = lm.FinishStopToken
		g.StopToken = g.Tokens[len(g.Tokens)-1]
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("%w: stop_reason: %v", ErrBadResponse, err)
		}
		g.FinishReason = lm.FinishStop
		g.StopString = s
	default:
		var id int
		if err := json.Unmarshal(raw, &id); err != nil {
			return fmt.Errorf("%w: stop_reason %s is neither a token id nor a string", ErrBadResponse, raw)
		}
		g.FinishReason = lm.FinishStopToken
		g.StopToken = id
	}
	return nil
}

// versionText reads a weight version: a string (SGLang's), a number
// (written as its decimal text) or null (unknown: "").
func versionText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	default:
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", fmt.Errorf("%s is neither a string nor a number", raw)
		}
		return n.String(), nil
	}
}

// parseTokenID reads vLLM's "token_id:123".
func parseTokenID(s string) (int, error) {
	num, ok := strings.CutPrefix(s, "token_id:")
	if !ok {
		return 0, fmt.Errorf("%q is not \"token_id:<id>\" (is return_tokens_as_token_ids supported?)", s)
	}
	id, err := strconv.Atoi(num)
	if err != nil || id < 0 {
		return 0, fmt.Errorf("%q: bad token id", s)
	}
	return id, nil
}

// unprocessed reports whether sampling with p draws from the raw
// distribution, so that raw log-probabilities are the sampling ones.
func unprocessed(p lm.SampleParams) bool {
	return p.Temperature == 1 && (p.TopP == 0 || p.TopP == 1) && (p.TopK == 0 || p.TopK == -1) && p.MinP == 0
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func fmtPtr(v *float64) string {
	if v == nil {
		return "null"
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

// newCompletionRequest maps policy parameters onto vLLM's, with
// maxTokens (the Sampler's bound for the server, never 0) as max_tokens.
func newCompletionRequest(model string, prompt []int, p lm.SampleParams, maxTokens int) completionRequest {
	r := completionRequest{
		Model: model, Prompt: prompt, N: 1, MaxTokens: maxTokens,
		Temperature: p.Temperature, TopP: p.TopP, TopK: p.TopK, MinP: p.MinP,
		StopTokens: p.StopTokenIDs,
		// logprobs 1 rather than 0: every server returns the sampled
		// token's log-prob for 1, not all do for 0.
		Logprobs:    1,
		TokensAsIDs: true, ReturnTokenIDs: true,
		IncludeStopStr: true, SkipSpecial: false, SpacesBetween: false,
	}
	for _, s := range p.Stop {
		if s != "" { // an empty stop string would match everywhere; vLLM rejects it
			r.Stop = append(r.Stop, s)
		}
	}
	if p.Temperature < 1e-5 {
		r.Temperature = 0
	}
	if p.TopP == 0 {
		r.TopP = 1
	}
	if p.TopK == 0 {
		r.TopK = -1
	}
	if p.Seed != nil {
		s := int64(*p.Seed) // vLLM accepts the int64 range; the bits are kept
		r.Seed = &s
	}
	return r
}
