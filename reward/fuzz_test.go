package reward

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzExtractAnswer: extraction never panics, and a found answer is a
// substring-derived, trimmed piece of the response.
func FuzzExtractAnswer(f *testing.F) {
	for _, s := range []string{
		`\boxed{1}`, `\boxed{\frac{1}{2}}`, `\boxed{`, `}}}\boxed{{}`, `\fbox 3`, "the answer is 5.",
		"Answer: $x$", "**7**", "<think>\\boxed{1}</think>", `\boxed{1} and \boxed{2}`, "$$", `\(\)`,
		"```python\nprint(1)\n```",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, m, ok := ExtractAnswer(s, true)
		if ok && (m == "" || strings.TrimSpace(a) == "") {
			t.Fatalf("found empty answer %q by %q", a, m)
		}
		if !ok && a != "" {
			t.Fatalf("answer %q without ok", a)
		}
		ExtractCode(s)
		choiceLetter(s)
	})
}

// FuzzMathVerify: any response against any gold returns a verdict with a
// reason, well within the deadline, and never panics.
func FuzzMathVerify(f *testing.F) {
	for _, c := range [][2]string{
		{`\boxed{\frac{1}{2}}`, "0.5"}, {`\boxed{2\sqrt{2}}`, `\sqrt8`}, {`\boxed{(1,2]}`, "(1,2]"},
		{`\boxed{x^2+1}`, "x^2+1"}, {`\boxed{10^{10^{10}}}`, "1"}, {`\boxed{\begin{pmatrix}1\\2\end{pmatrix}}`, "(1,2)"},
		{`\boxed{1000!}`, "1000!"}, {`\boxed{\{1,2\}}`, `\{2,1\}`}, {`\boxed{x \geq 2}`, `[2,\infty)`},
		{`\boxed{e^{i\pi}}`, "-1"}, {`\boxed{50\%}`, "0.5"}, {`\boxed{\text{yes}}`, "yes"},
		{`\boxed{\textbf{(A)}\ 8}`, `\textbf{(A) }8`}, {`\boxed{72}`, "#### 72"}, {"**Answer:** 18", "18"},
		{`\boxed{0.\overline{3}}`, `\frac13`}, {`\boxed{\tan 45^\circ}`, "1"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, resp, gold string) {
		start := time.Now()
		out := MathVerify(context.Background(), resp, gold)
		if el := time.Since(start); el > DefaultMathTimeout+2*time.Second {
			t.Fatalf("took %v", el)
		}
		if out.Reason == "" {
			t.Fatal("empty reason")
		}
		if out.Acc != (out.Score == 1) {
			t.Fatalf("Acc %v with Score %v", out.Acc, out.Score)
		}
	})
}

// FuzzParseTests: a code test specification from a data set either parses
// into cases or is an ErrTests error; it never panics.
func FuzzParseTests(f *testing.F) {
	for _, s := range []string{
		`{"inputs": ["1 2\n"], "outputs": ["3\n"]}`,
		`{"inputs": [["1", "2"]], "outputs": [["3"]]}`,
		`{"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]}`,
		`{"fn_name": "add", "inputs": ["1\n2"], "outputs": ["3"]}`,
		`{"inputs": [], "outputs": []}`, `{"inputs": [1], "outputs": []}`, `[]`, `{`, `null`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := ParseTests(s)
		if err != nil {
			if !errors.Is(err, ErrTests) {
				t.Fatalf("error %v does not wrap ErrTests", err)
			}
			return
		}
		if _, err := ts.cases(); err != nil {
			t.Fatalf("parsed spec has bad cases: %v", err)
		}
	})
}
