package policy

// ModelQwen3 is config.json's model_type of Qwen3.
const ModelQwen3 = "qwen3"

// qwen3 is transformers' Qwen3ForCausalLM (models/qwen3/modeling_qwen3.py,
// configuration_qwen3.py): the Llama layout with an explicit head_dim
// (default 128) and a per-head RMSNorm of queries and keys before RoPE
// (q_norm, k_norm); attention_bias puts biases on q, k, v and o; the MLP
// has none. Qwen3Config carries attention_bias and use_sliding_window
// (sliding windows are refused, so it is written false).
var qwen3 = architecture{
	modelType:    ModelQwen3,
	class:        "Qwen3ForCausalLM",
	headDim:      128,
	maxPositions: 32768,
	readConfig: func(p *fieldParser, c *Config) {
		p.boolean("attention_bias", &c.AttentionBias)
	},
	writeConfig: func(c Config, m map[string]any) {
		m["attention_bias"] = c.AttentionBias
		m["use_sliding_window"] = false
	},
	parts: func(c Config) layerParts {
		return layerParts{qkvBias: c.AttentionBias, outBias: c.AttentionBias, qkNorm: true}
	},
}

func init() { register(qwen3) }
