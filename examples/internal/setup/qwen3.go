package setup

import (
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
)

// Shape is the body of a small Qwen3: everything but the vocabulary,
// which is Qwen3's.
type Shape struct {
	Hidden, Layers, Heads, KVHeads, HeadDim, FFN int
	MaxPosition                                  int // max_position_embeddings
}

// Qwen3Config is the configuration of a Qwen3 with Qwen3's vocabulary,
// special tokens and RoPE base, tied embeddings and the body s.
func Qwen3Config(s Shape) policy.Config {
	return policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: qwen3.VocabSize, HiddenSize: s.Hidden, IntermediateSize: s.FFN,
		NumHiddenLayers: s.Layers, NumAttentionHeads: s.Heads, NumKeyValueHeads: s.KVHeads, HeadDim: s.HeadDim,
		MaxPositionEmbeddings: s.MaxPosition, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true,
		EOSTokenIDs: []int{qwen3.IMEndID},
	}
}
