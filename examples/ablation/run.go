package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/ablation"
	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/internal/atomicfile"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/progress"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// options are the command-line settings.
type options struct {
	init, out string
	seeds     []uint64
	variants  []string
	list      bool

	rlSteps, prompts, n, miniBatch int
	rlLR, temperature              float64
	maxResponse, tightResponse     int

	evalProblems int
	evalSeed     uint64

	parallel  int
	toolName  string
	toolCache int // results of identical tool calls kept; 0: none
	smooth    int

	device device.Config // where every run's model trains and is evaluated
}

// synopsis is the first line of -h.
const synopsis = "ablation -init SFT-MODEL [-seeds 1,2,3] [-variants NAME[,NAME...]|all] [-list] [flags]"

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var seeds, variants string
	fs := setup.NewFlagSet("ablation", synopsis, stderr)
	fs.StringVar(&o.init, "init", "", "the SFT model folder every run starts from (required): a run's sft-model written by examples/arith")
	fs.StringVar(&o.out, "out", "", "run folder (default ./runs/ablation-<timestamp>)")
	fs.StringVar(&seeds, "seeds", "1,2,3", "comma-separated seeds; each variant runs once with each")
	fs.StringVar(&variants, "variants", defaultVariants, `comma-separated variant names from the catalogue (-list), or "all"`)
	fs.BoolVar(&o.list, "list", false, "print the catalogue of variants and exit")
	fs.IntVar(&o.rlSteps, "rl-steps", arith.DefaultRLSteps, "GRPO-TCR steps per run")
	fs.IntVar(&o.prompts, "prompts", arith.DefaultPrompts, "prompts per RL step")
	fs.IntVar(&o.n, "n", arith.DefaultN, "samples per prompt, in RL and evaluation (the n of avg@n, pass@n)")
	fs.IntVar(&o.miniBatch, "mini-batch", arith.DefaultMiniBatch, "trajectories per RL update (verl's ppo_mini_batch_size × n); 0 means the whole step's batch, one update per step, where the PPO ratio stays 1 and no clip acts")
	fs.Float64Var(&o.rlLR, "rl-lr", arith.DefaultRLLR, "RL learning rate")
	fs.Float64Var(&o.temperature, "temperature", arith.DefaultTemperature, "sampling temperature of rollouts and evaluation")
	fs.IntVar(&o.maxResponse, "max-response", arith.DefaultMaxResponse, "response budget in tokens (tool results included)")
	fs.IntVar(&o.tightResponse, "tight-response", 64, "the tight response budget of the *-tight variants (a correct answer with one code-interpreter call takes ≈ 50 tokens, each further call ≈ 46)")
	fs.IntVar(&o.evalProblems, "eval", arith.DefaultEvalProblems, "held-out evaluation problems")
	fs.Uint64Var(&o.evalSeed, "eval-seed", arith.DefaultEvalSeed, "seed of the held-out problems (the main job's default -eval-seed)")
	fs.IntVar(&o.parallel, "parallel", 1, "runs at once (each run already uses every core)")
	fs.StringVar(&o.toolName, "tool", "auto", `tool: "code_interpreter" (python sandbox), "calculator", or "auto" (the interpreter when python3 exists)`)
	arith.ToolCacheFlag(fs, &o.toolCache)
	fs.IntVar(&o.smooth, "smooth", 10, "steps of the moving average of curves.png (1: none)")
	o.device.RegisterFlags(fs)
	if err := setup.Parse(fs, args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.list {
		return o, nil
	}
	var err error
	if o.seeds, err = parseSeeds(seeds); err != nil {
		return o, err
	}
	for _, s := range o.seeds {
		if s+1 == o.evalSeed {
			return o, fmt.Errorf("-seeds: seed %d draws its RL prompts from seed + 1 = -eval-seed %d: the held-out set would be trained on", s, o.evalSeed)
		}
	}
	if o.variants, err = parseNames(variants); err != nil {
		return o, err
	}
	if _, err := selectVariants(o.variants); err != nil {
		return o, err
	}
	switch {
	case o.init == "":
		return o, errors.New("-init is required: the SFT model folder every run starts from (go run ./examples/arith writes one as <run>/sft-model)")
	case o.n < 1:
		return o, fmt.Errorf("-n %d: want ≥ 1", o.n)
	case o.rlSteps < 1:
		return o, fmt.Errorf("-rl-steps %d: want ≥ 1", o.rlSteps)
	case o.prompts < 1:
		return o, fmt.Errorf("-prompts %d: want ≥ 1", o.prompts)
	case o.miniBatch < 0:
		return o, fmt.Errorf("-mini-batch %d: want ≥ 0", o.miniBatch)
	case o.evalProblems < 1:
		return o, fmt.Errorf("-eval %d: want ≥ 1", o.evalProblems)
	case o.maxResponse < 16:
		return o, fmt.Errorf("-max-response %d: want ≥ 16", o.maxResponse)
	case o.tightResponse < 16:
		return o, fmt.Errorf("-tight-response %d: want ≥ 16", o.tightResponse)
	case o.parallel < 1:
		return o, fmt.Errorf("-parallel %d: want ≥ 1", o.parallel)
	case o.smooth < 1:
		return o, fmt.Errorf("-smooth %d: want ≥ 1", o.smooth)
	case !(o.rlLR > 0) || math.IsInf(o.rlLR, 0):
		return o, fmt.Errorf("-rl-lr %v: want finite and > 0", o.rlLR)
	case !(o.temperature >= 0) || math.IsInf(o.temperature, 0):
		return o, fmt.Errorf("-temperature %v: want finite and ≥ 0", o.temperature)
	}
	if err := setup.CheckDir(o.init, "config.json"); err != nil {
		return o, fmt.Errorf("-init: %w", err)
	}
	switch o.toolName {
	case "auto", "code_interpreter", "calculator":
	default:
		return o, fmt.Errorf("-tool %q: want auto, code_interpreter or calculator", o.toolName)
	}
	if err := o.device.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// parseSeeds reads a comma-separated list of distinct seeds.
func parseSeeds(s string) ([]uint64, error) {
	var seeds []uint64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("-seeds %q: %q is not a seed (want non-negative integers, comma-separated)", s, f)
		}
		if slices.Contains(seeds, v) {
			return nil, fmt.Errorf("-seeds %q: seed %d named twice", s, v)
		}
		seeds = append(seeds, v)
	}
	return seeds, nil
}

