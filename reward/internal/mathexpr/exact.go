package mathexpr

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// Exact arithmetic.
//
// A scalar is a rational function N/D whose numerator and denominator are
// polynomials. A polynomial is a sum of terms c·m, c a rational and m a
// monomial: a product of generators with exponents. The generators are
//
//   - free symbols, π, e, ∞ and opaque atoms (sin(x), ln 2, 2^x ...), with
//     non-negative integer exponents; they are treated as algebraically
//     independent;
//   - the imaginary unit i, with exponent 0 or 1 (i² is folded to −1);
//   - primes p with a rational exponent in (0, 1) (2^{1/2} = √2, 3^{2/3}).
//
// Products of prime powers with exponents in [0, 1) are linearly independent
// over ℚ(i) (Besicovitch), so a polynomial in this form is zero exactly when
// all its coefficients are, and N₁·D₂ − N₂·D₁ = 0 decides N₁/D₁ = N₂/D₂
// without computing inverses. Only opaque atoms make "not zero" unreliable
// (sin(π/6) − 1/2 is zero), and the caller then asks numeric evaluation.

// limits for exact arithmetic.
const (
	maxBits     = 1 << 17 // bits in any numerator or denominator
	maxTerms    = 1024    // terms in one polynomial
	maxSteps    = 1 << 16 // term multiplications per comparison (≈10 µs each at worst)
	maxFactor   = 1e10    // largest radicand factored by trial division
	maxFactArg  = 3000    // largest n for an exact n!
	maxPolyPow  = 64      // largest integer power of a multi-term polynomial
	pollEvery   = 1 << 10 // steps between context polls
	primeSymbol = "#"     // prefix of prime-radical generator names
)

// errNotScalar reports a set, tuple, relation or text where a number was needed.
var errNotScalar = errors.New("mathexpr: not a scalar")

// errUndefined reports division by zero and similar.
var errUndefined = errors.New("mathexpr: undefined value")

type gen struct {
	name string
	num  int64 // exponent numerator
	den  int64 // exponent denominator (1 for symbols)
}

type term struct {
	gens []gen // sorted by name
	c    *big.Rat
}

type poly map[string]*term

type ratFn struct {
	n, d   poly
	opaque bool // contains an opaque atom
}

type budget struct {
	ctx   context.Context
	steps int
}

