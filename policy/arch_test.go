package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
)

// TestVariantArchitecture: the architecture that arch_variant_test.go
// registers, and nothing else, makes its model_type parse with its
// defaults and keys, build with its layer parts, save as its config.json
// and load back to the same function.
func TestVariantArchitecture(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_type":"variant_test","vocab_size":24,"hidden_size":16,"intermediate_size":32,
		"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"attention_bias":true,"qk_norm":true,
		"initializer_range":0.5,"eos_token_id":2}`))
	require.NoError(t, err)
	// head_dim 16/2 = 8 and max_position_embeddings 4096: the defaults
	// variantTest leaves and gives.
	assert.Equal(t, 8, cfg.HeadDim)
	assert.Equal(t, 4096, cfg.MaxPositionEmbeddings)
	assert.Equal(t, "VariantTestForCausalLM", cfg.Architecture())
	assert.True(t, cfg.AttentionBias)
	assert.True(t, cfg.QKVBias())
	assert.False(t, cfg.OutBias())
	assert.True(t, cfg.QKNorm())

	// Layer 0 in state_dict order: q, k, v with biases ([out]; q 2·8,
	// k and v 1·8), o without, the q/k norms of head_dim 8, the MLP and
	// the two norms.
	want := []TensorSpec{
		{"model.embed_tokens.weight", []int{24, 16}},
		{"model.layers.0.self_attn.q_proj.weight", []int{16, 16}},
		{"model.layers.0.self_attn.q_proj.bias", []int{16}},
		{"model.layers.0.self_attn.k_proj.weight", []int{8, 16}},
		{"model.layers.0.self_attn.k_proj.bias", []int{8}},
		{"model.layers.0.self_attn.v_proj.weight", []int{8, 16}},
		{"model.layers.0.self_attn.v_proj.bias", []int{8}},
		{"model.layers.0.self_attn.o_proj.weight", []int{16, 16}},
		{"model.layers.0.self_attn.q_norm.weight", []int{8}},
		{"model.layers.0.self_attn.k_norm.weight", []int{8}},
		{"model.layers.0.mlp.gate_proj.weight", []int{32, 16}},
		{"model.layers.0.mlp.up_proj.weight", []int{32, 16}},
		{"model.layers.0.mlp.down_proj.weight", []int{16, 32}},
		{"model.layers.0.input_layernorm.weight", []int{16}},
		{"model.layers.0.post_attention_layernorm.weight", []int{16}},
	}
	specs := cfg.TensorSpecs()
	require.Len(t, specs, 1+2*14+2)
	assert.Equal(t, want, specs[:len(want)])
	assert.Equal(t, TensorSpec{"lm_head.weight", []int{24, 16}}, specs[len(specs)-1])

	m, err := New(cfg, 7)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	ids := []int{1, 5, 9, 23}
	logits, err := m.Logits(ids)
	require.NoError(t, err)
	assert.Equal(t, []int{4, 24}, []int(logits.Shape()))

	dir := t.TempDir()
	require.NoError(t, m.Save(dir, lm.SaveOptions{}))
	// HF's layout: sorted keys, its own keys written by variantTest
	// (attention_bias, qk_norm), initializer_range kept from the input.
	written, err := os.ReadFile(filepath.Join(dir, ConfigFileName))
	require.NoError(t, err)
	assert.Equal(t, `{
  "architectures": [
    "VariantTestForCausalLM"
  ],
  "attention_bias": true,
  "eos_token_id": 2,
  "head_dim": 8,
  "hidden_act": "silu",
  "hidden_size": 16,
  "initializer_range": 0.5,
  "intermediate_size": 32,
  "max_position_embeddings": 4096,
  "model_type": "variant_test",
  "num_attention_heads": 2,
  "num_hidden_layers": 2,
  "num_key_value_heads": 1,
  "qk_norm": true,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 10000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "float32",
  "vocab_size": 24
}
`, string(written))
	back, err := Load(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = back.Close() })
	again, err := back.Logits(ids)
	require.NoError(t, err)
	assert.Equal(t, logits.Data(), again.Data())

	// Without its own key the type has no q/k norm, and writes qk_norm
	// false.
	plain := cfg
	plain.Extra = nil
	assert.False(t, plain.QKNorm())
	out, err := plain.MarshalJSON()
	require.NoError(t, err)
	assert.Contains(t, string(out), `"qk_norm": false`)
}

func TestVariantArchitectureErrors(t *testing.T) {
	base := `"vocab_size":24,"hidden_size":16,"intermediate_size":32,"num_hidden_layers":1,"num_attention_heads":2`
	for _, tc := range []struct{ name, json, want string }{
		{"own key mistyped", `{"model_type":"variant_test",` + base + `,"qk_norm":"yes"}`, `field "qk_norm" = "yes" is not a boolean`},
		{"shared key mistyped", `{"model_type":"variant_test",` + base + `,"attention_bias":0}`, `field "attention_bias" = 0 is not a boolean`},
		// The list is the registered model types, sorted, this file's
		// test type among them.
		{"unknown type", `{"model_type":"mistral",` + base + `}`, `model_type "mistral" is not one of llama, qwen2, qwen3, variant_test`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.json))
			require.ErrorIs(t, err, ErrConfig)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	// A hand-made Config whose Extra holds a bad qk_norm fails Validate,
	// so New and MarshalJSON refuse it.
	cfg := tinyConfig()
	cfg.ModelType = modelVariantTest
	cfg.Extra = map[string]json.RawMessage{"qk_norm": json.RawMessage(`1`)}
	assert.ErrorContains(t, cfg.Validate(), "qk_norm = 1 is not a boolean")
	_, err := cfg.MarshalJSON()
	assert.ErrorIs(t, err, ErrConfig)
	_, err = New(cfg, 1)
	assert.ErrorIs(t, err, ErrConfig)
	cfg.Extra = nil
	require.NoError(t, cfg.Validate())
}

// TestRegisterRefuses: register panics (at init, in the file that calls
// it) on a model_type registered twice or an incomplete entry, before it
// writes the table.
func TestRegisterRefuses(t *testing.T) {
	n := len(architectures)
	assert.Panics(t, func() { register(qwen3) })
	assert.Panics(t, func() { register(architecture{modelType: "x", class: "XForCausalLM"}) })
	assert.Panics(t, func() { register(architecture{class: "XForCausalLM", parts: llama.parts}) })
	assert.Len(t, architectures, n)
	assert.Equal(t, qwen3.class, architectures[ModelQwen3].class)
}
