package rollout_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/rollout"
)

func TestToolFormatByName(t *testing.T) {
	cases := map[string]rollout.ToolFormat{
		"hermes":      {Name: "hermes", Parser: rollout.Hermes{}, Format: rollout.ChatML{}},
		"qwen3_coder": {Name: "qwen3_coder", Parser: rollout.Qwen3Coder{}, Format: rollout.Qwen3CoderResults{}},
		"llama3_json": {Name: "llama3_json", Parser: rollout.Llama3JSON{}, Format: rollout.Llama3Results{}},
		"openai":      {Name: "openai", Parser: rollout.Harmony{}, Format: rollout.HarmonyResults{}},
	}
	for name, want := range cases {
		got, err := rollout.ToolFormatByName(name)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := rollout.ToolFormatByName("pythonic")
	require.ErrorIs(t, err, rollout.ErrUnknownToolFormat)
	assert.Contains(t, err.Error(), `"pythonic" (known: hermes, qwen3_coder, llama3_json, openai)`)
}

// TestToolFormatFromTemplate picks formats from real templates (Qwen3's,
// in its tokenizer; Qwen3-Coder's) and from the distinguishing lines of
// others, quoted from their published templates: Qwen3.5's generation
// prompt, Llama 3.1's tool branch (Meta's, and vLLM's example that wraps
// {"output": …}), gpt-oss's tool branch (as published, and Unsloth's fix
// that renders strings raw).
func TestToolFormatFromTemplate(t *testing.T) {
	qwen3 := qwen3Tokenizer(t).ChatTemplate()
	coder, err := os.ReadFile("testdata/qwen3coder_chat_template.jinja")
	require.NoError(t, err)
	qwen35 := `{{- '<tool_call>\n<function=' + tool_call.name + '>\n' }}{{- '<parameter=' + args_name + '>\n' }}
{{- '\n<tool_response>\n' }}{{- content }}{{- '\n</tool_response>' }}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- else %}
        {{- '<think>\n' }}
    {%- endif %}
{%- endif %}`
	llama31 := `{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}{%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}{{- message.content | tojson }}`
	llamaVLLM := `{{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}{%- if message.content is string %}{{- { "output": message.content } | tojson }}`
	gptoss := `{{- "<|start|>functions." + last_tool_call.name }}
        {{- " to=assistant<|channel|>commentary<|message|>" + message.content|tojson + "<|end|>" }}`
	gptossUnsloth := `{{- "<|start|>functions." + last_tool_call.name }}
        {%- if message.content is string %}
            {{- " to=assistant<|channel|>commentary<|message|>" + message.content + "<|end|>" }}
        {%- else %}
            {{- " to=assistant<|channel|>commentary<|message|>" + message.content|tojson + "<|end|>" }}
        {%- endif %}`
	cases := []struct {
		name, template string
		want           rollout.ToolFormat
	}{
		{"qwen3", qwen3, rollout.ToolFormat{Name: "hermes", Parser: rollout.Hermes{}, Format: rollout.ChatML{}}},
		{"qwen3-coder", string(coder), rollout.ToolFormat{Name: "qwen3_coder", Parser: rollout.Qwen3Coder{}, Format: rollout.Qwen3CoderResults{}}},
		{"qwen3.5", qwen35, rollout.ToolFormat{Name: "qwen3_coder", Parser: rollout.Qwen3Coder{},
			Format: rollout.ChatML{GenerationPrompt: "<|im_start|>assistant\n<think>\n"}}},
		{"llama3.1", llama31, rollout.ToolFormat{Name: "llama3_json", Parser: rollout.Llama3JSON{}, Format: rollout.Llama3Results{}}},
		{"llama3.1 vllm example", llamaVLLM, rollout.ToolFormat{Name: "llama3_json", Parser: rollout.Llama3JSON{}, Format: rollout.Llama3Results{OutputObject: true}}},
		{"gpt-oss", gptoss, rollout.ToolFormat{Name: "openai", Parser: rollout.Harmony{}, Format: rollout.HarmonyResults{QuoteResults: true}}},
		{"gpt-oss unsloth", gptossUnsloth, rollout.ToolFormat{Name: "openai", Parser: rollout.Harmony{}, Format: rollout.HarmonyResults{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rollout.ToolFormatFromTemplate(tc.template)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err = rollout.ToolFormatFromTemplate("{% for m in messages %}{{ m.content }}{% endfor %}")
	require.ErrorIs(t, err, rollout.ErrUnknownToolFormat)
}
