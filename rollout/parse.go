package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrBadToolCall is wrapped by the error of a tool call the parser found
// but could not decode (bad JSON, no name, arguments that are not an
// object). The engine answers such a call with an error result.
var ErrBadToolCall = errors.New("rollout: malformed tool call")

// ParsedCall is one tool call found in a generation's text.
type ParsedCall struct {
	// Name is the function name; empty when Err is set and no name could
	// be read.
	Name string
	// Arguments is a JSON object, compacted; nil when Err is set.
	Arguments json.RawMessage
	// Raw is the call's text as the model wrote it, tags included.
	Raw string
	// Err, when not nil, wraps ErrBadToolCall and says what is wrong.
	Err error
}

// Parser finds tool calls in the text of one assistant turn.
type Parser interface {
	// Parse returns the calls in text, in order; none means the turn
	// made no call and the trajectory ends.
	Parse(text string) []ParsedCall
	// StopStrings are passed to the sampler as stop strings so that a
	// turn ends right after a call is closed; nil for none.
	StopStrings() []string
}

// SchemaParser is a Parser whose reading of a call depends on the called
// tool's JSON schema, such as Qwen3Coder, whose argument values are text
// converted by the parameters' types. The engine calls ParseWithSchemas
// with the schemas of the request's tools (tool.Tool.Schema) instead of
// Parse.
type SchemaParser interface {
	Parser
	// ParseWithSchemas is Parse given the tools' OpenAI function schemas.
	ParseWithSchemas(text string, schemas []json.RawMessage) []ParsedCall
}

// parseTurn finds the calls in text with p, giving a SchemaParser the
// tools' schemas.
func parseTurn(p Parser, text string, schemas []json.RawMessage) []ParsedCall {
	if sp, ok := p.(SchemaParser); ok {
		return sp.ParseWithSchemas(text, schemas)
	}
	return p.Parse(text)
}

// Hermes parses Hermes-style tool calls, as Qwen2.5/Qwen3's chat
// templates ask for and vLLM's "hermes" tool parser reads
// (vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py):
//
//	<tool_call>
//	{"name": "code_interpreter", "arguments": {"code": "print(1)"}}
//	</tool_call>
//
// Only closed tags count; an unclosed <tool_call> (a turn cut by its token
// budget) is no call. Arguments given as a JSON string holding an object
// are accepted, as the chat template renders string arguments verbatim.
type Hermes struct {
	// Open and Close are the tags; empty means <tool_call> and
	// </tool_call>.
	Open, Close string
	// NoStop leaves the close tag out of the stop strings, so that one
	// turn may hold several calls and ends at the end-of-turn token.
	NoStop bool
}

func (h Hermes) tags() (string, string) {
	open, close := h.Open, h.Close
	if open == "" {
		open = "<tool_call>"
	}
	if close == "" {
		close = "</tool_call>"
	}
	return open, close
}

// StopStrings returns the close tag, unless NoStop is set.
func (h Hermes) StopStrings() []string {
	if h.NoStop {
		return nil
	}
	_, close := h.tags()
	return []string{close}
}

// Parse returns every <tool_call>…</tool_call> in text.
func (h Hermes) Parse(text string) []ParsedCall {
	open, close := h.tags()
	var calls []ParsedCall
	for {
		i := strings.Index(text, open)
		if i < 0 {
			return calls
		}
		rest := text[i+len(open):]
		j := strings.Index(rest, close)
		if j < 0 {
			return calls
		}
		raw := text[i : i+len(open)+j+len(close)]
		calls = append(calls, parseHermesBody(rest[:j], raw))
		text = rest[j+len(close):]
	}
}

func parseHermesBody(body, raw string) ParsedCall {
	c := ParsedCall{Raw: raw}
	var v struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	if err := dec.Decode(&v); err != nil {
		c.Err = fmt.Errorf("%w: body is not a JSON object: %v", ErrBadToolCall, err)
		return c
	}
	if dec.More() {
		c.Err = fmt.Errorf("%w: text after the JSON object", ErrBadToolCall)
		return c
	}
	if v.Name == nil || *v.Name == "" {
		c.Err = fmt.Errorf("%w: no \"name\"", ErrBadToolCall)
		return c
	}
	c.Name = *v.Name
	args, err := objectArgs(v.Arguments)
	if err != nil {
		c.Err = fmt.Errorf("%w: tool %q: %v", ErrBadToolCall, c.Name, err)
		return c
	}
	c.Arguments = args
	return c
}

