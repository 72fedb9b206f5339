// Command grpotcr trains a tool-using agent with GRPO-TCR, the recipe of
// "Demystifying Reinforcement Learning in Agentic Reasoning" (Yu et al.,
// 2025, arXiv:2510.11701), on the paper's setup: a Hugging Face checkpoint
// folder, a verl-format prompt set (parquet or JSON Lines, math and code
// mixed) and a code interpreter called inside the rollout.
//
// Usage:
//
//	grpotcr -model DIR -train FILE[,FILE...] [-val FILE[,FILE...]] [flags]
//
// For example, Open-AgentRL's run (recipe/demystify/grpo_tcr_qwen3_4b_test.sh)
// on a SandboxFusion server and two vLLM servers that get the weights
// after every step:
//
//	grpotcr -model Qwen3-4B-RA-SFT -train Open-AgentRL-30K.parquet \
//	    -val aime_2024.parquet,aime_2025.parquet -sandbox http://sandbox:8080 \
//	    -fleet-servers http://gpu0:8000,http://gpu1:8000 -fleet-kind vllm -fleet-dir /shared/weights \
//	    -steps 300 -batch 16 -n 16 -max-response 20480 -out runs/grpo-tcr
//
// and the smallest run, on a model made by examples/mkmodel (random
// weights: it shows the pipeline, and learns nothing in two steps):
//
//	grpotcr -model runs/tiny-qwen3 -train examples/grpotcr/testdata/train.jsonl \
//	    -steps 2 -batch 2 -n 2 -max-response 32 -overlong-buffer 8 -out runs/try-grpotcr
//
// The folder given to -model holds config.json, the safetensors weights,
// tokenizer.json and tokenizer_config.json (its chat template). Each prompt
// is rendered once with that template, the code_interpreter tool's schema
// and the generation prompt (package hftrain loads the folder and renders
// the prompts); prompts that the model's context (max_position_embeddings)
// cannot hold beside -max-response tokens, or over -max-prompt tokens when
// it is set, are left out and counted, as verl's filter_overlong_prompts
// does, and a -max-response that fills the context is refused before
// anything is read. Rows without a ground truth are left out and counted
// too when the reward needs one (the rule reward does; a judge does not).
// The
// rollout engine parses Hermes <tool_call> blocks, runs the code in the
// sandbox (-sandbox local: the pure-Go-managed, namespace-isolated Python
// pool of package tool; a URL: a SandboxFusion server) and appends the
// results as Qwen's chat template renders tool messages, for at most
// -max-turns assistant turns and -max-response tokens.
//
// Rewards follow Open-AgentRL's compute_score (recipe/demystify/reward.py,
// reward.OpenAgentRL), routed by data_source: code sources (those
// reward.SourceKind classifies as code, and any whose name contains
// "code") score the fraction of the ground truth's tests the last Python
// block passes, −1 without a block; every other source is math: +1 when
// the last \boxed{} answer is right, −1 otherwise; a wrong answer earns
// 0.1 per tool round up to −0.6 (-tool-bonus). The trainer adds DAPO's
// overlong penalty (-overlong-buffer tokens before -max-response) and
// trains with agentrl.GRPOTCR: GRPO advantages, token-mean loss,
// clip-higher (0.2, 0.28), dual-clip 10.
//
// -judge-url scores with an LLM judge behind an OpenAI-compatible
// endpoint instead (package reward/judge, -judge-model the served model,
// -judge-key-env the variable holding its API key): -judge-mode ranking
// (the default) has it score the -n responses of a prompt together,
// relative to each other, as ART's RULER does; pointwise grades each
// from 0 to 10. -judge-rubric names a file with the rubric. The judge is
// asked once before anything trains; its requests, tokens and latency
// join every step's metrics under judge/.
//
// -mcp adds the tools of a Model Context Protocol server (package
// tool/mcp) beside the code interpreter: a stdio server's command line,
// split into words as a shell splits them, quotes included, but run
// without a shell (-mcp "npx -y @modelcontextprotocol/server-filesystem
// '/data/my files'"), or a streamable-HTTP URL; repeat it for several
// servers.
// -mcp-per-trajectory gives each trajectory a session of its own, for
// servers that keep state.
//
// -search adds a search tool (package tool/search: verl's "search"
// function, whose one parameter query_list is a list of queries) over a
// retrieval server that speaks Search-R1's API (POST /retrieve with
// queries, topk and return_scores): Search-R1's e5 + FAISS server, the
// servers of verl's search recipe, SkyRL or slime, or examples/retrieval's
// BM25 one. -search-topk passages come back per query, written as
// -search-format says (verl's text or Search-R1's). The server is asked
// one query before anything trains, so that a wrong URL stops the run at
// once. During training each HTTP attempt is bounded by -tool-timeout; a
// call that fails (the server timed out, erred or died, after verl's
// retries) is a failed tool result the model reads, counted in the step's
// tool_errors/total.
//
// Everything is written under -out: metrics.jsonl (one line per step under
// verl's metric names, validation metrics merged into the step's line),
// metrics.png (the curves), checkpoints/step-N (params, optimizer state
// and trainer position, the newest -keep kept) and, at the end, final/,
// a Hugging Face checkpoint folder of the trained policy with the
// tokenizer files. -resume continues from the newest checkpoint, bit for
// bit as an uninterrupted run would (with a sampler that honours seeds, as
// the local one does); the metrics log goes on from the checkpoint's step,
// without the rows the interrupted run logged after it, so that every step
// has one row. Without -resume, an -out that already holds checkpoints, or
// a metrics log with rows, is an error. A run holds -out locked
// (run.lock, package runlock) from its start: a second run on the same
// -out stops at once, naming the process of the first.
//
// Validation runs before training (-val-before-train) and every -val-every
// steps: -val-n samples per prompt at -val-temperature and -val-top-p
// (Open-AgentRL: 1.0 and 0.6), scored by the same reward and summarised
// by eval.Evaluate (mean@n, pass@k, maj@k, best@k per data source).
//
// Device: -device chooses where the policy trains and, with -sampler
// local, generates (package device): auto (the default) runs it on CUDA
// device 0 when this program was built with -tags agentrl_cuda and the
// machine has a GPU, and on the CPU otherwise; cpu, cuda and cuda:N ask
// for one. -precision sets the GPU's matrix products: auto is bf16 for
// models from hidden size 1024 (every Qwen3), fp32 below. The program
// prints its choice, and why it fell back to the CPU, on stderr.
//
// Sampling: -sampler local (the default) generates with the policy
// being trained, on the -device: on-policy, in this process.
//
// -fleet-servers URL[,URL...] trains on-policy against running inference
// servers — vLLM (started with VLLM_SERVER_DEV_MODE=1 and --logprobs-mode
// processed_logprobs), SGLang, or examples/serve — that were started over
// -model and read -fleet-dir under the same path. -fleet-kind names their
// weight-update API (sglang, vllm, vllm-model-config). The program checks
// every server before it loads anything (fleet.Fleet.Check: it answers,
// serves -served-model when given, takes weight updates, agrees with the
// others on its starting version) and stops at once, naming the server
// and what it lacks. The rollouts are sampled on the servers, at most
// -fleet-staleness steps ahead of training (η; 0 is synchronous), and
// after every step the trainer writes its weights into -fleet-dir and
// has every server load them (package fleet); each turn is sampled by
// one weight version and each trajectory's staleness is checked and
// logged (async/staleness_*). With -fleet-partial a weight update does
// not wait for the turns in flight: the servers abort them and the
// rollout continues each from where it was cut under the new weights
// (partial rollouts, fleet.Config.PartialRollouts), each token keeping
// the version and log-probability that sampled it; the staleness bound
// then holds token by token. With -lora-rank the policy trains LoRA
// adapters on every projection and the servers keep their weights and
// hot-load each step's adapter (grpotcr-lora-v00000042; vLLM needs
// --enable-lora, --max-lora-rank and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True,
// SGLang --enable-lora). For example, on two vLLM servers:
//
//	grpotcr -model Qwen3-4B-RA-SFT -train Open-AgentRL-30K.parquet \
//	    -fleet-servers http://gpu0:8000,http://gpu1:8000 -fleet-kind vllm \
//	    -fleet-dir /shared/grpotcr-weights -served-model Qwen3-4B-RA-SFT
//
// Weight versions count steps: the run publishes the policy it starts
// from as version 0 (a resumed run: the checkpoint's step) before its
// first rollout, so that the servers surely hold it, then version k after
// step k; after two steps an SGLang server reports "2" (package serve in
// its own mode numbers the loads of vLLM's reload itself, and reports
// "3"). A server keeps the last weights it loaded, so a second run
// against the same servers finds them at the first run's last version
// and stops at the check, naming it, since a validation before training
// would sample those weights. -fleet-version says what the servers hold:
// start (the default: the weights they were started with, version 0;
// a resumed run takes their number as it is, as it publishes its
// checkpoint's weights before anything samples), adopt (take the number
// they report), reset (publish this run's starting weights to them
// first, whatever they hold; the trainer then publishes version 0 once
// more before its first rollout) or a version number.
//
// -rollout-corr names one of verl's rollout-correction presets
// (loss.RolloutCorrectionPreset: decoupled_token_is, decoupled_seq_is_rs
// — Seq-MIS —, bypass_ppo_clip, …) to correct the mismatch between the
// sampler's and the trainer's probabilities; a bypass preset takes the
// sampler's log-probabilities as the old policy's. An unknown name is a
// usage error that lists the known ones.
//
// -sampler URL[,URL...] instead sends generation to OpenAI-compatible
// servers (package policy/openai) without publishing anything: they keep
// sampling from the weights they loaded, so after the first update the
// rollouts are off-policy and drift further with every step. Treat such
// a run as an experiment in off-policy training, or reload the servers
// from a checkpoint (final/, or Model.Save) by hand.
//
// Exit status: 0 on success, 2 for a usage error (bad flag, missing or
// unreadable path), 1 for any other failure. SIGINT or SIGTERM cancels the
// run; the newest periodic checkpoint is where -resume picks up.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/tool/search"
)

