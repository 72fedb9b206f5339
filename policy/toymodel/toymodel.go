// Package toymodel writes small models to try the SDK on with no
// download: a Hugging Face checkpoint folder holding a Qwen3 of random
// weights with a tiny body, and Qwen3's real tokenizer and chat template
// (package policy/tokenizer/qwen3). examples/mkmodel is a command line
// over it, and the Examples of the trainers train it.
//
// The folder is laid out as save_pretrained lays out Qwen/Qwen3-0.6B —
// config.json (model_type qwen3, vocab_size 151936, eos_token_id
// <|im_end|>), model.safetensors (float32), tokenizer.json,
// tokenizer_config.json — so that policy.Load, package hftrain and the
// example programs load it as they load a real Qwen3. Its weights are
// random (transformers' initialisation, drawn from a seed): it answers
// nonsense and rarely ends a turn before its token budget; what it shows
// is that a pipeline runs end to end, in seconds on a CPU.
package toymodel

import (
	"fmt"
	"os"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
)

// Shape is the body of a small Qwen3: everything but the vocabulary,
// which is Qwen3's.
type Shape struct {
	// Hidden is hidden_size, FFN intermediate_size and Layers
	// num_hidden_layers.
	Hidden, FFN, Layers int
	// Heads and KVHeads are num_attention_heads and num_key_value_heads
	// (KVHeads divides Heads), HeadDim head_dim (even, for RoPE).
	Heads, KVHeads, HeadDim int
	// MaxPosition is max_position_embeddings: the context, prompt and
	// response together.
	MaxPosition int
}

// Tiny is the body examples/mkmodel writes by default: hidden 64, two
// layers of four heads (two key/value heads) of 16, MLP 192, a context
// of 4096 tokens. With Qwen3's vocabulary the model has 9.8M parameters,
// 9.7M of them the embedding of its 151,936 rows (39 MB on disk).
func Tiny() Shape {
	return Shape{Hidden: 64, FFN: 192, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, MaxPosition: 4096}
}

// Nano is the smallest body that still is a Qwen3 of every part: hidden
// 16, one layer of two heads (one key/value head) of 8, MLP 32, a
// context of 1024 tokens. With Qwen3's vocabulary the model has 2.4M
// parameters, nearly all of them the embedding; the Examples of the
// trainers train it, in a second or two each on a laptop's CPU.
func Nano() Shape {
	return Shape{Hidden: 16, FFN: 32, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 8, MaxPosition: 1024}
}

// Config is the configuration of a Qwen3 with Qwen3's vocabulary,
// special tokens and RoPE base (10⁶), tied embeddings and the body s.
// Config.Validate says what is wrong with a bad shape.
func (s Shape) Config() policy.Config {
	return policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: qwen3.VocabSize, HiddenSize: s.Hidden, IntermediateSize: s.FFN,
		NumHiddenLayers: s.Layers, NumAttentionHeads: s.Heads, NumKeyValueHeads: s.KVHeads, HeadDim: s.HeadDim,
		MaxPositionEmbeddings: s.MaxPosition, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true,
		EOSTokenIDs: []int{qwen3.IMEndID},
	}
}

// WriteQwen3 writes a Qwen3 of shape s with random weights drawn from
// seed, and Qwen3's tokenizer files, into dir (created if needed; files
// of the same names are replaced). It returns the model's configuration.
func WriteQwen3(dir string, s Shape, seed uint64) (policy.Config, error) {
	cfg := s.Config()
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("toymodel: %w", err)
	}
	m, err := policy.New(cfg, seed)
	if err != nil {
		return cfg, fmt.Errorf("toymodel: %w", err)
	}
	defer m.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return cfg, fmt.Errorf("toymodel: %w", err)
	}
	if err := m.Save(dir, lm.SaveOptions{}); err != nil {
		return cfg, fmt.Errorf("toymodel: %w", err)
	}
	if err := qwen3.WriteFiles(dir); err != nil {
		return cfg, fmt.Errorf("toymodel: %w", err)
	}
	return cfg, nil
}
