package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTool is a minimal Tool for registry tests.
type fakeTool struct {
	name   string
	schema json.RawMessage
	call   func(ctx context.Context, args json.RawMessage) (Result, error)
}

func (f *fakeTool) Name() string            { return f.name }
func (f *fakeTool) Schema() json.RawMessage { return f.schema }
func (f *fakeTool) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	return f.call(ctx, args)
}

func echoTool(name string, schema json.RawMessage) *fakeTool {
	return &fakeTool{name: name, schema: schema, call: func(ctx context.Context, args json.RawMessage) (Result, error) {
		return Result{Content: string(args)}, nil
	}}
}

func TestFunctionSchemaKeyOrder(t *testing.T) {
	got := FunctionSchema("search", "Looks things up <fast> & well.",
		Param{Name: "query", Type: "string", Description: "What to look for.", Required: true},
		Param{Name: "k", Type: "integer"},
		Param{Name: "mode", Type: "string", Enum: []string{"web", "news"}, Required: true})
	// Written out by hand in the order a chat template must render it;
	// like Python's json.dumps, <, > and & are not escaped.
	want := `{"type": "function", "function": {"name": "search", "description": "Looks things up <fast> & well.", ` +
		`"parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "What to look for."}, ` +
		`"k": {"type": "integer"}, "mode": {"type": "string", "enum": ["web", "news"]}}, "required": ["query", "mode"]}}}`
	assert.Equal(t, want, string(got))
	assert.True(t, json.Valid(got))
}

func TestRegistryRegister(t *testing.T) {
	a := echoTool("a", FunctionSchema("a", "A."))
	b := echoTool("b", FunctionSchema("b", "B."))
	r, err := NewRegistry(a, b)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, r.Names())
	got, ok := r.Get("b")
	require.True(t, ok)
	assert.Same(t, b, got)
	_, ok = r.Get("c")
	assert.False(t, ok)
	assert.Equal(t, "["+string(a.schema)+","+string(b.schema)+"]", string(r.SchemasJSON()))
	assert.True(t, json.Valid(r.SchemasJSON()))
	require.Len(t, r.Schemas(), 2)

	for name, tl := range map[string]Tool{
		"duplicate":      echoTool("a", FunctionSchema("a", "again")),
		"name mismatch":  echoTool("x", FunctionSchema("y", "")),
		"not JSON":       echoTool("x", json.RawMessage(`{`)),
		"not a function": echoTool("x", json.RawMessage(`{"type": "object"}`)),
		"empty name":     echoTool("", FunctionSchema("", "")),
		"params not obj": echoTool("x", json.RawMessage(`{"type": "function", "function": {"name": "x", "parameters": {"type": "array"}}}`)),
	} {
		assert.Error(t, r.Register(tl), name)
	}
	assert.Error(t, r.Register(nil))
	assert.Equal(t, []string{"a", "b"}, r.Names(), "failed registrations change nothing")
	empty, err := NewRegistry()
	require.NoError(t, err)
	assert.Equal(t, "[]", string(empty.SchemasJSON()))
}

func TestRegistryCallValidates(t *testing.T) {
	schema := json.RawMessage(`{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
		"properties": {
			"s": {"type": "string"},
			"i": {"type": "integer"},
			"n": {"type": "number"},
			"b": {"type": "boolean"},
			"arr": {"type": "array", "items": {"type": "integer"}},
			"obj": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"], "additionalProperties": false},
			"e": {"type": "string", "enum": ["red", "green"]},
			"u": {"type": ["string", "null"]}
		},
		"required": ["s"]}}}`)
	var got json.RawMessage
	f := &fakeTool{name: "f", schema: schema, call: func(ctx context.Context, args json.RawMessage) (Result, error) {
		got = args
		return Result{Content: "ran"}, nil
	}}
	r, err := NewRegistry(f)
	require.NoError(t, err)
	ctx := context.Background()
	cases := []struct {
		args    string
		ok      bool
		content string
	}{
		{`{"s": "x"}`, true, "ran"},
		{`{"s": "x", "i": 3, "n": 2.5, "b": true, "arr": [1, 2], "obj": {"x": "y"}, "e": "red", "u": null, "extra": 1}`, true, "ran"},
		{`{"s": "x", "i": 3.0}`, true, "ran"}, // 3.0 is an integer in JSON Schema
		{`"{\"s\": \"x\"}"`, true, "ran"},     // OpenAI sends arguments as a JSON string
		{`{}`, false, `Error: invalid arguments for f: arguments: missing required field "s"`},
		{``, false, `Error: invalid arguments for f: arguments: missing required field "s"`},
		{`{"s": 1}`, false, "Error: invalid arguments for f: arguments.s: want string, got number"},
		{`{"s": "x", "i": 1.5}`, false, "Error: invalid arguments for f: arguments.i: want integer, got number"},
		{`{"s": "x", "n": "2"}`, false, "Error: invalid arguments for f: arguments.n: want number, got string"},
		{`{"s": "x", "b": "true"}`, false, "Error: invalid arguments for f: arguments.b: want boolean, got string"},
		{`{"s": "x", "arr": [1, "2"]}`, false, "Error: invalid arguments for f: arguments.arr[1]: want integer, got string"},
		{`{"s": "x", "obj": {}}`, false, `Error: invalid arguments for f: arguments.obj: missing required field "x"`},
		{`{"s": "x", "obj": {"x": "y", "z": 1}}`, false, `Error: invalid arguments for f: arguments.obj: unexpected field "z"`},
		{`{"s": "x", "e": "blue"}`, false, `Error: invalid arguments for f: arguments.e: "blue" is not one of ["red","green"]`},
		{`{"s": "x", "u": 1}`, false, "Error: invalid arguments for f: arguments.u: want string or null, got number"},
		{`[1]`, false, "Error: invalid arguments for f: arguments must be a JSON object"},
		{`{"s": "x"`, false, "Error: invalid arguments for f: arguments are not valid JSON"},
		{`"not json"`, false, "Error: invalid arguments for f: arguments must be a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			got = nil
			res, err := r.Call(ctx, "f", json.RawMessage(c.args))
			require.NoError(t, err)
			assert.Equal(t, c.content, res.Content)
			assert.Equal(t, !c.ok, res.Failed)
			assert.Equal(t, c.ok, got != nil, "tool ran")
			assert.Greater(t, res.Duration, time.Duration(0))
			if !c.ok {
				assert.Equal(t, "bad_arguments", res.Metadata["error"])
			}
		})
	}
}

