package mathexpr

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"math/cmplx"
)

// Numeric evaluation in complex128, the fallback when exact arithmetic
// cannot decide (opaque functions such as sin, ln, e^x). Free symbols take
// pseudo-random values derived from their names, the same for both sides.

const (
	numericPoints = 3
	relTol        = 1e-9
	absTol        = 1e-12
)

type numEnv struct {
	bud   *budget
	point int
}

// symbolValue is a deterministic value for symbol name at sample k, of
// magnitude in [0.6, 2.6): positive at the first sample, negative at the
// second and of either sign after, so that |x| and x, or \sqrt{x^2} and x,
// differ as they do for real x (evaluation is complex, so roots and logs
// of negative values stay defined and consistent on both sides).
func symbolValue(name string, k int) complex128 {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{byte(k)})
	sum := h.Sum64()
	u := float64(sum>>11) / float64(1<<53)
	v := 0.6 + 2*u
	if k == 1 || (k > 1 && sum&1 == 1) {
		v = -v
	}
	return complex(v, 0)
}

func (e *numEnv) eval(n *Node, depth int) (complex128, error) {
	if depth > maxDepth {
		return 0, ErrTooDeep
	}
	if err := e.bud.spend(1); err != nil {
		return 0, err
	}
	switch n.Kind {
	case KNum:
		f, _ := n.Num.Float64()
		return complex(f, 0), nil
	case KSym:
		switch n.Name {
		case "pi":
			return math.Pi, nil
		case "e", "E":
			return math.E, nil
		case "i":
			return 1i, nil
		}
		return symbolValue(n.Name, e.point), nil
	case KInf:
		return complex(math.Inf(1), 0), nil
	case KAdd:
		var s complex128
		for _, a := range n.Args {
			v, err := e.eval(a, depth+1)
			if err != nil {
				return 0, err
			}
			s += v
		}
		return s, nil
	case KMul:
		s := complex(1, 0)
		for _, a := range n.Args {
			v, err := e.eval(a, depth+1)
			if err != nil {
				return 0, err
			}
			s *= v
		}
		return s, nil
	case KDiv:
		a, err := e.eval(n.Args[0], depth+1)
		if err != nil {
			return 0, err
		}
		b, err := e.eval(n.Args[1], depth+1)
		if err != nil {
			return 0, err
		}
		if b == 0 {
			return 0, fmt.Errorf("%w: division by zero", errUndefined)
		}
		return a / b, nil
	case KNeg:
		a, err := e.eval(n.Args[0], depth+1)
		return -a, err
	case KPercent:
		a, err := e.eval(n.Args[0], depth+1)
		return a / 100, err
	case KPow:
		a, err := e.eval(n.Args[0], depth+1)
		if err != nil {
			return 0, err
		}
		b, err := e.eval(n.Args[1], depth+1)
		if err != nil {
			return 0, err
		}
		return realPow(a, b, n.Args[1]), nil
	case KFunc:
		return e.fn(n, depth)
	}
	return 0, fmt.Errorf("%w: %s", errNotScalar, n)
}

// realPow takes real roots of negative reals for odd-denominator exponents,
// as the exact path does: (−8)^{1/3} = −2.
func realPow(a, b complex128, bn *Node) complex128 {
	if imag(a) == 0 && real(a) < 0 && imag(b) == 0 {
		if r, ok := ratOf(bn); ok && r.Denom().Bit(0) == 1 {
			v := math.Pow(-real(a), real(b))
			if r.Num().Bit(0) == 1 {
				v = -v
			}
			return complex(v, 0)
		}
	}
	if imag(a) == 0 && imag(b) == 0 && real(a) >= 0 {
		return complex(math.Pow(real(a), real(b)), 0)
	}
	return cmplx.Pow(a, b)
}

// ratOf reads a literal rational exponent: 1/3, -2, 2/5.
func ratOf(n *Node) (*big.Rat, bool) {
	switch n.Kind {
	case KNum:
		return n.Num, true
	case KNeg:
		r, ok := ratOf(n.Args[0])
		if !ok {
			return nil, false
		}
		return new(big.Rat).Neg(r), true
	case KDiv:
		a, ok1 := ratOf(n.Args[0])
		b, ok2 := ratOf(n.Args[1])
		if !ok1 || !ok2 || b.Sign() == 0 {
			return nil, false
		}
		return new(big.Rat).Quo(a, b), true
	}
	return nil, false
}

