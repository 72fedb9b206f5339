package agentrl_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// A Trainer wired end to end: a policy (here the bigram table of the
// tests, which implements policy.Sampler and policy.Trainable; in a real
// run a *policy.Model), a rollout engine over its sampler, a reward
// function and prompts, trained with the GRPO-TCR preset and
// checkpointed.
func ExampleTrainer() {
	ctx := context.Background()
	model := newTabular("abcd")
	engine, err := rollout.NewEngine(rollout.Config{
		Sampler: model, Tokenizer: alphaTokenizer{"abcd"}, MaxResponseTokens: 4,
	})
	if err != nil {
		log.Fatal(err)
	}
	// Reward 1 for answering "c".
	rf := func(_ context.Context, in reward.Input) (reward.Output, error) {
		ok := in.Response == "c"
		score := 0.0
		if ok {
			score = 1
		}
		return reward.Output{Score: score, Acc: ok, Pred: in.Response}, nil
	}
	prompts := []agentrl.Prompt{{ID: "q1", Text: "a"}, {ID: "q2", Text: "a"}}

	cfg := agentrl.GRPOTCR()
	cfg.PromptsPerStep, cfg.SamplesPerPrompt = 2, 8
	cfg.MiniBatchSize, cfg.MicroBatchSize = 16, 8
	cfg.Sampling = policy.SampleParams{Temperature: 1, MaxNewTokens: 1}
	cfg.MaxResponseTokens = 4
	cfg.Overlong.Buffer = 2 // penalise responses longer than 4−2 tokens
	cfg.Optimizer.LR = 0.1
	cfg.Optimizer.WeightDecay = 0

	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: model, Engine: engine, Reward: rf, Prompts: prompts})
	if err != nil {
		log.Fatal(err)
	}
	before := model.prob(0, 2)
	for range 5 {
		if _, err := tr.Step(ctx); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("p(c|a): %.2f before, higher after 5 steps: %v\n", before, model.prob(0, 2) > before)

	root, err := os.MkdirTemp("", "agentrl-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	dir, err := tr.SaveCheckpoint(ctx, agentrl.CheckpointRoot{Dir: root}, 3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("checkpoint:", filepath.Base(dir))
	// Output:
	// p(c|a): 0.25 before, higher after 5 steps: true
	// checkpoint: step-5
}

// SFT on one tool-use-shaped sequence: the loss is taken only where the
// mask is 1.
func ExampleSFTTrainer() {
	model := newTabular("abcd")
	data := []agentrl.SFTSample{{IDs: []int{0, 1, 2, 3, 0, 1, 2, 0}, Mask: []float32{0, 0, 1, 1, 0, 0, 1, 1}}}
	tr, err := agentrl.NewSFTTrainer(model, data, agentrl.SFTConfig{
		BatchSize: 1, Epochs: 40,
		Optimizer: policy.AdamWConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	start, _ := tr.Loss(ctx, data)
	if err := tr.Train(ctx, nil); err != nil {
		log.Fatal(err)
	}
	end, _ := tr.Loss(ctx, data)
	fmt.Printf("loss %.3f → below 0.5: %v\n", start, end < 0.5)
	// Output:
	// loss 1.386 → below 0.5: true
}
