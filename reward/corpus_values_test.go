package reward

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// boxedTemplate is how gen_math_cases.py's boxed() writes a response.
const (
	boxedPrefix = "The final result follows. Therefore the answer is $\\boxed{"
	boxedSuffix = "}$."
)

// TestMathCorpusValues re-derives the labels of the corpus's cases whose
// answer and gold are plain exact numbers: both are evaluated over the
// rationals by exactValue (integers, decimals, + − × ÷, \frac, integer
// powers, factorials, \binom, exact roots, |·|, floor and ceiling), and
// the label must say whether the two values are equal. It checks the
// arithmetic behind the hand-written labels (2^100, 20!, C(100, 50) as
// digits, 0.333 ≠ 1/3), not the grader's conventions (units, sets,
// spacing, mixed numbers), which exactValue refuses, so those cases are
// left to their notes.
func TestMathCorpusValues(t *testing.T) {
	checked := 0
	for _, c := range loadMathCases(t) {
		pred, ok := strings.CutPrefix(c.Response, boxedPrefix)
		if !ok || !strings.HasSuffix(pred, boxedSuffix) {
			continue
		}
		pred = strings.TrimSuffix(pred, boxedSuffix)
		p, err1 := exactValue(pred)
		g, err2 := exactValue(c.Gold)
		if err1 != nil || err2 != nil {
			continue
		}
		checked++
		assert.Equal(t, p.Cmp(g) == 0, c.Expected, "case %d (%s): %s = %s and %s = %s, labelled %v",
			c.ID, c.Note, pred, p.RatString(), c.Gold, g.RatString(), c.Expected)
	}
	// The evaluator must not drift into refusing everything.
	require.GreaterOrEqual(t, checked, 45, "cases checked")
	t.Logf("%d cases checked", checked)
}

// TestExactValue pins the evaluator on values worked out by hand.
func TestExactValue(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"05", "5"}, {"-0", "0"}, {".5", "1/2"}, {"0.50", "1/2"},
		{`\frac{\frac{1}{2}}{\frac{3}{4}}`, "2/3"}, {`\tfrac34`, "3/4"}, {`\frac{3}{-4}`, "-3/4"},
		{`2^{3^2}`, "512"}, {`3^{-2}`, "1/9"}, {"2**10", "1024"}, {`2 \cdot 3 + 1`, "7"},
		{`12 \div 4 - 2`, "1"}, {"-2^2", "-4"}, {"5!", "120"}, {`\binom{5}{2}`, "10"},
		{"(2)(3)(4)", "24"}, {`\left(\frac{1}{2}\right)^{2}`, "1/4"}, {"|-7|", "7"},
		{`\lfloor 3.7 \rfloor`, "3"}, {`\lceil -3.2 \rceil`, "-3"}, {`\sqrt{\frac{1}{4}}`, "1/2"},
		{`\sqrt[3]{-27}`, "-3"}, {`2.5\times10^{-2}`, "1/40"},
	} {
		v, err := exactValue(c.in)
		if assert.NoError(t, err, c.in) {
			assert.Equal(t, c.want, v.RatString(), c.in)
		}
	}
	for _, in := range []string{
		"", "1,000", `1\,000`, "2^10", `3\frac{1}{2}`, `\sqrt{2}`, `8^{1/3}`, `\pi`, "x", "50\\%",
		"1.5e3", `10^{10^{10^{10}}}`, "(1", "1/0", "(-1)!", `\frac{1}{0}`,
	} {
		_, err := exactValue(in)
		assert.Error(t, err, "%q", in)
	}
}

// errNotExact marks input exactValue does not evaluate.
var errNotExact = errors.New("not a plain exact number")

// exactValue evaluates s, a number in the LaTeX of the corpus, over the
// rationals; anything else (symbols, units, lists, an irrational value,
// juxtaposition other than of parenthesised factors) is errNotExact.
func exactValue(s string) (*big.Rat, error) {
	p := &exactParser{s: s}
	v, err := p.expr()
	if err == nil && p.skip() < len(p.s) {
		err = fmt.Errorf("%w: %q left over", errNotExact, p.s[p.pos:])
	}
	return v, err
}

type exactParser struct {
	s   string
	pos int
}

// skip passes spaces and returns the position.
func (p *exactParser) skip() int {
	for p.pos < len(p.s) && p.s[p.pos] == ' ' {
		p.pos++
	}
	return p.pos
}

