package agentrl_test

import (
	"context"
	"log"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/hftrain"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/tool"
)

// GRPO-TCR on a Hugging Face model folder (an SFT model: Qwen3, Qwen2 or
// Llama, with its tokenizer.json and chat template) and a verl-format
// data file, with the code interpreter called inside the rollout: the
// program of the README. It has no Output comment, so go test compiles
// it without running it: it needs the folder, the data file and python3
// (package hftrain's Example runs the same calls end to end on a tiny
// random Qwen3).
func Example() {
	ctx := context.Background()
	m, err := hftrain.Load(ctx, "Qwen3-4B-SFT", hftrain.Options{}) // weights, tokenizer, chat template; a GPU if built with agentrl_cuda
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	ci, err := tool.NewCodeInterpreter(tool.SandboxConfig{Timeout: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer ci.Close()
	tools := []tool.Tool{ci}
	prompts, _, err := m.LoadPrompts(ctx, []string{"train.parquet"}, tools, agentrl.PromptOptions{})
	if err != nil {
		log.Fatal(err)
	}
	score, err := reward.OpenAgentRL(reward.OpenAgentRLConfig{Executor: ci.Executor()}) // +1/−1 by answer, code by its tests
	if err != nil {
		log.Fatal(err)
	}
	tr, err := m.NewTrainer(ctx, agentrl.GRPOTCR(), hftrain.Rollout{Tools: tools, MaxTurns: 8, MaxResponseTokens: 8192},
		agentrl.TrainerParts{Prompts: prompts, Reward: score})
	if err != nil {
		log.Fatal(err)
	}
	err = tr.Run(ctx, agentrl.RunConfig{Steps: 200, Checkpoints: checkpoint.Root{Dir: "runs/ckpt"}, SaveEvery: 20, Resume: true})
	if err != nil {
		log.Fatal(err)
	}
}
