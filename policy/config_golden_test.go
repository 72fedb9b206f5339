package policy

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
)

var updateConfigGolden = flag.Bool("update-config-golden", false, "rewrite testdata/configs/written from the current writer")

// configGoldenCases are config.json inputs for every model type: the
// published checkpoints' files, and made-up ones for what those lack
// (defaults, biases, a head_dim that qwen2 must write or leave out, keys a
// type drops, rope_parameters, extra keys, token lists and nulls).
var configGoldenCases = []struct{ name, file, json string }{
	{name: "qwen3-0.6b", file: "qwen3-0.6b.json"},
	{name: "qwen2.5-0.5b", file: "qwen2.5-0.5b.json"},
	{name: "llama-3.1-8b", file: "llama-3.1-8b.json"},
	{name: "tinyllama-1.1b", file: "tinyllama-1.1b.json"},
	{name: "qwen3-defaults", json: `{"model_type":"qwen3","vocab_size":10,"hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2}`},
	{name: "qwen2-defaults", json: `{"model_type":"qwen2","vocab_size":10,"hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2}`},
	{name: "llama-defaults", json: `{"model_type":"llama","vocab_size":10,"hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2}`},
	{name: "qwen3-variant", json: `{"model_type":"qwen3","vocab_size":10,"hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,
		"num_attention_heads":2,"num_key_value_heads":1,"head_dim":64,"attention_bias":true,"mlp_bias":true,"bos_token_id":null,
		"eos_token_id":[1,2],"use_sliding_window":false,"sliding_window":4096,"rope_scaling":{"rope_type":"linear","factor":2,"note":"x"},
		"rms_norm_eps":1e-5,"tie_word_embeddings":true}`},
	{name: "qwen2-head-dim", json: `{"model_type":"qwen2","vocab_size":10,"hidden_size":64,"intermediate_size":16,"num_hidden_layers":1,
		"num_attention_heads":2,"head_dim":16,"attention_bias":true,"mlp_bias":true,"bos_token_id":5,"max_window_layers":1,
		"rope_parameters":{"rope_theta":1e6,"rope_type":"default"}}`},
	{name: "qwen2-derived-head-dim", json: `{"model_type":"qwen2","vocab_size":10,"hidden_size":64,"intermediate_size":16,"num_hidden_layers":1,
		"num_attention_heads":4,"head_dim":16,"torch_dtype":"float32"}`},
	{name: "llama-variant", json: `{"model_type":"llama","vocab_size":10,"hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,
		"num_attention_heads":2,"attention_bias":true,"mlp_bias":true,"rope_scaling":null,"pretraining_tp":1,"eos_token_id":3,
		"rope_parameters":{"rope_theta":500000.0,"rope_type":"llama3","factor":32.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
		"original_max_position_embeddings":8192,"extra_rope_key":[1]},"torch_dtype":"float32","rms_norm_eps":1e-5,"use_sliding_window":false}`},
}

// TestConfigWrittenGolden pins the config.json that WriteConfig writes,
// byte for byte, for each case of configGoldenCases. The goldens under
// testdata/configs/written were made by this writer (go test -run
// TestConfigWrittenGolden -update-config-golden) before each architecture
// moved its config.json keys into its own arch_*.go file, so that the move
// is checked to write the same bytes; TestConfigRoundTrip checks the
// values against the published files.
func TestConfigWrittenGolden(t *testing.T) {
	for _, tc := range configGoldenCases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.json)
			if tc.file != "" {
				var err error
				data, err = os.ReadFile(filepath.Join("testdata", "configs", tc.file))
				require.NoError(t, err)
			}
			cfg, err := ParseConfig(data)
			require.NoError(t, err)
			dir := t.TempDir()
			require.NoError(t, WriteConfig(dir, cfg))
			checkConfigGolden(t, filepath.Join(dir, ConfigFileName), tc.name+".json")
		})
	}
}

// TestSaveConfigGolden pins the config.json that Model.Save writes for the
// tiny checkpoints of every architecture (torch_dtype set by the dtype
// written), made as TestConfigWrittenGolden's goldens.
func TestSaveConfigGolden(t *testing.T) {
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			m := loadTiny(t, name)
			dir := t.TempDir()
			require.NoError(t, m.Save(dir, lm.SaveOptions{}))
			checkConfigGolden(t, filepath.Join(dir, ConfigFileName), "save-"+name+".json")
		})
	}
}

func checkConfigGolden(t *testing.T, path, golden string) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want := filepath.Join("testdata", "configs", "written", golden)
	if *updateConfigGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(want), 0o755))
		require.NoError(t, os.WriteFile(want, got, 0o644))
	}
	w, err := os.ReadFile(want)
	require.NoError(t, err)
	assert.Equal(t, string(w), string(got))
}
