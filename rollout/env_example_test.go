package rollout_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/rollout"
)

// higherLower is an environment: a game that answers each guess until
// the model finds its secret.
type higherLower struct{ secret int }

func (g *higherLower) Open(context.Context) (rollout.Opening, error) {
	return rollout.Opening{}, nil // the request's prompt opens the game
}

func (g *higherLower) Step(_ context.Context, a rollout.Action) (rollout.Feedback, error) {
	n, err := strconv.Atoi(strings.TrimSuffix(a.Text, "<|im_end|>"))
	switch {
	case err == nil && n == g.secret:
		return rollout.Feedback{Done: true, Reward: new(1.0)}, nil
	case err == nil && n < g.secret:
		return rollout.Feedback{Observation: []rollout.Message{{Role: "user", Content: "higher"}}, Reward: new(-0.1)}, nil
	}
	return rollout.Feedback{Observation: []rollout.Message{{Role: "user", Content: "lower"}}, Reward: new(-0.1)}, nil
}

func (g *higherLower) Close() error { return nil }

// ExampleEnv plays a guessing game: the engine makes one higherLower per
// trajectory from the request's Task, and each reply is appended after
// the model's turn as the chat template renders a user message.
func ExampleEnv() {
	tok, err := tokenizer.NewBytes(tokenizer.BytesConfig{Specials: []string{"<|im_start|>", "<|im_end|>"}, EOS: []string{"<|im_end|>"}})
	if err != nil {
		panic(err)
	}
	eos, _ := tok.TokenID("<|im_end|>")
	sampler := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: []int{eos}})
	sampler.HandleDefault(policytest.Text("5<|im_end|>"), policytest.Text("7<|im_end|>"), policytest.Text("6<|im_end|>"))

	engine, err := rollout.NewEngine(rollout.Config{
		Sampler: sampler, Tokenizer: tok, MaxTurns: 4,
		Env: func(_ context.Context, task rollout.Task) (rollout.Env, error) {
			secret, err := strconv.Atoi(task.GroundTruth)
			return &higherLower{secret: secret}, err
		},
	})
	if err != nil {
		panic(err)
	}
	trajs, err := engine.Run(context.Background(), []rollout.Request{{
		PromptText: "<|im_start|>user\nGuess my number from 1 to 9.<|im_end|>\n<|im_start|>assistant\n",
		Task:       rollout.Task{GroundTruth: "6"},
	}})
	if err != nil {
		panic(err)
	}
	t := trajs[0]
	fmt.Println(t.Stop, len(t.Turns), "turns, rewards", t.TurnRewards())
	fmt.Println(strings.ReplaceAll(t.Response, "\n", `\n`))
	// Output:
	// env_done 3 turns, rewards [-0.1 -0.1 1]
	// 5<|im_end|>\n<|im_start|>user\nhigher<|im_end|>\n<|im_start|>assistant\n7<|im_end|>\n<|im_start|>user\nlower<|im_end|>\n<|im_start|>assistant\n6<|im_end|>
}
