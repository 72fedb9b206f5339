package serve

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrl/agentrl/internal/httpjson"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
)

const (
	// maxBodyBytes bounds a request body: 64 MiB holds prompts far longer
	// than any context.
	maxBodyBytes = 64 << 20
	// maxChoices bounds prompts × n in one request.
	maxChoices = 4096
	// maxLogprobs is vLLM's default --max-logprobs.
	maxLogprobs = 20
	// minLogprob is where vLLM clamps returned log-probabilities
	// (serving.py, _create_completion_logprobs).
	minLogprob = -9999.0
)

// completionRequest is the body of POST /v1/completions: vLLM's
// CompletionRequest (vllm/entrypoints/openai/completion/protocol.py),
// the fields this server reads. Pointers tell an absent or null field
// from a zero. Fields the server does not implement are read only to
// reject values that would change the result.
type completionRequest struct {
	Model          *string         `json:"model"`
	Prompt         json.RawMessage `json:"prompt"`
	N              *int            `json:"n"`
	MaxTokens      *int            `json:"max_tokens"`
	Temperature    *float64        `json:"temperature"`
	TopP           *float64        `json:"top_p"`
	TopK           *int            `json:"top_k"`
	MinP           *float64        `json:"min_p"`
	Seed           *int64          `json:"seed"`
	Stop           json.RawMessage `json:"stop"`
	StopTokenIDs   []int           `json:"stop_token_ids"`
	Logprobs       *int            `json:"logprobs"`
	TokensAsIDs    *bool           `json:"return_tokens_as_token_ids"`
	ReturnTokenIDs *bool           `json:"return_token_ids"`
	IncludeStopStr *bool           `json:"include_stop_str_in_output"`
	SkipSpecial    *bool           `json:"skip_special_tokens"`
	SpacesBetween  *bool           `json:"spaces_between_special_tokens"`
	Stream         *bool           `json:"stream"`
	Echo           *bool           `json:"echo"`

	// Not implemented: rejected unless absent or neutral.
	IgnoreEOS         *bool              `json:"ignore_eos"`
	MinTokens         *int               `json:"min_tokens"`
	PresencePenalty   *float64           `json:"presence_penalty"`
	FrequencyPenalty  *float64           `json:"frequency_penalty"`
	RepetitionPenalty *float64           `json:"repetition_penalty"`
	LogitBias         map[string]float64 `json:"logit_bias"`
	PromptLogprobs    *int               `json:"prompt_logprobs"`
	BestOf            *int               `json:"best_of"`
	Suffix            *string            `json:"suffix"`
	UseBeamSearch     *bool              `json:"use_beam_search"`
}

// apiError is a request the server refuses: status, and vLLM's
// ErrorResponse fields.
type apiError = httpjson.Error

// badRequest is a 400 with vLLM's type "BadRequestError".
func badRequest(param, format string, a ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "BadRequestError", Param: param, Message: fmt.Sprintf(format, a...)}
}

// plan is a validated completion request: one lm.GenerateRequest per
// prompt × sample, prompt-major, and how to render the answer.
type plan struct {
	model          *string
	prompts        [][]int
	n              int
	reqs           []lm.GenerateRequest
	logprobs       bool
	topLogprobs    int
	tokensAsIDs    bool
	returnTokenIDs bool
	includeStop    bool
}

