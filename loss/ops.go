package loss

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file adds the elementwise operations that policy-gradient losses need
// and gorgonia v0.9.18 does not offer in a form we can rely on: Min, Max,
// Clamp, Where and StopGradient, and a logarithm that leaves the graph as
// it was built (logNode, for Expr.Log). Each is a gorgonia.Op with a Do (forward
// value) and a SymDiff (symbolic gradient), so expressions that use them are
// differentiated by gorgonia.Grad like any built-in op. Their gradients are
// the subgradients PyTorch uses away from ties (torch.minimum, torch.clamp,
// torch.where, Tensor.detach); at an exact tie Min and Max send the whole
// gradient to their first operand.

// Min returns the elementwise minimum of a and b, which must have the same
// shape (torch.minimum). The gradient flows to a where a <= b and to b
// elsewhere.
func Min(a, b *gorgonia.Node) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(minMaxOp{max: false}, a, b)
}

// Max returns the elementwise maximum of a and b, which must have the same
// shape (torch.maximum). The gradient flows to a where a >= b and to b
// elsewhere.
func Max(a, b *gorgonia.Node) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(minMaxOp{max: true}, a, b)
}

// Clamp limits every element of x to [lo, hi] (torch.clamp). Use
// math.Inf(-1) or math.Inf(1) for a one-sided clamp. The gradient passes
// where lo <= x <= hi and is zero elsewhere, as in PyTorch.
func Clamp(x *gorgonia.Node, lo, hi float64) (*gorgonia.Node, error) {
	if math.IsNaN(lo) || math.IsNaN(hi) || lo > hi {
		return nil, fmt.Errorf("loss: Clamp bounds [%v, %v] are not an interval", lo, hi)
	}
	return gorgonia.ApplyOp(clampOp{lo: lo, hi: hi}, x)
}

// Where picks a where cond is non-zero and b elsewhere (torch.where). cond,
// a and b have the same shape; cond receives no gradient, a and b receive
// the incoming gradient at the positions they were picked from.
func Where(cond, a, b *gorgonia.Node) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(whereOp{}, cond, a, b)
}

// StopGradient returns x unchanged in the forward pass and blocks the
// gradient in the backward pass (torch's Tensor.detach, the sg[·] of the
// GSPO and CISPO papers).
func StopGradient(x *gorgonia.Node) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(stopGradOp{pin: &pin{}}, x)
}

// logNode is the natural logarithm as an op of this package. gorgonia.Log
// rewrites log(1 + y) as log1p(y) and, doing so, removes the node 1 + y
// from the graph and returns it to gorgonia's node pool, although other
// expressions may still use it; Expr.Log must not do that to a user's
// expression.
func logNode(x *gorgonia.Node) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(logOp{}, x)
}

// kernel is an elementwise function of one, two or three arguments; the
// field matching the op's arity is set.
type kernel struct {
	f1 func(x float64) float64
	f2 func(x, y float64) float64
	f3 func(x, y, z float64) float64
}

