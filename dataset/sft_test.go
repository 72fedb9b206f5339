package dataset

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/tokenizer"
)

// qwen3Dir holds the real Qwen3 tokenizer.json and tokenizer_config.json
// (chat template), shared with policy/tokenizer's tests rather than copied.
const qwen3Dir = "../policy/tokenizer/qwen3"

var qwen3 = sync.OnceValues(func() (*tokenizer.BPE, error) { return tokenizer.Load(qwen3Dir) })

func loadQwen3(t testing.TB) *tokenizer.BPE {
	t.Helper()
	tok, err := qwen3()
	require.NoError(t, err)
	return tok
}

// fixtureRow is the test-only part of a line of sft_conversations.jsonl: the
// case name and the chat template variables (the reader ignores both).
type fixtureRow struct {
	Name string         `json:"name"`
	Vars map[string]any `json:"vars"`
}

func loadFixtures(t testing.TB) ([]Conversation, []fixtureRow) {
	t.Helper()
	const path = "testdata/sft_conversations.jsonl"
	convs, err := LoadSFT(context.Background(), SFTOptions{}, path)
	require.NoError(t, err)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var rows []fixtureRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r fixtureRow
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		rows = append(rows, r)
	}
	require.NoError(t, sc.Err())
	require.Len(t, convs, len(rows))
	return convs, rows
}

type goldenCase struct {
	Name     string       `json:"name"`
	Text     string       `json:"text"`
	Strategy SpanStrategy `json:"strategy"`
	Spans    []struct {
		Message   int    `json:"message"`
		ByteStart int    `json:"byte_start"`
		ByteEnd   int    `json:"byte_end"`
		Text      string `json:"text"`
	} `json:"spans"`
	IDs  []int     `json:"ids"`
	Mask []float32 `json:"mask"`
}

// TestSFTGolden compares with testdata/sft_golden.json: renderings and
// assistant spans from Python's jinja2 (gen_sft_golden.py), ids and masks
// from Hugging Face tokenizers with offsets (hf_sft_mask.js).
func TestSFTGolden(t *testing.T) {
	tok := loadQwen3(t)
	convs, rows := loadFixtures(t)
	b, err := os.ReadFile("testdata/sft_golden.json")
	require.NoError(t, err)
	var golden []goldenCase
	require.NoError(t, json.Unmarshal(b, &golden))
	require.Len(t, golden, len(convs))
	for i, g := range golden {
		t.Run(g.Name, func(t *testing.T) {
			require.Equal(t, rows[i].Name, g.Name)
			enc, err := NewSFTEncoder(tok, SFTConfig{ChatOptions: tokenizer.ChatOptions{Vars: rows[i].Vars}})
			require.NoError(t, err)
			ex, err := enc.Encode(convs[i])
			require.NoError(t, err)
			require.Equal(t, g.Text, ex.Text)
			assert.Equal(t, g.Strategy, ex.Strategy)
			require.Len(t, ex.Turns, len(g.Spans))
			for k, sp := range g.Spans {
				assert.Equal(t, sp.Message, ex.Turns[k].Message)
				assert.Equal(t, sp.ByteStart, ex.Turns[k].ByteStart)
				assert.Equal(t, sp.ByteEnd, ex.Turns[k].ByteEnd)
				assert.Equal(t, sp.Text, ex.Text[ex.Turns[k].ByteStart:ex.Turns[k].ByteEnd])
			}
			assert.Equal(t, g.IDs, ex.InputIDs)
			assert.Equal(t, g.Mask, ex.LossMask)
		})
	}
}

