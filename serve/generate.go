package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentrl/agentrl/internal/httpjson"
	"github.com/agentrl/agentrl/lm"
)

// sglangDefaultMaxNewTokens is SGLang's max_new_tokens when the field is
// absent (python/sglang/srt/sampling/sampling_params.py).
const sglangDefaultMaxNewTokens = 128

// generateRequest is the body of POST /generate: SGLang's
// GenerateReqInput (python/sglang/srt/managers/io_struct.py), the fields
// this server reads. Fields it does not implement are read only to
// refuse values that would change the result.
type generateRequest struct {
	Text                 json.RawMessage `json:"text"`
	InputIDs             json.RawMessage `json:"input_ids"`
	SamplingParams       json.RawMessage `json:"sampling_params"`
	RID                  json.RawMessage `json:"rid"`
	ReturnLogprob        *bool           `json:"return_logprob"`
	LogprobStartLen      *int            `json:"logprob_start_len"`
	TopLogprobsNum       *int            `json:"top_logprobs_num"`
	ReturnTextInLogprobs *bool           `json:"return_text_in_logprobs"`
	Stream               *bool           `json:"stream"`

	// LoraPath names the loaded adapter that generates (parseLoraPath).
	LoraPath json.RawMessage `json:"lora_path"`

	// Not implemented: refused unless absent, null, false or empty.
	TokenIDsLogprob      json.RawMessage `json:"token_ids_logprob"`
	InputEmbeds          json.RawMessage `json:"input_embeds"`
	ImageData            json.RawMessage `json:"image_data"`
	VideoData            json.RawMessage `json:"video_data"`
	AudioData            json.RawMessage `json:"audio_data"`
	SessionParams        json.RawMessage `json:"session_params"`
	CustomLogitProcessor json.RawMessage `json:"custom_logit_processor"`
	ReturnHiddenStates   json.RawMessage `json:"return_hidden_states"`
}

// sglangSampling is SGLang's sampling_params: every field of its
// SamplingParams that a request may set (sampling_params.py). A key
// outside them is refused, as SGLang does.
type sglangSampling struct {
	// MaxNewTokens absent is SGLang's 128; null is up to the context.
	MaxNewTokens               json.RawMessage `json:"max_new_tokens"`
	Stop                       json.RawMessage `json:"stop"`
	StopTokenIDs               []int           `json:"stop_token_ids"`
	Temperature                *float64        `json:"temperature"`
	TopP                       *float64        `json:"top_p"`
	TopK                       *int            `json:"top_k"`
	MinP                       *float64        `json:"min_p"`
	N                          *int            `json:"n"`
	SamplingSeed               *int64          `json:"sampling_seed"`
	SkipSpecialTokens          *bool           `json:"skip_special_tokens"`
	SpacesBetweenSpecialTokens *bool           `json:"spaces_between_special_tokens"`
	NoStopTrim                 *bool           `json:"no_stop_trim"`
	StreamInterval             *int            `json:"stream_interval"`

	// Not implemented: refused unless absent or neutral.
	StopRegex         json.RawMessage `json:"stop_regex"`
	FrequencyPenalty  *float64        `json:"frequency_penalty"`
	PresencePenalty   *float64        `json:"presence_penalty"`
	RepetitionPenalty *float64        `json:"repetition_penalty"`
	MinNewTokens      *int            `json:"min_new_tokens"`
	JSONSchema        *string         `json:"json_schema"`
	Regex             *string         `json:"regex"`
	EBNF              *string         `json:"ebnf"`
	StructuralTag     *string         `json:"structural_tag"`
	IgnoreEOS         *bool           `json:"ignore_eos"`
	CustomParams      json.RawMessage `json:"custom_params"`
	LogitBias         json.RawMessage `json:"logit_bias"`
}

// generatePlan is a validated /generate request: one
// lm.GenerateRequest per prompt, and how to render the answer.
type generatePlan struct {
	reqs        []lm.GenerateRequest
	adapter     string // the loaded LoRA adapter named by lora_path, or ""
	rids        []string
	single      bool // one prompt: the answer is an object, not a list
	logprobs    bool
	logprobText bool
	noStopTrim  bool
}