// elementwise applies k to the float64 or float32 tensors vs, which must all
// have the same shape and dtype. It writes into reuse when that is a tensor
// of the right shape and dtype (gorgonia's preallocated output), else into
// a new tensor.
func elementwise(name string, vs []gorgonia.Value, reuse gorgonia.Value, k kernel) (gorgonia.Value, error) {
	ds := make([]*tensor.Dense, len(vs))
	for i, v := range vs {
		d, ok := v.(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("loss: %s: input %d is %T, want *tensor.Dense", name, i, v)
		}
		if i > 0 {
			if !d.Shape().Eq(ds[0].Shape()) {
				return nil, fmt.Errorf("loss: %s: input %d has shape %v, input 0 has %v", name, i, d.Shape(), ds[0].Shape())
			}
			if d.Dtype() != ds[0].Dtype() {
				return nil, fmt.Errorf("loss: %s: input %d has dtype %v, input 0 has %v", name, i, d.Dtype(), ds[0].Dtype())
			}
		}
		ds[i] = d
	}
	dt := ds[0].Dtype()
	if dt != tensor.Float64 && dt != tensor.Float32 {
		return nil, fmt.Errorf("loss: %s: dtype %v not supported, want float64 or float32", name, dt)
	}
	out, ok := reuse.(*tensor.Dense)
	if !ok || out == nil || !out.Shape().Eq(ds[0].Shape()) || out.Dtype() != dt || out.RequiresIterator() {
		out = tensor.New(tensor.WithShape(ds[0].Shape().Clone()...), tensor.Of(dt))
	}
	if dt == tensor.Float64 {
		o := out.Float64s()
		switch len(ds) {
		case 1:
			x := ds[0].Float64s()
			for i := range o {
				o[i] = k.f1(x[i])
			}
		case 2:
			x, y := ds[0].Float64s(), ds[1].Float64s()
			for i := range o {
				o[i] = k.f2(x[i], y[i])
			}
		case 3:
			x, y, z := ds[0].Float64s(), ds[1].Float64s(), ds[2].Float64s()
			for i := range o {
				o[i] = k.f3(x[i], y[i], z[i])
			}
		}
		return out, nil
	}
	o := out.Float32s()
	switch len(ds) {
	case 1:
		x := ds[0].Float32s()
		for i := range o {
			o[i] = float32(k.f1(float64(x[i])))
		}
	case 2:
		x, y := ds[0].Float32s(), ds[1].Float32s()
		for i := range o {
			o[i] = float32(k.f2(float64(x[i]), float64(y[i])))
		}
	case 3:
		x, y, z := ds[0].Float32s(), ds[1].Float32s(), ds[2].Float32s()
		for i := range o {
			o[i] = float32(k.f3(float64(x[i]), float64(y[i]), float64(z[i])))
		}
	}
	return out, nil
}

// prep64 validates vs like elementwise and, when they are float64, returns
// their data and an output tensor (reuse when it fits), so that hot ops can
// run a specialised loop; ok is false for other dtypes.
func prep64(name string, vs []gorgonia.Value, reuse gorgonia.Value) (ins [][]float64, out *tensor.Dense, ok bool, err error) {
	ins = make([][]float64, len(vs))
	var shape tensor.Shape
	for i, v := range vs {
		d, isDense := v.(*tensor.Dense)
		if !isDense {
			return nil, nil, false, fmt.Errorf("loss: %s: input %d is %T, want *tensor.Dense", name, i, v)
		}
		if d.Dtype() != tensor.Float64 {
			return nil, nil, false, nil
		}
		if i == 0 {
			shape = d.Shape()
		} else if !d.Shape().Eq(shape) {
			return nil, nil, false, fmt.Errorf("loss: %s: input %d has shape %v, input 0 has %v", name, i, d.Shape(), shape)
		}
		ins[i] = d.Float64s()
	}
	out, fits := reuse.(*tensor.Dense)
	if !fits || out == nil || !out.Shape().Eq(shape) || out.Dtype() != tensor.Float64 || out.RequiresIterator() {
		out = tensor.New(tensor.WithShape(shape.Clone()...), tensor.Of(tensor.Float64))
	}
	return ins, out, true, nil
}

// sameShape is InferShape for ops whose inputs and output share one shape.
func sameShape(op gorgonia.Op, shps []gorgonia.DimSizer) (tensor.Shape, error) {
	if len(shps) != op.Arity() {
		return nil, fmt.Errorf("loss: %v takes %d inputs, got %d", op, op.Arity(), len(shps))
	}
	first, ok := shps[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("loss: %v: input 0 has no shape", op)
	}
	for i, s := range shps[1:] {
		sh, ok := s.(tensor.Shape)
		if !ok || !sh.Eq(first) {
			return nil, fmt.Errorf("loss: %v: input %d has shape %v, input 0 has %v", op, i+1, s, first)
		}
	}
	return first.Clone(), nil
}

