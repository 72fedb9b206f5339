package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chatCase is one case of testdata/chat_template_cases.json: a conversation
// and the text transformers' apply_chat_template renders for it with the
// Qwen3 chat template of qwen3/tokenizer_config.json.
type chatCase struct {
	Name                string            `json:"name"`
	Messages            []json.RawMessage `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	Kwargs              map[string]any    `json:"kwargs"`
	Expected            string            `json:"expected"`
}

func TestApplyChatTemplateMatchesTransformers(t *testing.T) {
	tok := qwen3(t)
	data, err := os.ReadFile("testdata/chat_template_cases.json")
	require.NoError(t, err)
	var cases []chatCase
	require.NoError(t, json.Unmarshal(data, &cases))
	require.Len(t, cases, 10)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			msgs := make([]Message, len(c.Messages))
			for i, raw := range c.Messages {
				require.NoError(t, json.Unmarshal(raw, &msgs[i]))
			}
			got, err := tok.ApplyChatTemplate(msgs, c.Tools, ChatOptions{AddGenerationPrompt: c.AddGenerationPrompt, Vars: c.Kwargs})
			require.NoError(t, err)
			require.Equal(t, c.Expected, got)
		})
	}
}

// tojson runs the tojson filter with default arguments.
func tojson(t testing.TB, v any) string {
	t.Helper()
	out := filterToJSON(nil, exec.AsValue(v), exec.NewVarArgs())
	require.False(t, out.IsError(), "%v", out)
	return out.String()
}

// TestChatTemplatesMatchJinja2 renders longer agent conversations with the
// Qwen3 template and two templates using other models' constructs (ordered
// items(), tojson with indent and sort_keys, slicing, namespace, loop
// variables, string methods; Llama-3.1-style reassignment of messages,
// bracket access, `in` on a dict, is mapping/string/none tests, white-space
// control) and one of white-space handling (trim_blocks, lstrip_blocks,
// +/- modifiers, comments, raw), against Python jinja2 configured as transformers configures it
// (testdata/gen_chat_golden.py).
func TestChatTemplatesMatchJinja2(t *testing.T) {
	tok := qwen3(t)
	data, err := os.ReadFile("testdata/chat_golden.json")
	require.NoError(t, err)
	var golden struct {
		Features  string `json:"features_template"`
		Features2 string `json:"features2_template"`
		Space     string `json:"whitespace_template"`
		Cases     []struct {
			chatCase
			Template string         `json:"template"`
			Vars     map[string]any `json:"vars"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(data, &golden))
	require.Len(t, golden.Cases, 9)
	for _, c := range golden.Cases {
		t.Run(c.Name, func(t *testing.T) {
			src := map[string]string{"qwen3": tok.ChatTemplate(), "features": golden.Features, "features2": golden.Features2, "whitespace": golden.Space}[c.Template]
			require.NotEmpty(t, src)
			ct, err := NewChatTemplate(src, c.Vars)
			require.NoError(t, err)
			msgs := make([]Message, len(c.Messages))
			for i, raw := range c.Messages {
				require.NoError(t, json.Unmarshal(raw, &msgs[i]))
			}
			got, err := ct.Render(msgs, c.Tools, ChatOptions{AddGenerationPrompt: c.AddGenerationPrompt, Vars: c.Kwargs})
			require.NoError(t, err)
			require.Equal(t, c.Expected, got)
		})
	}
}