// decodeCompletion parses and validates a /v1/completions body against
// the served model's limits. Every refusal is an *apiError with vLLM's
// message where vLLM has one.
func decodeCompletion(body []byte, lim limits) (*plan, *apiError) {
	var req completionRequest
	if err := unmarshalObject(body, &req); err != nil {
		return nil, badRequest("", "%v", err)
	}
	p := &plan{model: req.Model, n: 1}
	if err := req.unsupported(); err != nil {
		return nil, err
	}
	prompts, err := parsePrompts(req.Prompt, lim.encode)
	if err != nil {
		return nil, err
	}
	p.prompts = prompts
	if req.N != nil {
		p.n = *req.N
	}
	if p.n < 1 {
		return nil, badRequest("n", "n must be at least 1, got %d.", p.n)
	}
	if p.n > maxChoices || len(prompts)*p.n > maxChoices {
		return nil, badRequest("n", "%d prompts × n %d is more than %d completions in one request", len(prompts), p.n, maxChoices)
	}
	sp, err := req.sampleParams(lim)
	if err != nil {
		return nil, err
	}
	for i, pr := range prompts {
		if err := checkPrompt(i, pr, sp.MaxNewTokens, lim); err != nil {
			return nil, err
		}
	}
	p.logprobs, p.topLogprobs = sp.Logprobs, sp.TopLogprobs
	p.tokensAsIDs = lim.decode == nil || (req.TokensAsIDs != nil && *req.TokensAsIDs)
	p.returnTokenIDs = req.ReturnTokenIDs != nil && *req.ReturnTokenIDs
	p.includeStop = req.IncludeStopStr != nil && *req.IncludeStopStr
	p.reqs = make([]lm.GenerateRequest, 0, len(prompts)*p.n)
	for _, pr := range prompts {
		for i := range p.n {
			params := sp
			if req.Seed != nil {
				// vLLM gives sample i of n the seed seed+i
				// (vllm/v1/engine/parallel_sampling.py,
				// _get_child_sampling_params); int64 bits as uint64, as
				// policy/openai sends them.
				s := uint64(*req.Seed) + uint64(i)
				params.Seed = &s
			}
			p.reqs = append(p.reqs, lm.GenerateRequest{Prompt: pr, Params: params})
		}
	}
	return p, nil
}

// unmarshalObject decodes a JSON object into v, with errors that name
// the field and the JSON value expected (httpjson.UnmarshalObject), and
// the byte of a syntax error.
func unmarshalObject(body []byte, v any) error {
	err := httpjson.UnmarshalObject(body, v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// The decoder's own error, which UnmarshalObject wraps.
		return fmt.Errorf("JSON decode error at byte %d: %v", se.Offset, errors.Unwrap(err))
	}
	return err
}

// unsupported rejects what this server does not implement, rather than
// answering as if it had.
func (r *completionRequest) unsupported() *apiError {
	no := func(param, what string) *apiError {
		return badRequest(param, "%s is not supported by this server", what)
	}
	switch {
	case r.Stream != nil && *r.Stream:
		return no("stream", "stream")
	case r.Echo != nil && *r.Echo:
		return no("echo", "echo")
	case r.IgnoreEOS != nil && *r.IgnoreEOS:
		return no("ignore_eos", "ignore_eos")
	case r.MinTokens != nil && *r.MinTokens != 0:
		return no("min_tokens", "min_tokens")
	case r.PresencePenalty != nil && *r.PresencePenalty != 0:
		return no("presence_penalty", "presence_penalty")
	case r.FrequencyPenalty != nil && *r.FrequencyPenalty != 0:
		return no("frequency_penalty", "frequency_penalty")
	case r.RepetitionPenalty != nil && *r.RepetitionPenalty != 1:
		return no("repetition_penalty", "repetition_penalty")
	case len(r.LogitBias) > 0:
		return no("logit_bias", "logit_bias")
	case r.PromptLogprobs != nil:
		return no("prompt_logprobs", "prompt_logprobs")
	case r.BestOf != nil && *r.BestOf > 1:
		return no("best_of", "best_of")
	case r.Suffix != nil:
		return no("suffix", "suffix")
	case r.UseBeamSearch != nil && *r.UseBeamSearch:
		return no("use_beam_search", "use_beam_search")
	}
	return nil
}

