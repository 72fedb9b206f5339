package tool

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// byteCodec tokenizes text into its bytes, so token counts are byte counts.
type byteCodec struct{}

func (byteCodec) Encode(s string) []int {
	ids := make([]int, len(s))
	for i := range len(s) {
		ids[i] = int(s[i])
	}
	return ids
}

func (byteCodec) Decode(ids []int) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}

func TestOutputBudgetTruncate(t *testing.T) {
	cases := []struct {
		name   string
		budget OutputBudget
		in     string
		want   string
		cut    bool
	}{
		{"under", OutputBudget{Chars: 10}, "0123456789", "0123456789", false},
		// 12 characters, budget 10: head 5 "01234", tail 5 "789ab", 2 cut ("56").
		{"over", OutputBudget{Chars: 10}, "0123456789ab", "01234\n...[2 characters truncated]...\n789ab", true},
		// Odd budget: head 1, tail 2.
		{"odd", OutputBudget{Chars: 3}, "abcdef", "a\n...[3 characters truncated]...\nef", true},
		// Characters, not bytes: each of "αβγδεζ" is 2 bytes; budget 4 keeps "αβ" and "εζ".
		{"unicode", OutputBudget{Chars: 4}, "αβγδεζ", "αβ\n...[2 characters truncated]...\nεζ", true},
		{"empty", OutputBudget{Chars: 4}, "", "", false},
		{"default budget", OutputBudget{}, strings.Repeat("x", DefaultOutputChars), strings.Repeat("x", DefaultOutputChars), false},
		// Tokens: the byte codec makes 8 tokens of "abcdefgh"; budget 4 keeps "ab" and "gh".
		{"tokens", OutputBudget{Tokens: 4, Tokenizer: byteCodec{}}, "abcdefgh", "ab\n...[4 tokens truncated]...\ngh", true},
		{"tokens under", OutputBudget{Tokens: 8, Tokenizer: byteCodec{}}, "abcdefgh", "abcdefgh", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, cut := c.budget.Truncate(c.in)
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.cut, cut)
		})
	}
	got, cut := OutputBudget{}.Truncate(strings.Repeat("x", DefaultOutputChars+1))
	require.True(t, cut)
	assert.Equal(t, DefaultOutputChars+len("\n...[1 characters truncated]...\n"), len(got))
}

func TestOutputBudgetValidate(t *testing.T) {
	assert.Error(t, OutputBudget{Chars: -1}.Validate())
	assert.Error(t, OutputBudget{Tokens: 5}.Validate())
	assert.NoError(t, OutputBudget{Tokens: 5, Tokenizer: byteCodec{}}.Validate())
	_, err := NewCodeInterpreterOn(nil, OutputBudget{})
	assert.Error(t, err)
}

func TestUnwrapCodeFence(t *testing.T) {
	cases := []struct{ in, want string }{
		{"print(1)", "print(1)"},
		{"```python\nprint(1)\n```", "print(1)"},
		{"```py\nx = 1\nprint(x)\n```\n", "x = 1\nprint(x)"},
		{"```\nprint(2)\n```", "print(2)"},
		{"Here is code:\n```python\nprint(3)\n```\nDone.", "print(3)"},
		{"```python\nprint(4)", "print(4)"},      // unclosed fence: to the end
		{"```bash\nls\n```", "```bash\nls\n```"}, // not Python: left alone
		{"```bash\nls\n```\n```python\nprint(5)\n```", "print(5)"},
		{"s = '```'\nprint(s)", "s = '```'\nprint(s)"}, // backticks inside code, no fence line
		{"```python\r\nprint(6)\r\n```", "print(6)"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, UnwrapCodeFence(c.in), "%q", c.in)
	}
}

func ExampleOutputBudget_Truncate() {
	b := OutputBudget{Chars: 8}
	s, cut := b.Truncate("Traceback: a very long error message: ValueError")
	fmt.Printf("%q %v\n", s, cut)
	// Output:
	// "Trac\n...[40 characters truncated]...\nrror" true
}
