package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/metrics/plot"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/progress"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// options are the command-line settings.
type options struct {
	out  string
	seed uint64

	// Model size.
	hidden, layers, heads, kvHeads, headDim, ffn int

	// SFT.
	sftSamples, sftSteps, sftBatch int
	sftLR                          float64
	sftSchedule                    string  // arith.ScheduleCosine or arith.ScheduleWSD
	sftWarmup, sftDecay            float64 // fractions of the SFT updates warming up, and (WSD) decaying
	noToolFrac                     float64
	sftToolFirst                   float64 // fraction of the SFT updates, at the start, on tool-calling trajectories only
	sftPairs                       bool    // each SFT problem with and without the tool, in one batch
	sftBalance                     bool    // SFT problems in equal shares of 4- to 7-digit answers
	sftTrainGuesses                bool    // train the guessed digits of the trajectories without the tool

	// RL.
	rlSteps, prompts, n int
	miniBatch           int
	rlLR                float64
	loraRank            int
	loraAlpha           float64
	maxResponse         int

	// Evaluation.
	evalProblems int
	evalSeed     uint64
	temperature  float64

	toolName  string
	toolCache int // results of identical tool calls kept (tool.Cache); 0: none

	init string // a saved model folder to start RL from instead of running SFT

	remote, remoteModel, remoteKey, tokenizerFile string

	// Disaggregated RL: rollouts on an inference fleet.
	fleet                   int
	fleetStaleness          int
	fleetServers, fleetKind string
	fleetDir                string
	fleetVersion            setup.FleetVersion
	serve                   string // run as a fleet server over this model folder
	// serverCommand, when set, is the command of one fleet server over
	// a model folder on a device (tests run their own binary); nil runs
	// this program with -serve and the device's flags.
	serverCommand func(modelDir string, dc device.Config) *exec.Cmd

	device device.Config // where the model trains (and a fleet's servers run)
	zero   int           // -zero: the sharding of a data-parallel job's training state
	// -zero-bf16: bf16 weights, their float32 master sharded
	zeroBF16 bool
}

