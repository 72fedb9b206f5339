package agentrl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/eval"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// ValidateFunc evaluates the policy after step (0: before training) and
// returns the metrics to log with that step, under verl's names
// (val-core/…, val-aux/… for RL, val/loss for SFT). Trainer.Validator and
// SFTTrainer.LossValidator make one; a program may wrap either to print
// or add what it needs.
type ValidateFunc func(ctx context.Context, step int) (map[string]float64, error)

// MetricsSink receives the metrics row of each step: the step's
// metrics under verl's names (StepMetrics.Map, SFTMetrics.Map) with the
// validation's. A *metrics.Logger, which writes them as JSON Lines, is
// one. Log is called from the training goroutine, once per step, with
// the step's number; the row is not used after Log returns.
type MetricsSink interface {
	Log(step int, row map[string]float64) error
}

// A Recorder follows the steps of Run, as gonum's optimize.Recorder
// follows an optimisation: Run calls Init once, before the first step it
// makes, and Record after every step. The progress display of package
// progress is one; a program's own may send the rows elsewhere. In a
// data-parallel job rank 0 alone calls it.
type Recorder interface {
	// Init starts a run from step start (the steps done before it: a
	// resumed run's) to step total, where it stops.
	Init(start, total int) error
	// Record reports a finished step, once its row is complete and
	// logged, before its checkpoint. An error stops the run.
	Record(r StepRecord) error
}

// StepRecord is what a Recorder learns of one step.
type StepRecord struct {
	// Step is the number of the step just made (the trainer's
	// StepsDone after it).
	Step int
	// Row is the step's metrics row as logged: the trainer's metrics
	// (StepMetrics.Map, SFTMetrics.Map), the validation's and OnStep's
	// additions. The Recorder must not modify it.
	Row map[string]float64
	// Figures are the step's headline figures, in order: the mean reward
	// ("reward") and accuracy ("acc") of an RL step, the loss per trained
	// token ("loss") of an SFT step.
	Figures []Figure
	// Tokens is the number of tokens the step processed: generated and
	// trained on for an RL step, through the forward passes for an SFT
	// step.
	Tokens int64
}

// Figure is one named number of a StepRecord.
type Figure struct {
	Name  string
	Value float64
}

// RunConfig is the loop every training program needs around Step, with
// verl's trainer.* keys in brackets: how far to go, when to validate and
// checkpoint, whether to resume, and who follows the steps. Both trainers'
// Run take it. The zero value, but for Steps, runs the steps and nothing
// else.
type RunConfig struct {
	// Steps is the step number Run stops at (total_training_steps),
	// counting the steps of a resumed run; Run returns at once when the
	// trainer is already there. For SFTTrainer.Run, 0 means the steps of
	// its Epochs; for Trainer.Run it must be > 0.
	Steps int

	// Validate, when set, evaluates the policy every ValEvery steps
	// (test_freq; 0: only after the last step) and after the last step;
	// with ValBeforeTrain (val_before_train) also before the first step
	// of a run that starts at step 0, logged as step 0. Its metrics join
	// the step's row.
	Validate       ValidateFunc
	ValEvery       int
	ValBeforeTrain bool

	// Checkpoints, when its Dir is set, receives a checkpoint every
	// SaveEvery steps (save_freq; 0: only after the last step) and after
	// the last step, keeping the newest Keep (max_actor_ckpt_to_keep; 0
	// keeps all). With Resume (resume_mode auto) Run first loads the
	// newest checkpoint there, if there is one.
	Checkpoints checkpoint.Root
	SaveEvery   int
	Keep        int
	Resume      bool

	// Recorder, when set, follows the steps (a *progress.Display draws
	// the progress bar or lines).
	Recorder Recorder

	// OnStep, when set, runs after each step (and its validation) with
	// the step's row, to which it may add, before the row is logged and
	// the checkpoint written. An error stops the run.
	OnStep func(ctx context.Context, step int, row map[string]float64) error
	// OnCheckpoint, when set, runs after each checkpoint with its folder.
	OnCheckpoint func(step int, dir string) error
	// OnResume, when set, runs after Run resumed from a checkpoint, with
	// the step it resumed at.
	OnResume func(step int) error
}

