// Command consolidate turns a trainer checkpoint — written by one
// process or by a data-parallel job of any size, its optimizer state
// sharded over the ranks (DataParallel.ZeRO) or not — into what a server
// loads: the full model as a Hugging Face checkpoint folder (config.json,
// model.safetensors or its shards, and the tokenizer files of the model
// the run started from), which vLLM, SGLang, transformers and
// examples/serve load. With -state it also writes the training state
// consolidated for one process: the same checkpoint with the optimizer's
// shards joined into one unsharded file (policy.ConsolidateState), as
// DeepSpeed's zero_to_fp32 does for its checkpoints.
//
// Usage:
//
//	consolidate -checkpoint DIR -base DIR -out DIR [-dtype float32|bfloat16] [-max-shard-size 0] [-state DIR]
//
// For example, after a run of examples/grpotcr under mpirun with -zero 2:
//
//	go run ./examples/consolidate -checkpoint runs/x/checkpoints -base Qwen3-0.6B -out runs/x/hf
//	vllm serve runs/x/hf
//
// -checkpoint is a trainer checkpoint folder (step-N, as
// Trainer.SaveCheckpoint and SFTTrainer.SaveCheckpoint write it) or a
// checkpoint root, whose latest checkpoint is taken. -base is the Hugging
// Face folder of the model the run trained: its config.json gives the
// tensors' shapes, and its tokenizer files (tokenizer.json,
// tokenizer_config.json, generation_config.json and the like) are copied.
// The weights in a checkpoint are the full model whatever the number of
// ranks (every rank holds them whole; rank 0 writes them), so the model
// written is that of a one-process run's Model.Save, byte for byte. A
// job with bf16 weights (DataParallel.ZeROBF16Weights, the programs'
// -zero-bf16) saves their bf16 rounding as the weights and the float32
// master weights in its optimizer shards (the index's "master"): the
// model is then written from the master, each tensor joined from the
// ranks' blocks, as DeepSpeed's zero_to_fp32 does — bit for bit with
// -dtype float32, rounded to the nearest even with -dtype bfloat16 —
// and -state's params file holds the master too (the unsharded
// optimizer state has no place for it), so that one process resumes
// from the master, not from its rounding. A checkpoint of a LoRA run
// holds the adapter: it is loaded onto -base's weights and written
// merged, W + scale·B·A (its lora_adapter/ folder is what a server
// hot-loads instead). The weights, and with -state the moments, are
// streamed one tensor at a time: the program holds the largest tensor
// in float32, not the model.
//
// Before writing anything the checkpoint is checked whole: its trainer
// state, every optimizer shard its index lists (present, complete, of
// the same step and world size, with the master weights of its blocks
// when the index says the shards have them), and parameters that are
// those of the optimizer state and of -base's config; a missing shard,
// a world size that the trainer state and the shards disagree on, or a
// truncated file is an error that names it. The output folders are
// written aside and renamed into place, so a reader never sees part of
// one.
//
// Exit status: 0 on success, 2 for a usage error (bad flag, or an -out
// or -state that is not an empty or new folder), 1 for any other
// failure.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/safetensors"
)

func main() { setup.Main(run) }

// options are the parsed flags.
type options struct {
	checkpoint, base, out, state string
	dtype                        safetensors.DType
	maxShard                     int64
}