func (b *budget) spend(k int) error {
	before := b.steps
	b.steps += k
	if b.steps > maxSteps {
		return fmt.Errorf("%w: more than %d exact steps", ErrBudget, maxSteps)
	}
	if before/pollEvery != b.steps/pollEvery {
		if err := b.ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

func monoKey(gs []gen) string {
	var sb strings.Builder
	for i, g := range gs {
		if i > 0 {
			sb.WriteByte('*')
		}
		sb.WriteString(g.name)
		if g.num != 1 || g.den != 1 {
			sb.WriteByte('^')
			sb.WriteString(strconv.FormatInt(g.num, 10))
			if g.den != 1 {
				sb.WriteByte('/')
				sb.WriteString(strconv.FormatInt(g.den, 10))
			}
		}
	}
	return sb.String()
}

func constPoly(r *big.Rat) poly {
	if r.Sign() == 0 {
		return poly{}
	}
	return poly{"": {c: new(big.Rat).Set(r)}}
}

func genPoly(g gen) poly {
	gs := []gen{g}
	return poly{monoKey(gs): {gens: gs, c: big.NewRat(1, 1)}}
}

func (p poly) isZero() bool { return len(p) == 0 }

// constant returns the rational value of p when p has no generators.
func (p poly) constant() (*big.Rat, bool) {
	switch len(p) {
	case 0:
		return new(big.Rat), true
	case 1:
		if t, ok := p[""]; ok {
			return t.c, true
		}
	}
	return nil, false
}

func checkBits(r *big.Rat) error {
	if r.Num().BitLen()+r.Denom().BitLen() > maxBits {
		return fmt.Errorf("%w: a value exceeds %d bits", ErrTooLarge, maxBits)
	}
	return nil
}

func (p poly) add(q poly, sign int) (poly, error) {
	out := make(poly, len(p)+len(q))
	for k, t := range p {
		out[k] = &term{gens: t.gens, c: new(big.Rat).Set(t.c)}
	}
	for k, t := range q {
		c := t.c
		if sign < 0 {
			c = new(big.Rat).Neg(c)
		}
		if o, ok := out[k]; ok {
			o.c.Add(o.c, c)
			if o.c.Sign() == 0 {
				delete(out, k)
			} else if err := checkBits(o.c); err != nil {
				return nil, err
			}
		} else {
			out[k] = &term{gens: t.gens, c: new(big.Rat).Set(c)}
		}
	}
	if len(out) > maxTerms {
		return nil, fmt.Errorf("%w: more than %d terms", ErrTooLarge, maxTerms)
	}
	return out, nil
}

// mulGens multiplies two monomials; it returns the product's generators
// and a rational factor released by folding (p^{3/2} = p·p^{1/2}, i² = −1).
func mulGens(a, b []gen) ([]gen, *big.Rat, error) {
	out := make([]gen, 0, len(a)+len(b))
	factor := big.NewRat(1, 1)
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var g gen
		switch {
		case j >= len(b) || (i < len(a) && a[i].name < b[j].name):
			g = a[i]
			i++
		case i >= len(a) || b[j].name < a[i].name:
			g = b[j]
			j++
		default:
			n := a[i].num*b[j].den + b[j].num*a[i].den
			d := a[i].den * b[j].den
			g = gen{name: a[i].name, num: n, den: d}
			g.num, g.den = reduce(g.num, g.den)
			i++
			j++
		}
		if g.num > 1<<40 || g.den > 1<<40 {
			return nil, nil, fmt.Errorf("%w: exponent overflow", ErrTooLarge)
		}
		switch {
		case g.name == "i":
			if g.num%2 == 0 {
				if g.num%4 == 2 {
					factor.Neg(factor)
				}
				continue
			}
			if g.num%4 == 3 {
				factor.Neg(factor)
			}
			g.num = 1
		case strings.HasPrefix(g.name, primeSymbol) && g.num >= g.den:
			whole := g.num / g.den
			p, _ := strconv.ParseInt(g.name[len(primeSymbol):], 10, 64)
			f, err := ratPow(big.NewRat(p, 1), whole)
			if err != nil {
				return nil, nil, err
			}
			factor.Mul(factor, f)
			g.num -= whole * g.den
			if g.num == 0 {
				continue
			}
		}
		out = append(out, g)
	}
	return out, factor, nil
}

func reduce(n, d int64) (int64, int64) {
	a, b := n, d
	if a < 0 {
		a = -a
	}
	for b != 0 {
		a, b = b, a%b
	}
	if a == 0 {
		return n, d
	}
	return n / a, d / a
}

func (p poly) mul(q poly, bud *budget) (poly, error) {
	if err := bud.spend(len(p) * len(q)); err != nil {
		return nil, err
	}
	out := make(poly)
	k := 0
	for _, s := range p {
		for _, t := range q {
			if k++; k%pollEvery == 0 {
				if err := bud.ctx.Err(); err != nil {
					return nil, err
				}
			}
			gs, f, err := mulGens(s.gens, t.gens)
			if err != nil {
				return nil, err
			}
			c := new(big.Rat).Mul(s.c, t.c)
			c.Mul(c, f)
			if err := checkBits(c); err != nil {
				return nil, err
			}
			k := monoKey(gs)
			if o, ok := out[k]; ok {
				o.c.Add(o.c, c)
				if o.c.Sign() == 0 {
					delete(out, k)
				}
			} else if c.Sign() != 0 {
				out[k] = &term{gens: gs, c: c}
			}
		}
	}
	if len(out) > maxTerms {
		return nil, fmt.Errorf("%w: more than %d terms", ErrTooLarge, maxTerms)
	}
	return out, nil
}

func (p poly) scale(r *big.Rat) poly {
	out := make(poly, len(p))
	for k, t := range p {
		out[k] = &term{gens: t.gens, c: new(big.Rat).Mul(t.c, r)}
	}
	return out
}

func (p poly) String() string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for i, k := range keys {
		if i > 0 {
			sb.WriteString(" + ")
		}
		sb.WriteString(p[k].c.RatString())
		if k != "" {
			sb.WriteString("*" + k)
		}
	}
	if len(keys) == 0 {
		return "0"
	}
	return sb.String()
}