// synopsis is the first line of -h.
const synopsis = "arith [-out DIR] [-seed N] [-init SFT-MODEL] [-fleet N | -fleet-servers URL[,URL...] -fleet-dir DIR] [flags]"

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := setup.NewFlagSet("arith", synopsis, stderr)
	fs.StringVar(&o.out, "out", "", "run folder (default ./runs/arith-<timestamp>)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the model, the training problems (SFT: seed, RL: seed+1) and sampling")
	fs.IntVar(&o.hidden, "hidden", 128, "model hidden size")
	fs.IntVar(&o.layers, "layers", 2, "transformer layers")
	fs.IntVar(&o.heads, "heads", 8, "attention heads (the default before 2026-11-28: 4, with -kv-heads 2 -head-dim 32: the same projections)")
	fs.IntVar(&o.kvHeads, "kv-heads", 4, "key/value heads")
	fs.IntVar(&o.headDim, "head-dim", 16, "attention head size")
	fs.IntVar(&o.ffn, "ffn", 384, "MLP intermediate size")
	fs.IntVar(&o.sftSamples, "sft-samples", 12800, "generated SFT problems (trajectories without -sft-pairs; with it, each problem is written both ways, twice as many)")
	fs.IntVar(&o.sftSteps, "sft-steps", 2000, "SFT updates")
	fs.IntVar(&o.sftBatch, "sft-batch", 16, "SFT sequences per update")
	fs.Float64Var(&o.sftLR, "sft-lr", 2e-3, "SFT peak learning rate (the default before -sft-schedule wsd: 3e-3)")
	fs.StringVar(&o.sftSchedule, "sft-schedule", arith.ScheduleWSD, `SFT learning-rate schedule after the warm-up: "wsd" (the peak held, then cosine decay to a tenth over the last -sft-decay of the updates) or "cosine" (decay to a tenth of the peak over the remaining updates; with -sft-lr 3e-3, the default before)`)
	fs.Float64Var(&o.sftWarmup, "sft-warmup", 0.05, "fraction of the SFT updates warming the learning rate up linearly")
	fs.Float64Var(&o.sftDecay, "sft-decay", 0.2, "with -sft-schedule wsd: fraction of the SFT updates decaying the learning rate at the end")
	fs.Float64Var(&o.noToolFrac, "no-tool-frac", 0.5, "fraction of SFT trajectories that compute the expression in their head (a rough guess) instead of calling the tool; a value other than 0.5 needs -sft-pairs=false")
	fs.Float64Var(&o.sftToolFirst, "sft-tool-first", 0, "fraction of the SFT updates, at the start, whose batches hold only trajectories that call the tool (a curriculum); the rest draw the usual mix (-no-tool-frac); 0: the mix throughout")
	fs.BoolVar(&o.sftPairs, "sft-pairs", true, "write each SFT problem both ways, calling the tool and answering with a guess, and train each batch's problems half one way and half the other (the same problems, in the same order, as without it; needs -no-tool-frac 0.5): the choice to call then depends on nothing in the problem, and every batch holds as many of each; false draws each trajectory's kind at random (-no-tool-frac), the default before 2026-11-29")
	fs.BoolVar(&o.sftBalance, "sft-balance", false, "draw the SFT problems in equal shares of 4-, 5-, 6- and 7-digit answers instead of as the generator draws them (about 11/47/32/10%)")
	fs.BoolVar(&o.sftTrainGuesses, "sft-train-guesses", true, "train the guessed digits of the SFT trajectories that answer without the tool; false takes them out of the loss (the rest of those trajectories is trained)")
	fs.IntVar(&o.rlSteps, "rl-steps", arith.DefaultRLSteps, "GRPO-TCR steps")
	fs.IntVar(&o.prompts, "prompts", arith.DefaultPrompts, "prompts per RL step")
	fs.IntVar(&o.n, "n", arith.DefaultN, "samples per prompt, in RL and evaluation (the k of avg@k, pass@k, maj@k)")
	fs.Float64Var(&o.rlLR, "rl-lr", arith.DefaultRLLR, "RL learning rate")
	fs.IntVar(&o.miniBatch, "mini-batch", arith.DefaultMiniBatch, "trajectories per RL update (verl's ppo_mini_batch_size × n): the step's batch is cut into mini-batches, one update each, so later ones are off-policy and the clip acts; 0 means the whole batch, one update per step")
	fs.IntVar(&o.loraRank, "lora-rank", 0, "RL trains LoRA adapters of this rank on every projection (q/k/v/o/gate/up/down) instead of the full weights; 0 trains every weight")
	fs.Float64Var(&o.loraAlpha, "lora-alpha", 0, "the LoRA adapters' lora_alpha (scale alpha/rank); 0 means the rank")
	fs.IntVar(&o.maxResponse, "max-response", arith.DefaultMaxResponse, "response budget in tokens (tool results included)")
	fs.IntVar(&o.evalProblems, "eval", arith.DefaultEvalProblems, "held-out evaluation problems")
	fs.Uint64Var(&o.evalSeed, "eval-seed", arith.DefaultEvalSeed, "seed of the held-out problems, the same set whatever -seed (before 2026-11-29 each -seed drew its own, seed+1000), so that seeds are compared on the same problems")
	fs.Float64Var(&o.temperature, "temperature", arith.DefaultTemperature, "sampling temperature of rollouts and evaluation")
	arith.ToolCacheFlag(fs, &o.toolCache)
	fs.StringVar(&o.init, "init", "", "start from this saved model folder (a run's sft-model or model) instead of running SFT")
	fs.StringVar(&o.toolName, "tool", "auto", `tool: "code_interpreter" (python sandbox), "calculator", or "auto" (the interpreter when python3 exists)`)
	fs.StringVar(&o.remote, "remote", "", "comma-separated base URLs of OpenAI-compatible servers: evaluate the served model instead of training")
	fs.StringVar(&o.remoteModel, "remote-model", "", "model name sent to the server")
	fs.StringVar(&o.remoteKey, "remote-key-env", "", "environment variable holding the server's API key")
	fs.StringVar(&o.tokenizerFile, "tokenizer", "", "tokenizer.json of the served model (with -remote; default the byte tokenizer of this program)")
	fs.IntVar(&o.fleet, "fleet", 0, "disaggregated RL: start this many inference servers (this program in -serve mode) and sample the rollouts there, publishing the weights after every step")
	fs.IntVar(&o.fleetStaleness, "fleet-staleness", 1, "with a fleet, η: how many steps the rollouts may run ahead of training (0: synchronous)")
	fs.StringVar(&o.fleetServers, "fleet-servers", "", "comma-separated base URLs of running vLLM (VLLM_SERVER_DEV_MODE=1) or SGLang servers to train against instead of starting them; they must read -fleet-dir")
	fs.StringVar(&o.fleetKind, "fleet-kind", "sglang", `weight-update API of the fleet's servers: "sglang", "vllm" or "vllm-model-config" (this program's servers speak all of them)`)
	fs.StringVar(&o.fleetDir, "fleet-dir", "", "folder the weights are published to, readable by every server (default <run folder>/fleet; required with -fleet-servers)")
	fs.Var(&o.fleetVersion, "fleet-version", setup.FleetVersionUsage+` (RL publishes its starting weights to the servers before its first rollout, and nothing samples them before: "adopt" and "reset" both go on whatever they hold)`)
	fs.StringVar(&o.serve, "serve", "", "run as an inference server of a fleet over this model folder (used by -fleet)")
	o.device.RegisterFlags(fs)
	setup.ZeROFlag(fs, &o.zero)
	setup.ZeROBF16Flag(fs, &o.zeroBF16)
	if err := setup.Parse(fs, args); err != nil {
		return o, err
	}
	if err := o.device.Validate(); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := arith.CheckEvalSeed(o.seed, o.evalSeed); err != nil {
		return o, err
	}
	switch {
	case o.n < 1:
		return o, fmt.Errorf("-n %d: want ≥ 1", o.n)
	case o.rlSteps < 0:
		return o, fmt.Errorf("-rl-steps %d: want ≥ 0", o.rlSteps)
	case o.prompts < 1:
		return o, fmt.Errorf("-prompts %d: want ≥ 1", o.prompts)
	case o.evalProblems < 1:
		return o, fmt.Errorf("-eval %d: want ≥ 1", o.evalProblems)
	case o.sftSteps < 0:
		return o, fmt.Errorf("-sft-steps %d: want ≥ 0", o.sftSteps)
	case o.sftBatch < 1:
		return o, fmt.Errorf("-sft-batch %d: want ≥ 1", o.sftBatch)
	case o.sftSamples < o.sftBatch:
		return o, fmt.Errorf("-sft-samples %d: want at least -sft-batch %d", o.sftSamples, o.sftBatch)
	case !(o.sftLR > 0) || math.IsInf(o.sftLR, 0):
		return o, fmt.Errorf("-sft-lr %v: want finite and > 0", o.sftLR)
	case o.sftSchedule != arith.ScheduleCosine && o.sftSchedule != arith.ScheduleWSD:
		return o, fmt.Errorf("-sft-schedule %q: want %s or %s", o.sftSchedule, arith.ScheduleCosine, arith.ScheduleWSD)
	case !(o.sftWarmup > 0 && o.sftWarmup < 1):
		return o, fmt.Errorf("-sft-warmup %g: want within (0, 1)", o.sftWarmup)
	case !(o.sftDecay > 0 && o.sftDecay <= 1-o.sftWarmup):
		return o, fmt.Errorf("-sft-decay %g: want within (0, 1 − -sft-warmup]", o.sftDecay)
	case !(o.rlLR > 0) || math.IsInf(o.rlLR, 0):
		return o, fmt.Errorf("-rl-lr %v: want finite and > 0", o.rlLR)
	case !(o.temperature >= 0) || math.IsInf(o.temperature, 0):
		return o, fmt.Errorf("-temperature %v: want finite and ≥ 0", o.temperature)
	case !(o.noToolFrac >= 0 && o.noToolFrac <= 1):
		return o, fmt.Errorf("-no-tool-frac %g: want within [0, 1]", o.noToolFrac)
	case !(o.sftToolFirst >= 0 && o.sftToolFirst < 1):
		return o, fmt.Errorf("-sft-tool-first %g: want within [0, 1)", o.sftToolFirst)
	case o.sftPairs && o.noToolFrac != 0.5:
		return o, fmt.Errorf("-no-tool-frac %g needs -sft-pairs=false: -sft-pairs (the default) trains half of every batch without the tool", o.noToolFrac)
	case o.sftPairs && o.sftBatch%2 != 0:
		return o, fmt.Errorf("-sft-pairs trains half of each batch with the tool: -sft-batch %d must be even", o.sftBatch)
	case o.sftToolFirst > 0 && o.noToolFrac == 1:
		return o, errors.New("-sft-tool-first needs trajectories that call the tool: -no-tool-frac 1 makes none")
	case o.maxResponse < 16:
		return o, fmt.Errorf("-max-response %d: want ≥ 16", o.maxResponse)
	case o.loraRank < 0:
		return o, fmt.Errorf("-lora-rank %d: want ≥ 0 (0: full weights)", o.loraRank)
	case !(o.loraAlpha >= 0) || math.IsInf(o.loraAlpha, 0):
		return o, fmt.Errorf("-lora-alpha %v: want finite and ≥ 0 (0: the rank)", o.loraAlpha)
	case o.fleet < 0:
		return o, fmt.Errorf("-fleet %d: want ≥ 0", o.fleet)
	case o.fleetStaleness < 0:
		return o, fmt.Errorf("-fleet-staleness %d: want ≥ 0", o.fleetStaleness)
	case o.fleet > 0 && o.fleetServers != "":
		return o, errors.New("-fleet starts servers and -fleet-servers names running ones: give one of them")
	case o.fleetServers != "" && o.fleetDir == "":
		return o, errors.New("-fleet-servers needs -fleet-dir, a folder the servers read the published weights from")
	}
	if err := checkFleetVersion(o); err != nil {
		return o, err
	}
	if o.init != "" {
		if err := setup.CheckDir(o.init, "config.json"); err != nil {
			return o, fmt.Errorf("-init: %w", err)
		}
	}
	if o.fleetServers != "" {
		if err := setup.CheckServerURLs("-fleet-servers", o.fleetServers); err != nil {
			return o, err
		}
	}
	if o.remote != "" {
		if err := setup.CheckServerURLs("-remote", o.remote); err != nil {
			return o, err
		}
	}
	if o.tokenizerFile != "" {
		if err := setup.CheckFile(o.tokenizerFile); err != nil {
			return o, fmt.Errorf("-tokenizer: %w", err)
		}
	}
	switch o.toolName {
	case "auto", "code_interpreter", "calculator":
	default:
		return o, fmt.Errorf("-tool %q: want auto, code_interpreter or calculator", o.toolName)
	}
	switch fleet.Kind(o.fleetKind) {
	case fleet.SGLang, fleet.VLLM, fleet.VLLMModelConfig:
	default:
		return o, fmt.Errorf("-fleet-kind %q: want sglang, vllm or vllm-model-config", o.fleetKind)
	}
	return o, nil
}

