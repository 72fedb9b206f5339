package reward

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNormalizeAnswer checks NormalizeAnswer against Search-R1's
// normalize_answer (verl/utils/reward_score/qa_em.py), run under Python
// 3.11 on each input: the goldens are its outputs, printed with
// json.dumps. The cases are SQuAD-style answers (articles, punctuation,
// white space) and the Unicode corners where Python and Go differ: \w
// versus combining marks and numbers, str.lower's İ and final sigma,
// str.split's white space.
func TestNormalizeAnswer(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"The Beatles", "beatles"},
		{"the beatles!", "beatles"},
		{"  A  cat. ", "cat"},
		{"An apple-pie", "applepie"},
		{"U.S.A.", "usa"},
		{"Paris, France", "paris france"},
		{"the", ""},
		{"a an the", ""},
		{"theatre", "theatre"},
		{"Anthem of the Sea", "anthem of sea"},
		{"_the_", ""},
		{"the_end", "theend"},
		{"1,000", "1000"},
		{"$3.50", "350"},
		{"Truji", "truji"},
		{"\u00c6r\u00f8", "\u00e6r\u00f8"},
		{"\u0130stanbul", "i\u0307stanbul"},
		{"\u039f\u0394\u039f\u03a3", "\u03bf\u03b4\u03bf\u03c2"},
		{"\u03a3\u0391\u03a3 \u03a3", "\u03c3\u03b1\u03c2 \u03c3"},
		{"l'\u00e9t\u00e9", "l\u00e9t\u00e9"},
		{"the\u2019s", "\u2019s"},
		{"the\u00a0end", "end"},
		{"tab\tnew\nline", "tab new line"},
		{"\u00abthe\u00bb end", "\u00ab \u00bb end"},
		{"an\u2003apple", "apple"},
		{"the2", "the2"},
		{"2the", "2the"},
		{"Mr. O'Neil", "mr oneil"},
		{"", ""},
		{"   ", ""},
		{"(a)", ""},
		{"A.B.C", "abc"},
		{"the-the the", "thethe"},
		{"\u00e9the the \u00e9", "\u00e9the \u00e9"},
		{"th\u00e9\u00e2tre", "th\u00e9\u00e2tre"},
		{"\u00fcber THE \u00df", "\u00fcber \u00df"},
		{"THE\u3000Cat", "cat"},
		{"\u01c5emal", "\u01c6emal"},
		{"r\u00e9sum\u00e9 a", "r\u00e9sum\u00e9"},
		{"the\u0301 x", "\u0301 x"},
		{"x\u00b2 the", "x\u00b2"},
		{"\u2177 the", "\u2177"},
		{"a\u200bb", "\u200bb"},
	} {
		assert.Equal(t, tc.want, NormalizeAnswer(tc.in), "%q", tc.in)
	}
}

// TestExactMatch: em_check's verdicts, each worked out from the
// normalized forms above.
func TestExactMatch(t *testing.T) {
	for _, tc := range []struct {
		pred    string
		targets []string
		want    bool
	}{
		{"Beatles", []string{"The Beatles"}, true},   // both "beatles"
		{"the  beatles.", []string{"Beatles"}, true}, // "beatles"
		{"Beatles", []string{"Rolling Stones", "The Beatles"}, true},
		{"Beatle", []string{"The Beatles"}, false}, // no stemming
		{"theatre", []string{"atre"}, false},       // "the" inside a word stays
		{"", []string{"the"}, true},                // both empty, as in Python
		{"Truji", nil, false},                      // no targets
		{"1,628", []string{"1628"}, true},          // the comma is punctuation
		{"Paris France", []string{"Paris, France"}, true},
	} {
		assert.Equal(t, tc.want, ExactMatch(tc.pred, tc.targets), "%q vs %q", tc.pred, tc.targets)
	}
}

