package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/agentrl/agentrl/internal/httpjson"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/tokenizer"
)

const (
	// maxBodyBytes bounds a request body.
	maxBodyBytes = 64 << 20
	// maxTopLogprobs is OpenAI's (and vLLM's default) cap on top_logprobs.
	maxTopLogprobs = 20
	// maxN is OpenAI's cap on n, the choices of one request.
	maxN = 128
)

// chatRequest is the body of POST /v1/chat/completions: OpenAI's
// ChatCompletionCreateParams with vLLM's extensions (top_k, min_p,
// chat_template_kwargs, return_token_ids), the fields this server reads.
// Pointers tell an absent or null field from a zero. Fields it does not
// implement are read only to refuse values that would change the answer.
type chatRequest struct {
	Model               *string                    `json:"model"`
	Messages            []json.RawMessage          `json:"messages"`
	Tools               []json.RawMessage          `json:"tools"`
	ToolChoice          json.RawMessage            `json:"tool_choice"`
	ParallelToolCalls   *bool                      `json:"parallel_tool_calls"`
	N                   *int                       `json:"n"`
	MaxTokens           *int                       `json:"max_tokens"`
	MaxCompletionTokens *int                       `json:"max_completion_tokens"`
	Temperature         *float64                   `json:"temperature"`
	TopP                *float64                   `json:"top_p"`
	TopK                *int                       `json:"top_k"`
	MinP                *float64                   `json:"min_p"`
	Seed                *int64                     `json:"seed"`
	Stop                json.RawMessage            `json:"stop"`
	Stream              *bool                      `json:"stream"`
	StreamOptions       *streamOptions             `json:"stream_options"`
	Logprobs            *bool                      `json:"logprobs"`
	TopLogprobs         *int                       `json:"top_logprobs"`
	User                *string                    `json:"user"`
	ChatTemplateKwargs  map[string]json.RawMessage `json:"chat_template_kwargs"`
	ReturnTokenIDs      *bool                      `json:"return_token_ids"`

	// Not implemented: refused unless absent or neutral.
	FrequencyPenalty     *float64           `json:"frequency_penalty"`
	PresencePenalty      *float64           `json:"presence_penalty"`
	RepetitionPenalty    *float64           `json:"repetition_penalty"`
	LogitBias            map[string]float64 `json:"logit_bias"`
	ResponseFormat       json.RawMessage    `json:"response_format"`
	Functions            json.RawMessage    `json:"functions"`
	FunctionCall         json.RawMessage    `json:"function_call"`
	Audio                json.RawMessage    `json:"audio"`
	Prediction           json.RawMessage    `json:"prediction"`
	ContinueFinalMessage *bool              `json:"continue_final_message"`
	AddGenerationPrompt  *bool              `json:"add_generation_prompt"`
	Echo                 *bool              `json:"echo"`
	IgnoreEOS            *bool              `json:"ignore_eos"`
	MinTokens            *int               `json:"min_tokens"`
}

type streamOptions struct {
	IncludeUsage *bool `json:"include_usage"`
}

// apiError is a refused request: an HTTP status and OpenAI's error
// object fields.
type apiError = httpjson.Error

// badRequest is a 400 "invalid_request_error", OpenAI's type for it.
func badRequest(param, format string, a ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, a...)}
}

// chatPlan is a validated chat request.
type chatPlan struct {
	model          string
	messages       []tokenizer.Message
	tools          []json.RawMessage
	options        map[string]json.RawMessage
	parseTools     bool // tools given and tool_choice "auto"
	n              int  // choices
	params         lm.SampleParams
	maxTokensSet   bool // the request bounded max_tokens
	logprobs       bool
	topLogprobs    int
	stream         bool
	includeUsage   bool
	returnTokenIDs bool
	user           string
}