// parseNames reads a comma-separated list of names.
func parseNames(s string) ([]string, error) {
	var names []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("-variants %q: empty name", s)
		}
		names = append(names, f)
	}
	return names, nil
}

// setting is what the evaluation of a policy depends on besides the
// policy: the response budget and the cap on tool calls.
type setting struct{ budget, maxToolCalls int }

func (s setting) String() string {
	return fmt.Sprintf("budget %d tokens, ≤ %d tool calls", s.budget, s.maxToolCalls)
}

// runner holds what the grid's runs share.
type runner struct {
	o       options
	dir     string
	tok     *tokenizer.Bytes
	tool    tool.Tool
	spec    arith.ToolSpec
	heldOut []arith.Problem
	tasks   map[string]task        // by variant name
	sft     map[setting]arith.Eval // the SFT policy's evaluation
	dev     *device.Device         // every model's device, shared by the runs
	stderr  io.Writer
	mu      sync.Mutex // serialises stderr
}

// curveKeys are the per-step metrics a run's curve keeps (verl's names,
// agentrl.StepMetrics.Map).
func curveKeys() []string {
	return []string{
		"critic/acc/mean", "critic/score/mean", "actor/entropy", "actor/pg_clipfrac", "actor/pg_clipfrac_lower",
		"tool_call_counts/mean", "response_length/mean", "response_length/clip_ratio",
	}
}