// TestSFTStrategies: forcing the turn-delimiter strategy gives the golden
// ids and masks for every fixture (on the Qwen3 template the two strategies
// agree wherever the prefix one works); forcing the prefix strategy fails,
// naming the message, where the template rewrites earlier turns.
func TestSFTStrategies(t *testing.T) {
	tok := loadQwen3(t)
	convs, rows := loadFixtures(t)
	b, err := os.ReadFile("testdata/sft_golden.json")
	require.NoError(t, err)
	var golden []goldenCase
	require.NoError(t, json.Unmarshal(b, &golden))
	for i, g := range golden {
		opts := tokenizer.ChatOptions{Vars: rows[i].Vars}
		turns, err := NewSFTEncoder(tok, SFTConfig{ChatOptions: opts, Strategy: StrategyTurns})
		require.NoError(t, err)
		ex, err := turns.Encode(convs[i])
		require.NoError(t, err, g.Name)
		assert.Equal(t, StrategyTurns, ex.Strategy)
		assert.Equal(t, g.IDs, ex.InputIDs, g.Name)
		assert.Equal(t, g.Mask, ex.LossMask, g.Name)

		prefix, err := NewSFTEncoder(tok, SFTConfig{ChatOptions: opts, Strategy: StrategyPrefix})
		require.NoError(t, err)
		ex, err = prefix.Encode(convs[i])
		if g.Strategy == StrategyPrefix {
			require.NoError(t, err, g.Name)
			assert.Equal(t, g.Mask, ex.LossMask, g.Name)
		} else {
			require.ErrorIs(t, err, ErrTemplateMismatch, g.Name)
			assert.Contains(t, err.Error(), "messages[", g.Name)
		}
	}
	_, err = NewSFTEncoder(tok, SFTConfig{Strategy: "guess"})
	require.Error(t, err)
}

// maskedRuns decodes each maximal run of masked tokens.
func maskedRuns(tok tokenizer.Tokenizer, ex SFTExample) []string {
	var runs []string
	for t := 0; t < len(ex.InputIDs); {
		if ex.LossMask[t] == 0 {
			t++
			continue
		}
		u := t
		for u < len(ex.InputIDs) && ex.LossMask[u] != 0 {
			u++
		}
		runs = append(runs, tok.Decode(ex.InputIDs[t:u]))
		t = u
	}
	return runs
}

// TestSFTMaskByHand checks the masked text of the fixtures against the
// assistant text written out here from the Qwen3 template: the thinking
// block as the template writes it, the content, the tool-call markup and
// "<|im_end|>"; never the "<|im_start|>assistant\n" header, the "\n" after
// "<|im_end|>", or system, user and tool text.
func TestSFTMaskByHand(t *testing.T) {
	tok := loadQwen3(t)
	convs, rows := loadFixtures(t)
	want := map[string][]string{
		"tool_thinking": {
			"<think>\nMultiplying by hand is error-prone; use the tool.\n</think>\n\n<tool_call>\n" +
				`{"name": "code_interpreter", "arguments": {"code": "print(123*456)"}}` + "\n</tool_call><|im_end|>",
			"<think>\nThe tool printed 56088.\n</think>\n\nThe product is \\boxed{56088}.<|im_end|>",
		},
		// The first answer's reasoning is dropped by the template (a later
		// user query follows it); the last answer keeps its thinking.
		"multi_query_reasoning_dropped": {
			"4<|im_end|>",
			"<think>\nAgain simple.\n</think>\n\n6<|im_end|>",
		},
		// No reasoning: the tool-call turn is rendered without a think
		// block, the final turn with an empty one.
		"empty_reasoning_tool_turn": {
			"Let me check.\n<tool_call>\n" + `{"name": "code_interpreter", "arguments": {"code": "import sympy\nprint(sympy.isprime(97))"}}` + "\n</tool_call><|im_end|>",
			"<think>\n\n</think>\n\nYes, 97 is prime.<|im_end|>",
		},
		// Argument key order is kept ("op", "b", "a"); string arguments are
		// written verbatim; "<think>" inside content is parsed by the
		// template into a think block.
		"parallel_calls_non_ascii": {
			"<think>\nDeux appels : puissance et racine.\n</think>\n\n<tool_call>\n" + `{"name": "calc", "arguments": {"op": "pow", "b": 3, "a": 2}}` +
				"\n</tool_call>\n<tool_call>\n" + `{"name": "calc", "arguments": {"op": "sqrt", "a": 16}}` + "\n</tool_call><|im_end|>",
			"<think>\n8 + 4 = 12\n</think>\n\nRésultat : 12 ✓<|im_end|>",
		},
		"plain_chat_last_turn": {"Hello.<|im_end|>", "<think>\n\n</think>\n\nGoodbye!<|im_end|>"},
		// The tokenizer normalizes to NFC: decoding gives the composed é.
		"nfc_combining_marks": {"<think>\n\n</think>\n\ncafé — done<|im_end|>"},
		// With enable_thinking false the generation prompt itself writes the
		// empty think block, so it is not trained on.
		"enable_thinking_false": {"OK.<|im_end|>"},
		// The content starts with "\n\n": the tokenizer writes the header's
		// "\n" and these as one token "\n\n\n", which straddles the span
		// start and is masked (transformers' rule), so the decoded run
		// starts with three newlines.
		"leading_newlines_straddle": {
			"\n\n\nRunning.\n<tool_call>\n" + `{"name": "code_interpreter", "arguments": {"code": "print(1)"}}` + "\n</tool_call><|im_end|>",
			"<think>\n\n</think>\n\nIt printed 1.<|im_end|>",
		},
	}
	for i, conv := range convs {
		name := rows[i].Name
		t.Run(name, func(t *testing.T) {
			enc, err := NewSFTEncoder(tok, SFTConfig{ChatOptions: tokenizer.ChatOptions{Vars: rows[i].Vars}})
			require.NoError(t, err)
			ex, err := enc.Encode(conv)
			require.NoError(t, err)
			w, ok := want[name]
			require.True(t, ok, "no hand-written expectation for %s", name)
			assert.Equal(t, w, maskedRuns(tok, ex))
			// Every masked run ends with <|im_end|> and is followed by "\n".
			for _, tr := range ex.Turns {
				require.Equal(t, 151645, ex.InputIDs[tr.TokenEnd-1])
				require.Equal(t, "\n", tok.Decode(ex.InputIDs[tr.TokenEnd:tr.TokenEnd+1]))
				require.Equal(t, float32(0), ex.LossMask[tr.TokenEnd])
			}
		})
	}
}

