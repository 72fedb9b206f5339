package rollout_test

import (
	"encoding/json"
	"fmt"

	"github.com/agentrl/agentrl/rollout"
)

func ExampleToolFormatByName() {
	f, err := rollout.ToolFormatByName("qwen3_coder")
	if err != nil {
		panic(err)
	}
	turn := "<tool_call>\n<function=add>\n<parameter=a>\n2\n</parameter>\n<parameter=b>\n40\n</parameter>\n</function>\n</tool_call>"
	// Qwen3-Coder's values are text, typed by the tools' schemas: the
	// engine passes them to a SchemaParser.
	calls := f.Parser.(rollout.SchemaParser).ParseWithSchemas(turn, []json.RawMessage{adder{}.Schema()})
	fmt.Println(calls[0].Name, string(calls[0].Arguments))
	fmt.Printf("%q\n", f.Format.Render(turn, []string{"42"}))
	// Output:
	// add {"a":2,"b":40}
	// "<|im_end|>\n<|im_start|>user\n<tool_response>\n42\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n"
}

func ExampleToolFormatFromTemplate() {
	// A chat template as a model's tokenizer_config.json holds it (see
	// policy/tokenizer's BPE.ChatTemplate); here the lines of Llama 3.1's
	// that render a tool's result.
	template := `{%- elif message.role == "tool" or message.role == "ipython" %}
    {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
    {%- if message.content is mapping or message.content is iterable %}
        {{- message.content | tojson }}`
	f, err := rollout.ToolFormatFromTemplate(template)
	if err != nil {
		panic(err)
	}
	turn := `{"name": "add", "parameters": {"a": 2, "b": 40}}<|eot_id|>`
	calls := f.Parser.Parse(turn)
	fmt.Println(f.Name, calls[0].Name, string(calls[0].Arguments))
	fmt.Printf("%q\n", f.Format.Render(turn, []string{"42"}))
	// Output:
	// llama3_json add {"a":2,"b":40}
	// "<|start_header_id|>ipython<|end_header_id|>\n\n\"42\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
}