// validate checks the loop's settings; total is the resolved Steps.
func (rc RunConfig) validate(total int) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: RunConfig.%s: %s", ErrTrainerConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case total <= 0:
		return bad("Steps", "%d, want > 0", total)
	case rc.ValEvery < 0:
		return bad("ValEvery", "%d, want ≥ 0", rc.ValEvery)
	case rc.SaveEvery < 0:
		return bad("SaveEvery", "%d, want ≥ 0", rc.SaveEvery)
	case rc.Keep < 0:
		return bad("Keep", "%d, want ≥ 0", rc.Keep)
	case rc.Resume && rc.Checkpoints.Dir == "":
		return bad("Resume", "set without Checkpoints.Dir")
	}
	return nil
}

// loop is what run needs of a trainer.
type loop interface {
	stepsDone() int
	// trainStep makes one step and returns its metrics row (not
	// logged), headline figures and tokens.
	trainStep(ctx context.Context) (map[string]float64, []Figure, int64, error)
	saveCheckpoint(ctx context.Context, root checkpoint.Root, keep int) (string, error)
	resume(root checkpoint.Root) (bool, error)
}

// run is Trainer.Run and SFTTrainer.Run: the steps up to step total,
// validation, metrics, recorder and checkpoints of RunConfig, stopping
// on ctx.
func run(ctx context.Context, tr loop, rc RunConfig, total int, metrics MetricsSink) error {
	if err := rc.validate(total); err != nil {
		return err
	}
	if rc.Resume {
		ok, err := tr.resume(rc.Checkpoints)
		if err != nil {
			return fmt.Errorf("agentrl: resume: %w", err)
		}
		if ok && rc.OnResume != nil {
			if err := rc.OnResume(tr.stepsDone()); err != nil {
				return err
			}
		}
	}
	start := tr.stepsDone()
	if start >= total {
		return nil
	}
	logRow := func(step int, row map[string]float64) error {
		if metrics == nil {
			return nil
		}
		if err := metrics.Log(step, row); err != nil {
			return fmt.Errorf("agentrl: step %d: metrics log: %w", step, err)
		}
		return nil
	}
	validate := func(step int) (map[string]float64, error) {
		row, err := rc.Validate(ctx, step)
		if err != nil {
			return nil, fmt.Errorf("agentrl: validation at step %d: %w", step, err)
		}
		return row, nil
	}
	if rc.Validate != nil && rc.ValBeforeTrain && start == 0 {
		row, err := validate(0)
		if err != nil {
			return err
		}
		if err := logRow(0, row); err != nil {
			return err
		}
	}
	if rc.Recorder != nil {
		if err := rc.Recorder.Init(start, total); err != nil {
			return err
		}
	}
	every := func(n, step int) bool { return n > 0 && step%n == 0 }
	for tr.stepsDone() < total {
		if err := ctx.Err(); err != nil {
			return err
		}
		row, figures, tokens, err := tr.trainStep(ctx)
		if err != nil {
			return err
		}
		step := tr.stepsDone()
		last := step == total
		if rc.Validate != nil && (last || every(rc.ValEvery, step)) {
			vrow, err := validate(step)
			if err != nil {
				return err
			}
			maps.Copy(row, vrow)
		}
		if rc.OnStep != nil {
			if err := rc.OnStep(ctx, step, row); err != nil {
				return err
			}
		}
		if err := logRow(step, row); err != nil {
			return err
		}
		if rc.Recorder != nil {
			if err := rc.Recorder.Record(StepRecord{Step: step, Row: row, Figures: figures, Tokens: tokens}); err != nil {
				return err
			}
		}
		if rc.Checkpoints.Dir != "" && (last || every(rc.SaveEvery, step)) {
			dir, err := tr.saveCheckpoint(ctx, rc.Checkpoints, rc.Keep)
			if err != nil {
				return fmt.Errorf("agentrl: checkpoint at step %d: %w", step, err)
			}
			if rc.OnCheckpoint != nil {
				if err := rc.OnCheckpoint(step, dir); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// stepMetrics is what both trainers' steps report.
type stepMetrics interface {
	Map() map[string]float64
	// headline returns the step's headline figures and the tokens it
	// processed, for StepRecord.
	headline() ([]Figure, int64)
}

// trainerLoop adapts a trainer's methods to loop.
type trainerLoop[M stepMetrics] struct {
	completed func() int
	train     func(context.Context) (M, error)
	save      func(context.Context, checkpoint.Root, int) (string, error)
	load      func(checkpoint.Root) (bool, error)
}

func (l trainerLoop[M]) stepsDone() int { return l.completed() }

func (l trainerLoop[M]) trainStep(ctx context.Context) (map[string]float64, []Figure, int64, error) {
	m, err := l.train(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	figures, tokens := m.headline()
	return m.Map(), figures, tokens, nil
}

func (l trainerLoop[M]) saveCheckpoint(ctx context.Context, root checkpoint.Root, keep int) (string, error) {
	return l.save(ctx, root, keep)
}

func (l trainerLoop[M]) resume(root checkpoint.Root) (bool, error) { return l.load(root) }

// Run trains until StepsDone reaches rc.Steps: each Step, then the
// validation, the metrics row (logged to TrainerParts.Metrics with the
// validation's metrics), the Recorder and the checkpoints that rc asks
// for — verl's RayPPOTrainer.fit. It returns ctx's error when ctx
// ends between two steps. Step logs its own row; under Run the row is
// logged once, with the validation.
//
// In a data-parallel job every rank runs Run with the same rc: rank 0
// logs the rows, calls the Recorder and writes the checkpoints; every
// rank validates (Trainer.Validate shares the prompts among them) and
// calls the hooks (OnStep, OnCheckpoint, OnResume).
func (t *Trainer) Run(ctx context.Context, rc RunConfig) error {
	metrics := t.parts.Metrics
	if !t.job.leader() {
		metrics, rc.Recorder = nil, nil
	}
	l := trainerLoop[StepMetrics]{completed: t.StepsDone, train: t.trainStep, save: t.SaveCheckpoint, load: t.Resume}
	return run(ctx, l, rc, rc.Steps, metrics)
}

// Run trains until StepsDone reaches rc.Steps (0: the steps of
// SFTConfig.Epochs), with the validation, metrics, Recorder and
// checkpoints rc asks for, as Trainer.Run does.
func (s *SFTTrainer) Run(ctx context.Context, rc RunConfig) error {
	total := rc.Steps
	if total == 0 {
		total = s.totalSteps()
	}
	metrics := s.metrics
	if !s.job.leader() {
		metrics, rc.Recorder = nil, nil
	}
	l := trainerLoop[SFTMetrics]{completed: s.StepsDone, train: s.trainStep, save: s.SaveCheckpoint, load: s.Resume}
	return run(ctx, l, rc, total, metrics)
}

// ValidationConfig is a validation of an RL policy on held-out prompts
// (verl's data.val_files with actor_rollout_ref.rollout.val_kwargs).
type ValidationConfig struct {
	// Prompts are the validation prompts; at least one.
	Prompts []Prompt
	// N is the number of samples per prompt (val_kwargs.n), the n of
	// mean@n and pass@k; 0 means 1.
	N int
	// Sampling is the sampling of validation rollouts (val_kwargs:
	// temperature, top_p, top_k; its zero value is greedy). Its Seed is
	// ignored: sample s of prompt i is seeded with Seed + i·N + s, so
	// that every validation of a run draws the same random numbers and
	// differences between steps come from the policy.
	Sampling lm.SampleParams
	Seed     uint64
	// Eval configures the metrics (eval.Config's zero value is verl's).
	Eval eval.Config
}

// Validate rolls out N samples of every validation prompt with the
// trainer's engine, scores them with its reward (without the overlong
// shaping, as verl's validation does) and returns verl's validation
// metrics (eval.Evaluate: mean@n, pass@k, maj@k, best@k per data
// source) with the tool calls per answer as an extra variable.
func (t *Trainer) Validate(ctx context.Context, vc ValidationConfig) (eval.Result, error) {
	if len(vc.Prompts) == 0 {
		return eval.Result{}, fmt.Errorf("%w: ValidationConfig.Prompts is empty", ErrTrainerConfig)
	}
	if vc.N < 0 {
		return eval.Result{}, fmt.Errorf("%w: ValidationConfig.N = %d, want ≥ 0", ErrTrainerConfig, vc.N)
	}
	// A validation before the first step validates rank 0's weights too.
	if err := t.job.join(ctx, t.opt, t.fingerprint()); err != nil {
		return eval.Result{}, fmt.Errorf("agentrl: validation: data parallel: %w", err)
	}
	n := max(vc.N, 1)
	// In a data-parallel job each rank rolls out its share of the
	// prompts (seeded by their place in the whole list) and the ranks
	// gather the records, in one process's order.
	lo, hi := t.job.share(len(vc.Prompts))
	reqs := make([]rollout.Request, 0, hi-lo)
	for i := lo; i < hi; i++ {
		ps := vc.Sampling
		ps.Seed = new(vc.Seed + uint64(i)*uint64(n))
		reqs = append(reqs, vc.Prompts[i].request(strconv.Itoa(i), ps, n))
	}
	recs, err := t.validationRecords(ctx, vc, reqs, lo)
	if recs, err = t.job.gatherRecords(ctx, recs, err); err != nil {
		return eval.Result{}, err
	}
	return eval.Evaluate(ctx, recs, vc.Eval)
}

// validationRecords rolls out and scores reqs, the requests of
// vc.Prompts[lo:].
func (t *Trainer) validationRecords(ctx context.Context, vc ValidationConfig, reqs []rollout.Request, lo int) ([]eval.Record, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if t.parts.Engine == nil {
		return nil, fmt.Errorf("%w: validation needs TrainerParts.Engine (a Source's episodes are not validated)", ErrTrainer)
	}
	trajs, err := t.parts.Engine.Run(ctx, reqs)
	if err != nil {
		return nil, err
	}
	inputs := make([]reward.Input, len(trajs))
	for i := range trajs {
		inputs[i] = vc.Prompts[lo+trajs[i].Request].RewardInput(&trajs[i])
	}
	outs, err := reward.Batch(ctx, t.parts.Reward, inputs, t.cfg.Reward)
	if err != nil {
		return nil, err
	}
	recs := make([]eval.Record, len(trajs))
	for i, tr := range trajs {
		recs[i] = eval.Record{
			DataSource: vc.Prompts[lo+tr.Request].DataSource, PromptID: tr.ID,
			Score: outs[i].Score, Acc: outs[i].Acc, Pred: outs[i].Pred,
			Extra: map[string]float64{"tool_calls": float64(len(tr.ToolCalls))},
		}
	}
	return recs, nil
}

// Validator returns a ValidateFunc running Validate with vc, for
// RunConfig.Validate.
func (t *Trainer) Validator(vc ValidationConfig) ValidateFunc {
	return func(ctx context.Context, _ int) (map[string]float64, error) {
		res, err := t.Validate(ctx, vc)
		if err != nil {
			return nil, err
		}
		return res.Map(), nil
	}
}

// LossValidator returns a ValidateFunc reporting the mean loss per
// trained token on held-out data as "val/loss", verl's SFT validation.
func (s *SFTTrainer) LossValidator(data []SFTSample) ValidateFunc {
	return func(ctx context.Context, _ int) (map[string]float64, error) {
		if len(data) == 0 {
			return nil, errors.New("no validation samples")
		}
		l, err := s.Loss(ctx, data)
		if err != nil {
			return nil, err
		}
		return map[string]float64{"val/loss": l}, nil
	}
}