// TestExtractAnswerTag: the last match of Search-R1's pattern
// <answer>(.*?)</answer> (re.DOTALL), stripped; the goldens are Python
// 3.11's re.finditer(...)[-1].group(1).strip() on each input.
func TestExtractAnswerTag(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"<answer>Truji</answer>", "Truji", true},
		{"x <answer> a </answer> y <answer>\n Truji \n</answer>", "Truji", true},
		{"<answer>a<answer>b</answer>", "a<answer>b", true},
		{"<answer>a</answer><answer>b", "a", true},
		{"no tags", "", false},
		{"<answer></answer>", "", true},
		{"</answer><answer>x</answer></answer>", "x", true},
		{"<answer>\u3000x\u00a0</answer>", "x", true},
	} {
		got, ok := ExtractAnswerTag(tc.in)
		assert.Equal(t, tc.ok, ok, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

func TestQATargets(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{`{"target": ["Truji"]}`, []string{"Truji"}, ""},
		{` {"target": ["a", "b"], "other": 1}`, []string{"a", "b"}, ""},
		{`{"target": "Truji"}`, []string{"Truji"}, ""},
		{`Truji`, []string{"Truji"}, ""},
		{`["Truji"]`, []string{`["Truji"]`}, ""}, // not an object: the text itself
		{`{"target": []}`, nil, `"target" is empty`},
		{`{"target": [1]}`, nil, `"target" must be a string or a list of strings`},
		{`{"answer": ["x"]}`, nil, `no "target"`},
		{`{"target": null}`, nil, `no "target"`},
		{`{"target": ["x"]`, nil, "unexpected end of JSON input"},
	} {
		got, err := QATargets(tc.in)
		if tc.wantErr != "" {
			assert.ErrorContains(t, err, tc.wantErr, "%q", tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

func TestQAFunc(t *testing.T) {
	ctx := context.Background()
	rf, err := QAFunc(SearchR1QA())
	require.NoError(t, err)
	shaped, err := QAFunc(QAConfig{Correct: 1, Wrong: -0.5, NoAnswer: -1})
	require.NoError(t, err)
	gt := `{"target": ["Truji", "Truji town"]}`
	for _, tc := range []struct {
		name, response   string
		want, wantShaped float64
		acc              bool
		pred             string
	}{
		{"right", "<tool_call>…</tool_call>\n<answer> The Truji. </answer>", 1, 1, true, "truji"},
		{"second target", "<answer>truji  TOWN</answer>", 1, 1, true, "truji town"},
		{"wrong", "<answer>Grebrist</answer>", 0, -0.5, false, "grebrist"},
		{"last answer counts", "<answer>Truji</answer> no, <answer>Grebrist</answer>", 0, -0.5, false, "grebrist"},
		{"no answer", "Truji", 0, -1, false, ""},
		{"unclosed", "<answer>Truji", 0, -1, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := rf(ctx, Input{Response: tc.response, GroundTruth: gt})
			require.NoError(t, err)
			assert.Equal(t, tc.want, out.Score)
			assert.Equal(t, tc.acc, out.Acc)
			assert.Equal(t, tc.pred, out.Pred)
			assert.NotEmpty(t, out.Reason)
			out, err = shaped(ctx, Input{Response: tc.response, GroundTruth: gt})
			require.NoError(t, err)
			assert.Equal(t, tc.wantShaped, out.Score)
		})
	}
	_, err = rf(ctx, Input{Response: "<answer>x</answer>", GroundTruth: `{"target": 3}`})
	assert.ErrorContains(t, err, "must be a string or a list of strings")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = rf(cancelled, Input{Response: "<answer>x</answer>", GroundTruth: "x"})
	assert.True(t, errors.Is(err, context.Canceled))
	for _, bad := range []QAConfig{{}, {Correct: 1, Wrong: 1}, {Correct: 0, NoAnswer: 0.5}} {
		_, err := QAFunc(bad)
		assert.ErrorIs(t, err, ErrConfig, "%+v", bad)
	}
}

// FuzzQA: the ground-truth parser, the normalization and the extraction
// never panic; a normalized answer is normalized already, has no white
// space at its ends or twice in a row, and no ASCII punctuation.
func FuzzQA(f *testing.F) {
	for _, s := range []string{`{"target": ["Truji"]}`, `{"target": "x"}`, `{"target": [1]}`, "{", "The Beatles", "<answer> a </answer>",
		"\u0130\u03a3\u03a3", "the\u0301", "\xff\xfe the"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if targets, err := QATargets(s); err == nil && len(targets) == 0 {
			t.Fatalf("QATargets(%q): no targets and no error", s)
		}
		n := NormalizeAnswer(s)
		if again := NormalizeAnswer(n); again != n {
			t.Fatalf("NormalizeAnswer(%q) = %q, normalized again %q", s, n, again)
		}
		if strings.Contains(n, "  ") || strings.TrimSpace(n) != n || strings.ContainsAny(n, asciiPunctuation) {
			t.Fatalf("NormalizeAnswer(%q) = %q", s, n)
		}
		if a, ok := ExtractAnswerTag(s); ok && !strings.Contains(s, a) {
			t.Fatalf("ExtractAnswerTag(%q) = %q, not in the text", s, a)
		}
	})
}
