package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/eval"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/hftrain"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/metrics/plot"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/progress"
	"github.com/agentrl/agentrl/tool"
)

// Files under -out.
const (
	metricsFile    = "metrics.jsonl"
	plotFile       = "metrics.png"
	checkpointsDir = "checkpoints"
	finalDir       = "final"
)

// train loads the model, the tools, the reward and the prompts, trains,
// then plots the metrics and exports the policy.
func train(ctx context.Context, o options, stdout, stderr io.Writer) error {
	// A run that would write over another's checkpoints, or into the
	// folder of a run going on, is refused before anything is loaded.
	rd, err := setup.LockRunDir(o.out)
	if err != nil {
		return err
	}
	defer rd.Release()
	root := checkpoint.Root{Dir: filepath.Join(o.out, checkpointsDir)}
	if err := refuseOverwrite(root, o.resume); err != nil {
		return err
	}
	fl, err := openFleetIfAny(ctx, o, stderr) // running servers are checked before anything is loaded
	if err != nil {
		return err
	}
	mlog, err := openLog(o, rd, root, filepath.Join(o.out, metricsFile), stdout)
	if err != nil {
		return err
	}
	defer mlog.Close()
	m, err := hftrain.Load(ctx, o.model, hftrain.Options{Device: o.device, Seed: o.seed, DisableThinking: !o.thinking, Log: stderr})
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	defer m.Close()
	job, err := setup.JoinJob(ctx, m.Device, stderr) // a rank of torchrun's, srun's or mpirun's job, or alone
	if err != nil {
		return err
	}
	defer job.Close()
	job.ZeRO, job.ZeROBF16Weights = o.zero, o.zeroBF16
	stdout, stderr = job.Output(stdout, stderr) // rank 0 prints
	tools, err := openTools(ctx, o, stderr)
	if err != nil {
		return err
	}
	defer tools.Close()
	rw, err := newReward(ctx, o, tools.harness)
	if err != nil {
		return err
	}
	trainPrompts, valPrompts, err := loadPrompts(ctx, o, m, tools.list, rw.needsTruth, stdout)
	if err != nil {
		return err
	}
	parts := rw.parts
	parts.Prompts, parts.Metrics, parts.DataParallel, parts.Notes = trainPrompts, mlog, job.DataParallel(), stderr
	tr, err := newTrainer(ctx, o, m, fl, tools.list, parts, stderr)
	if err != nil {
		return err
	}
	defer tr.Close()
	if err := resetFleet(ctx, o, fl, m.Policy, rd.Leader()); err != nil {
		return err
	}
	if err := runTraining(ctx, o, tr, root, valPrompts, stdout, stderr); err != nil {
		return err
	}
	if err := mlog.Close(); err != nil {
		return err
	}
	if !job.Leader() {
		return nil // rank 0 plots and exports
	}
	return plotAndExport(o, m, stdout, stderr)
}

// refuseOverwrite refuses, before anything is loaded, a run that would
// write over another's checkpoints.
func refuseOverwrite(root checkpoint.Root, resume bool) error {
	if steps, err := root.Steps(); !resume && err == nil && len(steps) > 0 {
		return fmt.Errorf("%s already holds checkpoints (step %d): pass -resume to continue, or choose another -out", root.Dir, steps[len(steps)-1])
	}
	return nil
}

// openFleetIfAny opens and checks the -fleet-servers (openFleet); nil
// without them.
func openFleetIfAny(ctx context.Context, o options, stderr io.Writer) (*fleet.Fleet, error) {
	if o.fleetServers == "" {
		return nil, nil
	}
	return openFleet(ctx, o, stderr)
}