// TestSFTSegmentTokenization checks, on the fixtures, the property the
// segment-wise offsets rely on: encoding the rendering whole equals
// concatenating the encodings of its pieces split before and after every
// "<|im_start|>" and "<|im_end|>" (special tokens are matched before
// anything else). Split also at the span boundaries, it still holds but for
// the fixture whose content starts with newlines, where the tokenizer merges
// the header's "\n" with them: that is why offsets come from the tokens'
// bytes, and why the segment fallback fails with ErrTokenAlignment there.
func TestSFTSegmentTokenization(t *testing.T) {
	tok := loadQwen3(t)
	convs, rows := loadFixtures(t)
	split := func(text string, cuts map[int]bool) []int {
		var ids []int
		prev := 0
		for b := 1; b <= len(text); b++ {
			if cuts[b] || b == len(text) {
				ids = append(ids, tok.Encode(text[prev:b])...)
				prev = b
			}
		}
		return ids
	}
	for i, conv := range convs {
		enc, err := NewSFTEncoder(tok, SFTConfig{ChatOptions: tokenizer.ChatOptions{Vars: rows[i].Vars}})
		require.NoError(t, err)
		ex, err := enc.Encode(conv)
		require.NoError(t, err)
		whole := tok.Encode(ex.Text)
		cuts := map[int]bool{}
		for _, special := range []string{"<|im_start|>", "<|im_end|>"} {
			for k := 0; ; {
				j := strings.Index(ex.Text[k:], special)
				if j < 0 {
					break
				}
				cuts[k+j], cuts[k+j+len(special)] = true, true
				k += j + len(special)
			}
		}
		require.Greater(t, len(cuts), 4)
		assert.Equal(t, whole, split(ex.Text, cuts), rows[i].Name)
		for _, tr := range ex.Turns {
			cuts[tr.ByteStart], cuts[tr.ByteEnd] = true, true
		}
		if rows[i].Name == "leading_newlines_straddle" {
			assert.NotEqual(t, whole, split(ex.Text, cuts), rows[i].Name)
		} else {
			assert.Equal(t, whole, split(ex.Text, cuts), rows[i].Name)
		}
	}
}

func TestSFTLastTurnOnly(t *testing.T) {
	tok := loadQwen3(t)
	convs, _ := loadFixtures(t)
	all, err := NewSFTEncoder(tok, SFTConfig{})
	require.NoError(t, err)
	last, err := NewSFTEncoder(tok, SFTConfig{LastTurnOnly: true})
	require.NoError(t, err)
	conv := convs[0] // tool_thinking: two assistant messages
	a, err := all.Encode(conv)
	require.NoError(t, err)
	l, err := last.Encode(conv)
	require.NoError(t, err)
	require.Equal(t, a.InputIDs, l.InputIDs)
	require.Len(t, l.Turns, 2)
	assert.False(t, l.Turns[0].Masked)
	assert.True(t, l.Turns[1].Masked)
	assert.Equal(t, []string{"<think>\nThe tool printed 56088.\n</think>\n\nThe product is \\boxed{56088}.<|im_end|>"}, maskedRuns(tok, l))
	assert.Equal(t, l.Turns[1].TokenEnd-l.Turns[1].TokenStart, l.MaskedTokens())
	for k, m := range l.LossMask {
		if k < l.Turns[1].TokenStart {
			require.Zero(t, m)
		}
	}
}

