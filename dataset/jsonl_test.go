package dataset

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJSONLMixedLayouts(t *testing.T) {
	exs, err := Load(context.Background(), Options{}, "testdata/verl_mixed.jsonl")
	require.NoError(t, err)
	require.Len(t, exs, 5) // the blank line 2 is skipped

	// Expected values read off testdata/verl_mixed.jsonl by hand.
	e := exs[0]
	assert.Equal(t, "testdata/verl_mixed.jsonl", e.Source)
	assert.EqualValues(t, 0, e.Row)
	assert.Equal(t, "openai/gsm8k", e.DataSource)
	assert.Equal(t, []Message{{Role: "user", Content: `What is 6 * 7? Let's think step by step and output the final answer after "####".`}}, e.Prompt)
	assert.Equal(t, RewardModel{Style: "rule", GroundTruth: GroundTruth{Kind: GroundTruthString, Value: "42"}}, e.RewardModel)
	assert.Equal(t, map[string]any{"split": "train", "index": int64(0)}, e.ExtraInfo)

	e = exs[1]
	assert.EqualValues(t, 1, e.Row)
	assert.Equal(t, GroundTruth{Kind: GroundTruthNumber, Value: 1.5}, e.RewardModel.GroundTruth)
	ans, err := e.RewardModel.GroundTruth.Answers()
	require.NoError(t, err)
	assert.Equal(t, []string{"1.5"}, ans)
	assert.Equal(t, "tool_agent", e.AgentName)
	assert.Equal(t, true, e.ExtraInfo["need_tools_kwargs"])
	kw, err := e.ToolsKwargs()
	require.NoError(t, err)
	assert.Equal(t, map[string]map[string]any{"code_interpreter": {"create_kwargs": map[string]any{"ground_truth": "1.5"}}}, kw)

	e = exs[2]
	assert.Equal(t, GroundTruthList, e.RewardModel.GroundTruth.Kind)
	ans, err = e.RewardModel.GroundTruth.Answers()
	require.NoError(t, err)
	assert.Equal(t, []string{"2", "2", "2.0"}, ans)
	assert.Equal(t, map[string]any{"uid": "p-3", "difficulty": 0.25}, e.Extra)
	assert.Nil(t, e.ExtraInfo)

	e = exs[3]
	assert.Equal(t, map[string]any{"name": "alice"}, e.Prompt[0].Extra)
	assert.Equal(t, map[string]any{"verifier": "sandbox_fusion"}, e.RewardModel.Extra)
	assert.Equal(t, map[string]any{"split": "test", "index": int64(3)}, e.ExtraInfo) // decoded from a JSON string
	tc, err := e.Tests()
	require.NoError(t, err)
	assert.Equal(t, TestCases{Cases: []TestCase{{"1 2\n", "3\n"}}}, tc)

	tc, err = exs[4].Tests()
	require.NoError(t, err)
	assert.Equal(t, TestCases{Cases: []TestCase{{"2\n", "4\n"}}}, tc)
}

func TestJSONLToolCallTurn(t *testing.T) {
	// A few-shot assistant turn that only calls a tool has null content.
	line := `{"prompt": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": "{\"e\": \"2+2\"}"}}]}, {"role": "tool", "content": "4"}]}`
	exs, err := ReadAll(context.Background(), NewJSONLReader(strings.NewReader(line), "t.jsonl", Options{}))
	require.NoError(t, err)
	require.Len(t, exs[0].Prompt, 3)
	assert.Equal(t, "", exs[0].Prompt[1].Content)
	assert.Equal(t, []any{map[string]any{"type": "function", "function": map[string]any{"name": "calc", "arguments": `{"e": "2+2"}`}}}, exs[0].Prompt[1].Extra["tool_calls"])
	assert.Equal(t, Message{Role: "tool", Content: "4"}, exs[0].Prompt[2])
}

func TestJSONLLineEndings(t *testing.T) {
	exs, err := Load(context.Background(), Options{}, "testdata/crlf_no_final_newline.jsonl")
	require.NoError(t, err)
	require.Len(t, exs, 2)
	assert.Equal(t, "windows line", exs[0].Prompt[0].Content)
	assert.Equal(t, "no newline at end", exs[1].Prompt[0].Content)
}

