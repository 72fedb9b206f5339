package policy

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/safetensors"
)

func qwen3TinyConfig(t *testing.T) Config {
	t.Helper()
	cfg, err := ReadConfig(filepath.Join("testdata", "model", "qwen3-tiny"))
	require.NoError(t, err)
	return cfg
}

func TestNewInitialisesLikeTransformers(t *testing.T) {
	cfg := qwen3TinyConfig(t) // initializer_range 0.02
	cfg.ModelType = ModelLlama
	cfg.AttentionBias, cfg.MLPBias = true, true
	m, err := New(cfg, 42)
	require.NoError(t, err)
	defer m.Close()
	again, err := New(cfg, 42)
	require.NoError(t, err)
	defer again.Close()
	other, err := New(cfg, 43)
	require.NoError(t, err)
	defer other.Close()
	specs := cfg.TensorSpecs()
	params := m.Params()
	require.Len(t, params, len(specs))
	var n int
	var sum, sq float64
	for i, p := range params {
		require.Equal(t, specs[i].Name, p.Name)
		require.Len(t, p.Data, int(specs[i].Size()))
		require.Len(t, p.Grad, len(p.Data))
		assert.Equal(t, p.Data, again.Params()[i].Data, "same seed, same weights")
		switch {
		case isNorm(p.Name):
			for _, v := range p.Data {
				require.Equal(t, float32(1), v, p.Name)
			}
		case isBias(p.Name):
			for _, v := range p.Data {
				require.Zero(t, v, p.Name)
			}
		default:
			assert.NotEqual(t, p.Data, other.Params()[i].Data, "another seed, other weights")
			for _, v := range p.Data {
				n++
				sum += float64(v)
				sq += float64(v) * float64(v)
			}
		}
	}
	// ~29k normal(0, 0.02) draws: mean within 5 standard errors of 0, std
	// within 2 % of 0.02.
	mean := sum / float64(n)
	std := math.Sqrt(sq/float64(n) - mean*mean)
	assert.InDelta(t, 0, mean, 5*0.02/math.Sqrt(float64(n)))
	assert.InEpsilon(t, 0.02, std, 0.02)
}

func TestNewRejectsBadConfig(t *testing.T) {
	cfg := qwen3TinyConfig(t)
	cfg.NumKeyValueHeads = 3
	_, err := New(cfg, 1)
	require.ErrorIs(t, err, ErrConfig)
	cfg = qwen3TinyConfig(t)
	cfg.Extra["initializer_range"] = []byte(`"x"`)
	_, err = New(cfg, 1)
	require.ErrorIs(t, err, ErrConfig)
}

func TestSaveLoadRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := loadTiny(t, "qwen3-tiny")
	seq := []int{5, 17, 3, 99, 42}
	want, err := src.Logits(seq)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		opts  lm.SaveOptions
		files []string
		tol   float64
	}{
		{"f32", lm.SaveOptions{}, []string{"model.safetensors"}, 0},
		{"f32 sharded", lm.SaveOptions{MaxShardBytes: 40_000}, []string{"model-00001-of-00004.safetensors", "model.safetensors.index.json"}, 0},
		{"bf16", lm.SaveOptions{DType: safetensors.BF16}, []string{"model.safetensors"}, 1.0 / 128},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, src.Save(dir, tc.opts))
			for _, f := range append(tc.files, "config.json") {
				assert.FileExists(t, filepath.Join(dir, f))
			}
			cfg, err := ReadConfig(dir)
			require.NoError(t, err)
			wantDType := "float32"
			if tc.opts.DType == safetensors.BF16 {
				wantDType = "bfloat16"
			}
			assert.Equal(t, wantDType, cfg.TorchDType)
			m, err := Load(dir)
			require.NoError(t, err)
			defer m.Close()
			for i, p := range m.Params() {
				orig := src.Params()[i]
				require.Equal(t, orig.Name, p.Name)
				for j := range p.Data {
					// bf16 keeps 8 significant bits: relative error ≤ 2⁻⁸.
					require.InDelta(t, orig.Data[j], p.Data[j], tc.tol*math.Abs(float64(orig.Data[j]))+1e-30, "%s[%d]", p.Name, j)
				}
			}
			if tc.tol == 0 {
				got, err := m.Logits(seq)
				require.NoError(t, err)
				assert.Equal(t, want.Data(), got.Data())
				_, _, err = m.Forward(ctx, lm.TokenBatch{Tokens: [][]int{seq}}, false)
				require.NoError(t, err)
			}
		})
	}
	require.ErrorIs(t, src.Save(t.TempDir(), lm.SaveOptions{DType: safetensors.F16}), ErrInput)
}

