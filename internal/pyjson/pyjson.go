// Package pyjson writes JSON strings byte for byte as Python's json.dumps
// does with ensure_ascii=False, for text that Python peers (verl, SkyRL,
// Search-R1) build with json.dumps and hand to a model: a model trained on
// their text sees the same bytes from ours.
//
// Go's encoding/json differs from Python's there: it escapes U+2028 and
// U+2029 always, and '<', '>' and '&' unless told not to; Python escapes
// neither.
package pyjson

// Quote returns s as a JSON string literal the way Python's
// json.dumps(s, ensure_ascii=False) writes it: '"' and '\\' are escaped,
// so are the control characters below U+0020 (\n, \r, \t, \b and \f by
// name, the others as \u00XX with lower-case hex); every other character,
// non-ASCII, U+007F, U+2028 and U+2029 included, is written as it is.
// Bytes of s that are not valid UTF-8 are written as U+FFFD (a Python str
// holds no such bytes).
func Quote(s string) string {
	return string(AppendQuote(make([]byte, 0, len(s)+2), s))
}

// AppendQuote appends Quote(s) to dst and returns the extended slice.
func AppendQuote(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, r := range s {
		switch r {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			if r < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xF])
			} else {
				dst = append(dst, string(r)...)
			}
		}
	}
	return append(dst, '"')
}