// ratPow computes r^n exactly for an integer n, refusing results above maxBits.
func ratPow(r *big.Rat, n int64) (*big.Rat, error) {
	if n == 0 {
		return big.NewRat(1, 1), nil
	}
	if r.Sign() == 0 {
		if n < 0 {
			return nil, fmt.Errorf("%w: 0 to a negative power", errUndefined)
		}
		return new(big.Rat), nil
	}
	abs := n
	if abs < 0 {
		abs = -abs
	}
	num, den := r.Num(), r.Denom()
	if isUnit(num) && isUnit(den) {
		out := new(big.Rat).Set(r)
		if abs%2 == 0 {
			out.Abs(out)
		}
		return out, nil
	}
	bits := int64(num.BitLen() + den.BitLen())
	if abs > maxBits || (bits-1)*abs > maxBits {
		return nil, fmt.Errorf("%w: power with about %d bits", ErrTooLarge, (bits-1)*abs)
	}
	e := big.NewInt(abs)
	pn := new(big.Int).Exp(num, e, nil)
	pd := new(big.Int).Exp(den, e, nil)
	if n < 0 {
		pn, pd = pd, pn
	}
	return new(big.Rat).SetFrac(pn, pd), nil
}

func isUnit(x *big.Int) bool { return x.IsInt64() && (x.Int64() == 1 || x.Int64() == -1) }

// --- rational functions -----------------------------------------------------

func constFn(r *big.Rat) ratFn { return ratFn{n: constPoly(r), d: constPoly(big.NewRat(1, 1))} }

func genFn(g gen) ratFn { return ratFn{n: genPoly(g), d: constPoly(big.NewRat(1, 1))} }

// normalize divides through by a constant denominator, so that sums of
// terms with rational denominators stay polynomials.
func (f ratFn) normalize() ratFn {
	if c, ok := f.d.constant(); ok && c.Sign() != 0 {
		if c.Cmp(big.NewRat(1, 1)) != 0 {
			inv := new(big.Rat).Inv(c)
			return ratFn{n: f.n.scale(inv), d: constPoly(big.NewRat(1, 1)), opaque: f.opaque}
		}
	}
	return f
}

func (f ratFn) add(g ratFn, sign int, bud *budget) (ratFn, error) {
	op := f.opaque || g.opaque
	if f.d.String() == g.d.String() {
		n, err := f.n.add(g.n, sign)
		if err != nil {
			return ratFn{}, err
		}
		return ratFn{n: n, d: f.d, opaque: op}.normalize(), nil
	}
	a, err := f.n.mul(g.d, bud)
	if err != nil {
		return ratFn{}, err
	}
	b, err := g.n.mul(f.d, bud)
	if err != nil {
		return ratFn{}, err
	}
	n, err := a.add(b, sign)
	if err != nil {
		return ratFn{}, err
	}
	d, err := f.d.mul(g.d, bud)
	if err != nil {
		return ratFn{}, err
	}
	return ratFn{n: n, d: d, opaque: op}.normalize(), nil
}

func (f ratFn) mul(g ratFn, bud *budget) (ratFn, error) {
	n, err := f.n.mul(g.n, bud)
	if err != nil {
		return ratFn{}, err
	}
	d, err := f.d.mul(g.d, bud)
	if err != nil {
		return ratFn{}, err
	}
	return ratFn{n: n, d: d, opaque: f.opaque || g.opaque}.normalize(), nil
}

func (f ratFn) inv() (ratFn, error) {
	if f.n.isZero() {
		return ratFn{}, fmt.Errorf("%w: division by zero", errUndefined)
	}
	return ratFn{n: f.d, d: f.n, opaque: f.opaque}.normalize(), nil
}

func (f ratFn) constant() (*big.Rat, bool) {
	n, ok := f.n.constant()
	if !ok {
		return nil, false
	}
	d, ok := f.d.constant()
	if !ok || d.Sign() == 0 {
		return nil, false
	}
	return new(big.Rat).Quo(n, d), true
}

func (f ratFn) key() string {
	if c, ok := f.d.constant(); ok && c.Cmp(big.NewRat(1, 1)) == 0 {
		return f.n.String()
	}
	return "(" + f.n.String() + ")/(" + f.d.String() + ")"
}

// equalFn decides f = g exactly; decided is false when opaque atoms make a
// non-zero difference inconclusive.
func equalFn(f, g ratFn, bud *budget) (equal, decided bool, err error) {
	a, err := f.n.mul(g.d, bud)
	if err != nil {
		return false, false, err
	}
	b, err := g.n.mul(f.d, bud)
	if err != nil {
		return false, false, err
	}
	diff, err := a.add(b, -1)
	if err != nil {
		return false, false, err
	}
	if diff.isZero() {
		return true, true, nil
	}
	return false, !(f.opaque || g.opaque), nil
}

