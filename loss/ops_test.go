package loss_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/agentrl/agentrl/loss"
)

// opGraph evaluates cost = Σ_i c_i·f(inputs)_i for an op under test, and
// its gradient with respect to the differentiable inputs, on a reusable
// tape machine; so the same graph gives both the analytic gradient and the
// values for central finite differences.
type opGraph struct {
	g      *gorgonia.ExprGraph
	ins    []*gorgonia.Node
	out    gorgonia.Value
	cost   gorgonia.Value
	grads  []gorgonia.Value
	vm     gorgonia.VM
	n      int
	weight []float64
}

func newOpGraph(t *testing.T, n, arity int, wrt []int, f func(ins []*gorgonia.Node) (*gorgonia.Node, error)) *opGraph {
	t.Helper()
	og := &opGraph{g: gorgonia.NewGraph(), n: n}
	for i := range arity {
		og.ins = append(og.ins, gorgonia.NewVector(og.g, tensor.Float64, gorgonia.WithShape(n), gorgonia.WithName(string(rune('a'+i)))))
	}
	y, err := f(og.ins)
	require.NoError(t, err)
	// fixed, distinct weights so that every output position matters
	og.weight = make([]float64, n)
	for i := range og.weight {
		og.weight[i] = 0.5 + 0.25*float64(i%5) - 0.1*float64(i%3)
	}
	w := gorgonia.NewConstant(tensor.New(tensor.WithShape(n), tensor.WithBacking(og.weight)))
	prod, err := gorgonia.HadamardProd(y, w)
	require.NoError(t, err)
	cost, err := gorgonia.Sum(prod)
	require.NoError(t, err)
	gorgonia.Read(y, &og.out)
	gorgonia.Read(cost, &og.cost)
	var wrtNodes gorgonia.Nodes
	for _, i := range wrt {
		wrtNodes = append(wrtNodes, og.ins[i])
	}
	grads, err := gorgonia.Grad(cost, wrtNodes...)
	require.NoError(t, err)
	og.grads = make([]gorgonia.Value, len(grads))
	for i := range grads {
		gorgonia.Read(grads[i], &og.grads[i])
	}
	og.vm = gorgonia.NewTapeMachine(og.g)
	return og
}

// run evaluates the graph at xs and returns the op's output, the cost and
// the gradients.
func (og *opGraph) run(t *testing.T, xs ...[]float64) (out []float64, cost float64, grads [][]float64) {
	t.Helper()
	for i, x := range xs {
		require.NoError(t, gorgonia.Let(og.ins[i], tensor.New(tensor.WithShape(og.n), tensor.WithBacking(append([]float64(nil), x...)))))
	}
	require.NoError(t, og.vm.RunAll())
	defer og.vm.Reset()
	out = append([]float64(nil), og.out.Data().([]float64)...)
	cost = og.cost.Data().(float64)
	for _, g := range og.grads {
		grads = append(grads, append([]float64(nil), g.Data().([]float64)...))
	}
	return out, cost, grads
}

// checkFD compares the analytic gradient with central differences
// (f(x+h) − f(x−h)) / 2h, h = 1e-6, for every differentiable input.
func (og *opGraph) checkFD(t *testing.T, wrt []int, xs ...[]float64) {
	t.Helper()
	_, _, grads := og.run(t, xs...)
	const h = 1e-6
	for gi, in := range wrt {
		for j := range xs[in] {
			orig := xs[in][j]
			xs[in][j] = orig + h
			_, up, _ := og.run(t, xs...)
			xs[in][j] = orig - h
			_, down, _ := og.run(t, xs...)
			xs[in][j] = orig
			fd := (up - down) / (2 * h)
			assert.InDeltaf(t, fd, grads[gi][j], 1e-6, "d/d input %d [%d]: analytic %v, finite differences %v", in, j, grads[gi][j], fd)
		}
	}
}

func TestMinMaxOps(t *testing.T) {
	a := []float64{1, -2, 3.5, 0.25, -7, 2}
	b := []float64{0.5, -1, 4, 0.3, -8, 1.5}
	for _, tc := range []struct {
		name string
		f    func(a, b *gorgonia.Node) (*gorgonia.Node, error)
		want []float64
	}{
		// elementwise min / max of the rows above, read off by hand
		{"Min", loss.Min, []float64{0.5, -2, 3.5, 0.25, -8, 1.5}},
		{"Max", loss.Max, []float64{1, -1, 4, 0.3, -7, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			og := newOpGraph(t, len(a), 2, []int{0, 1}, func(in []*gorgonia.Node) (*gorgonia.Node, error) { return tc.f(in[0], in[1]) })
			out, _, grads := og.run(t, a, b)
			assert.Equal(t, tc.want, out)
			// the gradient goes to whichever operand was picked
			for i := range a {
				pickedA := out[i] == a[i]
				assert.Equal(t, og.weight[i]*b2f(pickedA), grads[0][i], "grad a[%d]", i)
				assert.Equal(t, og.weight[i]*b2f(!pickedA), grads[1][i], "grad b[%d]", i)
			}
			og.checkFD(t, []int{0, 1}, a, b)
		})
	}
}

