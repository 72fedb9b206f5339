package loss

import (
	"fmt"
	"math"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Vars hands a Variant's Loss function the batch's quantities as
// expressions. Every expression built from one Vars shares its first
// error: an operation that fails (a shape mismatch, a missing optional
// input, an operand that is neither an Expr nor a number) records the
// error, and every later operation returns a failed Expr without doing
// anything, the way bufio.Scanner keeps its first error. Compute reports
// the error once, after Loss returns; Err reports it earlier.
//
// The expressions are gorgonia nodes of a float64 graph built once per
// (Config, batch shape) and differentiated symbolically, so Loss must
// only build the expression, not look at values. Inputs and Wrap, with
// Expr.Node, reach the gorgonia nodes for operations the Expr methods do
// not cover.
type Vars struct {
	in  *Inputs
	err error

	// optional inputs: nil when the batch lacks them
	ref, ent *gorgonia.Node
	// rollout creates the rollout log-prob input on first use; nil when the
	// batch has no RolloutLogProbs.
	rollout     func() *gorgonia.Node
	roll        *gorgonia.Node
	usedEntropy bool

	logRatio, ratio Expr // built on first use
}

// Expr is an expression over a batch: a [B,T] per-token value, a [B]
// per-sequence value or a scalar. Its methods build new expressions and
// never modify their receiver; they can be chained, as in
//
//	v.Ratio().Sub(1).Tanh().Add(1)
//
// Where a method takes an operand of type any, the operand is an Expr
// from the same Vars or a Go number (float64, float32 or an integer
// type), which stands for a constant. Operands broadcast: a scalar or a
// number against anything, a [B] value against a [B,T] one (each
// sequence's value repeated along its tokens).
//
// The zero Expr is not an expression; operations on it return the zero
// Expr, and Compute rejects a Loss that returns it.
type Expr struct {
	n *gorgonia.Node
	v *Vars
}

// Err returns the first error met while building any expression of v, or
// nil.
func (v *Vars) Err() error { return v.err }

// Err returns the first error met while building any expression of the
// Vars x comes from, or nil; nil for the zero Expr, which belongs to no
// Vars (Compute rejects it).
func (x Expr) Err() error {
	if x.v == nil {
		return nil
	}
	return x.v.err
}

// Node returns the gorgonia node of x, or nil if building x failed.
func (x Expr) Node() *gorgonia.Node { return x.n }

// Inputs returns the batch as gorgonia nodes, as Variant.Build receives
// it, for expressions that need gorgonia directly.
func (v *Vars) Inputs() *Inputs { return v.in }

// Config returns the normalised configuration (see Inputs.Config: the
// per-call coefficients EntropyCoef, KLCoef, TISCap and AggDivisor and
// the rollout correction's thresholds and rejection options read 0, so
// that one graph serves every value).
func (v *Vars) Config() Config { return v.in.Config }

// Rows returns B, the number of sequences.
func (v *Vars) Rows() int { return v.in.Rows }

// Cols returns T, the number of token positions per sequence.
func (v *Vars) Cols() int { return v.in.Cols }

// LogProbs is log π_θ, [B,T]: the input Compute differentiates against.
func (v *Vars) LogProbs() Expr { return Expr{v.in.LogProbs, v} }

// OldLogProbs is log π_old, [B,T], the log-probs the advantages were
// computed under (verl's old_log_prob).
func (v *Vars) OldLogProbs() Expr { return Expr{v.in.OldLogProbs, v} }

// Advantages is A, [B,T].
func (v *Vars) Advantages() Expr { return Expr{v.in.Advantages, v} }

// Mask is the response mask, [B,T]: 1 for a trained token, 0 for padding,
// prompt and tool output.
func (v *Vars) Mask() Expr { return Expr{v.in.Mask, v} }

// Count is n_b, [B]: the number of mask-1 tokens of each sequence.
func (v *Vars) Count() Expr { return Expr{v.in.Count, v} }

// RefLogProbs is log π_ref, [B,T]. Using it when the batch has no
// RefLogProbs fails with ErrMissing.
func (v *Vars) RefLogProbs() Expr {
	if v.ref == nil {
		return v.fail(fmt.Errorf("loss: Vars.RefLogProbs: Batch.RefLogProbs is nil: %w", ErrMissing))
	}
	return Expr{v.ref, v}
}

// RolloutLogProbs is the rollout sampler's log-probs, [B,T]. Using it
// when the batch has no RolloutLogProbs fails with ErrMissing.
func (v *Vars) RolloutLogProbs() Expr {
	if v.roll == nil {
		if v.rollout == nil {
			return v.fail(fmt.Errorf("loss: Vars.RolloutLogProbs: Batch.RolloutLogProbs is nil: %w", ErrMissing))
		}
		v.roll = v.rollout()
	}
	return Expr{v.roll, v}
}

// Entropy is the per-token entropy of π_θ, [B,T]. An objective that uses
// it gets Result.GradEntropy, its derivative, as the entropy bonus does.
// Using it when the batch has no Entropy fails with ErrMissing.
func (v *Vars) Entropy() Expr {
	if v.ent == nil {
		return v.fail(fmt.Errorf("loss: Vars.Entropy: Batch.Entropy is nil: %w", ErrMissing))
	}
	v.usedEntropy = true
	return Expr{v.ent, v}
}

// TISWeights is the truncated importance weight, [B,T], and true, when
// one multiplies the policy loss: Config.TISCap's min(exp(old − rollout),
// TISCap), or Config.RolloutCorrection's token- or sequence-level weight;
// else the zero Expr and false. Compute already weights a per-token loss
// by it; a Loss that returns a scalar applies it itself.
func (v *Vars) TISWeights() (Expr, bool) {
	if v.in.TISWeights == nil {
		return Expr{}, false
	}
	return Expr{v.in.TISWeights, v}, true
}

// LogRatio is verl's clamped log importance ratio, [B,T]:
// clamp(logπ − logπ_old, −20, 20) (compute_policy_loss_vanilla,
// verl/trainer/ppo/core_algos.py).
func (v *Vars) LogRatio() Expr {
	if v.logRatio.v == nil {
		v.logRatio = v.LogProbs().Sub(v.OldLogProbs()).Clip(-20, 20)
	}
	return v.logRatio
}

// Ratio is the importance ratio r = exp(LogRatio()), [B,T].
func (v *Vars) Ratio() Expr {
	if v.ratio.v == nil {
		v.ratio = v.LogRatio().Exp()
	}
	return v.ratio
}

// Const returns the constant c as a scalar expression, for formulas that
// start with a number, as in v.Const(1).Sub(x).
func (v *Vars) Const(c float64) Expr { return Expr{v.in.Graph.AddNode(gorgonia.NewConstant(c)), v} }

// Wrap makes n, a float64 gorgonia node of v's graph (from Inputs, or
// built from such nodes), an expression; n must be a scalar, [B] or
// [B,T]. It takes a gorgonia result as it comes, so that
// v.Wrap(gorgonia.Softplus(x.Node())) records gorgonia's error like any
// other; a node at hand is wrapped as v.Wrap(n, nil).
func (v *Vars) Wrap(n *gorgonia.Node, err error) Expr {
	switch {
	case v.err != nil:
		return Expr{v: v}
	case err != nil:
		return v.fail(fmt.Errorf("loss: Vars.Wrap: %w: %w", err, ErrConfig))
	case n == nil:
		return v.fail(fmt.Errorf("loss: Vars.Wrap: nil node: %w", ErrConfig))
	case n.Graph() != nil && n.Graph() != v.in.Graph:
		return v.fail(fmt.Errorf("loss: Vars.Wrap: node %s belongs to another graph: %w", n.Name(), ErrConfig))
	case n.Dtype() != tensor.Float64:
		return v.fail(fmt.Errorf("loss: Vars.Wrap: node %s has dtype %v, want float64: %w", n.Name(), n.Dtype(), ErrShape))
	}
	if sh := n.Shape(); !n.IsScalar() && !sh.Eq(tensor.Shape{v.in.Rows}) && !sh.Eq(tensor.Shape{v.in.Rows, v.in.Cols}) {
		return v.fail(fmt.Errorf("loss: Vars.Wrap: node %s has shape %v, want a scalar, [%d] or [%d %d]: %w",
			n.Name(), sh, v.in.Rows, v.in.Rows, v.in.Cols, ErrShape))
	}
	return Expr{n, v}
}

// Where picks a where cond is non-zero and b elsewhere (torch.where);
// cond, a and b broadcast to a common shape. cond receives no gradient.
// With w := v.Where(v.Advantages().GE(0), 1, β), w is 1 on tokens with
// A ≥ 0 and β elsewhere.
func (v *Vars) Where(cond Expr, a, b any) Expr {
	const op = "Vars.Where"
	if v.err != nil {
		return Expr{v: v}
	}
	c, ok := v.operand(op, cond)
	if !ok {
		return Expr{v: v}
	}
	na, ok := v.operand(op, a)
	if !ok {
		return Expr{v: v}
	}
	nb, ok := v.operand(op, b)
	if !ok {
		return Expr{v: v}
	}
	shape, err := v.common(c, na, nb)
	if err != nil {
		return v.fail(fmt.Errorf("loss: %s: %w", op, err))
	}
	if c, ok = v.expand(op, c, shape); !ok {
		return Expr{v: v}
	}
	if na, ok = v.expand(op, na, shape); !ok {
		return Expr{v: v}
	}
	if nb, ok = v.expand(op, nb, shape); !ok {
		return Expr{v: v}
	}
	return v.result(op, func() (*gorgonia.Node, error) { return Where(c, na, nb) })
}

// Add returns x + y.
func (x Expr) Add(y any) Expr {
	return x.arith("Add", y, gorgonia.Add, gorgonia.BroadcastAdd)
}

// Sub returns x − y.
func (x Expr) Sub(y any) Expr {
	return x.arith("Sub", y, gorgonia.Sub, gorgonia.BroadcastSub)
}

// Mul returns the elementwise product x·y.
func (x Expr) Mul(y any) Expr {
	return x.arith("Mul", y, gorgonia.HadamardProd, gorgonia.BroadcastHadamardProd)
}

// Div returns the elementwise quotient x / y.
func (x Expr) Div(y any) Expr {
	return x.arith("Div", y, gorgonia.HadamardDiv, gorgonia.BroadcastHadamardDiv)
}

// Min returns the elementwise minimum of x and y (torch.minimum; see the
// package function Min for the gradient at ties). With a number c it is
// Clip(−∞, c).
func (x Expr) Min(y any) Expr { return x.minMax("Min", y, false) }

// Max returns the elementwise maximum of x and y (torch.maximum; see the
// package function Max for the gradient at ties). With a number c it is
// Clip(c, +∞).
func (x Expr) Max(y any) Expr { return x.minMax("Max", y, true) }

// Clip limits x to [lo, hi] (torch.clamp); use math.Inf for a one-sided
// bound. The gradient passes where lo ≤ x ≤ hi.
func (x Expr) Clip(lo, hi float64) Expr {
	return x.unary("Clip", func(n *gorgonia.Node) (*gorgonia.Node, error) { return Clamp(n, lo, hi) })
}

// GT returns the indicator x > y: 1 where it holds, else 0. Indicators
// are piecewise constant and carry no gradient.
func (x Expr) GT(y any) Expr { return x.compare("GT", y, gorgonia.Gt) }

// GE returns the indicator x ≥ y (see GT).
func (x Expr) GE(y any) Expr { return x.compare("GE", y, gorgonia.Gte) }

// LT returns the indicator x < y (see GT).
func (x Expr) LT(y any) Expr { return x.compare("LT", y, gorgonia.Lt) }

// LE returns the indicator x ≤ y (see GT).
func (x Expr) LE(y any) Expr { return x.compare("LE", y, gorgonia.Lte) }

// Neg returns −x.
func (x Expr) Neg() Expr { return x.unary("Neg", gorgonia.Neg) }

// Abs returns |x|.
func (x Expr) Abs() Expr { return x.unary("Abs", gorgonia.Abs) }

// Sign returns the sign of x: −1, 0 or 1, with no gradient.
func (x Expr) Sign() Expr { return x.unary("Sign", gorgonia.Sign) }

// Square returns x².
func (x Expr) Square() Expr { return x.unary("Square", gorgonia.Square) }

// Sqrt returns √x.
func (x Expr) Sqrt() Expr { return x.unary("Sqrt", gorgonia.Sqrt) }

// Exp returns eˣ.
func (x Expr) Exp() Expr { return x.unary("Exp", gorgonia.Exp) }

// Log returns the natural logarithm of x. Unlike gorgonia.Log it does not
// rewrite log(1 + y) as log1p(y).
func (x Expr) Log() Expr { return x.unary("Log", logNode) }

// Tanh returns tanh x.
func (x Expr) Tanh() Expr { return x.unary("Tanh", gorgonia.Tanh) }

// Sigmoid returns the logistic function 1 / (1 + e^−x).
func (x Expr) Sigmoid() Expr { return x.unary("Sigmoid", gorgonia.Sigmoid) }

// StopGradient returns x with its gradient blocked (torch's
// Tensor.detach, the sg[·] of the GSPO and CISPO papers); see the package
// function StopGradient and Computer.Surrogate.
func (x Expr) StopGradient() Expr { return x.unary("StopGradient", StopGradient) }

// SeqSum sums a [B,T] expression over each sequence's mask-1 tokens:
// Σ_t m·x, a [B] expression. Padding does not reach it.
func (x Expr) SeqSum() Expr {
	const op = "SeqSum"
	if !x.live() {
		return x
	}
	if !x.isTokens() {
		return x.v.fail(fmt.Errorf("loss: Expr.%s of a %v expression, want [B,T]: %w", op, x.n.Shape(), ErrShape))
	}
	masked := x.Mul(x.v.Mask())
	return masked.unary(op, func(n *gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.Sum(n, 1) })
}

// SeqMean is each sequence's mean over its mask-1 tokens,
// Σ_t m·x / max(n_b, 1), a [B] expression; 0 for a sequence without
// tokens. The denominator is verl's compute_policy_loss_gspo's.
func (x Expr) SeqMean() Expr {
	if !x.live() {
		return x
	}
	return x.SeqSum().Div(x.v.Count().Max(1))
}

// Sum adds the elements of a [B] expression (a scalar is its own sum). A
// [B,T] expression is refused, as its sum would read padding: use SeqSum
// first, or return the per-token values and let Compute aggregate them.
func (x Expr) Sum() Expr {
	const op = "Sum"
	if !x.live() {
		return x
	}
	if x.isTokens() {
		return x.v.fail(fmt.Errorf("loss: Expr.%s of a [B,T] expression would read padding; use SeqSum: %w", op, ErrShape))
	}
	if x.n.IsScalar() {
		return x
	}
	return x.unary(op, func(n *gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.Sum(n) })
}

// Mean is the mean of a [B] expression over all B sequences,
// Sum()·(1/B), empty sequences included (torch.mean, as verl's
// compute_policy_loss_geo_mean takes it). A [B,T] expression is refused,
// as for Sum.
func (x Expr) Mean() Expr {
	if !x.live() {
		return x
	}
	if x.isTokens() {
		return x.v.fail(fmt.Errorf("loss: Expr.Mean of a [B,T] expression would read padding; use SeqMean: %w", ErrShape))
	}
	if x.n.IsScalar() {
		return x
	}
	return x.Sum().Mul(1 / float64(x.n.Shape().TotalSize()))
}

// sumAll adds every element of x, padding included: for Compute's
// aggregation, whose weights are zero on padding.
func (x Expr) sumAll() Expr {
	return x.unary("Sum", func(n *gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.Sum(n) })
}

// fail records err unless an error is already recorded, and returns a
// failed Expr.
func (v *Vars) fail(err error) Expr {
	if v.err == nil {
		v.err = err
	}
	return Expr{v: v}
}

// live reports whether x can take part in an operation: it comes from a
// Vars, that Vars has no error, and x was built.
func (x Expr) live() bool { return x.v != nil && x.v.err == nil && x.n != nil }

// isTokens reports whether x is [B,T].
func (x Expr) isTokens() bool { return x.n.Shape().Dims() == 2 }

// result runs f, which builds the node of an operation, and records its
// error.
func (v *Vars) result(op string, f func() (*gorgonia.Node, error)) Expr {
	n, err := f()
	if err != nil {
		return v.fail(fmt.Errorf("loss: %s: %w: %w", op, err, ErrConfig))
	}
	return Expr{n, v}
}

func (x Expr) unary(op string, f func(*gorgonia.Node) (*gorgonia.Node, error)) Expr {
	if !x.live() {
		return x
	}
	return x.v.result("Expr."+op, func() (*gorgonia.Node, error) { return f(x.n) })
}

// operand returns y's node: an Expr of v, or a number as a constant. It
// records an error and returns false for anything else.
func (v *Vars) operand(op string, y any) (*gorgonia.Node, bool) {
	if c, ok := number(y); ok {
		return gorgonia.NewConstant(c), true
	}
	t, ok := y.(Expr)
	switch {
	case !ok:
		v.fail(fmt.Errorf("loss: %s: operand of type %T, want an Expr or a number: %w", op, y, ErrConfig))
		return nil, false
	case t.v == nil:
		v.fail(fmt.Errorf("loss: %s: operand is the zero Expr: %w", op, ErrConfig))
		return nil, false
	case t.v != v:
		v.fail(fmt.Errorf("loss: %s: operand comes from another Vars: %w", op, ErrConfig))
		return nil, false
	case t.n == nil:
		return nil, false // t failed; v, its Vars, holds the error
	}
	return t.n, true
}

// rank is 0 for a scalar, 1 for [B], 2 for [B,T].
func rank(n *gorgonia.Node) int {
	if n.IsScalar() {
		return 0
	}
	return n.Shape().Dims()
}

// common returns the shape the nodes broadcast to, or an error naming the
// shapes that do not broadcast.
func (v *Vars) common(ns ...*gorgonia.Node) (tensor.Shape, error) {
	var out tensor.Shape // nil: scalar
	for _, n := range ns {
		if rank(n) > len(out) {
			out = n.Shape()
		}
	}
	for _, n := range ns {
		sh := n.Shape()
		switch rank(n) {
		case 0:
		case len(out):
			if !sh.Eq(out) {
				return nil, fmt.Errorf("shapes %v and %v: %w", sh, out, ErrShape)
			}
		default: // [B] against [B,T]
			if sh[0] != out[0] {
				return nil, fmt.Errorf("shapes %v and %v do not broadcast (a [B] value broadcasts along the tokens of [B,T]): %w", sh, out, ErrShape)
			}
		}
	}
	return out, nil
}

// expand broadcasts n to shape (a scalar to anything, [B] to [B,T]) by
// adding it to a constant zero tensor, so that the gradient reaching the
// copies sums back into n.
func (v *Vars) expand(op string, n *gorgonia.Node, shape tensor.Shape) (*gorgonia.Node, bool) {
	if rank(n) == len(shape) {
		return n, true
	}
	if n.Graph() == nil { // a number: a constant tensor of its value
		if c, ok := n.Value().Data().(float64); ok {
			return v.full(shape, c), true
		}
	}
	zeros := v.full(shape, 0)
	e := v.result(op, func() (*gorgonia.Node, error) {
		if n.IsScalar() {
			return gorgonia.Add(zeros, n)
		}
		return gorgonia.BroadcastAdd(zeros, n, nil, []byte{1})
	})
	return e.n, e.n != nil
}

// full is a constant tensor of the given shape holding c, named after both
// so that gorgonia, which merges constants of one name, merges only equal
// ones.
func (v *Vars) full(shape tensor.Shape, c float64) *gorgonia.Node {
	data := make([]float64, shape.TotalSize())
	for i := range data {
		data[i] = c
	}
	t := tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(data))
	return v.in.Graph.AddNode(gorgonia.NewConstant(t, gorgonia.WithName(fmt.Sprintf("full%v(%v)", []int(shape), c))))
}