func (e *numEnv) fn(n *Node, depth int) (complex128, error) {
	args := make([]complex128, len(n.Args))
	for i, a := range n.Args {
		v, err := e.eval(a, depth+1)
		if err != nil {
			return 0, err
		}
		args[i] = v
	}
	one := func() (complex128, error) {
		if len(args) != 1 {
			return 0, fmt.Errorf("%w: %s takes one argument", ErrSyntax, n.Name)
		}
		return args[0], nil
	}
	x, err := one()
	if err != nil && n.Name != "root" && n.Name != "binom" && n.Name != "gcd" && n.Name != "max" && n.Name != "min" {
		return 0, err
	}
	switch n.Name {
	case "sqrt":
		if imag(x) == 0 && real(x) >= 0 {
			return complex(math.Sqrt(real(x)), 0), nil
		}
		return cmplx.Sqrt(x), nil
	case "root":
		if len(args) != 2 || args[1] == 0 {
			return 0, fmt.Errorf("%w: root", errUndefined)
		}
		return realPow(args[0], 1/args[1], bin(KDiv, intNode(1), n.Args[1])), nil
	case "sin":
		return cmplx.Sin(x), nil
	case "cos":
		return cmplx.Cos(x), nil
	case "tan":
		return cmplx.Tan(x), nil
	case "sec":
		return 1 / cmplx.Cos(x), nil
	case "csc":
		return 1 / cmplx.Sin(x), nil
	case "cot":
		return 1 / cmplx.Tan(x), nil
	case "arcsin":
		return cmplx.Asin(x), nil
	case "arccos":
		return cmplx.Acos(x), nil
	case "arctan":
		return cmplx.Atan(x), nil
	case "sinh":
		return cmplx.Sinh(x), nil
	case "cosh":
		return cmplx.Cosh(x), nil
	case "tanh":
		return cmplx.Tanh(x), nil
	case "ln":
		return cmplx.Log(x), nil
	case "log10":
		return cmplx.Log10(x), nil
	case "exp":
		return cmplx.Exp(x), nil
	case "abs":
		return complex(cmplx.Abs(x), 0), nil
	case "floor":
		return complex(math.Floor(real(x)), 0), nil
	case "ceil":
		return complex(math.Ceil(real(x)), 0), nil
	case "factorial":
		return complex(math.Gamma(real(x)+1), 0), nil
	case "binom":
		if len(args) != 2 {
			return 0, fmt.Errorf("%w: binom takes two arguments", ErrSyntax)
		}
		a, b := real(args[0]), real(args[1])
		la, _ := math.Lgamma(a + 1)
		lb, _ := math.Lgamma(b + 1)
		lc, _ := math.Lgamma(a - b + 1)
		return complex(math.Round(math.Exp(la-lb-lc)), 0), nil
	case "max", "min":
		if len(args) == 0 {
			return 0, fmt.Errorf("%w: %s of nothing", ErrSyntax, n.Name)
		}
		best := args[0]
		for _, a := range args[1:] {
			if (n.Name == "max") == (real(a) > real(best)) {
				best = a
			}
		}
		return best, nil
	}
	return 0, fmt.Errorf("%w: no numeric value for %s", errNotScalar, n.Name)
}

// numericEqual compares two scalar trees at numericPoints symbol
// assignments; decided is false when no point gave finite values on both
// sides.
//
// With overflowRisk set (exact arithmetic found a value too large), points
// where a value is zero or outside the normal float64 range are skipped,
// since 10^{-10^9} underflows to 0 and would otherwise "equal" 0.
func numericEqual(a, b *Node, bud *budget, overflowRisk bool) (equal, decided bool, err error) {
	used := 0
	for k := 0; k < numericPoints; k++ {
		env := &numEnv{bud: bud, point: k}
		x, errA := env.eval(a, 0)
		y, errB := env.eval(b, 0)
		if err := bud.ctx.Err(); err != nil {
			return false, false, err
		}
		for _, e := range []error{errA, errB} {
			if isBudget(e) {
				return false, false, e
			}
		}
		okA := errA == nil && finite(x)
		okB := errB == nil && finite(y)
		if !okA || !okB {
			if okA != okB && (errA != nil || errB != nil) {
				return false, true, nil // undefined on one side only
			}
			continue
		}
		if overflowRisk && (!normal(x) || !normal(y)) {
			continue
		}
		used++
		d := cmplx.Abs(x - y)
		if d > absTol && d > relTol*math.Max(cmplx.Abs(x), cmplx.Abs(y)) {
			return false, true, nil
		}
	}
	return used > 0, used > 0, nil
}

func isBudget(err error) bool {
	return err != nil && (errors.Is(err, ErrBudget) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

func normal(z complex128) bool {
	a := cmplx.Abs(z)
	return a > 1e-300 && a < 1e300
}

func finite(z complex128) bool {
	return !cmplx.IsNaN(z) && !cmplx.IsInf(z)
}
