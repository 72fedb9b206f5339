// Package qwen3 holds the tokenizer of the Qwen3 models — tokenizer.json
// (byte-level BPE, 151,643 tokens and 26 added ones) and
// tokenizer_config.json (the special tokens and the chat template) — in
// this folder and embedded in the package, so that a program can write a
// checkpoint that tokenizes as Qwen3 does with no download
// (examples/mkmodel does), and tests can load a real tokenizer:
// tokenizer.Load on this folder, or on a folder WriteFiles filled.
//
// The files are Qwen's (Alibaba Cloud), released with the Qwen3 models
// under the Apache License 2.0; see NOTICE in this folder.
package qwen3

import (
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// The files this package holds.
const (
	TokenizerFile = "tokenizer.json"        // the tokenizer (tokenizer.Load reads it)
	ConfigFile    = "tokenizer_config.json" // special tokens, chat template
)

// Qwen3's sizes and special tokens, as its config.json and
// tokenizer_config.json give them.
const (
	VocabSize   = 151936 // rows of a Qwen3 model's embedding (vocab_size); the tokenizer uses the first 151,669
	EndOfTextID = 151643 // <|endoftext|>
	IMStartID   = 151644 // <|im_start|>
	IMEndID     = 151645 // <|im_end|>, the end of an assistant turn (eos_token)
)

//go:embed tokenizer.json tokenizer_config.json
var files embed.FS

// FS returns the files, read-only: TokenizerFile and ConfigFile.
func FS() fs.FS { return files }

// WriteFiles writes TokenizerFile and ConfigFile into dir, which must
// exist, replacing files of those names.
func WriteFiles(dir string) error {
	for _, name := range []string{TokenizerFile, ConfigFile} {
		if err := writeFile(filepath.Join(dir, name), name); err != nil {
			return fmt.Errorf("qwen3: %w", err)
		}
	}
	return nil
}

func writeFile(dst, name string) error {
	in, err := files.Open(name)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