// --- from trees ----------------------------------------------------------------

type exactEnv struct {
	bud *budget
}

func (e *exactEnv) opaqueAtom(key string) ratFn {
	f := genFn(gen{name: "@" + key, num: 1, den: 1})
	f.opaque = true
	return f
}

// eval converts a scalar tree to a rational function.
func (e *exactEnv) eval(n *Node, depth int) (ratFn, error) {
	if depth > maxDepth {
		return ratFn{}, ErrTooDeep
	}
	if err := e.bud.spend(1); err != nil {
		return ratFn{}, err
	}
	switch n.Kind {
	case KNum:
		if err := checkBits(n.Num); err != nil {
			return ratFn{}, err
		}
		return constFn(n.Num), nil
	case KSym:
		if n.Name == "i" {
			return genFn(gen{name: "i", num: 1, den: 1}), nil
		}
		if n.Name == "E" {
			return genFn(gen{name: "e", num: 1, den: 1}), nil
		}
		return genFn(gen{name: n.Name, num: 1, den: 1}), nil
	case KInf:
		return genFn(gen{name: "oo", num: 1, den: 1}), nil
	case KAdd:
		acc := constFn(new(big.Rat))
		for _, a := range n.Args {
			v, err := e.eval(a, depth+1)
			if err != nil {
				return ratFn{}, err
			}
			if acc, err = acc.add(v, 1, e.bud); err != nil {
				return ratFn{}, err
			}
		}
		return acc, nil
	case KMul:
		acc := constFn(big.NewRat(1, 1))
		for _, a := range n.Args {
			v, err := e.eval(a, depth+1)
			if err != nil {
				return ratFn{}, err
			}
			if acc, err = acc.mul(v, e.bud); err != nil {
				return ratFn{}, err
			}
		}
		return acc, nil
	case KDiv:
		a, err := e.eval(n.Args[0], depth+1)
		if err != nil {
			return ratFn{}, err
		}
		b, err := e.eval(n.Args[1], depth+1)
		if err != nil {
			return ratFn{}, err
		}
		bi, err := b.inv()
		if err != nil {
			return ratFn{}, err
		}
		return a.mul(bi, e.bud)
	case KNeg:
		a, err := e.eval(n.Args[0], depth+1)
		if err != nil {
			return ratFn{}, err
		}
		return ratFn{n: a.n.scale(big.NewRat(-1, 1)), d: a.d, opaque: a.opaque}, nil
	case KPercent:
		a, err := e.eval(n.Args[0], depth+1)
		if err != nil {
			return ratFn{}, err
		}
		return a.mul(constFn(big.NewRat(1, 100)), e.bud)
	case KPow:
		return e.pow(n, depth)
	case KFunc:
		return e.fn(n, depth)
	}
	return ratFn{}, fmt.Errorf("%w: %s", errNotScalar, n)
}

func (e *exactEnv) pow(n *Node, depth int) (ratFn, error) {
	base, err := e.eval(n.Args[0], depth+1)
	if err != nil {
		return ratFn{}, err
	}
	ex, err := e.eval(n.Args[1], depth+1)
	if err != nil {
		return ratFn{}, err
	}
	r, ok := ex.constant()
	if !ok {
		// e^x, 2^x, x^y: an opaque atom keyed by its canonical parts.
		if n.Args[0].Kind == KSym && (n.Args[0].Name == "e" || n.Args[0].Name == "E") {
			return e.opaqueAtom("exp(" + ex.key() + ")"), nil
		}
		return e.opaqueAtom("pow(" + base.key() + "," + ex.key() + ")"), nil
	}
	return e.powRat(base, r, n)
}

