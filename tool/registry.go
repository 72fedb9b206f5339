package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"
)

// Errors of Registry's dispatch.
var (
	// ErrToolPanic is wrapped by the error Registry.Call returns when a
	// tool panicked; the panic is recovered and the model sees a failed
	// result.
	ErrToolPanic = errors.New("tool: tool panicked")
	// ErrUnknownTool is wrapped by the error Registry.Validate returns for
	// a name no registered tool has.
	ErrUnknownTool = errors.New("tool: unknown tool")
	// ErrBadArguments is wrapped by the error Registry.Validate returns for
	// arguments that are not a JSON object fitting the tool's parameters
	// schema.
	ErrBadArguments = errors.New("tool: invalid arguments")
)

// Registry holds the tools a policy may call: it lists their schemas, in
// registration order, for chat templates and dispatches calls by name,
// checking arguments against each tool's schema first. It is safe for
// concurrent use.
type Registry struct {
	mu     sync.RWMutex
	tools  []Tool
	params []map[string]any // each tool's "parameters" schema, decoded
	byName map[string]int
}

// NewRegistry returns a registry holding tools, in order.
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{byName: map[string]int{}}
	for _, t := range tools {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds t. Its schema must be a function schema whose name is
// t.Name(), and no tool of that name may be registered already.
func (r *Registry) Register(t Tool) error {
	if t == nil {
		return errors.New("tool: Register(nil)")
	}
	name := t.Name()
	params, err := parseFunctionSchema(name, t.Schema())
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byName[name]; dup {
		return fmt.Errorf("tool: Register: a tool named %q is already registered", name)
	}
	r.byName[name] = len(r.tools)
	r.tools = append(r.tools, t)
	r.params = append(r.params, params)
	return nil
}

// parseFunctionSchema checks the shape of an OpenAI function schema and
// returns its parameters schema (nil when it declares none).
func parseFunctionSchema(name string, raw json.RawMessage) (map[string]any, error) {
	if name == "" {
		return nil, errors.New("tool: Register: tool has an empty name")
	}
	var s struct {
		Type     string `json:"type"`
		Function *struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("tool: Register %q: schema is not valid JSON: %w", name, err)
	}
	if s.Type != "function" || s.Function == nil {
		return nil, fmt.Errorf("tool: Register %q: schema must be {\"type\": \"function\", \"function\": {...}}", name)
	}
	if s.Function.Name != name {
		return nil, fmt.Errorf("tool: Register %q: schema names the function %q", name, s.Function.Name)
	}
	if p := s.Function.Parameters; p != nil {
		if t, ok := p["type"]; ok && t != "object" {
			return nil, fmt.Errorf("tool: Register %q: parameters.type is %v, want \"object\"", name, t)
		}
	}
	return s.Function.Parameters, nil
}

// Names returns the tool names in registration order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, len(r.tools))
	for i, t := range r.tools {
		names[i] = t.Name()
	}
	return names
}

// Get returns the tool named name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	i, ok := r.byName[name]
	if !ok {
		return nil, false
	}
	return r.tools[i], true
}

// Schemas returns each tool's schema, in registration order, exactly as the
// tool gives it (key order kept).
func (r *Registry) Schemas() []json.RawMessage {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]json.RawMessage, len(r.tools))
	for i, t := range r.tools {
		out[i] = t.Schema()
	}
	return out
}

// SchemasJSON returns the schemas as one JSON array, in registration order,
// each schema's key order kept: the "tools" a chat template renders.
func (r *Registry) SchemasJSON() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, s := range r.Schemas() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(bytes.TrimSpace(s))
	}
	b.WriteByte(']')
	return b.Bytes()
}

// Validate checks a call the model made without running it: name must be
// a registered tool and args must fit its parameters schema (required
// fields, types, enums, nested objects and arrays). Arguments given as a
// JSON string holding an object (as OpenAI's API sends them) are accepted,
// and empty arguments mean {}. It returns the arguments as a JSON object,
// or an error wrapping ErrUnknownTool or ErrBadArguments; that error's
// text after the package prefix "tool: " is what Call shows the model.
func (r *Registry) Validate(name string, args json.RawMessage) (json.RawMessage, error) {
	r.mu.RLock()
	i, ok := r.byName[name]
	var params map[string]any
	if ok {
		params = r.params[i]
	}
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q; available tools: %s", ErrUnknownTool, name, strings.Join(r.Names(), ", "))
	}
	args, err := normalizeArgs(args)
	if err == nil {
		err = validateArgs(params, args)
	}
	if err != nil {
		return nil, fmt.Errorf("%w for %s: %v", ErrBadArguments, name, err)
	}
	return args, nil
}

// Call dispatches a call the model made. An unknown name, arguments that
// are not a JSON object, a missing required argument or one of the wrong
// type (see Validate) come back as a failed Result that says what was
// wrong, with a nil error: the model made the mistake and should see it.
// Result.Metadata["error"] is then "unknown_tool" or "bad_arguments". A
// tool that panics yields a failed Result and an error wrapping
// ErrToolPanic. Result.Duration is filled in when the tool leaves it zero.
func (r *Registry) Call(ctx context.Context, name string, args json.RawMessage) (res Result, err error) {
	start := time.Now()
	args, verr := r.Validate(name, args)
	if verr != nil {
		kind := "bad_arguments"
		if errors.Is(verr, ErrUnknownTool) {
			kind = "unknown_tool"
		}
		return failed(start, kind, "Error: %s", strings.TrimPrefix(verr.Error(), "tool: ")), nil
	}
	t, _ := r.Get(name)
	defer func() {
		if p := recover(); p != nil {
			res = failed(start, "tool_panic", "Error: tool %s failed internally", name)
			err = fmt.Errorf("%w: %s: %v", ErrToolPanic, name, p)
		}
	}()
	res, err = t.Call(ctx, args)
	if res.Duration == 0 {
		res.Duration = time.Since(start)
	}
	return res, err
}

