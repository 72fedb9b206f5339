package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Qwen3Coder parses the XML tool calls of Qwen3-Coder (and of later Qwen
// models that kept its format), as its chat template asks for and vLLM's
// "qwen3_coder" tool parser reads them
// (vllm/tool_parsers/qwen3coder_tool_parser.py):
//
//	<tool_call>
//	<function=get_weather>
//	<parameter=city>
//	Paris
//	</parameter>
//	<parameter=days>
//	3
//	</parameter>
//	</function>
//	</tool_call>
//
// A parameter's value is the text between its tags, less one newline at
// each end. Values are text, so each is converted by the type the called
// tool's JSON schema gives the parameter, as vLLM's _convert_param_value
// does: strings stay text; integer and number types are read as Python's
// int() and float() read them (a number with no fractional part becomes an
// integer); boolean types accept true and false in any case; object and
// array types are read as JSON, then as a Python literal; other types as a
// Python literal (ast.literal_eval); "null" and "None" are null for a
// nullable or non-string parameter. A nullable type is "type": [T,
// "null"] or "anyOf" with a null option; the first other type counts. A
// value that does not convert stays text, so that the tool registry's
// schema check tells the model what is wrong. Two choices differ from
// vLLM: a boolean that is neither true nor false stays text (vLLM reads it
// as false), and a type list such as ["integer", "null"] is read as its
// first non-null type (vLLM reads it as a Python literal). A parameter the
// schema does not name, or a call of a tool with no schema, stays text.
//
// Only closed <tool_call> tags count, as for Hermes; when the text has no
// <tool_call> at all, each closed <function=…>…</function> block is a
// call, as vLLM falls back to. Within a call vLLM's leniencies hold: a
// missing </parameter> ends the value at the next parameter tag of the
// schema at a line start, and a missing </function> at the call's end. A
// </parameter> or </function> inside a value is taken as text unless it is
// followed by another tag or the end. A call with no <function=NAME>, an
// unclosed tag, a name with spaces or brackets, or a parameter given twice
// is malformed: its ParsedCall.Err wraps ErrBadToolCall.
//
// Qwen3Coder is a SchemaParser: the engine gives it the request's tool
// schemas. Parse alone converts nothing.
type Qwen3Coder struct {
	// NoStop leaves </tool_call> out of the stop strings, so that one turn
	// may hold several calls and ends at the end-of-turn token.
	NoStop bool
}

const (
	q3cCallOpen   = "<tool_call>"
	q3cCallClose  = "</tool_call>"
	q3cFuncOpen   = "<function="
	q3cFuncClose  = "</function>"
	q3cParamOpen  = "<parameter="
	q3cParamClose = "</parameter>"
)

// StopStrings returns </tool_call>, unless NoStop is set.
func (q Qwen3Coder) StopStrings() []string {
	if q.NoStop {
		return nil
	}
	return []string{q3cCallClose}
}

// Parse returns the calls in text with every value left as text: it is
// ParseWithSchemas with no schemas.
func (q Qwen3Coder) Parse(text string) []ParsedCall { return q.ParseWithSchemas(text, nil) }

// ParseWithSchemas returns the calls in text, converting each value by
// the type the schema of the called tool gives it; schemas are OpenAI
// function schemas ({"type": "function", "function": {"name", "parameters"}})
// or bare function objects ({"name", "parameters"}).
func (q Qwen3Coder) ParseWithSchemas(text string, schemas []json.RawMessage) []ParsedCall {
	var calls []ParsedCall
	if !strings.Contains(text, q3cCallOpen) {
		// vLLM's fallback: closed <function=…> blocks without <tool_call>.
		for _, b := range functionBlocks(text) {
			if b.closed {
				calls = append(calls, parseQwen3CoderCall(b.text, b.text, schemas))
			}
		}
		return calls
	}
	for pos := 0; ; {
		i := indexFrom(text, q3cCallOpen, pos)
		if i < 0 {
			return calls
		}
		j := indexFrom(text, q3cCallClose, i+len(q3cCallOpen))
		if j < 0 {
			return calls
		}
		raw := text[i : j+len(q3cCallClose)]
		switch blocks := functionBlocks(text[i+len(q3cCallOpen) : j]); len(blocks) {
		case 0:
			calls = append(calls, ParsedCall{Raw: raw, Err: fmt.Errorf("%w: no %sNAME> in the call", ErrBadToolCall, q3cFuncOpen)})
		case 1:
			calls = append(calls, parseQwen3CoderCall(blocks[0].text, raw, schemas))
		default: // several functions in one <tool_call>: one call each, as vLLM reads them
			for _, b := range blocks {
				calls = append(calls, parseQwen3CoderCall(b.text, b.text, schemas))
			}
		}
		pos = j + len(q3cCallClose)
	}
}

// funcBlock is the text of one <function=…> block; closed reports whether
// it ends with </function>.
type funcBlock struct {
	text   string
	closed bool
}

// functionBlocks splits text into its <function=…> blocks. A block ends
// just past the first </function> followed by another block or the end
// of text (so that a </function> inside a value is text), else past the
// first </function>, else at the end of text.
func functionBlocks(text string) []funcBlock {
	var blocks []funcBlock
	for pos := 0; ; {
		i := indexFrom(text, q3cFuncOpen, pos)
		if i < 0 {
			return blocks
		}
		end := functionEnd(text, i)
		if end < 0 {
			return append(blocks, funcBlock{text: text[i:]})
		}
		blocks = append(blocks, funcBlock{text: text[i:end], closed: true})
		pos = end
	}
}

// functionEnd returns the end of the <function=…> block starting at i:
// just past the first </function> that is followed by another block or
// the end, else past the first </function>; -1 if there is none.
func functionEnd(text string, i int) int {
	first := -1
	for k := indexFrom(text, q3cFuncClose, i); k >= 0; k = indexFrom(text, q3cFuncClose, k+1) {
		end := k + len(q3cFuncClose)
		if first < 0 {
			first = end
		}
		if rest := strings.TrimLeft(text[end:], " \t\r\n"); rest == "" || strings.HasPrefix(rest, q3cFuncOpen) {
			return end
		}
	}
	return first
}

// parseQwen3CoderCall reads one function block (starting with
// <function=) of a call whose whole text is raw.
func parseQwen3CoderCall(block, raw string, schemas []json.RawMessage) ParsedCall {
	c := ParsedCall{Raw: raw}
	bad := func(format string, a ...any) ParsedCall {
		c.Err = fmt.Errorf("%w: %s", ErrBadToolCall, fmt.Sprintf(format, a...))
		c.Arguments = nil
		return c
	}
	rest := block[len(q3cFuncOpen):]
	gt := strings.IndexByte(rest, '>')
	if gt < 0 {
		return bad("%s is not closed by '>'", q3cFuncOpen)
	}
	name := rest[:gt]
	if !isTagName(name) {
		return bad("function name %q is not a name", name)
	}
	c.Name = name
	fn := rest[gt+1:]
	if k := strings.LastIndex(fn, q3cFuncClose); k >= 0 {
		fn = fn[:k]
	}
	props := schemaProperties(schemas, name)

	var args bytes.Buffer
	args.WriteByte('{')
	seen := map[string]bool{}
	for pos := 0; ; {
		k := indexFrom(fn, q3cParamOpen, pos)
		if k < 0 {
			break
		}
		start := k + len(q3cParamOpen)
		gt := strings.IndexByte(fn[start:], '>')
		if gt < 0 {
			return bad("a %s tag is not closed by '>'", q3cParamOpen)
		}
		pname := fn[start : start+gt]
		if !isTagName(pname) {
			return bad("parameter name %q is not a name", pname)
		}
		if seen[pname] {
			return bad("parameter %q is given twice", pname)
		}
		seen[pname] = true
		valueStart := start + gt + 1
		end, next := paramEnd(fn, valueStart, props, seen)
		value := strings.TrimPrefix(fn[valueStart:end], "\n")
		value = strings.TrimSuffix(value, "\n")
		if len(seen) > 1 {
			args.WriteByte(',')
		}
		key, _ := json.Marshal(pname)
		args.Write(key)
		args.WriteByte(':')
		prop, known := props[pname]
		args.WriteString(convertParam(value, prop, known))
		pos = next
	}
	args.WriteByte('}')
	var compact bytes.Buffer
	if err := json.Compact(&compact, args.Bytes()); err != nil { // every piece is JSON; kept as a check
		return bad("arguments: %v", err)
	}
	c.Arguments = compact.Bytes()
	return c
}

// isTagName reports whether s can be a function or parameter name in a
// tag: not empty, without white space, quotes or brackets (vLLM's
// _is_valid_function_name).
func isTagName(s string) bool {
	return s != "" && !strings.ContainsAny(s, "{}<>\"' \t\n\r")
}

// paramEnd returns where the value starting at start in fn ends and where
// the next parameter may start. The value ends at the first </parameter>
// followed by another tag or the end of the function, or at an earlier
// <parameter=NAME> at a line start that names a parameter of the schema
// not yet seen (any name without a schema): the missing </parameter> vLLM
// tolerates. Failing both, at the first </parameter>, or the end.
func paramEnd(fn string, start int, props map[string]json.RawMessage, seen map[string]bool) (end, next int) {
	closeAt, firstClose := -1, -1
	for k := indexFrom(fn, q3cParamClose, start); k >= 0; k = indexFrom(fn, q3cParamClose, k+1) {
		if firstClose < 0 {
			firstClose = k
		}
		after := strings.TrimLeft(fn[k+len(q3cParamClose):], " \t\r\n")
		if after == "" || strings.HasPrefix(after, q3cParamOpen) || strings.HasPrefix(after, q3cFuncClose) {
			closeAt = k
			break
		}
	}
	if closeAt < 0 {
		closeAt = firstClose
	}
	limit := len(fn)
	if closeAt >= 0 {
		limit = closeAt
	}
	for k := indexFrom(fn, "\n"+q3cParamOpen, start); k >= 0 && k < limit; k = indexFrom(fn, "\n"+q3cParamOpen, k+1) {
		nameStart := k + 1 + len(q3cParamOpen)
		gt := strings.IndexByte(fn[nameStart:], '>')
		if gt < 0 {
			break
		}
		name := fn[nameStart : nameStart+gt]
		if _, ok := props[name]; (ok || props == nil) && !seen[name] {
			return k + 1, k + 1
		}
	}
	if closeAt < 0 {
		return len(fn), len(fn)
	}
	return closeAt, closeAt + len(q3cParamClose)
}

// schemaProperties returns the "properties" of the parameters of the tool
// called name, or nil when no schema names it.
func schemaProperties(schemas []json.RawMessage, name string) map[string]json.RawMessage {
	type function struct {
		Name       string `json:"name"`
		Parameters struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"parameters"`
	}
	for _, raw := range schemas {
		var s struct {
			function
			Function *function `json:"function"`
		}
		if json.Unmarshal(raw, &s) != nil {
			continue
		}
		f := s.function
		if s.Function != nil {
			f = *s.Function
		}
		if f.Name == name {
			if f.Parameters.Properties == nil {
				return map[string]json.RawMessage{}
			}
			return f.Parameters.Properties
		}
	}
	return nil
}

// paramType returns the type a parameter's schema gives it, lower-cased
// ("string" when it gives none), and whether null is allowed.
func paramType(prop json.RawMessage) (typ string, nullable bool) {
	var s struct {
		Type  json.RawMessage   `json:"type"`
		AnyOf []json.RawMessage `json:"anyOf"`
	}
	if json.Unmarshal(prop, &s) != nil {
		return "string", false
	}
	var options []string
	switch {
	case len(s.Type) > 0:
		var one string
		if json.Unmarshal(s.Type, &one) == nil {
			options = []string{one}
		} else {
			_ = json.Unmarshal(s.Type, &options) // a list of types, or nothing usable
		}
	case s.AnyOf != nil:
		for _, o := range s.AnyOf {
			var opt struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(o, &opt) == nil && opt.Type != "" {
				options = append(options, opt.Type)
			}
		}
	}
	for _, o := range options {
		o = strings.ToLower(strings.TrimSpace(o))
		switch {
		case o == "null":
			nullable = true
		case typ == "":
			typ = o
		}
	}
	if typ == "" {
		typ = "string"
		if len(options) > 0 && nullable { // only "null"
			typ = "null"
		}
	}
	return typ, nullable
}

// convertParam returns value as JSON, converted by the type prop gives
// the parameter (see Qwen3Coder); known is false when the schema does not
// name the parameter.
func convertParam(value string, prop json.RawMessage, known bool) string {
	text := func() string {
		var b strings.Builder
		pyJSONString(&b, value)
		return b.String()
	}
	if !known {
		return text()
	}
	typ, nullable := paramType(prop)
	isNull := strings.EqualFold(value, "null") || strings.EqualFold(value, "none")
	hasPrefix := func(ps ...string) bool {
		for _, p := range ps {
			if strings.HasPrefix(typ, p) {
				return true
			}
		}
		return false
	}
	switch {
	case nullable && isNull:
		return "null"
	case typ == "string" || typ == "str" || typ == "text" || typ == "varchar" || typ == "char" || typ == "enum":
		return text()
	case isNull:
		return "null"
	case hasPrefix("int", "uint", "long", "short", "unsigned"):
		if n, err := pyInt(value); err == nil {
			return n
		}
	case hasPrefix("num", "float"):
		f, err := pyFloat(value)
		switch {
		case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		case f == math.Trunc(f):
			n, _ := big.NewFloat(f).Int(nil)
			return n.String()
		default:
			return pyFloatRepr(f)
		}
	case typ == "boolean" || typ == "bool" || typ == "binary":
		switch strings.ToLower(value) {
		case "true":
			return "true"
		case "false":
			return "false"
		}
	case typ == "object" || typ == "array" || typ == "arr" || hasPrefix("dict", "list"):
		if json.Valid([]byte(value)) {
			var s string
			if json.Unmarshal([]byte(value), &s) == nil {
				// A JSON string holding a Python literal ("{'k': 'v'}"),
				// as a model trained on a buggy template writes.
				if lit, err := pyLiteralEval(s); err == nil {
					return lit
				}
			}
			return value
		}
		if lit, err := pyLiteralEval(value); err == nil {
			var s string
			if json.Unmarshal([]byte(lit), &s) == nil {
				if inner, err := pyLiteralEval(s); err == nil {
					return inner
				}
			}
			return lit
		}
	default:
		if lit, err := pyLiteralEval(value); err == nil {
			return lit
		}
	}
	return text()
}
