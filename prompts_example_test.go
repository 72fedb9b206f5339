package agentrl_test

import (
	"context"
	"fmt"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/rollout"
)

// Prompts are rendered once, before training: the chat template with the
// tools' schemas and the generation prompt, then the tokenizer. Here with
// Qwen3's tokenizer and thinking turned off; LoadPrompts does the same
// for verl parquet or JSON Lines files.
func ExampleRenderPrompts() {
	tok, err := tokenizer.Load("policy/tokenizer/qwen3") // a Hugging Face model folder, such as Qwen3-4B
	if err != nil {
		fmt.Println(err)
		return
	}
	prompts := []agentrl.Prompt{
		{ID: "q1", Messages: []rollout.Message{{Role: "user", Content: "What is 2+2?"}}, GroundTruth: "4"},
		{ID: "q2", Messages: []rollout.Message{{Role: "user", Content: "Sum the first 10000 primes, then reverse the digits."}}, GroundTruth: "..."},
	}
	rendered, dropped, err := agentrl.RenderPrompts(context.Background(), prompts, tok, nil, agentrl.PromptOptions{
		Vars:      map[string]any{"enable_thinking": false},
		MaxTokens: 24, // verl's max_prompt_length: longer prompts are left out
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("left out:", dropped)
	p := rendered[0]
	fmt.Println(p.ID, len(p.Tokens), "tokens")
	fmt.Printf("%q\n", tok.Decode(p.Tokens))
	// Output:
	// left out: 1
	// q1 19 tokens
	// "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
}