// runOptions runs the program with parsed flags.
func runOptions(ctx context.Context, o options, stdout, stderr io.Writer) error {
	if o.list {
		return printCatalogue(stdout)
	}
	start := time.Now()
	entries, err := selectVariants(o.variants)
	if err != nil {
		return err
	}
	tok, err := arith.NewTokenizer()
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
	if cache != nil {
		defer func() { fmt.Fprintln(stderr, arith.CacheSummary(cache)) }()
	}
	r := &runner{
		o: o, tok: tok, tool: tl, spec: arith.SpecFor(tl), stderr: stderr,
		heldOut: arith.GenerateProblems(o.evalSeed, o.evalProblems, "eval"),
		tasks:   map[string]task{}, sft: map[setting]arith.Eval{},
	}
	variants := make([]ablation.Variant, len(entries))
	for i, e := range entries {
		variants[i] = e.variant
		r.tasks[e.variant.Name] = e.task
		// Every configuration is checked before anything runs.
		if _, err := e.variant.Apply(r.baseConfig(e.task, o.seeds[0])); err != nil {
			return err
		}
	}

	if o.miniBatch == 0 || o.miniBatch == o.prompts*o.n {
		for _, e := range entries {
			if n := e.variant.Name; n == "clip-sym" || n == "no-clip" {
				fmt.Fprintf(stderr, "notice: one update per step (-mini-batch %d, the step's %d trajectories): the PPO ratio stays 1, so %s trains as grpo-tcr does; set -mini-batch below %d to compare clips\n",
					o.miniBatch, o.prompts*o.n, n, o.prompts*o.n)
			}
		}
	}
	r.dir = o.out
	if r.dir == "" {
		r.dir = filepath.Join("runs", "ablation-"+time.Now().UTC().Format("20060102-150405"))
	}
	// A grid going on in the folder, or one done there, stops this one
	// before any work: their runs' metrics logs are not appended to.
	rd, err := setup.LockRunDir(r.dir)
	if err != nil {
		return err
	}
	defer rd.Release()
	if err := rd.CheckNew(filepath.Join("*", "seed-*", "metrics.jsonl")); err != nil {
		return err
	}
	mc, err := policy.ReadConfig(o.init)
	if err != nil {
		return fmt.Errorf("-init: %w", err)
	}
	if r.dev, err = setup.OpenDevice(ctx, o.device, mc, stderr); err != nil {
		return err
	}
	defer r.dev.Close()
	if err := r.evaluateSFT(ctx, entries); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "ablation: %d variants × %d seeds, %d RL steps each, %d at a time; tool: %s; run folder: %s\n",
		len(variants), len(o.seeds), o.rlSteps, o.parallel, tl.Name(), r.dir)

	total := len(variants) * len(o.seeds)
	finished := 0
	grid := ablation.Grid{
		Variants: variants, Seeds: o.seeds, Parallel: o.parallel, Run: r.run,
		Done: func(res ablation.Result) {
			finished++
			r.logf("done %s seed %d (%d/%d): avg@%d %.4f, tool calls/answer %.2f, %.0f s\n", res.Variant, res.Seed,
				finished, total, o.n, res.Final[r.avgKey()], res.Final["tool_calls"], res.Seconds)
		},
	}
	results, err := grid.Execute(ctx)
	if err != nil {
		return err
	}
	return r.report(results, entries, time.Since(start), stdout)
}

func (r *runner) avgKey() string  { return fmt.Sprintf("avg@%d", r.o.n) }
func (r *runner) passKey() string { return fmt.Sprintf("pass@%d", r.o.n) }
func (r *runner) majKey() string  { return fmt.Sprintf("maj@%d", r.o.n) }

func (r *runner) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.stderr, format, args...)
}

// setting is the evaluation setting of a variant's task.
func (r *runner) setting(t task) setting {
	s := setting{budget: r.o.maxResponse, maxToolCalls: arith.MaxToolCalls}
	if t.tight {
		s.budget = r.o.tightResponse
	}
	if t.maxToolCalls > 0 {
		s.maxToolCalls = t.maxToolCalls
	}
	return s
}

// baseConfig is the main job's RL configuration for a task and seed.
func (r *runner) baseConfig(t task, seed uint64) agentrl.TrainerConfig {
	return arith.RLConfig(arith.RLOptions{
		Prompts: r.o.prompts, N: r.o.n, MiniBatch: r.o.miniBatch, Temperature: r.o.temperature,
		MaxResponse: r.setting(t).budget, LR: r.o.rlLR, Seed: seed,
	})
}

// engine builds the rollout engine of a task over sampler s.
func (r *runner) engine(s lm.Sampler, t task) (*rollout.Engine, error) {
	st := r.setting(t)
	cfg := arith.EngineConfig(s, r.tok, r.tool, st.budget)
	cfg.MaxToolCalls = st.maxToolCalls
	return rollout.NewEngine(cfg)
}