func TestSFTTruncation(t *testing.T) {
	tok := loadQwen3(t)
	convs, _ := loadFixtures(t)
	conv := convs[4] // plain_chat_last_turn: 42 tokens
	full, err := NewSFTEncoder(tok, SFTConfig{})
	require.NoError(t, err)
	ref, err := full.Encode(conv)
	require.NoError(t, err)
	n := len(ref.InputIDs)
	require.Equal(t, 42, n)

	t.Run("fits", func(t *testing.T) {
		enc, err := NewSFTEncoder(tok, SFTConfig{MaxLength: n})
		require.NoError(t, err)
		ex, err := enc.Encode(conv)
		require.NoError(t, err)
		assert.Equal(t, ref.InputIDs, ex.InputIDs)
		assert.Zero(t, ex.Truncated)
	})
	t.Run("error", func(t *testing.T) {
		enc, err := NewSFTEncoder(tok, SFTConfig{MaxLength: n - 1}) // "" means "error"
		require.NoError(t, err)
		_, err = enc.Encode(conv)
		require.ErrorIs(t, err, ErrTooLong)
		assert.Contains(t, err.Error(), "42 tokens, max 41")
		assert.Contains(t, err.Error(), "sft_conversations.jsonl: row 4")
	})
	t.Run("left", func(t *testing.T) {
		enc, err := NewSFTEncoder(tok, SFTConfig{MaxLength: 10, Truncation: TruncateLeft})
		require.NoError(t, err)
		ex, err := enc.Encode(conv)
		require.NoError(t, err)
		assert.Equal(t, ref.InputIDs[n-10:], ex.InputIDs)
		assert.Equal(t, ref.LossMask[n-10:], ex.LossMask)
		assert.Equal(t, n-10, ex.Truncated)
		// The first turn is cut away entirely: its token span is empty.
		assert.Equal(t, ex.Turns[0].TokenStart, ex.Turns[0].TokenEnd)
		assert.Equal(t, ref.Turns[1].TokenEnd-(n-10), ex.Turns[1].TokenEnd)
	})
	t.Run("right", func(t *testing.T) {
		enc, err := NewSFTEncoder(tok, SFTConfig{MaxLength: 20, Truncation: TruncateRight})
		require.NoError(t, err)
		ex, err := enc.Encode(conv)
		require.NoError(t, err)
		assert.Equal(t, ref.InputIDs[:20], ex.InputIDs)
		assert.Equal(t, ref.LossMask[:20], ex.LossMask)
		assert.Equal(t, 20, ex.Turns[1].TokenStart)
		assert.Equal(t, 20, ex.Turns[1].TokenEnd)
	})
}

