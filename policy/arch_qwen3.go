package policy

// qwen3 is transformers' Qwen3ForCausalLM (models/qwen3/modeling_qwen3.py):
// the Llama layout with an explicit head_dim (default 128) and a per-head
// RMSNorm of queries and keys before RoPE (q_norm, k_norm);
// attention_bias puts biases on q, k, v and o; the MLP has none.
var qwen3 = architecture{
	class:         "Qwen3ForCausalLM",
	headDim:       128,
	maxPositions:  32768,
	attentionBias: true,
	slidingWindow: true,
	parts: func(c Config) layerParts {
		return layerParts{qkvBias: c.AttentionBias, outBias: c.AttentionBias, qkNorm: true}
	},
}
