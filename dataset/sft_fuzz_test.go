package dataset

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"
)

// FuzzSFTJSONL feeds arbitrary bytes to the SFT JSON Lines reader and
// encodes every conversation it yields with the Qwen3 tokenizer. Promised:
// no panic; reader errors are *RowError wrapping ErrMalformed; encoding
// either fails with an *SFTError or gives ids and a mask of equal length
// whose masked tokens lie inside the assistant turns.
func FuzzSFTJSONL(f *testing.F) {
	seed, err := os.ReadFile("testdata/sft_conversations.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	for _, line := range bytes.Split(seed, []byte("\n")) {
		f.Add(line)
	}
	f.Add([]byte(`{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null, "tool_calls": [{"name": "f", "arguments": "{\"a\": 1}"}]}], "tools": "[]"}`))
	f.Add([]byte(`{"messages": [{"role": "assistant", "content": "<|im_start|>assistant\n"}]}` + "\n[]\n{}"))
	tok := loadQwen3(f)
	enc, err := NewSFTEncoder(tok, SFTConfig{MaxLength: 4096, Truncation: TruncateRight})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewSFTJSONLReader(bytes.NewReader(data), "fuzz.jsonl", SFTOptions{MaxLineBytes: 1 << 14})
		var last error
		for range len(data) + 2 {
			conv, err := r.Next(context.Background())
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				var re *RowError
				if !errors.Is(err, ErrMalformed) || !errors.As(err, &re) {
					t.Fatalf("reader error of unknown kind: %v", err)
				}
				if last != nil && err.Error() == last.Error() {
					return // sticky
				}
				last = err
				continue
			}
			ex, err := enc.Encode(conv)
			if err != nil {
				var se *SFTError
				if !errors.As(err, &se) {
					t.Fatalf("encode error without a place: %v", err)
				}
				continue
			}
			if len(ex.InputIDs) != len(ex.LossMask) || len(ex.InputIDs) > 4096 {
				t.Fatalf("ids %d, mask %d", len(ex.InputIDs), len(ex.LossMask))
			}
			inTurn := make([]bool, len(ex.InputIDs))
			for _, tr := range ex.Turns {
				if tr.TokenStart > tr.TokenEnd || tr.TokenEnd > len(ex.InputIDs) {
					t.Fatalf("turn %+v out of range", tr)
				}
				for k := tr.TokenStart; k < tr.TokenEnd; k++ {
					inTurn[k] = true
				}
			}
			for k, m := range ex.LossMask {
				if m != 0 && !inTurn[k] {
					t.Fatalf("token %d masked outside the assistant turns", k)
				}
			}
		}
	})
}
