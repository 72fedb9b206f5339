package reward

import (
	"regexp"
	"strings"
	"unicode"
)

// Extraction methods reported by ExtractAnswer.
const (
	ExtractBoxed    = "boxed"     // the last \boxed{…} or \fbox{…}
	ExtractPhrase   = "phrase"    // "the answer is X", "Answer: X"
	ExtractBold     = "bold"      // "**X**" on the final line
	ExtractMath     = "last-math" // the last $…$, \(…\) or \[…\] span of the final paragraph
	ExtractNumber   = "last-num"  // the last number of the final paragraph
	maxExtractInput = 1 << 20
	// maxBoxGroup bounds the boxes joined into one answer list.
	maxBoxGroup = 64
)

var (
	phraseRe = regexp.MustCompile(`(?i)(?:final answer|the answer|answer)\s*(?:is|:|=)\s*:?\s*([^\n]+)`)
	boldRe   = regexp.MustCompile(`\*\*([^*\n]+)\*\*`)
	// Display math may span lines; inline math may not. \$ inside math is
	// an escaped dollar, not a delimiter.
	mathRe = regexp.MustCompile(`\$\$((?:\\\$|[^$])+)\$\$|\$((?:\\\$|[^$\n])+)\$|\\\(([^\n]+?)\\\)|(?s:\\\[(.+?)\\\])`)
	// A number, fraction or \frac not glued to a preceding letter
	// ("AZYUK2A" holds no answer); units may follow ("1,000.99m²").
	numberRe = regexp.MustCompile(`(?:^|[^A-Za-z0-9.])(-?\\frac\{[^{}]*\}\{[^{}]*\}|-?\d{1,3}(?:[ ,]\d{3})+(?:\.\d+)?|-?\d*\.?\d+(?:/\d+)?)`)
)

// ExtractAnswer finds the final answer in a response. It tries, in order:
// the last \boxed{…} or \fbox{…} with balanced braces (answers boxed side
// by side, "\boxed{2} and \boxed{3}", are joined with commas); the last
// "final answer is X", "the answer is X" or "Answer: X"; the last **X** on
// the final line. With fallbacks set it then tries the last math span of
// the final paragraph and its last number (or \frac), whichever ends it. Text after the last </think> is
// searched first. It returns the answer, the method (Extract* constants)
// and whether one was found.
func ExtractAnswer(response string, fallbacks bool) (answer, method string, ok bool) {
	if len(response) > maxExtractInput {
		response = response[len(response)-maxExtractInput:]
	}
	if i := strings.LastIndex(response, "</think>"); i >= 0 {
		if a, m, ok := extract(response[i+len("</think>"):], fallbacks); ok {
			return a, m, true
		}
	}
	return extract(response, fallbacks)
}

func extract(s string, fallbacks bool) (string, string, bool) {
	a, ok, cut := boxedAnswer(s)
	if ok {
		return a, ExtractBoxed, true
	}
	if cut {
		// The response ends inside an unclosed \boxed{: it was truncated
		// while writing the answer, and nothing else stands for it.
		return "", "", false
	}
	if m := phraseRe.FindAllStringSubmatch(s, -1); len(m) > 0 {
		if a := cleanPhrase(m[len(m)-1][1]); a != "" {
			return a, ExtractPhrase, true
		}
	}
	last := lastLine(s)
	para := lastParagraph(s)
	if m := boldRe.FindAllStringSubmatch(last, -1); len(m) > 0 {
		if a := cleanAnswer(m[len(m)-1][1]); a != "" {
			return a, ExtractBold, true
		}
	}
	if !fallbacks {
		return "", "", false
	}
	// The later of the last math span and the last number of the final
	// paragraph: the answer is what the response ends with.
	mathAns, mathEnd := "", -1
	if m := mathRe.FindAllStringSubmatchIndex(para, -1); len(m) > 0 {
		g := m[len(m)-1]
		for k := 2; k+1 < len(g); k += 2 {
			if g[k] >= 0 {
				if a := cleanAnswer(para[g[k]:g[k+1]]); a != "" {
					mathAns, mathEnd = a, g[1]
				}
				break
			}
		}
	}
	numAns, numStart := "", -1
	if m := numberRe.FindAllStringSubmatchIndex(para, -1); len(m) > 0 {
		g := m[len(m)-1]
		numAns, numStart = strings.TrimSpace(para[g[2]:g[3]]), g[2]
	}
	switch {
	case numStart >= mathEnd && numAns != "":
		return numAns, ExtractNumber, true
	case mathAns != "":
		return mathAns, ExtractMath, true
	}
	return "", "", false
}

