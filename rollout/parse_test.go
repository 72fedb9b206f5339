package rollout_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/rollout"
)

func TestHermesParse(t *testing.T) {
	type call struct{ name, args, raw string }
	cases := []struct {
		name  string
		text  string
		calls []call
		bad   []string // expected error substrings, "" for a good call
	}{
		{"none", "The answer is 4.", nil, nil},
		{"one", "ok <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
			[]call{{"f", `{"a":1}`, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"}}, []string{""}},
		{"two", "<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call> and <tool_call>{\"name\":\"g\"}</tool_call>",
			[]call{{"f", `{}`, `<tool_call>{"name":"f","arguments":{}}</tool_call>`}, {"g", `{}`, `<tool_call>{"name":"g"}</tool_call>`}}, []string{"", ""}},
		{"string arguments", `<tool_call>{"name": "f", "arguments": "{\"a\": [1, 2]}"}</tool_call>`,
			[]call{{"f", `{"a":[1,2]}`, `<tool_call>{"name": "f", "arguments": "{\"a\": [1, 2]}"}</tool_call>`}}, []string{""}},
		{"null arguments", `<tool_call>{"name": "f", "arguments": null}</tool_call>`,
			[]call{{"f", `{}`, `<tool_call>{"name": "f", "arguments": null}</tool_call>`}}, []string{""}},
		{"unclosed is no call", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}", nil, nil},
		{"bad json", `<tool_call>{"name": "f", "arguments": {</tool_call>`,
			[]call{{"", "", `<tool_call>{"name": "f", "arguments": {</tool_call>`}}, []string{"body is not a JSON object"}},
		{"no name", `<tool_call>{"arguments": {}}</tool_call>`,
			[]call{{"", "", `<tool_call>{"arguments": {}}</tool_call>`}}, []string{`no "name"`}},
		{"array arguments", `<tool_call>{"name": "f", "arguments": [1]}</tool_call>`,
			[]call{{"", "", `<tool_call>{"name": "f", "arguments": [1]}</tool_call>`}}, []string{`tool "f": arguments are not a JSON object`}},
		{"trailing text", `<tool_call>{"name": "f"} extra</tool_call>`,
			[]call{{"", "", `<tool_call>{"name": "f"} extra</tool_call>`}}, []string{"text after the JSON object"}},
		{"string arguments not json", `<tool_call>{"name": "f", "arguments": "a=1"}</tool_call>`,
			[]call{{"", "", `<tool_call>{"name": "f", "arguments": "a=1"}</tool_call>`}}, []string{"arguments string is not JSON"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := rollout.Hermes{}.Parse(tc.text)
			require.Len(t, got, len(tc.calls))
			for i, c := range got {
				assert.Equal(t, tc.calls[i].raw, c.Raw)
				if tc.bad[i] == "" {
					require.NoError(t, c.Err)
					assert.Equal(t, tc.calls[i].name, c.Name)
					assert.Equal(t, tc.calls[i].args, string(c.Arguments))
				} else {
					require.ErrorIs(t, c.Err, rollout.ErrBadToolCall)
					assert.Contains(t, c.Err.Error(), tc.bad[i])
					assert.Nil(t, c.Arguments)
				}
			}
		})
	}
	assert.Equal(t, []string{"</tool_call>"}, rollout.Hermes{}.StopStrings())
	assert.Nil(t, rollout.Hermes{NoStop: true}.StopStrings())
	assert.Equal(t, []string{"</fn>"}, rollout.Hermes{Open: "<fn>", Close: "</fn>"}.StopStrings())
}

func TestCodeBlocksParse(t *testing.T) {
	cases := []struct {
		name   string
		parser rollout.CodeBlocks
		text   string
		codes  []string
	}{
		{"retool tag with fence", rollout.CodeBlocks{}, "Let me compute.\n<code>\n```python\nprint(1+1)\n```\n</code>", []string{"print(1+1)\n"}},
		{"bare tag", rollout.CodeBlocks{}, "<code>x = 1\nprint(x)</code>", []string{"x = 1\nprint(x)"}},
		{"unclosed tag", rollout.CodeBlocks{}, "<code>print(1)", nil},
		{"fences ignored by default", rollout.CodeBlocks{}, "```python\nprint(1)\n```", nil},
		{"fences", rollout.CodeBlocks{Fences: true}, "a\n```python\nprint(1)\n```\nb\n```py\nprint(2)\n```", []string{"print(1)\n", "print(2)\n"}},
		{"other language skipped", rollout.CodeBlocks{Fences: true}, "```bash\nls\n```\n```python\nprint(3)\n```", []string{"print(3)\n"}},
		{"both, in text order", rollout.CodeBlocks{Tags: true, Fences: true}, "```python\na\n```<code>b</code>", []string{"a\n", "b"}},
		{"custom language", rollout.CodeBlocks{Fences: true, Languages: []string{"julia"}}, "```julia\n1+1\n```", []string{"1+1\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.parser.Parse(tc.text)
			require.Len(t, got, len(tc.codes))
			for i, c := range got {
				require.NoError(t, c.Err)
				assert.Equal(t, "code_interpreter", c.Name)
				var args map[string]string
				require.NoError(t, json.Unmarshal(c.Arguments, &args))
				assert.Equal(t, map[string]string{"code": tc.codes[i]}, args)
				assert.Contains(t, tc.text, c.Raw)
			}
		})
	}
	assert.Equal(t, []string{"</code>"}, rollout.CodeBlocks{}.StopStrings())
	assert.Nil(t, rollout.CodeBlocks{Fences: true}.StopStrings())
	c := rollout.CodeBlocks{Tool: "python", Arg: "src"}.Parse("<code>1</code>")
	require.Len(t, c, 1)
	assert.Equal(t, "python", c[0].Name)
	assert.Equal(t, `{"src":"1"}`, string(c[0].Arguments))
}

// TestChatMLMatchesQwen3Template checks ChatML against the text Hugging
// Face renders with Qwen3's chat template (testdata/chat_template_cases.json,
// copied from the project's fixtures): the text after the last assistant
// turn's final </tool_call> must be exactly ChatML's rendering of the
// tool messages that follow it.
func TestChatMLMatchesQwen3Template(t *testing.T) {
	data, err := os.ReadFile("testdata/chat_template_cases.json")
	require.NoError(t, err)
	var cases []struct {
		Name     string `json:"name"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Expected string `json:"expected"`
	}
	require.NoError(t, json.Unmarshal(data, &cases))
	checked := 0
	for _, c := range cases {
		n := len(c.Messages)
		if n == 0 || c.Messages[n-1].Role != "tool" {
			continue
		}
		var results []string
		for i := n - 1; i >= 0 && c.Messages[i].Role == "tool"; i-- {
			results = append([]string{c.Messages[i].Content}, results...)
		}
		t.Run(c.Name, func(t *testing.T) {
			cut := strings.LastIndex(c.Expected, "</tool_call>") + len("</tool_call>")
			require.Greater(t, cut, len("</tool_call>")-1)
			turn, want := c.Expected[:cut], c.Expected[cut:]
			assert.Equal(t, want, rollout.ChatML{}.Render(turn, results))
			// A turn that already ends with the end-of-turn token.
			assert.Equal(t, strings.TrimPrefix(want, "<|im_end|>"), rollout.ChatML{}.Render(turn+"<|im_end|>", results))
		})
		checked++
	}
	assert.Equal(t, 2, checked, "fixture cases ending in tool messages")
}

func TestTaggedAndChatMLOptions(t *testing.T) {
	assert.Equal(t, "<interpreter>\n1\n</interpreter>\n<interpreter>\n2\n</interpreter>\n", rollout.Tagged{}.Render("x", []string{"1", "2"}))
	assert.Equal(t, "<out>1</out>", rollout.Tagged{Open: "<out>", Close: "</out>"}.Render("", []string{"1"}))
	f := rollout.ChatML{GenerationPrompt: "<|im_start|>assistant\n<think>\n\n</think>\n\n"}
	assert.Equal(t, "<|im_end|>\n<|im_start|>user\n<tool_response>\nr\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", f.Render("", []string{"r"}))
}

func FuzzParseHermes(f *testing.F) {
	f.Add("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>")
	f.Add(`<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call><tool_call>{</tool_call>`)
	f.Add("<tool_call><tool_call></tool_call></tool_call>")
	f.Add(`<tool_call>{"name": "f", "arguments": "\"x\""}</tool_call>`)
	f.Fuzz(func(t *testing.T, text string) {
		for _, c := range (rollout.Hermes{}).Parse(text) {
			checkParsed(t, text, c)
		}
	})
}

func FuzzParseCode(f *testing.F) {
	f.Add("<code>\n```python\nprint(1)\n```\n</code>")
	f.Add("```python\nprint(1)\n``````py\n```")
	f.Add("<code>```python\n\xff```</code>")
	f.Fuzz(func(t *testing.T, text string) {
		for _, c := range (rollout.CodeBlocks{Tags: true, Fences: true}).Parse(text) {
			checkParsed(t, text, c)
		}
	})
}

func checkParsed(t *testing.T, text string, c rollout.ParsedCall) {
	t.Helper()
	if !strings.Contains(text, c.Raw) {
		t.Fatalf("Raw %q is not in the text", c.Raw)
	}
	if c.Err != nil {
		if c.Arguments != nil {
			t.Fatalf("arguments %q with error %v", c.Arguments, c.Err)
		}
		return
	}
	if c.Name == "" {
		t.Fatal("call without a name and without an error")
	}
	var obj map[string]any
	if err := json.Unmarshal(c.Arguments, &obj); err != nil {
		t.Fatalf("arguments %q are not a JSON object: %v", c.Arguments, err)
	}
}