// parsePrompts reads "prompt": a list of token ids, a list of such lists,
// or, with a tokenizer, a string or a list of strings.
func parsePrompts(raw json.RawMessage, encode func(string) []int) ([][]int, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("prompt", "prompt is required")
	}
	shape := badRequest("prompt", "prompt must be a list of token ids, a list of lists of token ids, a string or a list of strings")
	var texts []string
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, shape
		}
		texts = []string{s}
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, shape
		}
		if len(items) == 0 {
			return nil, badRequest("prompt", "The decoder prompt cannot be empty")
		}
		switch first := bytes.TrimSpace(items[0]); {
		case len(first) > 0 && first[0] == '"':
			if err := json.Unmarshal(raw, &texts); err != nil {
				return nil, shape
			}
		case len(first) > 0 && first[0] == '[':
			var lists [][]int
			if err := json.Unmarshal(raw, &lists); err != nil {
				return nil, badRequest("prompt", "prompt: each list must hold integer token ids")
			}
			if len(lists) > maxChoices {
				return nil, badRequest("prompt", "%d prompts is more than %d in one request", len(lists), maxChoices)
			}
			return lists, nil
		default:
			var ids []int
			if err := json.Unmarshal(raw, &ids); err != nil {
				return nil, badRequest("prompt", "prompt: a list of token ids must hold integers only")
			}
			return [][]int{ids}, nil
		}
	default:
		return nil, shape
	}
	if encode == nil {
		return nil, badRequest("prompt", "text prompts need a tokenizer, and this server has none: send token ids")
	}
	if len(texts) > maxChoices {
		return nil, badRequest("prompt", "%d prompts is more than %d in one request", len(texts), maxChoices)
	}
	out := make([][]int, len(texts))
	for i, t := range texts {
		out[i] = encode(t)
	}
	return out, nil
}

// checkPrompt applies vLLM's input checks (vllm/v1/engine/processor.py,
// _validate_model_input; entrypoints/openai/engine/serving.py,
// _validate_input) to prompt i.
func checkPrompt(i int, ids []int, maxTokens int, lim limits) *apiError {
	if len(ids) == 0 {
		return badRequest("prompt", "The decoder prompt cannot be empty")
	}
	for _, id := range ids {
		if id < 0 || id >= lim.vocab {
			return badRequest("prompt", "Token id %d is out of vocabulary", id)
		}
	}
	if len(ids) >= lim.maxLen {
		return badRequest("input_tokens", "This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", lim.maxLen, len(ids))
	}
	if maxTokens > 0 && len(ids)+maxTokens > lim.maxLen {
		return badRequest("max_tokens", "'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).", maxTokens, lim.maxLen, len(ids), maxTokens, lim.maxLen, len(ids))
	}
	return nil
}

// sampleParams maps and checks the sampling fields with vLLM's defaults
// and messages (vllm/sampling_params.py, SamplingParams._verify_args;
// completion/protocol.py, CompletionRequest.check_logprobs). Absent
// fields take the neutral values: temperature 1, top_p 1, top_k and
// min_p off, and, for an absent or null max_tokens alike, 16 tokens
// (defaultMaxTokens); vLLM would take generation_config.json's instead
// under --generation-config auto. logprobs N asks for the sampled token's
// log-probability and the N most likely tokens' (N −1: the whole
// vocabulary), at most maxLogprobs.
func (r *completionRequest) sampleParams(lim limits) (lm.SampleParams, *apiError) {
	p := lm.SampleParams{Temperature: 1, TopP: 1}
	if r.Temperature != nil {
		p.Temperature = *r.Temperature
	}
	if p.Temperature < 0 {
		return p, badRequest("temperature", "temperature must be non-negative, got %g.", p.Temperature)
	}
	if r.TopP != nil {
		p.TopP = *r.TopP
	}
	if !(p.TopP > 0 && p.TopP <= 1) {
		return p, badRequest("top_p", "top_p must be in (0, 1], got %g.", p.TopP)
	}
	if r.TopK != nil {
		p.TopK = *r.TopK
	}
	if p.TopK < -1 {
		return p, badRequest("top_k", "top_k must be 0 (disable), or at least 1, got %d.", p.TopK)
	}
	if r.MinP != nil {
		p.MinP = *r.MinP
	}
	if !(p.MinP >= 0 && p.MinP <= 1) {
		return p, badRequest("min_p", "min_p must be in [0, 1], got %g.", p.MinP)
	}
	p.MaxNewTokens = defaultMaxTokens // absent or null alike (normalize_null_max_tokens)
	if r.MaxTokens != nil {
		if *r.MaxTokens < 1 {
			return p, badRequest("max_tokens", "max_tokens must be at least 1, got %d.", *r.MaxTokens)
		}
		p.MaxNewTokens = *r.MaxTokens
	}
	if r.Logprobs != nil {
		n := *r.Logprobs
		if n == -1 {
			n = lim.vocab // vLLM's "the whole vocabulary"
		}
		switch {
		case n < 0:
			return p, badRequest("logprobs", "`logprobs` must be a positive value or -1.")
		case n > maxLogprobs:
			return p, badRequest("logprobs", "Requested sample logprobs of %d, which is greater than max allowed: %d", n, maxLogprobs)
		}
		p.Logprobs, p.TopLogprobs = true, n
	}
	stops, err := parseStop(r.Stop)
	if err != nil {
		return p, err
	}
	if len(stops) > 0 && lim.decode == nil {
		return p, badRequest("stop", "stop strings need a tokenizer, and this server has none: use stop_token_ids")
	}
	p.Stop = stops
	p.StopTokenIDs = r.StopTokenIDs
	if err := lm.CheckSampleParams(p); err != nil {
		return p, badRequest("", "%v", err)
	}
	return p, nil
}