// decodeChat parses and validates a chat completions body.
func decodeChat(body []byte) (*chatPlan, *apiError) {
	var req chatRequest
	if err := httpjson.UnmarshalObject(body, &req); err != nil {
		return nil, badRequest("", "%v", err)
	}
	if err := req.unsupported(); err != nil {
		return nil, err
	}
	p := &chatPlan{options: req.ChatTemplateKwargs}
	if req.Model != nil {
		p.model = *req.Model
	}
	if req.User != nil {
		p.user = *req.User
	}
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "messages must be a non-empty list")
	}
	p.messages = make([]tokenizer.Message, len(req.Messages))
	for i, raw := range req.Messages {
		m, err := parseMessage(raw)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("messages[%d]", i), "messages[%d]: %v", i, err)
		}
		p.messages[i] = m
	}
	for i, raw := range req.Tools {
		t, err := parseTool(raw)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("tools[%d]", i), "tools[%d]: %v", i, err)
		}
		req.Tools[i] = t
	}
	p.tools = req.Tools
	choice, err := parseToolChoice(req.ToolChoice, len(p.tools) > 0)
	if err != nil {
		return nil, err
	}
	p.parseTools = len(p.tools) > 0 && choice == "auto"
	p.n = 1
	if req.N != nil {
		if *req.N < 1 || *req.N > maxN {
			return nil, badRequest("n", "n must be between 1 and %d, got %d", maxN, *req.N)
		}
		p.n = *req.N
	}
	if p.params, err = req.sampleParams(); err != nil {
		return nil, err
	}
	p.maxTokensSet = p.params.MaxNewTokens > 0
	if req.Logprobs != nil {
		p.logprobs = *req.Logprobs
	}
	if req.TopLogprobs != nil {
		n := *req.TopLogprobs
		switch {
		case n < 0 || n > maxTopLogprobs:
			return nil, badRequest("top_logprobs", "top_logprobs must be between 0 and %d, got %d", maxTopLogprobs, n)
		case n > 0 && !p.logprobs:
			return nil, badRequest("top_logprobs", "top_logprobs needs logprobs set to true")
		}
		p.topLogprobs = n
	}
	p.stream = req.Stream != nil && *req.Stream
	if req.StreamOptions != nil && !p.stream {
		return nil, badRequest("stream_options", "stream_options is only allowed when stream is true")
	}
	p.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage != nil && *req.StreamOptions.IncludeUsage
	p.returnTokenIDs = req.ReturnTokenIDs != nil && *req.ReturnTokenIDs
	return p, nil
}

// unsupported refuses what this server does not implement, rather than
// answering as if it had.
func (r *chatRequest) unsupported() *apiError {
	no := func(param, what string) *apiError {
		return badRequest(param, "%s is not supported by this server", what)
	}
	null := func(raw json.RawMessage) bool {
		t := bytes.TrimSpace(raw)
		return len(t) == 0 || string(t) == "null"
	}
	switch {
	case r.FrequencyPenalty != nil && *r.FrequencyPenalty != 0:
		return no("frequency_penalty", "frequency_penalty")
	case r.PresencePenalty != nil && *r.PresencePenalty != 0:
		return no("presence_penalty", "presence_penalty")
	case r.RepetitionPenalty != nil && *r.RepetitionPenalty != 1:
		return no("repetition_penalty", "repetition_penalty")
	case len(r.LogitBias) > 0:
		return no("logit_bias", "logit_bias")
	case !null(r.ResponseFormat) && !textFormat(r.ResponseFormat):
		return no("response_format", `response_format other than {"type": "text"}`)
	case !null(r.Functions) || !null(r.FunctionCall):
		return no("functions", "the deprecated functions and function_call (use tools)")
	case !null(r.Audio):
		return no("audio", "audio")
	case !null(r.Prediction):
		return no("prediction", "prediction")
	case r.ContinueFinalMessage != nil && *r.ContinueFinalMessage:
		return no("continue_final_message", "continue_final_message")
	case r.AddGenerationPrompt != nil && !*r.AddGenerationPrompt:
		return no("add_generation_prompt", "add_generation_prompt false")
	case r.Echo != nil && *r.Echo:
		return no("echo", "echo")
	case r.IgnoreEOS != nil && *r.IgnoreEOS:
		return no("ignore_eos", "ignore_eos")
	case r.MinTokens != nil && *r.MinTokens != 0:
		return no("min_tokens", "min_tokens")
	}
	return nil
}

// textFormat reports whether raw is {"type": "text"}.
func textFormat(raw json.RawMessage) bool {
	var f struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &f) == nil && f.Type == "text"
}