// arith applies an elementwise arithmetic operation: same for operands of
// one shape or with a scalar, bcast for [B] against [B,T].
func (x Expr) arith(name string, y any,
	same func(a, b *gorgonia.Node) (*gorgonia.Node, error),
	bcast func(a, b *gorgonia.Node, left, right []byte) (*gorgonia.Node, error),
) Expr {
	if !x.live() {
		return x
	}
	op := "Expr." + name
	b, ok := x.v.operand(op, y)
	if !ok {
		return Expr{v: x.v}
	}
	a := x.n
	if _, err := x.v.common(a, b); err != nil {
		return x.v.fail(fmt.Errorf("loss: %s: %w", op, err))
	}
	return x.v.result(op, func() (*gorgonia.Node, error) {
		switch ra, rb := rank(a), rank(b); {
		case ra == 0 || rb == 0 || ra == rb:
			return same(a, b)
		case ra > rb: // [B,T] op [B]
			return bcast(a, b, nil, []byte{1})
		default: // [B] op [B,T]
			return bcast(a, b, []byte{1}, nil)
		}
	})
}

// minMax is Min or Max.
func (x Expr) minMax(name string, y any, isMax bool) Expr {
	if !x.live() {
		return x
	}
	if c, isNumber := number(y); isNumber {
		// a one-sided clamp, which needs no constant tensor
		if math.IsNaN(c) {
			return x.v.fail(fmt.Errorf("loss: Expr.%s: NaN bound: %w", name, ErrConfig))
		}
		if isMax {
			return x.Clip(c, math.Inf(1))
		}
		return x.Clip(math.Inf(-1), c)
	}
	f := Min
	if isMax {
		f = Max
	}
	return x.binary(name, y, true, f)
}

