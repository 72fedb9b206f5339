package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/agentrl/agentrl/internal/atomicfile"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// exportHF writes the policy as a Hugging Face checkpoint folder with the
// tokenizer files of the source folder, ready for vLLM or for another
// run's -model.
func exportHF(m *policy.Model, src, dst string) error {
	if err := m.Save(dst, lm.SaveOptions{}); err != nil {
		return err
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json", "vocab.json", "merges.txt", "special_tokens_map.json"} {
		if err := copyFile(filepath.Join(src, name), filepath.Join(dst, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.Write(dst, 0o644, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}