func TestSFTErrors(t *testing.T) {
	tok := loadQwen3(t)
	enc, err := NewSFTEncoder(tok, SFTConfig{})
	require.NoError(t, err)
	args := func(s string) tokenizer.ToolCall {
		return tokenizer.ToolCall{Function: tokenizer.FunctionCall{Name: "f", Arguments: json.RawMessage(s)}}
	}
	user := tokenizer.Message{Role: "user", Content: "hi"}
	cases := []struct {
		name    string
		msgs    []tokenizer.Message
		want    error
		message string // "messages[i]" expected in the error, "" for none
	}{
		{"empty", nil, ErrEmptyConversation, ""},
		{"no assistant", []tokenizer.Message{{Role: "system", Content: "s"}, user}, ErrNoAssistant, ""},
		{"unknown role", []tokenizer.Message{user, {Role: "bot", Content: "x"}}, ErrUnknownRole, "messages[1]"},
		{"tool call without name", []tokenizer.Message{user, {Role: "assistant", ToolCalls: []tokenizer.ToolCall{{}}}}, ErrBadToolCall, "messages[1]"},
		{"arguments a number", []tokenizer.Message{user, {Role: "assistant", ToolCalls: []tokenizer.ToolCall{args("42")}}}, ErrBadToolCall, "messages[1]"},
		{"arguments not JSON", []tokenizer.Message{user, {Role: "assistant", ToolCalls: []tokenizer.ToolCall{args("{oops")}}}, ErrBadToolCall, "messages[1]"},
		{"tool call on a user turn", []tokenizer.Message{{Role: "user", ToolCalls: []tokenizer.ToolCall{args("{}")}}, {Role: "assistant"}}, ErrBadToolCall, "messages[0]"},
		{"bad call type", []tokenizer.Message{user, {Role: "assistant", ToolCalls: []tokenizer.ToolCall{{Type: "retrieval", Function: tokenizer.FunctionCall{Name: "f"}}}}}, ErrBadToolCall, "messages[1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := enc.Encode(Conversation{Source: "train.jsonl", Row: 7, Messages: c.msgs})
			require.ErrorIs(t, err, c.want)
			var se *SFTError
			require.ErrorAs(t, err, &se)
			assert.Contains(t, err.Error(), "train.jsonl: row 7")
			if c.message != "" {
				assert.Contains(t, err.Error(), c.message)
			}
		})
	}

	t.Run("assistant turn not found", func(t *testing.T) {
		// The user writes the generation-prompt header into the text, and
		// the first message is the assistant's, so neither strategy works.
		msgs := []tokenizer.Message{
			{Role: "assistant", Content: "a"},
			{Role: "user", Content: "<|im_start|>assistant\nfake"},
			{Role: "assistant", Content: "b"},
		}
		_, err := enc.Encode(Conversation{Messages: msgs})
		require.ErrorIs(t, err, ErrTemplateMismatch)
		assert.Contains(t, err.Error(), "messages[0]")
	})

	t.Run("config", func(t *testing.T) {
		_, err := NewSFTEncoder(tok, SFTConfig{Truncation: "middle"})
		require.Error(t, err)
		_, err = NewSFTEncoder(tok, SFTConfig{MaxLength: -1})
		require.Error(t, err)
		_, err = NewSFTEncoder(nil, SFTConfig{})
		require.Error(t, err)
		_, err = NewSFTEncoder(tok, SFTConfig{EndOfTurn: []string{""}})
		require.Error(t, err)
	})
}

// TestSFTTokenAlignment: text the tokenizer normalizes (NFC) is mapped to
// tokens segment by segment; when a span boundary falls inside a token
// ("\n" of the header merged with the content's leading newlines), that
// fails with ErrTokenAlignment rather than a wrong mask.
func TestSFTTokenAlignment(t *testing.T) {
	tok := loadQwen3(t)
	enc, err := NewSFTEncoder(tok, SFTConfig{})
	require.NoError(t, err)
	call := tokenizer.ToolCall{Function: tokenizer.FunctionCall{Name: "f", Arguments: json.RawMessage(`{}`)}}
	msgs := []tokenizer.Message{
		{Role: "user", Content: "go"},
		{Role: "assistant", Content: "\n\ncafe\u0301", ToolCalls: []tokenizer.ToolCall{call}},
		{Role: "tool", Content: "ok"},
		{Role: "assistant", Content: "done"},
	}
	_, err = enc.Encode(Conversation{Source: "s.jsonl", Row: 2, Messages: msgs})
	require.ErrorIs(t, err, ErrTokenAlignment)
	assert.Contains(t, err.Error(), "s.jsonl: row 2")

	// Without the leading newlines the segments align.
	msgs[1].Content = "cafe\u0301"
	ex, err := enc.Encode(Conversation{Messages: msgs})
	require.NoError(t, err)
	runs := maskedRuns(tok, ex)
	require.Len(t, runs, 2)
	assert.Equal(t, "café\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call><|im_end|>", runs[0])
}

// TestSFTAssistantFirst: a conversation that opens with the assistant has no
// prefix to render; the turn delimiters still find it.
func TestSFTAssistantFirst(t *testing.T) {
	tok := loadQwen3(t)
	enc, err := NewSFTEncoder(tok, SFTConfig{})
	require.NoError(t, err)
	ex, err := enc.Encode(Conversation{Messages: []tokenizer.Message{
		{Role: "assistant", Content: "Hello, how can I help?"},
		{Role: "user", Content: "Add 1 and 1."},
		{Role: "assistant", Content: "2"},
	}})
	require.NoError(t, err)
	assert.Equal(t, StrategyTurns, ex.Strategy)
	assert.Equal(t, []string{"Hello, how can I help?<|im_end|>", "<think>\n\n</think>\n\n2<|im_end|>"}, maskedRuns(tok, ex))
}

