package rollout_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// Schemas of the tools in vLLM's tests/tool_parsers/test_qwen3coder_tool_parser.py
// (WEATHER_PARAMS, AREA_PARAMS and the test_types, test_anyof,
// update_record and greet tools), written as OpenAI function schemas.
var q3cSchemas = []json.RawMessage{
	json.RawMessage(`{"type": "function", "function": {"name": "get_current_weather", "parameters": {"type": "object",
		"properties": {"city": {"type": "string"}, "state": {"type": "string"}, "unit": {"type": "string", "enum": ["fahrenheit", "celsius"]}},
		"required": ["city", "state"]}}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "calculate_area", "parameters": {"type": "object",
		"properties": {"shape": {"type": "string"}, "dimensions": {"type": "object"}, "precision": {"type": "integer"}}}}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "test_types", "parameters": {"type": "object",
		"properties": {"int_param": {"type": "integer"}, "float_param": {"type": "float"}, "bool_param": {"type": "boolean"},
		"str_param": {"type": "string"}, "obj_param": {"type": "object"}}}}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "test_anyof", "parameters": {"type": "object", "properties": {
		"anyof_int": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 5},
		"anyof_str": {"anyOf": [{"type": "string"}, {"type": "null"}]},
		"anyof_array": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
		"anyof_obj": {"anyOf": [{"type": "object"}, {"type": "null"}]},
		"type_as_array": {"type": ["integer", "null"]},
		"multi_non_null": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}}}}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "update_record", "parameters": {"type": "object",
		"properties": {"data": {"anyOf": [{"type": "object"}, {"type": "null"}]}}}}}`),
	json.RawMessage(`{"name": "greet", "parameters": {"type": "object", "properties": {"message": {"type": "string"}}}}`),
}

