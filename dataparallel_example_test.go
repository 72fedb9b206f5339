package agentrl_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// Data-parallel training: each rank builds the same trainer with its
// communicator in TrainerParts.DataParallel. In a program the ranks are
// processes started by torchrun, srun or mpirun, and the communicator
// comes from dist.Open (Local, and one process, without a launcher);
// here two ranks run as goroutines (dist.NewGroup). Each rank rolls out
// one of the step's two prompts; the ranks sum their gradients before the
// update and hold the same policy after every step.
func ExampleDataParallel() {
	ctx := context.Background()
	comms, err := dist.NewGroup(ctx, 2, dist.GroupOptions{})
	if err != nil {
		log.Fatal(err)
	}
	rf := func(_ context.Context, in reward.Input) (reward.Output, error) {
		if in.Response == in.GroundTruth {
			return reward.Output{Score: 1, Acc: true}, nil
		}
		return reward.Output{}, nil
	}
	cfg := agentrl.GRPOTCR()
	cfg.PromptsPerStep, cfg.SamplesPerPrompt = 2, 8 // one group per rank
	cfg.Sampling = lm.SampleParams{Temperature: 1, MaxNewTokens: 1}
	cfg.MiniBatchSize, cfg.MicroBatchSize = 0, 0 // one update a step
	cfg.Overlong = nil
	cfg.Optimizer.LR = 0.1

	models := make([]*tabular, 2)
	var wg sync.WaitGroup
	for r, comm := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer comm.Close()
			models[r] = newTabular("abcd")
			engine, err := rollout.NewEngine(rollout.Config{Sampler: models[r], Tokenizer: alphaTokenizer{"abcd"}, MaxResponseTokens: 4})
			if err != nil {
				log.Fatal(err)
			}
			tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{
				Policy: models[r], Engine: engine, Reward: rf,
				Prompts:      []agentrl.Prompt{{ID: "q1", Text: "a", GroundTruth: "c"}, {ID: "q2", Text: "a", GroundTruth: "c"}},
				DataParallel: agentrl.DataParallel{Comm: comm},
			})
			if err != nil {
				log.Fatal(err)
			}
			if err := tr.Run(ctx, agentrl.RunConfig{Steps: 5}); err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()
	// p(c|a) rises from 0.25.
	fmt.Printf("same policy on both ranks: %v; p(c|a) = %.2f\n", fmt.Sprint(models[0].w) == fmt.Sprint(models[1].w), models[0].prob(0, 2))
	// Output: same policy on both ranks: true; p(c|a) = 0.46
}