func (e *exactEnv) powRat(base ratFn, r *big.Rat, n *Node) (ratFn, error) {
	if r.IsInt() {
		if !r.Num().IsInt64() {
			return ratFn{}, fmt.Errorf("%w: exponent %s", ErrTooLarge, r.RatString())
		}
		k := r.Num().Int64()
		if k < 0 {
			inv, err := base.inv()
			if err != nil {
				return ratFn{}, err
			}
			base, k = inv, -k
		}
		return e.intPow(base, k)
	}
	// Rational exponent: exact only for a single-term constant base.
	nt, nok := singleConst(base.n)
	dt, dok := singleConst(base.d)
	if !nok || !dok || base.opaque {
		return e.opaqueAtom("pow(" + base.key() + "," + r.RatString() + ")"), nil
	}
	a, err := radicalPow(nt, r, e.bud)
	if err != nil {
		if errors.Is(err, errNoExact) {
			return e.opaqueAtom("pow(" + base.key() + "," + r.RatString() + ")"), nil
		}
		return ratFn{}, err
	}
	b, err := radicalPow(dt, r, e.bud)
	if err != nil {
		if errors.Is(err, errNoExact) {
			return e.opaqueAtom("pow(" + base.key() + "," + r.RatString() + ")"), nil
		}
		return ratFn{}, err
	}
	if b.n.isZero() {
		return ratFn{}, fmt.Errorf("%w: division by zero in %s", errUndefined, n)
	}
	return a.mul(ratFn{n: b.d, d: b.n}, e.bud)
}

func (e *exactEnv) intPow(base ratFn, k int64) (ratFn, error) {
	if k == 0 {
		return constFn(big.NewRat(1, 1)), nil // 0^0 = 1, as in sympy and Python
	}
	if len(base.n) == 1 && len(base.d) == 1 {
		n, err := monoPow(base.n, k)
		if err != nil {
			return ratFn{}, err
		}
		d, err := monoPow(base.d, k)
		if err != nil {
			return ratFn{}, err
		}
		return ratFn{n: n, d: d, opaque: base.opaque}.normalize(), nil
	}
	if base.n.isZero() {
		return base, nil
	}
	if k > maxPolyPow {
		return ratFn{}, fmt.Errorf("%w: power %d of a sum", ErrTooLarge, k)
	}
	acc := constFn(big.NewRat(1, 1))
	sq := base
	for k > 0 {
		var err error
		if k&1 == 1 {
			if acc, err = acc.mul(sq, e.bud); err != nil {
				return ratFn{}, err
			}
		}
		k >>= 1
		if k > 0 {
			if sq, err = sq.mul(sq, e.bud); err != nil {
				return ratFn{}, err
			}
		}
	}
	return acc, nil
}

// monoPow raises a one-term polynomial to a positive integer power.
func monoPow(p poly, k int64) (poly, error) {
	for _, t := range p {
		c, err := ratPow(t.c, k)
		if err != nil {
			return nil, err
		}
		gs := make([]gen, 0, len(t.gens))
		for _, g := range t.gens {
			if g.num > (1<<40)/k {
				return nil, fmt.Errorf("%w: exponent overflow", ErrTooLarge)
			}
			gs = append(gs, gen{name: g.name, num: g.num * k, den: g.den})
		}
		// Fold the raised generators through mulGens with the empty monomial.
		folded, f, err := mulGens(gs, nil)
		if err != nil {
			return nil, err
		}
		c.Mul(c, f)
		if err := checkBits(c); err != nil {
			return nil, err
		}
		return poly{monoKey(folded): {gens: folded, c: c}}, nil
	}
	return poly{}, nil
}

// singleConst returns the only term of p when it is a constant term with
// only prime-radical generators.
func singleConst(p poly) (*term, bool) {
	if len(p) == 0 {
		return &term{c: new(big.Rat)}, true
	}
	if len(p) != 1 {
		return nil, false
	}
	for _, t := range p {
		for _, g := range t.gens {
			if !strings.HasPrefix(g.name, primeSymbol) {
				return nil, false
			}
		}
		return t, true
	}
	return nil, false
}

var errNoExact = errors.New("mathexpr: no exact form")