// decodeGenerate parses and validates a /generate body against the
// served model's limits, with SGLang's messages where SGLang has them.
// A prompt is input_ids (a list of token ids, or a list of such lists
// for a batch) or, with a tokenizer, text (a string or a list of
// strings); one sampling_params object applies to every prompt.
// max_new_tokens is capped by the context, as SGLang's scheduler does
// (scheduler.py, init_req_max_new_tokens); with EngineSGLang an explicit
// one that reaches the context with the prompt is refused, as SGLang's
// tokenizer manager does.
func decodeGenerate(body []byte, lim limits) (*generatePlan, *apiError) {
	var req generateRequest
	if err := unmarshalObject(body, &req); err != nil {
		return nil, badRequest("", "%v", err)
	}
	if err := req.unsupported(); err != nil {
		return nil, err
	}
	prompts, single, aerr := req.prompts(lim.encode)
	if aerr != nil {
		return nil, aerr
	}
	sp, aerr := parseSGLangSampling(req.SamplingParams, lim)
	if aerr != nil {
		return nil, aerr
	}
	rids, aerr := parseRIDs(req.RID, len(prompts), single)
	if aerr != nil {
		return nil, aerr
	}
	adapter, aerr := parseLoraPath(req.LoraPath, len(prompts))
	if aerr != nil {
		return nil, aerr
	}
	p := &generatePlan{
		rids: rids, single: single, noStopTrim: sp.noStopTrim, adapter: adapter,
		logprobs:    req.ReturnLogprob != nil && *req.ReturnLogprob,
		logprobText: req.ReturnTextInLogprobs != nil && *req.ReturnTextInLogprobs,
		reqs:        make([]lm.GenerateRequest, len(prompts)),
	}
	for i, pr := range prompts {
		if err := checkPrompt(i, pr, 0, lim); err != nil {
			return nil, err
		}
		if lim.engine == EngineSGLang && sp.explicitMax && len(pr)+sp.maxNew >= lim.maxLen {
			// TokenizerManager._validate_one_request: SGLang refuses
			// what the scheduler would otherwise cut.
			return nil, badRequest("max_new_tokens", "Requested token count exceeds the model's maximum context length of %d tokens. You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
				lim.maxLen, len(pr)+sp.maxNew, len(pr), sp.maxNew)
		}
		params := sp.p
		params.Logprobs = p.logprobs
		room := lim.maxLen - len(pr)
		params.MaxNewTokens = room
		if sp.maxNew > 0 {
			params.MaxNewTokens = min(sp.maxNew, room)
		}
		p.reqs[i] = lm.GenerateRequest{Prompt: pr, Params: params}
	}
	return p, nil
}

// unsupported refuses what this server does not implement, rather than
// answering as if it had.
func (r *generateRequest) unsupported() *apiError {
	no := func(param, what string) *apiError {
		return badRequest(param, "%s is not supported by this server", what)
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{
		{"token_ids_logprob", r.TokenIDsLogprob}, {"input_embeds", r.InputEmbeds}, {"image_data", r.ImageData},
		{"video_data", r.VideoData}, {"audio_data", r.AudioData},
		{"session_params", r.SessionParams}, {"custom_logit_processor", r.CustomLogitProcessor},
		{"return_hidden_states", r.ReturnHiddenStates},
	} {
		if !neutralJSON(f.raw) {
			return no(f.name, f.name)
		}
	}
	// The log-probability options matter only with return_logprob.
	logprobs := r.ReturnLogprob != nil && *r.ReturnLogprob
	switch {
	case r.Stream != nil && *r.Stream:
		return no("stream", "stream")
	case logprobs && r.LogprobStartLen != nil && *r.LogprobStartLen != -1:
		return badRequest("logprob_start_len", "logprob_start_len %d: only -1 (the output tokens' log-probabilities) is supported by this server", *r.LogprobStartLen)
	case logprobs && r.TopLogprobsNum != nil && *r.TopLogprobsNum < 0:
		return badRequest("top_logprobs_num", "top_logprobs_num must be non-negative, got %d", *r.TopLogprobsNum)
	case logprobs && r.TopLogprobsNum != nil && *r.TopLogprobsNum > 0:
		return badRequest("top_logprobs_num", "top_logprobs_num is not supported by this server's /generate; its /v1/completions returns top log-probabilities (logprobs N)")
	}
	return nil
}

// neutralJSON reports whether raw is absent or a value that asks for
// nothing: null, false, "", [] or {}.
func neutralJSON(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", "false", `""`, "[]", "{}":
		return true
	}
	return false
}