// TestQwen3CoderVLLMGoldens checks the parser on the model outputs and
// expected calls of vLLM's tests/tool_parsers/test_qwen3coder_tool_parser.py:
// test_extract_tool_calls (single_tool, single_tool_with_content,
// single_tool_multiline_param, parallel_tools, tool_with_typed_params),
// test_extract_tool_calls_fallback_no_tags, _type_conversion,
// _anyof_type_conversion, _missing_closing_parameter_tag,
// test_none_tool_calls_filtered, test_anyof_parameter_not_double_encoded
// and test_no_double_serialization_string_args. Arguments are compared as
// JSON values, as vLLM's assert_tool_calls does.
func TestQwen3CoderVLLMGoldens(t *testing.T) {
	weather := "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>"
	type call struct{ name, args string }
	cases := []struct {
		name  string
		text  string
		calls []call
	}{
		{"no_tools", "This is a test response without any tool calls", nil},
		{"single_tool", weather, []call{{"get_current_weather", `{"city": "Dallas", "state": "TX", "unit": "fahrenheit"}`}}},
		{"single_tool_with_content", "Sure! Let me check the weather for you." + weather,
			[]call{{"get_current_weather", `{"city": "Dallas", "state": "TX", "unit": "fahrenheit"}`}}},
		{"single_tool_multiline_param", "<tool_call>\n<function=calculate_area>\n<parameter=shape>\nrectangle\n</parameter>\n<parameter=dimensions>\n{\"width\": 10, \n \"height\": 20}\n</parameter>\n<parameter=precision>\n2\n</parameter>\n</function>\n</tool_call>",
			[]call{{"calculate_area", `{"shape": "rectangle", "dimensions": {"width": 10, "height": 20}, "precision": 2}`}}},
		{"parallel_tools", weather + "\n" + strings.NewReplacer("Dallas", "Orlando", "TX", "FL").Replace(weather),
			[]call{{"get_current_weather", `{"city": "Dallas", "state": "TX", "unit": "fahrenheit"}`},
				{"get_current_weather", `{"city": "Orlando", "state": "FL", "unit": "fahrenheit"}`}}},
		{"tool_with_typed_params", "Let me calculate that area for you.<tool_call>\n<function=calculate_area>\n<parameter=shape>\ncircle\n</parameter>\n<parameter=dimensions>\n{\"radius\": 15.5}\n</parameter>\n<parameter=precision>\n3\n</parameter>\n</function>\n</tool_call>",
			[]call{{"calculate_area", `{"shape": "circle", "dimensions": {"radius": 15.5}, "precision": 3}`}}},
		{"fallback_no_tags", "<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n</function>",
			[]call{{"get_current_weather", `{"city": "Dallas", "state": "TX"}`}}},
		{"type_conversion", "<tool_call>\n<function=test_types>\n<parameter=int_param>\n42\n</parameter>\n<parameter=float_param>\n3.14\n</parameter>\n<parameter=bool_param>\ntrue\n</parameter>\n<parameter=str_param>\nhello world\n</parameter>\n<parameter=obj_param>\n{\"key\": \"value\"}\n</parameter>\n</function>\n</tool_call>",
			[]call{{"test_types", `{"int_param": 42, "float_param": 3.14, "bool_param": true, "str_param": "hello world", "obj_param": {"key": "value"}}`}}},
		{"anyof_type_conversion", "<tool_call>\n<function=test_anyof>\n<parameter=anyof_int>\n5\n</parameter>\n<parameter=anyof_str>\nhello\n</parameter>\n<parameter=anyof_array>\n[\"a\", \"b\", \"c\"]\n</parameter>\n<parameter=anyof_obj>\n{\"key\": \"value\"}\n</parameter>\n<parameter=type_as_array>\n42\n</parameter>\n<parameter=multi_non_null>\nsome text\n</parameter>\n</function>\n</tool_call>",
			[]call{{"test_anyof", `{"anyof_int": 5, "anyof_str": "hello", "anyof_array": ["a", "b", "c"], "anyof_obj": {"key": "value"}, "type_as_array": 42, "multi_non_null": "some text"}`}}},
		{"missing_closing_parameter_tag", "Let me check the weather for you:\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>",
			[]call{{"get_current_weather", `{"city": "Dallas", "state": "TX", "unit": "fahrenheit"}`}}},
		{"anyof_not_double_encoded", "<tool_call>\n<function=update_record>\n<parameter=data>{\"key\": \"value\", \"count\": 42}</parameter>\n</function>\n</tool_call>",
			[]call{{"update_record", `{"data": {"key": "value", "count": 42}}`}}},
		{"string_args_not_double_serialized", "<tool_call>\n<function=greet>\n<parameter=message>hello world</parameter>\n</function>\n</tool_call>",
			[]call{{"greet", `{"message": "hello world"}`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := rollout.Qwen3Coder{}.ParseWithSchemas(tc.text, q3cSchemas)
			require.Len(t, got, len(tc.calls))
			for i, c := range got {
				require.NoError(t, c.Err)
				assert.Equal(t, tc.calls[i].name, c.Name)
				assert.JSONEq(t, tc.calls[i].args, string(c.Arguments))
				assert.Contains(t, tc.text, c.Raw)
			}
		})
	}
	// test_none_tool_calls_filtered: vLLM drops the call whose <function=
	// tag is never closed and keeps the good one; here the bad call is an
	// error the model reads, in its place.
	got := rollout.Qwen3Coder{}.ParseWithSchemas("<tool_call>\n<function=bad_func_no_gt\n</function>\n</tool_call>\n<tool_call>\n<function=get_current_weather>\n<parameter=city>Dallas</parameter>\n<parameter=state>TX</parameter>\n</function>\n</tool_call>", q3cSchemas)
	require.Len(t, got, 2)
	require.ErrorIs(t, got[0].Err, rollout.ErrBadToolCall)
	assert.Contains(t, got[0].Err.Error(), `function name "bad_func_no_gt\n</function" is not a name`)
	require.NoError(t, got[1].Err)
	assert.JSONEq(t, `{"city": "Dallas", "state": "TX"}`, string(got[1].Arguments))
}

// TestQwen3CoderConversion checks each branch of the value conversion
// (vLLM's _convert_param_value, qwen3coder_tool_parser.py) on values
// derived by hand from Python's int(), float(), json.loads and
// ast.literal_eval.
func TestQwen3CoderConversion(t *testing.T) {
	schema := func(props string) []json.RawMessage {
		return []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": ` + props + `}}}`)}
	}
	call := func(value string) string {
		return "<tool_call>\n<function=f>\n<parameter=p>\n" + value + "\n</parameter>\n</function>\n</tool_call>"
	}
	cases := []struct {
		name, prop, value, want string
	}{
		{"string kept verbatim", `{"type": "string"}`, "  42 ", `"  42 "`},
		{"string null stays text", `{"type": "string"}`, "null", `"null"`},
		{"nullable string null", `{"anyOf": [{"type": "string"}, {"type": "null"}]}`, "None", `null`},
		{"enum type is text", `{"type": "enum"}`, "1", `"1"`},
		{"integer", `{"type": "integer"}`, " -1_000 ", `-1000`},
		{"integer None", `{"type": "integer"}`, "None", `null`},
		{"integer not a number stays text", `{"type": "integer"}`, "4.0", `"4.0"`},
		{"int64 prefix", `{"type": "int64"}`, "7", `7`},
		{"number integral becomes int", `{"type": "number"}`, "4.0", `4`},
		{"number fraction", `{"type": "number"}`, "2.5e-3", `0.0025`},
		{"number big integral", `{"type": "number"}`, "1e20", `100000000000000000000`},
		{"number inf stays text", `{"type": "number"}`, "inf", `"inf"`},
		{"number nan stays text", `{"type": "number"}`, "nan", `"nan"`},
		{"float type", `{"type": "float"}`, "3.14", `3.14`},
		{"boolean any case", `{"type": "boolean"}`, "True", `true`},
		{"boolean false", `{"type": "bool"}`, "FALSE", `false`},
		{"boolean other stays text", `{"type": "boolean"}`, "yes", `"yes"`},
		{"object JSON", `{"type": "object"}`, `{"a": [1, 2.5, null]}`, `{"a":[1,2.5,null]}`},
		{"object Python literal", `{"type": "object"}`, `{'a': (1, True), 'b': None}`, `{"a":[1,true],"b":null}`},
		{"object JSON string holding a Python literal", `{"type": "object"}`, `"{'k': 'v'}"`, `{"k":"v"}`},
		{"object JSON string", `{"type": "object"}`, `"plain"`, `"plain"`},
		{"object not readable stays text", `{"type": "object"}`, `{a: 1}`, `"{a: 1}"`},
		{"array", `{"type": "array"}`, `[1, 'x']`, `[1,"x"]`},
		{"dict prefix", `{"type": "dict"}`, `{}`, `{}`},
		{"list prefix", `{"type": "list[int]"}`, `[]`, `[]`},
		{"array null", `{"type": "array"}`, "null", `null`},
		{"other type literal", `{"type": "any"}`, "[1, 2]", `[1,2]`},
		{"other type not a literal", `{"type": "any"}`, "hello", `"hello"`},
		{"only null type", `{"type": "null"}`, "NULL", `null`},
		{"no type is string", `{"description": "x"}`, "5", `"5"`},
		{"type list nullable", `{"type": ["integer", "null"]}`, "null", `null`},
		{"type list first non-null", `{"type": ["string", "null"]}`, "123", `"123"`},
		{"control characters escaped", `{"type": "string"}`, "a\tb\x01", `"a\tb\u0001"`},
		{"html kept", `{"type": "string"}`, "<b>&</b>", `"<b>&</b>"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := rollout.Qwen3Coder{}.ParseWithSchemas(call(tc.value), schema(`{"p": `+tc.prop+`}`))
			require.Len(t, got, 1)
			require.NoError(t, got[0].Err)
			assert.Equal(t, `{"p":`+tc.want+`}`, string(got[0].Arguments))
		})
	}
	// A parameter the schema does not name, and a tool with no schema,
	// keep their text.
	got := rollout.Qwen3Coder{}.ParseWithSchemas(call("42"), schema(`{"q": {"type": "integer"}}`))
	require.Len(t, got, 1)
	assert.Equal(t, `{"p":"42"}`, string(got[0].Arguments))
	got = rollout.Qwen3Coder{}.Parse(call("42"))
	require.Len(t, got, 1)
	assert.Equal(t, `{"p":"42"}`, string(got[0].Arguments))
}

func TestQwen3CoderStructure(t *testing.T) {
	props := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "write", "parameters": {"type": "object",
		"properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}`)}
	type call struct{ name, args, bad string }
	cases := []struct {
		name  string
		text  string
		calls []call
	}{
		{"unclosed tool_call is no call", "<tool_call>\n<function=write>\n<parameter=path>\na\n</parameter>", nil},
		{"unclosed function block without tool_call is no call", "<function=write>\n<parameter=path>\na\n</parameter>", nil},
		{"missing </function> inside a closed call", "<tool_call>\n<function=write>\n<parameter=path>\na\n</parameter>\n</tool_call>",
			[]call{{"write", `{"path":"a"}`, ""}}},
		{"literal closing tags inside a value", "<tool_call>\n<function=write>\n<parameter=content>\nx</parameter> y </function> z\n</parameter>\n<parameter=path>\np\n</parameter>\n</function>\n</tool_call>",
			[]call{{"write", `{"content":"x</parameter> y </function> z","path":"p"}`, ""}}},
		{"a line-start tag of another name stays in the value", "<tool_call>\n<function=write>\n<parameter=content>\nA\n<parameter=other>\nB\n</parameter>\n</function>\n</tool_call>",
			[]call{{"write", `{"content":"A\n<parameter=other>\nB"}`, ""}}},
		{"only one newline stripped at each end", "<tool_call>\n<function=write>\n<parameter=content>\n\n x \n\n</parameter>\n</function>\n</tool_call>",
			[]call{{"write", `{"content":"\n x \n"}`, ""}}},
		{"no parameters", "<tool_call>\n<function=write>\n</function>\n</tool_call>", []call{{"write", `{}`, ""}}},
		{"two functions in one tool_call", "<tool_call>\n<function=write>\n<parameter=path>\na\n</parameter>\n</function>\n<function=write>\n<parameter=path>\nb\n</parameter>\n</function>\n</tool_call>",
			[]call{{"write", `{"path":"a"}`, ""}, {"write", `{"path":"b"}`, ""}}},
		{"no function", "<tool_call>\n{\"name\": \"write\"}\n</tool_call>", []call{{"", "", "no <function=NAME>"}}},
		{"bad function name", "<tool_call>\n<function=my tool>\n</function>\n</tool_call>", []call{{"", "", `function name "my tool" is not a name`}}},
		{"unclosed parameter tag", "<tool_call>\n<function=write>\n<parameter=path\n</function>\n</tool_call>", []call{{"write", "", "not closed by '>'"}}},
		{"parameter twice", "<tool_call>\n<function=write>\n<parameter=path>\na\n</parameter>\n<parameter=path>\nb\n</parameter>\n</function>\n</tool_call>",
			[]call{{"write", "", `parameter "path" is given twice`}}},
		{"empty parameter name", "<tool_call>\n<function=write>\n<parameter=>\na\n</parameter>\n</function>\n</tool_call>", []call{{"write", "", `parameter name "" is not a name`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := rollout.Qwen3Coder{}.ParseWithSchemas(tc.text, props)
			require.Len(t, got, len(tc.calls))
			for i, c := range got {
				assert.Equal(t, tc.calls[i].name, c.Name)
				assert.Contains(t, tc.text, c.Raw)
				if tc.calls[i].bad != "" {
					require.ErrorIs(t, c.Err, rollout.ErrBadToolCall)
					assert.Contains(t, c.Err.Error(), tc.calls[i].bad)
					assert.Nil(t, c.Arguments)
					continue
				}
				require.NoError(t, c.Err)
				assert.Equal(t, tc.calls[i].args, string(c.Arguments))
			}
		})
	}
	assert.Equal(t, []string{"</tool_call>"}, rollout.Qwen3Coder{}.StopStrings())
	assert.Nil(t, rollout.Qwen3Coder{NoStop: true}.StopStrings())
}

// TestQwen3CoderArgumentsPassRegistry checks that converted arguments are
// what the tool registry's schema check accepts, and that a value that did
// not convert is reported by it.
func TestQwen3CoderArgumentsPassRegistry(t *testing.T) {
	reg, err := tool.NewRegistry(schemaTool{tool.FunctionSchema("count", "",
		tool.Param{Name: "n", Type: "integer", Required: true},
		tool.Param{Name: "verbose", Type: "boolean"})})
	require.NoError(t, err)
	parse := func(n, verbose string) rollout.ParsedCall {
		calls := rollout.Qwen3Coder{}.ParseWithSchemas("<tool_call>\n<function=count>\n<parameter=n>\n"+n+"\n</parameter>\n<parameter=verbose>\n"+verbose+"\n</parameter>\n</function>\n</tool_call>", reg.Schemas())
		require.Len(t, calls, 1)
		require.NoError(t, calls[0].Err)
		return calls[0]
	}
	c := parse("12", "False")
	_, err = reg.Validate(c.Name, c.Arguments)
	assert.NoError(t, err)
	c = parse("twelve", "true")
	_, err = reg.Validate(c.Name, c.Arguments)
	assert.ErrorIs(t, err, tool.ErrBadArguments)
}

// schemaTool is a tool with a given schema whose calls echo their
// arguments.
type schemaTool struct{ schema json.RawMessage }

func (t schemaTool) Name() string {
	var s struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	_ = json.Unmarshal(t.schema, &s)
	return s.Function.Name
}
func (t schemaTool) Schema() json.RawMessage { return t.schema }
func (t schemaTool) Call(_ context.Context, args json.RawMessage) (tool.Result, error) {
	return tool.Result{Content: string(args)}, nil
}

// TestEngineQwen3Coder runs Qwen3-Coder's format through the engine: the
// engine hands the request's tool schemas to the parser, so the tool gets
// typed arguments; a malformed call gets an error result the model reads;
// and the results are rendered in Qwen3-Coder's layout.
func TestEngineQwen3Coder(t *testing.T) {
	count := schemaTool{tool.FunctionSchema("count", "",
		tool.Param{Name: "n", Type: "integer", Required: true},
		tool.Param{Name: "verbose", Type: "boolean"})}
	f, err := rollout.ToolFormatByName(rollout.FormatQwen3Coder)
	require.NoError(t, err)
	bad := "<tool_call>\n<function=count>\n<parameter=n>\n1\n</parameter>\n<parameter=n>\n2\n</parameter>\n</function>\n</tool_call>"
	good := "<tool_call>\n<function=count>\n<parameter=n>\n12\n</parameter>\n<parameter=verbose>\nTrue\n</parameter>\n</function>\n</tool_call>"
	answer := "Counted.<|im_end|>"
	s := newScripted()
	s.HandleText(prompt, policytest.Text(bad+"<|im_end|>"), policytest.Text(good+"\nmore"), policytest.Text(answer))
	e := newEngine(t, s, func(c *rollout.Config) {
		c.Tools = []tool.Tool{count}
		c.Parser, c.Format = f.Parser, f.Format
	})
	trajs, err := e.Run(context.Background(), []rollout.Request{{ID: "q", PromptText: prompt}})
	require.NoError(t, err)
	tr := trajs[0]
	require.Len(t, tr.ToolCalls, 2)
	require.ErrorIs(t, tr.ToolCalls[0].Err, rollout.ErrBadToolCall)
	errText := `Error: malformed tool call: parameter "n" is given twice`
	assert.Equal(t, errText, tr.ToolCalls[0].Result.Content)
	require.NoError(t, tr.ToolCalls[1].Err)
	assert.Equal(t, `{"n":12,"verbose":true}`, string(tr.ToolCalls[1].Arguments))
	assert.Equal(t, `{"n":12,"verbose":true}`, tr.ToolCalls[1].Result.Content)

	// Hand-derived from Qwen3-Coder's template (format_test.go checks the
	// layout against it): one user turn of <tool_response> lines.
	glue := func(r string) string {
		return "<|im_end|>\n<|im_start|>user\n<tool_response>\n" + r + "\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n"
	}
	assert.Equal(t, enc(prompt+bad+glue(errText)+good+glue(`{"n":12,"verbose":true}`)+answer), tr.Tokens)
	assert.Equal(t, rollout.StopNoToolCall, tr.Stop)
}
