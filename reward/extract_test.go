package reward

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestExtractAnswer(t *testing.T) {
	cases := []struct {
		name, in  string
		fallbacks bool
		want      string
		method    string
		ok        bool
	}{
		{"boxed", `so \boxed{42}.`, false, "42", ExtractBoxed, true},
		{"nested braces", `\boxed{\frac{1}{2}}`, false, `\frac{1}{2}`, ExtractBoxed, true},
		{"escaped braces", `\boxed{\{1,2\}}`, false, `\{1,2\}`, ExtractBoxed, true},
		{"last boxed", `\boxed{1} then \boxed{2}`, false, "2", ExtractBoxed, true},
		{"adjacent boxes", `$\boxed{1}$, $\boxed{2}$ and $\boxed{3}$`, false, "1, 2, 3", ExtractBoxed, true},
		{"fbox", `\fbox{7}`, false, "7", ExtractBoxed, true},
		{"boxed space", `\boxed 7$`, false, "7", ExtractBoxed, true},
		{"boxed in math", `$\boxed{x = 3}$`, false, "x = 3", ExtractBoxed, true},
		{"truncated in a later box", `\boxed{3} and later \boxed{4`, true, "", "", false},
		{"truncated box, phrase before", `the answer is 5, so \boxed{5`, true, "", "", false},
		{"unbalanced then complete", `\boxed{ oops \boxed{4}`, false, "4", ExtractBoxed, true},
		{"not boxed cmd", `\boxedx{3}`, false, "", "", false},
		{"phrase is", "so the answer is 12.", false, "12", ExtractPhrase, true},
		{"phrase colon", "Answer: $-3$", false, "-3", ExtractPhrase, true},
		{"phrase final", "The final answer is $\\frac{1}{4}$. I hope it is correct.", false, `\frac{1}{4}`, ExtractPhrase, true},
		{"phrase last wins", "the answer is 1\nno wait, the answer is 2", false, "2", ExtractPhrase, true},
		{"phrase with boxed", "Answer: $\\boxed{5}$", false, "5", ExtractBoxed, true},
		{"bold", "work\n**17**", false, "17", ExtractBold, true},
		{"bold not final line", "**17**\nmore text", false, "", "", false},
		{"math fallback", "so it is $x^2$", true, "x^2", ExtractMath, true},
		{"math fallback off", "so it is $x^2$", false, "", "", false},
		{"number fallback", "3+4 = 7", true, "7", ExtractNumber, true},
		{"number with commas", "total 1,234", true, "1,234", ExtractNumber, true},
		{"nothing", "I give up", true, "", "", false},
		{"empty", "", true, "", "", false},
		{"think", `<think>\boxed{1}</think>\boxed{2}`, false, "2", ExtractBoxed, true},
		{"think no final", `<think>\boxed{1}</think>I am done`, false, "1", ExtractBoxed, true},
		{"empty box", `\boxed{}`, false, "", "", false},
		{"bold label", "**Answer:** 18", false, "18", ExtractPhrase, true},
		{"bold around", "**Answer: 18**", false, "18", ExtractPhrase, true},
		{"box run too long", strings.Repeat(`\boxed{1}, `, 64) + `\boxed{2}`, false, "2", ExtractBoxed, true},
		{"box run at the limit", strings.Repeat(`\boxed{1}, `, 63) + `\boxed{2}`, false, strings.Repeat("1, ", 63) + "2", ExtractBoxed, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, method, ok := ExtractAnswer(c.in, c.fallbacks)
			assert.Equal(t, c.ok, ok)
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.method, method)
		})
	}
}

func TestExtractHuge(t *testing.T) {
	// A response above 1 MiB is searched in its last MiB, where the answer is.
	resp := strings.Repeat("x", 3<<20) + `\boxed{9}`
	got, _, ok := ExtractAnswer(resp, false)
	assert.True(t, ok)
	assert.Equal(t, "9", got)
	// 100k unclosed braces cannot make extraction quadratic or crash.
	got, _, ok = ExtractAnswer(strings.Repeat(`\boxed{`, 100000), false)
	assert.False(t, ok)
	assert.Empty(t, got)
}

func TestChoiceLetter(t *testing.T) {
	cases := map[string]byte{
		"C": 'C', "(C)": 'C', "C)": 'C', "C.": 'C', `\text{(B)}`: 'B', "Option D": 'D',
		"A: 42": 'A', "**E**": 'E', "c": 0, "CD": 0, "Z": 0, "": 0, "12": 0, "Cat": 0,
	}
	for in, want := range cases {
		assert.Equal(t, want, choiceLetter(in), in)
	}
}

func TestExtractCode(t *testing.T) {
	cases := []struct {
		name, in, want string
		ok             bool
	}{
		{"python", "text\n```python\nprint(1)\n```\n", "print(1)\n", true},
		{"last python", "```python\na=1\n```\n```python\nb=2\n```", "b=2\n", true},
		{"prefers python", "```python\na=1\n```\n```text\nout\n```", "a=1\n", true},
		{"unmarked", "```\nx=1\n```", "x=1\n", true},
		{"after think", "<think>```python\nbad\n```</think>```python\ngood\n```", "good\n", true},
		{"none", "no code here", "", false},
		{"unclosed", "```python\nprint(1)", "", false},
	}
	for _, c := range cases {
		got, ok := ExtractCode(c.in)
		assert.Equal(t, c.ok, ok, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
}
