package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The *_hyparquet.parquet fixtures were written by hyparquet-writer (JS) and
// their rows decoded by hyparquet into *_hyparquet.rows.json
// (testdata/gen_hyparquet.mjs): the Go reader, on parquet-go, must decode the
// same values.
func TestParquetMatchesIndependentReader(t *testing.T) {
	files, err := filepath.Glob("testdata/*_hyparquet.parquet")
	require.NoError(t, err)
	require.Len(t, files, 9)
	for _, path := range files {
		if strings.HasPrefix(filepath.Base(path), "legacy_") {
			continue // hyparquet ignores the legacy list rules; see TestAssemblerLegacyList
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			golden, err := os.ReadFile(strings.TrimSuffix(path, ".parquet") + ".rows.json")
			require.NoError(t, err)
			want, err := parseJSON(golden)
			require.NoError(t, err)

			pr, err := OpenParquet(path, Options{PromptKey: promptKeyOf(path)})
			require.NoError(t, err)
			defer pr.Close()
			var got []any
			for {
				rec, _, err := pr.nextRecord(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				got = append(got, rec)
			}
			assert.Equal(t, want, got)
		})
	}
}

func promptKeyOf(path string) string {
	if strings.Contains(path, "openagentrl_lcb") {
		return "problem"
	}
	if strings.Contains(path, "sft_") {
		return "messages"
	}
	return ""
}

func TestParquetGSM8KLayout(t *testing.T) {
	pr, err := OpenParquet("testdata/verl_gsm8k_hyparquet.parquet", Options{})
	require.NoError(t, err)
	defer pr.Close()
	assert.EqualValues(t, 5, pr.NumRows())
	assert.Equal(t, 3, pr.NumRowGroups()) // written with rowGroupSize 2

	exs, err := ReadAll(context.Background(), pr)
	require.NoError(t, err)
	require.Len(t, exs, 5)
	// Values as gen_hyparquet.mjs wrote them.
	wantAnswers := []string{"72", "10", "5", "42", "624"}
	for i, ex := range exs {
		assert.Equal(t, "testdata/verl_gsm8k_hyparquet.parquet", ex.Source)
		assert.EqualValues(t, i, ex.Row)
		assert.Equal(t, "openai/gsm8k", ex.DataSource)
		assert.Equal(t, "math", ex.Ability)
		require.Len(t, ex.Prompt, 2)
		assert.Equal(t, "system", ex.Prompt[0].Role)
		assert.Equal(t, "user", ex.Prompt[1].Role)
		assert.True(t, strings.HasSuffix(ex.Prompt[1].Content, `output the final answer after "####".`))
		assert.Equal(t, "rule", ex.RewardModel.Style)
		assert.Equal(t, GroundTruth{Kind: GroundTruthString, Value: wantAnswers[i]}, ex.RewardModel.GroundTruth)
		ans, err := ex.RewardModel.GroundTruth.Answers()
		require.NoError(t, err)
		assert.Equal(t, []string{wantAnswers[i]}, ans)
		assert.Equal(t, int64(i), ex.ExtraInfo["index"])
		assert.Equal(t, "train", ex.ExtraInfo["split"])
		assert.Equal(t, true, ex.ExtraInfo["need_tools_kwargs"])
		assert.Equal(t, map[string]any{"calc_gsm8k_reward": map[string]any{"create_kwargs": map[string]any{"ground_truth": wantAnswers[i]}}}, ex.ExtraInfo["tools_kwargs"])
		assert.Nil(t, ex.Extra)
		_, err = ex.Tests()
		assert.ErrorIs(t, err, ErrNoTests)
	}
	assert.True(t, strings.HasPrefix(exs[0].Prompt[1].Content, "Natalia sold clips"))
	assert.True(t, strings.HasPrefix(exs[4].Prompt[1].Content, "James writes a 3-page letter"))
}

