package reward_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentrl/agentrl/reward"
)

func ExampleMathVerify() {
	ctx := context.Background()
	for _, c := range []struct{ resp, gold string }{
		{`The diagonal is $\boxed{2\sqrt{2}}$.`, `\sqrt{8}`},
		{`So the answer is \boxed{0.333}.`, `\frac{1}{3}`},
		{`Solving, $\boxed{x = \frac{1}{2}}$`, `0.5`},
		{`The solutions are \boxed{\{3, -1\}}`, `-1, 3`},
	} {
		out := reward.MathVerify(ctx, c.resp, c.gold)
		fmt.Printf("%q acc=%v\n", out.Pred, out.Acc)
	}
	// Output:
	// "2\\sqrt{2}" acc=true
	// "0.333" acc=false
	// "x = \\frac{1}{2}" acc=true
	// "\\{3, -1\\}" acc=true
}

func ExampleMathFunc() {
	f, err := reward.MathFunc(reward.DefaultMathConfig()) // +1 right, −1 wrong
	if err != nil {
		panic(err)
	}
	out, err := f(context.Background(), reward.Input{Response: `\boxed{42}`, GroundTruth: "42"})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Score, out.Reason)
	// Output: 1 correct (exact, boxed)
}

func ExampleOverlongPenalty() {
	// DAPO: max 20480 tokens with a 4096-token soft zone.
	cfg := reward.OverlongConfig{MaxLen: 20480, Buffer: 4096, Factor: 1}
	for _, l := range []int{16000, 18432, 20480} {
		fmt.Printf("%d tokens: %.2f\n", l, reward.OverlongPenalty(cfg, l))
	}
	// Output:
	// 16000 tokens: 0.00
	// 18432 tokens: -0.50
	// 20480 tokens: -1.00
}

func ExampleCombine() {
	math, err := reward.MathFunc(reward.DefaultMathConfig())
	if err != nil {
		panic(err)
	}
	withBonus, err := reward.WithToolBonus(math, reward.DefaultToolBonus())
	if err != nil {
		panic(err)
	}
	f, err := reward.Combine(
		reward.Part{Name: "answer", Weight: 1, Func: withBonus},
		reward.Part{Name: "format", Weight: 0.1, Func: reward.FormatFunc(reward.FormatConfig{Reward: 1, RequireBoxed: true})},
	)
	if err != nil {
		panic(err)
	}
	// A wrong answer after 3 assistant turns (2 tool rounds, verl's
	// num_turns 6): min(−0.6, −1 + 0.1·(6−2)/2) = −0.8, plus 0.1 format.
	out, err := f(context.Background(), reward.Input{Response: `\boxed{7}`, GroundTruth: "8", Turns: 3})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%.2f\n", out.Score)
	// Output: -0.70
}

func ExampleBatch() {
	math, err := reward.MathFunc(reward.MathConfig{Correct: 1, Wrong: 0})
	if err != nil {
		panic(err)
	}
	route := reward.Router{Math: math}.Func()
	ins := []reward.Input{
		{DataSource: "aime2024", Response: `\boxed{204}`, GroundTruth: "204"},
		{DataSource: "openai/gsm8k", Response: "The answer is 17.", GroundTruth: "18"},
	}
	outs, err := reward.Batch(context.Background(), route, ins, reward.BatchOptions{Limit: 4, ItemTimeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	for _, o := range outs {
		fmt.Println(o.Score, o.Pred)
	}
	// Output:
	// 1 204
	// 0 17
}

func ExampleExtractAnswer() {
	for _, resp := range []string{
		`<think>maybe \boxed{3}</think>The roots are $\boxed{2}$ and $\boxed{5}$.`,
		"Final Answer: The final answer is $\\frac{3}{4}$. I hope it is correct.",
		"**Answer:** 18",
	} {
		a, method, ok := reward.ExtractAnswer(resp, false)
		fmt.Printf("%q %s %v\n", a, method, ok)
	}
	// Output:
	// "2, 5" boxed true
	// "\\frac{3}{4}" phrase true
	// "18" phrase true
}

func ExampleWithToolBonus() {
	math, err := reward.MathFunc(reward.DefaultMathConfig())
	if err != nil {
		panic(err)
	}
	f, err := reward.WithToolBonus(math, reward.DefaultToolBonus())
	if err != nil {
		panic(err)
	}
	// Wrong answers: 0.1 per tool round (assistant turns − 1), capped at −0.6.
	for _, turns := range []int{1, 3, 9} {
		out, err := f(context.Background(), reward.Input{Response: `\boxed{7}`, GroundTruth: "8", Turns: turns})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d turns: %.1f\n", turns, out.Score)
	}
	// Output:
	// 1 turns: -1.0
	// 3 turns: -0.8
	// 9 turns: -0.6
}

// QAFunc scores a search agent's answer by Search-R1's exact match: the
// last <answer> tag, normalized, against the ground truth's targets.
func ExampleQAFunc() {
	rf, err := reward.QAFunc(reward.SearchR1QA())
	if err != nil {
		panic(err)
	}
	for _, resp := range []string{"<answer> The Truji. </answer>", "<answer>Grebrist</answer>", "Truji"} {
		out, err := rf(context.Background(), reward.Input{Response: resp, GroundTruth: `{"target": ["Truji"]}`})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%g %q\n", out.Score, out.Pred)
	}
	// Output:
	// 1 "truji"
	// 0 "grebrist"
	// 0 ""
}
