package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEval: values worked out by hand, with Python's precedence.
func TestEval(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"1+2*3", 7},
		{"(1+2)*3", 9},
		{"(120-45)*3", 225},
		{"12*34-5-6", 397},
		{" 7 - -2 ", 9},
		{"9223372036854775807", 9223372036854775807},
	} {
		got, err := Eval(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
	for _, bad := range []string{"", "1+", "(1+2", "1/2", "x", "9223372036854775807+1", "9223372036854775807*2", "99999999999999999999"} {
		_, err := Eval(bad)
		assert.Error(t, err, bad)
	}
}

// FuzzEval: no input panics or hangs, and a value is found only for
// input that is all digits, operators, parentheses and spaces.
func FuzzEval(f *testing.F) {
	for _, s := range []string{"1+2*3", "((4))", "-(-5)", "1-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 200 {
			return
		}
		if _, err := Eval(s); err == nil {
			for _, r := range s {
				assert.Contains(t, "0123456789+-*() ", string(r))
			}
		}
	})
}

// TestRunCalculator: the tool's answers, errors included, as text.
func TestRunCalculator(t *testing.T) {
	assert.Equal(t, "225", runCalculator("calculator", `{"expression": "(120-45)*3"}`))
	assert.Equal(t, `error: no tool "python"`, runCalculator("python", `{}`))
	assert.Contains(t, runCalculator("calculator", `{"expression": "1+"}`), "error: bad expression")
	assert.Contains(t, runCalculator("calculator", `not json`), "error: ")
}