// lastParagraph returns the text after the last blank line.
func lastParagraph(s string) string {
	s = strings.TrimRightFunc(s, unicode.IsSpace)
	if i := strings.LastIndex(s, "\n\n"); i >= 0 {
		return s[i+2:]
	}
	return s
}

func lastLine(s string) string {
	s = strings.TrimRightFunc(s, unicode.IsSpace)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// boxSpan is one \boxed{…} occurrence: content and byte span in the text.
type boxSpan struct {
	content    string
	start, end int
}

// lastBoxed returns the content of the last well-formed \boxed{…} or
// \fbox{…}, joined with the boxes just before it when only separators
// (commas, "and", "or", spaces, dollar signs) lie between them.
func lastBoxed(s string) (string, bool) {
	a, ok, _ := boxedAnswer(s)
	return a, ok
}

// boxedAnswer is lastBoxed that also reports cut: an unclosed \boxed{
// follows the last complete box (or there is no complete box).
func boxedAnswer(s string) (answer string, ok, cut bool) {
	var boxes []boxSpan
	lastOpen := -1
	var match map[int]int // lazily built: brace index → matching close index
	// nextB and nextF cache the next occurrence of each command (absolute
	// index, -1 for none), so that the scan stays linear.
	nextB, nextF := -2, -2
	find := func(cache *int, cmd string, from int) int {
		if *cache == -1 || (*cache >= from) {
			return *cache
		}
		j := strings.Index(s[from:], cmd)
		if j < 0 {
			*cache = -1
		} else {
			*cache = from + j
		}
		return *cache
	}
	for i := 0; i < len(s); {
		j := find(&nextB, `\boxed`, i)
		k := find(&nextF, `\fbox`, i)
		if j < 0 && k < 0 {
			break
		}
		cmdLen := len(`\boxed`)
		if j < 0 || (k >= 0 && k < j) {
			j, cmdLen = k, len(`\fbox`)
		}
		start := j
		if match == nil {
			match = matchBraces(s)
		}
		b, ok := readBoxedMatched(s, start, start+cmdLen, match)
		if ok {
			boxes = append(boxes, b)
			i = b.end
		} else {
			if start+cmdLen < len(s) && s[start+cmdLen] == '{' {
				lastOpen = start
			}
			i = start + cmdLen
		}
	}
	if len(boxes) == 0 {
		return "", false, lastOpen >= 0
	}
	if lastOpen > boxes[len(boxes)-1].start {
		return "", false, true
	}
	// Walk back over the boxes separated only by commas and "and"; a run
	// longer than maxBoxGroup is no answer list but repetition, and its
	// last box stands alone (this also keeps 100k boxes linear).
	last := len(boxes) - 1
	first := last
	for first > 0 && last-first < maxBoxGroup && isBoxSeparator(s[boxes[first-1].end:boxes[first].start]) {
		first--
	}
	if last-first >= maxBoxGroup {
		first = last
	}
	group := make([]string, 0, last-first+1)
	for _, b := range boxes[first:] {
		group = append(group, cleanAnswer(b.content))
	}
	ans := strings.Join(group, ", ")
	return ans, strings.TrimSpace(ans) != "", false
}

// matchBraces pairs every unescaped '{' with its closing '}' in one pass;
// unclosed braces are absent from the map.
func matchBraces(s string) map[int]int {
	m := map[int]int{}
	var stack []int
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			stack = append(stack, i)
		case '}':
			if len(stack) > 0 {
				m[stack[len(stack)-1]] = i
				stack = stack[:len(stack)-1]
			}
		}
	}
	return m
}

func readBoxedMatched(s string, start, at int, match map[int]int) (boxSpan, bool) {
	if at < len(s) && s[at] == '{' {
		end, ok := match[at]
		if !ok {
			return boxSpan{}, false // unbalanced: the response was cut off
		}
		return boxSpan{content: s[at+1 : end], start: start, end: end + 1}, true
	}
	return readBoxed(s, start, at)
}

func isBoxSeparator(s string) bool {
	t := strings.ToLower(s)
	for _, cut := range []string{"$", ",", "and", "or", `\quad`, `\text{`, "}", `\(`, `\)`, ";", `\,`} {
		t = strings.ReplaceAll(t, cut, "")
	}
	return strings.TrimSpace(t) == "" && len(s) < 40
}

