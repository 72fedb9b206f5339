package qwen3_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
)

// TestWriteFilesLoads writes the embedded files into an empty folder and
// loads them: the same bytes as the files of this folder, and a tokenizer
// whose ids, special tokens and EOS are the constants' (Qwen3's
// tokenizer_config.json: <|endoftext|> 151643, <|im_start|> 151644,
// <|im_end|> 151645, the eos_token; 151,643 BPE tokens and 26 added).
func TestWriteFilesLoads(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, qwen3.WriteFiles(dir))
	for _, name := range []string{qwen3.TokenizerFile, qwen3.ConfigFile} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		want, err := os.ReadFile(name)
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
		embedded, err := fs.ReadFile(qwen3.FS(), name)
		require.NoError(t, err)
		assert.Equal(t, want, embedded, name)
	}
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	assert.Equal(t, 151643+26, tok.VocabSize())
	assert.Less(t, tok.VocabSize(), qwen3.VocabSize)
	for text, id := range map[string]int{"<|endoftext|>": qwen3.EndOfTextID, "<|im_start|>": qwen3.IMStartID, "<|im_end|>": qwen3.IMEndID} {
		got, ok := tok.TokenID(text)
		assert.True(t, ok, text)
		assert.Equal(t, id, got, text)
	}
	assert.Equal(t, []int{qwen3.IMEndID}, tok.EOSIDs())
	// HF tokenizers' ids for this text (policy/tokenizer's README example).
	assert.Equal(t, []int{9707, 1879, qwen3.IMEndID}, tok.Encode("Hello world<|im_end|>"))
}

func TestWriteFilesMissingFolder(t *testing.T) {
	err := qwen3.WriteFiles(filepath.Join(t.TempDir(), "absent"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorContains(t, err, "qwen3: ")
}

// ExampleWriteFiles gives a checkpoint folder Qwen3's tokenizer.
func ExampleWriteFiles() {
	dir, err := os.MkdirTemp("", "qwen3")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := qwen3.WriteFiles(dir); err != nil {
		panic(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		panic(err)
	}
	text, err := tok.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: "Hi"}}, nil, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n%v\n", text, tok.Encode(text))
	// Output:
	// "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	// [151644 872 198 13048 151645 198 151644 77091 198]
}