func main() { setup.Main(run) }

// options are the parsed flags.
type options struct {
	model, train, val, out   string
	promptKey                string
	sampler, servedModel     string
	sandbox                  string
	steps, batch, n          int
	miniBatch, microBatch    int
	maxResponse, maxPrompt   int
	maxTurns, overlongBuffer int
	lr, temperature, topP    float64
	thinking, toolBonus      bool
	valEvery, valN           int
	valTemperature, valTopP  float64
	valBeforeTrain           bool
	saveEvery, keep          int
	resume                   bool
	seed                     uint64
	sandboxWorkers           int
	toolTimeout              time.Duration
	device                   device.Config

	// On-policy training against running inference servers.
	fleetServers, fleetKind, fleetDir string
	fleetStaleness                    int
	fleetPartial                      bool
	fleetVersion                      setup.FleetVersion
	loraRank                          int
	loraAlpha                         float64

	// An LLM judge instead of the rule reward, and MCP servers' tools.
	judgeURL, judgeModel, judgeKeyEnv string
	judgeMode, judgeRubric            string
	mcp                               []string
	mcpPerTrajectory                  bool
	zero                              int  // -zero: the sharding of a data-parallel job's training state
	zeroBF16                          bool // -zero-bf16: bf16 weights, their float32 master sharded

	// A search tool over a retrieval server (Search-R1's /retrieve API).
	search       string
	searchTopK   int
	searchFormat string
	// rolloutCorr names verl's rollout-correction preset
	// (loss.RolloutCorrectionPreset); "" corrects nothing.
	rolloutCorr string
}