// run is the whole program: the flags, then runOptions.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	return runOptions(ctx, o, stdout, stderr)
}

// runOptions runs the program with parsed flags.
func runOptions(ctx context.Context, o options, stdout, stderr io.Writer) error {
	if o.serve != "" {
		return serveMode(ctx, o.serve, fleet.Kind(o.fleetKind), o.device, stdout, stderr)
	}
	start := time.Now()
	tok, err := newTokenizer()
	if err != nil {
		return err
	}
	tl, closeTool, err := arith.OpenTool(o.toolName, stderr)
	if err != nil {
		return err
	}
	defer closeTool()
	tl, cache, err := arith.CacheTool(tl, o.toolCache)
	if err != nil {
		return err
	}
	spec := specFor(tl)

	if o.remote != "" {
		return runRemote(ctx, o, tl, spec, stdout, stderr)
	}

	dir, rd, err := runFolder(o.out)
	if err != nil {
		return err
	}
	defer rd.Release()

	var fl *fleet.Fleet // the inference fleet, if any
	if o.fleetServers != "" {
		// Running servers are checked before any training or evaluation;
		// they run where they run (the device flags are this process's).
		var stop func()
		if fl, stop, err = openFleet(ctx, o, o.device, "", dir, stderr); err != nil {
			return err
		}
		defer stop()
	}

	mc, err := modelConfigFor(o, tok)
	if err != nil {
		return err
	}
	dev, err := setup.OpenDevice(ctx, o.device, mc, stderr)
	if err != nil {
		return err
	}
	defer dev.Close()
	job, err := setup.JoinJob(ctx, dev, stderr) // a rank of torchrun's, srun's or mpirun's job, or alone
	if err != nil {
		return err
	}
	defer job.Close()
	job.ZeRO, job.ZeROBF16Weights = o.zero, o.zeroBF16
	if o.fleet > 0 && job.Env.Distributed() {
		return errors.New("-fleet starts servers from one process: in a job of several ranks give running servers (-fleet-servers)")
	}
	stdout, stderr = job.Output(stdout, stderr) // rank 0 prints
	if dir, err = job.Dir(dir); err != nil {    // rank 0 writes the run folder
		return err
	}
	model, err := openModel(o, tok, dev.Backend())
	if err != nil {
		return err
	}
	defer model.Close()
	cfg := model.Config()
	fmt.Fprintf(stderr, "model: qwen3, %d layers, hidden %d, %d parameters; tool: %s; run folder: %s\n",
		cfg.NumHiddenLayers, cfg.HiddenSize, cfg.NumParams(), tl.Name(), dir)

	if o.init == "" {
		if err := sftStage(ctx, o, model, tok, spec, dir, job.DataParallel(), stderr); err != nil {
			return err
		}
	}

	engine, err := newEngine(model, tok, tl, o)
	if err != nil {
		return err
	}
	rf, err := arith.NewReward()
	if err != nil {
		return err
	}
	heldOut := generateProblems(o.evalSeed, o.evalProblems, "eval")
	params := lm.SampleParams{Temperature: o.temperature, TopP: 1, TopK: -1, MaxNewTokens: o.maxResponse}

	if o.fleet > 0 {
		// The servers start from the policy RL starts from, and are
		// checked before the evaluation.
		startDir := o.init
		if startDir == "" {
			startDir = filepath.Join(dir, "sft-model")
		}
		var stop func()
		if fl, stop, err = openFleet(ctx, o, dev.Config(), startDir, dir, stderr); err != nil {
			return err
		}
		defer stop()
	}
	fmt.Fprintf(stderr, "evaluating the SFT policy on %d held-out problems × %d samples\n", len(heldOut), o.n)
	before, err := evaluate(ctx, engine, rf, heldOut, spec, params, o.n)
	if err != nil {
		return fmt.Errorf("evaluating the SFT policy: %w", err)
	}
	generations := filepath.Join(dir, "validation")
	if err := arith.WriteGenerations(generations, 0, before.Generations); err != nil {
		return err
	}

	// GRPO-TCR with the tool in the loop.
	rlProblems := generateProblems(o.seed+1, o.prompts*max(o.rlSteps, 1), "rl")
	prompts := arith.Prompts(rlProblems, spec.ToolSpec)
	heldOutFile, trainFile, err := writeProblemSets(dir, heldOut, rlProblems)
	if err != nil {
		return err
	}
	log, err := metrics.Open(filepath.Join(dir, "metrics.jsonl"), metrics.Options{})
	if err != nil {
		return err
	}
	defer log.Close()
	parts := agentrl.TrainerParts{Policy: model, Engine: engine, Reward: rf, Prompts: prompts, Metrics: log, DataParallel: job.DataParallel()}
	tr, err := newRLTrainer(o, parts, fl, tok, tl, dir)
	if err != nil {
		return err
	}
	defer tr.Close()
	fmt.Fprintf(stderr, "rl: %s\n", setup.DescribeTraining(model))
	if err := log.Log(0, before.Metrics); err != nil {
		return err
	}
	after := before
	if o.rlSteps > 0 {
		after, err = runRL(ctx, o, tr, engine, rf, heldOut, spec, params, generations, stderr)
		if err != nil {
			return err
		}
	}

	if err := writeOutputs(ctx, o, dir, model, tok, tr, tl.Name(), []string{heldOutFile, trainFile}, before, after, time.Since(start), stdout); err != nil {
		return err
	}
	if cache != nil {
		fmt.Fprintln(stderr, arith.CacheSummary(cache))
	}
	return nil
}

