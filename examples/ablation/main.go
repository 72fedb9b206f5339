// Command ablation reproduces the paper's algorithm findings in
// miniature: from one SFT checkpoint of the arith task (examples/arith's
// sft-model), it trains a grid of GRPO-TCR variants × seeds with the
// tool in the loop, evaluates each run on held-out problems, and prints
// the held-out avg@n of every variant as a mean with a 95% Student-t
// interval over the seeds, beside tool calls per answer, clip fraction,
// entropy and truncation.
//
// Every run is the main job's RL stage (examples/arith with -init) with
// one change: the variant's edit of the trainer configuration, or of the
// engine and reward (a tight response budget, a cap on tool calls, a
// tool bonus). With the same flags, variant grpo-tcr and seed 1 train
// exactly as `go run ./examples/arith -init <sft-model>` does. -list
// prints the catalogue; user-spo shows a user's own loss, registered on
// a loss.Registry, in the same grid.
//
// A run with seed s loads the model with sampler seed s, trains on the
// problems drawn from seed s+1 with trainer seed s (rollout seeds and
// prompt order), and is evaluated on one fixed held-out set (-eval-seed,
// the main job's by default) with fixed per-problem sampling seeds: the
// same variant and seed give the same run, up to the float32 rounding
// of batched generation (policy.Model.Generate), and variants are
// compared on the same problems and random draws. The SFT policy is
// evaluated once per response budget and tool-call cap, as the step-0
// reference.
//
// The run folder (-out, default ./runs/ablation-<timestamp>) holds
// <variant>/seed-<s>/metrics.jsonl (verl's names, one line per step, the
// held-out evaluation at steps 0 and last) and result.json, summary.json
// (the tables, every run's final metrics, the flags), curves.png
// (training accuracy, reward, entropy, clip fraction, tool calls and
// response length: the mean over seeds, each seed faintly, smoothed over
// -smooth steps) and tool-calls.png (held-out avg@n against tool calls
// per answer, one point per run). A grid holds the folder locked
// (run.lock, package runlock) from its start: a second grid on it stops
// at once, naming the process of the first; a folder whose runs' logs
// hold rows is refused before any work.
//
//	go run ./examples/arith -out runs/main                 # once: the SFT checkpoint
//	go run ./examples/ablation -init runs/main/sft-model  # the default grid, 3 seeds
//	go run ./examples/ablation -init runs/main/sft-model -variants grpo-tcr,user-spo -seeds 1,2
//
// -device and -precision choose where the models train and are
// evaluated (package device; the same as examples/arith's): auto, the
// default, is CUDA device 0 when the program was built with -tags
// agentrl_cuda and the machine has a GPU, the CPU otherwise, said on
// stderr and in summary.json. The runs of the grid share the device.
//
// Runs go one at a time by default: each already keeps the machine's
// cores busy with its matrix products, so on a small machine more at once
// (-parallel) only share the cores.
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
	return setup.Run(ctx, "ablation", args, stdout, stderr, parseFlags, runOptions)
}