func TestMinTieSendsGradientToFirst(t *testing.T) {
	og := newOpGraph(t, 2, 2, []int{0, 1}, func(in []*gorgonia.Node) (*gorgonia.Node, error) { return loss.Min(in[0], in[1]) })
	_, _, grads := og.run(t, []float64{1, 2}, []float64{1, 2})
	assert.Equal(t, og.weight, grads[0])
	assert.Equal(t, []float64{0, 0}, grads[1])
}

func TestClampOp(t *testing.T) {
	x := []float64{-3, -0.5, 0, 0.7, 2.5, 1.2}
	og := newOpGraph(t, len(x), 1, []int{0}, func(in []*gorgonia.Node) (*gorgonia.Node, error) { return loss.Clamp(in[0], -1, 1) })
	out, _, grads := og.run(t, x)
	// clamp to [-1, 1] by hand
	assert.Equal(t, []float64{-1, -0.5, 0, 0.7, 1, 1}, out)
	// gradient passes only inside [-1, 1]
	assert.Equal(t, []float64{0, og.weight[1], og.weight[2], og.weight[3], 0, 0}, grads[0])
	og.checkFD(t, []int{0}, x)

	t.Run("one-sided", func(t *testing.T) {
		og := newOpGraph(t, 3, 1, []int{0}, func(in []*gorgonia.Node) (*gorgonia.Node, error) {
			return loss.Clamp(in[0], math.Inf(-1), 10)
		})
		out, _, _ := og.run(t, []float64{-1e6, 9.5, 11})
		assert.Equal(t, []float64{-1e6, 9.5, 10}, out)
	})
	t.Run("bad bounds", func(t *testing.T) {
		g := gorgonia.NewGraph()
		x := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(2), gorgonia.WithName("x"))
		_, err := loss.Clamp(x, 1, -1)
		assert.Error(t, err)
		_, err = loss.Clamp(x, math.NaN(), 1)
		assert.Error(t, err)
	})
}

func TestWhereOp(t *testing.T) {
	cond := []float64{1, 0, -2, 0, 0.5}
	a := []float64{1, 2, 3, 4, 5}
	b := []float64{-1, -2, -3, -4, -5}
	og := newOpGraph(t, len(a), 3, []int{1, 2}, func(in []*gorgonia.Node) (*gorgonia.Node, error) {
		return loss.Where(in[0], in[1], in[2])
	})
	out, _, grads := og.run(t, cond, a, b)
	// non-zero condition picks a
	assert.Equal(t, []float64{1, -2, 3, -4, 5}, out)
	w := og.weight
	assert.Equal(t, []float64{w[0], 0, w[2], 0, w[4]}, grads[0])
	assert.Equal(t, []float64{0, w[1], 0, w[3], 0}, grads[1])
	og.checkFD(t, []int{1, 2}, cond, a, b)
}

func TestStopGradientOp(t *testing.T) {
	// cost = Σ w·sg(x)·x: the value is Σ w·x², but the gradient only sees
	// the second factor, so d/dx = w·x (not the 2·w·x of the plain square).
	x := []float64{1.5, -2, 0.25}
	og := newOpGraph(t, len(x), 1, []int{0}, func(in []*gorgonia.Node) (*gorgonia.Node, error) {
		s, err := loss.StopGradient(in[0])
		if err != nil {
			return nil, err
		}
		return gorgonia.HadamardProd(s, in[0])
	})
	out, cost, grads := og.run(t, x)
	assert.Equal(t, []float64{2.25, 4, 0.0625}, out)
	assert.InDelta(t, og.weight[0]*2.25+og.weight[1]*4+og.weight[2]*0.0625, cost, 1e-12)
	for i := range x {
		assert.InDelta(t, og.weight[i]*x[i], grads[0][i], 1e-12)
	}
}

func TestOpsRejectMismatchedShapes(t *testing.T) {
	g := gorgonia.NewGraph()
	a := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(3), gorgonia.WithName("a"))
	b := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(4), gorgonia.WithName("b"))
	_, err := loss.Min(a, b)
	assert.Error(t, err)
	_, err = loss.Max(a, b)
	assert.Error(t, err)
	_, err = loss.Where(a, a, b)
	assert.Error(t, err)
}

func TestOpsFloat32(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(3), gorgonia.WithName("x"))
	y, err := loss.Clamp(x, 0, 1)
	require.NoError(t, err)
	var out gorgonia.Value
	gorgonia.Read(y, &out)
	vm := gorgonia.NewTapeMachine(g)
	require.NoError(t, gorgonia.Let(x, tensor.New(tensor.WithShape(3), tensor.WithBacking([]float32{-1, 0.5, 2}))))
	require.NoError(t, vm.RunAll())
	assert.Equal(t, []float32{0, 0.5, 1}, out.Data())
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
