// Package tokenizer implements byte-level BPE tokenizers read from Hugging
// Face tokenizer.json files (Qwen2/Qwen3, Llama 3, GPT-2 style), a plain
// byte-level tokenizer for tiny models, and chat templates rendered exactly
// as transformers' apply_chat_template renders them.
//
// tokenizer depends on nothing else in agentrl.
package tokenizer
