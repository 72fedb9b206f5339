package eval_test

import (
	"context"
	"fmt"

	"github.com/agentrl/agentrl/eval"
)

func ExamplePassAtK() {
	// 5 samples, 2 correct: pass@2 = 1 − C(3,2)/C(5,2) = 1 − 3/10.
	p, err := eval.PassAtK(5, 2, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("pass@2 = %.2f\n", p)
	// Output: pass@2 = 0.70
}

func ExampleKs() {
	fmt.Println(eval.Ks(8), eval.Ks(12))
	// Output: [1 2 4 8] [1 2 4 8 12]
}

func ExampleEvaluate() {
	// Two prompts, four samples each, as a reward.Func scores them.
	var recs []eval.Record
	for i, answer := range []string{"42", "41", "42", "42", "7", "9", "8", "9"} {
		prompt := "p1"
		correct := answer == "42"
		if i >= 4 {
			prompt, correct = "p2", answer == "8"
		}
		score := 0.0
		if correct {
			score = 1
		}
		recs = append(recs, eval.Record{
			DataSource: "arith", PromptID: prompt, Score: score, Acc: correct, Pred: answer,
			Extra: map[string]float64{"tool_calls": 1},
		})
	}
	res, err := eval.Evaluate(context.Background(), recs, eval.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{"mean@4", "pass@4", "maj@4/mean", "best@4/mean"} {
		v, _ := res.Value("arith", eval.VarAcc, name)
		fmt.Printf("acc %-12s %.3f\n", name, v)
	}
	tools, _ := res.Value("arith", "tool_calls", "mean@4")
	fmt.Printf("tool calls per answer %.1f\n", tools)
	fmt.Println(res.Metrics[0].Key())
	// The exact expectations of the bootstrap estimates, by enumerating
	// all 4^4 draws, are maj@4 = 0.523 and best@4 = 0.840.

	// Output:
	// acc mean@4       0.500
	// acc pass@4       1.000
	// acc maj@4/mean   0.526
	// acc best@4/mean  0.837
	// tool calls per answer 1.0
	// val-aux/arith/reward/mean@4
}