// parseStop reads "stop": null, a string or a list of strings, none
// empty.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var stops []string
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("stop", "stop must be a string or a list of strings")
		}
		stops = []string{s}
	} else if err := json.Unmarshal(raw, &stops); err != nil {
		return nil, badRequest("stop", "stop must be a string or a list of strings")
	}
	for _, s := range stops {
		if s == "" {
			return nil, badRequest("stop", "stop cannot contain an empty string.")
		}
	}
	return stops, nil
}

// completionResponse is vLLM's CompletionResponse with SGLang's
// "metadata".
type completionResponse struct {
	ID                string           `json:"id"`
	Object            string           `json:"object"`
	Created           int64            `json:"created"`
	Model             string           `json:"model"`
	Choices           []choice         `json:"choices"`
	Usage             usage            `json:"usage"`
	SystemFingerprint *string          `json:"system_fingerprint"`
	ServiceTier       *string          `json:"service_tier"`
	KVTransferParams  *json.RawMessage `json:"kv_transfer_params"`
	// Metadata is SGLang's; vLLM's answer has none (EngineVLLM).
	Metadata *metadata `json:"metadata,omitempty"`
}

// choice is vLLM's CompletionResponseChoice.
type choice struct {
	Index          int              `json:"index"`
	Text           string           `json:"text"`
	Logprobs       *choiceLogprobs  `json:"logprobs"`
	FinishReason   string           `json:"finish_reason"`
	StopReason     any              `json:"stop_reason"` // nil, an int or a string
	TokenIDs       []int            `json:"token_ids"`
	PromptTokenIDs []int            `json:"prompt_token_ids"`
	PromptLogprobs *json.RawMessage `json:"prompt_logprobs"`
}

// choiceLogprobs is vLLM's CompletionLogProbs.
type choiceLogprobs struct {
	TextOffset    []int          `json:"text_offset"`
	TokenLogprobs []float64      `json:"token_logprobs"`
	Tokens        []string       `json:"tokens"`
	TopLogprobs   []*topLogprobs `json:"top_logprobs"`
}

