package toymodel_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
	"github.com/agentrl/agentrl/policy/toymodel"
)

// TestShapes counts the parameters by hand: the tied embedding
// 151936 × hidden, then per layer q (h × heads·d), k and v (h × kv·d
// each), o (heads·d × h), q_norm and k_norm (d each), gate and up
// (h × ffn each), down (ffn × h) and two RMSNorms (h each), and the
// final norm (h).
func TestShapes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shape  toymodel.Shape
		params int64
	}{
		// h 64, 4 heads and 2 KV heads of 16, ffn 192, 2 layers: q and o
		// 64×64, k and v 64×32, norms 16, gate/up/down 64×192.
		{"Tiny", toymodel.Tiny(), 151936*64 + 2*(2*4096+2*2048+2*16+3*12288+2*64) + 64},
		// h 16, 2 heads and 1 KV head of 8, ffn 32, 1 layer.
		{"Nano", toymodel.Nano(), 151936*16 + (2*256 + 2*128 + 2*8 + 3*512 + 2*16) + 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.shape.Config()
			require.NoError(t, cfg.Validate())
			assert.Equal(t, tc.params, cfg.NumParams())
			assert.Equal(t, qwen3.VocabSize, cfg.VocabSize)
			assert.Equal(t, []int{qwen3.IMEndID}, cfg.EOSTokenIDs)
		})
	}
	assert.Equal(t, int64(9822592), toymodel.Tiny().Config().NumParams(), "examples/mkmodel's default, as its doc says (9.8M)")
}

// TestWriteQwen3 writes a model and loads it back as the programs do.
func TestWriteQwen3(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	cfg, err := toymodel.WriteQwen3(dir, toymodel.Nano(), 3)
	require.NoError(t, err)
	m, err := policy.Load(dir)
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, cfg.NumParams(), m.Config().NumParams())
	assert.Equal(t, toymodel.Nano().MaxPosition, m.Config().MaxPositionEmbeddings)
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	assert.Equal(t, []int{qwen3.IMEndID}, tok.EOSIDs(), "the tokenizer and the config agree on the end of a turn")

	// The same seed gives the same weights.
	again := t.TempDir()
	_, err = toymodel.WriteQwen3(again, toymodel.Nano(), 3)
	require.NoError(t, err)
	a, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(again, "model.safetensors"))
	require.NoError(t, err)
	assert.Equal(t, a, b)
}

func TestWriteQwen3Errors(t *testing.T) {
	bad := toymodel.Nano()
	bad.KVHeads = 3 // does not divide 2 heads
	_, err := toymodel.WriteQwen3(t.TempDir(), bad, 1)
	require.Error(t, err)
	assert.ErrorContains(t, err, "toymodel:")

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = toymodel.WriteQwen3(file, toymodel.Nano(), 1)
	require.Error(t, err, "a file is no folder")
}

func ExampleWriteQwen3() {
	dir, err := os.MkdirTemp("", "tiny-qwen3")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg, err := toymodel.WriteQwen3(dir, toymodel.Tiny(), 1)
	if err != nil {
		log.Fatal(err)
	}
	m, err := policy.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	fmt.Printf("%s, %d layers, hidden %d, %d parameters, context %d\n",
		cfg.ModelType, cfg.NumHiddenLayers, cfg.HiddenSize, m.Config().NumParams(), cfg.MaxPositionEmbeddings)
	// Output: qwen3, 2 layers, hidden 64, 9822592 parameters, context 4096
}
