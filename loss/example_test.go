package loss_test

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/loss/losstest"
)

// GRPO-TCR's policy loss (token-level aggregation, clip-higher, dual-clip)
// on a batch of two responses, the second one shorter. Token (0,1) has
// ratio e^0.5 ≈ 1.65 > 1.28 with A > 0 and is clipped (no gradient); token
// (1,0) has ratio e^1.5 ≈ 4.48 with A < 0, below the dual-clip bound 10, so
// its gradient is −A·r/4 ≈ 1.1204.
func ExampleCompute() {
	b := loss.Batch{
		LogProbs:    tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{-1, -0.5, -1, -0.5, 0, 0})),
		OldLogProbs: tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{-1, -1, -1, -2, 0, 0})),
		Advantages:  tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 1, 1, -1, -1, -1})),
		Mask:        tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 1, 1, 1, 0, 0})),
	}
	cfg := loss.Config{Mode: loss.ModeVanilla, ClipLow: 0.2, ClipHigh: 0.28, ClipC: 10, Agg: loss.AggTokenMean}
	res, err := loss.Compute(cfg, b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("loss %.4f, clipfrac %.2f\n", res.Loss, res.Metrics["pg_clipfrac"])
	fmt.Printf("dL/dlogp %.4f\n", res.GradLogProbs.Float32s())
	// Output:
	// loss 0.3004, clipfrac 0.25
	// dL/dlogp [-0.2500 0.0000 -0.2500 1.1204 0.0000 0.0000]
}

// A new objective is a gorgonia expression registered by name. Here SPO
// (Simple Policy Optimization, Xie et al. 2024, arXiv:2401.16025), which
// replaces PPO's clip by a quadratic penalty:
//
//	L_t = −(r·A − |A|/(2ε)·(r − 1)²),  r = exp(logπ − logπ_old)
//
// It then runs through Compute like a built-in mode (aggregation, entropy,
// KL and TIS terms, exact gradients) and can be checked with losstest.
func ExampleRegistry_Register() {
	reg := loss.NewRegistry()
	err := reg.Register("spo", loss.Variant{Build: func(in *loss.Inputs) (loss.Term, error) {
		eps := in.Config.ClipHigh
		delta, err := gorgonia.Sub(in.LogProbs, in.OldLogProbs)
		if err != nil {
			return loss.Term{}, err
		}
		ratio, err := gorgonia.Exp(delta)
		if err != nil {
			return loss.Term{}, err
		}
		gain, err := gorgonia.HadamardProd(ratio, in.Advantages)
		if err != nil {
			return loss.Term{}, err
		}
		dev, err := gorgonia.Sub(ratio, gorgonia.NewConstant(1.0))
		if err != nil {
			return loss.Term{}, err
		}
		sq, err := gorgonia.Square(dev)
		if err != nil {
			return loss.Term{}, err
		}
		absA, err := gorgonia.Abs(in.Advantages)
		if err != nil {
			return loss.Term{}, err
		}
		penalty, err := gorgonia.HadamardProd(absA, sq)
		if err != nil {
			return loss.Term{}, err
		}
		penalty, err = gorgonia.Mul(penalty, gorgonia.NewConstant(1/(2*eps)))
		if err != nil {
			return loss.Term{}, err
		}
		obj, err := gorgonia.Sub(gain, penalty)
		if err != nil {
			return loss.Term{}, err
		}
		perToken, err := gorgonia.Neg(obj)
		return loss.Term{PerToken: perToken}, err
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := loss.NewComputer(reg)
	cfg := loss.Config{Mode: "spo", ClipHigh: 0.2, Agg: loss.AggTokenMean}

	// At ratio 1 the penalty vanishes and the gradient is REINFORCE's −A/N.
	b := loss.Batch{
		LogProbs:    tensor.New(tensor.WithShape(1, 3), tensor.WithBacking([]float32{-1, -2, -0.5})),
		OldLogProbs: tensor.New(tensor.WithShape(1, 3), tensor.WithBacking([]float32{-1, -2, -0.5})),
		Advantages:  tensor.New(tensor.WithShape(1, 3), tensor.WithBacking([]float32{1, -0.5, 2})),
		Mask:        tensor.New(tensor.WithShape(1, 3), tensor.WithBacking([]float32{1, 1, 1})),
	}
	res, err := c.Compute(cfg, b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("loss %.4f\n", res.Loss)
	fmt.Printf("dL/dlogp %.4f\n", res.GradLogProbs.Float32s())

	// The losstest checks any variant must pass.
	rb := losstest.RandomBatch(rand.New(rand.NewPCG(1, 2)), 4, 6)
	fmt.Println("gradient:", losstest.CheckGradient(c, cfg, rb))
	fmt.Println("padding:", losstest.CheckPadding(c, cfg, rb, rand.New(rand.NewPCG(3, 4))))
	fmt.Println("zero advantage:", losstest.CheckZeroAdvantage(c, cfg, rb))
	fmt.Println("REINFORCE:", losstest.CheckREINFORCE(c, cfg, rb, loss.AggTokenMean))
	// Output:
	// loss -0.8333
	// dL/dlogp [-0.3333 0.1667 -0.6667]
	// gradient: <nil>
	// padding: <nil>
	// zero advantage: <nil>
	// REINFORCE: <nil>
}
