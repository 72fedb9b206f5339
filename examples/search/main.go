// Command search is agentic search in miniature, as Search-R1 trains it:
// a tiny policy learns to answer questions about an encyclopedia it has
// never seen by searching it.
//
// The corpus is package tool/search/encyclopedia's: 300 passages about
// fictional people, towns, rivers, mountains, guilds and works, with
// one-hop questions ("In which town was Quaith Drandrourk born?") and
// two-hop ones ("Which river flows through the town where Quaith
// Drandrourk was born?"), whose answers no model can know without reading
// the passages. The program serves the corpus with the embedded BM25
// retrieval server (package tool/search/bm25, Search-R1's /retrieve API,
// on a loopback port) or uses the server -retriever names, and gives the
// policy the search tool of package tool/search (verl's "search"
// function, Search-R1's text for the hits, -topk of them per query).
//
// It generates search trajectories from an encyclopedia's structure —
// call search with the question itself, read the tool's real answer, call
// it again with the name the passage gives where the question has a
// second hop, answer in <answer> tags — so they are right by
// construction; fine-tunes a freshly initialised Qwen3-style model with a
// byte-level tokenizer on them (SFT); evaluates it on held-out questions
// about subjects no train question names; trains it with GRPO-TCR with
// the search tool in the loop and Search-R1's exact-match reward
// (package reward's QAFunc: 1 when the normalized answer equals the
// target, 0 otherwise); and evaluates it again. A fraction of the SFT
// trajectories (-no-search-frac) answer at once with a guess, so the SFT
// policy often skips the search and is wrong: RL has to learn that
// searching pays.
//
// The SFT trajectories are about an encyclopedia of their own (-sft-world
// passages, other names than the shipped corpus's, served by a second
// embedded BM25 server), not the shipped train questions: those name
// about 240 subjects, and a model trained on them remembers their names
// and answers and writes them for held-out subjects too, instead of
// copying from the question and the passage (-sft-world 0 shows it: 1.3%
// held-out accuracy after SFT). The first search is the question itself
// (-query question), as Search-R1's models often begin: a tiny model
// learns to copy a whole question long before it learns to cut the
// subject's name out of it (-query name: 4.2% after SFT on seed 1,
// against 29.9%). docs/benchmarks.md has the measurements.
//
// It prints a before/after table (avg@k, pass@k, maj@k, tool calls per
// answer, answers without a tool call) and one JSON line:
//
//	{"sft": {"avg@8": …, "pass@8": …, "maj@8": …}, "rl": {…}, "seconds": …}
//
// The run folder (-out, default ./runs/search-<timestamp>) holds
// metrics.jsonl (one line per RL step, verl's names, held-out metrics at
// steps 0 and last), sft_metrics.jsonl, validation/0.jsonl and
// validation/<last step>.jsonl (every held-out response with its prompt,
// ground truth and score, as verl's trainer.validation_data_dir holds
// them: what the policy searched for and answered), and model/ (the
// trained policy, a Hugging Face checkpoint folder with the byte
// tokenizer's tokenizer.json).
// A run holds the folder locked (run.lock, package runlock); a folder
// whose metrics logs hold an earlier run's rows is refused before any
// work.
//
//	go run ./examples/search                               # the default run, 10–13 minutes on 2 cores
//	go run ./examples/search -seed 2 -rl-steps 240         # another seed, longer RL
//	go run ./examples/retrieval -encyclopedia -addr 127.0.0.1:8000 &
//	go run ./examples/search -retriever http://127.0.0.1:8000/retrieve
//
// -device chooses where the model trains and generates, as in
// examples/arith.
package main

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/examples/internal/setup"
)

func main() { setup.Main(program) }

// program is the whole program after main, with its exit status
// (setup.Run); the tests call it in-process.
func program(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return setup.Run(ctx, "search", args, stdout, stderr, parseFlags, runOptions)
}

// options are the command-line settings.
type options struct {
	out  string
	seed uint64

	hidden, layers, heads, ffn int

	sftSamples, sftSteps, sftBatch, sftWorld int
	sftLR, noSearchFrac                      float64

	rlSteps, prompts, n, miniBatch int
	rlLR, temperature              float64
	maxResponse, evalQuestions     int

	topK      int
	query     string
	retriever string

	device device.Config
}