// synopsis is the first line of -h.
const synopsis = "consolidate -checkpoint DIR -base DIR -out DIR [-dtype float32|bfloat16] [-max-shard-size 0] [-state DIR] [flags]"

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var dtype string
	fs := setup.NewFlagSet("consolidate", synopsis, stderr)
	fs.StringVar(&o.checkpoint, "checkpoint", "", "trainer checkpoint folder (step-N), or a checkpoint root whose latest is taken (required)")
	fs.StringVar(&o.base, "base", "", "Hugging Face folder of the model the run trained: its config.json and tokenizer files (required with -out)")
	fs.StringVar(&o.out, "out", "", "folder to write the model into, in the Hugging Face layout: new, or empty")
	fs.StringVar(&dtype, "dtype", "float32", "dtype of the written weights: float32 (exact) or bfloat16 (rounded to nearest even)")
	shard := fs.String("max-shard-size", "0", "split the weights into model-0000i-of-0000N.safetensors shards of at most this size, as save_pretrained's max_shard_size: bytes, or with a unit (5GB, 500MiB); 0 writes one file")
	fs.StringVar(&o.state, "state", "", "also write the training state consolidated for one process into this folder: new, or empty")
	if err := setup.Parse(fs, args); err != nil {
		return o, err
	}
	var err error
	if o.maxShard, err = parseSize(*shard); err != nil {
		return o, fmt.Errorf("-max-shard-size: %w", err)
	}
	switch dtype {
	case "float32":
		o.dtype = safetensors.F32
	case "bfloat16":
		o.dtype = safetensors.BF16
	default:
		return o, fmt.Errorf("-dtype %q: want float32 or bfloat16", dtype)
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.checkpoint == "":
		return o, errors.New("-checkpoint is required: the trainer checkpoint to consolidate")
	case o.out == "" && o.state == "":
		return o, errors.New("nothing to write: give -out (the model for servers), -state (the training state for one process), or both")
	case o.out != "" && o.base == "":
		return o, errors.New("-base is required with -out: the Hugging Face folder of the model the run trained (its config.json and tokenizer)")
	case o.out != "" && o.state != "" && filepath.Clean(o.out) == filepath.Clean(o.state):
		return o, errors.New("-out and -state name the same folder")
	}
	for _, f := range []struct{ name, dir string }{{"out", o.out}, {"state", o.state}} {
		if f.dir == "" {
			continue
		}
		if err := setup.CheckEmpty(f.dir); err != nil {
			return o, fmt.Errorf("-%s %s: %w", f.name, f.dir, err)
		}
	}
	return o, nil
}

// parseSize reads a size of -max-shard-size: a non-negative integer
// number of bytes, or one followed by a unit as transformers'
// convert_file_size_to_int reads them: decimal (5GB = 5·10⁹ bytes) or
// binary (500MiB = 500·2²⁰).
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		bytes  int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	num, scale := s, int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			num, scale = rest, u.bytes
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || num == "" || num[0] == '+' {
		return 0, fmt.Errorf("%q: want a number of bytes, or one with a unit (KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s)
	}
	if n > math.MaxInt64/scale {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return n * scale, nil
}

// run is the program after main, with its exit status (setup.Run); the
// tests call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return setup.Run(ctx, "consolidate", args, stdout, stderr, parseFlags, consolidate)
}

// consolidate checks the checkpoint, then writes the folders asked for.
func consolidate(ctx context.Context, o options, stdout, _ io.Writer) error {
	dir, err := checkpointDir(o.checkpoint)
	if err != nil {
		return err
	}
	ck, err := inspect(dir)
	if err != nil {
		return err
	}
	if o.out != "" {
		n, err := writeInto(o.out, func(tmp string) (int64, error) {
			return exportModel(ctx, ck, o.base, tmp, lm.SaveOptions{DType: o.dtype, MaxShardBytes: o.maxShard})
		})
		if err != nil {
			return fmt.Errorf("-out: %w", err)
		}
		fmt.Fprintf(stdout, "wrote %s: the model of %s (%s) in the Hugging Face layout, %d parameters, %s, with the tokenizer files of %s\n",
			o.out, dir, ck.describe(), n, o.dtype, o.base)
	}
	if o.state != "" {
		if _, err := writeInto(o.state, func(tmp string) (int64, error) { return 0, writeState(ck, tmp) }); err != nil {
			return fmt.Errorf("-state: %w", err)
		}
		fmt.Fprintf(stdout, "wrote %s: the training state of %s (%s) for one process, its optimizer state unsharded\n", o.state, dir, ck.describe())
	}
	return nil
}

// checkpointDir is path when it is a checkpoint folder, or the latest
// checkpoint of the root it names.
func checkpointDir(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("-checkpoint: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("-checkpoint %s is not a folder", path)
	}
	if _, err := os.Stat(filepath.Join(path, checkpoint.LatestFile)); err != nil {
		return path, nil
	}
	_, dir, err := checkpoint.Root{Dir: path}.Latest()
	if err != nil {
		return "", fmt.Errorf("-checkpoint: %w", err)
	}
	return dir, nil
}

// writeInto makes dir's content with write in a fresh folder beside it,
// then renames that folder to dir (which checkEmpty accepted: absent or
// empty), so that dir appears complete or not at all.
func writeInto(dir string, write func(tmp string) (int64, error)) (int64, error) {
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return 0, err
	}
	n, err := write(tmp)
	if err == nil {
		err = os.Chmod(tmp, 0o755)
	}
	if err == nil {
		if err = os.Remove(dir); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return 0, err
	}
	return n, nil
}