// prompts reads input_ids or text into token ids, and whether the
// request is a single prompt (not a batch).
func (r *generateRequest) prompts(encode func(string) []int) ([][]int, bool, *apiError) {
	ids, text := bytes.TrimSpace(r.InputIDs), bytes.TrimSpace(r.Text)
	hasIDs, hasText := len(ids) > 0 && string(ids) != "null", len(text) > 0 && string(text) != "null"
	switch {
	case !hasIDs && !hasText:
		// io_struct.py, GenerateReqInput._validate_inputs.
		return nil, false, badRequest("input_ids", "Either text, input_ids or input_embeds should be provided.")
	case hasIDs && hasText:
		return nil, false, badRequest("input_ids", "give either text or input_ids, not both")
	case hasIDs:
		return parseInputIDs(ids)
	}
	var texts []string
	single := text[0] == '"'
	if single {
		var s string
		if err := json.Unmarshal(text, &s); err != nil {
			return nil, false, badRequest("text", "text must be a string or a list of strings")
		}
		texts = []string{s}
	} else if err := json.Unmarshal(text, &texts); err != nil {
		return nil, false, badRequest("text", "text must be a string or a list of strings")
	}
	switch {
	case len(texts) == 0:
		return nil, false, badRequest("text", "text cannot be an empty list")
	case len(texts) > maxChoices:
		return nil, false, badRequest("text", "%d prompts is more than %d in one request", len(texts), maxChoices)
	case encode == nil:
		return nil, false, badRequest("text", "text prompts need a tokenizer, and this server has none: send input_ids")
	}
	out := make([][]int, len(texts))
	for i, t := range texts {
		out[i] = encode(t)
	}
	return out, single, nil
}

// parseInputIDs reads input_ids: a list of token ids (one prompt) or a
// list of such lists (a batch).
func parseInputIDs(raw []byte) ([][]int, bool, *apiError) {
	shape := badRequest("input_ids", "input_ids must be a list of integer token ids or a list of such lists")
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, false, shape
	}
	if len(items) == 0 {
		// io_struct.py, GenerateReqInput._determine_batch_size.
		return nil, false, badRequest("input_ids", "input_ids cannot be empty.")
	}
	if first := bytes.TrimSpace(items[0]); len(first) == 0 || first[0] != '[' {
		var ids []int
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, false, shape
		}
		return [][]int{ids}, true, nil
	}
	var lists [][]int
	if err := json.Unmarshal(raw, &lists); err != nil {
		return nil, false, shape
	}
	if len(lists) > maxChoices {
		return nil, false, badRequest("input_ids", "%d prompts is more than %d in one request", len(lists), maxChoices)
	}
	return lists, false, nil
}

// parseRIDs reads rid: absent or null draws an id per prompt; a string
// names a single prompt, or is the prefix of a batch's ids ("rid_0",
// "rid_1", …); a list gives one per prompt (io_struct.py,
// GenerateReqInput._normalize_rid).
func parseRIDs(raw json.RawMessage, n int, single bool) ([]string, *apiError) {
	raw = bytes.TrimSpace(raw)
	rids := make([]string, n)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		for i := range rids {
			rids[i] = randomHex()
		}
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("rid", "The rid should be a string or a list of strings.")
		}
		if single {
			rids[0] = s
			break
		}
		for i := range rids {
			rids[i] = s + "_" + strconv.Itoa(i)
		}
	default:
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, badRequest("rid", "The rid should be a string or a list of strings.")
		}
		if len(list) != n {
			return nil, badRequest("rid", "The specified rids length mismatch with the batch_size for batch processing.")
		}
		seen := make(map[string]bool, n)
		for _, r := range list {
			if seen[r] {
				return nil, badRequest("rid", "Duplicate request IDs detected within the request: [%q]", r)
			}
			seen[r] = true
		}
		copy(rids, list)
	}
	return rids, nil
}

