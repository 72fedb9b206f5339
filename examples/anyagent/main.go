// Command anyagent trains a model through the agent program that uses
// it: the agent (package agent, an ordinary program over OpenAI's Go
// client that knows nothing of agentrl) solves arithmetic word problems
// with a calculator tool against an OpenAI-compatible chat completions
// endpoint, and the trainer trains the model behind the endpoint on
// what it sampled there.
//
// The endpoint is a record.Recorder over the policy being trained,
// served on a local port: it renders each call's messages with the
// model's chat template, samples, parses the model's <tool_call> back
// into OpenAI's tool_calls, and records every call's exact prompt
// tokens, sampled tokens and log-probabilities under the episode's
// session (the agent's base URL is http://127.0.0.1:PORT/sessions/ID/v1,
// since a program's base URL is the one thing every OpenAI client lets
// one set). A record.Source runs the agent once per sample of the
// trainer's prompts, posts the episode's reward (+1 for the right
// \boxed{} answer, −1 otherwise) and turns each session into one
// token-faithful trajectory: the tokens the model sampled, never the
// text re-tokenized, with the tool results and template glue between
// them masked out. The trainer (agentrl.TrainerParts.Source) runs
// GRPO-TCR on them.
//
// The task and model are examples/arith's (the same problems, byte
// tokenizer and Qwen3-style model), with a chat template that renders
// OpenAI's tool calls and tool messages: SFT on generated conversations,
// half of which answer with a rough guess instead of calling the tool,
// then RL through the agent. It prints a before/after table of the
// agent's accuracy and tool use on held-out problems and one JSON line:
//
//	{"sft": {"acc": …, "tool_calls": …}, "rl": {…}, "sessions": {…}, "seconds": …}
//
// The run folder (-out) holds sft-model/ and model/ (the policy after SFT
// and after RL) and metrics.jsonl: the SFT policy's held-out evaluation
// at step 0 (val/heldout/acc, tool_calls, no_tool), the trainer's row for
// every RL step, the RL policy's evaluation in the last. A run holds the
// folder locked; one whose metrics log holds rows is refused.
//
// At the defaults, seed 1 (docs/benchmarks.md), the held-out accuracy
// through the agent rose from 45.7% after SFT to 90.6% after RL, and the
// episodes that answer without the calculator fell from 52.3% to 0.4%.
//
//	go run ./examples/anyagent                       # the default run
//	go run ./examples/anyagent -init runs/anyagent-X/sft-model -rl-steps 40
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
	return setup.Run(ctx, "anyagent", args, stdout, stderr, parseFlags, run)
}
