package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
)

func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestWrite writes a model of a small body and loads it back as the
// other programs do: a Qwen3 of the flags' shape over Qwen3's
// vocabulary, whose tokenizer and config agree on the end of a turn, and
// which generates.
func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	code, stdout, stderr := runMain(t, "-out", dir, "-hidden", "16", "-layers", "1", "-heads", "2", "-kv-heads", "1", "-head-dim", "8", "-ffn", "32", "-max-position", "64", "-seed", "3")
	require.Equal(t, 0, code, stderr)
	// Parameters, counted by hand: the tied embedding 151936 × 16, and
	// one layer of q (16×16), k and v (16×8 each), o (16×16), q_norm and
	// k_norm (8 each), gate and up (16×32 each), down (32×16), two
	// RMSNorms (16 each), then the final norm (16).
	const params = 151936*16 + (256 + 128 + 128 + 256 + 16 + 1024 + 512 + 32) + 16
	assert.Equal(t, fmt.Sprintf("wrote %s: a Qwen3 of random weights (seed 3; layers 1, hidden 16, %d parameters, float32) with Qwen3's tokenizer and chat template\n", dir, params), stdout)
	assert.Empty(t, stderr)

	m, err := policy.Load(dir)
	require.NoError(t, err)
	defer m.Close()
	cfg := m.Config()
	assert.Equal(t, policy.ModelQwen3, cfg.ModelType)
	assert.Equal(t, 151936, cfg.VocabSize)
	assert.Equal(t, []int{16, 1, 2, 1, 8, 32, 64}, []int{cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim, cfg.IntermediateSize, cfg.MaxPositionEmbeddings})
	assert.Equal(t, int64(params), cfg.NumParams())
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	assert.Equal(t, cfg.EOSTokenIDs, tok.EOSIDs(), "the model and its tokenizer end turns alike")
	assert.LessOrEqual(t, tok.VocabSize(), cfg.VocabSize)
	prompt, err := tok.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: "What is 2+2?"}}, nil, tokenizer.ChatOptions{AddGenerationPrompt: true})
	require.NoError(t, err)
	gens, err := m.Generate(context.Background(), []lm.GenerateRequest{{Prompt: tok.Encode(prompt), Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 4}}})
	require.NoError(t, err)
	require.Len(t, gens, 1)
	assert.NotEmpty(t, gens[0].Tokens)

	// The same seed gives the same weights; another seed others.
	again := filepath.Join(t.TempDir(), "again")
	code, _, stderr = runMain(t, "-out", again, "-hidden", "16", "-layers", "1", "-heads", "2", "-kv-heads", "1", "-head-dim", "8", "-ffn", "32", "-max-position", "64", "-seed", "3")
	require.Equal(t, 0, code, stderr)
	a, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(again, "model.safetensors"))
	require.NoError(t, err)
	assert.Equal(t, a, b)
}

// TestUsage: every mistake exits with status 2, its cause on the first
// line and a pointer to -h on the second, and writes nothing.
func TestUsage(t *testing.T) {
	full := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(full, "config.json"), []byte("{}"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(full, "notes"), nil, 0o644))
	file := filepath.Join(full, "notes")
	out := filepath.Join(t.TempDir(), "new")
	for _, c := range []struct {
		name string
		args []string
		msg  string
	}{
		{"no flags", nil, "-out is required: the folder to write the checkpoint into"},
		{"unknown flag", []string{"-out", out, "-vocab", "10"}, "flag provided but not defined: -vocab"},
		{"extra argument", []string{"-out", out, "x"}, `unexpected arguments ["x"]`},
		{"zero hidden", []string{"-out", out, "-hidden", "0"}, "-hidden 0: want ≥ 1"},
		{"negative layers", []string{"-out", out, "-layers", "-1"}, "-layers -1: want ≥ 1"},
		{"kv heads", []string{"-out", out, "-heads", "4", "-kv-heads", "3"}, "-kv-heads 3 does not divide -heads 4"},
		{"odd head dim", []string{"-out", out, "-head-dim", "7"}, "-head-dim 7: want an even size (rotary embeddings rotate pairs)"},
		{"folder not empty", []string{"-out", full}, "-out " + full + ": not empty (it holds config.json and 1 more): choose a new folder"},
		{"a file", []string{"-out", file}, "-out " + file + ": open " + file + ": not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, c.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout)
			assert.Equal(t, "mkmodel: "+c.msg+"\n"+setup.HelpPointer("mkmodel")+"\n", stderr)
			assert.NoDirExists(t, out)
		})
	}
	code, _, stderr := runMain(t, "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, stderr, "usage: "+synopsis+"\n")
	assert.Contains(t, stderr, "-max-position int")
}
