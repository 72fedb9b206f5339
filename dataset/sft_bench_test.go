package dataset

import (
	"context"
	"testing"

	"github.com/agentrl/agentrl/policy/tokenizer"
)

// BenchmarkSFTEncode encodes the eight fixture conversations of
// testdata/sft_conversations.jsonl (tool calls, thinking, both span
// strategies, non-ASCII) one after another on one goroutine: rendering,
// span finding, one tokenization, masking.
//
//	go test ./dataset -run '^$' -bench SFTEncode -benchtime 2s
//
// The reference is the same work in Python and Rust, timed separately:
// jinja2 rendering and span finding (cd testdata; /usr/bin/python3
// gen_sft_golden.py --bench) and Hugging Face tokenizers encoding with
// offsets (BENCH=1 NODE_PATH=... node hf_sft_mask.js); their per-conversation
// times add up to the reference's.
func BenchmarkSFTEncode(b *testing.B) {
	convs, rows := loadFixtures(b)
	tok := loadQwen3(b)
	encs := make([]*SFTEncoder, len(convs))
	for i := range convs {
		enc, err := NewSFTEncoder(tok, SFTConfig{ChatOptions: tokenizer.ChatOptions{Vars: rows[i].Vars}})
		if err != nil {
			b.Fatal(err)
		}
		encs[i] = enc
	}
	tokens := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i, c := range convs {
			ex, err := encs[i].Encode(c)
			if err != nil {
				b.Fatal(err)
			}
			tokens += len(ex.InputIDs)
		}
	}
	b.ReportMetric(float64(len(convs)*b.N)/b.Elapsed().Seconds(), "convs/s")
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkSFTEncodeBatch is BenchmarkSFTEncode through EncodeBatch (all
// cores).
func BenchmarkSFTEncodeBatch(b *testing.B) {
	convs, _ := loadFixtures(b)
	convs = convs[:6] // same options for all
	tok := loadQwen3(b)
	enc, err := NewSFTEncoder(tok, SFTConfig{})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]Conversation, 0, 64*len(convs))
	for range 64 {
		batch = append(batch, convs...)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := enc.EncodeBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(batch)*b.N)/b.Elapsed().Seconds(), "convs/s")
}