// runFolder is the run folder, out or runs/arith-TIME, made and locked
// for this run (lockRunDir). Release it at the end.
func runFolder(out string) (string, *setup.RunDir, error) {
	dir := out
	if dir == "" {
		dir = filepath.Join("runs", "arith-"+time.Now().UTC().Format("20060102-150405"))
	}
	rd, err := lockRunDir(dir)
	return dir, rd, err
}

// sftStage trains the model on generated trajectories with the tool's
// real output and saves it as dir/sft-model.
func sftStage(ctx context.Context, o options, model *policy.Model, tok *tokenizer.Bytes, spec toolSpec, dir string, dp agentrl.DataParallel, stderr io.Writer) error {
	train := generateProblems(o.seed, o.sftSamples, "sft")
	if o.sftBalance {
		train = arith.GenerateBalancedProblems(o.seed, o.sftSamples, "sft")
	}
	var toolUse []bool
	if o.sftPairs {
		train, toolUse = arith.PairSFT(train)
	} else {
		toolUse = arith.SFTToolUse(len(train), o.noToolFrac, o.seed)
	}
	sft, err := arith.BuildSFT(ctx, train, toolUse, tok, spec.ToolSpec)
	if err != nil {
		return err
	}
	if !o.sftTrainGuesses {
		if err := arith.UntrainGuesses(sft, toolUse, tok); err != nil {
			return err
		}
	}
	if err := runSFT(ctx, o, model, sft, toolUse, dir, dp, stderr); err != nil {
		return err
	}
	return saveModel(model, filepath.Join(dir, "sft-model"), tok)
}

