package rollout

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPythonPrimitives holds pyInt, pyFloat and pyLiteralEval to CPython
// 3.11's int(), float() and ast.literal_eval() followed by json.dumps, on
// the cases testdata/gen_pyliteral_cases.py wrote with CPython.
func TestPythonPrimitives(t *testing.T) {
	data, err := os.ReadFile("testdata/pyliteral_cases.json")
	require.NoError(t, err)
	var golden struct {
		Cases []struct {
			In      string  `json:"in"`
			Int     *string `json:"int"`
			Float   *string `json:"float"`
			Literal *string `json:"literal"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(data, &golden))
	require.NotEmpty(t, golden.Cases)
	// What this reader does not implement, where CPython reads a value.
	unimplemented := map[string]bool{"'\\N{BULLET}'": true}
	for _, c := range golden.Cases {
		got, err := pyInt(c.In)
		if c.Int == nil {
			assert.Error(t, err, "int(%q)", c.In)
		} else if assert.NoError(t, err, "int(%q)", c.In) {
			assert.Equal(t, *c.Int, got, "int(%q)", c.In)
		}

		f, err := pyFloat(c.In)
		if c.Float == nil {
			assert.Error(t, err, "float(%q)", c.In)
		} else if assert.NoError(t, err, "float(%q)", c.In) {
			assert.Equal(t, *c.Float, floatRepr(f), "float(%q)", c.In)
		}

		lit, err := pyLiteralEval(c.In)
		switch {
		case unimplemented[c.In]:
			assert.ErrorIs(t, err, errPyLiteral, "literal_eval(%q)", c.In)
		case c.Literal == nil:
			assert.Error(t, err, "literal_eval(%q) = %s", c.In, lit)
		case assert.NoError(t, err, "literal_eval(%q)", c.In):
			assert.Equal(t, *c.Literal, lit, "literal_eval(%q)", c.In)
		}
	}
}

// floatRepr is Python's repr(float), non-finite values included.
func floatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return pyFloatRepr(f)
}

// FuzzPyLiteralEval checks that the Python reader never panics and that
// whatever it reads is JSON.
func FuzzPyLiteralEval(f *testing.F) {
	for _, s := range []string{"{'a': [1, (2,), None]}", "r'\\n' 'x'", "-0x_1f", "1_0.5e-3", "{1: 2, True: 3}", "'\\777\\U0001F600'", "[1,\n# c\n2]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if out, err := pyLiteralEval(s); err == nil && !json.Valid([]byte(out)) {
			t.Fatalf("literal_eval(%q) = %q, not JSON", s, out)
		}
		if out, err := pyInt(s); err == nil && !json.Valid([]byte(out)) {
			t.Fatalf("int(%q) = %q, not JSON", s, out)
		}
		if f, err := pyFloat(s); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) && !json.Valid([]byte(pyFloatRepr(f))) {
			t.Fatalf("float(%q) = %q, not JSON", s, pyFloatRepr(f))
		}
	})
}
