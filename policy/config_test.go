package policy

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/safetensors"
)

func readTestConfig(t *testing.T, name string) Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "configs", name))
	require.NoError(t, err)
	c, err := ParseConfig(data)
	require.NoError(t, err)
	return c
}

// The published parameter counts are the independent reference: Qwen2.5-0.5B
// 494,032,768 (Qwen2.5 model card, model.num_parameters()), Llama-3.1-8B
// 8,030,261,248 and TinyLlama-1.1B 1,100,048,384. Qwen3-0.6B is derived
// by hand below, and its non-embedding count matches the 0.44B of the
// Qwen3 model card.
func TestConfigRealCheckpoints(t *testing.T) {
	cases := []struct {
		file                  string
		modelType             string
		layers, heads, kv, hd int
		tie, qkvBias, qkNorm  bool
		eps, theta            float64
		params                int64
		nTensors              int
		eos                   []int
	}{
		// Qwen3-0.6B by hand: embed 151936·1024 = 155,582,464; per layer
		// q 1024·2048 + k,v 2·1024·1024 + o 2048·1024 + q/k_norm 2·128
		// + mlp 3·1024·3072 + 2 norms 2·1024 = 15,730,944; ×28 =
		// 440,466,432; + final norm 1024 + embed = 596,049,920.
		{"qwen3-0.6b.json", ModelQwen3, 28, 16, 8, 128, true, false, true, 1e-6, 1e6, 596_049_920, 1 + 28*11 + 1, []int{151645}},
		{"qwen2.5-0.5b.json", ModelQwen2, 24, 14, 2, 64, true, true, false, 1e-6, 1e6, 494_032_768, 1 + 24*12 + 1, []int{151643}},
		{"llama-3.1-8b.json", ModelLlama, 32, 32, 8, 128, false, false, false, 1e-5, 5e5, 8_030_261_248, 1 + 32*9 + 2, []int{128001, 128008, 128009}},
		{"tinyllama-1.1b.json", ModelLlama, 22, 32, 4, 64, false, false, false, 1e-5, 1e4, 1_100_048_384, 1 + 22*9 + 2, []int{2}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			cfg := readTestConfig(t, c.file)
			assert.Equal(t, c.modelType, cfg.ModelType)
			assert.Equal(t, c.layers, cfg.NumHiddenLayers)
			assert.Equal(t, c.heads, cfg.NumAttentionHeads)
			assert.Equal(t, c.kv, cfg.NumKeyValueHeads)
			assert.Equal(t, c.hd, cfg.HeadDim)
			assert.Equal(t, c.tie, cfg.TieWordEmbeddings)
			assert.Equal(t, c.qkvBias, cfg.QKVBias())
			assert.False(t, cfg.OutBias())
			assert.Equal(t, c.qkNorm, cfg.QKNorm())
			assert.Equal(t, c.eps, cfg.RMSNormEps)
			assert.Equal(t, c.theta, cfg.RopeTheta)
			assert.Equal(t, c.params, cfg.NumParams())
			assert.Len(t, cfg.TensorSpecs(), c.nTensors)
			assert.Equal(t, c.eos, cfg.EOSTokenIDs)
			assert.Equal(t, "bfloat16", cfg.TorchDType)
		})
	}
	llama := readTestConfig(t, "llama-3.1-8b.json")
	require.NotNil(t, llama.RopeScaling)
	assert.Equal(t, RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}, *llama.RopeScaling)
	assert.Equal(t, 131072, llama.MaxPositionEmbeddings)
	require.NotNil(t, llama.BOSTokenID)
	assert.Equal(t, 128000, *llama.BOSTokenID)
	assert.Equal(t, json.RawMessage("1"), llama.Extra["pretraining_tp"])
}

