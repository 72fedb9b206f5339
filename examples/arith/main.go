// Command arith is the paper's pipeline in miniature: a tiny policy learns
// multi-step arithmetic word problems whose numbers are too big to compute
// in its head, by calling a code interpreter.
//
// It generates tool-use trajectories (call the interpreter with Python that
// prints the problem's expression, read the result, answer in \boxed{}),
// fine-tunes a freshly initialised Qwen3-style model with a byte-level
// tokenizer on them (SFT), evaluates it on held-out problems, trains it
// with GRPO-TCR with the tool in the loop (reward +1 for a correct boxed
// answer, −1 otherwise, overlong shaping against the response budget), and
// evaluates it again. A fraction of the SFT trajectories (-no-tool-frac)
// write the expression and answer with a rough guess of its value instead
// of calling the tool, so the SFT policy often skips the tool and is
// wrong: RL has to learn that calling the tool pays. Every problem is
// written both ways, and each SFT update trains half of its problems
// with the tool and half with a guess (-sft-pairs): drawn at random per
// trajectory instead, the share of tool calls in the last batches set
// how often the SFT policy called the tool, anywhere from 46% to 56%
// over seeds 1–8.
//
// The held-out problems are one set for every -seed (-eval-seed), 128 of
// them (-eval), so that seeds are compared on the same problems.
//
// SFT warms its learning rate up over the first 5% of the updates, holds
// it at 2e-3, and decays it to a tenth over the last 20%
// (-sft-schedule wsd): copying digits from the prompt is learnt only
// after a plateau whose length varies by seed, and a lower rate held
// through the plateau leaves it sooner and more reliably than the
// earlier default, cosine decay from 3e-3 (-sft-schedule cosine
// -sft-lr 3e-3), which ended SFT anywhere from 12.5% to 40.2% held-out
// avg@8 over seeds 1–5 (docs/benchmarks.md). -sft-tool-first F, a
// curriculum that trains the first F of the updates on tool-calling
// trajectories only, is off by default: at 0.3 it left the plateau sooner
// on seven of seeds 1–8 but moved their SFT accuracy by −9.8 to +14.5
// points, the mean and the spread about as before.
//
// It prints a before/after table (avg@k, pass@k, maj@k, tool calls per
// answer, answers without a tool call), where the plot, metrics and
// checkpoints are, and one JSON line:
//
//	{"sft": {"avg@8": …, "pass@8": …, "maj@8": …}, "rl": {…}, "seconds": …}
//
// The run folder (-out, default ./runs/arith-<timestamp>) holds
// metrics.jsonl (one line per RL step, verl's names, held-out metrics at
// steps 0 and last), sft_metrics.jsonl, curves.png, model/ (the trained
// policy, a Hugging Face checkpoint folder), checkpoints/ (the trainer's
// resumable checkpoint), sft-model/ (the policy after SFT; -init starts
// a later run's RL from such a folder, skipping SFT), heldout.jsonl
// and train.jsonl (the held-out and the RL problems as verl prompt sets),
// and validation/<step>.jsonl (every held-out response before RL, step 0,
// and after it, with its score: verl's validation_data_dir layout).
// A run holds the folder locked (run.lock, package runlock) from its
// start: a second run on it stops at once, naming the process of the
// first. A folder whose metrics logs hold an earlier run's rows is
// refused before any work; this program does not resume.
// The model folders carry the byte tokenizer as Hugging Face files
// (tokenizer.json, and tokenizer_config.json with a chat template that
// renders a problem as this program does) beside byte_tokenizer.json, so
// examples/eval, examples/grpotcr and examples/serve load them as they
// load any checkpoint:
//
//	go run ./examples/eval -model runs/arith-X/model -data runs/arith-X/heldout.jsonl -k 8 -top-p 1 -max-response 128
//
//	go run ./examples/arith                                  # the default run
//	go run ./examples/arith -rl-steps 200 -n 16 -hidden 192  # larger
//	go run ./examples/arith -init runs/arith-X/sft-model     # RL only, from a saved SFT policy
//	go run ./examples/arith -remote http://host:8000 -tokenizer tokenizer.json
//	go run -tags agentrl_cuda ./examples/arith -device cuda  # on a GPU
//
// -device chooses where the model trains, generates and is evaluated
// (package device): auto, the default, is CUDA device 0 when the program
// was built with -tags agentrl_cuda (cgo and the CUDA headers; see the
// README's GPU section) and the machine has a GPU, the CPU otherwise;
// cpu, cuda and cuda:N ask for one. The program prints its choice, and
// why it fell back to the CPU, on stderr; -fleet's servers run on the
// same device. -precision sets the GPU's matrix products: auto is fp32
// for models narrower than 1024, as this program's are, bf16 from there.
//
// Without python3 the calculator tool replaces the code interpreter (the
// program says so), and the trajectories follow the calculator's schema.
// With -remote the program evaluates the model served by OpenAI-compatible
// servers (vLLM, SGLang) on the held-out problems, with the tool in the
// loop, instead of training the local model: a server's weights cannot
// follow the local updates.
package main

import (
	"context"
	"io"

	"github.com/agentrl/agentrl/examples/internal/setup"
)

func main() { setup.Main(program) }

// program is the whole program after main, with its exit status
// (setup.Run); the tests call it in-process.
func program(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return setup.Run(ctx, "arith", args, stdout, stderr, parseFlags, runOptions)
}
