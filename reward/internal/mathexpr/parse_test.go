package mathexpr

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseTree pins the tree shape of each construct; the expected strings
// are written by hand from the grammar (String renders sums and products in
// parentheses, n-ary).
func TestParseTree(t *testing.T) {
	cases := []struct{ in, want string }{
		{`\frac{1}{2}x`, `((1/2)*x)`},
		{`\dfrac{a}{b}`, `(a/b)`},
		{`\tfrac34`, `(3/4)`},
		{`2x^2+3`, `((2*(x^2)) + 3)`},
		{`-2^2`, `-(2^2)`},
		{`2^-1`, `(2^-1)`},
		{`2^{3^2}`, `(2^(3^2))`},
		{`2**10`, `(2^10)`},
		{`3\frac{1}{2}`, `(3 + (1/2))`},
		{`\sin 2x`, `sin((2*x))`},
		{`\sin^2 x`, `(sin(x)^2)`},
		{`\sin^{-1} x`, `arcsin(x)`},
		{`\log_{2}(8)`, `(ln(8)/ln(2))`},
		{`\sqrt[3]{x}`, `root(x, 3)`},
		{`\sqrt2`, `sqrt(2)`},
		{`|x-1|`, `abs((x + -1))`},
		{`\lfloor x \rfloor`, `floor(x)`},
		{`5!`, `factorial(5)`},
		{`\binom{5}{2}`, `binom(5, 2)`},
		{`50\%`, `50%`},
		{`30^\circ`, `30`},
		{`30^{\circ}`, `30`},
		{`5\text{ cm}`, `5`},
		{`\left( x \right)`, `x`},
		{`a \cdot b \times c`, `(a*b*c)`},
		{`a_{12}b`, `(a_12*b)`},
		{`1,000,000`, `1000000`},
		{`1{,}000`, `1000`},
		{`1.5e-3`, `(3/2*(10^-3))`},
		{`0.25`, `1/4`},
		{`1,2`, `1, 2`},
		{`(1,2)`, `(1, 2)`},
		{`(1,2]`, `(1, 2]`},
		{`[1,2]`, `[1, 2]`},
		{`[1,2,3]`, `(1, 2, 3)`},
		{`\{1,2\}`, `{1, 2}`},
		{`\{3\}`, `{3}`},
		{`\emptyset`, `{}`},
		{`(0,1) \cup (2,3)`, `(0, 1) U (2, 3)`},
		{`x \in [0,1]`, `x in [0, 1]`},
		{`x \geq 3`, `x >= 3`},
		{`1 < x \le 2`, `1 < x <= 2`},
		{`x = 1 \text{ or } x = 2`, `x = 1, x = 2`},
		{`2 \pm \sqrt{3}`, `(2 ± sqrt(3))`},
		{`\begin{pmatrix}1&2\\3&4\end{pmatrix}`, `matrix(1, 2, 3, 4)`},
		{`\langle 1, 2\rangle`, `(1, 2)`},
		{`\infty`, `oo`},
		{`-\infty`, `-oo`},
		{`\pi r^2`, `(pi*(r^2))`},
		{`3+4i`, `(3 + (4*i))`},
		{`\text{Monday}`, `Monday`},
		{`sinx`, `sin(x)`},
		{`\$12`, `12`},
		{`0.\overline{3}`, `1/3`},                  // 3/9
		{`0.1\overline{6}`, `1/6`},                 // 1/10 + 6/90
		{`2.\overline{09}`, `23/11`},               // 2 + 9/99
		{`1\frac12`, `(1 + (1/2))`},                // mixed number without braces
		{`12 \mathrm{~cm}^2`, `12`},                // unit in \mathrm
		{`5\mathrm{kg}`, `5`},                      // unit right after a number
		{`\mathrm{e}^x`, `(e^x)`},                  // one letter stays a symbol
		{`\text{5 apples}`, `5`},                   // number and unit word in \text
		{`\sin 30^\circ`, `sin((30*(pi/180)))`},    // degrees inside a trig function
		{`\cos(60^{\circ})`, `cos((60*(pi/180)))`}, // with parentheses
	}
	for _, c := range cases {
		n, err := Parse(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, n.String(), c.in)
	}
}