func TestJSONLMalformed(t *testing.T) {
	good := `{"prompt": [{"role": "user", "content": "ok"}]}`
	cases := []struct {
		name  string
		line  string
		field string
		msg   string
	}{
		{"not json", `{"prompt": [`, "", "not JSON"},
		{"trailing garbage", good + ` x`, "", "not JSON"},
		{"array line", `[1, 2]`, "", "want JSON object, got list"},
		{"missing prompt", `{"data_source": "x"}`, "prompt", "missing"},
		{"null prompt", `{"prompt": null}`, "prompt", "null prompt"},
		{"prompt not a list", `{"prompt": "hi"}`, "prompt", "want list of messages, got string"},
		{"prompt is object", `{"prompt": {"role": "user"}}`, "prompt", "want list of messages, got object"},
		{"empty prompt", `{"prompt": []}`, "prompt", "empty prompt"},
		{"message not object", `{"prompt": ["hi"]}`, "prompt[0]", "want message object, got string"},
		{"missing content", `{"prompt": [{"role": "user", "content": "a"}, {"role": "user"}]}`, "prompt[1].content", "missing"},
		{"content not string", `{"prompt": [{"role": "user", "content": 5}]}`, "prompt[0].content", "want string, got int64"},
		{"content null", `{"prompt": [{"role": "user", "content": null}]}`, "prompt[0].content", "want string, got null"},
		{"content parts", `{"prompt": [{"role": "user", "content": [{"type": "text"}]}]}`, "prompt[0].content", "want string, got list"},
		{"missing role", `{"prompt": [{"content": "a"}]}`, "prompt[0].role", "missing"},
		{"empty role", `{"prompt": [{"role": "", "content": "a"}]}`, "prompt[0].role", "want non-empty string, got empty string"},
		{"data_source number", `{"prompt": [{"role": "user", "content": "a"}], "data_source": 3}`, "data_source", "want string, got int64"},
		{"ability list", `{"prompt": [{"role": "user", "content": "a"}], "ability": []}`, "ability", "want string, got list"},
		{"ground_truth bool", `{"prompt": [{"role": "user", "content": "a"}], "reward_model": {"ground_truth": true}}`, "reward_model.ground_truth", "want string, number, list or object, got bool"},
		{"style number", `{"prompt": [{"role": "user", "content": "a"}], "reward_model": {"style": 1}}`, "reward_model.style", "want string, got int64"},
		{"reward_model list", `{"prompt": [{"role": "user", "content": "a"}], "reward_model": [1]}`, "reward_model", "want object, got list"},
		{"reward_model bad json string", `{"prompt": [{"role": "user", "content": "a"}], "reward_model": "{oops"}`, "reward_model", "string is not JSON"},
		{"extra_info json array string", `{"prompt": [{"role": "user", "content": "a"}], "extra_info": "[1]"}`, "extra_info", "want object, got JSON list"},
		{"huge number", `{"prompt": [{"role": "user", "content": "a"}], "x": 1e999}`, "", "not JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The bad line is line 3, after a good line and a blank one.
			input := good + "\n\n" + c.line + "\n" + good + "\n"
			r := NewJSONLReader(strings.NewReader(input), "mem.jsonl", Options{})
			_, err := r.Next(context.Background())
			require.NoError(t, err)
			_, err = r.Next(context.Background())
			var re *RowError
			require.ErrorAs(t, err, &re)
			assert.ErrorIs(t, err, ErrMalformed)
			assert.Equal(t, "mem.jsonl", re.File)
			assert.EqualValues(t, 3, re.Line)
			assert.EqualValues(t, 1, re.Row)
			assert.Equal(t, c.field, re.Field)
			assert.Contains(t, err.Error(), c.msg)
			assert.True(t, strings.HasPrefix(err.Error(), "mem.jsonl:3: "), err.Error())
			// The reader goes on after a malformed line.
			ex, err := r.Next(context.Background())
			require.NoError(t, err)
			assert.EqualValues(t, 2, ex.Row)
			_, err = r.Next(context.Background())
			assert.ErrorIs(t, err, io.EOF)
		})
	}
}