func TestRegistryCallUnknownAndPanics(t *testing.T) {
	boom := &fakeTool{name: "boom", schema: FunctionSchema("boom", ""), call: func(ctx context.Context, args json.RawMessage) (Result, error) {
		panic("kaboom")
	}}
	broken := &fakeTool{name: "broken", schema: FunctionSchema("broken", ""), call: func(ctx context.Context, args json.RawMessage) (Result, error) {
		return Result{Content: "Error: down", Failed: true}, fmt.Errorf("backend down")
	}}
	r, err := NewRegistry(boom, broken)
	require.NoError(t, err)
	ctx := context.Background()

	res, err := r.Call(ctx, "nope", nil)
	require.NoError(t, err)
	assert.True(t, res.Failed)
	assert.Equal(t, `Error: unknown tool "nope"; available tools: boom, broken`, res.Content)

	res, err = r.Call(ctx, "boom", json.RawMessage(`{}`))
	require.ErrorIs(t, err, ErrToolPanic)
	assert.Contains(t, err.Error(), "kaboom")
	assert.True(t, res.Failed)
	assert.Equal(t, "Error: tool boom failed internally", res.Content)

	res, err = r.Call(ctx, "broken", json.RawMessage(`{}`))
	require.EqualError(t, err, "backend down")
	assert.True(t, res.Failed)
}

func TestRegistryValidate(t *testing.T) {
	var ran bool
	f := &fakeTool{name: "f", schema: FunctionSchema("f", "F.", Param{Name: "q", Type: "string", Required: true}),
		call: func(ctx context.Context, args json.RawMessage) (Result, error) {
			ran = true
			return Result{}, nil
		}}
	r, err := NewRegistry(f, echoTool("g", FunctionSchema("g", "G.")))
	require.NoError(t, err)
	cases := []struct {
		name, tool, args string
		want             string // the normalised arguments
		sentinel         error
		msg              string // the error text; Call shows it after "Error: " without "tool: "
	}{
		{"object", "f", ` {"q": "x"} `, `{"q": "x"}`, nil, ""},
		// OpenAI's JSON string holding the object is unwrapped.
		{"string", "f", `"{\"q\": \"x\"}"`, `{"q": "x"}`, nil, ""},
		// No arguments mean {}, which g (no parameters required) accepts.
		{"empty", "g", ``, `{}`, nil, ""},
		{"unknown", "h", `{}`, "", ErrUnknownTool, `tool: unknown tool "h"; available tools: f, g`},
		{"missing", "f", `{}`, "", ErrBadArguments, `tool: invalid arguments for f: arguments: missing required field "q"`},
		{"not an object", "f", `[1]`, "", ErrBadArguments, "tool: invalid arguments for f: arguments must be a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := r.Validate(c.tool, json.RawMessage(c.args))
			if c.sentinel != nil {
				require.ErrorIs(t, err, c.sentinel)
				assert.EqualError(t, err, c.msg)
				res, cerr := r.Call(context.Background(), c.tool, json.RawMessage(c.args))
				require.NoError(t, cerr)
				assert.Equal(t, "Error: "+c.msg[len("tool: "):], res.Content)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, string(got))
		})
	}
	assert.False(t, ran, "Validate never runs the tool")
}

func ExampleRegistry() {
	r, err := NewRegistry(&Calculator{})
	if err != nil {
		panic(err)
	}
	res, _ := r.Call(context.Background(), "calculator", json.RawMessage(`{"expression": "2^100 % 1000"}`))
	fmt.Println(res.Content, res.Failed)
	res, _ = r.Call(context.Background(), "calculator", json.RawMessage(`{"expr": "1"}`))
	fmt.Println(res.Content)
	// Output:
	// 376 false
	// Error: invalid arguments for calculator: arguments: missing required field "expression"
}
