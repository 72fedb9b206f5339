package rollout_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
	"github.com/agentrl/agentrl/rollout"
)

// qwen3Tokenizer loads Qwen3's tokenizer. Qwen3-Coder's has the same
// vocabulary size and the same added tokens at the same ids (<tool_call>
// to </tool_response> among them); its own tokenizer.json is not
// shipped here.
func qwen3Tokenizer(t *testing.T) *tokenizer.BPE {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, qwen3.WriteFiles(dir))
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	return tok
}

// checkTokenFaithful checks that the engine's tokens for a conversation
// (the prompt's, the turn's as the model wrote it, the glue's as the
// format renders it, each encoded on its own) are the tokens of the
// template's whole rendering.
func checkTokenFaithful(t *testing.T, tok rollout.Tokenizer, prompt, turn, glue string) {
	t.Helper()
	engine := slices.Concat(tok.Encode(prompt), tok.Encode(turn), tok.Encode(glue))
	assert.Equal(t, tok.Encode(prompt+turn+glue), engine, "tokens of the engine's pieces differ from the whole rendering's")
}

type templateCase struct {
	Name     string              `json:"name"`
	Messages []tokenizer.Message `json:"messages"`
	Tools    []json.RawMessage   `json:"tools"`
	Expected string              `json:"expected"`
}

// TestQwen3CoderTemplateFaithful holds Qwen3CoderResults and Qwen3Coder to
// Qwen3-Coder's chat template (testdata/qwen3coder_chat_template.jinja)
// on conversations that end in tool results, rendered by Python's jinja2
// (testdata/gen_toolformat_goldens.py): the text after the last
// assistant turn's final </tool_call> must be Render's, token for token
// with Qwen3's tokenizer, and the turn the template renders for the
// assistant's calls must parse back into those calls, values typed by
// the tools' schemas.
func TestQwen3CoderTemplateFaithful(t *testing.T) {
	data, err := os.ReadFile("testdata/qwen3coder_goldens.json")
	require.NoError(t, err)
	var cases []templateCase
	require.NoError(t, json.Unmarshal(data, &cases))
	require.Len(t, cases, 3)
	tok := qwen3Tokenizer(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			const genPrompt = "<|im_start|>assistant\n"
			start := strings.LastIndex(c.Expected, genPrompt[:len(genPrompt)-1]) // the last assistant turn's header
			start = strings.LastIndex(c.Expected[:start], genPrompt) + len(genPrompt)
			cut := strings.LastIndex(c.Expected, "</tool_call>") + len("</tool_call>")
			prompt, turn, glue := c.Expected[:start], c.Expected[start:cut], c.Expected[cut:]

			var results []string
			n := len(c.Messages)
			for n > 0 && c.Messages[n-1].Role == "tool" {
				results = append([]string{c.Messages[n-1].Content}, results...)
				n--
			}
			assert.Equal(t, glue, rollout.Qwen3CoderResults{}.Render(turn, results))
			assert.Equal(t, strings.TrimPrefix(glue, "<|im_end|>"), rollout.Qwen3CoderResults{}.Render(turn+"<|im_end|>", results))
			checkTokenFaithful(t, tok, prompt, turn, glue)

			calls := rollout.Qwen3Coder{}.ParseWithSchemas(turn, c.Tools)
			want := c.Messages[n-1].ToolCalls
			require.Len(t, calls, len(want))
			for i, call := range calls {
				require.NoError(t, call.Err)
				assert.Equal(t, want[i].Function.Name, call.Name)
				assert.JSONEq(t, string(want[i].Function.Arguments), string(call.Arguments))
			}
		})
	}
}

// TestChatMLTokenFaithful adds the token check to TestChatMLMatchesQwen3Template:
// ChatML's rendering, encoded on its own with Qwen3's tokenizer, gives the
// tokens of Qwen3's template rendering.
func TestChatMLTokenFaithful(t *testing.T) {
	data, err := os.ReadFile("testdata/chat_template_cases.json")
	require.NoError(t, err)
	var cases []templateCase
	require.NoError(t, json.Unmarshal(data, &cases))
	tok := qwen3Tokenizer(t)
	checked := 0
	for _, c := range cases {
		n := len(c.Messages)
		if n == 0 || c.Messages[n-1].Role != "tool" {
			continue
		}
		var results []string
		for n > 0 && c.Messages[n-1].Role == "tool" {
			results = append([]string{c.Messages[n-1].Content}, results...)
			n--
		}
		cut := strings.LastIndex(c.Expected, "</tool_call>") + len("</tool_call>")
		start := strings.LastIndex(c.Expected[:cut], "<|im_start|>assistant\n") + len("<|im_start|>assistant\n")
		glue := rollout.ChatML{}.Render(c.Expected[start:cut], results)
		require.Equal(t, c.Expected[cut:], glue)
		checkTokenFaithful(t, tok, c.Expected[:start], c.Expected[start:cut], glue)
		checked++
	}
	assert.Equal(t, 2, checked)
}