// writeProblemSets writes the held-out and RL problems as verl prompt
// sets, for examples/eval and examples/grpotcr (with model/ or
// sft-model/ as their -model), and returns their paths.
func writeProblemSets(dir string, heldOut, rlProblems []problem) (heldOutFile, trainFile string, err error) {
	heldOutFile, trainFile = filepath.Join(dir, "heldout.jsonl"), filepath.Join(dir, "train.jsonl")
	if err := dataset.WriteJSONLFile(heldOutFile, arith.VerlExamples(heldOut, "test")); err != nil {
		return "", "", err
	}
	if err := dataset.WriteJSONLFile(trainFile, arith.VerlExamples(rlProblems, "train")); err != nil {
		return "", "", err
	}
	return heldOutFile, trainFile, nil
}

// newRLTrainer builds the GRPO-TCR trainer of parts: with LoRA, the
// adapters' base is the checkpoint RL starts from; with a fleet, the
// rollouts are sampled on its servers, which get the weights after every
// step, up to -fleet-staleness steps ahead.
func newRLTrainer(o options, parts agentrl.TrainerParts, fl *fleet.Fleet, tok *tokenizer.Bytes, tl tool.Tool, dir string) (*agentrl.Trainer, error) {
	tcfg := rlConfig(o)
	if tcfg.LoRA != nil {
		tcfg.LoRA.BaseModel = o.init
		if o.init == "" {
			tcfg.LoRA.BaseModel = filepath.Join(dir, "sft-model")
		}
	}
	if fl != nil {
		var err error
		if parts.Engine, err = newEngine(fl, tok, tl, o); err != nil {
			return nil, err
		}
		parts.Sync = fl
		tcfg.MaxStaleness, tcfg.SyncEvery = o.fleetStaleness, 1
	}
	return agentrl.NewTrainer(tcfg, parts)
}

