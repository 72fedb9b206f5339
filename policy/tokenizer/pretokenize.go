package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The split patterns this package recognises in tokenizer.json, verbatim.
// Go's regexp package cannot run them (it has no look-ahead for `\s+(?!\S)`),
// so each is executed by splitRule.next, a hand-written scanner whose
// agreement with a backtracking regex engine is checked by FuzzSplitRegexp2.
const (
	// PatternQwen2 is the Split regex of Qwen2, Qwen2.5 and Qwen3.
	PatternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternLlama3 is the Split regex of Llama 3 (digits in groups of up to three).
	PatternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternGPT2 is GPT-2's pattern, used by the ByteLevel pre-tokenizer when
	// use_regex is true (and sometimes spelled out as a Split).
	PatternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// splitRule is one of the recognised patterns, described by the few ways in
// which the three differ.
type splitRule struct {
	// foldContractions: (?i:'s|'t|...) rather than case-sensitive 's|'t|...
	foldContractions bool
	// anyLetterPrefix: [^\r\n\p{L}\p{N}]?\p{L}+ rather than ` ?\p{L}+`.
	anyLetterPrefix bool
	// spaceDigits: ` ?\p{N}+` (GPT-2) rather than bare \p{N}{1,maxDigits}.
	spaceDigits bool
	// maxDigits bounds a digit run; 0 means unbounded.
	maxDigits int
	// newlines: the symbol alternative ends in [\r\n]* and there is a
	// `\s*[\r\n]+` alternative.
	newlines bool
}

var (
	ruleQwen2  = splitRule{foldContractions: true, anyLetterPrefix: true, maxDigits: 1, newlines: true}
	ruleLlama3 = splitRule{foldContractions: true, anyLetterPrefix: true, maxDigits: 3, newlines: true}
	ruleGPT2   = splitRule{spaceDigits: true}
)

// ruleForPattern recognises a Split regex.
func ruleForPattern(p string) (splitRule, bool) {
	switch p {
	case PatternQwen2:
		return ruleQwen2, true
	case PatternLlama3:
		return ruleLlama3, true
	case PatternGPT2:
		return ruleGPT2, true
	}
	return splitRule{}, false
}

// Character classes of the patterns. A byte that is not valid UTF-8 counts as
// a symbol (it decodes to U+FFFD, category So).
const (
	clsOther   = iota // none of the below: [^\s\p{L}\p{N}]
	clsLetter         // \p{L}
	clsNumber         // \p{N}
	clsSpace          // \s other than \r and \n
	clsNewline        // \r or \n
)

// asciiClass classifies the ASCII bytes once.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		t[c] = classOf(rune(c))
	}
	return t
}()

func classOf(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return clsNewline
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case isSpace(r):
		return clsSpace
	}
	return clsOther
}

// isSpace is the regex class \s: the Unicode White_Space property, which is
// what Oniguruma (Hugging Face's regex engine) and regexp2 both use.
func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || (r >= '\t' && r <= '\r')
	}
	return unicode.Is(unicode.White_Space, r)
}

// runeAt decodes the rune at s[i] and its class.
func runeAt(s string, i int) (r rune, size int, cls uint8) {
	c := s[i]
	if c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, size = utf8.DecodeRuneInString(s[i:])
	return r, size, classOf(r)
}