func TestSFTEncodeBatch(t *testing.T) {
	tok := loadQwen3(t)
	convs, _ := loadFixtures(t)
	convs = convs[:6] // the last needs enable_thinking false
	enc, err := NewSFTEncoder(tok, SFTConfig{})
	require.NoError(t, err)
	got, err := enc.EncodeBatch(context.Background(), convs)
	require.NoError(t, err)
	for i, c := range convs {
		want, err := enc.Encode(c)
		require.NoError(t, err)
		assert.Equal(t, want, got[i])
	}
	bad := append([]Conversation{}, convs...)
	bad[3] = Conversation{Source: "x", Row: 3}
	_, err = enc.EncodeBatch(context.Background(), bad)
	require.ErrorIs(t, err, ErrEmptyConversation)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = enc.EncodeBatch(ctx, convs)
	require.ErrorIs(t, err, context.Canceled)
}

func TestSFTReader(t *testing.T) {
	read := func(t *testing.T, data string, opts SFTOptions) ([]Conversation, []error) {
		r := NewSFTJSONLReader(strings.NewReader(data), "in.jsonl", opts)
		var convs []Conversation
		var errs []error
		for range 100 {
			c, err := r.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				if len(errs) > 0 && errs[len(errs)-1].Error() == err.Error() {
					break // sticky
				}
				errs = append(errs, err)
				continue
			}
			convs = append(convs, c)
		}
		return convs, errs
	}
	t.Run("layouts", func(t *testing.T) {
		data := `{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": null, "tool_calls": [{"name": "f", "arguments": {"z": 1, "a": [2]}}]}, {"role": "tool", "content": "r", "name": "f"}], "tools": "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]"}` + "\n\n" +
			`{"conv": [{"role": "user", "content": "q", "extra": 1}, {"role": "assistant", "content": "a", "reasoning_content": null}], "fns": null}` + "\r\n"
		convs, errs := read(t, data, SFTOptions{})
		require.Len(t, errs, 1) // line 3 has no "messages"
		assert.EqualError(t, errs[0], "in.jsonl:3: dataset: malformed row: field messages: missing (the row has conv, fns)")
		require.Len(t, convs, 1)
		c := convs[0]
		assert.Equal(t, "in.jsonl", c.Source)
		assert.Equal(t, int64(0), c.Row)
		require.Len(t, c.Messages, 3)
		assert.Equal(t, "", c.Messages[1].Content)
		assert.Equal(t, "f", c.Messages[1].ToolCalls[0].Function.Name)
		assert.Equal(t, `{"z": 1, "a": [2]}`, string(c.Messages[1].ToolCalls[0].Function.Arguments))
		assert.Equal(t, "f", c.Messages[2].Name)
		require.Len(t, c.Tools, 1)
		assert.Equal(t, `{"type": "function", "function": {"name": "f"}}`, string(c.Tools[0]))

		convs, errs = read(t, data, SFTOptions{MessagesKey: "conv", ToolsKey: "fns"})
		require.Len(t, errs, 1) // line 1 has no "conv"
		assert.EqualError(t, errs[0], "in.jsonl:1: dataset: malformed row: field conv: missing (the row has messages, tools)")
		require.Len(t, convs, 1)
		assert.Equal(t, int64(1), convs[0].Row) // the second record, on line 3
		assert.Nil(t, convs[0].Messages[1].ReasoningContent)
		assert.Nil(t, convs[0].Tools)
	})
	t.Run("errors", func(t *testing.T) {
		cases := []struct{ line, where string }{
			{`[1]`, "in.jsonl:1: "},
			{`{"messages": {"role": "user"}}`, "in.jsonl:1: dataset: malformed row: field messages: "},
			{`{"messages": null}`, "in.jsonl:1: dataset: malformed row: field messages: null"},
			{`{}`, "in.jsonl:1: dataset: malformed row: field messages: missing (the row is empty)"},
			{`{"messages": [{"content": "x"}]}`, "messages[0].role: "},
			{`{"messages": [{"role": 3, "content": "x"}]}`, "messages[0].role: "},
			{`{"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}`, "messages[0].content: "},
			{`{"messages": [{"role": "user", "content": 5}]}`, "messages[0].content: "},
			{`{"messages": [{"role": "assistant", "content": "", "tool_calls": {"name": "f"}}]}`, "messages[0].tool_calls: "},
			{`{"messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": {}}}]}]}`, "messages[0].tool_calls[0].function.name: "},
			{`{"messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}]}`, "messages[0].tool_calls[0].function.arguments: "},
			{`{"messages": [{"role": "assistant", "content": "", "tool_calls": [{"type": "x", "function": {"name": "f"}}]}]}`, "messages[0].tool_calls[0].type: "},
			{`{"messages": [{"role": "assistant", "content": "", "tool_calls": ["f"]}]}`, "messages[0].tool_calls[0]: "},
			{`{"messages": [{"role": "user", "content": "x"}], "tools": [1]}`, "tools[0]: "},
			{`{"messages": [{"role": "user", "content": "x"}], "tools": "{not json"}`, "tools: "},
			{`{"messages": [{"role": "user", "content": "x", "reasoning_content": 1}]}`, "messages[0].reasoning_content: "},
			{`not json`, "in.jsonl:1: "},
		}
		for _, c := range cases {
			_, errs := read(t, c.line+"\n", SFTOptions{})
			require.Len(t, errs, 1, c.line)
			require.ErrorIs(t, errs[0], ErrMalformed, c.line)
			var re *RowError
			require.ErrorAs(t, errs[0], &re)
			assert.Contains(t, errs[0].Error(), c.where, c.line)
		}
	})
	t.Run("line too long", func(t *testing.T) {
		_, errs := read(t, `{"messages": []}`+strings.Repeat(" ", 100)+"\n", SFTOptions{MaxLineBytes: 50})
		require.Len(t, errs, 1)
		require.ErrorIs(t, errs[0], ErrMalformed)
	})
}

