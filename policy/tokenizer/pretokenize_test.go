package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"github.com/stretchr/testify/require"
)

// regexpSplit splits s with a backtracking regex engine (regexp2, .NET
// semantics, which has the look-ahead Go's regexp lacks): the reference the
// hand-written scanner must agree with.
func regexpSplit(t testing.TB, re *regexp2.Regexp, s string) []string {
	t.Helper()
	var out []string
	m, err := re.FindStringMatch(s)
	require.NoError(t, err)
	end := 0 // in runes
	runes := []rune(s)
	for m != nil {
		if m.Index > end { // a gap the pattern did not match (Isolated keeps it)
			out = append(out, string(runes[end:m.Index]))
		}
		out = append(out, m.String())
		end = m.Index + m.Length
		m, err = re.FindNextMatch(m)
		require.NoError(t, err)
	}
	if end < len(runes) {
		out = append(out, string(runes[end:]))
	}
	return out
}

// referencePattern adapts a pattern for regexp2, whose (?i) folds case
// with simple lower-casing where Oniguruma (Hugging Face's engine) uses
// Unicode case folding: the only difference that matters here is that
// U+017F (ſ) folds to 's' (checked against Hugging Face in
// testdata/edge_cases.jsonl).
func referencePattern(p string) string {
	return strings.Replace(p, "(?i:'s|", "(?i:'[sſ]|", 1)
}

func scannerSplit(rule splitRule, s string) []string {
	var out []string
	rule.split(s, func(p string) { out = append(out, p) })
	return out
}

var splitRules = []struct {
	name    string
	pattern string
	rule    splitRule
}{
	{"qwen2", PatternQwen2, ruleQwen2},
	{"llama3", PatternLlama3, ruleLlama3},
	{"gpt2", PatternGPT2, ruleGPT2},
}

// palette maps fuzz bytes onto characters of every class the patterns
// distinguish, so that random inputs hit the interesting alternations.
var palette = []rune{
	'a', 'Z', 's', 'S', 't', 'r', 'e', 'v', 'm', 'l', 'L', 'd', 'é', '你', 'ſ', 'K', // letters
	'0', '7', '١', 'Ⅳ', '²', // numbers
	' ', ' ', ' ', '\t', '\v', '\f', '\u3000', '\u00a0', '\u2028', '\u0085', '\u2009', // white space
	'\r', '\n', '\n', // newlines
	'\'', '\'', '.', '!', '(', '😀', '\u0301', '\u200b', '_', '\uFFFD', // others
}

func paletteString(b []byte) string {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = palette[int(c)%len(palette)]
	}
	return string(rs)
}

func TestSplitRulesMatchRegexp2(t *testing.T) {
	cases := []string{
		"", " ", "  ", "a", "'s", "'S", "'RE", "'re", "'r", "'ll", "'l", " 's", "x's",
		"hello world", "  hello", "hello  ", "a\n\nb", "a \n \n b", "\r\n", " \r\n x",
		"12345", " 12345", "a1b22c333d4444", "...!!!\n\n", " ...\r\n", "(x)", "\t\tfoo",
		"\u3000x", "x\u3000", "a\u0301", "😀😀 😀", "'ſ", "'ſa", "'ﬆa", "don't", "I'M", "\u00a0\u00a0x",
	}
	for _, sr := range splitRules {
		re := regexp2.MustCompile(referencePattern(sr.pattern), regexp2.None)
		for _, c := range cases {
			require.Equal(t, regexpSplit(t, re, c), scannerSplit(sr.rule, c), "%s: %q", sr.name, c)
		}
	}
}

// FuzzSplitRegexp2 compares the scanner with regexp2 on random Unicode text
// (both valid UTF-8 as given and palette-mapped bytes).
func FuzzSplitRegexp2(f *testing.F) {
	for _, s := range []string{"hello world", "'s 'RE\n\n  x", "12 3456 ١٢", " \t\r\n ", "😀 a\u0301"} {
		f.Add([]byte(s))
	}
	res := make([]*regexp2.Regexp, len(splitRules))
	for i, sr := range splitRules {
		res[i] = regexp2.MustCompile(referencePattern(sr.pattern), regexp2.None)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// regexp2 backtracks \s*[\r\n]+ in cubic time on long white-space
		// runs (the scanner is linear, see TestEncodeLargeInputs): keep the
		// reference fast.
		if len(b) > 256 {
			b = b[:256]
		}
		inputs := []string{paletteString(b)}
		if utf8.Valid(b) {
			inputs = append(inputs, string(b))
		}
		for i, sr := range splitRules {
			for _, s := range inputs {
				want := regexpSplit(t, res[i], s)
				got := scannerSplit(sr.rule, s)
				if len(want) == 0 {
					want = nil
				}
				require.Equal(t, want, got, "%s: %q", sr.name, s)
			}
		}
	})
}

// pieces runs only the pre-tokenizer steps of tok on s and returns the
// pieces in the byte-level alphabet, like Hugging Face's
// pre_tokenizer.pre_tokenize_str.
func pieces(tok *BPE, s string) []string {
	var out []string
	var run func(piece string, k int)
	run = func(piece string, k int) {
		if piece == "" {
			return
		}
		st := tok.steps[k]
		if st.split {
			st.rule.split(piece, func(p string) { run(p, k+1) })
			return
		}
		if st.addPrefixSpace && piece[0] != ' ' {
			piece = " " + piece
		}
		emit := func(p string) {
			var b strings.Builder
			for i := 0; i < len(p); i++ {
				b.WriteRune(byteToRune[p[i]])
			}
			out = append(out, b.String())
		}
		if st.useRegex {
			ruleGPT2.split(piece, emit)
		} else {
			emit(piece)
		}
	}
	run(s, 0)
	return out
}

// TestPreTokenizeMatchesHF compares the pre-tokenizers (Qwen2 regex, Llama 3
// regex, GPT-2 ByteLevel with a prefix space) with Hugging Face's, whose
// regexes run on Oniguruma, on 400 random strings over every character
// class the regexes distinguish plus the edge texts
// (testdata/pretok_cases.jsonl from testdata/hf_pretok.js).
func TestPreTokenizeMatchesHF(t *testing.T) {
	toks := map[string]*BPE{"tokenizer.json": qwen3(t)}
	for _, f := range []string{"tiny_llama3.json", "tiny_gpt2.json"} {
		tok, err := FromFile(filepath.Join("testdata", f))
		require.NoError(t, err)
		toks[f] = tok
	}
	f, err := os.Open("testdata/pretok_cases.jsonl")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var c struct {
			File   string   `json:"file"`
			Text   string   `json:"text"`
			Pieces []string `json:"pieces"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		got := pieces(toks[c.File], c.Text)
		n++
		if len(c.Pieces) == 0 {
			require.Empty(t, got)
			continue
		}
		require.Equal(t, c.Pieces, got, "%s: %q", c.File, c.Text)
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 3*438, n)
}