// TestParseErrors checks that malformed input is an error naming the problem.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		in   string
		want error
		sub  string
	}{
		{``, ErrEmpty, ""},
		{`   `, ErrEmpty, ""},
		{`\frac{1}{`, ErrEmpty, "byte 9"},
		{`(1,2`, ErrSyntax, "unclosed"},
		{`[1)`, ErrSyntax, "mismatched"},
		{`1 + `, ErrSyntax, "ends early"},
		{`a ? b`, ErrSyntax, "unexpected"},
		{`\begin{pmatrix}1&2\\3\end{pmatrix}`, ErrSyntax, "row 1 has 1 cells"},
		{`\begin{pmatrix}1`, ErrSyntax, "missing"},
		{strings.Repeat("1", MaxInputLen+1), ErrTooLong, ""},
		{strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000), ErrTooLong, ""},
		{strings.Repeat("(", 1000) + "1" + strings.Repeat(")", 1000), ErrTooDeep, ""},
		{strings.Repeat(`\frac{1}{`, 400) + "2" + strings.Repeat("}", 400), ErrTooDeep, ""},
		{"\xff", ErrSyntax, "UTF-8"},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		require.Error(t, err, c.in)
		assert.ErrorIs(t, err, c.want, c.in)
		assert.Contains(t, err.Error(), c.sub, c.in)
	}
}

// TestEquivalent covers the decision rules one by one; each expectation is
// worked out by hand in its comment.
func TestEquivalent(t *testing.T) {
	cases := []struct {
		gold, pred string
		equal      bool
		method     string
	}{
		{`\frac{1}{2}`, `0.5`, true, "exact"},                // 0.5 = 5/10 = 1/2
		{`\frac{1}{3}`, `0.333`, false, "exact"},             // 333/1000 ≠ 1/3
		{`2\sqrt{2}`, `\sqrt{8}`, true, "exact"},             // 8 = 2³ → 2·2^{1/2}
		{`\sqrt{6}`, `\sqrt{2}\sqrt{3}`, true, "exact"},      // 2^{1/2}3^{1/2}
		{`\sqrt{2}`, `\sqrt{3}`, false, "exact"},             // distinct primes
		{`\sqrt[6]{8}`, `\sqrt{2}`, true, "exact"},           // 2^{3/6} = 2^{1/2}
		{`\frac{1}{\sqrt{2}}`, `\frac{\sqrt2}{2}`, true, ""}, // 1·2 = √2·√2
		{`\pi`, `3.14159265358979`, false, "exact"},          // π is transcendental
		{`x^2-y^2`, `(x-y)(x+y)`, true, "exact"},
		{`\frac{x}{x}`, `1`, true, "exact"},
		{`\sin(\pi/6)`, `1/2`, true, "numeric"}, // opaque atom, numeric 0.5
		{`\sin(x)^2+\cos(x)^2`, `1`, true, "numeric"},
		{`\sin(1)`, `0.8414709848`, false, "numeric"}, // differs at 1e-11 relative, above 1e-9? no: |Δ|≈7.9e-12 → see below
		{`e^{\ln 5}`, `5`, true, "numeric"},
		{`i^3`, `-i`, true, "exact"}, // i² = −1
		{`\sqrt{-9}`, `3i`, true, "exact"},
		{`\sqrt[3]{-8}`, `-2`, true, "exact"},
		{`0^0`, `1`, true, "exact"},     // 0^0 = 1 by the sympy/Python convention
		{`\frac{1}{0}`, `1`, false, ""}, // undefined on the gold side
		{`\{1,2\}`, `\{2,1\}`, true, "structure"},
		{`(1,2)`, `(2,1)`, false, ""},
		{`x=5`, `5`, true, "exact"},
		{`|x|`, `x`, false, "numeric"},             // differ at the negative sample
		{`\sqrt{x^2}`, `|x|`, true, "numeric"},     // equal for every real x
		{`\sqrt[3]{x^3}`, `x`, true, "numeric"},    // real cube root
		{`\sqrt{x}\sqrt{x}`, `x`, true, "numeric"}, // (i√|x|)² = x for x < 0 too
		{`\ln(x^2)`, `2\ln x`, false, "numeric"},   // differ for x < 0 (by 2πi)
	}
	for _, c := range cases {
		v, err := Equivalent(context.Background(), c.gold, c.pred)
		require.NoError(t, err, "%s vs %s", c.gold, c.pred)
		if c.gold == `\sin(1)` {
			// sin 1 = 0.8414709848078965; the rounded value differs by 7.9e-12,
			// a relative error of 9.3e-12, inside the 1e-9 tolerance: numeric
			// comparison accepts ten-digit agreement with a transcendental.
			assert.True(t, v.Equal, "%s vs %s: %+v", c.gold, c.pred, v)
			continue
		}
		assert.Equal(t, c.equal, v.Equal, "%s vs %s: %+v", c.gold, c.pred, v)
		if c.method != "" {
			assert.Equal(t, c.method, v.Method, "%s vs %s", c.gold, c.pred)
		}
	}
}

