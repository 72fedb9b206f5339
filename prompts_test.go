package agentrl_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
	"github.com/agentrl/agentrl/tool/tooltest"
)

// qwen3Dir holds the real Qwen3 tokenizer (tokenizer.json and
// tokenizer_config.json with its chat template); chatCasesFile holds
// conversations and the text Hugging Face transformers'
// apply_chat_template renders for them.
const (
	qwen3Dir      = "policy/tokenizer/qwen3"
	chatCasesFile = "policy/tokenizer/testdata/chat_template_cases.json"
)

var (
	qwen3Once sync.Once
	qwen3Tok  *tokenizer.BPE
	qwen3Err  error
)

func qwen3(t testing.TB) *tokenizer.BPE {
	t.Helper()
	qwen3Once.Do(func() { qwen3Tok, qwen3Err = tokenizer.Load(qwen3Dir) })
	require.NoError(t, qwen3Err)
	return qwen3Tok
}

// chatCase is one case of chat_template_cases.json.
type chatCase struct {
	Messages []rollout.Message
	Tools    []json.RawMessage
	Kwargs   map[string]any
	Expected string
}

func chatCases(t testing.TB) map[string]chatCase {
	t.Helper()
	data, err := os.ReadFile(chatCasesFile)
	require.NoError(t, err)
	var raw []struct {
		Name     string            `json:"name"`
		Messages []rollout.Message `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
		Kwargs   map[string]any    `json:"kwargs"`
		Expected string            `json:"expected"`
	}
	require.NoError(t, json.Unmarshal(data, &raw))
	out := map[string]chatCase{}
	for _, c := range raw {
		out[c.Name] = chatCase{c.Messages, c.Tools, c.Kwargs, c.Expected}
	}
	return out
}

// schemaTools returns tools whose schemas are the given ones, named as
// the schemas name their functions.
func schemaTools(t testing.TB, schemas []json.RawMessage) []tool.Tool {
	t.Helper()
	tools := make([]tool.Tool, len(schemas))
	for i, s := range schemas {
		var f struct {
			Function struct{ Name string } `json:"function"`
		}
		require.NoError(t, json.Unmarshal(s, &f))
		tools[i] = tooltest.Echo(f.Function.Name).WithSchema(s)
	}
	return tools
}

// TestRenderPromptsMatchesTransformers renders the fixture's conversations
// (each with the generation prompt, as every case used here has) and
// checks the ids against the encoding of the text transformers rendered.
func TestRenderPromptsMatchesTransformers(t *testing.T) {
	tok := qwen3(t)
	cases := chatCases(t)
	for _, name := range []string{"single_user", "system_user", "tools_basic", "tools_system", "enable_thinking_false", "unicode"} {
		t.Run(name, func(t *testing.T) {
			c, ok := cases[name]
			require.True(t, ok)
			in := []agentrl.Prompt{{ID: name, Messages: c.Messages, GroundTruth: "gt", DataSource: "src"}}
			got, dropped, err := agentrl.RenderPrompts(context.Background(), in, tok, schemaTools(t, c.Tools), agentrl.PromptOptions{Vars: c.Kwargs})
			require.NoError(t, err)
			assert.Zero(t, dropped)
			require.Len(t, got, 1)
			assert.Equal(t, tok.Encode(c.Expected), got[0].Tokens)
			assert.Nil(t, got[0].Messages, "the messages are replaced by their ids")
			assert.Equal(t, "gt", got[0].GroundTruth)
			assert.Equal(t, "src", got[0].DataSource)
			assert.NotNil(t, in[0].Messages, "the input is left alone")
		})
	}
}

func TestRenderPromptsForms(t *testing.T) {
	tok := qwen3(t)
	cases := chatCases(t)
	single, basic := cases["single_user"], cases["tools_basic"]
	// "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
	// in Qwen's vocabulary (tokenizer.json): <|im_start|> 151644, user 872,
	// \n 198, What 3838, " is" 374, " " 220, 2 17, + 10, ? 30,
	// <|im_end|> 151645, assistant 77091 — digits are single tokens.
	singleIDs := []int{151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198}
	basicTools := schemaTools(t, basic.Tools)

	prompts := []agentrl.Prompt{
		{ID: "messages", Messages: single.Messages},
		// Text has the template applied already: it is only encoded.
		{ID: "text", Text: single.Expected},
		{ID: "tokens", Tokens: []int{1, 2, 3}},
		// A prompt's own tools replace the default ones (none here).
		{ID: "own tools", Messages: basic.Messages, Tools: basicTools},
	}
	got, dropped, err := agentrl.RenderPrompts(context.Background(), prompts, tok, nil, agentrl.PromptOptions{})
	require.NoError(t, err)
	assert.Zero(t, dropped)
	require.Len(t, got, 4)
	assert.Equal(t, singleIDs, got[0].Tokens)
	assert.Equal(t, singleIDs, got[1].Tokens)
	assert.Empty(t, got[1].Text)
	assert.Equal(t, []int{1, 2, 3}, got[2].Tokens)
	assert.Equal(t, tok.Encode(basic.Expected), got[3].Tokens)
	assert.Equal(t, basicTools, got[3].Tools, "the prompt keeps its tools for the engine")
	// The task's text stays for rewards that read it (a judge).
	assert.Equal(t, single.Messages[0].Content, got[0].Task)
	assert.Equal(t, single.Expected, got[1].Task, "a text prompt's task is the text")
	assert.Empty(t, got[2].Task, "token ids carry no text")
	assert.Equal(t, got[0].Task, got[0].RewardInput(&rollout.Trajectory{}).Prompt)
}

// TestTaskText: reward.Input.Prompt is the prompt's Task, else its Text,
// else its messages' contents separated by blank lines; ids alone give
// none.
func TestTaskText(t *testing.T) {
	msgs := []rollout.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: ""}, {Role: "user", Content: "What is 2+2?"}}
	for _, tc := range []struct {
		name string
		p    agentrl.Prompt
		want string
	}{
		{"task first", agentrl.Prompt{Task: "the task", Text: "t", Messages: msgs}, "the task"},
		{"text", agentrl.Prompt{Text: "1+1="}, "1+1="},
		{"messages", agentrl.Prompt{Messages: msgs}, "Be brief.\n\nWhat is 2+2?"},
		{"tokens alone", agentrl.Prompt{Tokens: []int{1, 2}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.p.TaskText())
			assert.Equal(t, tc.want, tc.p.RewardInput(&rollout.Trajectory{}).Prompt)
		})
	}
}

// TestRenderPromptsMaxTokens: prompts over MaxTokens are left out and
// counted, the rest keep their order.
func TestRenderPromptsMaxTokens(t *testing.T) {
	tok := qwen3(t)
	c := chatCases(t)["single_user"]
	n := len(tok.Encode(c.Expected)) // 15, see TestRenderPromptsForms
	prompts := []agentrl.Prompt{
		{ID: "a", Messages: c.Messages},
		{ID: "long", Tokens: make([]int, n+1)},
		{ID: "b", Tokens: make([]int, n)},
	}
	cases := []struct {
		name                    string
		max, context, responses int
		ids                     []string
		dropped                 int
	}{
		{"no bound", 0, 0, 0, []string{"a", "long", "b"}, 0},
		{"at the length", n, 0, 0, []string{"a", "b"}, 1}, // n tokens fit in n
		{"one below", n - 1, 0, 0, nil, 3},
		// A context of n+10 with 10 tokens of response budget holds n.
		{"context minus the budget", 0, n + 10, 10, []string{"a", "b"}, 1},
		{"context without a budget", 0, n + 1, 0, []string{"a", "long", "b"}, 0},
		{"the smaller of the two", n + 5, n + 10, 11, nil, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := agentrl.PromptOptions{MaxTokens: tc.max, ContextTokens: tc.context, ResponseTokens: tc.responses}
			got, dropped, err := agentrl.RenderPrompts(context.Background(), prompts, tok, nil, opts)
			require.NoError(t, err)
			var ids []string
			for _, p := range got {
				ids = append(ids, p.ID)
			}
			assert.Equal(t, tc.ids, ids)
			assert.Equal(t, tc.dropped, dropped)
		})
	}
}

func TestRenderPromptsErrors(t *testing.T) {
	tok := qwen3(t)
	msgs := []rollout.Message{{Role: "user", Content: "hi"}}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name    string
		ctx     context.Context
		prompts []agentrl.Prompt
		tok     agentrl.ChatTokenizer
		tools   []tool.Tool
		opts    agentrl.PromptOptions
		msg     string
	}{
		{"nil tokenizer", context.Background(), []agentrl.Prompt{{Messages: msgs}}, nil, nil, agentrl.PromptOptions{}, "nil tokenizer"},
		{"two forms", context.Background(), []agentrl.Prompt{{ID: "x", Text: "a", Messages: msgs}}, tok, nil, agentrl.PromptOptions{},
			"prompt 0 (x): set exactly one of Tokens, Text and Messages (2 set)"},
		{"no form", context.Background(), []agentrl.Prompt{{Messages: msgs}, {ID: "y"}}, tok, nil, agentrl.PromptOptions{},
			"prompt 1 (y): set exactly one of Tokens, Text and Messages (0 set)"},
		{"nil tool", context.Background(), []agentrl.Prompt{{Messages: msgs}}, tok, []tool.Tool{nil}, agentrl.PromptOptions{}, "tool 0 is nil"},
		{"negative MaxTokens", context.Background(), []agentrl.Prompt{{Messages: msgs}}, tok, nil, agentrl.PromptOptions{MaxTokens: -1}, "must not be negative"},
		{"negative ContextTokens", context.Background(), []agentrl.Prompt{{Messages: msgs}}, tok, nil, agentrl.PromptOptions{ContextTokens: -1}, "must not be negative"},
		{"budget fills the context", context.Background(), []agentrl.Prompt{{Messages: msgs}}, tok, nil, agentrl.PromptOptions{ContextTokens: 256, ResponseTokens: 256},
			"the response budget of 256 tokens leaves no room for a prompt in the model's context of 256 tokens"},
		{"cancelled", cancelled, []agentrl.Prompt{{Messages: msgs}}, tok, nil, agentrl.PromptOptions{}, "context canceled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := agentrl.RenderPrompts(c.ctx, c.prompts, c.tok, c.tools, c.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}

// TestLoadPrompts reads a verl-format JSON Lines file: chat prompts and,
// with StringPrompt, a plain-string prompt taken as one user message.
func TestLoadPrompts(t *testing.T) {
	tok := qwen3(t)
	cases := chatCases(t)
	single, basic, noThink := cases["single_user"], cases["tools_basic"], cases["enable_thinking_false"]
	// chat is a conversation as verl stores it: {"role", "content"} objects.
	chat := func(msgs []rollout.Message) []map[string]string {
		out := make([]map[string]string, len(msgs))
		for i, m := range msgs {
			out[i] = map[string]string{"role": m.Role, "content": m.Content}
		}
		return out
	}
	row := func(source string, prompt any, gt any) string {
		b, err := json.Marshal(map[string]any{
			"data_source":  source,
			"prompt":       prompt,
			"reward_model": map[string]any{"style": "rule", "ground_truth": gt},
			"extra_info":   map[string]any{"index": 7},
		})
		require.NoError(t, err)
		return string(b)
	}
	file := filepath.Join(t.TempDir(), "train.jsonl")
	lines := []string{
		row("math_dapo", chat(single.Messages), "4"),
		row("livecodebench", basic.Messages[0].Content, map[string]any{"inputs": []string{"1"}, "outputs": []string{"1"}}),
		row("aime", chat(noThink.Messages), 8),
	}
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	tools := schemaTools(t, basic.Tools)
	ctx := context.Background()

	// With the tools, every prompt carries tools_basic's system block; the
	// texts are checked against the cases rendered without tools below.
	got, dropped, err := agentrl.LoadPrompts(ctx, []string{file}, tok, tools, agentrl.PromptOptions{StringPrompt: true})
	require.NoError(t, err)
	assert.Zero(t, dropped)
	require.Len(t, got, 3)
	assert.Equal(t, tok.Encode(basic.Expected), got[1].Tokens, "the string prompt is one user message")
	assert.Equal(t, file+":0", got[0].ID)
	assert.Equal(t, "math_dapo", got[0].DataSource)
	assert.Equal(t, "4", got[0].GroundTruth)
	assert.Equal(t, `{"inputs":["1"],"outputs":["1"]}`, got[1].GroundTruth, "non-string ground truths become JSON")
	assert.Equal(t, "8", got[2].GroundTruth)
	assert.EqualValues(t, 7, got[2].Extra["index"])

	// Without tools, Limit 2 and thinking off: the first two rows, each
	// rendered as enable_thinking_false renders its conversation (the
	// empty think block after the generation prompt).
	got, dropped, err = agentrl.LoadPrompts(ctx, []string{file}, tok, nil,
		agentrl.PromptOptions{StringPrompt: true, Limit: 2, Vars: map[string]any{"enable_thinking": false}})
	require.NoError(t, err)
	assert.Zero(t, dropped)
	require.Len(t, got, 2)
	const emptyThink = "<think>\n\n</think>\n\n"
	assert.Equal(t, tok.Encode(single.Expected+emptyThink), got[0].Tokens)
	// A lone user message renders as single_user's does.
	assert.Equal(t, tok.Encode("<|im_start|>user\n"+basic.Messages[0].Content+"<|im_end|>\n<|im_start|>assistant\n"+emptyThink), got[1].Tokens)

	// MaxTokens leaves out the longer prompts and counts them. Without
	// tools a prompt is 8 tokens of template around its text's tokens
	// (singleIDs in TestRenderPromptsForms): "What is 2+2?" and
	// "Quick: 3+5?" are 7 tokens each (digits one by one), so 15 in all;
	// "Compute 123*456." is 10 (Compute, " ", 1, 2, 3, *, 4, 5, 6, .), 18.
	got, dropped, err = agentrl.LoadPrompts(ctx, []string{file}, tok, nil, agentrl.PromptOptions{StringPrompt: true, MaxTokens: 15})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, file+":0", got[0].ID)
	assert.Equal(t, file+":2", got[1].ID)
	assert.Equal(t, 1, dropped)

	// verl rejects a string prompt unless asked to take it.
	_, _, err = agentrl.LoadPrompts(ctx, []string{file}, tok, nil, agentrl.PromptOptions{})
	require.Error(t, err)
	assert.EqualError(t, err, file+":2: dataset: malformed row: field prompt: want list of messages, got string") // the file's second line
	_, _, err = agentrl.LoadPrompts(ctx, nil, tok, nil, agentrl.PromptOptions{})
	assert.ErrorContains(t, err, "no data files")
	_, _, err = agentrl.LoadPrompts(ctx, []string{filepath.Join(t.TempDir(), "missing.jsonl")}, tok, nil, agentrl.PromptOptions{})
	assert.Error(t, err)
}