func TestParquetOpenAgentRLCodeLayout(t *testing.T) {
	// reward_model and extra_info are JSON strings, the problem is a string.
	_, err := OpenParquet("testdata/openagentrl_lcb_hyparquet.parquet", Options{})
	var re *RowError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "prompt", re.Field)
	assert.ErrorIs(t, err, ErrMalformed)

	exs, err := Load(context.Background(), Options{PromptKey: "problem", StringPrompt: true}, "testdata/openagentrl_lcb_hyparquet.parquet")
	require.NoError(t, err)
	require.Len(t, exs, 2)
	assert.Equal(t, []Message{{Role: "user", Content: "Given two integers a and b on one line, print their sum."}}, exs[0].Prompt)
	assert.Equal(t, "LiveCodeBench_v6", exs[0].DataSource)
	assert.Equal(t, "rule", exs[0].RewardModel.Style)
	assert.Equal(t, GroundTruthObject, exs[0].RewardModel.GroundTruth.Kind)
	assert.Equal(t, map[string]any{"split": "test", "index": int64(0), "question_id": "abc001_a"}, exs[0].ExtraInfo)

	tc, err := exs[0].Tests()
	require.NoError(t, err)
	assert.Equal(t, TestCases{Cases: []TestCase{{"1 2\n", "3\n"}, {"10 -3\n", "7\n"}}}, tc)
	tc, err = exs[1].Tests()
	require.NoError(t, err)
	assert.Equal(t, TestCases{FnName: "twoSum", Cases: []TestCase{{"[2,7,11,15]\n9", "[0, 1]"}, {"[3,2,4]\n6", "[1, 2]"}}}, tc)
}

func TestParquetGroundTruthShapes(t *testing.T) {
	ctx := context.Background()
	exs, err := Load(ctx, Options{}, "testdata/math_list_gt_hyparquet.parquet")
	require.NoError(t, err)
	require.Len(t, exs, 3)
	ans, err := exs[0].RewardModel.GroundTruth.Answers()
	require.NoError(t, err)
	assert.Equal(t, []string{"0.5", `\frac{1}{2}`}, ans)
	assert.Equal(t, GroundTruthList, exs[2].RewardModel.GroundTruth.Kind)
	ans, err = exs[2].RewardModel.GroundTruth.Answers()
	require.NoError(t, err)
	assert.Empty(t, ans)

	exs, err = Load(ctx, Options{}, "testdata/math_int_gt_hyparquet.parquet")
	require.NoError(t, err)
	require.Len(t, exs, 2)
	assert.Equal(t, GroundTruth{Kind: GroundTruthNumber, Value: int64(2)}, exs[0].RewardModel.GroundTruth)
	ans, err = exs[1].RewardModel.GroundTruth.Answers()
	require.NoError(t, err)
	assert.Equal(t, []string{"16"}, ans) // 2024 = 2³·11·23 has (3+1)(1+1)(1+1) divisors
	assert.Equal(t, "tool_agent", exs[1].AgentName)
}

func TestParquetCodeTests(t *testing.T) {
	exs, err := Load(context.Background(), Options{}, "testdata/code_tests_hyparquet.parquet")
	require.NoError(t, err)
	require.Len(t, exs, 4)
	want := []TestCases{
		{Cases: []TestCase{{"3\n1 2 3\n", "6\n"}}},
		// Non-string inputs and outputs are kept as compact JSON.
		{FnName: "total", Cases: []TestCase{{"[[1,2,3]]", "6"}, {"[[]]", "0"}}},
		{ImportPrefix: "from typing import *\n", TestCode: "def check(candidate):\n    assert candidate(2) == 4\n", EntryPoint: "Solution().double"},
		// No ground truth: the tests come from extra_info.input_output.
		{Cases: []TestCase{{"hi\n", "hi\n"}}},
	}
	for i, ex := range exs {
		tc, err := ex.Tests()
		require.NoError(t, err, "row %d", i)
		assert.Equal(t, want[i], tc, "row %d", i)
	}
	assert.Equal(t, GroundTruthNone, exs[3].RewardModel.GroundTruth.Kind)
}

func TestParquetMalformedRows(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		path, field, msg string
	}{
		{"testdata/bad_prompt_string_hyparquet.parquet", "prompt", "want list of messages, got string"},
		{"testdata/bad_missing_content_hyparquet.parquet", "prompt[0].content", "missing"},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.path), func(t *testing.T) {
			pr, err := OpenParquet(c.path, Options{})
			require.NoError(t, err)
			defer pr.Close()
			_, err = pr.Next(ctx)
			var re *RowError
			require.ErrorAs(t, err, &re)
			assert.ErrorIs(t, err, ErrMalformed)
			assert.Equal(t, c.path, re.File)
			assert.EqualValues(t, 0, re.Row)
			assert.Equal(t, c.field, re.Field)
			assert.EqualError(t, err, c.path+": row 0: dataset: malformed row: field "+c.field+": "+c.msg)
			// A malformed row does not stop the reader: row 1 is next.
			_, err = pr.Next(ctx)
			require.ErrorAs(t, err, &re)
			assert.EqualValues(t, 1, re.Row)
			_, err = pr.Next(ctx)
			assert.ErrorIs(t, err, io.EOF)
		})
	}
	// With StringPrompt the string prompt is one user message.
	exs, err := Load(ctx, Options{StringPrompt: true}, "testdata/bad_prompt_string_hyparquet.parquet")
	require.NoError(t, err)
	assert.Equal(t, []Message{{Role: "user", Content: "What is 3+3?"}}, exs[1].Prompt)
}

