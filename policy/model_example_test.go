package policy_test

import (
	"context"
	"fmt"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// Load a checkpoint, score a batch, backpropagate a policy-gradient-style
// loss into the parameters, and take an AdamW step.
func ExampleModel_Forward() {
	ctx := context.Background()
	m, err := policy.Load("testdata/model/qwen3-tiny")
	if err != nil {
		panic(err)
	}
	defer m.Close()
	batch := lm.TokenBatch{Tokens: [][]int{{5, 17, 3, 99}, {64, 2}}, Temperature: 1}
	stats, backward, err := m.Forward(ctx, batch, true)
	if err != nil {
		panic(err)
	}
	// L = −Σ logp over the predicted tokens: dL/dlogp = −1 (position 0
	// predicts nothing).
	grad := [][]float32{{0, -1, -1, -1}, {0, -1}}
	if err := backward(ctx, grad, nil); err != nil {
		panic(err)
	}
	opt, err := policy.NewAdamW(m.Params(), policy.DefaultAdamWConfig())
	if err != nil {
		panic(err)
	}
	if _, err := opt.Step(); err != nil {
		panic(err)
	}
	after, _, err := m.Forward(ctx, batch, false)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(stats.LogProbs[0]), len(stats.LogProbs[1]), stats.LogProbs[0][0])
	fmt.Println("log-prob of the sequence went up:", sum(after.LogProbs) > sum(stats.LogProbs))
	// Output:
	// 4 2 0
	// log-prob of the sequence went up: true
}

func sum(v [][]float32) float64 {
	var s float64
	for _, r := range v {
		for _, x := range r {
			s += float64(x)
		}
	}
	return s
}

// Greedy generation with a session: the second turn extends the first
// turn's tokens with a tool result, and only the new tokens are prefilled.
func ExampleModel_Generate() {
	ctx := context.Background()
	m, err := policy.Load("testdata/model/qwen3-tiny")
	if err != nil {
		panic(err)
	}
	defer m.Close()
	prompt := []int{5, 17, 3, 30}
	turn1, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: prompt, Params: lm.SampleParams{MaxNewTokens: 4}, Session: "rollout-7"}})
	if err != nil {
		panic(err)
	}
	next := append(append(append([]int(nil), prompt...), turn1[0].Tokens...), 44, 45) // tool result tokens
	turn2, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: next, Params: lm.SampleParams{MaxNewTokens: 4}, Session: "rollout-7"}})
	if err != nil {
		panic(err)
	}
	m.CloseSession("rollout-7")
	fmt.Println("reused:", turn2[0].CachedTokens == len(prompt)+len(turn1[0].Tokens)-1)
	// Output: reused: true
}