func (r *runner) params(t task) lm.SampleParams {
	return lm.SampleParams{Temperature: r.o.temperature, TopP: 1, TopK: -1, MaxNewTokens: r.setting(t).budget}
}

// evaluateSFT evaluates the -init policy once for each setting the
// variants use: the step-0 point of their runs.
func (r *runner) evaluateSFT(ctx context.Context, entries []entry) error {
	model, err := arith.LoadModel(r.o.init, r.tok, r.o.seeds[0], policy.WithBackend(r.dev.Backend()))
	if err != nil {
		return fmt.Errorf("-init: %w", err)
	}
	defer model.Close()
	rf, err := arith.NewReward()
	if err != nil {
		return err
	}
	for _, e := range entries {
		st := r.setting(e.task)
		if _, done := r.sft[st]; done {
			continue
		}
		engine, err := r.engine(model, e.task)
		if err != nil {
			return err
		}
		r.logf("evaluating the SFT policy on %d held-out problems × %d samples (%s)\n", len(r.heldOut), r.o.n, st)
		ev, err := arith.Evaluate(ctx, engine, rf, r.heldOut, r.spec, r.params(e.task), r.o.n)
		if err != nil {
			return fmt.Errorf("evaluating the SFT policy (%s): %w", st, err)
		}
		r.sft[st] = ev
	}
	return nil
}

// run trains one variant with one seed from the -init policy, as the
// main job's RL stage does, and evaluates it on the held-out problems.
func (r *runner) run(ctx context.Context, v ablation.Variant, seed uint64) (ablation.Result, error) {
	t := r.tasks[v.Name]
	cfg, err := v.Apply(r.baseConfig(t, seed))
	if err != nil {
		return ablation.Result{}, err
	}
	model, err := arith.LoadModel(r.o.init, r.tok, seed, policy.WithBackend(r.dev.Backend()))
	if err != nil {
		return ablation.Result{}, fmt.Errorf("-init: %w", err)
	}
	defer model.Close()
	engine, err := r.engine(model, t)
	if err != nil {
		return ablation.Result{}, err
	}
	rf, err := arith.NewReward()
	if err != nil {
		return ablation.Result{}, err
	}
	trainReward := rf
	if t.toolBonus {
		if trainReward, err = reward.WithToolBonus(rf, reward.DefaultToolBonus()); err != nil {
			return ablation.Result{}, err
		}
	}
	dir := filepath.Join(r.dir, v.Name, fmt.Sprintf("seed-%d", seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ablation.Result{}, fmt.Errorf("run folder: %w", err)
	}
	log, err := metrics.Open(filepath.Join(dir, "metrics.jsonl"), metrics.Options{})
	if err != nil {
		return ablation.Result{}, err
	}
	defer log.Close()
	prompts := arith.Prompts(arith.GenerateProblems(seed+1, r.o.prompts*r.o.rlSteps, "rl"), r.spec)
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{
		Policy: model, Engine: engine, Reward: trainReward, Prompts: prompts, Losses: v.Losses, Estimators: v.Estimators, Metrics: log,
	})
	if err != nil {
		return ablation.Result{}, err
	}
	defer tr.Close()

	before := r.sft[r.setting(t)]
	if err := log.Log(0, before.Metrics); err != nil {
		return ablation.Result{}, err
	}
	res := ablation.Result{Curve: []ablation.Point{{Step: 0, Values: r.evalValues(before)}}}
	var steps []map[string]float64
	var after arith.Eval
	rc := agentrl.RunConfig{
		Steps: r.o.rlSteps,
		// The held-out evaluation after the last step joins its row, as
		// in the main job.
		Validate: func(ctx context.Context, _ int) (map[string]float64, error) {
			var err error
			if after, err = arith.Evaluate(ctx, engine, rf, r.heldOut, r.spec, r.params(t), r.o.n); err != nil {
				return nil, fmt.Errorf("evaluating the RL policy: %w", err)
			}
			return after.Metrics, nil
		},
		OnStep: func(_ context.Context, step int, row map[string]float64) error {
			steps = append(steps, row)
			pt := ablation.Point{Step: step, Values: map[string]float64{}}
			for _, k := range curveKeys() {
				if v, ok := row[k]; ok {
					pt.Values[k] = v
				}
			}
			res.Curve = append(res.Curve, pt)
			return nil
		},
	}
	if r.o.parallel == 1 {
		rc.Recorder = progress.New(progress.Config{Out: r.stderr, Description: fmt.Sprintf("%s/%d", v.Name, seed), Interval: 30 * time.Second})
	}
	if err := tr.Run(ctx, rc); err != nil {
		return ablation.Result{}, err
	}
	lastPt := res.Curve[len(res.Curve)-1].Values
	for k, v := range r.evalValues(after) {
		lastPt[k] = v
	}
	res.Final = r.evalValues(after)
	res.Final["pg_clipfrac"] = meanOver(steps, "actor/pg_clipfrac", len(steps))
	res.Final["entropy"] = meanOver(steps, "actor/entropy", len(steps))
	res.Final["truncated"] = meanOver(steps, "response_length/clip_ratio", len(steps))
	res.Final["train_acc"] = meanOver(steps, "critic/acc/mean", 10)
	res.Final["train_tool_calls"] = meanOver(steps, "tool_call_counts/mean", 10)
	if err := writeJSON(filepath.Join(dir, "result.json"), runJSON(ablation.Result{Variant: v.Name, Seed: seed, Curve: res.Curve, Final: res.Final})); err != nil {
		return ablation.Result{}, err
	}
	return res, nil
}