// sftPQMessage is a verl multi-turn SFT row's message as parquet stores it
// (what pandas/pyarrow write for a list of message dicts).
type sftPQMessage struct {
	Role      string          `parquet:"role"`
	Content   string          `parquet:"content"`
	ToolCalls []sftPQToolCall `parquet:"tool_calls,list"`
}

type sftPQToolCall struct {
	Type     string `parquet:"type"`
	Function struct {
		Name      string `parquet:"name"`
		Arguments string `parquet:"arguments"`
	} `parquet:"function"`
}

type sftPQRow struct {
	Messages []sftPQMessage `parquet:"messages,list"`
	Tools    string         `parquet:"tools"`
}

// TestSFTParquet reads the Open-AgentRL SFT layout (messages and tools
// columns) from parquet and checks it gives what the same row gives as
// JSON Lines.
func TestSFTParquet(t *testing.T) {
	var row sftPQRow
	row.Tools = `[{"type": "function", "function": {"name": "code_interpreter", "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}}]`
	row.Messages = []sftPQMessage{{Role: "user", Content: "Compute 2**10."}, {Role: "assistant", Content: "Running it."}, {Role: "tool", Content: "1024"}, {Role: "assistant", Content: "\\boxed{1024}"}}
	var call sftPQToolCall
	call.Type = "function"
	call.Function.Name = "code_interpreter"
	call.Function.Arguments = `{"code": "print(2**10)"}`
	row.Messages[1].ToolCalls = []sftPQToolCall{call}

	path := filepath.Join(t.TempDir(), "sft.parquet")
	f, err := os.Create(path)
	require.NoError(t, err)
	w := parquet.NewGenericWriter[sftPQRow](f)
	_, err = w.Write([]sftPQRow{row})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())

	got, err := LoadSFT(context.Background(), SFTOptions{}, path)
	require.NoError(t, err)
	require.Len(t, got, 1)

	jsonl := `{"messages": [{"role": "user", "content": "Compute 2**10."}, {"role": "assistant", "content": "Running it.", "tool_calls": [{"type": "function", "function": {"name": "code_interpreter", "arguments": "{\"code\": \"print(2**10)\"}"}}]}, {"role": "tool", "content": "1024"}, {"role": "assistant", "content": "\\boxed{1024}"}], "tools": ` + mustJSON(t, row.Tools) + `}`
	want, err := decodeSFTLine([]byte(jsonl), SFTOptions{})
	require.NoError(t, err)
	assert.Equal(t, path, got[0].Source)
	// Messages without tool calls come back with an empty (non-nil) list
	// from parquet; compare what the template sees.
	tok := loadQwen3(t)
	enc, err := NewSFTEncoder(tok, SFTConfig{})
	require.NoError(t, err)
	a, err := enc.Encode(got[0])
	require.NoError(t, err)
	b, err := enc.Encode(want)
	require.NoError(t, err)
	assert.Equal(t, b.Text, a.Text)
	assert.Equal(t, b.LossMask, a.LossMask)
	assert.Contains(t, a.Text, `{"name": "code_interpreter", "arguments": {"code": "print(2**10)"}}`)
}

