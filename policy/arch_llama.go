package policy

// ModelLlama is config.json's model_type of Llama (1 to 3.2, TinyLlama).
const ModelLlama = "llama"

// llama is transformers' LlamaForCausalLM (models/llama/modeling_llama.py,
// configuration_llama.py): attention_bias puts biases on q, k, v and o,
// mlp_bias on gate, up and down; rope_scaling may be "linear" or "llama3"
// (Llama 3.1/3.2).
var llama = architecture{
	modelType:    ModelLlama,
	class:        "LlamaForCausalLM",
	maxPositions: 2048,
	readConfig: func(p *fieldParser, c *Config) {
		p.boolean("attention_bias", &c.AttentionBias)
		p.boolean("mlp_bias", &c.MLPBias)
	},
	writeConfig: func(c Config, m map[string]any) {
		m["attention_bias"] = c.AttentionBias
		m["mlp_bias"] = c.MLPBias
	},
	parts: func(c Config) layerParts {
		return layerParts{qkvBias: c.AttentionBias, outBias: c.AttentionBias, mlpBias: c.MLPBias}
	},
}

func init() { register(llama) }
