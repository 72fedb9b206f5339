package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDecodeInvalidUTF8MatchesHF decodes byte sequences that are not valid
// UTF-8 (each byte as its own byte-level token) and compares with Hugging
// Face tokenizers' decode (testdata/decode_cases.jsonl, made by
// testdata/hf_decode.js).
func TestDecodeInvalidUTF8MatchesHF(t *testing.T) {
	tok := qwen3(t)
	f, err := os.Open("testdata/decode_cases.jsonl")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var c struct {
			Bytes   []byte `json:"bytes"`
			IDs     []int  `json:"ids"`
			Decoded string `json:"decoded"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		for i, id := range c.IDs {
			b, ok := tok.TokenBytes(id)
			require.True(t, ok)
			require.Equal(t, []byte{c.Bytes[i]}, b)
		}
		assert.Equal(t, c.Decoded, tok.Decode(c.IDs), "bytes % x", c.Bytes)
		// The stream decoder must give the same text in pieces.
		sd := NewStreamDecoder(tok)
		var got strings.Builder
		for _, id := range c.IDs {
			s, err := sd.Next(id)
			require.NoError(t, err)
			got.WriteString(s)
		}
		got.WriteString(sd.Flush())
		assert.Equal(t, c.Decoded, got.String(), "stream, bytes % x", c.Bytes)
		n++
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 22, n)
}

// TestLossyUTF8 pins the U+FFFD rule by hand (Unicode 15 §3.9, "U+FFFD
// substitution of maximal subparts"; the worked example of Table 3-8 is the
// last case).
func TestLossyUTF8(t *testing.T) {
	cases := []struct {
		in   []byte
		want string
	}{
		{[]byte("plain"), "plain"},
		{[]byte{0xE4, 0xBD}, "\uFFFD"},                   // truncated 3-byte sequence: one maximal subpart
		{[]byte{0xE4, 0xBD, 'x'}, "\uFFFDx"},             // the same, cut by ASCII
		{[]byte{0xC0, 0xAF}, "\uFFFD\uFFFD"},             // C0 can never start a sequence
		{[]byte{0xED, 0xA0, 0x80}, "\uFFFD\uFFFD\uFFFD"}, // surrogate: ED needs 80..9F next
		{[]byte{0xF4, 0x90, 0x80}, "\uFFFD\uFFFD\uFFFD"}, // above U+10FFFF
		{[]byte{0xF0, 0x9F, 0x98}, "\uFFFD"},
		{[]byte{0x61, 0xF1, 0x80, 0x80, 0xE1, 0x80, 0xC2, 0x62, 0x80, 0x63, 0x80, 0xBF, 0x64},
			"a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd"}, // Unicode Table 3-8
	}
	for _, c := range cases {
		assert.Equal(t, c.want, string(appendLossyUTF8(nil, c.in)), "% x", c.in)
	}
}

func TestIncompleteTail(t *testing.T) {
	cases := []struct {
		in   []byte
		want int
	}{
		{nil, 0},
		{[]byte("abc"), 0},
		{[]byte{'a', 0xE4}, 1},
		{[]byte{'a', 0xE4, 0xBD}, 2},
		{[]byte{'a', 0xE4, 0xBD, 0xA0}, 0}, // complete 你
		{[]byte{0xF0, 0x9F, 0x98}, 3},
		{[]byte{0xF0, 0x8F}, 0}, // F0 needs 90..BF: never completes
		{[]byte{0xC0}, 0},       // invalid lead
		{[]byte{0x80}, 0},       // lone continuation
		{[]byte{0xED, 0xA0}, 0}, // would be a surrogate
		{[]byte{0xED, 0x9F}, 2},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, incompleteTail(c.in), "% x", c.in)
	}
}

func TestDecodeUnknownIDs(t *testing.T) {
	tok := qwen3(t)
	hello := tok.Encode("hello world")
	require.Equal(t, "hello world", tok.Decode(hello))
	for _, bad := range []int{-1, tok.VocabSize(), 1 << 40} {
		ids := append([]int{hello[0]}, bad)
		ids = append(ids, hello[1:]...)
		// Decode skips what names no token, as Hugging Face does.
		assert.Equal(t, "hello world", tok.Decode(ids))
		_, err := tok.DecodeChecked(ids)
		require.ErrorIs(t, err, ErrUnknownID)
		var ie *IDError
		require.ErrorAs(t, err, &ie)
		assert.Equal(t, IDError{Index: 1, ID: bad, Size: tok.VocabSize()}, *ie)
		sd := NewStreamDecoder(tok)
		_, err = sd.Next(bad)
		require.ErrorIs(t, err, ErrUnknownID)
	}
	s, err := tok.DecodeChecked(nil)
	require.NoError(t, err)
	assert.Equal(t, "", s)
}

// TestStreamDecoderSplitsRunes streams the ids of text whose characters
// are split across byte-level tokens and checks that no piece is invalid
// UTF-8 and the pieces add up to Decode.
func TestStreamDecoderSplitsRunes(t *testing.T) {
	tok := qwen3(t)
	for _, text := range []string{"你好，世界！😀👍🏽 👨‍👩‍👧‍👦", "ڪڪ हिन्दी ไทย", "<|im_start|>x\U0001F9EC\U0001FAE0 ⿰⿱<|im_end|>"} {
		ids := tok.Encode(text)
		sd := NewStreamDecoder(tok)
		var got strings.Builder
		split := false
		for _, id := range ids {
			b, _ := tok.TokenBytes(id)
			if !utf8.Valid(b) {
				split = true
			}
			s, err := sd.Next(id)
			require.NoError(t, err)
			require.True(t, utf8.ValidString(s))
			require.NotContains(t, s, "\uFFFD")
			got.WriteString(s)
		}
		assert.Equal(t, "", sd.Flush())
		assert.Equal(t, text, got.String())
		assert.True(t, split, "text %q should have tokens that split a character", text)
	}
}

// TestDecodeAddedTokensByteLevel: Hugging Face's ByteLevel decoder maps an
// added token's characters through the byte table too, so "é" (U+00E9,
// the byte-level spelling of byte 0xE9) decodes to a lone 0xE9 and thus
// U+FFFD, while a token with a character outside the table ("a b", the
// space) keeps its UTF-8 bytes. Expected values from tokenizers 0.22
// (node, @anush008/tokenizers) on tiny_llama3.json plus these two tokens.
func TestDecodeAddedTokensByteLevel(t *testing.T) {
	tok, err := mutate(t, func(m map[string]any) {
		m["added_tokens"] = append(m["added_tokens"].([]any),
			map[string]any{"id": 9999, "content": "zé", "special": false},
			map[string]any{"id": 9999, "content": "a b", "special": true})
	})
	require.NoError(t, err)
	ids := tok.Encode("xzé a b")
	require.Equal(t, []int{87, 3260, 220, 3261}, ids)
	assert.Equal(t, "xz\uFFFD a b", tok.Decode(ids))
}