// writeOutputs writes the plot, the HF model and the trainer checkpoint
// into dir, then prints the table, the paths (problemSets: the held-out
// and RL problem files) and the JSON line.
func writeOutputs(ctx context.Context, o options, dir string, model *policy.Model, tok *tokenizer.Bytes, tr *agentrl.Trainer, toolName string, problemSets []string, before, after arith.Eval, took time.Duration, stdout io.Writer) error {
	plotPath := filepath.Join(dir, "curves.png")
	panels := append(plot.DefaultPanels(), plot.Panel{Title: "held-out avg@k / pass@k", Keys: []string{"val-core/arith/acc/*", "val-aux/arith/acc/pass@*"}})
	if err := plot.LogFile(filepath.Join(dir, "metrics.jsonl"), plotPath, plot.Config{Panels: panels}); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	modelDir := filepath.Join(dir, "model")
	if err := saveModel(model, modelDir, tok); err != nil {
		return err
	}
	ckpt, err := tr.SaveCheckpoint(ctx, checkpoint.Root{Dir: filepath.Join(dir, "checkpoints")}, 1)
	if err != nil {
		return fmt.Errorf("trainer checkpoint: %w", err)
	}

	printTable(stdout, o.n, []namedEval{{Name: "SFT", Eval: before}, {Name: "SFT+GRPO-TCR", Eval: after}})
	fmt.Fprintf(stdout, "tool: %s\nplot: %s\nmetrics: %s\nmodel (HF format, with tokenizer.json): %s\nheld-out and RL problems (verl JSONL): %s, %s\ntrainer checkpoint: %s\n",
		toolName, plotPath, filepath.Join(dir, "metrics.jsonl"), modelDir, problemSets[0], problemSets[1], ckpt)
	return writeJSONLine(stdout, o.n, []namedEval{{Name: "sft", Eval: before}, {Name: "rl", Eval: after}}, took)
}