// next returns the end of the match that starts at i (i < len(s)). Every
// position starts a match with these patterns (some alternative accepts any
// character), so splitting never leaves a gap.
func (sr splitRule) next(s string, i int) int {
	r, size, cls := runeAt(s, i)
	j := i + size

	// Alternative 1: contractions.
	if r == '\'' && j < len(s) {
		if e := sr.contraction(s, j); e > 0 {
			return e
		}
	}

	// Alternative 2: letters, with an optional one-character prefix.
	if cls == clsLetter {
		return run(s, j, clsLetter, -1)
	}
	prefixOK := r == ' '
	if sr.anyLetterPrefix {
		prefixOK = cls == clsOther || cls == clsSpace
	}
	if prefixOK && j < len(s) {
		if _, size2, cls2 := runeAt(s, j); cls2 == clsLetter {
			return run(s, j+size2, clsLetter, -1)
		}
	}

	// Alternative 3: digits.
	if cls == clsNumber {
		if sr.maxDigits == 0 {
			return run(s, j, clsNumber, -1)
		}
		return run(s, j, clsNumber, sr.maxDigits-1)
	}
	if sr.spaceDigits && r == ' ' && j < len(s) {
		if _, size2, cls2 := runeAt(s, j); cls2 == clsNumber {
			return run(s, j+size2, clsNumber, -1)
		}
	}

	// Alternative 4: ` ?[^\s\p{L}\p{N}]+`, then [\r\n]* where the pattern has it.
	end := -1
	if cls == clsOther {
		end = run(s, j, clsOther, -1)
	} else if r == ' ' && j < len(s) {
		if _, size2, cls2 := runeAt(s, j); cls2 == clsOther {
			end = run(s, j+size2, clsOther, -1)
		}
	}
	if end >= 0 {
		if sr.newlines {
			for end < len(s) && (s[end] == '\r' || s[end] == '\n') {
				end++
			}
		}
		return end
	}

	// What is left starts with white space. Find the maximal run, and the
	// end of its last \r or \n.
	wsEnd, lastNL := j, -1
	if cls == clsNewline {
		lastNL = j
	}
	for wsEnd < len(s) {
		_, size2, cls2 := runeAt(s, wsEnd)
		if cls2 != clsSpace && cls2 != clsNewline {
			break
		}
		wsEnd += size2
		if cls2 == clsNewline {
			lastNL = wsEnd
		}
	}
	// Alternative 5: \s*[\r\n]+ ends just after the run's last newline.
	if sr.newlines && lastNL >= 0 {
		return lastNL
	}
	// Alternative 6: \s+(?!\S) takes the whole run at the end of the text,
	// else all of it but the last character (when that leaves one).
	if wsEnd == len(s) {
		return wsEnd
	}
	_, lastStart := lastRune(s[:wsEnd])
	if lastStart > i {
		return lastStart
	}
	// Alternative 7: \s+ (a single white-space character before a non-space).
	return wsEnd
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d after the apostrophe (s[j:]),
// ASCII-case-insensitively when the rule folds case, and returns the end or 0.
func (sr splitRule) contraction(s string, j int) int {
	lower := func(c byte) byte {
		if sr.foldContractions && c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	// Oniguruma, Hugging Face's regex engine, folds case by Unicode rules:
	// U+017F LATIN SMALL LETTER LONG S folds to 's', so (?i:'s) matches "'ſ".
	// No other character folds to a single s, t, r, e, v, m, l or d.
	if sr.foldContractions && strings.HasPrefix(s[j:], "ſ") {
		return j + len("ſ")
	}
	switch lower(s[j]) {
	case 's', 't', 'm', 'd':
		return j + 1
	case 'r', 'v':
		if j+1 < len(s) && lower(s[j+1]) == 'e' {
			return j + 2
		}
	case 'l':
		if j+1 < len(s) && lower(s[j+1]) == 'l' {
			return j + 2
		}
	}
	return 0
}

// run extends a match from j over characters of class cls, taking at most
// limit more of them; a negative limit means no limit.
func run(s string, j int, cls uint8, limit int) int {
	for n := 0; j < len(s) && n != limit; n++ {
		_, size, c := runeAt(s, j)
		if c != cls {
			break
		}
		j += size
	}
	return j
}

// lastRune returns the last rune of s and where it starts.
func lastRune(s string) (rune, int) {
	r, size := utf8.DecodeLastRuneInString(s)
	return r, len(s) - size
}

// split calls emit for every piece of s, in order.
func (sr splitRule) split(s string, emit func(piece string)) {
	for i := 0; i < len(s); {
		j := sr.next(s, i)
		emit(s[i:j])
		i = j
	}
}