// TestSFTParquetHyparquet reads testdata/sft_openagentrl_hyparquet.parquet,
// written by hyparquet-writer (gen_sft_hyparquet.mjs) in the Open-AgentRL SFT
// layout — nested tool calls with struct arguments, nulls for absent fields,
// tools as a JSON string — and checks the ids and masks against the golden
// values of the same conversations.
func TestSFTParquetHyparquet(t *testing.T) {
	convs, err := LoadSFT(context.Background(), SFTOptions{}, "testdata/sft_openagentrl_hyparquet.parquet")
	require.NoError(t, err)
	b, err := os.ReadFile("testdata/sft_golden.json")
	require.NoError(t, err)
	var golden []goldenCase
	require.NoError(t, json.Unmarshal(b, &golden))
	byName := map[string]goldenCase{}
	for _, g := range golden {
		byName[g.Name] = g
	}
	names := []string{"tool_thinking", "multi_query_reasoning_dropped", "empty_reasoning_tool_turn", "plain_chat_last_turn"}
	require.Len(t, convs, len(names))
	enc, err := NewSFTEncoder(loadQwen3(t), SFTConfig{})
	require.NoError(t, err)
	for i, conv := range convs {
		g := byName[names[i]]
		assert.Equal(t, int64(i), conv.Row)
		ex, err := enc.Encode(conv)
		require.NoError(t, err, names[i])
		assert.Equal(t, g.Text, ex.Text, names[i])
		assert.Equal(t, g.IDs, ex.InputIDs, names[i])
		assert.Equal(t, g.Mask, ex.LossMask, names[i])
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestOpenSFTUnknownExtension(t *testing.T) {
	_, err := OpenSFT("data.csv", SFTOptions{})
	require.Error(t, err)
	_, err = LoadSFT(context.Background(), SFTOptions{}, filepath.Join(t.TempDir(), "missing.jsonl"))
	require.Error(t, err)
}

// TestSFTBytesTokenizer runs the Qwen3 template over the byte-level
// tokenizer of tiny models: one token per byte plus the specials, so the
// number of masked tokens is each span's byte length less the 9 bytes of
// "<|im_end|>" written as one token (len("<|im_end|>") = 10).
func TestSFTBytesTokenizer(t *testing.T) {
	qtok := loadQwen3(t)
	btok, err := tokenizer.NewBytes(tokenizer.BytesConfig{
		Specials:     []string{"<|im_start|>", "<|im_end|>"},
		EOS:          []string{"<|im_end|>"},
		ChatTemplate: qtok.ChatTemplate(),
	})
	require.NoError(t, err)
	enc, err := NewSFTEncoder(btok, SFTConfig{})
	require.NoError(t, err)
	convs, rows := loadFixtures(t)
	for i, conv := range convs[:6] {
		ex, err := enc.Encode(conv)
		require.NoError(t, err, rows[i].Name)
		want := 0
		for _, tr := range ex.Turns {
			want += tr.ByteEnd - tr.ByteStart - (len("<|im_end|>") - 1)
		}
		assert.Equal(t, want, ex.MaskedTokens(), rows[i].Name)
		qex, err := NewSFTEncoder(qtok, SFTConfig{})
		require.NoError(t, err)
		qe, err := qex.Encode(conv)
		require.NoError(t, err)
		if rows[i].Name != "nfc_combining_marks" { // Qwen3 normalizes to NFC, bytes do not
			assert.Equal(t, maskedRuns(qtok, qe), maskedRuns(btok, ex), rows[i].Name)
		}
	}
}
