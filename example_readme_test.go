package agentrl_test

import (
	"context"
	"log"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// GRPO-TCR on a Hugging Face checkpoint folder (an SFT model: Qwen3,
// Qwen2 or Llama, with its tokenizer.json and chat template) and a
// verl-format data file, with the code interpreter called inside the
// rollout: the program of the README. It has no Output comment, so
// go test compiles it without running it: it needs the folder, the
// data file and python3 (ExampleTrainer runs the same loop end to end on
// a toy policy).
func Example() {
	ctx := context.Background()
	dir, data := "Qwen3-4B-SFT", "train.parquet"
	model, err := policy.Load(dir) // config.json + *.safetensors; the CPU backend by default
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	tok, err := tokenizer.Load(dir) // tokenizer.json + the chat template
	if err != nil {
		log.Fatal(err)
	}
	ci, err := tool.NewCodeInterpreter(tool.SandboxConfig{Timeout: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer ci.Close()
	tools := []tool.Tool{ci}
	prompts, _, err := agentrl.LoadPrompts(ctx, []string{data}, tok, tools, agentrl.PromptOptions{})
	if err != nil {
		log.Fatal(err)
	}
	engine, err := rollout.NewEngine(rollout.Config{Sampler: model, Tokenizer: tok, Tools: tools, MaxTurns: 8, MaxResponseTokens: 8192})
	if err != nil {
		log.Fatal(err)
	}
	rf, err := reward.OpenAgentRL(reward.OpenAgentRLConfig{Executor: ci.Executor()}) // +1/−1 by answer, code by its tests
	if err != nil {
		log.Fatal(err)
	}
	tr, err := agentrl.NewTrainer(agentrl.GRPOTCR(), agentrl.TrainerParts{Policy: model, Engine: engine, Reward: rf, Prompts: prompts})
	if err != nil {
		log.Fatal(err)
	}
	err = tr.Run(ctx, agentrl.RunConfig{Steps: 200, Checkpoints: checkpoint.Root{Dir: "runs/ckpt"}, SaveEvery: 20, Resume: true})
	if err != nil {
		log.Fatal(err)
	}
}
