package rollout_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/rollout"
)

// TestHarmonyParse checks the parser on turns written as the harmony
// format's own documentation and tests write them: github.com/openai/harmony
// docs/format.md ("Receiving tool calls", and the full example of its
// "Example of a full conversation"), test-data/test_streamable_parser.txt,
// and the conversations of vLLM's tests/tool_parsers/test_openai_tool_parser.py
// as openai-harmony renders them (src/encoding.rs: "<|start|>" role,
// " to=" recipient, "<|channel|>" channel, " " content type, "<|message|>",
// content, and <|call|> for an assistant message with a recipient).
func TestHarmonyParse(t *testing.T) {
	type call struct{ name, args, bad string }
	cases := []struct {
		name  string
		text  string
		calls []call
	}{
		{"format.md receiving tool calls",
			"<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"San Francisco\"}<|call|>",
			[]call{{"get_weather", `{"location":"San Francisco"}`, ""}}},
		{"format.md constrain without a space",
			"<|channel|>commentary to=functions.generate_file<|constrain|>json<|message|>{\"template\": \"basic_html\", \"path\": \"index.html\"}<|call|>",
			[]call{{"generate_file", `{"template":"basic_html","path":"index.html"}`, ""}}},
		{"format.md full conversation",
			"<|start|>assistant<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"San Francisco\"}<|call|>",
			[]call{{"get_weather", `{"location":"San Francisco"}`, ""}}},
		{"test_streamable_parser builtin browser tool",
			"<|channel|>analysis<|message|>User asks \"Who is the current US president?\" Let's browse to confirm.<|end|><|start|>assistant<|channel|>commentary to=browser.search code<|message|>{\"query\": \"current US president July 2025\", \"topn\": 10, \"source\": \"news\"}<|call|>",
			[]call{{"browser.search", "", `content type "code" are not JSON`}}},
		{"vllm single_tool", // recipient in the role part, content type json
			"<|channel|>analysis<|message|>User asks: \"What is the weather in Tokyo?\" We need to use get_current_weather tool.<|end|><|start|>assistant to=functions.get_current_weather<|channel|>commentary json<|message|>{\n\"location\": \"Tokyo\"\n}<|call|>",
			[]call{{"get_current_weather", `{"location":"Tokyo"}`, ""}}},
		{"vllm multiple_tools",
			"<|channel|>analysis<|message|>We need two tools.<|end|>" +
				"<|start|>assistant to=functions.get_current_weather<|channel|>commentary json<|message|>{\"location\": \"Tokyo\"}<|call|>" +
				"<|start|>assistant to=functions.get_user_location<|channel|>commentary json<|message|>{\"location\": \"Tokyo\"}<|call|>" +
				"<|start|>assistant to=functions.no_content_type<|channel|>commentary<|message|>{\"location\": \"Tokyo\"}<|call|>" +
				"<|start|>assistant to=functions.not_json_no_content_type<|channel|>commentary<|message|>foo<|call|>" +
				"<|start|>assistant to=functions.empty_args<|channel|>commentary json<|message|>{}<|call|>" +
				"<|start|>assistant to=functions.no_args<|channel|>commentary json<|message|><|call|>",
			[]call{{"get_current_weather", `{"location":"Tokyo"}`, ""}, {"get_user_location", `{"location":"Tokyo"}`, ""},
				{"no_content_type", `{"location":"Tokyo"}`, ""}, {"not_json_no_content_type", "", "arguments are not a JSON object"},
				{"empty_args", `{}`, ""}, {"no_args", `{}`, ""}}},
		{"vllm with_content: a final answer after the call",
			"<|channel|>analysis<|message|>Use the tool.<|end|><|start|>assistant to=functions.get_current_weather<|channel|>commentary json<|message|>{\"location\": \"Tokyo\"}<|call|><|start|>assistant<|channel|>final<|message|>This tool call will get the weather.<|return|>",
			[]call{{"get_current_weather", `{"location":"Tokyo"}`, ""}}},
		{"vllm no_tools: a final answer", "<|channel|>final<|message|>This is a test<|return|>", nil},
		// Cases of this package.
		{"analysis only, not terminated", "<|channel|>analysis<|message|>Thinking about to=functions.x", nil},
		{"call not terminated", "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1", nil},
		{"bad header with a recipient", "<|channel|><|message|>x<|end|><|start|>assistant to=functions.f<|channel|> <|message|>{}<|call|>",
			[]call{{"", "", "no channel after <|channel|>"}}},
		{"extra header words", "<|channel|>commentary to=functions.f json extra<|message|>{}<|call|>",
			[]call{{"", "", `unexpected "to=functions.f" in the header`}}},
		{"arguments not JSON", "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{'a': 1}<|call|>",
			[]call{{"f", "", `tool "f": arguments`}}},
		{"a tool's message is no call", "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{\"sunny\": true}<|end|>", nil},
		{"empty function name", "<|channel|>commentary to=functions. json<|message|>{}<|call|>", []call{{"", "", `recipient "functions." names no tool`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := rollout.Harmony{}.Parse(tc.text)
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
	assert.Equal(t, []string{"<|call|>"}, rollout.Harmony{}.StopStrings())
}

// TestHarmonyResults checks the rendering of tool results against
// docs/format.md of github.com/openai/harmony: its full conversation
// example continues a turn that called functions.get_weather with
// "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"sunny": true, "temperature": 20}<|end|><|start|>assistant".
func TestHarmonyResults(t *testing.T) {
	turn := "<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"San Francisco\"}<|call|>"
	assert.Equal(t, "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{\"sunny\": true, \"temperature\": 20}<|end|><|start|>assistant",
		rollout.HarmonyResults{}.Render(turn, []string{`{"sunny": true, "temperature": 20}`}))

	// gpt-oss's published chat template renders the content with tojson,
	// as the rendering quoted in its model card's examples shows:
	// ...commentary<|message|>"New York City: 51F"<|end|>.
	turn = "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"New York City\"}<|call|>"
	assert.Equal(t, "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"New York City: 51F\"<|end|><|start|>assistant",
		rollout.HarmonyResults{QuoteResults: true}.Render(turn, []string{"New York City: 51F"}))

	// Several calls, and a built-in tool's recipient as author.
	turn = "<|channel|>commentary to=functions.a json<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=browser.search json<|message|>{}<|call|>"
	assert.Equal(t, "<|start|>functions.a to=assistant<|channel|>commentary<|message|>1<|end|>"+
		"<|start|>browser.search to=assistant<|channel|>commentary<|message|>2<|end|><|start|>assistant",
		rollout.HarmonyResults{}.Render(turn, []string{"1", "2"}))
	// More results than calls read back (a Render misuse) still renders.
	assert.True(t, strings.HasPrefix(rollout.HarmonyResults{}.Render("", []string{"x"}), "<|start|>functions to=assistant"))
}

// indexAfter returns the index of sub in s at or after from, or -1.
func indexAfter(s, sub string, from int) int {
	k := strings.Index(s[from:], sub)
	if k < 0 {
		return -1
	}
	return from + k
}