// readBoxed reads the argument of a \boxed at s[at:] (after the command
// name): a balanced {…} group, or "\boxed 5" up to the next space or $.
func readBoxed(s string, start, at int) (boxSpan, bool) {
	i := at
	if i < len(s) && isLetterByte(s[i]) {
		return boxSpan{}, false // \boxedfoo is another command
	}
	if i < len(s) && s[i] == ' ' {
		j := i + 1
		for j < len(s) && s[j] != ' ' && s[j] != '$' && s[j] != '\n' {
			j++
		}
		if j == i+1 {
			return boxSpan{}, false
		}
		return boxSpan{content: s[i+1 : j], start: start, end: j}, true
	}
	if i >= len(s) || s[i] != '{' {
		return boxSpan{}, false
	}
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++ // \{ and \} do not count
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return boxSpan{content: s[i+1 : j], start: start, end: j + 1}, true
			}
		}
	}
	return boxSpan{}, false // unbalanced: the response was cut off
}

func isLetterByte(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// cleanPhrase trims "the answer is X." to X: it drops a trailing sentence
// and the decorations of cleanAnswer.
func cleanPhrase(s string) string {
	// "**Answer:** 18": the bold marker closes after the colon.
	s = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(s), "*"))
	if a, ok := lastBoxed(s); ok {
		return a
	}
	// A leading math span is the answer: "$\frac{1}{4}$. I hope it is correct."
	for _, d := range [][2]string{{"$$", "$$"}, {"$", "$"}, {`\(`, `\)`}, {`\[`, `\]`}} {
		if strings.HasPrefix(s, d[0]) {
			if j := strings.Index(s[len(d[0]):], d[1]); j >= 0 {
				return cleanAnswer(s[len(d[0]) : len(d[0])+j])
			}
		}
	}
	// Otherwise cut at the end of the sentence: ". " followed by more words.
	if i := strings.Index(s, ". "); i > 0 {
		s = s[:i]
	}
	// "Final Answer: The final answer is X", "Answer: the volume is X".
	if i := strings.LastIndex(s, " is "); i >= 0 {
		return cleanPhrase(s[i+len(" is "):])
	}
	return cleanAnswer(s)
}

// cleanAnswer strips math delimiters, bold markers, \displaystyle, a
// leading "=" and trailing punctuation.
func cleanAnswer(s string) string {
	s = strings.TrimSpace(s)
	for {
		before := s
		for _, p := range [][2]string{{"$$", "$$"}, {"$", "$"}, {`\(`, `\)`}, {`\[`, `\]`}, {"**", "**"}, {"*", "*"}} {
			if strings.HasPrefix(s, p[0]) && strings.HasSuffix(s, p[1]) && len(s) >= len(p[0])+len(p[1]) {
				s = strings.TrimSpace(s[len(p[0]) : len(s)-len(p[1])])
			}
		}
		s = strings.TrimSpace(strings.TrimPrefix(s, `\displaystyle`))
		s = strings.TrimRight(s, " .;:")
		// An unpaired bold marker: "**Answer: 18**" leaves "18**".
		if strings.HasSuffix(s, "**") && !strings.Contains(s[:len(s)-2], "**") {
			s = strings.TrimSpace(s[:len(s)-2])
		}
		s = strings.TrimSpace(strings.TrimPrefix(s, "="))
		s = strings.Trim(s, "$")
		if s == before {
			return s
		}
	}
}

// choiceLetter reads a multiple-choice answer: "C", "(C)", "C)", "C.",
// "\text{(C)}", "Option C", "C: 42". It returns 0 when s is not one.
func choiceLetter(s string) byte {
	t := strings.TrimSpace(s)
	for _, cut := range []string{`\text{`, `\textbf{`, `\mathrm{`, "{", "}", "**", "$"} {
		t = strings.ReplaceAll(t, cut, "")
	}
	t = strings.TrimSpace(t)
	lower := strings.ToLower(t)
	for _, prefix := range []string{"option ", "choice ", "answer "} {
		if strings.HasPrefix(lower, prefix) {
			t = strings.TrimSpace(t[len(prefix):])
			break
		}
	}
	t = strings.TrimPrefix(t, "(")
	if t == "" {
		return 0
	}
	c := t[0]
	if c < 'A' || c > 'J' {
		return 0
	}
	rest := strings.TrimSpace(t[1:])
	if rest == "" || rest[0] == ')' || rest[0] == '.' || rest[0] == ':' {
		return c
	}
	return 0
}
