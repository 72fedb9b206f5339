package policy

// qwen2 is transformers' Qwen2ForCausalLM (models/qwen2/modeling_qwen2.py,
// also Qwen2.5): the Llama layout with fixed biases on q, k and v (never
// on o, and no attention_bias field) and head_dim = hidden/heads.
var qwen2 = architecture{
	class:           "Qwen2ForCausalLM",
	headDimOptional: true,
	maxPositions:    32768,
	slidingWindow:   true,
	parts: func(Config) layerParts {
		return layerParts{qkvBias: true}
	},
}