// modelConfigFor is the configuration of the model openModel opens: the
// flags' size, or that of the saved model -init names.
func modelConfigFor(o options, tok *tokenizer.Bytes) (policy.Config, error) {
	if o.init == "" {
		return modelConfig(o, tok)
	}
	cfg, err := policy.ReadConfig(o.init)
	if err != nil {
		return policy.Config{}, fmt.Errorf("-init: %w", err)
	}
	return cfg, nil
}

// openModel is a fresh model of the flags' size, or the saved one that
// -init names, on be.
func openModel(o options, tok *tokenizer.Bytes, be backend.Backend) (*policy.Model, error) {
	opts := []policy.ModelOption{policy.WithDecoder(tok.Decode), policy.WithSamplerSeed(o.seed), policy.WithBackend(be)}
	if o.init != "" {
		m, err := policy.Load(o.init, opts...)
		if err != nil {
			return nil, fmt.Errorf("-init: %w", err)
		}
		if v := m.Config().VocabSize; v != tok.VocabSize() {
			m.Close()
			return nil, fmt.Errorf("-init %s: vocabulary of %d tokens, this program's tokenizer has %d", o.init, v, tok.VocabSize())
		}
		return m, nil
	}
	cfg, err := modelConfig(o, tok)
	if err != nil {
		return nil, err
	}
	m, err := policy.New(cfg, o.seed, opts...)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return m, nil
}

// saveModel writes the model as an HF folder with the byte tokenizer's
// description beside it.
func saveModel(m *policy.Model, dir string, tok *tokenizer.Bytes) error {
	if err := m.Save(dir, lm.SaveOptions{}); err != nil {
		return fmt.Errorf("saving the model: %w", err)
	}
	return arith.WriteTokenizerInfo(dir, tok)
}

// modelConfig is a Qwen3-style configuration over the byte tokenizer.
func modelConfig(o options, tok *tokenizer.Bytes) (policy.Config, error) {
	eos, _ := tok.TokenID(arith.ImEnd)
	raw, err := json.Marshal(map[string]any{
		"model_type": "qwen3", "vocab_size": tok.VocabSize(), "hidden_size": o.hidden,
		"intermediate_size": o.ffn, "num_hidden_layers": o.layers, "num_attention_heads": o.heads,
		"num_key_value_heads": o.kvHeads, "head_dim": o.headDim, "max_position_embeddings": 512,
		"rope_theta": 10000, "tie_word_embeddings": true, "eos_token_id": eos, "torch_dtype": "float32",
	})
	if err != nil {
		return policy.Config{}, err
	}
	cfg, err := policy.ParseConfig(raw)
	if err != nil {
		return policy.Config{}, fmt.Errorf("model config: %w", err)
	}
	return cfg, nil
}

// runSFT fine-tunes model on data, of which those tool marks call the
// tool (arith.RunSFT with the flags' settings).
func runSFT(ctx context.Context, o options, model *policy.Model, data []agentrl.SFTSample, tool []bool, dir string, dp agentrl.DataParallel, stderr io.Writer) error {
	if o.sftSteps == 0 {
		return nil
	}
	curriculum, lengths := "", ""
	if o.sftToolFirst > 0 {
		curriculum = fmt.Sprintf(", the first %.0f%% on tool calls only", 100*o.sftToolFirst)
	}
	if o.sftBalance {
		lengths = ", answers of 4 to 7 digits in equal shares"
	}
	if o.sftPairs {
		lengths += ", each batch half with the tool and half without"
	}
	if !o.sftTrainGuesses {
		lengths += ", guessed digits untrained"
	}
	fmt.Fprintf(stderr, "sft: %d trajectories (%.0f%% answer without the tool%s), %d updates of %d%s, lr %g %s\n",
		len(data), 100*o.noToolFrac, lengths, o.sftSteps, o.sftBatch, curriculum, o.sftLR, o.sftSchedule)
	return arith.RunSFT(ctx, model, data, arith.SFTOptions{
		Steps: o.sftSteps, Batch: o.sftBatch, LR: o.sftLR, Seed: o.seed,
		Schedule: o.sftSchedule, WarmupFrac: o.sftWarmup, DecayFrac: o.sftDecay,
		ToolFirst: o.sftToolFirst, Tool: tool, Pairs: o.sftPairs,
	}, dir, dp, stderr)
}