func hashOf(op fmt.Stringer) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(op.String()))
	return h.Sum32()
}

// fnType is the type a -> a -> ... -> a with n inputs.
func fnType(n int) hm.Type {
	a := hm.TypeVariable('a')
	ts := make([]hm.Type, n+1)
	for i := range ts {
		ts[i] = a
	}
	return hm.NewFnType(ts...)
}

// minMaxOp is Min (max false) or Max (max true).
type minMaxOp struct{ max bool }

func (op minMaxOp) Arity() int     { return 2 }
func (op minMaxOp) Type() hm.Type  { return fnType(2) }
func (op minMaxOp) String() string { return map[bool]string{false: "ElemMin", true: "ElemMax"}[op.max] }
func (op minMaxOp) InferShape(shps ...gorgonia.DimSizer) (tensor.Shape, error) {
	return sameShape(op, shps)
}
func (op minMaxOp) Do(vs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vs...)
}
func (op minMaxOp) UsePreallocDo(prealloc gorgonia.Value, vs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(vs) != 2 {
		return nil, fmt.Errorf("loss: %v takes 2 inputs, got %d", op, len(vs))
	}
	if ins, out, ok, err := prep64(op.String(), vs, prealloc); err != nil {
		return nil, err
	} else if ok {
		a, b, o := ins[0], ins[1], out.Float64s()
		if op.max {
			for i := range o {
				o[i] = math.Max(a[i], b[i])
			}
		} else {
			for i := range o {
				o[i] = math.Min(a[i], b[i])
			}
		}
		return out, nil
	}
	if op.max {
		return elementwise(op.String(), vs, prealloc, kernel{f2: math.Max})
	}
	return elementwise(op.String(), vs, prealloc, kernel{f2: math.Min})
}
func (op minMaxOp) ReturnsPtr() bool      { return false }
func (op minMaxOp) CallsExtern() bool     { return false }
func (op minMaxOp) OverwritesInput() int  { return -1 }
func (op minMaxOp) WriteHash(h hash.Hash) { _, _ = h.Write([]byte(op.String())) }
func (op minMaxOp) Hashcode() uint32      { return hashOf(op) }
func (op minMaxOp) DiffWRT(int) []bool    { return []bool{true, true} }
func (op minMaxOp) SymDiff(in gorgonia.Nodes, _, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	toA, toB := gradLE, gradGT // min: a where a <= b
	if op.max {
		toA, toB = gradGE, gradLT // max: a where a >= b
	}
	ga, err := gorgonia.ApplyOp(gradOp{kind: toA}, grad, in[0], in[1])
	if err != nil {
		return nil, err
	}
	gb, err := gorgonia.ApplyOp(gradOp{kind: toB}, grad, in[0], in[1])
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{ga, gb}, nil
}

// clampOp is Clamp.
type clampOp struct{ lo, hi float64 }

