package rollout

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Llama3JSON parses the JSON tool calls of Llama 3.1, 3.2 and 3.3, as
// their chat templates ask for ("respond with JSON for a function call …
// in the format {"name": function name, "parameters": dictionary of
// argument name and its value}") and vLLM's "llama3_json" tool parser
// reads them (vllm/tool_parsers/llama_tool_parser.py):
//
//	{"name": "get_weather", "parameters": {"city": "Paris"}}
//
// optionally after <|python_tag|>, with "arguments" accepted for
// "parameters" and several calls separated by ";". As in vLLM, a JSON
// object with a "name" anywhere in the turn is a call, and other braces
// are text; unlike vLLM, which then returns no call at all, an object
// that has a "name" but no usable arguments, or a call that is not valid
// JSON where a call must be (at the start of the turn, after
// <|python_tag|>, or after a ";" that follows a call), is a malformed
// call whose ParsedCall.Err wraps ErrBadToolCall. An object at the start
// of the turn with neither "name" nor "parameters"/"arguments" is a plain
// JSON answer, not a call.
//
// The turn ends at the model's end-of-turn token (<|eot_id|>, or
// <|eom_id|> after <|python_tag|>), so there is no stop string.
type Llama3JSON struct{}

// The special tokens of Llama 3's tool calling.
const (
	llamaPythonTag = "<|python_tag|>"
	llamaEOT       = "<|eot_id|>"
	llamaEOM       = "<|eom_id|>"
)

// StopStrings returns nil: a call ends the turn with <|eot_id|>.
func (Llama3JSON) StopStrings() []string { return nil }

// Parse returns the calls in text, in order.
func (Llama3JSON) Parse(text string) []ParsedCall {
	anchor := len(text) - len(strings.TrimLeft(text, " \t\r\n"))
	if i := strings.Index(text, llamaPythonTag); i >= 0 {
		rest := text[i+len(llamaPythonTag):]
		anchor = len(text) - len(strings.TrimLeft(rest, " \t\r\n"))
	}
	var calls []ParsedCall
	prevEnd := -1 // end of the previous call
	for pos := 0; ; {
		i := indexFrom(text, "{", pos)
		if i < 0 {
			return calls
		}
		anchored := i == anchor
		if prevEnd >= 0 {
			sep := strings.TrimSpace(text[prevEnd:i])
			anchored = anchored || sep == ";"
		}
		var obj map[string]json.RawMessage
		dec := json.NewDecoder(strings.NewReader(text[i:]))
		if err := dec.Decode(&obj); err != nil {
			if !anchored {
				pos = i + 1
				continue
			}
			raw := strings.TrimRight(text[i:], " \t\r\n")
			raw = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(raw, llamaEOT), llamaEOM))
			return append(calls, ParsedCall{Raw: raw, Err: fmt.Errorf("%w: not a JSON object: %v", ErrBadToolCall, err)})
		}
		end := i + int(dec.InputOffset())
		_, hasName := obj["name"]
		params, hasParams := obj["parameters"]
		args, hasArgs := obj["arguments"]
		if !hasName && !(anchored && (hasParams || hasArgs)) {
			pos = end // a JSON object in the text, not a call
			continue
		}
		calls = append(calls, llama3Call(text[i:end], obj["name"], params, hasParams, args, hasArgs))
		pos, prevEnd = end, end
	}
}

func llama3Call(raw string, name, params json.RawMessage, hasParams bool, args json.RawMessage, hasArgs bool) ParsedCall {
	c := ParsedCall{Raw: raw}
	bad := func(format string, a ...any) ParsedCall {
		c.Err = fmt.Errorf("%w: %s", ErrBadToolCall, fmt.Sprintf(format, a...))
		return c
	}
	var n string
	if len(name) == 0 {
		return bad(`no "name"`)
	}
	if json.Unmarshal(name, &n) != nil || n == "" {
		return bad(`"name" is %s, not a tool name`, name)
	}
	c.Name = n
	switch {
	case hasParams && hasArgs:
		return bad(`tool %q: both "parameters" and "arguments"`, n)
	case !hasParams && !hasArgs:
		return bad(`tool %q: no "parameters"`, n)
	case hasArgs:
		params = args
	}
	a, err := objectArgs(params)
	if err != nil {
		return bad("tool %q: %v", n, err)
	}
	c.Arguments = a
	return c
}
