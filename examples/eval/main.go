// Command eval measures a tool-using agent on a verl-format benchmark:
// it samples -k responses per prompt with the code interpreter in the
// loop, scores them with the reward of the paper's recipe, and prints
// avg@k, pass@k, maj@k, best@k, the mean reward and the tool calls per
// answer for each data source, then the same as one JSON line.
//
// Usage:
//
//	eval -model DIR -data FILE[,FILE...] [-k 8] [-n PROMPTS] [flags]
//
// For example, the paper's AIME evaluation of a trained checkpoint served
// by vLLM (avg@32 at temperature 1.0 and top-p 0.6, as Open-AgentRL's
// recipe/demystify/eval/eval_qwen3_4b_aime_gpqa.sh):
//
//	eval -model DemyAgent-4B -data aime_2024.parquet,aime_2025.parquet \
//	    -k 32 -sampler http://gpu0:8000 -sandbox http://sandbox:8080
//
// -model is a Hugging Face checkpoint folder (config.json, safetensors,
// tokenizer.json, tokenizer_config.json). With -sampler local the model is
// loaded and generates on the -device (package device): auto, the
// default, is CUDA device 0 when this program was built with -tags
// agentrl_cuda and the machine has a GPU, the CPU otherwise (the choice,
// and why it fell back, are printed on stderr); cpu, cuda and cuda:N ask
// for one, and -precision sets the GPU's matrix products (auto: bf16
// from hidden size 1024, fp32 below). With -sampler URL[,URL...]
// the OpenAI-compatible servers (vLLM, SGLang, through package
// policy/openai) generate and only the tokenizer and chat template are read
// from -model, which must be the checkpoint the servers serve.
//
// Each prompt is rendered with the chat template, the code_interpreter
// tool's schema and the generation prompt (agentrl.LoadPrompts); the
// rollout engine parses Hermes <tool_call> blocks and runs the code in the
// sandbox (-sandbox local: the isolated Python pool of package tool; a
// URL: a SandboxFusion server) for at most -max-turns turns and
// -max-response tokens. A prompt that leaves less than -max-response
// tokens of the model's context (config.json's max_position_embeddings)
// is refused, not scored: its responses would be cut short and count as
// wrong. The report counts the refused prompts per data source (on a
// line of its own and in the JSON line's "refused"), and a -max-response
// that fills the context is an error. Rows without a ground truth are
// skipped and counted the same way ("no_ground_truth"): the rule reward
// would score every response to them as wrong. Rewards are Open-AgentRL's
// (recipe/demystify/reward.py, reward.OpenAgentRL), routed by data_source:
// code sources run the last Python block against the ground truth's
// tests (fraction passed, −1 without a block), the rest are math, +1 for a
// right last \boxed{} answer and −1 otherwise, a wrong answer earning 0.1
// per tool round up to −0.6 (-tool-bonus).
//
// The metrics are verl's (eval.Evaluate): avg@k is the mean accuracy
// of the k samples (verl's mean@k), pass@k the unbiased estimator of Chen
// et al. (2021) for every k of eval.Ks, maj@k and best@k bootstrap
// estimates of the accuracy of the majority answer and of the best of k
// samples, each averaged over the prompts of a data source. A metric that
// does not exist reads "-" in the table, with a line under it saying why:
// best@k and maj@k need -k 2 or more, and maj@k needs answers to vote on
// (none when the reward found no answer in any response); the JSON line
// leaves it out. -samples FILE writes every response with its score as
// JSON Lines.
//
// Exit status: 0 on success, 2 for a usage error (bad flag, missing or
// unreadable path), 1 for any other failure. SIGINT or SIGTERM cancels the
// evaluation.
package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/examples/internal/setup"
)

func main() { setup.Main(run) }

// options are the parsed flags.
type options struct {
	model, data, samples        string
	promptKey                   string
	sampler, servedModel        string
	sandbox                     string
	k, n                        int
	temperature, topP           float64
	maxResponse, maxPrompt      int
	maxTurns                    int
	thinking, toolBonus         bool
	seed                        uint64
	sandboxWorkers, concurrency int
	toolTimeout                 time.Duration
	device                      device.Config // where the local model runs
}