func (op clampOp) Arity() int     { return 1 }
func (op clampOp) Type() hm.Type  { return fnType(1) }
func (op clampOp) String() string { return fmt.Sprintf("Clamp[%v,%v]", op.lo, op.hi) }
func (op clampOp) InferShape(shps ...gorgonia.DimSizer) (tensor.Shape, error) {
	return sameShape(op, shps)
}
func (op clampOp) Do(vs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vs...)
}
func (op clampOp) UsePreallocDo(prealloc gorgonia.Value, vs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(vs) != 1 {
		return nil, fmt.Errorf("loss: %v takes 1 input, got %d", op, len(vs))
	}
	lo, hi := op.lo, op.hi
	if ins, out, ok, err := prep64(op.String(), vs, prealloc); err != nil {
		return nil, err
	} else if ok {
		x, o := ins[0], out.Float64s()
		for i, v := range x {
			switch {
			case v < lo:
				o[i] = lo
			case v > hi:
				o[i] = hi
			default:
				o[i] = v // NaN passes through, as in torch.clamp
			}
		}
		return out, nil
	}
	return elementwise(op.String(), vs, prealloc, kernel{f1: func(x float64) float64 {
		// NaN passes through, as in torch.clamp
		if x < lo {
			return lo
		}
		if x > hi {
			return hi
		}
		return x
	}})
}
func (op clampOp) ReturnsPtr() bool      { return false }
func (op clampOp) CallsExtern() bool     { return false }
func (op clampOp) OverwritesInput() int  { return -1 }
func (op clampOp) WriteHash(h hash.Hash) { _, _ = h.Write([]byte(op.String())) }
func (op clampOp) Hashcode() uint32      { return hashOf(op) }
func (op clampOp) DiffWRT(int) []bool    { return []bool{true} }
func (op clampOp) SymDiff(in gorgonia.Nodes, _, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	g, err := gorgonia.ApplyOp(gradOp{kind: gradInRange, lo: op.lo, hi: op.hi}, grad, in[0])
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{g}, nil
}

// whereOp is Where.
type whereOp struct{}

func (op whereOp) Arity() int     { return 3 }
func (op whereOp) Type() hm.Type  { return fnType(3) }
func (op whereOp) String() string { return "Where" }
func (op whereOp) InferShape(shps ...gorgonia.DimSizer) (tensor.Shape, error) {
	return sameShape(op, shps)
}
func (op whereOp) Do(vs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vs...)
}
func (op whereOp) UsePreallocDo(prealloc gorgonia.Value, vs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(vs) != 3 {
		return nil, fmt.Errorf("loss: %v takes 3 inputs, got %d", op, len(vs))
	}
	if ins, out, ok, err := prep64(op.String(), vs, prealloc); err != nil {
		return nil, err
	} else if ok {
		c, a, b, o := ins[0], ins[1], ins[2], out.Float64s()
		for i := range o {
			if c[i] != 0 {
				o[i] = a[i]
			} else {
				o[i] = b[i]
			}
		}
		return out, nil
	}
	return elementwise(op.String(), vs, prealloc, kernel{f3: func(c, a, b float64) float64 {
		if c != 0 {
			return a
		}
		return b
	}})
}
func (op whereOp) ReturnsPtr() bool      { return false }
func (op whereOp) CallsExtern() bool     { return false }
func (op whereOp) OverwritesInput() int  { return -1 }
func (op whereOp) WriteHash(h hash.Hash) { _, _ = h.Write([]byte(op.String())) }
func (op whereOp) Hashcode() uint32      { return hashOf(op) }
func (op whereOp) DiffWRT(int) []bool    { return []bool{false, true, true} }
func (op whereOp) SymDiff(in gorgonia.Nodes, _, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	ga, err := gorgonia.ApplyOp(gradOp{kind: gradNonZero}, grad, in[0])
	if err != nil {
		return nil, err
	}
	gb, err := gorgonia.ApplyOp(gradOp{kind: gradZero}, grad, in[0])
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{nil, ga, gb}, nil
}

// logOp is logNode: log x, with gradient g / x.
type logOp struct{}