// usage is vLLM's UsageInfo.
type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	PromptTokensDetails promptDetails `json:"prompt_tokens_details"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// metadata is SGLang's top-level completion metadata.
type metadata struct {
	WeightVersion string `json:"weight_version"`
}

// handleCompletions serves POST /v1/completions.
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, writeOpenAIError)
	if !ok {
		return
	}
	p, aerr := decodeCompletion(body, s.lim)
	adapter := ""
	if aerr == nil {
		adapter = s.modelAdapter(p.model)
		if adapter != "" && !s.hasAdapter(adapter) {
			aerr = unknownModel(adapter)
		}
	}
	if aerr != nil {
		writeOpenAIError(w, aerr)
		return
	}
	out, err := s.generate(r.Context(), p.reqs, p.n, adapter)
	if errors.Is(err, ErrUnknownAdapter) {
		// Unloaded while the request waited.
		writeOpenAIError(w, unknownModel(adapter))
		return
	}
	if err != nil {
		writeOpenAIError(w, generationError(err, r))
		return
	}
	resp, err := s.render(p, out)
	if err != nil {
		writeOpenAIError(w, &apiError{Status: http.StatusInternalServerError, Type: "InternalServerError", Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// unknownModel is vLLM's 404 for a "model" that is neither the served
// model nor a loaded adapter (OpenAIModelRegistry.check_model).
func unknownModel(name string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "NotFoundError", Param: "model", Message: fmt.Sprintf("The model `%s` does not exist.", name)}
}

// generationError maps a failed generation to its answer.
func generationError(err error, r *http.Request) *apiError {
	switch {
	case errors.Is(err, ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableError", Message: "The server is shutting down."}
	case r.Context().Err() != nil:
		return badRequest("", "Client disconnected")
	case errors.Is(err, policy.ErrInput), errors.Is(err, lm.ErrSampling):
		return badRequest("", "%v", err)
	}
	return &apiError{Status: http.StatusInternalServerError, Type: "InternalServerError", Message: err.Error()}
}

// render builds the response body.
func (s *Server) render(p *plan, out outcome) (*completionResponse, error) {
	resp := &completionResponse{
		ID:      "cmpl-" + randomHex(),
		Object:  "text_completion",
		Created: time.Now().Unix(),
		Model:   s.name,
		Choices: make([]choice, len(p.reqs)),
	}
	if v := s.reported(out.eng); v != nil {
		resp.Metadata = &metadata{WeightVersion: *v}
	}
	if out.eng.name != "" {
		resp.Model = out.eng.name // vLLM names the adapter that answered
	}
	for _, pr := range p.prompts {
		resp.Usage.PromptTokens += len(pr)
	}
	for i, req := range p.reqs {
		g := out.gen(i)
		c, err := s.renderChoice(i, req, g, p, out)
		if err != nil {
			return nil, err
		}
		resp.Choices[i] = c
		resp.Usage.CompletionTokens += len(g.Tokens)
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	// vLLM reports the last prompt's cached tokens (serving.py,
	// request_output_to_completion_response); here those of its first
	// sample, the one that continues a cached prefix.
	if len(out.gens) > 0 {
		resp.Usage.PromptTokensDetails.CachedTokens = out.gens[len(out.gens)-p.n].CachedTokens
	}
	return resp, nil
}

// renderChoice builds choice i from its generation.
func (s *Server) renderChoice(i int, req lm.GenerateRequest, g lm.Generation, p *plan, out outcome) (choice, error) {
	c := choice{Index: i}
	switch {
	case g.FinishReason == lm.FinishAbort:
		c.FinishReason = "abort"
	case g.FinishReason == lm.FinishLength:
		c.FinishReason = "length"
	case g.FinishReason == lm.FinishStop:
		c.FinishReason, c.StopReason = "stop", g.StopString
	case g.FinishReason == lm.FinishStopToken:
		c.FinishReason = "stop"
		if !out.eng.eos[g.StopToken] {
			c.StopReason = g.StopToken
		}
	default:
		return c, fmt.Errorf("serve: generation %d ended with unknown finish reason %q", i, g.FinishReason)
	}
	if p.returnTokenIDs {
		c.TokenIDs = append([]int{}, g.Tokens...)
		c.PromptTokenIDs = req.Prompt
	}
	c.Text = s.text(req.Prompt, g, p.includeStop)
	if p.logprobs {
		lps, err := s.modeLogprobs(i, g)
		if err != nil {
			return c, err
		}
		if p.topLogprobs > 0 && len(g.TopLogProbs) != len(g.Tokens) {
			return c, fmt.Errorf("serve: generation %d has %d lists of top log-probs for %d tokens", i, len(g.TopLogProbs), len(g.Tokens))
		}
		c.Logprobs = s.logprobs(g, lps, p.tokensAsIDs)
	}
	return c, nil
}

// modeLogprobs returns generation i's log-probabilities as the server's
// LogprobsMode says: RawLogProbs, or LogProbs for processed_logprobs.
func (s *Server) modeLogprobs(i int, g lm.Generation) ([]float32, error) {
	lps := g.RawLogProbs
	if s.mode == openai.ProcessedLogprobs {
		lps = g.LogProbs
	}
	if len(lps) != len(g.Tokens) {
		return nil, fmt.Errorf("serve: generation %d has %d log-probs for %d tokens", i, len(lps), len(g.Tokens))
	}
	return lps, nil
}

// text is the output text as vLLM's detokenizer gives it
// (vllm/v1/engine/detokenizer.py, IncrementalDetokenizer.update):
// decoded incrementally after the prompt; a stop token's text left out
// and a stop string and what follows it cut, unless
// include_stop_str_in_output.
func (s *Server) text(prompt []int, g lm.Generation, includeStop bool) string {
	if s.lim.decode == nil || len(g.Tokens) == 0 {
		return ""
	}
	toks := g.Tokens
	if g.FinishReason == lm.FinishStopToken && !includeStop {
		toks = toks[:len(toks)-1]
	}
	ts := lm.NewTextStream(s.lim.decode, prompt)
	var b strings.Builder
	for _, id := range toks {
		b.WriteString(ts.Push(id))
	}
	b.WriteString(ts.Flush())
	text := b.String()
	if g.FinishReason == lm.FinishStop && g.StopString != "" {
		if at := strings.Index(text, g.StopString); at >= 0 {
			end := at
			if includeStop {
				end += len(g.StopString)
			}
			text = text[:end]
		}
	}
	return text
}

// logprobs builds vLLM's CompletionLogProbs (serving.py,
// _create_completion_logprobs): tokens as "token_id:<id>" or decoded,
// log-probs clamped at -9999, text_offset advancing by each token
// string's length in code points, and top_logprobs at each position: the
// sampled token, then the most likely tokens that logprobs N asked for
// (g.TopLogProbs), keyed by their text in that order; tokens whose texts
// coincide share one key, as in vLLM's dict.
func (s *Server) logprobs(g lm.Generation, lps []float32, asIDs bool) *choiceLogprobs {
	ids := g.Tokens
	l := &choiceLogprobs{
		TextOffset:    make([]int, len(ids)),
		TokenLogprobs: make([]float64, len(ids)),
		Tokens:        make([]string, len(ids)),
		TopLogprobs:   make([]*topLogprobs, len(ids)),
	}
	text := func(id int) string {
		if asIDs {
			return "token_id:" + strconv.Itoa(id)
		}
		return s.lim.decode([]int{id})
	}
	off := 0
	for i, id := range ids {
		tok := text(id)
		lp := math.Max(float64(lps[i]), minLogprob)
		l.Tokens[i], l.TokenLogprobs[i], l.TextOffset[i] = tok, lp, off
		top := &topLogprobs{}
		top.set(tok, lp)
		if g.TopLogProbs != nil {
			for _, c := range g.TopLogProbs[i] {
				v := c.RawLogProb
				if s.mode == openai.ProcessedLogprobs {
					v = c.LogProb
				}
				top.set(text(c.Token), math.Max(float64(v), minLogprob))
			}
		}
		l.TopLogprobs[i] = top
		off += utf8.RuneCountInString(tok)
	}
	return l
}

// topLogprobs is one position's top_logprobs: a JSON object whose keys
// keep the order they were set in; a key set again keeps its place and
// takes the new value, as a Python dict does.
type topLogprobs struct {
	keys []string
	vals []float64
}

func (t *topLogprobs) set(key string, v float64) {
	if i := slices.Index(t.keys, key); i >= 0 {
		t.vals[i] = v
		return
	}
	t.keys = append(t.keys, key)
	t.vals = append(t.vals, v)
}

// MarshalJSON writes the object with its keys in order.
func (t *topLogprobs) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, k := range t.keys {
		if i > 0 {
			b = append(b, ',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(t.vals[i])
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, kb...), ':'), vb...)
	}
	return append(b, '}'), nil
}

// randomHex returns 32 random hex digits, as Python's uuid4().hex.
func randomHex() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