// sampleParams maps the sampling fields, with OpenAI's defaults:
// temperature 1, top_p 1, no token bound but the context (chat
// completions have no default max_tokens).
func (r *chatRequest) sampleParams() (lm.SampleParams, *apiError) {
	p := lm.SampleParams{Temperature: 1, TopP: 1}
	if r.Temperature != nil {
		p.Temperature = *r.Temperature
	}
	if !(p.Temperature >= 0 && p.Temperature <= 2) {
		return p, badRequest("temperature", "temperature must be between 0 and 2, got %g", p.Temperature)
	}
	if r.TopP != nil {
		p.TopP = *r.TopP
	}
	if !(p.TopP > 0 && p.TopP <= 1) {
		return p, badRequest("top_p", "top_p must be in (0, 1], got %g", p.TopP)
	}
	if r.TopK != nil {
		p.TopK = *r.TopK
	}
	if p.TopK < -1 {
		return p, badRequest("top_k", "top_k must be -1 or 0 (disable), or at least 1, got %d", p.TopK)
	}
	if r.MinP != nil {
		p.MinP = *r.MinP
	}
	if !(p.MinP >= 0 && p.MinP <= 1) {
		return p, badRequest("min_p", "min_p must be in [0, 1], got %g", p.MinP)
	}
	maxTokens, param := r.MaxCompletionTokens, "max_completion_tokens"
	if maxTokens == nil {
		maxTokens, param = r.MaxTokens, "max_tokens"
	}
	if maxTokens != nil {
		if *maxTokens < 1 {
			return p, badRequest(param, "%s must be at least 1, got %d", param, *maxTokens)
		}
		p.MaxNewTokens = *maxTokens
	}
	if r.Seed != nil {
		s := uint64(*r.Seed)
		p.Seed = &s
	}
	stops, err := parseStop(r.Stop)
	if err != nil {
		return p, err
	}
	p.Stop = stops
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
			return nil, badRequest("stop", "stop cannot contain an empty string")
		}
	}
	return stops, nil
}

// parseToolChoice reads "tool_choice": absent or null ("auto" with
// tools, "none" without), "auto" or "none". "required" and a named
// function would need constrained decoding, which this server does not
// do.
func parseToolChoice(raw json.RawMessage, haveTools bool) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		if haveTools {
			return "auto", nil
		}
		return "none", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", badRequest("tool_choice", `tool_choice other than "auto" or "none" (a named function) is not supported by this server`)
	}
	switch s {
	case "auto":
		if !haveTools {
			return "", badRequest("tool_choice", `tool_choice "auto" needs tools`)
		}
		return s, nil
	case "none":
		return s, nil
	case "required":
		return "", badRequest("tool_choice", `tool_choice "required" is not supported by this server`)
	}
	return "", badRequest("tool_choice", `tool_choice must be "auto" or "none", got %q`, s)
}

