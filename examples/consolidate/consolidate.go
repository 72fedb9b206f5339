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
	if c.opt.Master {
		s += ", with the float32 master weights"
	}
	if c.lora {
		s += ", a LoRA adapter"
	}
	return s
}

// inspect checks that dir is a whole trainer checkpoint: its trainer
// state, its optimizer state (every shard present and complete, of the
// world size and step the trainer state says, with the master weights
// when its index says it has them) and a params file whose tensors are
// those the optimizer state holds the moments of.
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
	if c.lora && c.opt.Master {
		// policy.ShardOptions.BF16Weights refuses a LoRA adapter, so no
		// trainer of package agentrl writes this.
		return c, fmt.Errorf("%s: a LoRA adapter (%s) with an optimizer state holding master weights (%s): bf16 weights are not trained with a LoRA adapter",
			dir, agentrl.CheckpointAdapterDir, policy.ShardStateIndex)
	}
	return c, nil
}

// weights returns a reader of the trained weights of the checkpoint's
// parameters, by name, and its closer: the float32 master weights when
// the optimizer state holds them (DataParallel.ZeROBF16Weights, whose
// params file holds their bf16 rounding), else the params file. A
// parameter that the master weights lack is an error (inspect has
// checked that the params file and the optimizer state hold the same
// parameters).
func (c checked) weights() (read func(name string, dst []float32) error, closer func(), err error) {
	if !c.opt.Master {
		f, err := safetensors.Open(filepath.Join(c.dir, agentrl.CheckpointParamsFile))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", c.dir, err)
		}
		return f.ReadFloat32, func() { f.Close() }, nil
	}
	mw, err := policy.OpenMasterWeights(c.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.dir, err)
	}
	read = func(name string, dst []float32) error {
		if !mw.Has(name) {
			return fmt.Errorf("%s: parameter %q has no master weights in %s, whose params file holds only their bf16 rounding", c.dir, name, policy.ShardStateIndex)
		}
		return mw.ReadFloat32(name, dst)
	}
	return read, func() { mw.Close() }, nil
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

// exportFull writes the full weights of the checkpoint (c.weights: the
// master weights when the optimizer state holds them) as the model cfg
// describes, after checking that they are its tensors.
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
	read, closer, err := c.weights()
	if err != nil {
		return err
	}
	defer closer()
	return policy.WriteModel(out, cfg, read, opts)
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
// as they are, but the optimizer state unsharded (policy.StateFileName)
// and, when the optimizer state holds master weights, the params file
// holding them instead of their bf16 rounding: the unsharded state has
// no master (one process's float32 weights are their own), so a process
// that resumes from out resumes from the master, as the job would.
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
		case c.opt.Master && rel == agentrl.CheckpointParamsFile:
			return nil // written from the master weights below
		}
		return copyFile(path, filepath.Join(out, rel))
	})
	if err != nil {
		return err
	}
	if c.opt.Master {
		if err := writeMasterParams(c, filepath.Join(out, agentrl.CheckpointParamsFile)); err != nil {
			return err
		}
	}
	return atomicfile.Write(filepath.Join(out, policy.StateFileName), 0o600, func(w io.Writer) error {
		return policy.ConsolidateState(c.dir, w)
	})
}

// writeMasterParams writes to path the checkpoint's params file with
// its tensors read from the master weights (c.weights), one at a time:
// the same names, shapes and metadata, the file a one-process run with
// those float32 weights saves.
func writeMasterParams(c checked, path string) error {
	f, err := safetensors.Open(filepath.Join(c.dir, agentrl.CheckpointParamsFile))
	if err != nil {
		return err
	}
	defer f.Close()
	read, closer, err := c.weights()
	if err != nil {
		return err
	}
	defer closer()
	var ts []safetensors.Tensor
	for _, t := range f.Tensors() {
		ts = append(ts, safetensors.Tensor{Name: t.Name, DType: safetensors.F32, Shape: t.Shape,
			Fill: func(dst []float32) error { return read(t.Name, dst) }})
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		return safetensors.Write(w, ts, f.Metadata())
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