// evalValues are an evaluation's summary values under the names of the
// tables.
func (r *runner) evalValues(e arith.Eval) map[string]float64 {
	return map[string]float64{
		r.avgKey(): e.Avg, r.passKey(): e.Pass, r.majKey(): e.Maj, "tool_calls": e.ToolCalls, "no_tool": e.NoTool,
	}
}

// meanOver is the mean of key over the last n steps (all when fewer),
// NaN when none has it.
func meanOver(steps []map[string]float64, key string, n int) float64 {
	sum, count := 0.0, 0
	for _, s := range steps[max(len(steps)-n, 0):] {
		if v, ok := s[key]; ok {
			sum += v
			count++
		}
	}
	if count == 0 {
		return math.NaN()
	}
	return sum / float64(count)
}

// tableMetrics are the tables the report prints, with what they say.
func (r *runner) tableMetrics() [][2]string {
	return [][2]string{
		{r.avgKey(), fmt.Sprintf("held-out accuracy, mean over %d samples of %d problems", r.o.n, r.o.evalProblems)},
		{r.passKey(), "held-out problems solved by any sample"},
		{"tool_calls", "held-out tool calls per answer"},
		{"no_tool", "held-out answers without a tool call"},
		{"train_acc", "training accuracy, the last 10 steps"},
		{"pg_clipfrac", "fraction of tokens clipped, mean over the steps"},
		{"entropy", "policy entropy per token, mean over the steps"},
		{"truncated", "training responses cut by the budget, mean over the steps"},
	}
}

