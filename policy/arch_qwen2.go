package policy

// ModelQwen2 is config.json's model_type of Qwen2 and Qwen2.5.
const ModelQwen2 = "qwen2"

// qwen2 is transformers' Qwen2ForCausalLM (models/qwen2/modeling_qwen2.py,
// configuration_qwen2.py, also Qwen2.5): the Llama layout with fixed
// biases on q, k and v (never on o, and no attention_bias key) and
// head_dim = hidden/heads. Qwen2Config has no head_dim, so it is written
// only when it differs from hidden/heads; it carries use_sliding_window
// (sliding windows are refused, so it is written false).
var qwen2 = architecture{
	modelType:    ModelQwen2,
	class:        "Qwen2ForCausalLM",
	maxPositions: 32768,
	writeConfig: func(c Config, m map[string]any) {
		if c.HeadDim == c.HiddenSize/c.NumAttentionHeads {
			delete(m, "head_dim")
		}
		m["use_sliding_window"] = false
	},
	parts: func(Config) layerParts {
		return layerParts{qkvBias: true}
	},
}

func init() { register(qwen2) }
