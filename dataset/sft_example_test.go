package dataset_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/policy/tokenizer"
)

// Turn a tool-calling conversation into token ids and a loss mask with the
// Qwen3 tokenizer and chat template; print the text of the masked tokens.
func ExampleSFTEncoder_Encode() {
	tok, err := tokenizer.Load("../policy/tokenizer/qwen3")
	if err != nil {
		log.Fatal(err)
	}
	enc, err := dataset.NewSFTEncoder(tok, dataset.SFTConfig{MaxLength: 4096, Truncation: dataset.TruncateRight})
	if err != nil {
		log.Fatal(err)
	}
	// One JSON object per line; split here for reading.
	line := `{"messages": [` +
		`{"role": "user", "content": "What is 17*23?"}, ` +
		`{"role": "assistant", "content": "", "reasoning_content": "Use the tool.", "tool_calls": [{"type": "function", "function": {"name": "python", "arguments": {"code": "print(17*23)"}}}]}, ` +
		`{"role": "tool", "content": "391"}, ` +
		`{"role": "assistant", "content": "\\boxed{391}", "reasoning_content": "It printed 391."}]}`
	r := dataset.NewSFTJSONLReader(strings.NewReader(line+"\n"), "example.jsonl", dataset.SFTOptions{})
	ctx := context.Background()
	conv, err := r.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	ex, err := enc.Encode(conv)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(ex.InputIDs), "tokens,", ex.MaskedTokens(), "trained on; strategy", ex.Strategy)
	for _, tr := range ex.Turns {
		fmt.Printf("messages[%d]: %q\n", tr.Message, tok.Decode(ex.InputIDs[tr.TokenStart:tr.TokenEnd]))
	}
	// Output:
	// 87 tokens, 53 trained on; strategy prefix
	// messages[1]: "<think>\nUse the tool.\n</think>\n\n<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"print(17*23)\"}}\n</tool_call><|im_end|>"
	// messages[3]: "<think>\nIt printed 391.\n</think>\n\n\\boxed{391}<|im_end|>"
}