// loadPrompts reads the -train and -val prompts, rendered with the
// model's chat template and the tools' schemas, leaving out those over
// -max-prompt tokens and, when the reward needs one, the rows without a
// ground truth; it says how many on stdout. The training prompts that the
// model's context cannot hold beside -max-response are left to the
// trainer, which leaves them out, says so and counts them in every step's
// metrics (data/prompts_left_out); the validation prompts are left out
// here, as they would be scored as wrong.
func loadPrompts(ctx context.Context, o options, m *hftrain.Model, tools []tool.Tool, needsTruth bool, stdout io.Writer) (train, val []agentrl.Prompt, err error) {
	if ctxLen := m.ContextLength(); o.maxResponse >= ctxLen {
		return nil, nil, fmt.Errorf("-max-response %d: the model's context is %d tokens (max_position_embeddings), prompt and response together: want less", o.maxResponse, ctxLen)
	}
	train, tooLong, err := setup.LoadPrompts(ctx, o.train, o.promptKey, m.Tokenizer, tools, o.thinking, o.maxPrompt, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("-train: %w", err)
	}
	train, noTruth := withGroundTruth(train, needsTruth)
	fmt.Fprintln(stdout, promptsLine("train", len(train), tooLong, o.maxPrompt, noTruth))
	if len(train) < o.batch {
		return nil, nil, fmt.Errorf("-train: %d prompts, fewer than -batch %d", len(train), o.batch)
	}
	if o.val == "" {
		return train, nil, nil
	}
	opts := agentrl.PromptOptions{MaxTokens: o.maxPrompt, ResponseTokens: o.maxResponse, PromptKey: o.promptKey, StringPrompt: true}
	val, tooLong, err = m.LoadPrompts(ctx, setup.SplitList(o.val), tools, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("-val: %w", err)
	}
	val, noTruth = withGroundTruth(val, needsTruth)
	fmt.Fprintln(stdout, promptsLine("val", len(val), tooLong, m.PromptLimit(opts), noTruth))
	return train, val, nil
}

// promptsLine says how many prompts a set has and how many were left
// out: over limit tokens (when limit > 0), without a ground truth.
func promptsLine(set string, n, tooLong, limit, noTruth int) string {
	var left []string
	if limit > 0 {
		left = append(left, fmt.Sprintf("%d over %d tokens left out", tooLong, limit))
	}
	if noTruth > 0 {
		left = append(left, fmt.Sprintf("%d without a ground truth left out", noTruth))
	}
	if len(left) == 0 {
		return fmt.Sprintf("%s: %d prompts", set, n)
	}
	return fmt.Sprintf("%s: %d prompts (%s)", set, n, strings.Join(left, ", "))
}

// withGroundTruth leaves out the prompts without a ground truth when
// needed is set, and returns how many it left out: the rule rewards score
// every response to them alike (as wrong), which teaches nothing.
func withGroundTruth(prompts []agentrl.Prompt, needed bool) ([]agentrl.Prompt, int) {
	if !needed {
		return prompts, 0
	}
	kept := slices.DeleteFunc(prompts, func(p agentrl.Prompt) bool { return p.GroundTruth == "" })
	return kept, len(prompts) - len(kept)
}

// newTrainer builds the GRPO-TCR trainer over the model: the rollouts on
// the -fleet-servers, the -sampler servers or the model itself, with the
// tools, at the flags' batch sizes, learning rate and sampling.
func newTrainer(ctx context.Context, o options, m *hftrain.Model, fl *fleet.Fleet, tools []tool.Tool, parts agentrl.TrainerParts, stderr io.Writer) (*agentrl.Trainer, error) {
	r := hftrain.Rollout{Tools: tools, MaxTurns: o.maxTurns, MaxResponseTokens: o.maxResponse, ToolTimeout: o.toolTimeout + o.toolTimeout/2}
	switch {
	case fl != nil:
		r.Sampler, parts.Sync = fl, fl
	case o.sampler != "local":
		s, err := setup.NewSampler(o.sampler, m.Policy, o.servedModel)
		if err != nil {
			return nil, err
		}
		r.Sampler = s
		fmt.Fprintln(stderr, "grpotcr: note: the -sampler servers keep their own weights; the trainer does not sync its updates to them, so rollouts become off-policy after the first step")
	}
	tr, err := m.NewTrainer(ctx, trainerConfig(o, fl != nil), r, parts)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "grpotcr: %s\n", setup.DescribeTraining(m.Policy))
	return tr, nil
}

// trainerConfig is agentrl.GRPOTCR with the flags' settings.
func trainerConfig(o options, onFleet bool) agentrl.TrainerConfig {
	cfg := agentrl.GRPOTCR()
	cfg.PromptsPerStep, cfg.SamplesPerPrompt = o.batch, o.n
	cfg.MiniBatchSize, cfg.MicroBatchSize = o.miniBatch, o.microBatch
	cfg.Sampling = lm.SampleParams{Temperature: o.temperature, TopP: o.topP, TopK: -1}
	cfg.Optimizer.LR = o.lr
	if o.overlongBuffer == 0 {
		cfg.Overlong = nil
	} else {
		cfg.Overlong.Buffer = o.overlongBuffer
	}
	cfg.Seed = o.seed
	if o.rolloutCorr != "" {
		// Checked by checkValues.
		cfg.Loss.RolloutCorrection, _ = loss.RolloutCorrectionPreset(o.rolloutCorr)
		if cfg.Loss.RolloutCorrection.BypassMode {
			// Bypass mode takes the sampler's log-probabilities as the
			// old policy's: nothing is recomputed.
			cfg.OldLogProbs = agentrl.OldLogProbsRollout
		}
	}
	if o.loraRank > 0 {
		cfg.LoRA = &policy.LoRAConfig{Rank: o.loraRank, Alpha: o.loraAlpha, TargetModules: []string{policy.LoRAAllLinear}}
	}
	if onFleet {
		// On-policy: the weights (or adapters) go to the servers before
		// the first step and after every step; the rollouts run at most
		// -fleet-staleness steps ahead.
		cfg.MaxStaleness, cfg.SyncEvery = o.fleetStaleness, 1
	}
	return cfg
}