// eat consumes tok if it comes next.
func (p *exactParser) eat(tok string) bool {
	p.skip()
	if !strings.HasPrefix(p.s[p.pos:], tok) {
		return false
	}
	// A command must not be the prefix of a longer one (\left, \leq).
	end := p.pos + len(tok)
	if tok[0] == '\\' && end < len(p.s) && isLetter(p.s[end]) {
		return false
	}
	p.pos = end
	return true
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

func (p *exactParser) fail(what string) error {
	return fmt.Errorf("%w: %s at %q", errNotExact, what, p.s[min(p.pos, len(p.s)):])
}

// expr := term (('+' | '-') term)*
func (p *exactParser) expr() (*big.Rat, error) {
	v, err := p.term()
	for err == nil {
		switch {
		case p.eat("+"):
			var w *big.Rat
			if w, err = p.term(); err == nil {
				v.Add(v, w)
			}
		case p.eat("-"):
			var w *big.Rat
			if w, err = p.term(); err == nil {
				v.Sub(v, w)
			}
		default:
			return v, nil
		}
	}
	return nil, err
}

// term := unary ((× | · | * | ÷ | / | juxtaposed '(') unary)*
func (p *exactParser) term() (*big.Rat, error) {
	v, err := p.unary()
	for err == nil {
		var w *big.Rat
		switch {
		case p.eat(`\cdot`), p.eat(`\times`), p.eat("*"):
			if w, err = p.unary(); err == nil {
				v.Mul(v, w)
			}
		case p.eat(`\div`), p.eat("/"):
			if w, err = p.unary(); err == nil {
				if w.Sign() == 0 {
					return nil, p.fail("division by zero")
				}
				v.Quo(v, w)
			}
		case strings.HasPrefix(p.s[p.skip():], "(") || strings.HasPrefix(p.s[p.pos:], `\left(`):
			if w, err = p.unary(); err == nil {
				v.Mul(v, w)
			}
		default:
			return v, nil
		}
	}
	return nil, err
}

// unary := ('-' | '+') unary | power. A sign binds looser than a power:
// -2^2 is -4.
func (p *exactParser) unary() (*big.Rat, error) {
	if p.eat("-") {
		v, err := p.unary()
		if err != nil {
			return nil, err
		}
		return v.Neg(v), nil
	}
	if p.eat("+") {
		return p.unary()
	}
	return p.power()
}

// power := postfix (('^' | '**') exponent)?, right-associative, with an
// integer exponent of at most maxExponent.
func (p *exactParser) power() (*big.Rat, error) {
	v, err := p.postfix()
	if err != nil {
		return nil, err
	}
	var e *big.Rat
	switch {
	case p.eat("**"): // Python's power
		e, err = p.unary()
	case !p.eat("^"):
		return v, nil
	case p.eat("{"):
		e, err = p.closed("}")
	default:
		// LaTeX takes one token as the exponent (2^10 is 2¹0): one digit
		// is read, and 2^10 leaves 0 over, which is refused.
		p.skip()
		if p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			e = big.NewRat(int64(p.s[p.pos]-'0'), 1)
			p.pos++
		} else {
			e, err = p.postfix()
		}
	}
	if err != nil {
		return nil, err
	}
	const maxExponent = 10000
	if !e.IsInt() || e.Num().CmpAbs(big.NewInt(maxExponent)) > 0 {
		return nil, p.fail("exponent not a small integer")
	}
	n := e.Num().Int64()
	if n < 0 && v.Sign() == 0 {
		return nil, p.fail("0 to a negative power")
	}
	abs := max(n, -n)
	num := new(big.Int).Exp(v.Num(), big.NewInt(abs), nil)
	den := new(big.Int).Exp(v.Denom(), big.NewInt(abs), nil)
	if n < 0 {
		num, den = den, num
	}
	return new(big.Rat).SetFrac(num, den), nil
}

// postfix := primary '!'*
func (p *exactParser) postfix() (*big.Rat, error) {
	v, err := p.primary()
	for err == nil && p.eat("!") {
		if !v.IsInt() || v.Sign() < 0 || v.Num().Cmp(big.NewInt(10000)) > 0 {
			return nil, p.fail("factorial of a non-natural or huge number")
		}
		v = new(big.Rat).SetInt(new(big.Int).MulRange(1, v.Num().Int64()))
	}
	return v, err
}

// group reads '{' expr '}', or one digit (\frac12).
func (p *exactParser) group() (*big.Rat, error) {
	if p.eat("{") {
		v, err := p.expr()
		if err == nil && !p.eat("}") {
			err = p.fail("want }")
		}
		return v, err
	}
	p.skip()
	if p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		p.pos++
		return big.NewRat(int64(p.s[p.pos-1]-'0'), 1), nil
	}
	return nil, p.fail("want a group")
}