func TestTensorSpecsQwen3(t *testing.T) {
	cfg := readTestConfig(t, "qwen3-0.6b.json")
	specs := cfg.TensorSpecs()
	// state_dict order of Qwen3ForCausalLM, shapes [out, in].
	want := []TensorSpec{
		{"model.embed_tokens.weight", []int{151936, 1024}},
		{"model.layers.0.self_attn.q_proj.weight", []int{2048, 1024}},
		{"model.layers.0.self_attn.k_proj.weight", []int{1024, 1024}},
		{"model.layers.0.self_attn.v_proj.weight", []int{1024, 1024}},
		{"model.layers.0.self_attn.o_proj.weight", []int{1024, 2048}},
		{"model.layers.0.self_attn.q_norm.weight", []int{128}},
		{"model.layers.0.self_attn.k_norm.weight", []int{128}},
		{"model.layers.0.mlp.gate_proj.weight", []int{3072, 1024}},
		{"model.layers.0.mlp.up_proj.weight", []int{3072, 1024}},
		{"model.layers.0.mlp.down_proj.weight", []int{1024, 3072}},
		{"model.layers.0.input_layernorm.weight", []int{1024}},
		{"model.layers.0.post_attention_layernorm.weight", []int{1024}},
	}
	assert.Equal(t, want, specs[:len(want)])
	assert.Equal(t, TensorSpec{"model.norm.weight", []int{1024}}, specs[len(specs)-1])
}

func TestTensorSpecsBiases(t *testing.T) {
	q2 := readTestConfig(t, "qwen2.5-0.5b.json")
	names := map[string][]int{}
	for _, s := range q2.TensorSpecs() {
		names[s.Name] = s.Shape
	}
	assert.Equal(t, []int{896}, names["model.layers.3.self_attn.q_proj.bias"])
	assert.Equal(t, []int{128}, names["model.layers.3.self_attn.k_proj.bias"])
	assert.Equal(t, []int{128}, names["model.layers.3.self_attn.v_proj.bias"])
	assert.NotContains(t, names, "model.layers.3.self_attn.o_proj.bias")
	assert.NotContains(t, names, "model.layers.3.self_attn.q_norm.weight")
	assert.NotContains(t, names, "lm_head.weight")

	l := readTestConfig(t, "tinyllama-1.1b.json")
	l.AttentionBias, l.MLPBias = true, true
	names = map[string][]int{}
	for _, s := range l.TensorSpecs() {
		names[s.Name] = s.Shape
	}
	assert.Equal(t, []int{2048}, names["model.layers.0.self_attn.o_proj.bias"])
	assert.Equal(t, []int{256}, names["model.layers.0.self_attn.v_proj.bias"])
	assert.Equal(t, []int{5632}, names["model.layers.21.mlp.up_proj.bias"])
	assert.Equal(t, []int{2048}, names["model.layers.21.mlp.down_proj.bias"])
	assert.Equal(t, []int{32000, 2048}, names["lm_head.weight"])
}

func TestCheckTensors(t *testing.T) {
	cfg := tinyConfig()
	shapes := map[string][]int{}
	for _, s := range cfg.TensorSpecs() {
		shapes[s.Name] = s.Shape
	}
	require.NoError(t, cfg.CheckTensors(shapes))
	// A tied checkpoint may carry lm_head.weight of the embedding's shape.
	shapes["lm_head.weight"] = []int{10, 8}
	require.NoError(t, cfg.CheckTensors(shapes))
	shapes["lm_head.weight"] = []int{10, 9}
	delete(shapes, "model.norm.weight")
	shapes["model.layers.0.mlp.up_proj.weight"] = []int{16, 9}
	err := cfg.CheckTensors(shapes)
	require.ErrorIs(t, err, ErrConfig)
	assert.ErrorContains(t, err, "missing tensor model.norm.weight [8]")
	assert.ErrorContains(t, err, "tensor model.layers.0.mlp.up_proj.weight has shape [16 9], config implies [16 8]")
	assert.ErrorContains(t, err, "unexpected tensor lm_head.weight [10 9]")
}

// tinyConfig is a Qwen3-shaped config small enough to derive numbers by
// hand: hidden 8, 2 heads of 4, 1 kv head, MLP 16, 2 layers, vocab 10.
func tinyConfig() Config {
	return Config{
		ModelType: ModelQwen3, VocabSize: 10, HiddenSize: 8, IntermediateSize: 16,
		NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 4,
		MaxPositionEmbeddings: 64, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
	}
}

