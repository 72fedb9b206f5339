package loss_test

import (
	"fmt"
	"log"
	"math"

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

// A new objective is an expression registered by name; it then runs
// through Compute like a built-in mode (aggregation, entropy, KL and TIS
// terms, exact gradients). Here the objective of a user who wanted PPO's
// gradient for good tokens and a damped one for bad tokens, saturating
// smoothly instead of clipping:
//
//	L_t = −w(A_t)·A_t·(1 + tanh(r_t − 1)),  w(A) = 1 if A ≥ 0 else β.
//
// losstest.Check runs the checks every objective must pass (finite
// differences, padding invariance, zero gradient at zero advantage). The
// variant does not declare ReducesToREINFORCE: at ratio 1 its gradient is
// −β·A/N where A < 0, not REINFORCE's −A/N. A Trainer takes the registry
// (TrainerParts.Losses) and trains the mode by name (Config.Mode).
func ExampleVariant() {
	const beta = 0.5
	tanhGate := loss.Variant{Loss: func(v *loss.Vars) loss.Expr {
		a := v.Advantages()
		w := v.Where(a.GE(0), 1, beta)
		return w.Mul(a).Mul(v.Ratio().Sub(1).Tanh().Add(1)).Neg()
	}}
	reg := loss.NewRegistry()
	if err := reg.Register("tanh_gate", tanhGate); err != nil {
		log.Fatal(err)
	}
	c := loss.NewComputer(reg)
	cfg := loss.Config{Mode: "tanh_gate"}
	fmt.Println("checks:", losstest.Check(c, cfg))

	b, err := losstest.Rows{
		LogProbs:    [][]float32{{-1, -0.5}, {-0.5, -1}},
		OldLogProbs: [][]float32{{-1, -1}, {-1, -1}},
		Advantages:  [][]float32{{1, 1}, {-1, -1}},
		Mask:        [][]float32{{1, 1}, {1, 0}},
	}.Batch()
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Compute(cfg, b)
	if err != nil {
		log.Fatal(err)
	}
	grad, err := losstest.Values(res.GradLogProbs)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("loss %.4f\n", res.Loss)
	fmt.Printf("dL/dlogp %.4f\n", grad)
	// Output:
	// checks: <nil>
	// loss -0.5951
	// dL/dlogp [[-0.3333 -0.3705] [0.1853 0.0000]]
}

// SPO (Simple Policy Optimization, Xie et al. 2024, arXiv:2401.16025)
// replaces PPO's clip by a quadratic penalty,
//
//	L_t = −(r·A − |A|/(2ε)·(r − 1)²),
//
// which vanishes with its gradient at r = 1: the objective declares that
// its gradient there is REINFORCE's, and losstest checks it.
func ExampleRegistry_Register() {
	reg := loss.NewRegistry()
	err := reg.Register("spo", loss.Variant{ReducesToREINFORCE: true, Loss: func(v *loss.Vars) loss.Expr {
		r, a, eps := v.Ratio(), v.Advantages(), v.Config().ClipHigh
		return r.Mul(a).Sub(a.Abs().Mul(r.Sub(1).Square()).Div(2 * eps)).Neg()
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
	fmt.Println("checks, REINFORCE included:", losstest.Check(c, cfg))
	// Output:
	// loss -0.8333
	// dL/dlogp [-0.3333 0.1667 -0.6667]
	// checks, REINFORCE included: <nil>
}

// An objective may need an operation the expressions lack; Inputs and
// Wrap reach gorgonia's nodes, and Expr.Node leads back. Here the softplus
// of the log-ratio, log(1 + r), through gorgonia.Softplus:
//
//	L_t = −A_t·softplus(logπ − logπ_old),
//
// whose gradient at ratio 1 is −A·σ(0) = −A/2 per token before
// aggregation.
func ExampleVars_Wrap() {
	reg := loss.NewRegistry()
	err := reg.Register("softplus", loss.Variant{Loss: func(v *loss.Vars) loss.Expr {
		softplus := v.Wrap(gorgonia.Softplus(v.LogRatio().Node()))
		return softplus.Mul(v.Advantages()).Neg()
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := losstest.Rows{
		LogProbs:    [][]float32{{-1, -2}},
		OldLogProbs: [][]float32{{-1, -2}},
		Advantages:  [][]float32{{1, -1}},
		Mask:        [][]float32{{1, 1}},
	}.Batch()
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := loss.NewComputer(reg).Compute(loss.Config{Mode: "softplus"}, b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("dL/dlogp %.4f\n", res.GradLogProbs.Float32s())
	// Output:
	// dL/dlogp [-0.2500 0.2500]
}

// verl's Seq-MIS preset (decoupled_seq_is_rs) on two responses sampled by
// another engine: response 0's tokens are together 1.5 times as likely
// under the trainer's old policy as under the sampler (Σ log ratio =
// ln 1.5), so its sequence weight is 1.5; response 1's are 3 times as
// likely, outside the rejection bounds [0.5, 2], so it is left out — of
// the loss and of its token-mean denominator. At ratio 1 with A = 1 each
// kept token's loss is −1.5: the loss is −1.5 and the gradient −1.5/3 on
// the three kept tokens.
func ExampleRolloutCorrectionPreset() {
	rc, err := loss.RolloutCorrectionPreset("decoupled_seq_is_rs")
	if err != nil {
		log.Fatal(err)
	}
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	mat := func(v ...float32) *tensor.Dense { return tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(v)) }
	b := loss.Batch{
		LogProbs:        mat(-1, -1, -1, -2, -2, -2),
		OldLogProbs:     mat(-1, -1, -1, -2, -2, -2),
		RolloutLogProbs: mat(-1-ln(1.5), -1, -1, -2-ln(3), -2, -2),
		Advantages:      mat(1, 1, 1, 1, 1, 1),
		Mask:            mat(1, 1, 1, 1, 1, 1),
	}
	res, err := loss.Compute(loss.Config{RolloutCorrection: rc}, b)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", rc)
	fmt.Printf("loss %.4f, dL/dlogp %.4f\n", res.Loss, res.GradLogProbs.Float32s())
	fmt.Printf("sequences rejected %.2f, mean IS weight %.4f\n",
		res.Metrics["rollout_corr/rollout_rs_seq_masked_fraction"], res.Metrics["rollout_corr/rollout_is_mean"])
	// Output:
	// {RolloutIS:sequence RolloutISThreshold:2 RolloutISBatchNormalize:false RolloutRS:seq_sum_k1 RolloutRSThreshold:0.5_2.0 BypassMode:false LossType:}
	// loss -1.5000, dL/dlogp [-0.5000 -0.5000 -0.5000 0.0000 0.0000 0.0000]
	// sequences rejected 0.50, mean IS weight 2.2500
}

// The trainer's view of the rollout–training mismatch for one step: the
// sampler's log-probabilities of two responses against the trainer's
// recomputed ones, with verl's metric names, for the whole batch and per
// data source.
func ExampleMismatchMetrics() {
	old := [][]float32{{-0.5, -1.2, -0.1}, {-2.0, -0.7}}
	rollout := [][]float32{{-0.6, -1.2, -0.1}, {-1.9, -0.7}}
	mask := [][]float32{{1, 1, 0}, {1, 1}} // the third token of response 0 is tool output
	m, err := loss.MismatchMetrics(old, rollout, mask, []string{"math", "code"})
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range []string{"rollout_corr/kl", "rollout_corr/kl/math", "rollout_corr/kl/code",
		"rollout_corr/chi2_seq", "training/rollout_probs_diff_max"} {
		fmt.Printf("%s %.4f\n", k, m[k])
	}
	// Output:
	// rollout_corr/kl 0.0000
	// rollout_corr/kl/math -0.0500
	// rollout_corr/kl/code 0.0500
	// rollout_corr/chi2_seq 0.0201
	// training/rollout_probs_diff_max 0.0577
}