// objectArgs returns raw as a compact JSON object, unwrapping a JSON
// string that holds one; missing or null arguments become {}.
func objectArgs(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}"), nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("arguments: %v", err)
		}
		raw = bytes.TrimSpace([]byte(s))
		if !json.Valid(raw) {
			return nil, errors.New("arguments string is not JSON")
		}
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errors.New("arguments are not a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("arguments: %v", err)
	}
	return json.RawMessage(buf.Bytes()), nil
}

// CodeBlocks parses code written for a code interpreter the way
// ReTool-style agents write it, and turns each block into a call of Tool
// with the code as the string argument Arg:
//
//	<code>
//	```python
//	print(1 + 1)
//	```
//	</code>
//
// With Tags (the default when neither is set) a call is a
// <code>…</code> span, whose content may itself be a ```python fence
// (ReTool's format; the fence is removed); the close tag is a stop string.
// With Fences a call is a bare ```python … ``` block; fences have no stop
// string that would not also match the opening fence, so the turn runs
// to its end of turn and every block in it is executed.
type CodeBlocks struct {
	// Tool and Arg name the function and its code argument; empty means
	// "code_interpreter" and "code".
	Tool, Arg string
	// Tags and Fences select the syntaxes recognised.
	Tags, Fences bool
	// Languages are the fence info strings accepted; empty means "python"
	// and "py".
	Languages []string
}

func (c CodeBlocks) names() (string, string) {
	t, a := c.Tool, c.Arg
	if t == "" {
		t = "code_interpreter"
	}
	if a == "" {
		a = "code"
	}
	return t, a
}

func (c CodeBlocks) tags() bool { return c.Tags || !c.Fences }

// StopStrings returns "</code>" when tags are recognised.
func (c CodeBlocks) StopStrings() []string {
	if c.tags() {
		return []string{"</code>"}
	}
	return nil
}

// Parse returns every code block in text, in order.
func (c CodeBlocks) Parse(text string) []ParsedCall {
	var calls []ParsedCall
	pos := 0
	for pos < len(text) {
		tagAt, fenceAt := -1, -1
		if c.tags() {
			tagAt = indexFrom(text, "<code>", pos)
		}
		if c.Fences {
			fenceAt = indexFrom(text, "```", pos)
		}
		switch {
		case tagAt >= 0 && (fenceAt < 0 || tagAt <= fenceAt):
			start := tagAt + len("<code>")
			end := indexFrom(text, "</code>", start)
			if end < 0 {
				return calls
			}
			body := text[start:end]
			if code, ok := c.fenced(strings.TrimSpace(body)); ok {
				body = code
			}
			calls = append(calls, c.call(body, text[tagAt:end+len("</code>")]))
			pos = end + len("</code>")
		case fenceAt >= 0:
			end := indexFrom(text, "```", fenceAt+3)
			if end < 0 {
				return calls
			}
			raw := text[fenceAt : end+3]
			if code, ok := c.fenced(raw); ok {
				calls = append(calls, c.call(code, raw))
			}
			pos = end + 3
		default:
			return calls
		}
	}
	return calls
}

// fenced returns the code of s when s is exactly a fence with an accepted
// language: "```python\n<code>```".
func (c CodeBlocks) fenced(s string) (string, bool) {
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return "", false
	}
	inner := s[3 : len(s)-3]
	nl := strings.IndexByte(inner, '\n')
	if nl < 0 {
		return "", false
	}
	lang := strings.TrimSpace(inner[:nl])
	langs := c.Languages
	if len(langs) == 0 {
		langs = []string{"python", "py"}
	}
	for _, l := range langs {
		if strings.EqualFold(lang, l) {
			return inner[nl+1:], true
		}
	}
	return "", false
}

func (c CodeBlocks) call(code, raw string) ParsedCall {
	name, arg := c.names()
	args, err := json.Marshal(map[string]string{arg: code})
	if err != nil { // cannot happen for a map of strings; kept for safety
		return ParsedCall{Name: name, Raw: raw, Err: fmt.Errorf("%w: %v", ErrBadToolCall, err)}
	}
	return ParsedCall{Name: name, Arguments: args, Raw: raw}
}

func indexFrom(s, sub string, from int) int {
	if from > len(s) {
		return -1
	}
	i := strings.Index(s[from:], sub)
	if i < 0 {
		return -1
	}
	return from + i
}
