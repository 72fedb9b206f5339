package hftrain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/hftrain"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/policy/toymodel"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// capital is the program's own tool: the capital city of a country.
type capital struct{}

func (capital) Name() string { return "capital" }

func (capital) Schema() json.RawMessage {
	return tool.FunctionSchema("capital", "Returns the capital city of a country.",
		tool.Param{Name: "country", Type: "string", Required: true})
}

func (capital) Call(_ context.Context, args json.RawMessage) (tool.Result, error) {
	var a struct{ Country string }
	if err := json.Unmarshal(args, &a); err != nil {
		return tool.Result{Content: "bad arguments: " + err.Error(), Failed: true}, nil
	}
	city, ok := map[string]string{"France": "Paris", "Japan": "Tokyo"}[a.Country]
	if !ok {
		return tool.Result{Content: "no capital known for " + a.Country, Failed: true}, nil
	}
	return tool.Result{Content: city}, nil
}

// score is the program's own reward: 1 for a response that names the
// ground truth, else a small penalty for its length (the shorter wrong
// answer is the better one).
func score(_ context.Context, in reward.Input) (reward.Output, error) {
	if strings.Contains(in.Response, in.GroundTruth) {
		return reward.Output{Score: 1, Acc: true}, nil
	}
	return reward.Output{Score: -float64(len(in.Response)) / 1000}, nil
}

// Two GRPO steps of a Qwen3 with a tool, a reward and a loss of the
// program's own. The model is the tiny random Qwen3 of package toymodel
// (examples/mkmodel writes the same from the command line); any Hugging
// Face folder of a Qwen3 loads the same way. The loss is the objective
// L_t = −w(A_t)·A_t·(1 + tanh(r_t − 1)), w(A) = 1 if A ≥ 0 else ½,
// written as an expression (see loss.Variant). The random model never
// calls the tool: what it shows is the pipeline, end to end.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "tiny-qwen3")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if _, err := toymodel.WriteQwen3(dir, toymodel.Nano(), 1); err != nil {
		log.Fatal(err)
	}

	// The model on the device hftrain.Options chooses (auto: a GPU if
	// there is one), with its tokenizer and chat template.
	m, err := hftrain.Load(ctx, dir, hftrain.Options{Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	losses := loss.NewRegistry()
	err = losses.Register("tanh_gate", loss.Variant{Loss: func(v *loss.Vars) loss.Expr {
		a := v.Advantages()
		return v.Where(a.GE(0), 1, 0.5).Mul(a).Mul(v.Ratio().Sub(1).Tanh().Add(1)).Neg()
	}})
	if err != nil {
		log.Fatal(err)
	}
	cfg := agentrl.GRPOTCR()
	cfg.Loss.Mode = "tanh_gate"
	cfg.PromptsPerStep, cfg.SamplesPerPrompt = 1, 2
	cfg.MiniBatchSize, cfg.MicroBatchSize = 2, 2 // one update per step
	// The overlong penalty grows over the last 4 tokens of the budget.
	cfg.Overlong.Buffer = 4

	ask := func(q string) []rollout.Message { return []rollout.Message{{Role: "user", Content: q}} }
	tools := []tool.Tool{capital{}}
	tr, err := m.NewTrainer(ctx, cfg, hftrain.Rollout{Tools: tools, MaxResponseTokens: 8, MaxTurns: 2},
		agentrl.TrainerParts{
			Prompts: []agentrl.Prompt{
				{ID: "fr", Messages: ask("What is the capital of France?"), GroundTruth: "Paris"},
				{ID: "jp", Messages: ask("What is the capital of Japan?"), GroundTruth: "Tokyo"},
			},
			Reward: score, Losses: losses,
			Notes: os.Stdout, // says so if the run cannot learn
		})
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		st, err := tr.Step(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("step %d: %d trajectories, learning: %v\n", st.Step, st.Trajectories, st.GradNorm > 0)
	}
	// Output:
	// step 1: 2 trajectories, learning: true
	// step 2: 2 trajectories, learning: true
}

// A run that cannot learn says so, once: here every response gets the
// same reward, so every advantage is 0 and no step changes the policy.
func ExampleModel_NewTrainer_equalRewards() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "tiny-qwen3")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if _, err := toymodel.WriteQwen3(dir, toymodel.Nano(), 1); err != nil {
		log.Fatal(err)
	}
	m, err := hftrain.Load(ctx, dir, hftrain.Options{Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	constant := func(context.Context, reward.Input) (reward.Output, error) { return reward.Output{Score: -1}, nil }
	cfg := agentrl.GRPOTCR()
	cfg.PromptsPerStep, cfg.SamplesPerPrompt = 1, 2
	cfg.MiniBatchSize, cfg.MicroBatchSize = 2, 2
	cfg.Overlong = nil
	tr, err := m.NewTrainer(ctx, cfg, hftrain.Rollout{MaxResponseTokens: 4},
		agentrl.TrainerParts{
			Prompts:             []agentrl.Prompt{{ID: "hi", Text: "Hello"}},
			Reward:              constant,
			GroundTruthOptional: true, // the reward reads no reference
			Notes:               os.Stdout,
		})
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		if _, err := tr.Step(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// agentrl: step 1: every advantage is 0 (the rewards of every group were equal: mean -1, std 0), so the policy gradient is 0 and the step learned nothing; check that the reward can tell the responses apart (does it need Prompt.GroundTruth?) and that the samples differ (Sampling.Temperature)
}