func TestParquetTruncatedAndCorrupt(t *testing.T) {
	data, err := os.ReadFile("testdata/verl_gsm8k_hyparquet.parquet")
	require.NoError(t, err)
	ctx := context.Background()
	// Every truncation loses the footer: the open must fail cleanly.
	for _, n := range []int{0, 3, 4, 8, len(data) / 2, len(data) - 9, len(data) - 1} {
		_, err := NewParquetReader(bytes.NewReader(data[:n]), int64(n), "cut.parquet", Options{})
		require.Error(t, err, "cut at %d", n)
		assert.ErrorIs(t, err, ErrCorruptFile, "cut at %d", n)
		assert.Contains(t, err.Error(), "cut.parquet")
	}
	// Flipping a byte anywhere (pages or footer) must give either rows or
	// an error of this package's kinds, never a panic. Offset 4597 is in the
	// footer: with it, parquet-go v0.32.0 panics in Value.byteArray
	// ("unsafe.Slice: ptr is nil and len is not zero", under
	// Schema.Reconstruct) on row 1 or 2, or fails on row 0 — which one
	// varies from run to run (pooled buffers); either way the reader
	// reports ErrCorruptFile.
	errs := 0
	offsets := []int{4597}
	for off := 4; off < len(data)-8; off += 31 {
		offsets = append(offsets, off)
	}
	for _, off := range offsets {
		bad := bytes.Clone(data)
		bad[off] ^= 0xFF
		pr, err := NewParquetReader(bytes.NewReader(bad), int64(len(bad)), "flip.parquet", Options{})
		if err == nil {
			_, err = ReadAll(ctx, pr)
		}
		if err != nil {
			errs++
			assert.True(t, errors.Is(err, ErrCorruptFile) || errors.Is(err, ErrMalformed), "offset %d: %v", off, err)
			assert.Contains(t, err.Error(), "flip.parquet")
		}
		if off == 4597 {
			assert.ErrorIs(t, err, ErrCorruptFile)
		}
	}
	assert.Positive(t, errs)

	// XOR 0x01 at 3986 makes a schema element's num_children negative:
	// parquet-go v0.32.0 panics in OpenFile (allocate in column.go, "slice
	// bounds out of range [::-2]"); the reader reports ErrCorruptFile.
	bad := bytes.Clone(data)
	bad[3986] ^= 0x01
	_, err = NewParquetReader(bytes.NewReader(bad), int64(len(bad)), "neg.parquet", Options{})
	assert.ErrorIs(t, err, ErrCorruptFile)
	assert.ErrorContains(t, err, "neg.parquet: dataset: corrupt file: parquet-go panicked: runtime error: slice bounds out of range [::-2]")
}

// writeParquetGoFile writes n verl-layout rows with parquet-go's writer, in
// row groups of groupRows rows.
func writeParquetGoFile(t testing.TB, path string, n, groupRows int) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	w := parquet.NewGenericWriter[pgRow](f, parquet.MaxRowsPerRowGroup(int64(groupRows)), parquet.Compression(&parquet.Snappy))
	batch := make([]pgRow, 0, 256)
	for i := range n {
		batch = append(batch, makePGRow(i))
		if len(batch) == cap(batch) || i == n-1 {
			_, err := w.Write(batch)
			require.NoError(t, err)
			batch = batch[:0]
		}
	}
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
}

type pgMessage struct {
	Content string `parquet:"content"`
	Role    string `parquet:"role"`
}

type pgRow struct {
	DataSource  string      `parquet:"data_source"`
	Prompt      []pgMessage `parquet:"prompt,list"`
	Ability     string      `parquet:"ability"`
	RewardModel struct {
		GroundTruth string `parquet:"ground_truth"`
		Style       string `parquet:"style"`
	} `parquet:"reward_model"`
	ExtraInfo struct {
		Index int64   `parquet:"index"`
		Split string  `parquet:"split"`
		Score float32 `parquet:"score"`
	} `parquet:"extra_info"`
}