// rlConfig is the task's GRPO-TCR (arith.RLConfig) with the flags'
// settings.
func rlConfig(o options) agentrl.TrainerConfig {
	return arith.RLConfig(arith.RLOptions{
		Prompts: o.prompts, N: o.n, MiniBatch: o.miniBatch, Temperature: o.temperature, LoRARank: o.loraRank, LoRAAlpha: o.loraAlpha,
		MaxResponse: o.maxResponse, LR: o.rlLR, Seed: o.seed,
	})
}

func runRL(ctx context.Context, o options, tr *agentrl.Trainer, engine *rollout.Engine,
	rf reward.Func, heldOut []problem, spec toolSpec, params lm.SampleParams, generations string, stderr io.Writer) (arith.Eval, error) {
	var after arith.Eval
	err := tr.Run(ctx, agentrl.RunConfig{
		Steps:    o.rlSteps,
		Recorder: progress.New(progress.Config{Out: stderr, Description: "grpo-tcr", Interval: 10 * time.Second}),
		// The held-out evaluation after the last step joins its row; its
		// responses go to generations/<step>.jsonl.
		Validate: func(ctx context.Context, step int) (map[string]float64, error) {
			fmt.Fprintf(stderr, "evaluating the RL policy on %d held-out problems × %d samples\n", len(heldOut), o.n)
			var err error
			if after, err = evaluate(ctx, engine, rf, heldOut, spec, params, o.n); err != nil {
				return nil, fmt.Errorf("evaluating the RL policy: %w", err)
			}
			return after.Metrics, arith.WriteGenerations(generations, step, after.Generations)
		},
	})
	return after, err
}

func newEngine(s lm.Sampler, tok rollout.Tokenizer, tl tool.Tool, o options) (*rollout.Engine, error) {
	return arith.NewEngine(s, tok, tl, o.maxResponse)
}

// runRemote evaluates a served model on the held-out problems.
func runRemote(ctx context.Context, o options, tl tool.Tool, spec toolSpec, stdout, stderr io.Writer) error {
	start := time.Now()
	var tk rollout.Tokenizer
	if o.tokenizerFile != "" {
		bpe, err := tokenizer.FromFile(o.tokenizerFile)
		if err != nil {
			return err
		}
		tk = bpe
	} else {
		b, err := newTokenizer()
		if err != nil {
			return err
		}
		tk = b
	}
	key := ""
	if o.remoteKey != "" {
		key = os.Getenv(o.remoteKey)
	}
	s, err := openai.New(openai.Config{BaseURLs: strings.Split(o.remote, ","), Model: o.remoteModel, APIKey: key})
	if err != nil {
		return err
	}
	engine, err := rollout.NewEngine(rollout.Config{
		Sampler: s, Tokenizer: tk, Tools: []tool.Tool{tl},
		MaxTurns: 4, MaxResponseTokens: o.maxResponse, MaxToolCalls: 3, ToolTimeout: 10 * time.Second,
	})
	if err != nil {
		return err
	}
	rf, err := arith.NewReward()
	if err != nil {
		return err
	}
	spec.System = true
	heldOut := generateProblems(o.evalSeed, o.evalProblems, "eval")
	params := lm.SampleParams{Temperature: o.temperature, TopP: 1, TopK: -1, MaxNewTokens: o.maxResponse, StopTokenIDs: nil}
	fmt.Fprintf(stderr, "evaluating the served model at %s on %d held-out problems × %d samples\n", o.remote, len(heldOut), o.n)
	res, err := evaluate(ctx, engine, rf, heldOut, spec, params, o.n)
	if err != nil {
		return err
	}
	printTable(stdout, o.n, []namedEval{{Name: "remote", Eval: res}})
	return writeJSONLine(stdout, o.n, []namedEval{{Name: "remote", Eval: res}}, time.Since(start))
}

// writeJSONLine prints the summary line (arith.WriteJSONLine).
func writeJSONLine(w io.Writer, k int, evals []namedEval, d time.Duration) error {
	return arith.WriteJSONLine(w, k, evals, d)
}
