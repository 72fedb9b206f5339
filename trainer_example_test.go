package agentrl_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"gorgonia.org/gorgonia"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/eval"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// A Trainer wired end to end: a policy (here the bigram table of the
// tests, which implements lm.Sampler and lm.Trainable; in a real
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
	prompts := []agentrl.Prompt{{ID: "q1", Text: "a", GroundTruth: "c"}, {ID: "q2", Text: "a", GroundTruth: "c"}}

	cfg := agentrl.GRPOTCR()
	cfg.PromptsPerStep, cfg.SamplesPerPrompt = 2, 8
	cfg.MiniBatchSize, cfg.MicroBatchSize = 16, 8
	cfg.Sampling = lm.SampleParams{Temperature: 1, MaxNewTokens: 1}
	cfg.Overlong.Buffer = 2 // penalise responses longer than the engine's 4 − 2 tokens
	cfg.Optimizer.LR = 0.1
	cfg.Optimizer.WeightDecay = 0

	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: model, Engine: engine, Reward: rf, Prompts: prompts})
	if err != nil {
		log.Fatal(err)
	}
	root, err := os.MkdirTemp("", "agentrl-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	// Validation on held-out prompts: 16 samples each, avg@16 = mean@16
	// of the accuracy, before training and after the last step.
	val := agentrl.ValidationConfig{Prompts: []agentrl.Prompt{{ID: "v", Text: "a", DataSource: "bandit", GroundTruth: "c"}}, N: 16,
		Sampling: lm.SampleParams{Temperature: 1, MaxNewTokens: 1}}
	var acc []float64
	err = tr.Run(ctx, agentrl.RunConfig{
		Steps: 5,
		Validate: func(ctx context.Context, step int) (map[string]float64, error) {
			res, err := tr.Validate(ctx, val)
			if err != nil {
				return nil, err
			}
			v, _ := res.Value("bandit", eval.VarAcc, "mean@16")
			acc = append(acc, v)
			return res.Map(), nil
		},
		ValBeforeTrain: true,
		Checkpoints:    checkpoint.Root{Dir: root}, SaveEvery: 2, Keep: 3,
		OnCheckpoint: func(step int, dir string) error {
			fmt.Println("checkpoint:", filepath.Base(dir))
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("avg@16 higher after 5 steps: %v\n", acc[1] > acc[0])
	// Output:
	// checkpoint: step-2
	// checkpoint: step-4
	// checkpoint: step-5
	// avg@16 higher after 5 steps: true
}

// A program's own objective, trained end to end: register it on a
// loss.Registry (losstest.CheckAll checks such a variant), hand the
// registry to the Trainer in TrainerParts.Losses and name it in
// TrainerConfig.Loss.Mode. Here the objective is a soft-clipped policy
// gradient, L_t = −A_t·tanh(r_t − 1) − A_t with r_t the PPO ratio: the
// same gradient as PPO at r = 1, saturating smoothly instead of clipping.
// TrainerParts.Estimators does the same for advantage estimators.
func ExampleTrainerParts_losses() {
	losses := loss.NewRegistry()
	err := losses.Register("soft_clip", loss.Variant{Build: func(in *loss.Inputs) (loss.Term, error) {
		d, err := gorgonia.Sub(in.LogProbs, in.OldLogProbs)
		if err != nil {
			return loss.Term{}, err
		}
		r, err := gorgonia.Exp(d)
		if err != nil {
			return loss.Term{}, err
		}
		dev, err := gorgonia.Sub(r, gorgonia.NewConstant(1.0))
		if err != nil {
			return loss.Term{}, err
		}
		soft, err := gorgonia.Tanh(dev)
		if err != nil {
			return loss.Term{}, err
		}
		soft, err = gorgonia.Add(soft, gorgonia.NewConstant(1.0))
		if err != nil {
			return loss.Term{}, err
		}
		gain, err := gorgonia.HadamardProd(soft, in.Advantages)
		if err != nil {
			return loss.Term{}, err
		}
		perToken, err := gorgonia.Neg(gain)
		return loss.Term{PerToken: perToken}, err
	}})
	if err != nil {
		log.Fatal(err)
	}

	model := newTabular("abcd")
	engine, err := rollout.NewEngine(rollout.Config{Sampler: model, Tokenizer: alphaTokenizer{"abcd"}, MaxResponseTokens: 4})
	if err != nil {
		log.Fatal(err)
	}
	rf := func(_ context.Context, in reward.Input) (reward.Output, error) {
		if in.Response == "c" {
			return reward.Output{Score: 1, Acc: true}, nil
		}
		return reward.Output{}, nil
	}
	cfg := agentrl.GRPOTCR()
	cfg.Loss.Mode = "soft_clip"
	cfg.PromptsPerStep, cfg.SamplesPerPrompt = 2, 8
	cfg.MiniBatchSize, cfg.MicroBatchSize = 8, 8 // two updates per step: the second is off-policy
	cfg.Sampling = lm.SampleParams{Temperature: 1, MaxNewTokens: 1}
	cfg.Overlong = nil
	cfg.Optimizer.LR, cfg.Optimizer.WeightDecay = 0.1, 0

	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{
		Policy: model, Engine: engine, Reward: rf,
		Prompts: []agentrl.Prompt{{ID: "q1", Text: "a", GroundTruth: "c"}, {ID: "q2", Text: "a", GroundTruth: "c"}},
		Losses:  losses,
	})
	if err != nil {
		log.Fatal(err)
	}
	before := model.prob(0, 2)
	for range 5 {
		if _, err := tr.Step(context.Background()); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("p(c|a): %.2f before, higher after 5 steps: %v\n", before, model.prob(0, 2) > before)
	// Output:
	// p(c|a): 0.25 before, higher after 5 steps: true
}

// SFT on one tool-use-shaped sequence: the loss is taken only where the
// mask is 1.
func ExampleSFTTrainer() {
	model := newTabular("abcd")
	data := []agentrl.SFTSample{{IDs: []int{0, 1, 2, 3, 0, 1, 2, 0}, Mask: []float32{0, 0, 1, 1, 0, 0, 1, 1}}}
	tr, err := agentrl.NewSFTTrainer(agentrl.SFTConfig{
		BatchSize: 1, Epochs: 40,
		Optimizer: policy.AdamWConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
	}, agentrl.SFTParts{Policy: model, Data: data})
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