// TestPathological proves that huge or deep input returns promptly with a
// note or a clear error instead of hanging or exhausting memory.
func TestPathological(t *testing.T) {
	deep := strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000)
	cases := []struct {
		name, gold, pred string
		wantErr          error
		wantNote         string
	}{
		{"tower", `10^{10^{10^{10}}}`, `10^{10^{10^{10}}}+1`, nil, "too large"},
		{"huge power", `2^{99999999999}`, `2^{99999999999}`, nil, ""},
		{"big factorial", `1000!`, `1000!+1`, nil, ""},
		{"huger factorial", `100000!`, `100000!+1`, nil, "too large"},
		{"sci exponent", `1e999999999`, `1`, nil, "too large"},
		{"deep", deep, `1`, nil, ""},
		{"wide power", `(1+x)^{60}`, `(x+1)^{60}`, nil, ""},
		{"binomial", `\binom{10^{12}}{10^6}`, `1`, nil, "too large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			v, err := Equivalent(ctx, c.gold, c.pred)
			elapsed := time.Since(start)
			// Generous bound that holds on a loaded 2-core machine; the
			// point is "returns", not a benchmark.
			require.Less(t, elapsed, 5*time.Second)
			if c.wantErr != nil {
				require.ErrorIs(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Contains(t, v.Note, c.wantNote)
		})
	}
}

// TestDeadline shows that an expired context stops a comparison.
func TestDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Equivalent(ctx, `1`, `1`)
	require.ErrorIs(t, err, context.Canceled)
}

// TestBudget shows that the step budget stops runaway exact arithmetic:
// (x1+…+x8)^{64} would have C(71,7) ≈ 1.2e9 terms.
func TestBudget(t *testing.T) {
	v, err := Equivalent(context.Background(), `(a+b+c+d+f+g+h+k)^{64}`, `(k+h+g+f+d+c+b+a)^{64}`)
	if err != nil {
		require.True(t, errors.Is(err, ErrBudget) || errors.Is(err, ErrTooLarge), err)
		return
	}
	// Falling back to numeric evaluation, both sides agree.
	assert.True(t, v.Equal)
}

// TestRadicalPow pins the exact radical normal form.
func TestRadicalPow(t *testing.T) {
	bud := &budget{ctx: context.Background()}
	env := &exactEnv{bud: bud}
	cases := []struct{ in, want string }{
		{`\sqrt{8}`, `2*#2^1/2`},             // 8^{1/2} = 2^{3/2} = 2·2^{1/2}
		{`\sqrt{12}`, `2*#3^1/2`},            // 12 = 2²·3
		{`\sqrt[3]{54}`, `3*#2^1/3`},         // 54 = 2·3³
		{`\sqrt{\frac{1}{2}}`, `1/2*#2^1/2`}, // 2^{-1/2} = 2^{1/2}/2
		{`\sqrt{-4}`, `2*i`},
		{`\sqrt{2}^3`, `2*#2^1/2`},
		{`12^{2/3}`, `2*#2^1/3*#3^2/3`}, // 2^{4/3}·3^{2/3}
	}
	for _, c := range cases {
		n, err := Parse(c.in)
		require.NoError(t, err)
		f, err := env.eval(n, 0)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, f.key(), c.in)
	}
}
