package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Message is one chat turn as transformers' apply_chat_template takes it.
// Optional fields reach the template only when set, so that the template's
// `is defined` tests see what they would see in Python.
type Message struct {
	Role    string `json:"role"` // system, user, assistant or tool
	Content string `json:"content"`
	// ReasoningContent is the assistant's thinking, for templates (Qwen3)
	// that render it; nil leaves the variable undefined.
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	// Name and ToolCallID are passed as "name" and "tool_call_id" when set.
	Name       string `json:"name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// ToolCall is an assistant's call of a tool, in the OpenAI shape.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function" when empty
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and its arguments. Arguments is a JSON
// object (rendered with its key order kept) or a JSON string holding the
// arguments as text (rendered verbatim by templates that test `is string`).
type FunctionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ChatOptions are the keyword arguments of apply_chat_template. The zero
// value is transformers' defaults: no generation prompt
// (add_generation_prompt=False) and no extra variables.
type ChatOptions struct {
	// AddGenerationPrompt appends the header of the assistant's next turn.
	AddGenerationPrompt bool
	// Vars are extra template variables, such as "enable_thinking": false.
	// A json.RawMessage value is decoded with its key order kept.
	Vars map[string]any
}

// ErrNoChatTemplate is returned by ApplyChatTemplate when the tokenizer has
// no chat template.
var ErrNoChatTemplate = errors.New("tokenizer: no chat template")

// ChatTemplate is a compiled Jinja chat template, rendered the way
// transformers renders it (transformers/utils/chat_template_utils.py,
// _compile_jinja_template and render_jinja_template): trim_blocks and
// lstrip_blocks on, a tojson filter that keeps key order, writes ", " and
// ": " and leaves non-ASCII alone, and the raise_exception global. A
// ChatTemplate is safe for concurrent use.
type ChatTemplate struct {
	tpl  *exec.Template
	vars map[string]any // special tokens such as bos_token
}

// NewChatTemplate compiles src. vars are variables every rendering sees
// (transformers passes the special tokens: bos_token, eos_token, ...).
func NewChatTemplate(src string, vars map[string]any) (ct *ChatTemplate, err error) {
	defer func() {
		// gonja can panic on malformed templates; a template is outside
		// input, so that becomes an error.
		if r := recover(); r != nil {
			ct, err = nil, fmt.Errorf("tokenizer: compile chat template: %v", r)
		}
	}()
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = false // done by lstripBlocks, as jinja2 does it

	filters := exec.NewFilterSet(map[string]exec.FilterFunction{})
	filters.Update(builtins.Filters)
	if err := filters.Replace("tojson", filterToJSON); err != nil {
		return nil, fmt.Errorf("tokenizer: chat template: %w", err)
	}
	if err := filters.Replace("items", filterItems); err != nil {
		return nil, fmt.Errorf("tokenizer: chat template: %w", err)
	}
	stringFilter, _ := builtins.Filters.Get("string")
	if err := filters.Replace("string", func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		return filterString(stringFilter, e, in, params)
	}); err != nil {
		return nil, fmt.Errorf("tokenizer: chat template: %w", err)
	}
	ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	ctx.Set("raise_exception", func(msg string) (string, error) {
		return "", fmt.Errorf("tokenizer: chat template raised: %s", msg)
	})
	methods := builtins.Methods
	dictMethods := map[string]exec.Method[map[string]any]{
		"items":  dictItems,
		"keys":   dictKeys,
		"values": dictValues,
		"get":    dictGet,
	}
	methods.Dict = exec.NewMethodSet(dictMethods)
	methods.Str = strMethods(methods.Str)
	env := &exec.Environment{
		Context:           ctx,
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           methods,
	}
	// A loader that knows only this template: chat templates must not read
	// files through {% include %}.
	const root = "/chat_template"
	loader, err := loaders.NewMemoryLoader(map[string]string{root: lstripBlocks(src)})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: chat template: %w", err)
	}
	tpl, err := exec.NewTemplate(root, cfg, loader, env)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: compile chat template: %w", err)
	}
	return &ChatTemplate{tpl: tpl, vars: vars}, nil
}

// Render renders the template for messages and tools (OpenAI function
// schemas, whose key order is kept).
func (c *ChatTemplate) Render(messages []Message, tools []json.RawMessage, opts ChatOptions) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("tokenizer: render chat template: %v", r)
		}
	}()
	data := make(map[string]any, 8+len(opts.Vars))
	for k, v := range c.vars {
		data[k] = v
	}
	for k, v := range opts.Vars {
		if raw, ok := v.(json.RawMessage); ok {
			dv, err := decodeOrdered(raw)
			if err != nil {
				return "", fmt.Errorf("tokenizer: chat option %q: %w", k, err)
			}
			v = dv
		}
		data[k] = v
	}
	msgs := make([]any, len(messages))
	for i, m := range messages {
		d, err := messageValue(m)
		if err != nil {
			return "", fmt.Errorf("tokenizer: messages[%d]: %w", i, err)
		}
		msgs[i] = d
	}
	data["messages"] = msgs
	if tools != nil {
		ts := make([]any, len(tools))
		for i, raw := range tools {
			v, err := decodeOrdered(raw)
			if err != nil {
				return "", fmt.Errorf("tokenizer: tools[%d]: %w", i, err)
			}
			ts[i] = v
		}
		data["tools"] = ts
	} else {
		data["tools"] = nil
	}
	data["add_generation_prompt"] = opts.AddGenerationPrompt
	out, err = c.tpl.ExecuteToString(exec.NewContext(data))
	if err != nil {
		return "", fmt.Errorf("tokenizer: render chat template: %w", err)
	}
	return out, nil
}

// ApplyChatTemplate renders the tokenizer's own chat_template (read by
// Load from tokenizer_config.json) as transformers' apply_chat_template(
// messages, tools=tools, tokenize=False, add_generation_prompt=...,
// **opts.Vars) does; bos_token and eos_token are set from the config.
func (t *BPE) ApplyChatTemplate(messages []Message, tools []json.RawMessage, opts ChatOptions) (string, error) {
	ct, err := t.compiledTemplate()
	if err != nil {
		return "", err
	}
	return ct.Render(messages, tools, opts)
}

func (t *BPE) compiledTemplate() (*ChatTemplate, error) {
	t.tplOnce.Do(func() {
		if t.chatTemplate == "" {
			t.tplErr = ErrNoChatTemplate
			return
		}
		vars := map[string]any{}
		if t.bosToken != "" {
			vars["bos_token"] = t.bosToken
		}
		if t.eosToken != "" {
			vars["eos_token"] = t.eosToken
		}
		t.tpl, t.tplErr = NewChatTemplate(t.chatTemplate, vars)
	})
	return t.tpl, t.tplErr
}

// dict builds an ordered template dict.
func dict(pairs ...any) *exec.Dict {
	d := &exec.Dict{Pairs: make([]*exec.Pair, 0, len(pairs)/2)}
	for i := 0; i+1 < len(pairs); i += 2 {
		d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(pairs[i]), Value: exec.AsValue(pairs[i+1])})
	}
	return d
}

func messageValue(m Message) (*exec.Dict, error) {
	if m.Role == "" {
		return nil, errors.New("empty role")
	}
	d := dict("role", m.Role, "content", m.Content)
	add := func(k string, v any) {
		d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(k), Value: exec.AsValue(v)})
	}
	if m.ReasoningContent != nil {
		add("reasoning_content", *m.ReasoningContent)
	}
	if m.Name != "" {
		add("name", m.Name)
	}
	if m.ToolCallID != "" {
		add("tool_call_id", m.ToolCallID)
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]any, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			if tc.Function.Name == "" {
				return nil, fmt.Errorf("tool_calls[%d]: empty function name", i)
			}
			var args any = dict()
			if len(bytes.TrimSpace(tc.Function.Arguments)) > 0 {
				v, err := decodeOrdered(tc.Function.Arguments)
				if err != nil {
					return nil, fmt.Errorf("tool_calls[%d].function.arguments: %w", i, err)
				}
				switch v.(type) {
				case *exec.Dict, string:
				default:
					return nil, fmt.Errorf("tool_calls[%d].function.arguments: want a JSON object or string, have %s", i, tc.Function.Arguments)
				}
				args = v
			}
			typ := tc.Type
			if typ == "" {
				typ = "function"
			}
			call := dict()
			if tc.ID != "" {
				call.Pairs = append(call.Pairs, &exec.Pair{Key: exec.AsValue("id"), Value: exec.AsValue(tc.ID)})
			}
			call.Pairs = append(call.Pairs,
				&exec.Pair{Key: exec.AsValue("type"), Value: exec.AsValue(typ)},
				&exec.Pair{Key: exec.AsValue("function"), Value: exec.AsValue(dict("name", tc.Function.Name, "arguments", args))})
			calls[i] = call
		}
		add("tool_calls", calls)
	}
	return d, nil
}

// decodeOrdered decodes JSON into template values: objects become ordered
// *exec.Dict (key order kept), arrays []any, integers int, other numbers
// float64.
func decodeOrdered(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("invalid JSON: data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			d := &exec.Dict{Pairs: []*exec.Pair{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("invalid JSON: %w", err)
				}
				key := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				// A repeated key keeps its first place and last value, as
				// Python's json.loads into a dict does.
				if i := slices.IndexFunc(d.Pairs, func(p *exec.Pair) bool { return p.Key.String() == key }); i >= 0 {
					d.Pairs[i].Value = exec.AsValue(v)
					continue
				}
				d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.AsValue(v)})
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("invalid JSON: %w", err)
			}
			return d, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("invalid JSON: %w", err)
			}
			return list, nil
		}
		return nil, fmt.Errorf("invalid JSON: unexpected %v", x)
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("integer %s: %w", s, err)
			}
			return int(n), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", s, err)
		}
		return f, nil
	}
	return tok, nil // string, bool or nil
}

// filterToJSON is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=indent, separators=separators, sort_keys=sort_keys).
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var o jsonOpts
	o.item, o.key = ", ", ": "
	if v, ok := params.KwArgs["indent"]; ok && !v.IsNil() {
		o.indent = strings.Repeat(" ", v.Integer())
		if v.IsString() {
			o.indent = v.String()
		}
		o.pretty = true
		o.item = ","
	}
	if len(params.Args) > 0 && !params.Args[0].IsNil() { // tojson(2)
		o.indent, o.pretty, o.item = strings.Repeat(" ", params.Args[0].Integer()), true, ","
	}
	if v, ok := params.KwArgs["separators"]; ok && !v.IsNil() {
		if !v.IsList() || v.Len() != 2 {
			return exec.AsValue(errors.New("tojson: separators must be a pair of strings"))
		}
		o.item, o.key = v.Index(0).String(), v.Index(1).String()
	}
	if v, ok := params.KwArgs["sort_keys"]; ok {
		o.sortKeys = v.IsTrue()
	}
	if v, ok := params.KwArgs["ensure_ascii"]; ok {
		o.ascii = v.IsTrue()
	}
	var b strings.Builder
	if err := o.write(&b, in, 0); err != nil {
		return exec.AsValue(fmt.Errorf("tojson: %w", err))
	}
	return exec.AsSafeValue(b.String())
}

type jsonOpts struct {
	item, key, indent string
	pretty, sortKeys  bool
	ascii             bool
}

func (o *jsonOpts) newline(b *strings.Builder, depth int) {
	if o.pretty {
		b.WriteByte('\n')
		for range depth {
			b.WriteString(o.indent)
		}
	}
}

// write serializes v as Python's json.dumps does.
func (o *jsonOpts) write(b *strings.Builder, v *exec.Value, depth int) error {
	if depth > 512 {
		return errors.New("value nested too deeply")
	}
	switch {
	case v.IsNil():
		b.WriteString("null")
	case v.IsBool():
		b.WriteString(strconv.FormatBool(v.Bool()))
	case v.IsInteger():
		b.WriteString(strconv.Itoa(v.Integer()))
	case v.IsFloat():
		b.WriteString(pythonFloat(v.Float()))
	case v.IsString():
		writePyString(b, v.String(), o.ascii)
	case v.IsDict():
		keys := v.Keys() // ordered for exec.Dict, sorted for Go maps
		if o.sortKeys {
			slices.SortFunc(keys, func(x, y *exec.Value) int { return strings.Compare(x.String(), y.String()) })
		}
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.item)
			}
			o.newline(b, depth+1)
			writePyString(b, k.String(), o.ascii)
			b.WriteString(o.key)
			item, _ := v.GetItem(k.Interface())
			if err := o.write(b, item, depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte('}')
	case v.IsList():
		n := v.Len()
		if n == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i := range n {
			if i > 0 {
				b.WriteString(o.item)
			}
			o.newline(b, depth+1)
			if err := o.write(b, v.Index(i), depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte(']')
	default:
		return fmt.Errorf("cannot serialize %s", v.Val.Type())
	}
	return nil
}

// writePyString writes s as a JSON string the way Python's json module does:
// only '"', '\\' and control characters are escaped (\n, \r, \t, \b, \f or
// \u00XX), non-ASCII is kept unless ascii is set (then \uXXXX with
// surrogate pairs, lower-case hex).
func writePyString(b *strings.Builder, s string, ascii bool) {
	const hex = "0123456789abcdef"
	u4 := func(r rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hex[(r>>shift)&0xF])
		}
	}
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				u4(r)
			case ascii && r > 0x7F:
				if r > 0xFFFF {
					r -= 0x10000
					u4(0xD800 + r>>10)
					u4(0xDC00 + r&0x3FF)
				} else {
					u4(r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pythonFloat formats f as Python's repr(float) (and json.dumps) does: the
// shortest digits that round-trip, in fixed notation for exponents -4..15
// (always with a fractional part) and as d.ddde±XX otherwise.
func pythonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expStr)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	sign := ""
	if neg {
		sign = "-"
	}
	if exp < -4 || exp >= 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := fmt.Sprintf("%+03d", exp)
		return sign + m + "e" + es
	}
	if exp < 0 {
		return sign + "0." + strings.Repeat("0", -exp-1) + digits
	}
	if len(digits) <= exp+1 {
		return sign + digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	}
	return sign + digits[:exp+1] + "." + digits[exp+1:]
}

// Ordered dict methods: gonja's own take a Go map and lose key order.

// filterItems is Jinja's items filter, in the mapping's own key order
// as the items() method gives it (gonja's builtin yields nothing for
// the ordered dicts that JSON objects decode to here, so a template
// such as Qwen3-Coder's, which walks a tool's parameters with
// `|items`, lost them). A list passes through and none is empty, as
// in jinja2.
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	switch {
	case in.IsNil():
		return exec.AsValue([]any{})
	case in.IsList():
		return in
	case !in.IsDict():
		return exec.AsValue(fmt.Errorf("items requires a mapping, not %s", in.String()))
	}
	out := []any{}
	for _, k := range in.Keys() {
		v, _ := in.GetItem(k.Interface())
		out = append(out, []any{k, v})
	}
	return exec.AsValue(out)
}

// filterString is Jinja's string filter with Python's str(None), "None"
// (gonja's gives ""): Qwen3-Coder's template writes each call argument
// with `|string`, so a null argument reads None there, as in jinja2.
// Everything else is gonja's.
func filterString(builtin exec.FilterFunction, e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsNil() && !in.IsError() {
		if err := params.Take(); err != nil {
			return exec.AsValue(exec.ErrInvalidCall(err))
		}
		return exec.AsValue("None")
	}
	return builtin(e, in, params)
}

func dictItems(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
	if err := args.Take(); err != nil {
		return nil, err
	}
	var out []any
	for _, k := range self.Keys() {
		v, _ := self.GetItem(k.Interface())
		out = append(out, []any{k, v})
	}
	return out, nil
}

func dictKeys(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
	if err := args.Take(); err != nil {
		return nil, err
	}
	var out []any
	for _, k := range self.Keys() {
		out = append(out, k)
	}
	return out, nil
}

func dictValues(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
	if err := args.Take(); err != nil {
		return nil, err
	}
	var out []any
	for _, k := range self.Keys() {
		v, _ := self.GetItem(k.Interface())
		out = append(out, v)
	}
	return out, nil
}

func dictGet(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
	if len(args.Args) < 1 || len(args.Args) > 2 {
		return nil, errors.New("get takes a key and an optional default")
	}
	if v, ok := self.GetItem(args.Args[0].Interface()); ok {
		return v, nil
	}
	if len(args.Args) == 2 {
		return args.Args[1], nil
	}
	return nil, nil
}

// gonjaStrMethods names gonja's string methods, to copy them into a set of
// our own (gonja's MethodSet cannot be listed).
var gonjaStrMethods = []string{
	"capitalize", "capwords", "casefold", "center", "count", "encode", "endswith", "expandtabs",
	"find", "format", "format_map", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
	"islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust",
	"lower", "lstrip", "partition", "removeprefix", "removesuffix", "rfind", "rjust",
	"rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase",
	"title", "upper", "zfill",
}

// strMethods copies gonja's string methods and fixes replace, whose count
// argument gonja requires although Python's is optional.
func strMethods(base *exec.MethodSet[string]) *exec.MethodSet[string] {
	m := make(map[string]exec.Method[string], len(gonjaStrMethods)+1)
	for _, name := range gonjaStrMethods {
		if f, ok := base.Get(name); ok {
			m[name] = f
		}
	}
	m["replace"] = func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		if len(args.Args) < 2 || len(args.Args) > 3 || len(args.KwArgs) > 0 {
			return nil, errors.New("replace takes old, new and an optional count")
		}
		count := -1
		if len(args.Args) == 3 {
			count = args.Args[2].Integer()
		}
		return strings.Replace(self, args.Args[0].String(), args.Args[1].String(), count), nil
	}
	return exec.NewMethodSet(m)
}

// lstripBlocks applies Jinja2's lstrip_blocks rule to a template's source,
// because gonja's own LeftStripBlocks also strips white space that follows
// an expression on the same line ("{{ x }} {% if %}" loses its space, which
// jinja2 keeps). The rule, from jinja2/lexer.py (Lexer.tokeniter): before a
// block or comment tag without a "+" or "-" modifier, the white space
// between the last newline of the preceding text and the tag is removed; if
// that text has no newline, only when the previous tag's match ended in a
// newline (a block or comment end whose newline trim_blocks took, or the
// start of the template).
func lstripBlocks(src string) string {
	var out strings.Builder
	out.Grow(len(src))
	lineStarting := true
	i := 0
	for {
		k := nextTag(src, i)
		if k < 0 {
			out.WriteString(src[i:])
			return out.String()
		}
		text := src[i:k]
		kind := src[k+1] // '{', '%' or '#'
		if kind != '{' && (k+2 >= len(src) || (src[k+2] != '-' && src[k+2] != '+')) {
			lpos := strings.LastIndexByte(text, '\n') + 1
			if (lpos > 0 || lineStarting) && strings.TrimLeft(text[lpos:], " \t\v\f\r") == "" {
				text = text[:lpos]
			}
		}
		out.WriteString(text)
		end := tagEnd(src, k, kind)
		if end < 0 { // unterminated: leave the rest for the parser to report
			out.WriteString(src[k:])
			return out.String()
		}
		// With trim_blocks, a block or comment end takes one newline; a
		// "-%}" end takes all white space after it.
		lineStarting = false
		if kind != '{' {
			switch {
			case src[end-3] == '-':
				j := end
				for j < len(src) && strings.IndexByte(" \t\n\v\f\r", src[j]) >= 0 {
					j++
				}
				lineStarting = j > end && src[j-1] == '\n'
			case src[end-3] != '+':
				lineStarting = end < len(src) && src[end] == '\n'
			}
		}
		if kind == '%' && isRawTag(src[k:end]) {
			// {% raw %} ... {% endraw %}: copy the body verbatim.
			if r := strings.Index(src[end:], "endraw"); r >= 0 {
				if e := tagEnd(src, strings.LastIndex(src[:end+r], "{%"), '%'); e > 0 {
					out.WriteString(src[k:e])
					i = e
					continue
				}
			}
		}
		out.WriteString(src[k:end])
		i = end
	}
}

// nextTag returns the index of the next "{{", "{%" or "{#" at or after i.
func nextTag(src string, i int) int {
	for {
		j := strings.IndexByte(src[i:], '{')
		if j < 0 || i+j+1 >= len(src) {
			return -1
		}
		j += i
		if c := src[j+1]; c == '{' || c == '%' || c == '#' {
			return j
		}
		i = j + 1
	}
}

// tagEnd returns the index just past the tag that starts at k, skipping
// string literals inside expressions and statements; -1 if it never ends.
func tagEnd(src string, k int, kind byte) int {
	if kind == '#' {
		e := strings.Index(src[k+2:], "#}")
		if e < 0 {
			return -1
		}
		return k + 2 + e + 2
	}
	closer := byte('}')
	if kind == '%' {
		closer = '%'
	}
	for j := k + 2; j+1 < len(src); j++ {
		switch c := src[j]; c {
		case '\'', '"':
			for j++; j < len(src) && src[j] != c; j++ {
				if src[j] == '\\' {
					j++
				}
			}
		case closer:
			if src[j+1] == '}' {
				return j + 2
			}
		}
	}
	return -1
}

// isRawTag reports whether tag is "{% raw %}" with any modifiers.
func isRawTag(tag string) bool {
	inner := strings.Trim(tag[2:len(tag)-2], "-+ \t\n\r")
	return inner == "raw"
}