func TestFLOPs(t *testing.T) {
	cfg := tinyConfig()
	// verl's dense_N: mlp 3·8·16 = 384, attention linears 8·(8+4+4+8) =
	// 192, per layer 576, × 2 layers = 1152, + embedding and lm_head
	// 2·10·8 = 160: 1312.
	// Sequences of 3 and 5 tokens: 6·1312·8 = 62,976 dense, plus
	// 12·(9+25)·head_dim 4·heads 2·layers 2 = 6,528 attention: 69,504.
	assert.Equal(t, 69504.0, cfg.TrainingFLOPs([]int{3, 5}))
	// Causal: the attention term halved, 6·34·4·2·2 = 3,264: 66,240.
	assert.Equal(t, 66240.0, cfg.TrainingFLOPsCausal([]int{3, 5}))
	assert.Equal(t, 0.0, cfg.TrainingFLOPsCausal(nil))
	assert.Equal(t, 69504.0/3, cfg.ForwardFLOPs([]int{3, 5}))
	// Per token at length 4: 2·1312 + 4·4·4·2·2 = 2624 + 256.
	assert.Equal(t, 2880.0, cfg.ForwardFLOPsPerToken(4))
	assert.Equal(t, 0.0, cfg.ForwardFLOPsPerToken(0))
	// Qwen3-0.6B, the usual 2·N + attention estimate at 1 token:
	// N = 28·(3·1024·3072 + 1024·(2048+1024+1024+2048)) + 2·151936·1024
	//   = 28·15,728,640 + 311,164,928 = 751,566,848;
	// attention 4·1·128·16·28 = 229,376.
	q3 := readTestConfig(t, "qwen3-0.6b.json")
	assert.Equal(t, 2*751_566_848.0+229_376, q3.ForwardFLOPsPerToken(1))
	// The MFU of the H200 run: 8 × 1,024 tokens at 7,746 tokens/s
	// is 4.1% of 989 TFLOP/s. Per token, 6·751,566,848 dense plus
	// 12·1,024·128·16·28 = 704,643,072 attention: 5,214,044,160.
	seqs := []int{1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024}
	assert.Equal(t, 8*1024*5_214_044_160.0, q3.TrainingFLOPs(seqs))
	assert.InDelta(t, 0.041, q3.TrainingFLOPs(seqs)/(8*1024/7746.0)/989e12, 0.0005)
	// Causal: 6·751,566,848 + 352,321,536 per token.
	assert.Equal(t, 8*1024*(6*751_566_848.0+352_321_536), q3.TrainingFLOPsCausal(seqs))
}

func TestRopeInvFreq(t *testing.T) {
	cfg := tinyConfig()
	// head_dim 4, theta 1e4: 1e4^(-0/4) = 1, 1e4^(-2/4) = 0.01.
	assert.InDeltaSlice(t, []float64{1, 0.01}, cfg.RopeInvFreq(), 1e-15)
	cfg.RopeScaling = &RopeScaling{Type: "linear", Factor: 2}
	assert.InDeltaSlice(t, []float64{0.5, 0.005}, cfg.RopeInvFreq(), 1e-15)

	// llama3 with head_dim 8, theta 1e4: inv_freq 1, 0.1, 0.01, 0.001,
	// wavelengths 2π/f = 6.28, 62.8, 628.3, 6283. With old context 1000,
	// low_freq_factor 1 (low wavelength 1000), high_freq_factor 4 (high
	// wavelength 250), factor 8: the first two are kept, the last is
	// divided by 8, and the third is smoothed with
	// s = (1000/628.3 - 1)/(4 - 1) = (100/(2π)·... ) below.
	cfg.HeadDim = 8
	cfg.RopeScaling = &RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 1000}
	s := (1000/(2*math.Pi/0.01) - 1) / 3 // 0.19718...
	want := []float64{1, 0.1, (1-s)*0.01/8 + s*0.01, 0.001 / 8}
	assert.InDeltaSlice(t, want, cfg.RopeInvFreq(), 1e-15)
	assert.InDelta(t, 0.0029753, want[2], 1e-7)
}

func TestConfigRoundTrip(t *testing.T) {
	for _, file := range []string{"qwen3-0.6b.json", "qwen2.5-0.5b.json", "llama-3.1-8b.json", "tinyllama-1.1b.json"} {
		t.Run(file, func(t *testing.T) {
			orig, err := os.ReadFile(filepath.Join("testdata", "configs", file))
			require.NoError(t, err)
			cfg := readTestConfig(t, file)
			dir := t.TempDir()
			require.NoError(t, WriteConfig(dir, cfg))
			back, err := ReadConfig(dir)
			require.NoError(t, err)
			assert.Equal(t, cfg, back)

			// Every key and value of the original file survives (numbers
			// compared as numbers: 1e-06 and 0.000001 are equal).
			written, err := os.ReadFile(filepath.Join(dir, ConfigFileName))
			require.NoError(t, err)
			var a, b map[string]any
			require.NoError(t, json.Unmarshal(orig, &a))
			require.NoError(t, json.Unmarshal(written, &b))
			for k, v := range a {
				assert.Equal(t, v, b[k], k)
			}
			// HF layout: sorted keys, two-space indent, trailing newline.
			assert.True(t, strings.HasPrefix(string(written), "{\n  \"architectures\": [\n"))
			assert.True(t, strings.HasSuffix(string(written), "}\n"))
		})
	}
}

