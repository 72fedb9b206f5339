package pyjson

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The wants were printed by CPython 3.11's json.dumps(s, ensure_ascii=False)
// for each input (python3 -c 'import json; print(json.dumps(s,
// ensure_ascii=False))'), then written here as Go literals.
func TestQuote(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", `""`},
		{"plain", "plain", `"plain"`},
		{"quote and backslash", `quote " and back\slash`, `"quote \" and back\\slash"`},
		{"named controls", "nl\ncr\rtab\tbs\bff\f", `"nl\ncr\rtab\tbs\bff\f"`},
		{"other controls, DEL kept", "\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f" + `"`},
		{"non-ASCII kept", "é ü 中文 😀", `"é ü 中文 😀"`},
		{"line separators kept", "\u2028\u2029", "\"\u2028\u2029\""},
		{"HTML kept", `<a href="x">&amp;</a>`, `"<a href=\"x\">&amp;</a>"`},
		{"search result", "Doc 1 (Title: \"Evan Morris\")\nEvan L. Morris", `"Doc 1 (Title: \"Evan Morris\")\nEvan L. Morris"`},
		{"invalid UTF-8 becomes U+FFFD", "a\xffb", `"a` + "\uFFFD" + `b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Quote(tt.in))
			assert.Equal(t, "x"+tt.want, string(AppendQuote([]byte("x"), tt.in)))
		})
	}
}
