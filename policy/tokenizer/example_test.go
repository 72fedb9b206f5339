package tokenizer_test

import (
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/agentrl/agentrl/policy/tokenizer"
)

// Load a checkpoint's tokenizer and encode text; the ids are those Hugging
// Face tokenizers gives for the same tokenizer.json.
func ExampleLoad() {
	tok, err := tokenizer.Load("qwen3") // tokenizer.json + tokenizer_config.json
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode("Hello world<|im_end|>")
	fmt.Println(ids)
	fmt.Printf("%q\n", tok.Decode(ids))
	fmt.Println(tok.EOSIDs())
	// Output:
	// [9707 1879 151645]
	// "Hello world<|im_end|>"
	// [151645]
}

// Render a tool-calling conversation with the model's own chat template.
func ExampleBPE_ApplyChatTemplate() {
	tok, err := tokenizer.Load("qwen3")
	if err != nil {
		log.Fatal(err)
	}
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "calc", "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}}`)}
	msgs := []tokenizer.Message{
		{Role: "user", Content: "2+2?"},
		{Role: "assistant", ToolCalls: []tokenizer.ToolCall{{Function: tokenizer.FunctionCall{Name: "calc", Arguments: json.RawMessage(`{"expr": "2+2"}`)}}}},
		{Role: "tool", Content: "4"},
	}
	text, err := tok.ApplyChatTemplate(msgs, tools, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(text[strings.Index(text, "<|im_start|>user"):]) // after the system turn listing the tools
	// Output:
	// <|im_start|>user
	// 2+2?<|im_end|>
	// <|im_start|>assistant
	// <tool_call>
	// {"name": "calc", "arguments": {"expr": "2+2"}}
	// </tool_call><|im_end|>
	// <|im_start|>user
	// <tool_response>
	// 4
	// </tool_response><|im_end|>
	// <|im_start|>assistant
}

// Decode a sampled stream token by token, for stop strings.
func ExampleStreamDecoder() {
	tok, err := tokenizer.NewBytes(tokenizer.BytesConfig{Specials: []string{"<eos>"}, EOS: []string{"<eos>"}})
	if err != nil {
		log.Fatal(err)
	}
	sd := tokenizer.NewStreamDecoder(tok)
	for _, id := range tok.Encode("né<eos>") {
		s, err := sd.Next(id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d -> %q\n", id, s)
	}
	// Output:
	// 110 -> "n"
	// 195 -> ""
	// 169 -> "é"
	// 256 -> "<eos>"
}