// closed reads expr then the closing token.
func (p *exactParser) closed(end string) (*big.Rat, error) {
	v, err := p.expr()
	if err == nil && !p.eat(end) {
		err = p.fail("want " + end)
	}
	return v, err
}

func (p *exactParser) primary() (*big.Rat, error) {
	switch {
	case p.eat("("):
		return p.closed(")")
	case p.eat(`\left(`):
		return p.closed(`\right)`)
	case p.eat("{"):
		return p.closed("}")
	case p.eat("|"):
		v, err := p.closed("|")
		if err != nil {
			return nil, err
		}
		return v.Abs(v), nil
	case p.eat(`\lfloor`):
		return p.rounded(`\rfloor`, false)
	case p.eat(`\lceil`):
		return p.rounded(`\rceil`, true)
	case p.eat(`\frac`), p.eat(`\dfrac`), p.eat(`\tfrac`):
		a, err := p.group()
		if err != nil {
			return nil, err
		}
		b, err := p.group()
		if err != nil {
			return nil, err
		}
		if b.Sign() == 0 {
			return nil, p.fail("division by zero")
		}
		return a.Quo(a, b), nil
	case p.eat(`\binom`), p.eat(`\dbinom`):
		n, err := p.group()
		if err != nil {
			return nil, err
		}
		k, err := p.group()
		if err != nil {
			return nil, err
		}
		if !n.IsInt() || !k.IsInt() || n.Sign() < 0 || k.Sign() < 0 || n.Cmp(k) < 0 || n.Num().Cmp(big.NewInt(10000)) > 0 {
			return nil, p.fail("binomial of non-natural numbers")
		}
		return new(big.Rat).SetInt(new(big.Int).Binomial(n.Num().Int64(), k.Num().Int64())), nil
	case p.eat(`\sqrt`):
		deg := int64(2)
		if p.eat("[") {
			d, err := p.closed("]")
			if err != nil {
				return nil, err
			}
			if !d.IsInt() || d.Num().Cmp(big.NewInt(2)) < 0 || d.Num().Cmp(big.NewInt(64)) > 0 {
				return nil, p.fail("root degree")
			}
			deg = d.Num().Int64()
		}
		v, err := p.group()
		if err != nil {
			return nil, err
		}
		return exactRoot(v, deg, p)
	}
	return p.number()
}

// rounded reads expr and end, and rounds the value down (floor) or up.
func (p *exactParser) rounded(end string, up bool) (*big.Rat, error) {
	v, err := p.closed(end)
	if err != nil {
		return nil, err
	}
	// Euclidean division by the positive denominator rounds down.
	q, m := new(big.Int).DivMod(v.Num(), v.Denom(), new(big.Int))
	if up && m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return new(big.Rat).SetInt(q), nil
}

// exactRoot is the deg-th root of v when it is rational.
func exactRoot(v *big.Rat, deg int64, p *exactParser) (*big.Rat, error) {
	neg := v.Sign() < 0
	if neg && deg%2 == 0 {
		return nil, p.fail("even root of a negative number")
	}
	root := func(x *big.Int) (*big.Int, bool) {
		x = new(big.Int).Abs(x)
		// Bisection for ⌊x^(1/deg)⌋, then an exactness check.
		lo, hi := big.NewInt(0), new(big.Int).Add(x, big.NewInt(1))
		for new(big.Int).Sub(hi, lo).Cmp(big.NewInt(1)) > 0 {
			mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
			if new(big.Int).Exp(mid, big.NewInt(deg), nil).Cmp(x) <= 0 {
				lo = mid
			} else {
				hi = mid
			}
		}
		return lo, new(big.Int).Exp(lo, big.NewInt(deg), nil).Cmp(x) == 0
	}
	n, ok1 := root(v.Num())
	d, ok2 := root(v.Denom())
	if !ok1 || !ok2 {
		return nil, p.fail("irrational root")
	}
	if neg {
		n.Neg(n)
	}
	return new(big.Rat).SetFrac(n, d), nil
}

// number := digits ('.' digits)? | '.' digits
func (p *exactParser) number() (*big.Rat, error) {
	start := p.skip()
	for p.pos < len(p.s) && (p.s[p.pos] >= '0' && p.s[p.pos] <= '9' || p.s[p.pos] == '.') {
		p.pos++
	}
	lit := p.s[start:p.pos]
	if lit == "" || strings.Count(lit, ".") > 1 || lit == "." {
		return nil, p.fail("want a number")
	}
	v, ok := new(big.Rat).SetString(lit)
	if !ok {
		return nil, p.fail("want a number")
	}
	return v, nil
}
