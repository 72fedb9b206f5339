package tool

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Expected values are worked by hand or, where marked, computed with
// Python 3.11's int, fractions.Fraction and decimal (prec 40), whose
// semantics (floored // and %, ** binding tighter than unary minus) the
// calculator follows.
func TestCalculatorEvaluate(t *testing.T) {
	cases := []struct {
		expr, want string
		exact      bool
	}{
		{"1+2*3", "7", true},
		{"(1+2)*3", "9", true},
		{"  10 - 4 - 3 ", "3", true}, // left-associative: (10-4)-3
		{"2^10", "1024", true},
		{"2**100", "1267650600228229401496703205376", true}, // Python: 2**100
		{"2^3^2", "512", true},                              // right-associative: 2^(3^2)
		{"-2^2", "-4", true},                                // as Python: -(2**2)
		{"(-2)^3", "-8", true},
		{"2^-2", "1/4", true},
		{"(2/3)^-3", "27/8", true},
		{"7/2", "7/2", true},
		{"6/3", "2", true},
		{"7//2", "3", true},
		{"-7//2", "-4", true}, // Python: -7//2 == -4
		{"-7 % 3", "2", true}, // Python: -7 % 3 == 2
		{"7 % -3", "-2", true},
		{"7.5 % 2", "3/2", true},      // Python: 7.5 % 2 == 1.5
		{"-7/2 % (1/3)", "1/6", true}, // Python: Fraction(-7,2) % Fraction(1,3)
		{"1/3 + 1/6", "1/2", true},
		{"0.1 + 0.2", "3/10", true}, // exact, unlike floats
		{"1e3", "1000", true},
		{"2.5e-1", "1/4", true},
		{"1_000_000 * 3", "3000000", true},
		{"sqrt(16)", "4", true},
		{"sqrt(9/4)", "3/2", true},
		{"sqrt(2)", "≈1.41421356237309504880168872420969807857", false}, // decimal prec 40: 1.414213562373095048801688724209698078570
		// The 40-digit root exceeds √2 by ≈3.3e-40, so its square is
		// 2 + 2√2·3.3e-40 ≈ 2 + 9.3e-40, shown to 40 digits.
		{"sqrt(2)^2", "≈2.000000000000000000000000000000000000001", false},
		{"abs(-5)", "5", true},
		{"ABS(-1/2)", "1/2", true},
		{"3 × 4 ÷ 6 − 1", "1", true},
		{"123456789123456789 * 987654321987654321", "121932631356500531347203169112635269", true}, // Python int product
		{"3^40", "12157665459056928801", true},
		{"(-1)^(10^100)", "1", true},
		{"0^0", "1", true},
		{"((((((1))))))", "1", true},
		{"--3", "3", true},
		{"+3", "3", true},
	}
	c := &Calculator{}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			v, err := c.Evaluate(tc.expr)
			require.NoError(t, err)
			assert.Equal(t, tc.want, v.String())
			assert.Equal(t, tc.exact, v.Exact)
		})
	}
}

func TestCalculatorErrors(t *testing.T) {
	cases := []struct{ expr, wantErr string }{
		{"1/0", "at offset 1: division by zero"},
		{"1//0", "division by zero"},
		{"5 % 0", "division by zero"},
		{"2^0.5", "exponent 1/2 is not an integer"},
		{"(1+2", "want ), got end of expression"},
		{"1+", "want a number, ( or a function, got end of expression"},
		{"foo(2)", `unknown name "foo"`},
		{"sqrt 4", "want ( after sqrt"},
		{"sqrt(-1)", "sqrt of a negative number"},
		{"2^^3", `at offset 2: want a number, ( or a function, got "^"`},
		{"", "got end of expression"},
		{"1 2", `unexpected "2"`},
		{"1 $ 2", `unexpected character "$"`},
		{"1..2", `bad number "1..2"`},
		{"9^9^9^9", "would exceed 65536 bits"},
		{"10^100000", "would exceed 65536 bits"},
		{"1e999999", "exceeds 65536 bits"},
		{"0^-1", "zero to a negative power"},
		{strings.Repeat("(", 1000) + "1" + strings.Repeat(")", 1000), "nested deeper than 200 levels"},
		{strings.Repeat("-", 1000) + "1", "nested deeper than 200 levels"},
		{strings.Repeat("1", 10001), "the limit is 10000"},
		{"2^65537", "would exceed 65536 bits"},
		{"(2^60000)*(2^60000)", "would exceed 65536 bits"},
		{"\xff", "not valid UTF-8"},
	}
	c := &Calculator{}
	for _, tc := range cases {
		name := tc.expr
		if len(name) > 30 {
			name = name[:30]
		}
		t.Run(name, func(t *testing.T) {
			_, err := c.Evaluate(tc.expr)
			require.ErrorIs(t, err, ErrCalc)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestCalculatorTool(t *testing.T) {
	c := &Calculator{}
	ctx := context.Background()
	res, err := c.Call(ctx, []byte(`{"expression": "2^64 - 1"}`))
	require.NoError(t, err)
	assert.Equal(t, "18446744073709551615", res.Content)
	assert.False(t, res.Failed)
	assert.Equal(t, true, res.Metadata["exact"])

	for args, want := range map[string]string{
		`{"expression": "1/0"}`: "Error: calculator: at offset 1: division by zero",
		`{"expr": "1"}`:         `Error: invalid arguments for calculator: missing required field "expression"`,
		`{"expression": 5}`:     `Error: invalid arguments for calculator: field "expression" must be a string`,
		`[1]`:                   "Error: invalid arguments for calculator: arguments must be a JSON object",
	} {
		res, err := c.Call(ctx, []byte(args))
		require.NoError(t, err, args)
		assert.True(t, res.Failed, args)
		assert.Equal(t, want, res.Content, args)
	}
	r, err := NewRegistry(c)
	require.NoError(t, err)
	assert.Equal(t, []string{"calculator"}, r.Names())
}

// FuzzCalculator: no input panics or runs away, and parenthesising an
// expression never changes its value.
func FuzzCalculator(f *testing.F) {
	for _, s := range []string{"1+2*3", "2^10", "sqrt(2)", "-7//2", "(1/3)%(1/7)", "9^9^9", "1e5", "abs(-2)^3", "0.5^-3", "((1)", "2**-1"} {
		f.Add(s)
	}
	c := &Calculator{MaxBits: 4096}
	f.Fuzz(func(t *testing.T, expr string) {
		v, err := c.Evaluate(expr)
		if err != nil {
			require.ErrorIs(t, err, ErrCalc)
			return
		}
		require.NotNil(t, v.Rat)
		require.LessOrEqual(t, v.Rat.Num().BitLen(), 4096)
		w, err := c.Evaluate("(" + expr + ")")
		if err != nil {
			// Only the nesting bound may refuse the wrapped expression.
			require.Contains(t, err.Error(), "nested deeper")
			return
		}
		require.Equal(t, v.Rat.String(), w.Rat.String())
		require.Equal(t, v.Exact, w.Exact)
	})
}

func ExampleCalculator() {
	c := &Calculator{}
	for _, e := range []string{"(123456789 * 987654321 + 17) % 1000", "2^100 / 6", "sqrt(2)"} {
		v, err := c.Evaluate(e)
		if err != nil {
			panic(err)
		}
		fmt.Println(e, "=", v)
	}
	// Output:
	// (123456789 * 987654321 + 17) % 1000 = 286
	// 2^100 / 6 = 633825300114114700748351602688/3
	// sqrt(2) = ≈1.41421356237309504880168872420969807857
}