// radicalPow computes (c·∏p^{a_p})^r for a rational r, as a rational function
// (negative exponents land in the denominator).
func radicalPow(t *term, r *big.Rat, bud *budget) (ratFn, error) {
	if t.c.Sign() == 0 {
		if r.Sign() <= 0 {
			return ratFn{}, fmt.Errorf("%w: 0 to a non-positive power", errUndefined)
		}
		return constFn(new(big.Rat)), nil
	}
	if !r.Num().IsInt64() || !r.Denom().IsInt64() {
		return ratFn{}, errNoExact
	}
	rn, rd := r.Num().Int64(), r.Denom().Int64()
	if rd > 1<<20 || rn > 1<<20 || rn < -(1<<20) {
		return ratFn{}, errNoExact
	}
	exps := map[int64][2]int64{} // prime → exponent as a fraction
	addExp := func(p, n, d int64) {
		cur, ok := exps[p]
		if !ok {
			cur = [2]int64{0, 1}
		}
		nn, dd := reduce(cur[0]*d+n*cur[1], cur[1]*d)
		exps[p] = [2]int64{nn, dd}
	}
	sign := t.c.Sign()
	for _, part := range []struct {
		x   *big.Int
		neg bool
	}{{new(big.Int).Abs(t.c.Num()), false}, {t.c.Denom(), true}} {
		if !part.x.IsInt64() || float64(part.x.Int64()) > maxFactor {
			return ratFn{}, errNoExact
		}
		fs, err := factor(part.x.Int64(), bud)
		if err != nil {
			return ratFn{}, err
		}
		for p, k := range fs {
			if part.neg {
				k = -k
			}
			addExp(p, k, 1)
		}
	}
	for _, g := range t.gens {
		p, _ := strconv.ParseInt(g.name[len(primeSymbol):], 10, 64)
		addExp(p, g.num, g.den)
	}
	out := constFn(big.NewRat(1, 1))
	if sign < 0 {
		switch {
		case rd%2 == 1:
			if rn%2 != 0 {
				out = constFn(big.NewRat(-1, 1))
			}
		case rd == 2:
			// (−x)^{n/2} = i^n · x^{n/2}
			out = ratFn{n: genPoly(gen{name: "i", num: 1, den: 1}), d: constPoly(big.NewRat(1, 1))}
			var err error
			if out, err = (&exactEnv{bud: bud}).intPow(out, ((rn%4)+4)%4); err != nil {
				return ratFn{}, err
			}
		default:
			return ratFn{}, errNoExact
		}
	}
	primes := make([]int64, 0, len(exps))
	for p := range exps {
		primes = append(primes, p)
	}
	sort.Slice(primes, func(i, j int) bool { return primes[i] < primes[j] })
	for _, p := range primes {
		ex := exps[p]
		n, d := reduce(ex[0]*rn, ex[1]*rd)
		if d < 0 {
			n, d = -n, -d
		}
		whole := n / d
		if n%d != 0 && n < 0 {
			whole--
		}
		frac := n - whole*d
		c, err := ratPow(big.NewRat(p, 1), whole)
		if err != nil {
			return ratFn{}, err
		}
		f := constFn(c)
		if frac != 0 {
			f, err = f.mul(genFn(gen{name: primeSymbol + strconv.FormatInt(p, 10), num: frac, den: d}), bud)
			if err != nil {
				return ratFn{}, err
			}
		}
		if out, err = out.mul(f, bud); err != nil {
			return ratFn{}, err
		}
	}
	return out, nil
}

// factor returns the prime factorisation of n ≥ 1 by trial division.
func factor(n int64, bud *budget) (map[int64]int64, error) {
	out := map[int64]int64{}
	for p := int64(2); p*p <= n; p++ {
		if p%1024 == 0 {
			if err := bud.spend(1); err != nil {
				return nil, err
			}
		}
		for n%p == 0 {
			out[p]++
			n /= p
		}
	}
	if n > 1 {
		out[n]++
	}
	return out, nil
}