// runTraining runs the steps with validation, checkpoints and progress.
func runTraining(ctx context.Context, o options, tr *agentrl.Trainer, root checkpoint.Root, valPrompts []agentrl.Prompt, stdout, stderr io.Writer) error {
	start := 0
	rc := agentrl.RunConfig{
		Steps: o.steps, ValEvery: o.valEvery, ValBeforeTrain: o.valBeforeTrain,
		Checkpoints: root, SaveEvery: o.saveEvery, Keep: o.keep, Resume: o.resume,
		Recorder: progress.New(progress.Config{Out: stderr, Description: "grpo-tcr"}),
		OnResume: func(step int) error {
			start = step
			fmt.Fprintf(stdout, "resumed from step %d\n", step)
			return nil
		},
		OnCheckpoint: func(step int, dir string) error {
			fmt.Fprintf(stdout, "step %d: checkpoint %s\n", step, dir)
			return nil
		},
	}
	if len(valPrompts) > 0 {
		rc.Validate = tr.Validator(agentrl.ValidationConfig{Prompts: valPrompts, N: o.valN, Seed: o.seed,
			Sampling: lm.SampleParams{Temperature: o.valTemperature, TopP: o.valTopP, TopK: -1},
			OnResult: func(step int, res eval.Result) { printValidation(stdout, step, res) }})
	}
	if steps, err := root.Steps(); o.resume && (err != nil || len(steps) == 0) {
		fmt.Fprintf(stdout, "no checkpoint under %s: starting at step 0\n", root.Dir)
	}
	if err := tr.Run(ctx, rc); err != nil {
		return err
	}
	if start >= o.steps {
		fmt.Fprintf(stdout, "already at step %d of %d\n", start, o.steps)
	}
	return nil
}

// plotAndExport draws the metrics log and writes the trained policy as a
// Hugging Face folder under -out.
func plotAndExport(o options, m *hftrain.Model, stdout, stderr io.Writer) error {
	logPath, pngPath := filepath.Join(o.out, metricsFile), filepath.Join(o.out, plotFile)
	switch err := plot.LogFile(logPath, pngPath, plot.Config{}); {
	case errors.Is(err, plot.ErrNoData):
		fmt.Fprintln(stderr, "grpotcr: no metrics to plot yet")
	case err != nil:
		return fmt.Errorf("plot: %w", err)
	default:
		fmt.Fprintf(stdout, "metrics: %s, plot: %s\n", logPath, pngPath)
	}
	final := filepath.Join(o.out, finalDir)
	if err := m.Save(final); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	fmt.Fprintf(stdout, "trained policy: %s\n", final)
	return nil
}

// printValidation writes one line per data source: the accuracy's mean@n
// and pass@n, and the tool calls per answer.
func printValidation(w io.Writer, step int, res eval.Result) {
	var sources []string
	for _, m := range res.Metrics {
		if !slices.Contains(sources, m.Source) {
			sources = append(sources, m.Source)
		}
	}
	for _, src := range sources {
		line := fmt.Sprintf("step %d: val %s:", step, src)
		for _, m := range res.Metrics {
			if m.Source != src {
				continue
			}
			switch {
			case m.Var == eval.VarAcc && (m.Name == fmt.Sprintf("mean@%d", m.K) || m.Name == fmt.Sprintf("pass@%d", m.K)):
				line += fmt.Sprintf(" acc/%s=%.4f", m.Name, m.Value)
			case m.Var == "tool_calls" && m.Name == fmt.Sprintf("mean@%d", m.K):
				line += fmt.Sprintf(" tool_calls/%s=%.2f", m.Name, m.Value)
			}
		}
		fmt.Fprintln(w, line)
	}
}