func TestChatTemplateErrors(t *testing.T) {
	tok := qwen3(t)
	user := Message{Role: "user", Content: "x"}
	cases := []struct {
		name  string
		msgs  []Message
		tools []json.RawMessage
		opts  ChatOptions
		want  string
	}{
		{"empty role", []Message{{Content: "x"}}, nil, ChatOptions{}, "messages[0]: empty role"},
		{"bad tool JSON", []Message{user}, []json.RawMessage{json.RawMessage(`{"a": `)}, ChatOptions{}, "tools[0]: invalid JSON"},
		{"trailing data", []Message{user}, []json.RawMessage{json.RawMessage(`{} {}`)}, ChatOptions{}, "tools[0]: invalid JSON: data after the value"},
		{"huge integer", []Message{user}, []json.RawMessage{json.RawMessage(`{"n": 123456789012345678901234567890}`)}, ChatOptions{}, "tools[0]: integer"},
		{"arguments not object", []Message{user, {Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f", Arguments: json.RawMessage(`[1]`)}}}}}, nil, ChatOptions{}, "messages[1]: tool_calls[0].function.arguments: want a JSON object or string"},
		{"no function name", []Message{user, {Role: "assistant", ToolCalls: []ToolCall{{}}}}, nil, ChatOptions{}, "messages[1]: tool_calls[0]: empty function name"},
		{"bad option JSON", []Message{user}, nil, ChatOptions{Vars: map[string]any{"x": json.RawMessage(`{`)}}, `chat option "x"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tok.ApplyChatTemplate(c.msgs, c.tools, c.opts)
			require.ErrorContains(t, err, c.want)
		})
	}

	// raise_exception in a template surfaces as an error.
	ct, err := NewChatTemplate(`{% if messages|length == 0 %}{{ raise_exception('no messages') }}{% endif %}ok`, nil)
	require.NoError(t, err)
	_, err = ct.Render(nil, nil, ChatOptions{})
	require.ErrorContains(t, err, "no messages")
	out, err := ct.Render([]Message{user}, nil, ChatOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", out)

	// Syntax errors are reported when compiling.
	_, err = NewChatTemplate(`{% for x in %}`, nil)
	require.Error(t, err)

	// Templates cannot read files.
	ct, err = NewChatTemplate(`{% include "/etc/hostname" %}`, nil)
	if err == nil {
		_, err = ct.Render(nil, nil, ChatOptions{})
	}
	require.Error(t, err)
}

// TestToJSONPython pins tojson against Python's json.dumps, values written
// down from Python 3.11: json.dumps(x, ensure_ascii=False) and variants.
func TestToJSONPython(t *testing.T) {
	v, err := decodeOrdered([]byte(`{"z": 1, "a": [1.0, 0.1, 1e16, 1e-5, 123456789.125, -0.0, 1E2, 2.5e-7], "s": "é\u2028<>&'\"\\\n\t\u0001\u007f", "n": null, "b": [true, false], "e": {}, "l": []}`))
	require.NoError(t, err)
	// Python: json.dumps(x, ensure_ascii=False)
	want := `{"z": 1, "a": [1.0, 0.1, 1e+16, 1e-05, 123456789.125, -0.0, 100.0, 2.5e-07], "s": "é` + "\u2028" + `<>&'\"\\\n\t\u0001` + "\x7f" + `", "n": null, "b": [true, false], "e": {}, "l": []}`
	require.Equal(t, want, tojson(t, v))

	ct, err := NewChatTemplate(`{{ x | tojson(indent=2, sort_keys=true) }}|{{ y | tojson(ensure_ascii=true) }}|{{ y | tojson(separators=[',', ':']) }}`, nil)
	require.NoError(t, err)
	x, err := decodeOrdered([]byte(`{"b": {"d": [1, {}], "c": "x"}, "a": []}`))
	require.NoError(t, err)
	y, err := decodeOrdered([]byte(`{"k": "é😀", "j": [1, 2]}`))
	require.NoError(t, err)
	out, err := ct.Render(nil, nil, ChatOptions{Vars: map[string]any{"x": x, "y": y}})
	require.NoError(t, err)
	// Python: json.dumps(x, indent=2, sort_keys=True); json.dumps(y,
	// ensure_ascii=True); json.dumps(y, separators=(',', ':'), ensure_ascii=False)
	require.Equal(t, "{\n  \"a\": [],\n  \"b\": {\n    \"c\": \"x\",\n    \"d\": [\n      1,\n      {}\n    ]\n  }\n}"+
		`|{"k": "\u00e9\ud83d\ude00", "j": [1, 2]}|{"k":"é😀","j":[1,2]}`, out)
}

func TestChatVarsRawJSON(t *testing.T) {
	ct, err := NewChatTemplate(`{{ cfg | tojson }} {{ cfg.b }} {% for k, v in cfg.items() %}{{ k }}={{ v }};{% endfor %}{{ flag }}`, nil)
	require.NoError(t, err)
	out, err := ct.Render(nil, nil, ChatOptions{Vars: map[string]any{"cfg": json.RawMessage(`{"b": 1, "a": "x"}`), "flag": "on"}})
	require.NoError(t, err)
	// Key order is that of the JSON text, not sorted.
	require.Equal(t, `{"b": 1, "a": "x"} 1 b=1;a=x;on`, out)
}

func TestPythonFloat(t *testing.T) {
	// repr() in Python 3.11 of each value.
	cases := map[float64]string{
		0: "0.0", 1: "1.0", -2.5: "-2.5", 0.1: "0.1", 1e16: "1e+16", 1e15: "1000000000000000.0",
		0.0001: "0.0001", 0.00001: "1e-05", 1.5e300: "1.5e+300", 5e-324: "5e-324", 123.456: "123.456",
		1.0 / 3: "0.3333333333333333", 12345678901234567890: "1.2345678901234567e+19",
	}
	for f, want := range cases {
		require.Equal(t, want, pythonFloat(f), "%v", f)
	}
}

// TestConcurrentUse shares one tokenizer between goroutines that encode,
// decode and render (run with -race).
func TestConcurrentUse(t *testing.T) {
	tok := qwen3(t)
	cases := readEncodeCases(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(cases); i += 4 {
				c := cases[i]
				if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
					errs <- fmt.Errorf("case %d differs", i)
					return
				}
				out, err := tok.ApplyChatTemplate([]Message{{Role: "user", Content: c.Text}}, nil, ChatOptions{AddGenerationPrompt: true})
				if err != nil || !strings.Contains(out, c.Text) {
					errs <- fmt.Errorf("case %d: render: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The items filter walks a mapping in its own key order, as jinja2's
// dict.items() does for a dict made from JSON (Python keeps insertion
// order), and none|string is Python's "None": Qwen3-Coder's template
// renders a tool's parameters with `|items` and each argument with
// `|string`. Expected strings by hand from jinja2's semantics.
func TestItemsAndStringFilters(t *testing.T) {
	tools := []json.RawMessage{json.RawMessage(`{"b": 1, "a": {"y": true, "x": "s"}}`)}
	for _, tc := range []struct{ name, src, want string }{
		{"filter", "{% for k, v in tools[0]|items %}[{{k}}={{v is mapping}}]{% endfor %}", "[b=False][a=True]"},
		{"method", "{% for k, v in tools[0].items() %}[{{k}}]{% endfor %}", "[b][a]"},
		{"nested", "{% for k, v in tools[0].a|items %}[{{k}}:{{v}}]{% endfor %}", "[y:True][x:s]"},
		{"none", "{% for k, v in none|items %}x{% endfor %}.", "."},
		{"list", "{% for p in [[1, 2]]|items %}{{p[1]}}{% endfor %}", "2"},
		{"string of none", "{{ none|string }}|{{ 1|string }}|{{ true|string }}", "None|1|True"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, err := NewChatTemplate(tc.src, nil)
			require.NoError(t, err)
			out, err := ct.Render(nil, tools, ChatOptions{})
			require.NoError(t, err)
			assert.Equal(t, tc.want, out)
		})
	}
	ct, err := NewChatTemplate("{{ 3|items }}", nil)
	require.NoError(t, err)
	_, err = ct.Render(nil, tools, ChatOptions{})
	assert.ErrorContains(t, err, "items requires a mapping")
}
