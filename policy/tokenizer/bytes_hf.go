package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// HFOptions configures Bytes.WriteHF.
type HFOptions struct {
	// Control names the specials that are control tokens, written with
	// "special": true: a detokenizer that skips special tokens (vLLM's
	// and SGLang's, by default) drops them from the text it returns.
	// The other specials are written as added tokens with "special":
	// false, which decode as their text — what markup a server must see
	// to match a stop string on (a tool call's closing tag, say), as
	// Qwen's tokenizer marks <tool_call>. Nil means every special.
	Control []string
}

// WriteHF writes into dir, which must exist, the Hugging Face tokenizer
// files that describe t, so that Load (and transformers' AutoTokenizer,
// vLLM, SGLang) encode and decode as t does:
//
//   - tokenizer.json: a byte-level BPE with no merges whose 256 tokens
//     are the bytes (GPT-2's byte-to-unicode runes) at ids 0–255, no
//     normalizer, a ByteLevel pre-tokenizer and decoder without regex or
//     prefix space, and t's specials as added tokens at ids 256, 257, …
//     (not normalized, so they match in the raw text, the longest first);
//   - tokenizer_config.json: tokenizer_class PreTrainedTokenizerFast,
//     added_tokens_decoder, eos_token (t's first EOS special), no BOS,
//     and t's chat template when it has one.
//
// Files of those names in dir are replaced. A tokenizer_config.json
// names one EOS token: t's others, if it has more, are the model's to
// list (config.json's or generation_config.json's eos_token_id, which
// policy.Load and Load read), as they change where generation stops.
func (t *Bytes) WriteHF(dir string, opts HFOptions) error {
	for _, c := range opts.Control {
		if _, ok := t.ids[c]; !ok {
			return fmt.Errorf("tokenizer: WriteHF: HFOptions.Control %q is not a special of this tokenizer", c)
		}
	}
	control := func(s string) bool { return opts.Control == nil || slices.Contains(opts.Control, s) }

	vocab := make(map[string]int, 256)
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	added := make([]AddedToken, len(t.specials))
	decoder := make(map[string]any, len(t.specials))
	for i, s := range t.specials {
		added[i] = AddedToken{ID: 256 + i, Content: s, Special: control(s)}
		decoder[fmt.Sprint(256+i)] = map[string]any{
			"content": s, "lstrip": false, "normalized": false, "rstrip": false, "single_word": false, "special": control(s),
		}
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	tok := map[string]any{
		"version":        "1.0",
		"truncation":     nil,
		"padding":        nil,
		"added_tokens":   added,
		"normalizer":     nil,
		"pre_tokenizer":  byteLevel,
		"post_processor": nil,
		"decoder":        byteLevel,
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": []any{},
		},
	}
	cfg := map[string]any{
		"tokenizer_class":              "PreTrainedTokenizerFast",
		"added_tokens_decoder":         decoder,
		"bos_token":                    nil,
		"clean_up_tokenization_spaces": false,
	}
	if len(t.eos) > 0 {
		cfg["eos_token"] = t.specials[t.eos[0]-256]
	}
	if t.chatSrc != "" {
		cfg["chat_template"] = t.chatSrc
	}
	for _, f := range []struct {
		name string
		v    any
	}{{"tokenizer.json", tok}, {"tokenizer_config.json", cfg}} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // "<|im_end|>", not "\u003c|im_end|\u003e"
		enc.SetIndent("", "  ")
		if err := enc.Encode(f.v); err != nil {
			return fmt.Errorf("tokenizer: WriteHF: %s: %w", f.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("tokenizer: WriteHF: %w", err)
		}
	}
	return nil
}
