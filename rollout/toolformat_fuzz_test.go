package rollout_test

import (
	"encoding/json"
	"testing"

	"github.com/agentrl/agentrl/rollout"
)

// checkCalls checks what every parser must hold on any text: each call is
// well formed (checkParsed), and the calls' Raw texts appear in the text
// in order, without overlapping.
func checkCalls(t *testing.T, text string, calls []rollout.ParsedCall) {
	t.Helper()
	pos := 0
	for _, c := range calls {
		checkParsed(t, text, c)
		k := indexAfter(text, c.Raw, pos)
		if k < 0 {
			t.Fatalf("Raw %q is not in the text after offset %d", c.Raw, pos)
		}
		pos = k + len(c.Raw)
	}
}

func FuzzParseQwen3Coder(f *testing.F) {
	f.Add("<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n</function>\n</tool_call>")
	f.Add("<tool_call>\n<function=test_types>\n<parameter=int_param>\n4_2\n</parameter>\n<parameter=float_param>\n1e999\n</parameter>\n<parameter=obj_param>\n{'a': (1, [None])}\n</parameter>\n</function>\n</tool_call>")
	f.Add("<function=calculate_area>\n<parameter=dimensions>\n\"{'k': 'v'}\"\n</parameter></function>")
	f.Add("<tool_call><function=x><parameter=a>1</parameter></function><function=y></tool_call><tool_call>")
	f.Add("<tool_call>\n<function=test_anyof>\n<parameter=anyof_int>\nNone\n<parameter=type_as_array>\n0x1F\n</parameter>\n</function>\n</tool_call>")
	f.Fuzz(func(t *testing.T, text string) {
		calls := rollout.Qwen3Coder{}.ParseWithSchemas(text, q3cSchemas)
		checkCalls(t, text, calls)
		checkCalls(t, text, rollout.Qwen3Coder{}.Parse(text))
	})
}

func FuzzParseLlama3JSON(f *testing.F) {
	f.Add(`{"name": "searchTool", "parameters": {"query": "test1"}}; {"name": "getOpenIncidentsTool", "parameters": {}}`)
	f.Add("<|python_tag|>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}<|eom_id|>")
	f.Add(`Here {x} {"name": 1} {"name": "f", "parameters": null}; {"name"`)
	f.Fuzz(func(t *testing.T, text string) {
		checkCalls(t, text, rollout.Llama3JSON{}.Parse(text))
	})
}

func FuzzParseHarmony(f *testing.F) {
	f.Add("<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"San Francisco\"}<|call|>")
	f.Add("<|start|>assistant to=functions.a<|channel|>commentary json<|message|><|call|><|start|>x<|start|>assistant<|channel|><|message|>{}<|end|>")
	f.Add("to=<|channel|>c to=functions. <|constrain|><|message|>{}<|return|>")
	f.Fuzz(func(t *testing.T, text string) {
		calls := rollout.Harmony{}.Parse(text)
		checkCalls(t, text, calls)
		results := make([]string, len(calls))
		_ = rollout.HarmonyResults{}.Render(text, results)
	})
}

func FuzzToolFormatFromTemplate(f *testing.F) {
	f.Add("<function=<parameter=</tool_response>\\n'add_generation_prompt'<think>\\n'")
	f.Add("<|channel|><|message|>content | tojson")
	f.Fuzz(func(t *testing.T, tpl string) {
		tf, err := rollout.ToolFormatFromTemplate(tpl)
		if err == nil && (tf.Parser == nil || tf.Format == nil) {
			t.Fatalf("format %q without a parser or a result format", tf.Name)
		}
		if err == nil {
			byName, err := rollout.ToolFormatByName(tf.Name)
			if err != nil || byName.Name != tf.Name {
				t.Fatalf("ToolFormatFromTemplate names %q, which ToolFormatByName does not know", tf.Name)
			}
		}
		_ = json.Valid([]byte(tpl))
	})
}