// llama3Tokenizer is a byte-level BPE tokenizer with Llama 3's
// pre-tokenizer (testdata/tiny_llama3.json, a cut-down vocabulary) and
// Llama 3's special tokens added. Llama 3's own tokenizer is not
// available here; this one splits text the way it does, which is what
// token faithfulness at the glue's edges depends on.
func llama3Tokenizer(t *testing.T) *tokenizer.BPE {
	t.Helper()
	data, err := os.ReadFile("testdata/tiny_llama3.json")
	require.NoError(t, err)
	var f map[string]any
	require.NoError(t, json.Unmarshal(data, &f))
	next := len(f["model"].(map[string]any)["vocab"].(map[string]any)) + len(f["added_tokens"].([]any))
	var added []any
	for i, s := range []string{"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"} {
		added = append(added, map[string]any{"id": next + i, "content": s, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
	}
	f["added_tokens"] = append(f["added_tokens"].([]any), added...)
	data, err = json.Marshal(f)
	require.NoError(t, err)
	tok, err := tokenizer.Parse(data)
	require.NoError(t, err)
	return tok
}

// TestLlama3ResultsFaithful checks Llama3Results against the text Llama
// 3.1's chat template (Meta's, in the tokenizer_config.json of
// Llama-3.1-8B-Instruct) renders after an assistant tool call. The
// template is under the Llama 3.1 Community License and is not copied
// here; the expected strings are written by hand from its rules, quoted
// below, and were checked once against its rendering by Python's jinja2:
//
//	{%- elif 'tool_calls' in message %} … '<|start_header_id|>assistant<|end_header_id|>\n\n' … '{"name": "' + tool_call.name + '", ' … '"parameters": ' … tool_call.arguments | tojson … "}" … "<|eot_id|>"
//	{%- elif message.role == "tool" or message.role == "ipython" %} "<|start_header_id|>ipython<|end_header_id|>\n\n" … {%- if message.content is mapping or message.content is iterable %} message.content | tojson … "<|eot_id|>"
//	{%- if add_generation_prompt %} '<|start_header_id|>assistant<|end_header_id|>\n\n'
//
// A string is iterable, so a string result is rendered as a JSON string.
func TestLlama3ResultsFaithful(t *testing.T) {
	prompt := "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWeather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	turn := `{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}`
	result := "{\"temp\": 21, \"sky\": \"clear\"}\nline2 \"q\" \\ é\t"
	glue := "<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n" +
		`"{\"temp\": 21, \"sky\": \"clear\"}\nline2 \"q\" \\ é\t"` +
		"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	assert.Equal(t, glue, rollout.Llama3Results{}.Render(turn, []string{result}))
	assert.Equal(t, strings.TrimPrefix(glue, "<|eot_id|>"), rollout.Llama3Results{}.Render(turn+"<|eot_id|>", []string{result}))
	assert.Equal(t, strings.TrimPrefix(glue, "<|eot_id|>"), rollout.Llama3Results{}.Render("<|python_tag|>"+turn+"<|eom_id|>", []string{result}))
	checkTokenFaithful(t, llama3Tokenizer(t), prompt, turn, glue)

	calls := rollout.Llama3JSON{}.Parse(turn)
	require.Len(t, calls, 1)
	require.NoError(t, calls[0].Err)
	assert.Equal(t, "get_weather", calls[0].Name)
	assert.Equal(t, `{"city":"Paris","days":3}`, string(calls[0].Arguments))

	// vLLM's examples/tool_chat_template_llama3.1_json.jinja renders
	// { "output": message.content } | tojson instead.
	assert.Equal(t, "<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n{\"output\": \"4\"}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
		rollout.Llama3Results{OutputObject: true}.Render(turn, []string{"4"}))
}

func TestQwen3CoderResultsLayout(t *testing.T) {
	assert.Equal(t, "<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n", rollout.Qwen3CoderResults{}.Render("x", nil))
	assert.Equal(t, "\n<|im_start|>user\n<tool_response>\nA\n</tool_response>\n<tool_response>\nB\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n",
		rollout.Qwen3CoderResults{}.Render("x<|im_end|>", []string{"A", "B"}))
}

// TestQwen3CoderTemplateRendersLikeJinja2 renders the goldens'
// conversations with package tokenizer's chat template engine and
// Qwen3-Coder's template: the text must be jinja2's (the template walks
// each tool's parameters and each call's arguments with `|items`).
func TestQwen3CoderTemplateRendersLikeJinja2(t *testing.T) {
	src, err := os.ReadFile("testdata/qwen3coder_chat_template.jinja")
	require.NoError(t, err)
	ct, err := tokenizer.NewChatTemplate(string(src), nil)
	require.NoError(t, err)
	data, err := os.ReadFile("testdata/qwen3coder_goldens.json")
	require.NoError(t, err)
	var cases []templateCase
	require.NoError(t, json.Unmarshal(data, &cases))
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			out, err := ct.Render(c.Messages, c.Tools, tokenizer.ChatOptions{AddGenerationPrompt: true})
			require.NoError(t, err)
			assert.Equal(t, c.Expected, out)
		})
	}
}