// synopsis is the first line of -h.
const synopsis = "grpotcr -model DIR -train FILE[,FILE...] [-val FILE[,FILE...]] [flags]"

// registerFlags registers the flags into o.
func registerFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.model, "model", "", "Hugging Face checkpoint folder: config.json, *.safetensors, tokenizer.json, tokenizer_config.json (required)")
	fs.StringVar(&o.train, "train", "", "training prompts: verl-format .parquet or .jsonl files, comma-separated (required)")
	fs.StringVar(&o.val, "val", "", "validation prompts, as -train; empty: no validation")
	fs.StringVar(&o.promptKey, "prompt-key", "prompt", "field of the prompt (verl data.prompt_key); a string prompt is one user message")
	fs.StringVar(&o.out, "out", "grpotcr-out", "output folder: metrics, plot, checkpoints, final model")
	fs.StringVar(&o.sampler, "sampler", "local", `"local" (the policy itself) or OpenAI-compatible base URLs, comma-separated (vLLM, SGLang); weights are NOT synced to these servers (off-policy): -fleet-servers syncs them`)
	fs.StringVar(&o.servedModel, "served-model", "", "model name sent to the -sampler or -fleet-servers servers")
	fs.StringVar(&o.fleetServers, "fleet-servers", "", "on-policy training against running servers: base URLs, comma-separated, of vLLM (VLLM_SERVER_DEV_MODE=1), SGLang or examples/serve servers started over -model; the rollouts are sampled there and the weights published to them after every step")
	fs.StringVar(&o.fleetKind, "fleet-kind", string(fleet.SGLang), `weight-update API of the -fleet-servers: "sglang", "vllm" or "vllm-model-config"`)
	fs.StringVar(&o.fleetDir, "fleet-dir", "", "folder the weights are published to, which every -fleet-servers server reads under the same path (required with -fleet-servers)")
	fs.IntVar(&o.fleetStaleness, "fleet-staleness", 1, "with -fleet-servers, η: how many steps the rollouts may run ahead of training (0: synchronous)")
	fs.Var(&o.fleetVersion, "fleet-version", setup.FleetVersionUsage)
	fs.BoolVar(&o.fleetPartial, "fleet-partial", false, "with -fleet-servers, partial rollouts: a weight update aborts the turns in flight and the rollout continues each from where it was cut under the new weights (each token keeps its own version and log-probability), instead of waiting for them to end")
	fs.IntVar(&o.loraRank, "lora-rank", 0, "train LoRA adapters of this rank on every projection (q/k/v/o/gate/up/down) instead of the full weights; with -fleet-servers the servers hot-load each step's adapter; 0 trains every weight")
	fs.Float64Var(&o.loraAlpha, "lora-alpha", 0, "the LoRA adapters' lora_alpha (scale alpha/rank); 0 means the rank")
	fs.StringVar(&o.sandbox, "sandbox", "local", `"local" (isolated Python pool) or a SandboxFusion base URL`)
	fs.IntVar(&o.steps, "steps", 100, "total training steps (a resumed run counts the steps already done)")
	fs.IntVar(&o.batch, "batch", 16, "prompts per step (verl data.train_batch_size)")
	fs.IntVar(&o.n, "n", 16, "samples per prompt (verl rollout.n)")
	fs.IntVar(&o.miniBatch, "mini-batch", 0, "trajectories per optimiser update; 0: the whole batch, one update per step")
	fs.IntVar(&o.microBatch, "micro-batch", 8, "trajectories per forward/backward pass, at most the mini-batch; 0: the mini-batch")
	fs.IntVar(&o.maxResponse, "max-response", 20480, "response budget in tokens, tool results included (verl data.max_response_length)")
	fs.IntVar(&o.maxPrompt, "max-prompt", 0, "prompts over this many tokens are left out; 0: those the model's context cannot hold beside -max-response")
	fs.IntVar(&o.maxTurns, "max-turns", 16, "assistant turns per trajectory")
	fs.IntVar(&o.overlongBuffer, "overlong-buffer", 4096, "DAPO overlong buffer: the penalty grows over the last this many tokens of -max-response; 0: no overlong shaping")
	fs.Float64Var(&o.lr, "lr", 4e-6, "learning rate")
	fs.Float64Var(&o.temperature, "temperature", 1, "rollout temperature")
	fs.Float64Var(&o.topP, "top-p", 1, "rollout top-p")
	fs.BoolVar(&o.thinking, "thinking", true, "render prompts with enable_thinking (Qwen3 templates)")
	fs.BoolVar(&o.toolBonus, "tool-bonus", true, "Open-AgentRL's +0.1 per tool round for a wrong answer, capped at -0.6")
	fs.IntVar(&o.valEvery, "val-every", 10, "validate every this many steps; 0: only at the end")
	fs.IntVar(&o.valN, "val-n", 2, "validation samples per prompt")
	fs.Float64Var(&o.valTemperature, "val-temperature", 1, "validation temperature")
	fs.Float64Var(&o.valTopP, "val-top-p", 0.6, "validation top-p")
	fs.BoolVar(&o.valBeforeTrain, "val-before-train", true, "validate before the first step")
	fs.IntVar(&o.saveEvery, "save-every", 30, "checkpoint every this many steps (and at the end); 0: only at the end")
	fs.IntVar(&o.keep, "keep", 3, "checkpoints to keep; 0: all")
	fs.BoolVar(&o.resume, "resume", false, "continue from the newest checkpoint under -out")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of prompt order, rollouts and mini-batches")
	fs.IntVar(&o.sandboxWorkers, "sandbox-workers", 0, "code executions at once; 0: the number of CPUs (local) or 16 (SandboxFusion)")
	fs.DurationVar(&o.toolTimeout, "tool-timeout", 10*time.Second, "wall-clock limit of one code execution")
	fs.StringVar(&o.judgeURL, "judge-url", "", "score with an LLM judge instead of the rule reward: the base URL of an OpenAI-compatible endpoint (vLLM, SGLang, examples/serve, a hosted API), e.g. http://judge:8000/v1")
	fs.StringVar(&o.judgeModel, "judge-model", "", "the judge's served model name (required with -judge-url)")
	fs.StringVar(&o.judgeKeyEnv, "judge-key-env", "", "environment variable holding the judge's API key; empty: no key")
	fs.StringVar(&o.judgeMode, "judge-mode", judgeRanking, `"ranking": the judge scores the -n responses of a prompt together, relative to each other (ART's RULER); "pointwise": each on its own, 0 to 10`)
	fs.StringVar(&o.judgeRubric, "judge-rubric", "", "file holding the judge's rubric; empty: the mode's default")
	fs.Func("mcp", "tools of a Model Context Protocol server: the command line of a stdio server (e.g. \"npx -y @modelcontextprotocol/server-everything\"), or a streamable-HTTP URL; repeat for several servers", func(v string) error {
		if strings.TrimSpace(v) == "" {
			return errors.New("empty server")
		}
		if !isURL(v) {
			if _, err := mcpCommand(v); err != nil {
				return err
			}
		}
		o.mcp = append(o.mcp, v)
		return nil
	})
	fs.BoolVar(&o.mcpPerTrajectory, "mcp-per-trajectory", false, "give each trajectory a session (a server process) of its own, for MCP servers that keep state")
	fs.StringVar(&o.search, "search", "", "add verl's search tool: a retrieval server speaking Search-R1's API, its /retrieve URL or base URL (e.g. http://retriever:8000/retrieve; examples/retrieval serves one over BM25)")
	fs.IntVar(&o.searchTopK, "search-topk", 3, "passages per query (Search-R1's and verl's topk)")
	fs.StringVar(&o.searchFormat, "search-format", string(search.FormatVerl), `how the hits are written for the model: "verl" (verl's search tool: {"result": ...}) or "search-r1" (Search-R1's Doc i(Title: ...) text)`)
	fs.StringVar(&o.rolloutCorr, "rollout-corr", "", "verl's rollout correction preset for the rollout–training mismatch, by its verl name ("+strings.Join(loss.RolloutCorrectionPresets(), ", ")+"); bypass_* presets take the sampler's log-probabilities as the old policy's; empty: no correction")
	o.device.RegisterFlags(fs)
	setup.ZeROFlag(fs, &o.zero)
	setup.ZeROBF16Flag(fs, &o.zeroBF16)
}

// parseFlags parses and checks the flags; a usage error says what is
// wrong with which flag.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := setup.NewFlagSet("grpotcr", synopsis, stderr)
	registerFlags(fs, &o)
	if err := setup.Parse(fs, args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, check := range []func() error{o.checkValues, func() error { return checkFleetFlags(fs, o) }, o.checkBatches, func() error { return o.checkJudge(fs) }, o.checkPaths} {
		if err := check(); err != nil {
			return o, err
		}
	}
	return o, nil
}

// run is the program after main, with its exit status (setup.Run); the
// tests call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return setup.Run(ctx, "grpotcr", args, stdout, stderr, parseFlags, train)
}
