package policy

import (
	"encoding/json"
	"fmt"
)

// This file is what adding a Llama-family variant takes (see
// architecture): a made-up model_type, registered in the package's tests
// only, with no line changed elsewhere. TestVariantArchitecture parses,
// builds, saves and loads it.

// modelVariantTest is config.json's model_type of variantTest.
const modelVariantTest = "variant_test"

// variantTest is the Llama layout with biases on q, k and v but not on o
// when attention_bias is true, and with Qwen3's per-head q/k RMSNorm when
// its own key "qk_norm" is true. Config has no field for qk_norm, so the
// key stays in Config.Extra, where parts and validate read it.
var variantTest = architecture{
	modelType:    modelVariantTest,
	class:        "VariantTestForCausalLM",
	maxPositions: 4096,
	readConfig: func(p *fieldParser, c *Config) {
		p.boolean("attention_bias", &c.AttentionBias)
		var qk bool
		p.boolean("qk_norm", &qk) // checked here; the value stays in Extra
	},
	writeConfig: func(c Config, m map[string]any) {
		m["attention_bias"] = c.AttentionBias
		m["qk_norm"], _ = variantQKNorm(c)
	},
	validate: func(c Config) error {
		_, err := variantQKNorm(c)
		return err
	},
	parts: func(c Config) layerParts {
		qk, _ := variantQKNorm(c)
		return layerParts{qkvBias: c.AttentionBias, qkNorm: qk}
	},
}

func init() { register(variantTest) }

// variantQKNorm reads "qk_norm" from c.Extra: false when absent or null.
func variantQKNorm(c Config) (bool, error) {
	raw, ok := c.Extra["qk_norm"]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	var qk bool
	if err := json.Unmarshal(raw, &qk); err != nil {
		return false, fmt.Errorf("%w: qk_norm = %s is not a boolean", ErrConfig, raw)
	}
	return qk, nil
}
