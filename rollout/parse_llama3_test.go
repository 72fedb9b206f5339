package rollout_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/rollout"
)

// TestLlama3JSONParse checks the parser on the model outputs of vLLM's
// tests/tool_parsers/test_llama3_json_tool_parser.py (their names given
// first) and on cases of its own. Where vLLM returns no call for a
// malformed one (invalid_json, missing_name_key,
// missing_parameters_and_arguments_key), the call here is an error the
// model reads.
func TestLlama3JSONParse(t *testing.T) {
	type call struct{ name, args, bad string }
	cases := []struct {
		name  string
		text  string
		calls []call
	}{
		{"simple", `Here is the result: {"name": "getOpenIncidentsTool", "parameters": {}} Would you like to know more?`,
			[]call{{"getOpenIncidentsTool", `{}`, ""}}},
		{"with_arguments", `{"name": "searchTool", "parameters": {"query": "test query", "limit": 10}}`,
			[]call{{"searchTool", `{"query":"test query","limit":10}`, ""}}},
		{"no_json", "This is just some text without any tool calls", nil},
		{"invalid_json", `{"name": "invalidTool", "parameters": {invalid json}`, []call{{"", "", "not a JSON object"}}},
		{"with_arguments_key", `{"name": "searchTool", "arguments": {"query": "test"}}`, []call{{"searchTool", `{"query":"test"}`, ""}}},
		{"multiple_json", `{"name": "searchTool", "parameters": {"query": "test1"}}; {"name": "getOpenIncidentsTool", "parameters": {}}; {"name": "searchTool", "parameters": {"query": "test2"}}`,
			[]call{{"searchTool", `{"query":"test1"}`, ""}, {"getOpenIncidentsTool", `{}`, ""}, {"searchTool", `{"query":"test2"}`, ""}}},
		{"multiple_json_with_whitespace", `{"name": "searchTool", "parameters": {"query": "test1"}} ; {"name": "getOpenIncidentsTool", "parameters": {}} ; {"name": "searchTool", "parameters": {"query": "test2"}}`,
			[]call{{"searchTool", `{"query":"test1"}`, ""}, {"getOpenIncidentsTool", `{}`, ""}, {"searchTool", `{"query":"test2"}`, ""}}},
		{"multiple_json_with_surrounding_text", `Here are the results: {"name": "searchTool", "parameters": {"query": "test1"}}; {"name": "getOpenIncidentsTool", "parameters": {}}; {"name": "searchTool", "parameters": {"query": "test2"}} Would you like to know more?`,
			[]call{{"searchTool", `{"query":"test1"}`, ""}, {"getOpenIncidentsTool", `{}`, ""}, {"searchTool", `{"query":"test2"}`, ""}}},
		{"deeply_nested_json", `{"name": "complexTool", "parameters": {"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}}}`,
			[]call{{"complexTool", `{"level1":{"level2":{"level3":{"level4":{"value":"deep"}}}}}`, ""}}},
		{"quotes_and_brackets_in_string", `{"name": "searchTool", "parameters": {"query": "test {value} [complex]","nested": {"inner": "more {brackets}"}}}`,
			[]call{{"searchTool", `{"query":"test {value} [complex]","nested":{"inner":"more {brackets}"}}`, ""}}},
		{"escaped_quotes_in_nested_json", `{"name": "parserTool", "parameters": {"text": "He said \"Hello {world}\""}}`,
			[]call{{"parserTool", `{"text":"He said \"Hello {world}\""}`, ""}}},
		{"missing_name_key", `{"parameters": {}}`, []call{{"", "", `no "name"`}}},
		{"missing_parameters_and_arguments_key", `{"name": "toolWithoutParams"}`, []call{{"toolWithoutParams", "", `no "parameters"`}}},
		{"brace_in_trailing_text", `{"name": "searchTool", "parameters": {"query": "test"}} I used {searchTool} for this.`,
			[]call{{"searchTool", `{"query":"test"}`, ""}}},
		{"json_fragment_in_trailing_text", `{"name": "searchTool", "parameters": {"query": "test"}} The arguments I passed were {"query": "test"}`,
			[]call{{"searchTool", `{"query":"test"}`, ""}}},
		// Cases of this package.
		{"python tag and end of turn", "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}<|eom_id|>", []call{{"f", `{"a":1}`, ""}}},
		{"template rendering", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>", []call{{"get_weather", `{"city":"Paris"}`, ""}}},
		{"answer with braces is text", `The set is {1, 2}; see \boxed{4}.`, nil},
		{"plain JSON answer is text", `{"answer": 42}`, nil},
		{"bad call after the python tag", "Let me check.<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": }<|eom_id|>", []call{{"", "", "not a JSON object"}}},
		{"bad call after a separator", `{"name": "f", "parameters": {}}; {"name": "g", "parameters": [1]}`,
			[]call{{"f", `{}`, ""}, {"g", "", `tool "g": arguments are not a JSON object`}}},
		{"truncated call after a separator", `{"name": "f", "parameters": {}}; {"name": "g"`, []call{{"f", `{}`, ""}, {"", "", "not a JSON object"}}},
		{"name not a string", `{"name": 3, "parameters": {}}`, []call{{"", "", `"name" is 3`}}},
		{"both keys", `{"name": "f", "parameters": {}, "arguments": {}}`, []call{{"f", "", `both "parameters" and "arguments"`}}},
		{"arguments as a JSON string", `{"name": "f", "arguments": "{\"a\": 1}"}`, []call{{"f", `{"a":1}`, ""}}},
		{"null parameters", `{"name": "f", "parameters": null}`, []call{{"f", `{}`, ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := rollout.Llama3JSON{}.Parse(tc.text)
			require.Len(t, got, len(tc.calls))
			last := 0
			for i, c := range got {
				assert.Equal(t, tc.calls[i].name, c.Name)
				k := indexAfter(tc.text, c.Raw, last)
				require.GreaterOrEqual(t, k, 0, "Raw %q in order in the text", c.Raw)
				last = k + len(c.Raw)
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
	assert.Nil(t, rollout.Llama3JSON{}.StopStrings())
}