// report prints the tables and writes summary.json and the plots.
func (r *runner) report(results []ablation.Result, entries []entry, d time.Duration, stdout io.Writer) error {
	fmt.Fprintf(stdout, "\nSFT policy (-init), held-out:\n")
	seen := map[setting]bool{}
	for _, e := range entries {
		st := r.setting(e.task)
		if seen[st] {
			continue
		}
		seen[st] = true
		ev := r.sft[st]
		fmt.Fprintf(stdout, "  %s: %s %.4f, %s %.4f, tool calls/answer %.2f, answers w/o tool %.4f\n",
			st, r.avgKey(), ev.Avg, r.passKey(), ev.Pass, ev.ToolCalls, ev.NoTool)
	}
	tables := map[string][]ablation.Row{}
	for _, m := range r.tableMetrics() {
		rows, err := ablation.Summarize(results, m[0])
		if err != nil {
			fmt.Fprintf(r.stderr, "ablation: no table of %s: %v\n", m[0], err)
			continue
		}
		tables[m[0]] = rows
		if n := len(r.o.seeds); n > 1 {
			fmt.Fprintf(stdout, "\n%s: %s (95%% Student-t interval over %d seeds)\n", m[0], m[1], n)
		} else {
			fmt.Fprintf(stdout, "\n%s: %s (one seed: no interval; -seeds with two or more gives one)\n", m[0], m[1])
		}
		if err := ablation.WriteTable(stdout, rows, m[0]); err != nil {
			return err
		}
	}

	curves := filepath.Join(r.dir, "curves.png")
	smoothed, err := ablation.Smooth(results, r.o.smooth)
	if err != nil {
		return err
	}
	if err := ablation.PlotCurves(curves, smoothed, "critic/acc/mean", "critic/score/mean", "actor/entropy",
		"actor/pg_clipfrac", "tool_call_counts/mean", "response_length/mean"); err != nil {
		return err
	}
	scatter := filepath.Join(r.dir, "tool-calls.png")
	if err := ablation.PlotScatter(scatter, results, "tool_calls", r.avgKey()); err != nil {
		return err
	}
	summary := filepath.Join(r.dir, "summary.json")
	if err := writeJSON(summary, r.summaryJSON(results, entries, tables, d)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\ncurves: %s\ntool calls against accuracy: %s\nsummary: %s\nruns: %s/<variant>/seed-<s>/metrics.jsonl\n%.0f s\n",
		curves, scatter, summary, r.dir, d.Seconds())
	return nil
}

// summaryJSON is summary.json: the flags, the variants, the SFT
// evaluations, the tables and every run's final metrics.
func (r *runner) summaryJSON(results []ablation.Result, entries []entry, tables map[string][]ablation.Row, d time.Duration) map[string]any {
	type variantJSON struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Setting     string `json:"setting"`
	}
	vs := make([]variantJSON, len(entries))
	for i, e := range entries {
		vs[i] = variantJSON{Name: e.variant.Name, Description: e.variant.Description, Setting: r.setting(e.task).String()}
	}
	sft := map[string]map[string]any{}
	for st, ev := range r.sft {
		sft[st.String()] = finiteJSON(r.evalValues(ev))
	}
	runs := make([]map[string]any, len(results))
	for i, res := range results {
		runs[i] = map[string]any{"variant": res.Variant, "seed": res.Seed, "seconds": res.Seconds, "final": finiteJSON(res.Final)}
	}
	return map[string]any{
		"init": r.o.init, "seeds": r.o.seeds, "rl_steps": r.o.rlSteps, "prompts": r.o.prompts, "n": r.o.n,
		"mini_batch": r.o.miniBatch, "rl_lr": r.o.rlLR, "temperature": r.o.temperature, "max_response": r.o.maxResponse,
		"tight_response": r.o.tightResponse, "eval": r.o.evalProblems, "eval_seed": r.o.evalSeed, "tool": r.tool.Name(),
		"device":   r.dev.String(),
		"variants": vs, "sft": sft, "tables": tables, "runs": runs, "seconds": d.Seconds(),
	}
}

// runJSON is a run's result.json, non-finite values as null.
func runJSON(res ablation.Result) map[string]any {
	curve := make([]map[string]any, len(res.Curve))
	for i, pt := range res.Curve {
		curve[i] = map[string]any{"step": pt.Step, "values": finiteJSON(pt.Values)}
	}
	return map[string]any{"variant": res.Variant, "seed": res.Seed, "final": finiteJSON(res.Final), "curve": curve}
}

// finiteJSON is m with NaN and ±Inf as nil (JSON null), which
// encoding/json cannot write as numbers.
func finiteJSON(m map[string]float64) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			out[k] = nil
		} else {
			out[k] = v
		}
	}
	return out
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o644)
}

// printCatalogue lists the variants with what each changes.
func printCatalogue(w io.Writer) error {
	all, err := catalogue()
	if err != nil {
		return err
	}
	def := strings.Split(defaultVariants, ",")
	for _, e := range all {
		mark := " "
		if slices.Contains(def, e.variant.Name) {
			mark = "*"
		}
		if _, err := fmt.Fprintf(w, "%s %-18s %s\n", mark, e.variant.Name, e.variant.Description); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintln(w, "(* in the default -variants)")
	return err
}
