package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// CalculatorName is the function name of the calculator tool.
const CalculatorName = "calculator"

var calculatorSchema = FunctionSchema(CalculatorName,
	"Evaluates an arithmetic expression exactly, with integers and fractions of any size. Operators: + - * / // % ^ (or **), parentheses, sqrt(x), abs(x).",
	Param{Name: "expression", Type: "string", Description: "The expression, for example (123456789 * 987654321 + 17) % 1000.", Required: true})

// Limits of the calculator; they make every evaluation finish quickly,
// whatever the input.
const (
	// DefaultCalcMaxBits bounds the size, in bits, of every numerator and
	// denominator the calculator computes (65536 bits ≈ 19,700 digits).
	DefaultCalcMaxBits = 1 << 16
	// DefaultCalcMaxLen bounds the length of an expression in bytes.
	DefaultCalcMaxLen = 10000
	// calcMaxDepth bounds the nesting of parentheses and unary operators.
	calcMaxDepth = 200
	// sqrtDigits is the number of significant decimal digits of an
	// inexact square root.
	sqrtDigits = 40
)

// ErrCalc is wrapped by every error of expression evaluation; the
// message says what and at which byte offset.
var ErrCalc = errors.New("calculator")

// Calculator is an exact arithmetic tool in pure Go: integers and
// rationals of any size (math/big), + − × ÷ (also - * /), // (floor
// division), % (floored modulo, as in Python), ^ or ** (integer powers,
// right-associative), parentheses, sqrt and abs. Square roots are exact
// when the argument is the square of a rational and otherwise 40
// significant digits, marked inexact. Every intermediate value is bounded
// in size, so no input can make it hang or exhaust memory. It is the
// fallback tool where no Python exists.
type Calculator struct {
	// MaxBits bounds numerators and denominators; default DefaultCalcMaxBits.
	MaxBits int
	// MaxLen bounds the expression length; default DefaultCalcMaxLen.
	MaxLen int
}

// Name returns "calculator".
func (c *Calculator) Name() string { return CalculatorName }

// Schema returns the calculator's function schema: one required string
// "expression".
func (c *Calculator) Schema() json.RawMessage { return calculatorSchema }

// Call evaluates {"expression": "..."}. The Content is the value; a bad
// expression is a failed Result saying what is wrong, never an error.
// Metadata: "exact" (bool).
func (c *Calculator) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	start := time.Now()
	args, err := normalizeArgs(args)
	var a struct {
		Expression *string `json:"expression"`
	}
	if err == nil {
		if e := json.Unmarshal(args, &a); e != nil {
			err = errors.New(`field "expression" must be a string`)
		} else if a.Expression == nil {
			err = errors.New(`missing required field "expression"`)
		}
	}
	if err != nil {
		return failed(start, "bad_arguments", "Error: invalid arguments for %s: %v", CalculatorName, err), nil
	}
	v, err := c.Evaluate(*a.Expression)
	if err != nil {
		return failed(start, "bad_expression", "Error: %v", err), nil
	}
	return Result{Content: v.String(), Duration: time.Since(start), Metadata: map[string]any{"exact": v.Exact}}, nil
}

// Value is a calculator result.
type Value struct {
	// Rat is the value (for an inexact value, a decimal approximation).
	Rat *big.Rat
	// Exact is false when a square root was approximated on the way.
	Exact bool
}

// String formats v: an integer as digits, another exact rational as
// "p/q", an inexact value as a decimal with up to 40 significant digits
// prefixed by "≈".
func (v Value) String() string {
	if v.Exact {
		if v.Rat.IsInt() {
			return v.Rat.Num().String()
		}
		return v.Rat.String()
	}
	return "≈" + decimalString(v.Rat, sqrtDigits)
}