func TestJSONLLineTooLong(t *testing.T) {
	long := `{"prompt": [{"role": "user", "content": "` + strings.Repeat("a", 200) + `"}]}`
	r := NewJSONLReader(strings.NewReader(long+"\n"), "long.jsonl", Options{MaxLineBytes: 100})
	_, err := r.Next(context.Background())
	assert.ErrorIs(t, err, ErrMalformed)
	assert.ErrorContains(t, err, "long.jsonl:1: ")
	assert.ErrorContains(t, err, "line longer than 100 bytes")
	// Sticky: the reader does not resynchronise inside a line.
	_, err2 := r.Next(context.Background())
	assert.Equal(t, err, err2)

	// Exactly at the limit is fine, with or without "\r\n".
	line := `{"prompt": [{"role": "user", "content": "x"}]}`
	for _, eol := range []string{"\n", "\r\n", ""} {
		r = NewJSONLReader(strings.NewReader(line+eol), "ok.jsonl", Options{MaxLineBytes: len(line) + len(eol) - min(len(eol), 1)})
		_, err = r.Next(context.Background())
		assert.NoError(t, err, "eol %q", eol)
	}
}

type failingReader struct{ after string }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.after == "" {
		return 0, errors.New("disk on fire")
	}
	n := copy(p, f.after)
	f.after = f.after[n:]
	return n, nil
}

func TestJSONLReadError(t *testing.T) {
	r := NewJSONLReader(&failingReader{after: `{"prompt": [{"role": "user", "content": "x"}]}` + "\n{"}, "f.jsonl", Options{})
	_, err := r.Next(context.Background())
	require.NoError(t, err)
	_, err = r.Next(context.Background())
	assert.ErrorContains(t, err, "disk on fire")
	assert.ErrorContains(t, err, "f.jsonl: line 2")
	assert.NotErrorIs(t, err, ErrMalformed)
}

func TestJSONLEmptyAndCancel(t *testing.T) {
	exs, err := ReadAll(context.Background(), NewJSONLReader(strings.NewReader("\n  \n"), "e.jsonl", Options{}))
	require.NoError(t, err)
	assert.Empty(t, exs)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = NewJSONLReader(strings.NewReader("{}"), "c.jsonl", Options{}).Next(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

// Every fixture, read, written as JSONL and read again, gives the same
// examples: nothing of a row is lost on the way.
func TestJSONLRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		path string
		opts Options
	}{
		{"testdata/verl_gsm8k_hyparquet.parquet", Options{}},
		{"testdata/code_tests_hyparquet.parquet", Options{}},
		{"testdata/math_list_gt_hyparquet.parquet", Options{}},
		{"testdata/math_int_gt_hyparquet.parquet", Options{}},
		{"testdata/verl_mixed.jsonl", Options{}},
	} {
		exs, err := Load(ctx, c.opts, c.path)
		require.NoError(t, err)
		var buf strings.Builder
		require.NoError(t, WriteJSONL(&buf, exs))
		back, err := ReadAll(ctx, NewJSONLReader(strings.NewReader(buf.String()), c.path, c.opts))
		require.NoError(t, err)
		require.Len(t, back, len(exs))
		for i := range exs {
			exs[i].Row = back[i].Row // JSONL renumbers; the blank line of verl_mixed is gone
			assert.Equal(t, exs[i], back[i], "%s row %d", c.path, i)
		}
	}
}

func TestWriteJSONLRejectsNaN(t *testing.T) {
	ex := Example{Source: "s", Row: 4, Prompt: []Message{{Role: "user", Content: "x"}}, ExtraInfo: map[string]any{"score": math.NaN()}}
	err := WriteJSONL(io.Discard, []Example{ex})
	assert.ErrorContains(t, err, "writing example 0 (s row 4)")
}

// TestWriteJSONLFile: the file holds what WriteJSONL writes; a failed
// write (a NaN in extra_info) leaves the previous file whole and no
// temporary file behind; a missing folder is an error naming it.
func TestWriteJSONLFile(t *testing.T) {
	ctx := context.Background()
	exs, err := Load(ctx, Options{}, "testdata/verl_mixed.jsonl")
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	require.NoError(t, WriteJSONLFile(path, exs))
	var want strings.Builder
	require.NoError(t, WriteJSONL(&want, exs))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want.String(), string(got))

	bad := Example{Source: "s", Row: 1, Prompt: []Message{{Role: "user", Content: "x"}}, ExtraInfo: map[string]any{"score": math.NaN()}}
	require.ErrorContains(t, WriteJSONLFile(path, []Example{exs[0], bad}), "writing example 1")
	again, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(got), string(again), "the old file is intact")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "no temporary file left")

	err = WriteJSONLFile(filepath.Join(dir, "missing", "out.jsonl"), exs)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorContains(t, err, "missing")
}
