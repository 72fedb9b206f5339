package dataset

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// drain reads r to the end (or to a sticky error) and checks what every
// reader promises: no panic, errors of this package's kinds, and examples
// that have a prompt of messages with roles.
func drain(t *testing.T, r Reader, maxCalls int) {
	t.Helper()
	ctx := context.Background()
	var last error
	for range maxCalls {
		ex, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrCorruptFile) {
				t.Fatalf("error of unknown kind: %v", err)
			}
			var re *RowError
			if !errors.As(err, &re) {
				t.Fatalf("error without a place: %v", err)
			}
			if last != nil && err.Error() == last.Error() {
				return // sticky
			}
			last = err
			continue
		}
		if len(ex.Prompt) == 0 {
			t.Fatalf("example without prompt: %+v", ex)
		}
		for i, m := range ex.Prompt {
			if m.Role == "" {
				t.Fatalf("prompt[%d] without role", i)
			}
		}
		_, _ = ex.Tests()
		_, _ = ex.RewardModel.GroundTruth.Answers()
		_, _ = ex.ToolsKwargs()
	}
}

func FuzzJSONL(f *testing.F) {
	for _, p := range []string{"testdata/verl_mixed.jsonl", "testdata/crlf_no_final_newline.jsonl"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"prompt": [{"role": "user", "content": "x"}], "reward_model": "{\"ground_truth\": {\"inputs\": [1], \"outputs\": [2]}}"}`))
	f.Add([]byte("{\"prompt\": [{\"role\": \"u\", \"content\": \"\"}], \"extra_info\": {\"tools_kwargs\": {\"t\": 1}}}\n\n[]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewJSONLReader(bytes.NewReader(data), "fuzz.jsonl", Options{MaxLineBytes: 1 << 16})
		drain(t, r, len(data)+2)
	})
}

func FuzzParquet(f *testing.F) {
	paths, err := filepath.Glob("testdata/*.parquet")
	if err != nil || len(paths) == 0 {
		f.Fatalf("no parquet fixtures: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range []Options{{}, {PromptKey: "problem", StringPrompt: true}} {
			r, err := NewParquetReader(bytes.NewReader(data), int64(len(data)), "fuzz.parquet", opts)
			if err != nil {
				if !errors.Is(err, ErrCorruptFile) && !errors.Is(err, ErrMalformed) {
					t.Fatalf("open error of unknown kind: %v", err)
				}
				continue
			}
			drain(t, r, 10_000)
			if err := r.Close(); err != nil && !errors.Is(err, ErrCorruptFile) {
				t.Fatalf("close: %v", err)
			}
		}
	})
}

func FuzzParseTestCases(f *testing.F) {
	for _, s := range []string{
		`{"inputs": ["1\n"], "outputs": ["2\n"], "fn_name": "f"}`,
		`[{"input": "a", "output": "b"}]`,
		`{"test_code": "def check(c): pass", "import_prefix": "", "entry_point": "f"}`,
		`72`, `[0, 1)`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tc, err := ParseTestCases(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNoTests) {
				t.Fatalf("error of unknown kind: %v", err)
			}
			return
		}
		if tc.TestCode == "" && tc.Cases == nil {
			t.Fatalf("success without tests: %+v", tc)
		}
	})
}