func (e *exactEnv) fn(n *Node, depth int) (ratFn, error) {
	args := make([]ratFn, len(n.Args))
	for i, a := range n.Args {
		v, err := e.eval(a, depth+1)
		if err != nil {
			return ratFn{}, err
		}
		args[i] = v
	}
	consts := make([]*big.Rat, len(args))
	allConst := true
	for i, a := range args {
		c, ok := a.constant()
		consts[i] = c
		allConst = allConst && ok
	}
	switch n.Name {
	case "sqrt":
		if len(args) == 1 {
			return e.powRat(args[0], big.NewRat(1, 2), n)
		}
	case "root":
		if len(args) == 2 && allConst || (len(args) == 2 && consts[1] != nil) {
			if consts[1].Sign() == 0 {
				return ratFn{}, fmt.Errorf("%w: zeroth root", errUndefined)
			}
			return e.powRat(args[0], new(big.Rat).Inv(consts[1]), n)
		}
	case "factorial":
		if len(args) == 1 && consts[0] != nil && consts[0].IsInt() && consts[0].Sign() >= 0 {
			if consts[0].Num().Cmp(big.NewInt(maxFactArg)) > 0 {
				return ratFn{}, fmt.Errorf("%w: %s! (limit %d!)", ErrTooLarge, consts[0].RatString(), maxFactArg)
			}
			k := consts[0].Num().Int64()
			if err := e.bud.spend(int(k)); err != nil {
				return ratFn{}, err
			}
			return constFn(new(big.Rat).SetInt(new(big.Int).MulRange(1, k))), nil
		}
	case "binom":
		if len(args) == 2 && allConst && consts[0].IsInt() && consts[1].IsInt() {
			nn, kk := consts[0].Num(), consts[1].Num()
			if !nn.IsInt64() || !kk.IsInt64() {
				return ratFn{}, fmt.Errorf("%w: binomial", ErrTooLarge)
			}
			a, b := nn.Int64(), kk.Int64()
			if b < 0 || a < 0 || b > a {
				return constFn(new(big.Rat)), nil
			}
			if min(b, a-b) > maxFactArg || a > 1<<32 {
				return ratFn{}, fmt.Errorf("%w: binomial(%d, %d)", ErrTooLarge, a, b)
			}
			if err := e.bud.spend(int(min(b, a-b))); err != nil {
				return ratFn{}, err
			}
			return constFn(new(big.Rat).SetInt(new(big.Int).Binomial(a, b))), nil
		}
	case "abs":
		if len(args) == 1 && consts[0] != nil {
			return constFn(new(big.Rat).Abs(consts[0])), nil
		}
	case "floor", "ceil":
		if len(args) == 1 && consts[0] != nil {
			q := new(big.Int).Div(consts[0].Num(), consts[0].Denom()) // Euclidean: floor for positive denominators
			if n.Name == "ceil" && !consts[0].IsInt() {
				q.Add(q, big.NewInt(1))
			}
			return constFn(new(big.Rat).SetInt(q)), nil
		}
	case "gcd", "max", "min":
		if len(args) >= 1 && allConst {
			acc := new(big.Rat).Set(consts[0])
			for _, c := range consts[1:] {
				switch n.Name {
				case "max":
					if c.Cmp(acc) > 0 {
						acc.Set(c)
					}
				case "min":
					if c.Cmp(acc) < 0 {
						acc.Set(c)
					}
				case "gcd":
					if !acc.IsInt() || !c.IsInt() {
						return e.opaqueFn(n.Name, args), nil
					}
					acc.SetInt(new(big.Int).GCD(nil, nil, new(big.Int).Abs(acc.Num()), new(big.Int).Abs(c.Num())))
				}
			}
			return constFn(acc), nil
		}
	case "exp":
		if len(args) == 1 {
			if consts[0] != nil && consts[0].Sign() == 0 {
				return constFn(big.NewRat(1, 1)), nil
			}
			if consts[0] != nil && consts[0].IsInt() && consts[0].Num().IsInt64() {
				return e.intPowSigned(genFn(gen{name: "e", num: 1, den: 1}), consts[0].Num().Int64())
			}
			return e.opaqueAtom("exp(" + args[0].key() + ")"), nil
		}
	case "ln":
		if len(args) == 1 && consts[0] != nil && consts[0].Cmp(big.NewRat(1, 1)) == 0 {
			return constFn(new(big.Rat)), nil
		}
	case "sin", "tan", "arcsin", "arctan", "sinh", "tanh":
		if len(args) == 1 && consts[0] != nil && consts[0].Sign() == 0 {
			return constFn(new(big.Rat)), nil
		}
	case "cos", "cosh":
		if len(args) == 1 && consts[0] != nil && consts[0].Sign() == 0 {
			return constFn(big.NewRat(1, 1)), nil
		}
	}
	return e.opaqueFn(n.Name, args), nil
}

func (e *exactEnv) intPowSigned(base ratFn, k int64) (ratFn, error) {
	if k < 0 {
		inv, err := base.inv()
		if err != nil {
			return ratFn{}, err
		}
		return e.intPow(inv, -k)
	}
	return e.intPow(base, k)
}

func (e *exactEnv) opaqueFn(name string, args []ratFn) ratFn {
	keys := make([]string, len(args))
	for i, a := range args {
		keys[i] = a.key()
	}
	return e.opaqueAtom(name + "(" + strings.Join(keys, ",") + ")")
}