// sglangParams are a request's sampling_params, read.
type sglangParams struct {
	p lm.SampleParams
	// maxNew is the bound on new tokens, 0 for none but the context;
	// explicitMax tells a number the request gave from the default.
	maxNew      int
	explicitMax bool
	noStopTrim  bool
}

// parseSGLangSampling maps sampling_params onto policy parameters with
// SGLang's defaults (temperature 1, top_p 1, top_k and min_p off, 128 new
// tokens) and SGLang's messages (sampling_params.py,
// SamplingParams.verify).
func parseSGLangSampling(raw json.RawMessage, lim limits) (sglangParams, *apiError) {
	sp, maxNew, explicit, noStopTrim, aerr := parseSGLangSamplingFields(raw, lim)
	return sglangParams{p: sp, maxNew: maxNew, explicitMax: explicit, noStopTrim: noStopTrim}, aerr
}

// parseSGLangSamplingFields is parseSGLangSampling's work; maxNew is 0
// for no bound but the context.
func parseSGLangSamplingFields(raw json.RawMessage, lim limits) (p lm.SampleParams, maxNew int, explicit, noStopTrim bool, aerr *apiError) {
	var sp sglangSampling
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '[':
		return p, 0, false, false, badRequest("sampling_params", "a list of sampling_params (one per prompt) is not supported by this server: send one object for all")
	case raw[0] != '{':
		return p, 0, false, false, badRequest("sampling_params", "sampling_params must be an object")
	default:
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sp); err != nil {
			return p, 0, false, false, badRequest("sampling_params", "sampling_params: %v", samplingError(err))
		}
	}
	if err := sp.unsupported(); err != nil {
		return p, 0, false, false, err
	}
	p = lm.SampleParams{Temperature: 1, TopP: 1, TopK: -1}
	if sp.Temperature != nil {
		p.Temperature = *sp.Temperature
	}
	if sp.TopP != nil {
		p.TopP = *sp.TopP
	}
	if sp.TopK != nil {
		p.TopK = *sp.TopK
	}
	if sp.MinP != nil {
		p.MinP = *sp.MinP
	}
	switch {
	case p.Temperature < 0:
		return p, 0, false, false, badRequest("temperature", "temperature must be a non-negative finite number, got %g.", p.Temperature)
	case !(p.TopP > 0 && p.TopP <= 1):
		return p, 0, false, false, badRequest("top_p", "top_p must be in (0, 1], got %g.", p.TopP)
	case !(p.MinP >= 0 && p.MinP <= 1):
		return p, 0, false, false, badRequest("min_p", "min_p must be in [0, 1], got %g.", p.MinP)
	case p.TopK < 1 && p.TopK != -1:
		return p, 0, false, false, badRequest("top_k", "top_k must be -1 (disable) or at least 1, got %d.", p.TopK)
	}
	maxNew = sglangDefaultMaxNewTokens
	switch m := bytes.TrimSpace(sp.MaxNewTokens); {
	case len(m) == 0:
	case string(m) == "null":
		maxNew = 0
	default:
		explicit = true
		if err := json.Unmarshal(m, &maxNew); err != nil {
			return p, 0, false, false, badRequest("max_new_tokens", "sampling_params.max_new_tokens: want an integer in range or null, got %.40s", m)
		}
		if maxNew < 0 {
			return p, 0, false, false, badRequest("max_new_tokens", "max_new_tokens must be at least 0, got %d.", maxNew)
		}
		if maxNew == 0 {
			return p, 0, false, false, badRequest("max_new_tokens", "max_new_tokens 0 (prefill only) is not supported by this server")
		}
	}
	stops, err := parseStop(sp.Stop)
	if err != nil {
		return p, 0, false, false, err
	}
	if len(stops) > 0 && lim.decode == nil {
		return p, 0, false, false, badRequest("stop", "stop strings need a tokenizer, and this server has none: use stop_token_ids")
	}
	p.Stop = stops
	p.StopTokenIDs = sp.StopTokenIDs
	if sp.SamplingSeed != nil {
		s := uint64(*sp.SamplingSeed) // int64 bits, as policy/openai sends them
		p.Seed = &s
	}
	if err := lm.CheckSampleParams(p); err != nil {
		return p, 0, false, false, badRequest("", "%v", err)
	}
	return p, maxNew, explicit, sp.NoStopTrim != nil && *sp.NoStopTrim, nil
}

