package tokenizer

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"
)

var fuzzSeeds = []string{
	"hello world", "I'm 12345 ok\r\n\r\n", "<|im_start|>user\nhi<|im_end|>", "你好😀 e\u0301",
	"\xff\xfe bad \xe4\xbd", "  \t\u3000x", "<|im_end|>\u0301", "a<think>b</think>c",
}

// FuzzEncodeDecode: Encode never panics, gives ids of real tokens, and
// Decode(Encode(s)) gives back s up to NFC normalization (the Qwen3
// tokenizer normalizes with NFC, so that is all it may change) for valid
// UTF-8, and valid UTF-8 for any input.
func FuzzEncodeDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	tok := qwen3(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		for _, id := range ids {
			_, ok := tok.TokenBytes(id)
			require.True(t, ok, "id %d", id)
		}
		out, err := tok.DecodeChecked(ids)
		require.NoError(t, err)
		require.True(t, utf8.ValidString(out))
		if utf8.ValidString(s) {
			require.Equal(t, norm.NFC.String(s), norm.NFC.String(out))
			if norm.NFC.IsNormalString(s) {
				require.Equal(t, s, out)
			}
		}
		// The two merge loops agree on every word.
		for _, step := range tok.steps[:1] {
			step.rule.split(s, func(w string) {
				if len(w) <= naiveLimit {
					var buf [naiveLimit]int32
					require.Equal(t, tok.model.mergeNaive(buf[:0], w), tok.model.mergeHeap(w), "word %q", w)
				}
			})
		}
	})
}

// FuzzDecode: any id sequence decodes to valid UTF-8 without panicking,
// and the stream decoder agrees with Decode.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xa0, 0x00, 0x00, 0x00})
	tok := qwen3(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		ids := make([]int, 0, len(b)/3)
		for i := 0; i+2 < len(b); i += 3 {
			ids = append(ids, int(b[i])|int(b[i+1])<<8|int(b[i+2]&0x7)<<16) // 0 .. 2^19-1
		}
		out := tok.Decode(ids)
		require.True(t, utf8.ValidString(out))
		sd := NewStreamDecoder(tok)
		var got []byte
		for _, id := range ids {
			s, err := sd.Next(id)
			if err != nil {
				require.ErrorIs(t, err, ErrUnknownID)
				continue
			}
			require.True(t, utf8.ValidString(s))
			got = append(got, s...)
		}
		got = append(got, sd.Flush()...)
		require.Equal(t, out, string(got))
	})
}

// FuzzBytesRoundTrip: the byte tokenizer gives back its input exactly
// (after U+FFFD repair of invalid UTF-8).
func FuzzBytesRoundTrip(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	tok := newTestBytes(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		require.Equal(t, string(appendLossyUTF8(nil, []byte(s))), tok.Decode(ids))
	})
}

// FuzzParse: tokenizer.json parsing fails cleanly on corrupt input.
func FuzzParse(f *testing.F) {
	data, err := os.ReadFile("testdata/tiny_gpt2.json")
	require.NoError(f, err)
	f.Add(data)
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"}}`))
	f.Add([]byte(`{"model":{"vocab":{"a":0},"merges":[["a"]]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := Parse(b)
		if err != nil {
			return
		}
		ids := tok.Encode("hello <|endoftext|> world")
		_ = tok.Decode(ids)
	})
}

// FuzzOrderedJSON: tool schemas and arguments survive decodeOrdered and
// tojson with their values (checked by encoding/json) and key order
// (tojson is a fixed point after one round).
func FuzzOrderedJSON(f *testing.F) {
	for _, s := range []string{`{"b": 1, "a": [1.5, "x", null, true]}`, `{"z": {"y": {}}, "é": "\u2028<>&"}`, `[1e100, -0.0, 12345678901234]`, `"s"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeOrdered(b)
		var want any
		if json.Unmarshal(b, &want) != nil {
			return // invalid JSON: decodeOrdered may reject it too
		}
		if err != nil {
			return // integers beyond int64 are refused
		}
		out1 := tojson(t, v)
		var got any
		require.NoError(t, json.Unmarshal([]byte(out1), &got), out1)
		require.Equal(t, want, got)
		v2, err := decodeOrdered([]byte(out1))
		require.NoError(t, err)
		require.Equal(t, out1, tojson(t, v2))
	})
}

// FuzzChatTemplate: any template source compiles or fails with an error,
// and renders or fails with an error, never a panic; lstripBlocks keeps a
// source without block or comment tags unchanged.
func FuzzChatTemplate(f *testing.F) {
	for _, s := range []string{
		"{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
		"  {% if x %}\n{{ y | tojson(indent=2) }}{%- endif -%}  {# c #}",
		"{{ '%}' }} {% raw %}{{{% endraw %}", "{% set ns = namespace(a=1) %}{{ ns.a }}", "{{", "{%",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if !strings.Contains(src, "{%") && !strings.Contains(src, "{#") {
			require.Equal(t, src, lstripBlocks(src))
		}
		ct, err := NewChatTemplate(src, nil)
		if err != nil {
			return
		}
		_, _ = ct.Render([]Message{{Role: "user", Content: "hi"}}, nil, ChatOptions{Vars: map[string]any{"x": true, "y": []any{1, "a"}}})
	})
}