const synopsis = "search [-out DIR] [-seed N] [-rl-steps N] [-retriever URL] [flags]"

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := setup.NewFlagSet("search", synopsis, stderr)
	fs.StringVar(&o.out, "out", "", "run folder (default ./runs/search-<timestamp>)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the model, the SFT trajectories, the RL questions' order and sampling")
	fs.IntVar(&o.hidden, "hidden", 128, "model hidden size")
	fs.IntVar(&o.layers, "layers", 2, "transformer layers")
	fs.IntVar(&o.heads, "heads", 4, "attention heads (key/value heads: half as many; head size: hidden/heads)")
	fs.IntVar(&o.ffn, "ffn", 384, "MLP intermediate size")
	fs.IntVar(&o.sftSamples, "sft-samples", 32768, "generated SFT trajectories")
	fs.IntVar(&o.sftWorld, "sft-world", 10000, "generate the SFT trajectories in an encyclopedia of about this many passages of its own (other names), served by a BM25 server of its own; 0: from the shipped corpus's train questions")
	fs.IntVar(&o.sftSteps, "sft-steps", 2000, "SFT updates")
	fs.IntVar(&o.sftBatch, "sft-batch", 16, "SFT sequences per update")
	fs.Float64Var(&o.sftLR, "sft-lr", 3e-3, "SFT peak learning rate (cosine decay to a tenth)")
	fs.Float64Var(&o.noSearchFrac, "no-search-frac", 0.3, "fraction of SFT trajectories that answer at once with a guess instead of searching")
	fs.IntVar(&o.rlSteps, "rl-steps", 120, "GRPO-TCR steps")
	fs.IntVar(&o.prompts, "prompts", arith.DefaultPrompts, "questions per RL step")
	fs.IntVar(&o.n, "n", arith.DefaultN, "samples per question, in RL and evaluation (the k of avg@k, pass@k, maj@k)")
	fs.IntVar(&o.miniBatch, "mini-batch", arith.DefaultMiniBatch, "trajectories per RL update; 0 means the whole batch")
	fs.Float64Var(&o.rlLR, "rl-lr", arith.DefaultRLLR, "RL learning rate")
	fs.Float64Var(&o.temperature, "temperature", arith.DefaultTemperature, "sampling temperature of rollouts and evaluation")
	fs.IntVar(&o.maxResponse, "max-response", 768, "response budget in tokens (search results included)")
	fs.IntVar(&o.evalQuestions, "eval", 48, "held-out questions (of the test split's 237)")
	fs.IntVar(&o.topK, "topk", 1, "passages per search (Search-R1 uses 3; each costs the tiny model about 150 tokens)")
	fs.StringVar(&o.query, "query", queryQuestion, "how the SFT trajectories' first search is written: "+queryQuestion+" (the question itself) or "+queryName+" (the subject's name and a word of its kind)")
	fs.StringVar(&o.retriever, "retriever", "", "a running retrieval server's /retrieve URL over the encyclopedia's corpus (default: serve it here with BM25)")
	o.device.RegisterFlags(fs)
	if err := setup.Parse(fs, args); err != nil {
		return o, err
	}
	if err := o.device.Validate(); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case o.hidden < 1 || o.layers < 1 || o.ffn < 1:
		return o, fmt.Errorf("-hidden %d, -layers %d, -ffn %d: want ≥ 1", o.hidden, o.layers, o.ffn)
	case o.heads < 2 || o.heads%2 != 0 || o.hidden%o.heads != 0:
		return o, fmt.Errorf("-heads %d: want an even number ≥ 2 that divides -hidden %d", o.heads, o.hidden)
	case o.n < 1:
		return o, fmt.Errorf("-n %d: want ≥ 1", o.n)
	case o.rlSteps < 0:
		return o, fmt.Errorf("-rl-steps %d: want ≥ 0", o.rlSteps)
	case o.prompts < 1:
		return o, fmt.Errorf("-prompts %d: want ≥ 1", o.prompts)
	case o.evalQuestions < 1:
		return o, fmt.Errorf("-eval %d: want ≥ 1", o.evalQuestions)
	case o.sftSteps < 0:
		return o, fmt.Errorf("-sft-steps %d: want ≥ 0", o.sftSteps)
	case o.sftBatch < 1:
		return o, fmt.Errorf("-sft-batch %d: want ≥ 1", o.sftBatch)
	case o.sftWorld < 0:
		return o, fmt.Errorf("-sft-world %d: want 0 (the shipped train questions) or more", o.sftWorld)
	case o.sftSamples < o.sftBatch:
		return o, fmt.Errorf("-sft-samples %d: want at least -sft-batch %d", o.sftSamples, o.sftBatch)
	case !(o.sftLR > 0) || math.IsInf(o.sftLR, 0):
		return o, fmt.Errorf("-sft-lr %v: want finite and > 0", o.sftLR)
	case !(o.rlLR > 0) || math.IsInf(o.rlLR, 0):
		return o, fmt.Errorf("-rl-lr %v: want finite and > 0", o.rlLR)
	case !(o.temperature >= 0) || math.IsInf(o.temperature, 0):
		return o, fmt.Errorf("-temperature %v: want finite and ≥ 0", o.temperature)
	case !(o.noSearchFrac >= 0 && o.noSearchFrac <= 1):
		return o, fmt.Errorf("-no-search-frac %g: want within [0, 1]", o.noSearchFrac)
	case o.maxResponse < 64:
		return o, fmt.Errorf("-max-response %d: want ≥ 64", o.maxResponse)
	case o.query != queryQuestion && o.query != queryName:
		return o, fmt.Errorf("-query %q: want %s or %s", o.query, queryQuestion, queryName)
	case o.topK < 1 || o.topK > 3:
		return o, fmt.Errorf("-topk %d: want 1, 2 or 3", o.topK)
	}
	if o.retriever != "" {
		if err := setup.CheckServerURLs("-retriever", o.retriever); err != nil {
			return o, err
		}
	}
	return o, nil
}
