package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/eval"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/metrics/plot"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/progress"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// Files under -out.
const (
	metricsFile    = "metrics.jsonl"
	plotFile       = "metrics.png"
	checkpointsDir = "checkpoints"
	finalDir       = "final"
)

// train wires the parts and runs the training loop.
func train(ctx context.Context, o options, stdout, stderr io.Writer) error {
	// A run that would write over another's checkpoints, or into the
	// folder of a run going on, is refused before anything is loaded.
	rd, err := setup.LockRunDir(o.out)
	if err != nil {
		return err
	}
	defer rd.Release()
	root := checkpoint.Root{Dir: filepath.Join(o.out, checkpointsDir)}
	if steps, err := root.Steps(); !o.resume && err == nil && len(steps) > 0 {
		return fmt.Errorf("%s already holds checkpoints (step %d): pass -resume to continue, or choose another -out", root.Dir, steps[len(steps)-1])
	}
	// Running servers are checked before anything is loaded.
	var fl *fleet.Fleet
	if o.fleetServers != "" {
		if fl, err = openFleet(ctx, o, stderr); err != nil {
			return err
		}
	}
	logPath := filepath.Join(o.out, metricsFile)
	mlog, err := openLog(o, rd, root, logPath, stdout)
	if err != nil {
		return err
	}
	defer mlog.Close()
	tok, err := tokenizer.Load(o.model)
	if err != nil {
		return fmt.Errorf("-model: %w", err) // the error names the file and the tokenizer
	}
	model, dev, err := setup.LoadOnDevice(ctx, o.device, o.model, stderr, policy.WithDecoder(tok.Decode), policy.WithSamplerSeed(o.seed))
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	defer dev.Close()
	defer model.Close()
	job, err := setup.JoinJob(ctx, dev, stderr) // a rank of torchrun's, srun's or mpirun's job, or alone
	if err != nil {
		return err
	}
	defer job.Close()
	job.ZeRO = o.zero
	stdout, stderr = job.Output(stdout, stderr) // rank 0 prints
	if err := setup.CheckVocab(tok, model); err != nil {
		return fmt.Errorf("model %s: %w", o.model, err)
	}
	var sampler lm.Sampler = fl
	if fl == nil {
		if sampler, err = setup.NewSampler(o.sampler, model, o.servedModel); err != nil {
			return err
		}
	}
	if o.sampler != "local" {
		fmt.Fprintln(stderr, "grpotcr: note: the -sampler servers keep their own weights; the trainer does not sync its updates to them, so rollouts become off-policy after the first step")
	}
	codeTool, harness, closeTools, err := setup.CodeTools(o.sandbox, o.sandboxWorkers, o.toolTimeout)
	if err != nil {
		return err
	}
	defer closeTools()
	rf, err := setup.NewReward(harness, o.toolBonus)
	if err != nil {
		return err
	}
	tools := []tool.Tool{codeTool}

	trainPrompts, dropped, err := setup.LoadPrompts(ctx, o.train, o.promptKey, tok, tools, o.thinking, o.maxPrompt, 0)
	if err != nil {
		return fmt.Errorf("-train: %w", err)
	}
	fmt.Fprintf(stdout, "train: %d prompts%s\n", len(trainPrompts), droppedNote(dropped, o.maxPrompt))
	if len(trainPrompts) < o.batch {
		return fmt.Errorf("-train: %d prompts, fewer than -batch %d", len(trainPrompts), o.batch)
	}
	var valPrompts []agentrl.Prompt
	if o.val != "" {
		valPrompts, dropped, err = setup.LoadPrompts(ctx, o.val, o.promptKey, tok, tools, o.thinking, o.maxPrompt, 0)
		if err != nil {
			return fmt.Errorf("-val: %w", err)
		}
		fmt.Fprintf(stdout, "val: %d prompts%s\n", len(valPrompts), droppedNote(dropped, o.maxPrompt))
	}

	format := rollout.ChatML{}
	if !o.thinking {
		format.GenerationPrompt = setup.NoThinkPrompt
	}
	ecfg := rollout.Config{
		Sampler: sampler, Tokenizer: tok, Tools: tools,
		Parser: rollout.Hermes{}, Format: format,
		MaxTurns: o.maxTurns, MaxResponseTokens: o.maxResponse,
		ToolTimeout: o.toolTimeout + o.toolTimeout/2,
	}
	if o.sampler == "local" {
		ecfg.MaxTotalTokens = model.Config().MaxPositionEmbeddings
	}
	engine, err := rollout.NewEngine(ecfg)
	if err != nil {
		return err
	}

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
	if o.loraRank > 0 {
		cfg.LoRA = &policy.LoRAConfig{Rank: o.loraRank, Alpha: o.loraAlpha, TargetModules: []string{policy.LoRAAllLinear}, BaseModel: o.model}
	}
	if fl != nil {
		// On-policy: the weights (or adapters) go to the servers before
		// the first step and after every step; the rollouts run at most
		// -fleet-staleness steps ahead.
		cfg.MaxStaleness, cfg.SyncEvery = o.fleetStaleness, 1
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	parts := agentrl.TrainerParts{Policy: model, Engine: engine, Reward: rf, Prompts: trainPrompts, Metrics: mlog, DataParallel: job.DataParallel()}
	if fl != nil {
		parts.Sync = fl
	}
	tr, err := agentrl.NewTrainer(cfg, parts)
	if err != nil {
		return err
	}
	defer tr.Close()
	fmt.Fprintf(stderr, "grpotcr: %s\n", setup.DescribeTraining(model))
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
		vc := agentrl.ValidationConfig{Prompts: valPrompts, N: o.valN, Seed: o.seed,
			Sampling: lm.SampleParams{Temperature: o.valTemperature, TopP: o.valTopP, TopK: -1}}
		rc.Validate = func(ctx context.Context, step int) (map[string]float64, error) {
			res, err := tr.Validate(ctx, vc)
			if err != nil {
				return nil, err
			}
			printValidation(stdout, step, res)
			return res.Map(), nil
		}
	}
	if steps, err := root.Steps(); o.resume && (err != nil || len(steps) == 0) {
		fmt.Fprintf(stdout, "no checkpoint under %s: starting at step 0\n", root.Dir)
	}
	if err := resetFleet(ctx, o, fl, model, rd.Leader()); err != nil {
		return err
	}
	if err := tr.Run(ctx, rc); err != nil {
		return err
	}
	if start >= o.steps {
		fmt.Fprintf(stdout, "already at step %d of %d\n", start, o.steps)
	}
	if err := mlog.Close(); err != nil {
		return err
	}
	if !job.Leader() {
		return nil // rank 0 plots and exports
	}
	pngPath := filepath.Join(o.out, plotFile)
	switch err := plot.LogFile(logPath, pngPath, plot.Config{}); {
	case errors.Is(err, plot.ErrNoData):
		fmt.Fprintln(stderr, "grpotcr: no metrics to plot yet")
	case err != nil:
		return fmt.Errorf("plot: %w", err)
	default:
		fmt.Fprintf(stdout, "metrics: %s, plot: %s\n", logPath, pngPath)
	}
	final := filepath.Join(o.out, finalDir)
	if err := exportHF(model, o.model, final); err != nil {
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

// droppedNote says how many prompts -max-prompt left out, if it is set.
func droppedNote(dropped, maxPrompt int) string {
	if maxPrompt == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d over %d tokens left out)", dropped, maxPrompt)
}