// decimalString writes r with digits significant digits, without
// trailing zeros.
func decimalString(r *big.Rat, digits int) string {
	if r.Sign() == 0 {
		return "0"
	}
	f := new(big.Float).SetPrec(uint(digits*4 + 64)).SetRat(r)
	s := f.Text('g', digits)
	if strings.ContainsAny(s, "e") {
		return s
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// Evaluate parses and evaluates expr.
func (c *Calculator) Evaluate(expr string) (Value, error) {
	maxLen := c.MaxLen
	if maxLen <= 0 {
		maxLen = DefaultCalcMaxLen
	}
	maxBits := c.MaxBits
	if maxBits <= 0 {
		maxBits = DefaultCalcMaxBits
	}
	if len(expr) > maxLen {
		return Value{}, fmt.Errorf("%w: expression is %d bytes long, the limit is %d", ErrCalc, len(expr), maxLen)
	}
	if !utf8.ValidString(expr) {
		return Value{}, fmt.Errorf("%w: expression is not valid UTF-8", ErrCalc)
	}
	p := &calcParser{src: expr, maxBits: maxBits}
	p.next()
	v, err := p.expr(0)
	if err != nil {
		return Value{}, err
	}
	if p.tok.kind != tEOF {
		return Value{}, p.errorf("unexpected %s", p.tok)
	}
	return v, nil
}

type tokKind int

const (
	tEOF tokKind = iota
	tNum
	tIdent
	tOp // + - * / // % ^ ( ) ,
	tBad
)

type token struct {
	kind tokKind
	text string
	pos  int
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of expression"
	case tBad:
		return fmt.Sprintf("character %q", t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

type calcParser struct {
	src     string
	pos     int
	tok     token
	maxBits int
}

func (p *calcParser) errorf(format string, a ...any) error {
	return fmt.Errorf("%w: at offset %d: %s", ErrCalc, p.tok.pos, fmt.Sprintf(format, a...))
}

// next scans the next token into p.tok.
func (p *calcParser) next() {
	for p.pos < len(p.src) {
		r, size := utf8.DecodeRuneInString(p.src[p.pos:])
		if !unicode.IsSpace(r) {
			break
		}
		p.pos += size
	}
	start := p.pos
	if p.pos >= len(p.src) {
		p.tok = token{kind: tEOF, pos: start}
		return
	}
	r, size := utf8.DecodeRuneInString(p.src[p.pos:])
	switch {
	case r >= '0' && r <= '9' || r == '.':
		end := p.pos
		for end < len(p.src) && (p.src[end] >= '0' && p.src[end] <= '9' || p.src[end] == '.' || p.src[end] == '_') {
			end++
		}
		// An exponent: e or E, an optional sign, digits.
		if end < len(p.src) && (p.src[end] == 'e' || p.src[end] == 'E') {
			e := end + 1
			if e < len(p.src) && (p.src[e] == '+' || p.src[e] == '-') {
				e++
			}
			if e < len(p.src) && p.src[e] >= '0' && p.src[e] <= '9' {
				for e < len(p.src) && p.src[e] >= '0' && p.src[e] <= '9' {
					e++
				}
				end = e
			}
		}
		p.pos = end
		p.tok = token{kind: tNum, text: p.src[start:end], pos: start}
	case unicode.IsLetter(r):
		end := p.pos
		for end < len(p.src) {
			q, n := utf8.DecodeRuneInString(p.src[end:])
			if !unicode.IsLetter(q) && !unicode.IsDigit(q) && q != '_' {
				break
			}
			end += n
		}
		p.pos = end
		p.tok = token{kind: tIdent, text: p.src[start:end], pos: start}
	default:
		p.pos += size
		op := string(r)
		switch r {
		case '×', '·', '∗':
			op = "*"
		case '÷', '∕':
			op = "/"
		case '−', '–':
			op = "-"
		case '*':
			if strings.HasPrefix(p.src[p.pos:], "*") {
				p.pos++
				op = "^"
			}
		case '/':
			if strings.HasPrefix(p.src[p.pos:], "/") {
				p.pos++
				op = "//"
			}
		case '+', '-', '%', '^', '(', ')', ',':
		default:
			p.tok = token{kind: tBad, text: op, pos: start}
			return
		}
		p.tok = token{kind: tOp, text: op, pos: start}
	}
}

func (p *calcParser) isOp(ops ...string) bool {
	if p.tok.kind != tOp {
		return false
	}
	for _, o := range ops {
		if p.tok.text == o {
			return true
		}
	}
	return false
}

// expr := term (("+" | "-") term)*
func (p *calcParser) expr(depth int) (Value, error) {
	if depth > calcMaxDepth {
		return Value{}, p.errorf("expression nested deeper than %d levels", calcMaxDepth)
	}
	v, err := p.term(depth)
	if err != nil {
		return v, err
	}
	for p.isOp("+", "-") {
		op := p.tok
		p.next()
		w, err := p.term(depth)
		if err != nil {
			return w, err
		}
		r := new(big.Rat)
		if op.text == "+" {
			r.Add(v.Rat, w.Rat)
		} else {
			r.Sub(v.Rat, w.Rat)
		}
		if v, err = p.checked(op, r, v.Exact && w.Exact); err != nil {
			return v, err
		}
	}
	return v, nil
}

// term := unary (("*" | "/" | "//" | "%") unary)*
func (p *calcParser) term(depth int) (Value, error) {
	v, err := p.unary(depth)
	if err != nil {
		return v, err
	}
	for p.isOp("*", "/", "//", "%") {
		op := p.tok
		p.next()
		w, err := p.unary(depth)
		if err != nil {
			return w, err
		}
		exact := v.Exact && w.Exact
		if op.text != "*" && w.Rat.Sign() == 0 {
			return Value{}, fmt.Errorf("%w: at offset %d: division by zero", ErrCalc, op.pos)
		}
		r := new(big.Rat)
		switch op.text {
		case "*":
			if err := p.fits(op, v.Rat.Num().BitLen()+w.Rat.Num().BitLen(), v.Rat.Denom().BitLen()+w.Rat.Denom().BitLen()); err != nil {
				return Value{}, err
			}
			r.Mul(v.Rat, w.Rat)
		case "/":
			if err := p.fits(op, v.Rat.Num().BitLen()+w.Rat.Denom().BitLen(), v.Rat.Denom().BitLen()+w.Rat.Num().BitLen()); err != nil {
				return Value{}, err
			}
			r.Quo(v.Rat, w.Rat)
		case "//", "%":
			// Floored division, as Python's // and %: q = ⌊v/w⌋, v % w = v − w·q.
			if err := p.fits(op, v.Rat.Num().BitLen()+w.Rat.Denom().BitLen(), v.Rat.Denom().BitLen()+w.Rat.Num().BitLen()); err != nil {
				return Value{}, err
			}
			q := floorRat(new(big.Rat).Quo(v.Rat, w.Rat))
			if op.text == "//" {
				r.SetInt(q)
			} else {
				r.Sub(v.Rat, new(big.Rat).Mul(w.Rat, new(big.Rat).SetInt(q)))
			}
		}
		if v, err = p.checked(op, r, exact); err != nil {
			return v, err
		}
	}
	return v, nil
}

// unary := ("+" | "-") unary | power
func (p *calcParser) unary(depth int) (Value, error) {
	if depth > calcMaxDepth {
		return Value{}, p.errorf("expression nested deeper than %d levels", calcMaxDepth)
	}
	if p.isOp("+", "-") {
		neg := p.tok.text == "-"
		p.next()
		v, err := p.unary(depth + 1)
		if err != nil {
			return v, err
		}
		if neg {
			v.Rat = new(big.Rat).Neg(v.Rat)
		}
		return v, nil
	}
	return p.power(depth)
}

// power := primary ("^" unary)?   (right-associative: 2^3^2 = 2^9)
func (p *calcParser) power(depth int) (Value, error) {
	base, err := p.primary(depth)
	if err != nil {
		return base, err
	}
	if !p.isOp("^") {
		return base, nil
	}
	op := p.tok
	p.next()
	exp, err := p.unary(depth + 1)
	if err != nil {
		return exp, err
	}
	if !exp.Rat.IsInt() {
		return Value{}, fmt.Errorf("%w: at offset %d: exponent %s is not an integer", ErrCalc, op.pos, exp)
	}
	e := exp.Rat.Num()
	if base.Rat.Sign() == 0 && e.Sign() < 0 {
		return Value{}, fmt.Errorf("%w: at offset %d: zero to a negative power", ErrCalc, op.pos)
	}
	// 0, 1 and -1 stay small under any power.
	absNum := new(big.Int).Abs(base.Rat.Num())
	if base.Rat.IsInt() && absNum.BitLen() <= 1 {
		r := new(big.Rat).Set(base.Rat)
		if absNum.Sign() == 0 {
			if e.Sign() == 0 {
				r.SetInt64(1)
			}
		} else if base.Rat.Sign() < 0 && e.Bit(0) == 0 {
			r.SetInt64(1)
		}
		return Value{Rat: r, Exact: base.Exact && exp.Exact}, nil
	}
	if !e.IsInt64() || e.Int64() > int64(p.maxBits) || e.Int64() < -int64(p.maxBits) {
		return Value{}, fmt.Errorf("%w: at offset %d: result of the power would exceed %d bits", ErrCalc, op.pos, p.maxBits)
	}
	n := e.Int64()
	abs := n
	if abs < 0 {
		abs = -abs
	}
	bits := max(base.Rat.Num().BitLen()-1, 0) * int(abs)
	dbits := max(base.Rat.Denom().BitLen()-1, 0) * int(abs)
	if err := p.fits(op, bits, dbits); err != nil {
		return Value{}, err
	}
	num := new(big.Int).Exp(base.Rat.Num(), big.NewInt(abs), nil)
	den := new(big.Int).Exp(base.Rat.Denom(), big.NewInt(abs), nil)
	r := new(big.Rat)
	if n >= 0 {
		r.SetFrac(num, den)
	} else {
		r.SetFrac(den, num)
	}
	return p.checked(op, r, base.Exact && exp.Exact)
}

// primary := number | "(" expr ")" | ("sqrt" | "abs") "(" expr ")"
func (p *calcParser) primary(depth int) (Value, error) {
	switch p.tok.kind {
	case tNum:
		t := p.tok
		p.next()
		return p.number(t)
	case tIdent:
		t := p.tok
		name := strings.ToLower(t.text)
		if name != "sqrt" && name != "abs" {
			return Value{}, p.errorf("unknown name %q (functions: sqrt, abs)", t.text)
		}
		p.next()
		if !p.isOp("(") {
			return Value{}, p.errorf("want ( after %s, got %s", t.text, p.tok)
		}
		p.next()
		v, err := p.expr(depth + 1)
		if err != nil {
			return v, err
		}
		if !p.isOp(")") {
			return Value{}, p.errorf("want ) to close %s(, got %s", t.text, p.tok)
		}
		p.next()
		if name == "abs" {
			return Value{Rat: new(big.Rat).Abs(v.Rat), Exact: v.Exact}, nil
		}
		return p.sqrt(t, v)
	case tOp:
		if p.tok.text == "(" {
			p.next()
			v, err := p.expr(depth + 1)
			if err != nil {
				return v, err
			}
			if !p.isOp(")") {
				return Value{}, p.errorf("want ), got %s", p.tok)
			}
			p.next()
			return v, nil
		}
	}
	return Value{}, p.errorf("want a number, ( or a function, got %s", p.tok)
}

// number parses an integer or decimal literal, with an optional exponent
// and _ separators, exactly.
func (p *calcParser) number(t token) (Value, error) {
	s := strings.ReplaceAll(t.text, "_", "")
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		var e big.Int
		if _, ok := e.SetString(s[i+1:], 10); !ok || !e.IsInt64() {
			return Value{}, fmt.Errorf("%w: at offset %d: bad number %q", ErrCalc, t.pos, t.text)
		}
		exp = e.Int64()
	}
	if mant == "" || mant == "." || strings.Count(mant, ".") > 1 {
		return Value{}, fmt.Errorf("%w: at offset %d: bad number %q", ErrCalc, t.pos, t.text)
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	exp -= int64(len(frac))
	// 10^|exp| has about 3.33·|exp| bits.
	if exp > int64(p.maxBits)/3 || exp < -int64(p.maxBits)/3 {
		return Value{}, fmt.Errorf("%w: at offset %d: number %q exceeds %d bits", ErrCalc, t.pos, t.text, p.maxBits)
	}
	n, ok := new(big.Int).SetString(intPart+frac, 10)
	if !ok {
		return Value{}, fmt.Errorf("%w: at offset %d: bad number %q", ErrCalc, t.pos, t.text)
	}
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(max(exp, -exp)), nil)
	r := new(big.Rat)
	if exp >= 0 {
		r.SetInt(n.Mul(n, pow))
	} else {
		r.SetFrac(n, pow)
	}
	return p.checked(t, r, true)
}

// sqrt returns the exact root of a square of a rational, or else a
// 40-digit approximation.
func (p *calcParser) sqrt(t token, v Value) (Value, error) {
	if v.Rat.Sign() < 0 {
		return Value{}, fmt.Errorf("%w: at offset %d: sqrt of a negative number", ErrCalc, t.pos)
	}
	num, den := v.Rat.Num(), v.Rat.Denom()
	sn, sd := new(big.Int).Sqrt(num), new(big.Int).Sqrt(den)
	if new(big.Int).Mul(sn, sn).Cmp(num) == 0 && new(big.Int).Mul(sd, sd).Cmp(den) == 0 {
		return Value{Rat: new(big.Rat).SetFrac(sn, sd), Exact: v.Exact}, nil
	}
	prec := uint(max(num.BitLen(), den.BitLen())/2 + sqrtDigits*4 + 64)
	f := new(big.Float).SetPrec(prec).SetRat(v.Rat)
	f.Sqrt(f)
	// Keep sqrtDigits significant digits, so that the value shown is the
	// value used in later operations.
	s := f.Text('e', sqrtDigits-1)
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return Value{}, fmt.Errorf("%w: at offset %d: sqrt failed", ErrCalc, t.pos)
	}
	return p.checked(t, r, false)
}

// fits reports an error when a result's numerator or denominator would
// need more than maxBits bits (estimated before computing it).
func (p *calcParser) fits(op token, numBits, denBits int) error {
	if numBits > p.maxBits+1 || denBits > p.maxBits+1 {
		return fmt.Errorf("%w: at offset %d: result of %q would exceed %d bits", ErrCalc, op.pos, op.text, p.maxBits)
	}
	return nil
}

func (p *calcParser) checked(op token, r *big.Rat, exact bool) (Value, error) {
	if r.Num().BitLen() > p.maxBits || r.Denom().BitLen() > p.maxBits {
		return Value{}, fmt.Errorf("%w: at offset %d: result of %q exceeds %d bits", ErrCalc, op.pos, op.text, p.maxBits)
	}
	return Value{Rat: r, Exact: exact}, nil
}

// floorRat returns ⌊r⌋.
func floorRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	_ = m // DivMod is Euclidean; with a positive denominator it is the floor.
	return q
}