func (op logOp) Arity() int     { return 1 }
func (op logOp) Type() hm.Type  { return fnType(1) }
func (op logOp) String() string { return "Log" }
func (op logOp) InferShape(shps ...gorgonia.DimSizer) (tensor.Shape, error) {
	return sameShape(op, shps)
}
func (op logOp) Do(vs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vs...)
}
func (op logOp) UsePreallocDo(prealloc gorgonia.Value, vs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(vs) != 1 {
		return nil, fmt.Errorf("loss: %v takes 1 input, got %d", op, len(vs))
	}
	if ins, out, ok, err := prep64(op.String(), vs, prealloc); err != nil {
		return nil, err
	} else if ok {
		x, o := ins[0], out.Float64s()
		for i, v := range x {
			o[i] = math.Log(v)
		}
		return out, nil
	}
	return elementwise(op.String(), vs, prealloc, kernel{f1: math.Log})
}
func (op logOp) ReturnsPtr() bool      { return false }
func (op logOp) CallsExtern() bool     { return false }
func (op logOp) OverwritesInput() int  { return -1 }
func (op logOp) WriteHash(h hash.Hash) { _, _ = h.Write([]byte(op.String())) }
func (op logOp) Hashcode() uint32      { return hashOf(op) }
func (op logOp) DiffWRT(int) []bool    { return []bool{true} }
func (op logOp) SymDiff(in gorgonia.Nodes, _, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	g, err := gorgonia.HadamardDiv(grad, in[0])
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{g}, nil
}

// stopGradOp is StopGradient. Its pin lets Computer.Surrogate hold the
// forward value fixed: in pinRecord mode Do keeps a copy of its output, in
// pinReplay mode it returns that copy instead of its input.
type stopGradOp struct{ pin *pin }

// pin is the record/replay state of one StopGradient node.
type pin struct {
	mode pinMode
	val  *tensor.Dense
}

type pinMode int

const (
	pinOff pinMode = iota
	pinRecord
	pinReplay
)

