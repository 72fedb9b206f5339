package tokenizer

import "unicode/utf8"

// byteToRune is GPT-2's bytes_to_unicode table (openai/gpt-2 encoder.py,
// reused by Hugging Face tokenizers' ByteLevel pre-tokenizer): printable
// Latin-1 bytes map to themselves, the other 68 bytes to U+0100 onwards, so
// that every byte becomes one printable rune in tokenizer.json's vocabulary.
var byteToRune = func() (t [256]rune) {
	n := rune(0)
	for b := 0; b < 256; b++ {
		switch {
		case b >= '!' && b <= '~', b >= 0xA1 && b <= 0xAC, b >= 0xAE && b <= 0xFF:
			t[b] = rune(b)
		default:
			t[b] = 256 + n
			n++
		}
	}
	return t
}()

// runeToByte inverts byteToRune; runes outside the table map to -1. The table
// covers U+0000..U+0143, the largest rune byteToRune produces.
var runeToByte = func() (t [0x144]int16) {
	for i := range t {
		t[i] = -1
	}
	for b, r := range byteToRune {
		t[r] = int16(b)
	}
	return t
}()

// byteLevelDecode turns a vocabulary token into the bytes it stands for, the
// way Hugging Face's ByteLevel decoder does: every rune is mapped back through
// the byte table, and a token holding any rune outside the table (an added
// token such as "<|im end|>" with a space, say) contributes its raw UTF-8 bytes.
// ok reports whether the token was fully byte-level.
func byteLevelDecode(token string) (b []byte, ok bool) {
	out := make([]byte, 0, len(token))
	for _, r := range token {
		if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] < 0 {
			return []byte(token), false
		}
		out = append(out, byte(runeToByte[r]))
	}
	return out, true
}

// appendLossyUTF8 appends b to dst, replacing every maximal ill-formed
// subsequence with U+FFFD exactly as Rust's String::from_utf8_lossy does
// (which Hugging Face's ByteLevel decoder calls on the joined token bytes).
// This follows the Unicode "maximal subpart" practice (Unicode 15, §3.9,
// U+FFFD substitution): a truncated but so-far valid sequence such as
// E4 BD becomes one U+FFFD, not two as a byte-at-a-time loop would give.
func appendLossyUTF8(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			dst = append(dst, b[i:i+size]...)
			i += size
			continue
		}
		dst = append(dst, "\uFFFD"...)
		i += maximalSubpart(b[i:])
	}
	return dst
}

// maximalSubpart returns the length (at least 1) of the longest prefix of b
// that is a prefix of some well-formed UTF-8 sequence, for b starting with an
// ill-formed sequence. Table 3-7 of the Unicode standard gives the second-byte
// ranges that depend on the lead byte.
func maximalSubpart(b []byte) int {
	need, lo, hi := leadInfo(b[0])
	if need == 0 {
		return 1
	}
	n := 1
	for k := 1; k <= need && k < len(b); k++ {
		c := b[k]
		l, h := byte(0x80), byte(0xBF)
		if k == 1 {
			l, h = lo, hi
		}
		if c < l || c > h {
			break
		}
		n++
	}
	return n
}

// leadInfo returns how many continuation bytes a lead byte needs and the
// allowed range of the first of them; need 0 marks a byte that can never
// start a sequence.
func leadInfo(c byte) (need int, lo, hi byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 1, 0x80, 0xBF
	case c == 0xE0:
		return 2, 0xA0, 0xBF
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		return 2, 0x80, 0xBF
	case c == 0xED:
		return 2, 0x80, 0x9F
	case c == 0xF0:
		return 3, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		return 3, 0x80, 0xBF
	case c == 0xF4:
		return 3, 0x80, 0x8F
	}
	return 0, 0, 0
}

// incompleteTail returns how many bytes at the end of b form a valid but
// unfinished UTF-8 sequence (0 when b ends on a rune boundary or with bytes
// that can never complete). Streaming decoders hold such bytes back.
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 {
			need, lo, hi := leadInfo(c)
			if need < k { // the lead's sequence is complete or cannot apply
				return 0
			}
			tail := b[len(b)-k:]
			if k >= 2 && (tail[1] < lo || tail[1] > hi) {
				return 0
			}
			for _, t := range tail[min(2, len(tail)):] {
				if t < 0x80 || t > 0xBF {
					return 0
				}
			}
			return k
		}
	}
	return 0
}
