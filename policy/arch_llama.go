package policy

// llama is transformers' LlamaForCausalLM (models/llama/modeling_llama.py):
// attention_bias puts biases on q, k, v and o, mlp_bias on gate, up and
// down; rope_scaling may be "linear" or "llama3" (Llama 3.1/3.2).
var llama = architecture{
	class:         "LlamaForCausalLM",
	maxPositions:  2048,
	attentionBias: true,
	mlpBias:       true,
	parts: func(c Config) layerParts {
		return layerParts{qkvBias: c.AttentionBias, outBias: c.AttentionBias, mlpBias: c.MLPBias}
	},
}