// samplingError rewrites a sampling_params decoding error to name the
// field and the JSON type it wants.
func samplingError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: want %s, got JSON %s", te.Field, httpjson.JSONKind(te.Type), te.Value)
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: "); ok {
		return errors.New(msg) // "unknown field \"x\""
	}
	return err
}

// unsupported refuses the sampling parameters this server does not
// implement, unless they are neutral.
func (s *sglangSampling) unsupported() *apiError {
	no := func(param string) *apiError {
		return badRequest(param, "sampling_params.%s is not supported by this server", param)
	}
	switch {
	case s.N != nil && *s.N != 1:
		return badRequest("n", "sampling_params.n %d: parallel sampling is not supported by this server; send the prompt n times", *s.N)
	case !neutralJSON(s.StopRegex):
		return no("stop_regex")
	case s.FrequencyPenalty != nil && *s.FrequencyPenalty != 0:
		return no("frequency_penalty")
	case s.PresencePenalty != nil && *s.PresencePenalty != 0:
		return no("presence_penalty")
	case s.RepetitionPenalty != nil && *s.RepetitionPenalty != 1:
		return no("repetition_penalty")
	case s.MinNewTokens != nil && *s.MinNewTokens != 0:
		return no("min_new_tokens")
	case s.JSONSchema != nil:
		return no("json_schema")
	case s.Regex != nil:
		return no("regex")
	case s.EBNF != nil:
		return no("ebnf")
	case s.StructuralTag != nil:
		return no("structural_tag")
	case s.IgnoreEOS != nil && *s.IgnoreEOS:
		return no("ignore_eos")
	case !neutralJSON(s.CustomParams):
		return no("custom_params")
	case !neutralJSON(s.LogitBias):
		return no("logit_bias")
	}
	return nil
}

// generateOutput is one prompt's answer: SGLang's out_dict
// (tokenizer_manager.py, _handle_batch_output).
type generateOutput struct {
	Text      string       `json:"text"`
	OutputIDs []int        `json:"output_ids"`
	MetaInfo  generateMeta `json:"meta_info"`
}

// generateMeta is SGLang's meta_info, the fields this server fills.
type generateMeta struct {
	ID           string `json:"id"`
	FinishReason any    `json:"finish_reason"`
	PromptTokens int    `json:"prompt_tokens"`
	// WeightVersion names the weights that generated every token (null
	// with EngineVLLM).
	WeightVersion    *string `json:"weight_version"`
	CompletionTokens int     `json:"completion_tokens"`
	CachedTokens     int     `json:"cached_tokens"`
	// OutputTokenLogprobs, with return_logprob, holds [logprob, token id,
	// text or null] per generated token.
	OutputTokenLogprobs *[][3]any `json:"output_token_logprobs,omitempty"`
	E2ELatency          float64   `json:"e2e_latency"`
}