func failed(start time.Time, kind, format string, a ...any) Result {
	return Result{
		Content:  fmt.Sprintf(format, a...),
		Failed:   true,
		Duration: time.Since(start),
		Metadata: map[string]any{"error": kind},
	}
}

// normalizeArgs accepts an object, or a JSON string that holds one; empty
// arguments mean {}.
func normalizeArgs(args json.RawMessage) (json.RawMessage, error) {
	a := bytes.TrimSpace(args)
	if len(a) == 0 {
		return json.RawMessage("{}"), nil
	}
	if a[0] == '"' {
		var s string
		if err := json.Unmarshal(a, &s); err != nil {
			return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
		}
		a = bytes.TrimSpace([]byte(s))
		if len(a) == 0 {
			return json.RawMessage("{}"), nil
		}
	}
	if a[0] != '{' {
		return nil, errors.New("arguments must be a JSON object")
	}
	if !json.Valid(a) {
		return nil, errors.New("arguments are not valid JSON")
	}
	return a, nil
}

// validateArgs checks args against a JSON Schema subset: required fields,
// types (string, integer, number, boolean, array, object, null, or a list
// of them), enum, array items, nested objects and additionalProperties:
// false.
func validateArgs(params map[string]any, args json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if params == nil {
		if _, ok := v.(map[string]any); !ok {
			return errors.New("arguments must be a JSON object")
		}
		return nil
	}
	return validateValue("arguments", params, v)
}

func validateValue(path string, schema map[string]any, v any) error {
	if t, ok := schema["type"]; ok {
		var types []string
		switch t := t.(type) {
		case string:
			types = []string{t}
		case []any:
			for _, x := range t {
				if s, ok := x.(string); ok {
					types = append(types, s)
				}
			}
		}
		if len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return hasType(t, v) }) {
			return fmt.Errorf("%s: want %s, got %s", path, strings.Join(types, " or "), typeName(v))
		}
	}
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		found := false
		for _, e := range enum {
			if jsonEqual(e, v) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s: %s is not one of %s", path, compactJSON(v), compactJSON(enum))
		}
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				name, _ := r.(string)
				if _, present := v[name]; !present {
					return fmt.Errorf("%s: missing required field %q", path, name)
				}
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ps, known := props[k].(map[string]any)
			if !known {
				if ap, ok := schema["additionalProperties"].(bool); ok && !ap {
					return fmt.Errorf("%s: unexpected field %q", path, k)
				}
				continue
			}
			if err := validateValue(path+"."+k, ps, v[k]); err != nil {
				return err
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, x := range v {
				if err := validateValue(fmt.Sprintf("%s[%d]", path, i), items, x); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func hasType(t string, v any) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		r, ok := new(big.Rat).SetString(n.String())
		return ok && r.IsInt()
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "null":
		return v == nil
	}
	return true // unknown type names constrain nothing
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func jsonEqual(a, b any) bool {
	if n, ok := b.(json.Number); ok {
		if f, ok := a.(float64); ok {
			g, err := n.Float64()
			return err == nil && f == g
		}
	}
	return compactJSON(a) == compactJSON(b)
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Param describes one parameter of a function schema built by
// FunctionSchema.
type Param struct {
	Name        string
	Type        string // "string", "integer", "number", "boolean", "array", "object"
	Description string
	Required    bool
	Enum        []string
}

// FunctionSchema builds an OpenAI function schema with keys in the order
// chat templates render them: {"type", "function": {"name", "description",
// "parameters": {"type", "properties", "required"}}}, and each property as
// {"type", "description", "enum"}.
func FunctionSchema(name, description string, params ...Param) json.RawMessage {
	var b bytes.Buffer
	// Encode strings without HTML escaping, as Python's json.dumps does.
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	str := func(s string) {
		enc.Encode(s)
		b.Truncate(b.Len() - 1) // Encode's newline
	}
	b.WriteString(`{"type": "function", "function": {"name": `)
	str(name)
	b.WriteString(`, "description": `)
	str(description)
	b.WriteString(`, "parameters": {"type": "object", "properties": {`)
	var required []string
	for i, p := range params {
		if i > 0 {
			b.WriteString(", ")
		}
		str(p.Name)
		b.WriteString(`: {"type": `)
		str(p.Type)
		if p.Description != "" {
			b.WriteString(`, "description": `)
			str(p.Description)
		}
		if len(p.Enum) > 0 {
			b.WriteString(`, "enum": [`)
			for j, e := range p.Enum {
				if j > 0 {
					b.WriteString(", ")
				}
				str(e)
			}
			b.WriteString("]")
		}
		b.WriteString("}")
		if p.Required {
			required = append(required, p.Name)
		}
	}
	b.WriteString(`}, "required": [`)
	for i, r := range required {
		if i > 0 {
			b.WriteString(", ")
		}
		str(r)
	}
	b.WriteString("]}}}")
	return b.Bytes()
}