func TestConfigRopeParametersV5(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_type":"llama","vocab_size":10,"hidden_size":8,"intermediate_size":16,
		"num_hidden_layers":1,"num_attention_heads":2,
		"rope_parameters":{"rope_theta":500000.0,"rope_type":"llama3","factor":32.0,"low_freq_factor":1.0,
		"high_freq_factor":4.0,"original_max_position_embeddings":8192}}`))
	require.NoError(t, err)
	assert.Equal(t, 500000.0, cfg.RopeTheta)
	assert.Equal(t, &RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}, cfg.RopeScaling)
	cfg, err = ParseConfig([]byte(`{"model_type":"qwen3","vocab_size":10,"hidden_size":8,"intermediate_size":16,
		"num_hidden_layers":1,"num_attention_heads":2,"rope_parameters":{"rope_theta":1e6,"rope_type":"default"}}`))
	require.NoError(t, err)
	assert.Equal(t, 1e6, cfg.RopeTheta)
	assert.Nil(t, cfg.RopeScaling)
	// Defaults of Qwen3Config: head_dim 128, kv heads = heads.
	assert.Equal(t, 128, cfg.HeadDim)
	assert.Equal(t, 2, cfg.NumKeyValueHeads)
	assert.Equal(t, 32768, cfg.MaxPositionEmbeddings)
}

func TestConfigErrors(t *testing.T) {
	base := `"vocab_size":10,"hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2`
	cases := []struct {
		name, json, want string
	}{
		{"not json", `{`, "unexpected end of JSON input"},
		{"not object", `[1]`, "cannot unmarshal array"},
		{"null", `null`, "not a JSON object"},
		{"no model_type", `{` + base + `}`, `missing required field "model_type"`},
		{"unknown model_type", `{"model_type":"qwen3_moe",` + base + `}`, `model_type "qwen3_moe" is not one of llama, qwen2, qwen3, variant_test`},
		{"missing hidden", `{"model_type":"qwen2","vocab_size":10,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2}`, `missing required field "hidden_size"`},
		{"missing layers", `{"model_type":"llama","vocab_size":10,"hidden_size":8,"intermediate_size":16,"num_attention_heads":2}`, `missing required field "num_hidden_layers"`},
		{"string size", `{"model_type":"llama",` + base + `,"num_key_value_heads":"2"}`, `field "num_key_value_heads" = "2" is not an integer`},
		{"fractional size", `{"model_type":"llama",` + base + `,"head_dim":4.5}`, `field "head_dim" = 4.5 is not an integer`},
		{"zero heads", `{"model_type":"llama","vocab_size":10,"hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":0}`, `num_attention_heads = 0, want > 0`},
		{"gqa mismatch", `{"model_type":"llama",` + base + `,"num_key_value_heads":3}`, `num_attention_heads 2 is not a multiple of num_key_value_heads 3`},
		{"indivisible hidden", `{"model_type":"qwen2","vocab_size":10,"hidden_size":9,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2}`, `hidden_size 9 is not a multiple of num_attention_heads 2`},
		{"negative eps", `{"model_type":"llama",` + base + `,"rms_norm_eps":-1}`, `rms_norm_eps = -1`},
		{"bad theta", `{"model_type":"llama",` + base + `,"rope_theta":0}`, `rope_theta = 0`},
		{"gelu", `{"model_type":"llama",` + base + `,"hidden_act":"gelu"}`, `hidden_act "gelu" is not supported`},
		{"sliding", `{"model_type":"qwen2",` + base + `,"use_sliding_window":true}`, `use_sliding_window true is not supported`},
		{"yarn", `{"model_type":"qwen3",` + base + `,"rope_scaling":{"rope_type":"yarn","factor":4.0}}`, `rope_scaling type "yarn" is not supported`},
		{"dynamic legacy", `{"model_type":"llama",` + base + `,"rope_scaling":{"type":"dynamic","factor":2.0}}`, `rope_scaling type "dynamic" is not supported`},
		{"scaling no type", `{"model_type":"llama",` + base + `,"rope_scaling":{"factor":2.0}}`, `missing required field "rope_scaling.rope_type"`},
		{"linear no factor", `{"model_type":"llama",` + base + `,"rope_scaling":{"rope_type":"linear"}}`, `missing required field "rope_scaling.factor"`},
		{"llama3 missing", `{"model_type":"llama",` + base + `,"rope_scaling":{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4}}`, `missing required field "rope_scaling.original_max_position_embeddings"`},
		{"llama3 order", `{"model_type":"llama",` + base + `,"rope_scaling":{"rope_type":"llama3","factor":8,"low_freq_factor":4,"high_freq_factor":1,"original_max_position_embeddings":10}}`, `0 < low_freq_factor (4) < high_freq_factor (1)`},
		{"bad eos", `{"model_type":"llama",` + base + `,"eos_token_id":"x"}`, `field "eos_token_id" = "x" is not an integer or a list`},
		{"bad tie", `{"model_type":"llama",` + base + `,"tie_word_embeddings":1}`, `field "tie_word_embeddings" = 1 is not a boolean`},
		{"huge", `{"model_type":"llama",` + base + `,"max_position_embeddings":1e12}`, `max_position_embeddings = 1000000000000 exceeds 1048576`},
		{"odd head_dim", `{"model_type":"llama",` + base + `,"head_dim":3}`, `head_dim 3 is odd`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.json))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrConfig)
			assert.ErrorContains(t, err, c.want)
		})
	}
	_, err := (Config{ModelType: "gpt2"}).MarshalJSON()
	assert.ErrorIs(t, err, ErrConfig)
}