// parseTool checks one entry of "tools": {"type": "function",
// "function": {"name", …}}, returned as sent (its key order kept, as a
// chat template renders it), compacted.
func parseTool(raw json.RawMessage) (json.RawMessage, error) {
	var t struct {
		Type     *string `json:"type"`
		Function *struct {
			Name *string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("want an object {\"type\": \"function\", \"function\": {\"name\", …}}: %v", err)
	}
	switch {
	case t.Type == nil || *t.Type != "function":
		return nil, errors.New(`type must be "function"`)
	case t.Function == nil || t.Function.Name == nil || *t.Function.Name == "":
		return nil, errors.New("function.name is required")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// wireMessage is one message of "messages" as OpenAI's clients send it.
type wireMessage struct {
	Role             *string         `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             *string         `json:"name"`
	ToolCalls        []wireToolCall  `json:"tool_calls"`
	ToolCallID       *string         `json:"tool_call_id"`
	ReasoningContent *string         `json:"reasoning_content"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// parseMessage reads one message into the template's form: content as
// text (a list of text parts joined by newlines, as vLLM joins them),
// "developer" read as "system", and tool-call arguments that are a JSON
// string holding an object decoded to that object (vLLM hands
// templates objects; Qwen's render them with tojson).
func parseMessage(raw json.RawMessage) (tokenizer.Message, error) {
	var w wireMessage
	if err := httpjson.UnmarshalObject(raw, &w); err != nil {
		return tokenizer.Message{}, err
	}
	if w.Role == nil {
		return tokenizer.Message{}, errors.New("role is required")
	}
	m := tokenizer.Message{Role: *w.Role}
	switch m.Role {
	case "developer":
		m.Role = "system"
	case "system", "user", "assistant", "tool":
	default:
		return m, fmt.Errorf("role %q is not one of system, developer, user, assistant, tool", m.Role)
	}
	content, isNull, err := parseContent(w.Content)
	if err != nil {
		return m, err
	}
	if isNull && m.Role != "assistant" {
		return m, fmt.Errorf("content is required for role %q", m.Role)
	}
	m.Content = content
	if w.Name != nil {
		m.Name = *w.Name
	}
	if len(w.ToolCalls) > 0 && m.Role != "assistant" {
		return m, errors.New("tool_calls are only allowed on assistant messages")
	}
	for i, c := range w.ToolCalls {
		if c.Type != "" && c.Type != "function" {
			return m, fmt.Errorf("tool_calls[%d].type must be \"function\"", i)
		}
		if c.Function.Name == "" {
			return m, fmt.Errorf("tool_calls[%d].function.name is required", i)
		}
		args, err := normalizeArguments(c.Function.Arguments)
		if err != nil {
			return m, fmt.Errorf("tool_calls[%d].function.arguments: %v", i, err)
		}
		m.ToolCalls = append(m.ToolCalls, tokenizer.ToolCall{ID: c.ID, Type: "function",
			Function: tokenizer.FunctionCall{Name: c.Function.Name, Arguments: args}})
	}
	if w.ToolCallID != nil {
		if m.Role != "tool" {
			return m, errors.New("tool_call_id is only allowed on tool messages")
		}
		m.ToolCallID = *w.ToolCallID
	}
	if w.ReasoningContent != nil {
		if m.Role != "assistant" {
			return m, errors.New("reasoning_content is only allowed on assistant messages")
		}
		rc := *w.ReasoningContent
		m.ReasoningContent = &rc
	}
	return m, nil
}

// parseContent reads "content": a string, null, or a list of parts of
// which only {"type": "text", "text"} are taken.
func parseContent(raw json.RawMessage) (string, bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, fmt.Errorf("content: %v", err)
		}
		return s, false, nil
	case '[':
		var parts []struct {
			Type *string `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", false, fmt.Errorf("content: want a string or a list of {\"type\": \"text\", \"text\"} parts: %v", err)
		}
		texts := make([]string, len(parts))
		for i, p := range parts {
			switch {
			case p.Type == nil:
				return "", false, fmt.Errorf("content[%d]: type is required", i)
			case *p.Type != "text":
				return "", false, fmt.Errorf("content[%d]: parts of type %q are not supported by this server (text only)", i, *p.Type)
			case p.Text == nil:
				return "", false, fmt.Errorf("content[%d]: text is required", i)
			}
			texts[i] = *p.Text
		}
		return strings.Join(texts, "\n"), false, nil
	}
	return "", false, errors.New("content: want a string, null or a list of parts")
}

// normalizeArguments reads a tool call's arguments: a JSON string (as
// OpenAI sends them) holding an object becomes that object, compacted
// with its key order kept; a string holding anything else stays the
// string; an object (which some clients send) is compacted; absent or
// null is {}.
func normalizeArguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}"), nil
	}
	var b bytes.Buffer
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		inner := bytes.TrimSpace([]byte(s))
		if len(inner) > 0 && inner[0] == '{' && json.Valid(inner) {
			if err := json.Compact(&b, inner); err != nil {
				return nil, err
			}
			return b.Bytes(), nil
		}
		return raw, nil
	case '{':
		if err := json.Compact(&b, raw); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	return nil, errors.New("want a JSON string or an object")
}

// checkFinite refuses a score that is NaN or infinite.
func checkFinite(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("record: reward %v is not a finite number", v)
	}
	return nil
}
