package advantage_test

import (
	"fmt"

	"github.com/agentrl/agentrl/advantage"
)

// GRPO on two prompts with two samples each. The second trajectory's middle
// token is tool output (mask 0), so it gets no advantage.
func ExampleCompute() {
	in := advantage.Input{
		Scores: []float64{1, 0, 1, 1},
		Groups: []string{"q1", "q1", "q2", "q2"},
		Mask:   [][]float32{{1, 1}, {1, 0, 1}, {1}, {1, 1}},
	}
	out, err := advantage.Compute(advantage.Config{Estimator: advantage.GRPO}, in)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, row := range out.Advantages {
		fmt.Printf("%.4f\n", row)
	}
	// Output:
	// [0.7071 0.7071]
	// [-0.7071 0.0000 -0.7071]
	// [0.0000]
	// [0.0000 0.0000]
}

// PPO-style GAE with a critic, γ = 0.99 and λ = 0.95. (The printed values
// agree with testdata/gen_golden.py's PyTorch version of verl's
// compute_gae_advantage_return.)
func ExampleCompute_gae() {
	in := advantage.Input{
		Scores: []float64{1, 0},
		Mask:   [][]float32{{1, 1, 1}, {1, 1}},
		Values: [][]float32{{0.2, 0.4, 0.7}, {0.1, 0.3}},
	}
	cfg := advantage.Config{Estimator: advantage.GAE, Gamma: new(0.99), Lambda: new(0.95)}
	out, err := advantage.Compute(cfg, in)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("advantages %.3f %.3f\n", out.Advantages[0], out.Advantages[1])
	fmt.Printf("returns    %.3f %.3f\n", out.Returns[0], out.Returns[1])
	// Output:
	// advantages [1.128 0.757 0.125] [-0.758 -1.251]
	// returns    [0.937 0.975 1.000] [0.015 0.000]
}

// A missing input is reported with the field it concerns.
func ExampleCompute_error() {
	in := advantage.Input{Scores: []float64{1, 0}, Mask: [][]float32{{1}, {1}}}
	_, err := advantage.Compute(advantage.Config{Estimator: advantage.GRPO}, in)
	fmt.Println(err)
	// Output:
	// advantage: grpo: Groups: missing input: this estimator compares trajectories of the same prompt
}

// Registering an estimator of your own next to the built-in ones.
func ExampleRegistry_Register() {
	reg := advantage.NewRegistry()
	// "sign" gives +1 to trajectories that scored above 0.5, −1 otherwise.
	err := reg.Register("sign", func(in advantage.Input, _ advantage.Config) (advantage.Output, error) {
		out := advantage.Output{
			Advantages: make([][]float32, len(in.Mask)),
			Returns:    make([][]float32, len(in.Mask)),
		}
		for i, row := range in.Mask {
			a := float32(-1)
			if in.Scores[i] > 0.5 {
				a = 1
			}
			out.Advantages[i] = make([]float32, len(row))
			out.Returns[i] = make([]float32, len(row))
			for t, m := range row {
				out.Advantages[i][t] = a * m
				out.Returns[i][t] = float32(in.Scores[i]) * m
			}
		}
		return out, nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := reg.Compute(advantage.Config{Estimator: "sign"}, advantage.Input{
		Scores: []float64{0.9, 0.1},
		Mask:   [][]float32{{1, 0, 1}, {1}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Advantages)
	fmt.Println(len(reg.Names()), "estimators")
	// Output:
	// [[1 0 1] [-1]]
	// 13 estimators
}
