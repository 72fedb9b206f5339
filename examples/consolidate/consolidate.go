package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/internal/atomicfile"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// trainerState is what this program reads of a checkpoint's
// agentrl.CheckpointStateFile: the fields that agentrl.TrainerState and
// agentrl.SFTState share.
type trainerState struct {
	Format         string `json:"format"`
	Step           int    `json:"step"`
	OptimizerSteps int64  `json:"optimizer_steps"`
	WorldSize      int    `json:"world_size"`
}

// parseState reads and checks a checkpoint's trainer state.
func parseState(b []byte) (trainerState, error) {
	var st trainerState
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", agentrl.CheckpointStateFile, err)
	}
	bad := func(format string, args ...any) (trainerState, error) {
		return st, fmt.Errorf("%s: "+format, append([]any{agentrl.CheckpointStateFile}, args...)...)
	}
	switch {
	case st.Format != agentrl.TrainerStateFormat && st.Format != agentrl.SFTStateFormat:
		return bad("format %q: want %q or %q (a checkpoint of package agentrl's trainers)", st.Format, agentrl.TrainerStateFormat, agentrl.SFTStateFormat)
	case st.Step < 0:
		return bad("step %d", st.Step)
	case st.OptimizerSteps < 0:
		return bad("optimizer_steps %d", st.OptimizerSteps)
	case st.WorldSize < 0:
		return bad("world_size %d", st.WorldSize)
	}
	if st.WorldSize == 0 {
		st.WorldSize = 1 // one process records none
	}
	return st, nil
}

// checked is a checkpoint folder that inspect found whole.
type checked struct {
	dir   string
	state trainerState
	opt   policy.StateInfo
	// params are the parameters in the params file, by name: the full
	// model's weights, or a LoRA run's adapter.
	params map[string]int
	lora   bool
}

// describe says what wrote the checkpoint.
func (c checked) describe() string {
	s := fmt.Sprintf("step %d, written by one process", c.state.Step)
	if c.state.WorldSize > 1 {
		s = fmt.Sprintf("step %d, written by %d ranks", c.state.Step, c.state.WorldSize)
	}
	if c.opt.WorldSize > 0 {
		s += " with the optimizer state sharded"
	}
	if c.lora {
		s += ", a LoRA adapter"
	}
	return s
}

// inspect checks that dir is a whole trainer checkpoint: its trainer
// state, its optimizer state (every shard present and complete, of the
// world size and step the trainer state says) and a params file whose
// tensors are those the optimizer state holds the moments of.
func inspect(dir string) (checked, error) {
	c := checked{dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, agentrl.CheckpointStateFile))
	if err != nil {
		return c, fmt.Errorf("%s is not a trainer checkpoint: %w", dir, err)
	}
	if c.state, err = parseState(b); err != nil {
		return c, fmt.Errorf("%s: %w", dir, err)
	}
	if c.opt, err = policy.ReadStateInfo(dir); err != nil {
		return c, fmt.Errorf("%s: %w", dir, err)
	}
	if c.opt.WorldSize > 0 && c.opt.WorldSize != c.state.WorldSize {
		who := fmt.Sprintf("a job of %d ranks wrote it", c.state.WorldSize)
		if c.state.WorldSize == 1 {
			who = "one process wrote it"
		}
		return c, fmt.Errorf("%s: mismatched world size: %s says %s, the optimizer's shards were written by %d ranks",
			dir, agentrl.CheckpointStateFile, who, c.opt.WorldSize)
	}
	if c.opt.Step != c.state.OptimizerSteps {
		return c, fmt.Errorf("%s: the optimizer state has %d steps, %s says %d", dir, c.opt.Step, agentrl.CheckpointStateFile, c.state.OptimizerSteps)
	}
	f, err := safetensors.Open(filepath.Join(dir, agentrl.CheckpointParamsFile))
	if err != nil {
		return c, fmt.Errorf("%s: %w", dir, err)
	}
	defer f.Close()
	c.params = make(map[string]int, len(f.Tensors()))
	for _, t := range f.Tensors() {
		if t.DType != safetensors.F32 || len(t.Shape) != 1 {
			return c, fmt.Errorf("%s: %s: %s is %s%v, want F32 of one dimension", dir, agentrl.CheckpointParamsFile, t.Name, t.DType, t.Shape)
		}
		c.params[t.Name] = t.Shape[0]
	}
	if len(c.params) != len(c.opt.Params) {
		return c, fmt.Errorf("%s: %s holds %d parameters, the optimizer state %d", dir, agentrl.CheckpointParamsFile, len(c.params), len(c.opt.Params))
	}
	for _, p := range c.opt.Params {
		if n, ok := c.params[p.Name]; !ok || n != p.Size {
			return c, fmt.Errorf("%s: the optimizer state's parameter %s [%d] is not in %s", dir, p.Name, p.Size, agentrl.CheckpointParamsFile)
		}
	}
	st, err := os.Stat(filepath.Join(dir, agentrl.CheckpointAdapterDir))
	switch {
	case err == nil:
		c.lora = st.IsDir()
	case !errors.Is(err, fs.ErrNotExist):
		return c, err
	}
	return c, nil
}