// handleGenerate serves SGLang's POST /generate through the same
// admission, pause and weight-version machinery as /v1/completions: one
// Model.Generate call per request. Refusals answer SGLang's
// {"error": {"message"}} with their status.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := readBody(w, r, writeGenerateError)
	if !ok {
		return
	}
	p, aerr := decodeGenerate(body, s.lim)
	if aerr != nil {
		writeGenerateError(w, aerr)
		return
	}
	out, err := s.generate(r.Context(), p.reqs, 1, p.adapter)
	var unknown *unknownAdapterError
	if errors.As(err, &unknown) {
		// LoRARegistry.acquire's ValueError.
		writeGenerateError(w, badRequest("lora_path", "The following requested LoRA adapters are not loaded: %s\nLoaded adapters: %s.", unknown.name, pyKeys(unknown.loaded)))
		return
	}
	if err != nil {
		writeGenerateError(w, generationError(err, r))
		return
	}
	outputs := make([]generateOutput, len(p.reqs))
	for i := range p.reqs {
		o, err := s.renderGenerate(i, p, out, time.Since(start))
		if err != nil {
			writeGenerateError(w, &apiError{Status: http.StatusInternalServerError, Type: "InternalServerError", Message: err.Error()})
			return
		}
		outputs[i] = o
	}
	if p.single {
		writeJSON(w, http.StatusOK, outputs[0])
		return
	}
	writeJSON(w, http.StatusOK, outputs)
}

// renderGenerate builds the answer to prompt i: output_ids are every
// generated token (a stop token included); text drops a stop token's
// text and cuts a stop string unless no_stop_trim (detokenizer_manager.py,
// trim_matched_stop); finish_reason is {"type": "stop", "matched": the
// stop or end-of-sequence token, or the stop string}, {"type": "length",
// "length": the bound on new tokens} or, for a pause or reload in abort
// mode, {"type": "abort", "message": "Aborted", …} with the tokens
// generated until then, as SGLang answers an aborted request
// (schedule_batch.py, FINISH_*.to_json).
func (s *Server) renderGenerate(i int, p *generatePlan, out outcome, elapsed time.Duration) (generateOutput, error) {
	req := p.reqs[i]
	g := out.gen(i)
	o := generateOutput{
		OutputIDs: append([]int{}, g.Tokens...),
		MetaInfo: generateMeta{
			ID: p.rids[i], PromptTokens: len(req.Prompt), WeightVersion: s.reported(out.eng),
			CompletionTokens: len(g.Tokens), CachedTokens: g.CachedTokens, E2ELatency: elapsed.Seconds(),
		},
	}
	switch {
	case g.FinishReason == lm.FinishAbort:
		o.MetaInfo.FinishReason = map[string]any{"type": "abort", "message": "Aborted", "status_code": nil, "err_type": nil}
	case g.FinishReason == lm.FinishLength:
		o.MetaInfo.FinishReason = map[string]any{"type": "length", "length": req.Params.MaxNewTokens}
	case g.FinishReason == lm.FinishStop:
		o.MetaInfo.FinishReason = map[string]any{"type": "stop", "matched": g.StopString}
	case g.FinishReason == lm.FinishStopToken:
		o.MetaInfo.FinishReason = map[string]any{"type": "stop", "matched": g.StopToken}
	default:
		return o, fmt.Errorf("serve: generation %d ended with unknown finish reason %q", i, g.FinishReason)
	}
	o.Text = s.text(req.Prompt, g, p.noStopTrim)
	if p.logprobs {
		lps, err := s.modeLogprobs(i, g)
		if err != nil {
			return o, err
		}
		entries := make([][3]any, len(g.Tokens))
		for j, id := range g.Tokens {
			var text any
			if p.logprobText && s.lim.decode != nil {
				text = s.lim.decode([]int{id})
			}
			// SGLang clamps at float32's lowest finite value
			// (layers/sampler.py, torch.finfo(dtype).min).
			entries[j] = [3]any{math.Max(float64(lps[j]), -math.MaxFloat32), id, text}
		}
		o.MetaInfo.OutputTokenLogprobs = &entries
	}
	return o, nil
}

// writeGenerateError answers a refused /generate request with SGLang's
// {"error": {"message"}} (http_server.py, _create_error_response).
func writeGenerateError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, map[string]any{"error": map[string]any{"message": e.Message}})
}