// compare builds a 0/1 indicator with a gorgonia comparison, which takes a
// scalar against a tensor as it is.
func (x Expr) compare(name string, y any, f func(a, b *gorgonia.Node, retSame bool) (*gorgonia.Node, error)) Expr {
	return x.binary(name, y, false, func(a, b *gorgonia.Node) (*gorgonia.Node, error) { return f(a, b, true) })
}

// binary applies f to x and y after broadcasting a [B] operand against a
// [B,T] one and, when scalars is set, a scalar operand against a tensor.
func (x Expr) binary(name string, y any, scalars bool, f func(a, b *gorgonia.Node) (*gorgonia.Node, error)) Expr {
	if !x.live() {
		return x
	}
	op := "Expr." + name
	b, ok := x.v.operand(op, y)
	if !ok {
		return Expr{v: x.v}
	}
	a := x.n
	shape, err := x.v.common(a, b)
	if err != nil {
		return x.v.fail(fmt.Errorf("loss: %s: %w", op, err))
	}
	for _, n := range []**gorgonia.Node{&a, &b} {
		if !scalars && (*n).IsScalar() {
			continue
		}
		if *n, ok = x.v.expand(op, *n, shape); !ok {
			return Expr{v: x.v}
		}
	}
	return x.v.result(op, func() (*gorgonia.Node, error) { return f(a, b) })
}

// number returns y as a float64 if it is a Go number.
func number(y any) (float64, bool) {
	switch t := y.(type) {
	case float64:
		return t, true
	case float32:
		return float64(t), true
	case int:
		return float64(t), true
	case int8:
		return float64(t), true
	case int16:
		return float64(t), true
	case int32:
		return float64(t), true
	case int64:
		return float64(t), true
	case uint:
		return float64(t), true
	case uint8:
		return float64(t), true
	case uint16:
		return float64(t), true
	case uint32:
		return float64(t), true
	case uint64:
		return float64(t), true
	}
	return 0, false
}