func makePGRow(i int) pgRow {
	var r pgRow
	r.DataSource = "synthetic"
	r.Prompt = []pgMessage{
		{Role: "system", Content: "Solve the problem; use the code tool for arithmetic."},
		{Role: "user", Content: fmt.Sprintf("Problem %d: what is %d * %d?", i, i, i+1)},
	}
	r.Ability = "math"
	r.RewardModel.GroundTruth = fmt.Sprint(i * (i + 1))
	r.RewardModel.Style = "rule"
	r.ExtraInfo.Index = int64(i)
	r.ExtraInfo.Split = "train"
	r.ExtraInfo.Score = 0.5
	return r
}

// A file with many row groups, read through: every row is decoded, values
// read early are not overwritten by later pages (no aliasing of parquet-go's
// buffers), the float32 column becomes float64.
func TestParquetLargeFileRowGroups(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	path := filepath.Join(t.TempDir(), "big.parquet")
	writeParquetGoFile(t, path, n, 7_000)
	pr, err := OpenParquet(path, Options{})
	require.NoError(t, err)
	defer pr.Close()
	assert.EqualValues(t, n, pr.NumRows())
	assert.Equal(t, (n+6_999)/7_000, pr.NumRowGroups())
	exs, err := ReadAll(context.Background(), pr)
	require.NoError(t, err)
	require.Len(t, exs, n)
	for _, i := range []int{0, 1, 63, 64, 6_999, 7_000, n / 2, n - 1} {
		ex := exs[i]
		assert.EqualValues(t, i, ex.Row)
		assert.Equal(t, fmt.Sprintf("Problem %d: what is %d * %d?", i, i, i+1), ex.Prompt[1].Content)
		assert.Equal(t, fmt.Sprint(i*(i+1)), ex.RewardModel.GroundTruth.Value)
		assert.Equal(t, int64(i), ex.ExtraInfo["index"])
		assert.Equal(t, 0.5, ex.ExtraInfo["score"])
	}
}

func TestParquetContextCancel(t *testing.T) {
	pr, err := OpenParquet("testdata/verl_gsm8k_hyparquet.parquet", Options{})
	require.NoError(t, err)
	defer pr.Close()
	ctx, cancel := context.WithCancel(context.Background())
	_, err = pr.Next(ctx)
	require.NoError(t, err)
	cancel()
	_, err = pr.Next(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestOpenByExtension(t *testing.T) {
	_, err := Open("testdata/data.csv", Options{})
	assert.ErrorContains(t, err, "unknown extension")
	_, err = Open("testdata/missing.parquet", Options{})
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = Open("testdata/missing.jsonl", Options{})
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestSafelyRecoversPanics(t *testing.T) {
	err := safely(func() error { panic("boom") })
	assert.ErrorContains(t, err, "parquet-go panicked: boom")
	err = safely(func() error {
		var s []int
		_ = s[3]
		return nil
	})
	assert.ErrorContains(t, err, "index out of range")
	assert.NoError(t, safely(func() error { return nil }))
}

func TestParquetFrameChecks(t *testing.T) {
	data, err := os.ReadFile("testdata/verl_gsm8k_hyparquet.parquet")
	require.NoError(t, err)
	withTail := func(footerLen uint32, magic string) []byte {
		b := bytes.Clone(data)
		n := len(b)
		b[n-8], b[n-7], b[n-6], b[n-5] = byte(footerLen), byte(footerLen>>8), byte(footerLen>>16), byte(footerLen>>24)
		copy(b[n-4:], magic)
		return b
	}
	badHead := bytes.Clone(data)
	copy(badHead, "PAR0")
	cases := []struct {
		name string
		data []byte
		msg  string
	}{
		{"too short", []byte("PAR1PAR1"), "8 bytes is too short"},
		{"bad leading magic", badHead, "missing PAR1 magic"},
		{"bad trailing magic", withTail(100, "PAR2"), "missing PAR1 magic"},
		{"encrypted", withTail(100, "PARE"), "encrypted parquet files are not supported"},
		// The fuzzer's find: a footer length of 1.7e9 in a small file made
		// parquet-go v0.32.0 allocate 1.6 GB before failing.
		{"huge footer length", withTail(1744831079, "PAR1"), "footer length 1744831079 does not fit in 7435 bytes"},
		{"zero footer length", withTail(0, "PAR1"), "footer length 0 does not fit"},
	}
	for _, c := range cases {
		_, err := NewParquetReader(bytes.NewReader(c.data), int64(len(c.data)), "frame.parquet", Options{})
		assert.ErrorIs(t, err, ErrCorruptFile, c.name)
		assert.ErrorContains(t, err, "frame.parquet: dataset: corrupt file: "+c.msg, c.name)
	}
}
