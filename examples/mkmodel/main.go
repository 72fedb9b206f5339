// Command mkmodel writes a small model to try the other programs on,
// with no download: a Hugging Face checkpoint folder holding a Qwen3 of
// random weights with a tiny body, and Qwen3's real tokenizer
// (tokenizer.json and tokenizer_config.json with its chat template,
// embedded in this program from package policy/tokenizer/qwen3;
// Apache-2.0, as the Qwen3 models). Package policy/toymodel writes the
// same from a program (toymodel.WriteQwen3; its Tiny shape is this
// program's default).
//
// Usage:
//
//	mkmodel -out DIR [-hidden 64] [-layers 2] [-seed 1] [flags]
//
// For example:
//
//	go run ./examples/mkmodel -out runs/tiny-qwen3
//	go run ./examples/eval -model runs/tiny-qwen3 -data examples/eval/testdata/eval.jsonl -k 2 -max-response 32
//	go run ./examples/serve -model runs/tiny-qwen3
//
// The folder is laid out as Hugging Face's save_pretrained lays out
// Qwen/Qwen3-0.6B — config.json (model_type qwen3, vocab_size 151936,
// eos_token_id <|im_end|>), model.safetensors (float32), tokenizer.json,
// tokenizer_config.json — so package policy, examples/eval, grpotcr and
// serve load it as they load a real Qwen3, and transformers would too.
// Its weights are random (transformers' initialisation, drawn from
// -seed): it answers nonsense, scores 0 and rarely ends a turn before
// the token budget, so give the programs a small -max-response; what it
// shows is that a pipeline runs end to end, in seconds on a CPU. With
// the default body it has 9.8M parameters, 9.7M of them the embedding
// of Qwen3's 151,936-row vocabulary (39 MB on disk).
//
// For a model that has learned something, run the main job
// (go run ./examples/arith): its run folder's model/ holds the trained
// policy with a tokenizer.json and a chat template, which the same
// programs load.
//
// Exit status: 0 on success, 2 for a usage error (bad flag, or an -out
// that is not an empty or new folder), 1 for any other failure.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/policy/toymodel"
)

func main() { setup.Main(run) }

// options are the parsed flags.
type options struct {
	out   string
	shape toymodel.Shape
	seed  uint64
}

// synopsis is the first line of -h.
const synopsis = "mkmodel -out DIR [-hidden 64] [-layers 2] [-seed 1] [flags]"

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{shape: toymodel.Tiny()}
	fs := setup.NewFlagSet("mkmodel", synopsis, stderr)
	fs.StringVar(&o.out, "out", "", "folder to write the checkpoint into: new, or empty (required)")
	fs.IntVar(&o.shape.Hidden, "hidden", o.shape.Hidden, "hidden size")
	fs.IntVar(&o.shape.Layers, "layers", o.shape.Layers, "transformer layers")
	fs.IntVar(&o.shape.Heads, "heads", o.shape.Heads, "attention heads")
	fs.IntVar(&o.shape.KVHeads, "kv-heads", o.shape.KVHeads, "key/value heads; must divide -heads")
	fs.IntVar(&o.shape.HeadDim, "head-dim", o.shape.HeadDim, "size of an attention head (even, for RoPE)")
	fs.IntVar(&o.shape.FFN, "ffn", o.shape.FFN, "MLP intermediate size")
	fs.IntVar(&o.shape.MaxPosition, "max-position", o.shape.MaxPosition, "context length (max_position_embeddings): prompt and response together")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the random weights")
	if err := setup.Parse(fs, args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.out == "":
		return o, errors.New("-out is required: the folder to write the checkpoint into")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"hidden", o.shape.Hidden}, {"layers", o.shape.Layers}, {"heads", o.shape.Heads}, {"kv-heads", o.shape.KVHeads},
		{"head-dim", o.shape.HeadDim}, {"ffn", o.shape.FFN}, {"max-position", o.shape.MaxPosition}} {
		if f.v < 1 {
			return o, fmt.Errorf("-%s %d: want ≥ 1", f.name, f.v)
		}
	}
	switch {
	case o.shape.Heads%o.shape.KVHeads != 0:
		return o, fmt.Errorf("-kv-heads %d does not divide -heads %d", o.shape.KVHeads, o.shape.Heads)
	case o.shape.HeadDim%2 != 0:
		return o, fmt.Errorf("-head-dim %d: want an even size (rotary embeddings rotate pairs)", o.shape.HeadDim)
	}
	if err := o.shape.Config().Validate(); err != nil {
		return o, err
	}
	if err := setup.CheckEmpty(o.out); err != nil {
		return o, fmt.Errorf("-out %s: %w", o.out, err)
	}
	return o, nil
}

// run is the program after main, with its exit status (setup.Run); the
// tests call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return setup.Run(ctx, "mkmodel", args, stdout, stderr, parseFlags, write)
}

// write makes the model and writes the folder (toymodel.WriteQwen3).
func write(_ context.Context, o options, stdout, _ io.Writer) error {
	cfg, err := toymodel.WriteQwen3(o.out, o.shape, o.seed)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: a Qwen3 of random weights (seed %d; layers %d, hidden %d, %d parameters, float32) with Qwen3's tokenizer and chat template\n",
		o.out, o.seed, cfg.NumHiddenLayers, cfg.HiddenSize, cfg.NumParams())
	return nil
}