// FuzzParseConfig: any input gives a Config that validates, or an error.
func FuzzParseConfig(f *testing.F) {
	for _, file := range []string{"qwen3-0.6b.json", "qwen2.5-0.5b.json", "llama-3.1-8b.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "configs", file))
		require.NoError(f, err)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
		out, err := c.MarshalJSON()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if _, err := ParseConfig(out); err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
	})
}

// TestTensorSpecsCheckpoint writes a sharded checkpoint with the tensors a
// config implies and validates it against the config again.
func TestTensorSpecsCheckpoint(t *testing.T) {
	cfg := tinyConfig()
	cfg.TieWordEmbeddings = false
	var ts []safetensors.Tensor
	for _, s := range cfg.TensorSpecs() {
		ts = append(ts, safetensors.Tensor{Name: s.Name, DType: safetensors.BF16, Shape: s.Shape, Float32: make([]float32, s.Size())})
	}
	dir := t.TempDir()
	require.NoError(t, safetensors.WriteCheckpoint(dir, ts, nil, 512))
	require.NoError(t, WriteConfig(dir, cfg))
	// Every file of a published checkpoint is readable by other users
	// (an inference server running as another user loads it): 0644, and
	// no temporary file is left beside them.
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		info, err := e.Info()
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o644), info.Mode().Perm(), e.Name())
		assert.NotContains(t, e.Name(), ".tmp-")
	}
	ck, err := safetensors.OpenCheckpoint(dir)
	require.NoError(t, err)
	defer ck.Close()
	require.NoError(t, cfg.CheckTensors(ck.Shapes()))
	back, err := ReadConfig(dir)
	require.NoError(t, err)
	assert.Equal(t, cfg, back)
	// The same checkpoint does not fit a config with another MLP size.
	other := cfg
	other.IntermediateSize = 32
	assert.ErrorContains(t, other.CheckTensors(ck.Shapes()), "mlp.gate_proj.weight has shape [16 8], config implies [32 8]")
}

// TestPyFloat checks the float spelling against what Python 3's repr
// prints for the same values (checked with Debian's python3): repr switches to exponent notation when the decimal point position is
// ≤ -4 or > 16, and writes integral floats with ".0".
func TestPyFloat(t *testing.T) {
	for v, want := range map[float64]string{
		8: "8.0", 1e-6: "1e-06", 1e-5: "1e-05", 0.0001: "0.0001", 0.02: "0.02",
		500000: "500000.0", 1e6: "1000000.0", 1e15: "1000000000000000.0", 1e16: "1e+16",
		1.5e300: "1.5e+300", -2.5e-7: "-2.5e-07", 0: "0.0", 123.456: "123.456",
	} {
		got, err := pyFloat(v).MarshalJSON()
		require.NoError(t, err)
		assert.Equal(t, want, string(got), "%g", v)
	}
	_, err := pyFloat(math.NaN()).MarshalJSON()
	assert.Error(t, err)
}