func (op stopGradOp) Arity() int     { return 1 }
func (op stopGradOp) Type() hm.Type  { return fnType(1) }
func (op stopGradOp) String() string { return "StopGradient" }
func (op stopGradOp) InferShape(shps ...gorgonia.DimSizer) (tensor.Shape, error) {
	return sameShape(op, shps)
}
func (op stopGradOp) Do(vs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(vs) != 1 {
		return nil, fmt.Errorf("loss: StopGradient takes 1 input, got %d", len(vs))
	}
	d, ok := vs[0].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("loss: StopGradient: input is %T, want *tensor.Dense", vs[0])
	}
	if op.pin != nil && op.pin.mode == pinReplay && op.pin.val != nil {
		return op.pin.val.Clone().(*tensor.Dense), nil
	}
	out := d.Clone().(*tensor.Dense)
	if op.pin != nil && op.pin.mode == pinRecord {
		op.pin.val = d.Clone().(*tensor.Dense)
	}
	return out, nil
}
func (op stopGradOp) ReturnsPtr() bool      { return false }
func (op stopGradOp) CallsExtern() bool     { return false }
func (op stopGradOp) OverwritesInput() int  { return -1 }
func (op stopGradOp) WriteHash(h hash.Hash) { _, _ = fmt.Fprintf(h, "StopGradient%p", op.pin) }
func (op stopGradOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
func (op stopGradOp) DiffWRT(int) []bool { return []bool{false} }
func (op stopGradOp) SymDiff(gorgonia.Nodes, *gorgonia.Node, *gorgonia.Node) (gorgonia.Nodes, error) {
	return gorgonia.Nodes{nil}, nil
}

// gradKind selects what a gradOp passes through.
type gradKind int

const (
	gradLE      gradKind = iota // g where a <= b  (inputs g, a, b)
	gradGT                      // g where a > b
	gradGE                      // g where a >= b
	gradLT                      // g where a < b
	gradInRange                 // g where lo <= x <= hi  (inputs g, x)
	gradNonZero                 // g where c != 0  (inputs g, c)
	gradZero                    // g where c == 0
)

// gradOp routes an incoming gradient g to the positions where a condition
// on the forward inputs holds, and writes 0 elsewhere: the backward pass of
// Min, Max, Clamp and Where in one sweep. The selection is piecewise
// constant, so the op has no gradient of its own (no second derivatives).
type gradOp struct {
	kind   gradKind
	lo, hi float64
}

func (op gradOp) Arity() int {
	if op.kind <= gradLT {
		return 3
	}
	return 2
}
func (op gradOp) Type() hm.Type { return fnType(op.Arity()) }
func (op gradOp) String() string {
	switch op.kind {
	case gradLE:
		return "Grad[a<=b]"
	case gradGT:
		return "Grad[a>b]"
	case gradGE:
		return "Grad[a>=b]"
	case gradLT:
		return "Grad[a<b]"
	case gradInRange:
		return fmt.Sprintf("Grad[%v<=x<=%v]", op.lo, op.hi)
	case gradNonZero:
		return "Grad[c!=0]"
	default:
		return "Grad[c==0]"
	}
}
func (op gradOp) InferShape(shps ...gorgonia.DimSizer) (tensor.Shape, error) {
	return sameShape(op, shps)
}
func (op gradOp) Do(vs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vs...)
}
func (op gradOp) UsePreallocDo(prealloc gorgonia.Value, vs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(vs) != op.Arity() {
		return nil, fmt.Errorf("loss: %v takes %d inputs, got %d", op, op.Arity(), len(vs))
	}
	if ins, out, ok, err := prep64(op.String(), vs, prealloc); err != nil {
		return nil, err
	} else if ok {
		op.route64(out.Float64s(), ins)
		return out, nil
	}
	var k kernel
	switch op.kind {
	case gradLE:
		k.f3 = func(g, a, b float64) float64 { return pass(g, a <= b) }
	case gradGT:
		k.f3 = func(g, a, b float64) float64 { return pass(g, a > b) }
	case gradGE:
		k.f3 = func(g, a, b float64) float64 { return pass(g, a >= b) }
	case gradLT:
		k.f3 = func(g, a, b float64) float64 { return pass(g, a < b) }
	case gradInRange:
		lo, hi := op.lo, op.hi
		k.f2 = func(g, x float64) float64 { return pass(g, x >= lo && x <= hi) }
	case gradNonZero:
		k.f2 = func(g, c float64) float64 { return pass(g, c != 0) }
	default:
		k.f2 = func(g, c float64) float64 { return pass(g, c == 0) }
	}
	return elementwise(op.String(), vs, prealloc, k)
}
func (op gradOp) ReturnsPtr() bool      { return false }
func (op gradOp) CallsExtern() bool     { return false }
func (op gradOp) OverwritesInput() int  { return -1 }
func (op gradOp) WriteHash(h hash.Hash) { _, _ = h.Write([]byte(op.String())) }
func (op gradOp) Hashcode() uint32      { return hashOf(op) }
func (op gradOp) DiffWRT(n int) []bool  { return make([]bool, n) }
func (op gradOp) SymDiff(in gorgonia.Nodes, _, _ *gorgonia.Node) (gorgonia.Nodes, error) {
	return make(gorgonia.Nodes, len(in)), nil
}

// route64 is gradOp's float64 loop, one specialised loop per kind.
func (op gradOp) route64(o []float64, ins [][]float64) {
	g := ins[0]
	clear(o)
	switch op.kind {
	case gradLE, gradGT, gradGE, gradLT:
		a, b := ins[1], ins[2]
		for i := range o {
			var ok bool
			switch op.kind {
			case gradLE:
				ok = a[i] <= b[i]
			case gradGT:
				ok = a[i] > b[i]
			case gradGE:
				ok = a[i] >= b[i]
			default:
				ok = a[i] < b[i]
			}
			if ok {
				o[i] = g[i]
			}
		}
	case gradInRange:
		x := ins[1]
		for i := range o {
			if x[i] >= op.lo && x[i] <= op.hi {
				o[i] = g[i]
			}
		}
	case gradNonZero:
		c := ins[1]
		for i := range o {
			if c[i] != 0 {
				o[i] = g[i]
			}
		}
	default:
		c := ins[1]
		for i := range o {
			if c[i] == 0 {
				o[i] = g[i]
			}
		}
	}
}

// pass is g where ok holds, else 0.
func pass(g float64, ok bool) float64 {
	if ok {
		return g
	}
	return 0
}
