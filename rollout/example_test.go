package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// adder is a small tool: it adds two integers.
type adder struct{}

func (adder) Name() string { return "add" }
func (adder) Schema() json.RawMessage {
	return json.RawMessage(`{"type": "function", "function": {"name": "add", "description": "Add two integers.", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}`)
}
func (adder) Call(_ context.Context, args json.RawMessage) (tool.Result, error) {
	var in struct{ A, B int64 }
	if err := json.Unmarshal(args, &in); err != nil {
		return tool.Result{Content: "bad arguments: " + err.Error(), Failed: true}, nil
	}
	return tool.Result{Content: fmt.Sprint(in.A + in.B)}, nil
}

func ExampleEngine_Run() {
	tok := byteTok{} // any Encode/Decode pair, e.g. policy/tokenizer's Qwen3 tokenizer
	sampler := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: []int{imEnd}})
	sampler.HandleDefault(
		policytest.Text("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 123456789, \"b\": 987654321}}\n</tool_call>"),
		policytest.Text("The sum is \\boxed{1111111110}.<|im_end|>"),
	)
	engine, err := rollout.NewEngine(rollout.Config{
		Sampler:   sampler,
		Tokenizer: tok,
		Tools:     []tool.Tool{adder{}},
		MaxTurns:  4,
	})
	if err != nil {
		panic(err)
	}
	trajs, err := engine.Run(context.Background(), []rollout.Request{{
		ID:         "sum",
		PromptText: "<|im_start|>user\nWhat is 123456789 + 987654321?<|im_end|>\n<|im_start|>assistant\n",
		Params:     lm.SampleParams{Temperature: 1, MaxNewTokens: 256},
		N:          2,
	}})
	if err != nil {
		panic(err)
	}
	for _, t := range trajs {
		fmt.Printf("sample %d: %d turns, stop %s, tool said %s\n", t.Sample, len(t.Turns), t.Stop, t.ToolCalls[0].Result.Content)
	}
	fmt.Println(strings.ReplaceAll(trajs[0].Response, "\n", `\n`))
	// Output:
	// sample 0: 2 turns, stop no_tool_call, tool said 1111111110
	// sample 1: 2 turns, stop no_tool_call, tool said 1111111110
	// <tool_call>\n{"name": "add", "arguments": {"a": 123456789, "b": 987654321}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n1111111110\n</tool_response><|im_end|>\n<|im_start|>assistant\nThe sum is \boxed{1111111110}.<|im_end|>
}