// synopsis is the first line of -h.
const synopsis = "eval -model DIR -data FILE[,FILE...] [-k 8] [-n PROMPTS] [flags]"

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := setup.NewFlagSet("eval", synopsis, stderr)
	fs.StringVar(&o.model, "model", "", "Hugging Face checkpoint folder: config.json, *.safetensors, tokenizer.json, tokenizer_config.json (required; with a remote -sampler only the tokenizer files are read)")
	fs.StringVar(&o.data, "data", "", "benchmark prompts: verl-format .parquet or .jsonl files, comma-separated (required)")
	fs.StringVar(&o.promptKey, "prompt-key", "prompt", "field of the prompt (verl data.prompt_key); a string prompt is one user message")
	fs.StringVar(&o.samples, "samples", "", "write every response and its score to this JSON Lines file")
	fs.StringVar(&o.sampler, "sampler", "local", `"local" (the model on this CPU) or OpenAI-compatible base URLs, comma-separated (vLLM, SGLang)`)
	fs.StringVar(&o.servedModel, "served-model", "", "model name sent to the -sampler servers")
	fs.StringVar(&o.sandbox, "sandbox", "local", `"local" (isolated Python pool) or a SandboxFusion base URL`)
	fs.IntVar(&o.k, "k", 8, "samples per prompt")
	fs.IntVar(&o.n, "n", 0, "evaluate the first n prompts only; 0: all")
	fs.Float64Var(&o.temperature, "temperature", 1, "sampling temperature (Open-AgentRL's validation: 1.0)")
	fs.Float64Var(&o.topP, "top-p", 0.6, "sampling top-p (Open-AgentRL's validation: 0.6)")
	fs.IntVar(&o.maxResponse, "max-response", 20480, "response budget in tokens, tool results included")
	fs.IntVar(&o.maxPrompt, "max-prompt", 0, "leave out prompts over this many tokens (and say how many); 0: keep all")
	fs.IntVar(&o.maxTurns, "max-turns", 16, "assistant turns per response")
	fs.BoolVar(&o.thinking, "thinking", true, "render prompts with enable_thinking (Qwen3 templates)")
	fs.BoolVar(&o.toolBonus, "tool-bonus", true, "Open-AgentRL's +0.1 per tool round for a wrong answer, capped at -0.6 (changes the reward column only)")
	fs.Uint64Var(&o.seed, "seed", 1, "sampling seed: sample s of prompt i uses seed + i·k + s")
	fs.IntVar(&o.sandboxWorkers, "sandbox-workers", 0, "code executions at once; 0: the number of CPUs (local) or 16 (SandboxFusion)")
	fs.IntVar(&o.concurrency, "concurrency", 256, "responses in flight at once")
	fs.DurationVar(&o.toolTimeout, "tool-timeout", 10*time.Second, "wall-clock limit of one code execution")
	o.device.RegisterFlags(fs)
	if err := setup.Parse(fs, args); err != nil {
		return o, err
	}
	bad := func(format string, a ...any) (options, error) {
		return o, fmt.Errorf(format, a...)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"temperature", o.temperature}, {"top-p", o.topP}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return bad("-%s %v: want a finite, non-negative number", f.name, f.v)
		}
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected arguments %q", fs.Args())
	case o.model == "":
		return bad("-model is required")
	case len(setup.SplitList(o.data)) == 0:
		return bad("-data is required")
	case o.k < 1:
		return bad("-k %d: want at least 1", o.k)
	case o.n < 0:
		return bad("-n %d: want 0 (all) or more", o.n)
	case o.topP > 1:
		return bad("-top-p %v: want a number in [0, 1]", o.topP)
	case o.maxResponse < 1:
		return bad("-max-response %d: want at least 1", o.maxResponse)
	case o.maxPrompt < 0:
		return bad("-max-prompt %d: want 0 (keep all) or more", o.maxPrompt)
	case o.maxTurns < 1:
		return bad("-max-turns %d: want at least 1", o.maxTurns)
	case o.sandboxWorkers < 0:
		return bad("-sandbox-workers %d: want 0 (the default) or more", o.sandboxWorkers)
	case o.concurrency < 1:
		return bad("-concurrency %d: want at least 1", o.concurrency)
	case o.toolTimeout <= 0:
		return bad("-tool-timeout %v: want a positive duration", o.toolTimeout)
	}
	need := []string{"tokenizer.json"}
	if o.sampler == "local" {
		need = append(need, "config.json")
	}
	if err := setup.CheckDir(o.model, need...); err != nil {
		return bad("-model: %w", err)
	}
	for _, f := range setup.SplitList(o.data) {
		if err := setup.CheckFile(f); err != nil {
			return bad("-data: %w", err)
		}
	}
	if err := setup.CheckEndpoints(o.sampler, o.sandbox); err != nil {
		return bad("%w", err)
	}
	if err := o.device.Validate(); err != nil {
		return bad("%w", err)
	}
	return o, nil
}

// run is the program after main, with its exit status (setup.Run); the
// tests call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return setup.Run(ctx, "eval", args, stdout, stderr, parseFlags, evaluate)
}