// exportModel writes the checkpoint's model into out in the Hugging
// Face layout, with base's config and tokenizer files, and returns its
// number of parameters.
func exportModel(ctx context.Context, c checked, base, out string, opts lm.SaveOptions) (int64, error) {
	cfg, err := policy.ReadConfig(base)
	if err != nil {
		return 0, fmt.Errorf("-base: %w", err)
	}
	if c.lora {
		err = exportMerged(c, base, out, opts)
	} else {
		err = exportFull(c, cfg, out, opts)
	}
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// The files of a Hugging Face model folder that a server reads
	// besides the config and the weights, where base has them.
	tokenizerFiles := []string{
		"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
		"vocab.json", "merges.txt", "tokenizer.model", "chat_template.jinja", "chat_template.json",
		policy.GenerationConfigFileName,
	}
	for _, name := range tokenizerFiles {
		err := copyFile(filepath.Join(base, name), filepath.Join(out, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("-base: %w", err)
		}
	}
	return cfg.NumParams(), nil
}

// exportFull writes the full weights of the params file as the model
// cfg describes, after checking that they are its tensors.
func exportFull(c checked, cfg policy.Config, out string, opts lm.SaveOptions) error {
	specs := cfg.TensorSpecs()
	var errs []error
	for _, sp := range specs {
		if n, ok := c.params[sp.Name]; !ok {
			errs = append(errs, fmt.Errorf("missing tensor %s %v", sp.Name, sp.Shape))
		} else if int64(n) != sp.Size() {
			errs = append(errs, fmt.Errorf("tensor %s holds %d floats, the config's shape %v %d", sp.Name, n, sp.Shape, sp.Size()))
		}
	}
	if len(errs) == 0 && len(c.params) != len(specs) {
		errs = append(errs, fmt.Errorf("%d tensors, the config implies %d", len(c.params), len(specs)))
	}
	if len(errs) > 0 {
		return fmt.Errorf("the checkpoint's parameters are not the model -base's config.json describes: %w", errors.Join(errs...))
	}
	f, err := safetensors.Open(filepath.Join(c.dir, agentrl.CheckpointParamsFile))
	if err != nil {
		return err
	}
	defer f.Close()
	return policy.WriteModel(out, cfg, f.ReadFloat32, opts)
}

// exportMerged writes base's model with the checkpoint's LoRA adapter
// merged into its weights.
func exportMerged(c checked, base, out string, opts lm.SaveOptions) error {
	m, err := policy.Load(base)
	if err != nil {
		return fmt.Errorf("-base (the weights under the checkpoint's LoRA adapter): %w", err)
	}
	defer m.Close()
	if err := m.LoadAdapter(filepath.Join(c.dir, agentrl.CheckpointAdapterDir)); err != nil {
		return err
	}
	return m.Save(out, opts)
}

// writeState writes the checkpoint into out for one process: its files
// as they are, but the optimizer state unsharded (policy.StateFileName).
func writeState(c checked, out string) error {
	err := filepath.WalkDir(c.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(c.dir, path)
		if err != nil {
			return err
		}
		name := d.Name()
		switch {
		case d.IsDir():
			return os.MkdirAll(filepath.Join(out, rel), 0o755)
		case name == policy.ShardStateIndex, strings.HasPrefix(name, "optimizer-shard-"), atomicfile.IsTemp(name):
			return nil // the shards become one file below
		}
		return copyFile(path, filepath.Join(out, rel))
	})
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(out, policy.StateFileName), 0o600, func(w io.Writer) error {
		return policy.ConsolidateState(c.dir, w)
	})
}

// copyFile copies src to dst, atomically; an error wrapping
// fs.ErrNotExist when src does not exist.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	return atomicfile.Write(dst, st.Mode().Perm(), func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}