func TestLoadReadsGenerationConfigEOS(t *testing.T) {
	src := loadTiny(t, "qwen3-tiny")
	dir := t.TempDir()
	require.NoError(t, src.Save(dir, lm.SaveOptions{}))
	require.NoError(t, os.WriteFile(filepath.Join(dir, GenerationConfigFileName), []byte(`{"eos_token_id": [1, 7]}`), 0o644))
	m, err := Load(dir)
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, []int{1, 7}, m.EOSTokenIDs())
	require.NoError(t, os.WriteFile(filepath.Join(dir, GenerationConfigFileName), []byte(`{"eos_token_id": "x"}`), 0o644))
	_, err = Load(dir)
	require.ErrorIs(t, err, ErrConfig)
}

// writeTensors writes a checkpoint of the tiny config with edits.
func writeTensors(t *testing.T, edit func([]safetensors.Tensor) []safetensors.Tensor) string {
	t.Helper()
	src := loadTiny(t, "qwen3-tiny")
	dir := t.TempDir()
	require.NoError(t, WriteConfig(dir, src.Config()))
	var ts []safetensors.Tensor
	for _, p := range src.Params() {
		spec := src.w.byName[p.Name].spec
		ts = append(ts, safetensors.Tensor{Name: p.Name, DType: safetensors.F32, Shape: spec.Shape, Float32: p.Data})
	}
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), edit(ts), nil))
	return dir
}

func TestLoadRejectsMismatchedCheckpoints(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func([]safetensors.Tensor) []safetensors.Tensor
	}{
		{"missing", "missing tensor model.norm.weight", func(ts []safetensors.Tensor) []safetensors.Tensor {
			return ts[:len(ts)-1]
		}},
		{"wrong shape", "tensor model.norm.weight has shape [2 16]", func(ts []safetensors.Tensor) []safetensors.Tensor {
			ts[len(ts)-1].Shape = []int{2, 16}
			return ts
		}},
		{"unexpected", "unexpected tensor model.extra", func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.Tensor{Name: "model.extra", DType: safetensors.F32, Shape: []int{1}, Float32: []float32{1}})
		}},
		{"integer dtype", "model.norm.weight has dtype I32", func(ts []safetensors.Tensor) []safetensors.Tensor {
			last := &ts[len(ts)-1]
			last.DType, last.Raw, last.Float32 = safetensors.DType("I32"), make([]byte, 4*32), nil
			return ts
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeTensors(t, tc.edit))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := Load(t.TempDir())
	require.Error(t, err, "no config.json")
	// A tied checkpoint may carry a redundant lm_head.weight.
	dir := writeTensors(t, func(ts []safetensors.Tensor) []safetensors.Tensor {
		return append(ts, safetensors.Tensor{Name: "lm_head.weight", DType: safetensors.F32, Shape: ts[0].Shape, Float32: ts[0].Float32})
	})
	m, err := Load(dir)
	require.NoError(t, err)
	require.NoError(t, m.Close())
}

// TestWriteModelIsSave: WriteModel, given a model's weights by name,
// writes Save's folder byte for byte, in each dtype and sharded; a read
// that fails and a dtype Save refuses are errors.
func TestWriteModelIsSave(t *testing.T) {
	m, err := New(qwen3TinyConfig(t), 5)
	require.NoError(t, err)
	defer m.Close()
	weights := map[string][]float32{}
	for _, p := range m.Params() {
		weights[p.Name] = p.Data
	}
	read := func(name string, dst []float32) error {
		w, ok := weights[name]
		if !ok || len(w) != len(dst) {
			return os.ErrNotExist
		}
		copy(dst, w)
		return nil
	}
	for _, opts := range []lm.SaveOptions{{}, {DType: safetensors.BF16}, {MaxShardBytes: 4096}} {
		saved, written := t.TempDir(), t.TempDir()
		require.NoError(t, m.Save(saved, opts))
		require.NoError(t, WriteModel(written, m.Config(), read, opts))
		entries, err := os.ReadDir(saved)
		require.NoError(t, err)
		got, err := os.ReadDir(written)
		require.NoError(t, err)
		require.Equal(t, len(entries), len(got), "%+v", opts)
		for _, e := range entries {
			want, err := os.ReadFile(filepath.Join(saved, e.Name()))
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(written, e.Name()))
			require.NoError(t, err, "%+v", opts)
			assert.Equal(t, want, b, "%s, %+v", e.Name(), opts)
		}
	}
	err = WriteModel(t.TempDir(), m.Config(), func(string, []float32) error { return os.ErrNotExist }, lm.SaveOptions{})
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "model.embed_tokens.weight")
	err = WriteModel(t.TempDir(), m.Config(), read, lm.SaveOptions{DType: safetensors.F16})
	require.ErrorIs(t, err, ErrInput)
}
