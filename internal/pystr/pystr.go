// Package pystr holds Python's str predicates that Go's unicode package
// answers differently, for code that must treat text as a Python
// reference implementation does.
package pystr

// IsSpace reports whether Python's str.isspace() is true of r: the
// characters of bidirectional class WS, B or S, or category Zs — ASCII
// white space, U+001C–U+001F, U+0085, U+00A0, U+1680, U+2000–U+200A,
// U+2028, U+2029, U+202F, U+205F and U+3000. It is the set str.split()
// and str.strip() split and strip on. Go's unicode.IsSpace leaves out
// U+001C–U+001F.
func IsSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}
