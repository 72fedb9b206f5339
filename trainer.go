package agentrl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/agentrl/agentrl/advantage"
	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"gorgonia.org/tensor"
)

// ErrTrainer is wrapped by errors of NewTrainer for missing or inconsistent
// parts, and of Step for results of the parts that break their contracts
// (a Forward whose output does not match its input, trajectories without
// sampler log-probabilities where they are needed).
var ErrTrainer = errors.New("agentrl: trainer")

// Trainer runs reinforcement-learning steps: rollout, rewards, advantages,
// optional dynamic sampling, and PPO epochs of clipped policy-gradient
// updates, as verl's RayPPOTrainer.fit and dp_actor.update_policy do
// (trainStep lists the stages of one step). A Trainer is not safe for
// concurrent use.
type Trainer struct {
	cfg        TrainerConfig
	parts      TrainerParts
	reward     reward.Func
	sampler    *dataset.Sampler
	opt        policy.Optimizer
	computer   *loss.Computer
	estimators *advantage.Registry
	stepsDone  int // completed steps: the policy version

	// samplerState is the prompt sampler's position before the batch of
	// the next step to train (ahead of the sampler itself while batches
	// are made in advance); checkpoints record it.
	samplerState dataset.SamplerState
	// published is the version the samplers hold, −1 before the first
	// publication.
	published int
	// async runs the rollouts ahead when MaxStaleness > 0; nil when idle.
	async *producer
	// trainIntervals holds the recent steps' training intervals, for
	// the overlap metric; lastEnd is when the previous step ended.
	trainIntervals [][2]time.Time
	lastEnd        time.Time
	// job is the data-parallel job of this trainer (alone: a job of
	// one).
	job job
}

// NewTrainer validates cfg against parts (names in its registries, the
// overlong budget against its engine's) and returns a Trainer at step 0.
func NewTrainer(cfg TrainerConfig, parts TrainerParts) (*Trainer, error) {
	if err := cfg.ValidateWith(parts.Losses, parts.Estimators); err != nil {
		return nil, err
	}
	switch {
	case parts.Policy == nil:
		return nil, fmt.Errorf("%w: TrainerParts.Policy is nil", ErrTrainer)
	case parts.Engine == nil && parts.Source == nil:
		return nil, fmt.Errorf("%w: TrainerParts.Engine is nil", ErrTrainer)
	case parts.Engine != nil && parts.Source != nil:
		return nil, fmt.Errorf("%w: TrainerParts.Engine and TrainerParts.Source are both set; set one", ErrTrainer)
	case parts.Reward == nil && parts.Source == nil:
		return nil, fmt.Errorf("%w: TrainerParts.Reward is nil", ErrTrainer)
	case len(parts.Prompts) == 0:
		return nil, fmt.Errorf("%w: TrainerParts.Prompts is empty", ErrTrainer)
	case cfg.Loss.KLCoef > 0 && parts.Reference == nil:
		return nil, fmt.Errorf("%w: TrainerConfig.Loss.KLCoef is %v but TrainerParts.Reference is nil", ErrTrainer, cfg.Loss.KLCoef)
	case len(parts.Prompts) < cfg.PromptsPerStep:
		return nil, fmt.Errorf("%w: %d prompts, fewer than TrainerConfig.PromptsPerStep %d", ErrTrainer, len(parts.Prompts), cfg.PromptsPerStep)
	case cfg.MaxStaleness > 0 && parts.Sync == nil:
		return nil, fmt.Errorf("%w: TrainerConfig.MaxStaleness is %d but TrainerParts.Sync is nil: rollouts ahead of training need samplers with weights of their own (an inference fleet)", ErrTrainer, cfg.MaxStaleness)
	}
	if _, ok := parts.Policy.(lm.Saver); parts.Sync != nil && !ok {
		return nil, fmt.Errorf("%w: TrainerParts.Sync is set but the Policy (%T) cannot Save its weights (lm.Saver)", ErrTrainer, parts.Policy)
	}
	for i, p := range parts.Prompts {
		forms := 0
		if p.Tokens != nil {
			forms++
		}
		if p.Text != "" {
			forms++
		}
		if p.Messages != nil {
			forms++
		}
		if forms != 1 {
			return nil, fmt.Errorf("%w: TrainerParts.Prompts[%d] (%q) has %d prompt forms; want exactly one of Tokens, Text, Messages", ErrTrainer, i, p.ID, forms)
		}
	}
	j, err := newJob(parts.DataParallel, "TrainerParts.DataParallel")
	if err != nil {
		return nil, err
	}
	if err := cfg.checkDataParallel(j.size()); err != nil {
		return nil, err
	}
	rf := parts.Reward
	if cfg.Overlong != nil {
		budget := 0
		if parts.Engine != nil {
			budget = parts.Engine.MaxResponseTokens()
		}
		oc, err := cfg.overlong(budget)
		if err != nil {
			return nil, fmt.Errorf("%w: TrainerConfig.Overlong: %w", ErrTrainerConfig, err)
		}
		if rf == nil {
			return nil, fmt.Errorf("%w: TrainerConfig.Overlong needs TrainerParts.Reward (posted rewards are used as posted)", ErrTrainer)
		}
		if rf, err = reward.WithOverlong(rf, oc); err != nil {
			return nil, err
		}
	}
	sampler, err := dataset.NewSampler(len(parts.Prompts), dataset.SamplerConfig{
		BatchSize: cfg.PromptsPerStep, Seed: cfg.Seed, Shuffle: true, DropLast: true,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTrainer, err)
	}
	// Last, after every check: attaching changes the user's model.
	if err := attachLoRA(parts.Policy, cfg.LoRA, cfg.Seed, "TrainerConfig.LoRA"); err != nil {
		return nil, err
	}
	opt, err := j.newOptimizer(parts.Policy, cfg.Optimizer)
	if err != nil {
		return nil, err
	}
	return &Trainer{
		cfg: cfg, parts: parts, reward: rf, sampler: sampler, opt: opt,
		computer: loss.NewComputer(parts.Losses), estimators: parts.Estimators,
		samplerState: sampler.State(), published: -1, job: j,
	}, nil
}

// Config returns the trainer's configuration.
func (t *Trainer) Config() TrainerConfig { return t.cfg }

// StepsDone is the number of steps completed (the step of the latest
// checkpoint that would be written now).
func (t *Trainer) StepsDone() int { return t.stepsDone }

// Optimizer returns the trainer's optimizer (a policy.DeviceAdamW for a
// *policy.Model, AdamW over Params otherwise), for inspection.
func (t *Trainer) Optimizer() policy.Optimizer { return t.opt }

// Step runs one training step and returns its metrics: the step's
// rollout (made now, or with MaxStaleness ≥ 1 while earlier steps
// trained), rewards, advantages, PPO epochs, and with TrainerParts.Sync
// the publication of the new weights every SyncEvery steps. On error the
// policy may have been partly updated (an error inside a PPO epoch) and
// the step counter does not advance, except when only the publication
// after a completed update failed: the step then counts (StepsDone), and
// the next Step publishes again before any rollout.
func (t *Trainer) Step(ctx context.Context) (StepMetrics, error) {
	m, err := t.trainStep(ctx)
	if err != nil {
		return m, err
	}
	if t.parts.Metrics != nil && t.job.leader() {
		if err := t.parts.Metrics.Log(m.Step, m.Map()); err != nil {
			return m, fmt.Errorf("agentrl: step %d: metrics log: %w", m.Step, err)
		}
	}
	return m, nil
}

// trainStep is one RL step, stage by stage; Step is it and the metrics
// log, and Run calls it between validations and checkpoints:
//
//  1. rollout: this step's batch of trajectories and their rewards
//  2. advantages, group by group
//  3. old and reference log-probabilities, before any update
//  4. mini-batch updates: PPO epochs of mini-batches, each accumulating
//     the gradients of its micro-batches (forward, loss, backward) and
//     ending in an optimizer step (the ranks' gradients summed, clipped,
//     AdamW)
//  5. the step counted, and the new weights published to the samplers
//  6. its times, and with several ranks the job's metrics
//
// At the first step of a data-parallel job the ranks first check that
// they agree and take rank 0's weights. On error, see Step.
func (t *Trainer) trainStep(ctx context.Context) (StepMetrics, error) {
	start := time.Now()
	m := StepMetrics{Step: t.stepsDone + 1, PolicyVersion: t.stepsDone, WorldSize: t.job.size()}
	if err := t.job.join(ctx, t.opt, t.fingerprint()); err != nil {
		return m, fmt.Errorf("agentrl: step %d: data parallel: %w", m.Step, err)
	}
	batch, next, err := t.rollout(ctx, &m)
	if err != nil {
		return m, err
	}
	trainStart := time.Now()
	if err := t.advantages(batch); err != nil {
		return m, err
	}
	if err := t.oldAndRefLogProbs(ctx, batch); err != nil {
		return m, err
	}
	if err := t.measureMismatch(ctx, batch, &m); err != nil {
		return m, err
	}
	if err := t.update(ctx, batch, &m); err != nil {
		return m, err
	}
	t.stepsDone, t.samplerState = t.stepsDone+1, next
	if err := t.publishDue(ctx, &m); err != nil {
		return m, err
	}
	t.clock(&m, start, trainStart)
	if err := t.job.stepMetrics(ctx, &m, batch); err != nil {
		return m, fmt.Errorf("agentrl: step %d: reducing the metrics: %w", m.Step, err)
	}
	return m, nil
}

// sample is one trajectory of a step with what the trainer learns about it.
type sample struct {
	traj   rollout.Trajectory
	prompt *Prompt
	out    reward.Output
	posted *reward.Output // the reward its episode posted (TrainerParts.Source), or nil
	group  string
	// Per-token arrays aligned with traj.Tokens[traj.PromptLen:].
	adv, old, ref []float32
}

func (s *sample) respMask() []float32 { return s.traj.Mask[s.traj.PromptLen:] }

// turns are the trajectory's turns as the advantage estimators take
// them: spans of the response, the environment's reward for each, and the
// state each was taken in (rollout.Trajectory.TurnState).
func (s *sample) turns() []advantage.Turn {
	out := make([]advantage.Turn, len(s.traj.Turns))
	for k, tu := range s.traj.Turns {
		out[k] = advantage.Turn{Start: tu.Start - s.traj.PromptLen, End: tu.End - s.traj.PromptLen, State: s.traj.TurnState(k)}
		if tu.Reward != nil {
			out[k].Reward = *tu.Reward
		}
	}
	return out
}

// rollout is stage 1: the step's batch of trajectories, scored, with
// the prompt sampler's position after it. The batch is made now
// (collect), or with MaxStaleness ≥ 1 taken from the rollouts running
// ahead of training (nextBatch); its metrics are recorded (generation
// batches, times, rewards, lengths, tool calls) and its staleness
// checked. A run's first step, and the first after a resume, first make
// sure the samplers hold the policy being trained.
func (t *Trainer) rollout(ctx context.Context, m *StepMetrics) ([]*sample, dataset.SamplerState, error) {
	if t.parts.Sync != nil && t.published != t.stepsDone {
		secs, err := t.publish(ctx)
		m.SyncSeconds += secs
		if err != nil {
			return nil, dataset.SamplerState{}, err
		}
	}
	p, err := t.nextBatch(ctx)
	if err != nil {
		return nil, dataset.SamplerState{}, err
	}
	m.GenBatches, m.KeptGroups = p.genBatches, p.keptGroups
	m.RolloutSeconds = p.end.Sub(p.start).Seconds()
	m.OverlapSeconds = t.overlap(p.start, p.end)
	m.observeBatch(p.batch, t.cfg)
	if m.RolloutSeconds > 0 {
		m.RolloutTokensPerSec = float64(m.generatedTokens) / m.RolloutSeconds
	}
	if err := t.staleness(p.batch, m); err != nil {
		return nil, dataset.SamplerState{}, err
	}
	return p.batch, p.after, nil
}

// collect gathers the batch of the step after stepsDone completed
// steps: one generation batch, or with dynamic sampling as many as it
// takes to fill PromptsPerStep groups whose metric varies. It returns
// the batch, the generation batches it took and the groups kept.
func (t *Trainer) collect(ctx context.Context, stepsDone int) ([]*sample, int, int, error) {
	ds := t.cfg.DynamicSampling
	if ds == nil {
		b, err := t.generate(ctx, stepsDone, 0)
		return b, 1, t.cfg.PromptsPerStep / t.job.size(), err // this rank's groups
	}
	f, err := dataset.NewGroupFilter[*sample](dataset.FilterConfig{BatchGroups: t.cfg.PromptsPerStep / t.job.size(), MaxGenBatches: ds.MaxGenBatches})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %w", ErrTrainer, err)
	}
	// Each rank filters its own groups until it keeps its share of
	// them; the ranks go on in step — a rank already full draws the
	// generation batch's prompts without rolling them out — until every
	// rank is full.
	gens := 0
	for {
		var err error
		if f.Ready() {
			t.sampler.Next() // in step with the ranks still rolling out
		} else {
			var b []*sample
			if b, err = t.generate(ctx, stepsDone, gens); err == nil {
				err = t.addToFilter(f, b, stepsDone)
			}
		}
		gens++
		allFull, err := t.job.agreeReady(ctx, err, f.Ready(), fmt.Sprintf("step %d: dynamic sampling", stepsDone+1))
		if err != nil {
			return nil, 0, 0, err
		}
		if allFull {
			break
		}
	}
	fb, err := f.Take()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("agentrl: step %d: dynamic sampling: %w", stepsDone+1, err)
	}
	return fb.Items, gens, fb.Stats.KeptGroups, nil
}

// addToFilter adds a generation batch to the dynamic-sampling filter.
func (t *Trainer) addToFilter(f *dataset.GroupFilter[*sample], b []*sample, stepsDone int) error {
	ds := t.cfg.DynamicSampling
	groups := make([]string, len(b))
	metric := make([]float64, len(b))
	for i, s := range b {
		groups[i] = s.group
		if ds.metric() == FilterByScore {
			metric[i] = s.out.Score
		} else if s.out.Acc {
			metric[i] = 1
		}
	}
	if _, err := f.Add(b, groups, metric); err != nil {
		return fmt.Errorf("agentrl: step %d: dynamic sampling: %w", stepsDone+1, err)
	}
	return nil
}

// generate rolls out one generation batch of the step after stepsDone
// completed steps (rolloutGroups) and scores it (score).
func (t *Trainer) generate(ctx context.Context, stepsDone, genBatch int) ([]*sample, error) {
	samples, err := t.rolloutGroups(ctx, stepsDone, genBatch)
	if err != nil {
		return nil, err
	}
	if err := t.score(ctx, stepsDone, samples); err != nil {
		return nil, err
	}
	return samples, nil
}

// rolloutGroups draws the next generation batch of prompts and rolls out
// this rank's groups of it (all of them alone): SamplesPerPrompt
// trajectories of each prompt, each request seeded by the step, the
// generation batch and its position in it.
func (t *Trainer) rolloutGroups(ctx context.Context, stepsDone, genBatch int) ([]*sample, error) {
	all := t.sampler.Next()
	// This rank's groups, at their positions in the generation batch
	// (which seed them): all of them alone.
	pos := t.shard(len(all))
	idx := make([]int, len(pos))
	reqs := make([]rollout.Request, len(pos))
	groups := make([]string, len(pos))
	for i, at := range pos {
		j := all[at]
		idx[i] = j
		p := &t.parts.Prompts[j]
		params := t.cfg.Sampling
		params.Seed = new(requestSeed(t.cfg.Seed, stepsDone, genBatch, at))
		params.Logprobs = true
		groups[i] = fmt.Sprintf("s%d/g%d/p%d", stepsDone, genBatch, j)
		reqs[i] = p.request(groups[i], params, t.cfg.SamplesPerPrompt)
	}
	trajs, posted, err := t.runRollout(ctx, reqs)
	if err != nil {
		return nil, fmt.Errorf("agentrl: step %d: %w", stepsDone+1, rolloutError(err))
	}
	if len(trajs) != len(idx)*t.cfg.SamplesPerPrompt || posted != nil && len(posted) != len(trajs) {
		return nil, fmt.Errorf("%w: step %d: rollout returned %d trajectories for %d requests of %d samples", ErrTrainer, stepsDone+1, len(trajs), len(idx), t.cfg.SamplesPerPrompt)
	}
	// Each trajectory goes to its canonical place, request by request
	// (prompts in the generation batch's order) and sample by sample,
	// whatever order the engine gave them in: advantages, mini-batches
	// and so the update do not depend on which rollout finished first.
	n := t.cfg.SamplesPerPrompt
	samples := make([]*sample, len(trajs))
	for i := range trajs {
		tr := &trajs[i]
		if tr.Request < 0 || tr.Request >= len(idx) || tr.Sample < 0 || tr.Sample >= n || len(tr.Mask) != len(tr.Tokens) || tr.PromptLen > len(tr.Tokens) {
			return nil, fmt.Errorf("%w: step %d: trajectory %d is malformed (request %d, sample %d, %d tokens, %d mask, prompt %d)", ErrTrainer, stepsDone+1, i, tr.Request, tr.Sample, len(tr.Tokens), len(tr.Mask), tr.PromptLen)
		}
		at := tr.Request*n + tr.Sample
		if samples[at] != nil {
			return nil, fmt.Errorf("%w: step %d: rollout returned sample %d of request %d twice", ErrTrainer, stepsDone+1, tr.Sample, tr.Request)
		}
		samples[at] = &sample{traj: *tr, prompt: &t.parts.Prompts[idx[tr.Request]], group: groups[tr.Request]}
		if posted != nil {
			samples[at].posted = posted[i]
		}
	}
	return samples, nil
}

// runRollout rolls reqs out with the Engine, or the Source with the
// rewards its episodes posted.
func (t *Trainer) runRollout(ctx context.Context, reqs []rollout.Request) ([]rollout.Trajectory, []*reward.Output, error) {
	if t.parts.Source != nil {
		return t.parts.Source.Rollout(ctx, reqs)
	}
	trajs, err := t.parts.Engine.Run(ctx, reqs)
	return trajs, nil, err
}

// score sets each sample's reward: the one its episode posted
// (TrainerParts.Source), else TrainerParts.Reward's, with the overlong
// shaping of TrainerConfig.Overlong, in parallel within
// TrainerConfig.Reward's bounds; a score that is not finite is an error.
func (t *Trainer) score(ctx context.Context, stepsDone int, samples []*sample) error {
	var inputs []reward.Input
	var at []int // the samples scored by the reward function
	for i, s := range samples {
		if s.posted == nil {
			inputs = append(inputs, s.prompt.RewardInput(&s.traj))
			at = append(at, i)
		}
	}
	if len(at) > 0 && t.reward == nil {
		return fmt.Errorf("%w: step %d: trajectory %d (prompt %q) has no posted reward and TrainerParts.Reward is nil", ErrTrainer, stepsDone+1, at[0], samples[at[0]].prompt.ID)
	}
	var outs []reward.Output
	if len(at) > 0 {
		var err error
		if outs, err = reward.Batch(ctx, t.reward, inputs, t.cfg.Reward); err != nil {
			return fmt.Errorf("agentrl: step %d: reward: %w", stepsDone+1, err)
		}
	}
	for k, o := range outs {
		samples[at[k]].out = o
	}
	for i, s := range samples {
		if s.posted != nil {
			s.out = *s.posted
		}
		if math.IsNaN(s.out.Score) || math.IsInf(s.out.Score, 0) {
			return fmt.Errorf("%w: step %d: reward of trajectory %d (prompt %q) is %v", ErrTrainer, stepsDone+1, i, s.prompt.ID, s.out.Score)
		}
	}
	return nil
}

// requestSeed derives the seed of one request from the run's seed, the
// step, the generation batch and the position (SplitMix64's finaliser over
// their combination), so that rollouts are reproducible across resumes.
func requestSeed(seed uint64, step, genBatch, pos int) uint64 {
	z := seed
	for _, v := range []uint64{uint64(step), uint64(genBatch), uint64(pos)} {
		z += 0x9E3779B97F4A7C15 ^ v*0xD1B54A32D192ED03
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
	}
	return z
}

// rolloutError names the rollout as the stage an error of
// rollout.Engine.Run came from, once: the engine's own errors say
// "rollout: …" already, a context's error does not.
func rolloutError(err error) error {
	if strings.HasPrefix(err.Error(), "rollout: ") {
		return err
	}
	return fmt.Errorf("rollout: %w", err)
}

// advantages is stage 2: it fills s.adv from the estimator
// (TrainerConfig.Advantage); groups are the rollout groups (one per
// prompt and generation batch). The reward function's score is the
// trajectory's outcome; the environment's per-turn rewards and the turns'
// spans and states go in as advantage.Input.Turns, which every estimator
// counts and the turn-level ones (turn_grpo, gigpo) assign turn by turn.
func (t *Trainer) advantages(batch []*sample) error {
	in := advantage.Input{
		Scores: make([]float64, len(batch)),
		Groups: make([]string, len(batch)),
		Mask:   make([][]float32, len(batch)),
		Turns:  make([][]advantage.Turn, len(batch)),
	}
	for i, s := range batch {
		in.Scores[i] = s.out.Score
		in.Groups[i] = s.group
		in.Mask[i] = s.respMask()
		in.Turns[i] = s.turns()
	}
	out, err := t.estimators.Compute(t.cfg.Advantage, in)
	if err != nil {
		return fmt.Errorf("agentrl: step %d: advantages: %w", t.stepsDone+1, err)
	}
	for i, s := range batch {
		s.adv = out.Advantages[i]
	}
	return nil
}

// oldAndRefLogProbs is stage 3: it fills the old (and reference)
// log-probabilities of the response tokens before any update, as verl's
// compute_log_prob and compute_ref_log_prob do — recomputed by forward
// passes of micro-batches, or the sampler's (OldLogProbsRollout).
func (t *Trainer) oldAndRefLogProbs(ctx context.Context, batch []*sample) error {
	needRollout := !t.cfg.recompute() || t.cfg.Loss.NeedsRolloutLogProbs()
	for i, s := range batch {
		if needRollout && len(s.traj.LogProbs) != len(s.traj.Tokens) {
			return fmt.Errorf("%w: step %d: trajectory %d (prompt %q) has no sampler log-probabilities, which OldLogProbs %q, TISCap or RolloutCorrection need", ErrTrainer, t.stepsDone+1, i, s.prompt.ID, t.cfg.OldLogProbs)
		}
		if !t.cfg.recompute() {
			s.old = s.traj.LogProbs[s.traj.PromptLen:]
		}
	}
	score := func(model lm.Trainable, set func(s *sample, lp []float32), what string) error {
		for _, c := range chunks(len(batch), t.localMicro()) {
			part := batch[c[0]:c[1]]
			stats, _, err := model.Forward(ctx, t.tokenBatch(part), false)
			if err != nil {
				return fmt.Errorf("agentrl: step %d: %s log-probs: %w", t.stepsDone+1, what, err)
			}
			if err := checkStats(stats, part, false); err != nil {
				return fmt.Errorf("%w: step %d: %s forward: %w", ErrTrainer, t.stepsDone+1, what, err)
			}
			for i, s := range part {
				set(s, stats.LogProbs[i][s.traj.PromptLen:])
			}
		}
		return nil
	}
	if t.cfg.recompute() {
		if err := score(t.parts.Policy, func(s *sample, lp []float32) { s.old = lp }, "old"); err != nil {
			return err
		}
	}
	if t.cfg.Loss.KLCoef > 0 {
		if err := score(t.parts.Reference, func(s *sample, lp []float32) { s.ref = lp }, "reference"); err != nil {
			return err
		}
	}
	return nil
}

// tokenBatch is the forward input of a micro-batch: whole sequences, with
// the response mask marking the positions whose results are needed.
func (t *Trainer) tokenBatch(part []*sample) lm.TokenBatch {
	tb := lm.TokenBatch{
		Tokens:      make([][]int, len(part)),
		Mask:        make([][]float32, len(part)),
		Temperature: t.cfg.Sampling.Temperature,
	}
	if tb.Temperature < lm.GreedyTemperature {
		tb.Temperature = 1
	}
	for i, s := range part {
		tb.Tokens[i] = s.traj.Tokens
		tb.Mask[i] = s.traj.Mask
	}
	return tb
}

// checkStats checks that a Forward's result is aligned with its input.
func checkStats(st lm.TokenStats, part []*sample, entropy bool) error {
	if len(st.LogProbs) != len(part) || entropy && len(st.Entropy) != len(part) {
		return fmt.Errorf("%d sequences in, %d log-prob rows and %d entropy rows out", len(part), len(st.LogProbs), len(st.Entropy))
	}
	for i, s := range part {
		if len(st.LogProbs[i]) != len(s.traj.Tokens) || entropy && len(st.Entropy[i]) != len(s.traj.Tokens) {
			return fmt.Errorf("sequence %d: %d tokens in, %d log-probs out", i, len(s.traj.Tokens), len(st.LogProbs[i]))
		}
	}
	return nil
}

// update is stage 4, the PPO epochs (verl's dp_actor.update_policy):
// each epoch cuts the batch into mini-batches (miniBatches), and each
// mini-batch accumulates the gradients of its micro-batches (accumulate)
// and ends in one optimizer step (optimizerStep). It records the loss
// metrics (the means over micro-batches), the gradient norms, the
// learning rate, the updates and the training time.
func (t *Trainer) update(ctx context.Context, batch []*sample, m *StepMetrics) error {
	start := time.Now()
	var acc metricMean
	var gradNorms, lrs []float64
	for ep := range t.cfg.epochs() {
		for _, mini := range t.miniBatches(batch, ep) {
			if err := t.accumulate(ctx, mini, ep, m, &acc); err != nil {
				return err
			}
			norm, lr, stepped, err := optimizerStep(ctx, t.job, t.opt, t.cfg.MaxGradNorm)
			if err != nil {
				return fmt.Errorf("agentrl: step %d: epoch %d: %w", t.stepsDone+1, ep, err)
			}
			gradNorms = append(gradNorms, norm)
			if !stepped {
				m.SkippedUpdates++ // verl's dp_actor skips the update; the step goes on
				continue
			}
			lrs = append(lrs, lr)
			m.Updates++
		}
	}
	if err := t.opt.ZeroGrad(); err != nil {
		return fmt.Errorf("agentrl: step %d: %w", t.stepsDone+1, err)
	}
	m.LossMetrics = acc.mean()
	m.Loss = m.LossMetrics["loss"]
	m.PGClipFrac = m.LossMetrics["pg_clipfrac"]
	m.PGClipFracLower = m.LossMetrics["pg_clipfrac_lower"]
	m.PPOKL = m.LossMetrics["ppo_kl"]
	m.Entropy = m.LossMetrics["entropy"]
	m.KL = m.LossMetrics["kl"]
	m.GradNorm = meanOf(gradNorms)
	if len(lrs) > 0 {
		m.LR = lrs[len(lrs)-1]
	} else {
		m.LR = t.opt.LR()
	}
	m.TrainSeconds = time.Since(start).Seconds()
	if m.TrainSeconds > 0 {
		m.TrainTokensPerSec = float64(m.trainedTokens) / m.TrainSeconds
	}
	return nil
}

// miniBatches cuts the batch into this rank's mini-batches of epoch ep:
// its share of MiniBatchSize trajectories each, in the batch's order or,
// with ShuffleMiniBatches, in an order drawn from Seed, the step and the
// epoch (verl's actor.shuffle).
func (t *Trainer) miniBatches(batch []*sample, ep int) [][]*sample {
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	if t.cfg.ShuffleMiniBatches {
		rng := rand.New(rand.NewPCG(t.cfg.Seed, uint64(t.stepsDone)<<20|uint64(ep)))
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	var out [][]*sample
	for _, mb := range chunks(len(batch), t.cfg.miniBatch()/t.job.size()) {
		mini := make([]*sample, 0, mb[1]-mb[0])
		for _, k := range order[mb[0]:mb[1]] {
			mini = append(mini, batch[k])
		}
		out = append(out, mini)
	}
	return out
}

// accumulate zeroes the gradients and accumulates those of the
// mini-batch's micro-batches of localMicro trajectories (microStep).
// Each micro-batch's loss is weighted by its share of the whole
// mini-batch, on every rank, so that the sum over the ranks is one
// process's gradient.
func (t *Trainer) accumulate(ctx context.Context, mini []*sample, ep int, m *StepMetrics, acc *metricMean) error {
	if err := t.opt.ZeroGrad(); err != nil {
		return fmt.Errorf("agentrl: step %d: %w", t.stepsDone+1, err)
	}
	for _, c := range chunks(len(mini), t.localMicro()) {
		res, tokens, err := t.microStep(ctx, mini[c[0]:c[1]], float32(c[1]-c[0])/float32(len(mini)*t.job.size()))
		if err != nil {
			return fmt.Errorf("agentrl: step %d: epoch %d: %w", t.stepsDone+1, ep, err)
		}
		m.trainedTokens += tokens
		acc.add(res.Metrics)
	}
	return nil
}

// microStep runs forward, loss and backward on one micro-batch, scaling
// the loss by its share of the mini-batch (verl dp_actor.update_policy:
// loss × micro/mini, so that the accumulated gradient is the mini-batch
// mean of the micro-batch losses).
func (t *Trainer) microStep(ctx context.Context, part []*sample, scale float32) (loss.Result, int, error) {
	stats, back, err := t.parts.Policy.Forward(ctx, t.tokenBatch(part), true)
	if err != nil {
		return loss.Result{}, 0, fmt.Errorf("forward: %w", err)
	}
	if err := checkStats(stats, part, true); err != nil {
		return loss.Result{}, 0, fmt.Errorf("%w: forward: %w", ErrTrainer, err)
	}
	if back == nil {
		return loss.Result{}, 0, fmt.Errorf("%w: forward with gradients returned no BackwardFunc", ErrTrainer)
	}
	lb, err := t.lossBatch(part, stats)
	if err != nil {
		return loss.Result{}, 0, fmt.Errorf("%w: loss batch: %w", ErrTrainer, err)
	}
	res, err := t.computer.Compute(t.cfg.Loss, lb)
	if err != nil {
		return loss.Result{}, 0, fmt.Errorf("loss: %w", err)
	}
	starts, lens, tokens := make([]int, len(part)), make([]int, len(part)), 0
	for i, s := range part {
		starts[i], lens[i] = s.traj.PromptLen, len(s.traj.Tokens)
		tokens += len(s.traj.Tokens)
	}
	gl, err := loss.UnpadRows(res.GradLogProbs, starts, lens, scale)
	if err != nil {
		return loss.Result{}, 0, fmt.Errorf("%w: loss gradient: %w", ErrTrainer, err)
	}
	var ge [][]float32
	if t.cfg.Loss.EntropyCoef != 0 && res.GradEntropy != nil {
		if ge, err = loss.UnpadRows(res.GradEntropy, starts, lens, scale); err != nil {
			return loss.Result{}, 0, fmt.Errorf("%w: entropy gradient: %w", ErrTrainer, err)
		}
	}
	if err := back(ctx, gl, ge); err != nil {
		return loss.Result{}, 0, fmt.Errorf("backward: %w", err)
	}
	return res, tokens, nil
}

// lossBatch lays a micro-batch out as loss.Batch [B,T] tensors over the
// response tokens (loss.PadRows), T the longest response; padding has
// mask 0. The forward's rows and the sampler's log-probabilities are
// aligned with whole sequences and start at the prompt's length; the
// per-sample rows (old, ref, adv, mask) are response spans already.
func (t *Trainer) lossBatch(part []*sample, stats lm.TokenStats) (loss.Batch, error) {
	starts := make([]int, len(part))
	T := 1 // an all-empty micro-batch still gets one (masked) column
	for i, s := range part {
		starts[i] = s.traj.PromptLen
		T = max(T, len(s.traj.Tokens)-s.traj.PromptLen)
	}
	resp := func(get func(s *sample) []float32) [][]float32 {
		rows := make([][]float32, len(part))
		for i, s := range part {
			rows[i] = get(s)
		}
		return rows
	}
	var err error
	pad := func(rows [][]float32, starts []int) *tensor.Dense {
		if err != nil {
			return nil
		}
		var d *tensor.Dense
		d, err = loss.PadRows(rows, starts, T)
		return d
	}
	b := loss.Batch{
		LogProbs:    pad(stats.LogProbs, starts),
		Entropy:     pad(stats.Entropy, starts),
		OldLogProbs: pad(resp(func(s *sample) []float32 { return s.old }), nil),
		Advantages:  pad(resp(func(s *sample) []float32 { return s.adv }), nil),
		Mask:        pad(resp(func(s *sample) []float32 { return s.respMask() }), nil),
	}
	if t.cfg.Loss.KLCoef > 0 {
		b.RefLogProbs = pad(resp(func(s *sample) []float32 { return s.ref }), nil)
	}
	if t.cfg.Loss.NeedsRolloutLogProbs() {
		b.RolloutLogProbs = pad(resp(func(s *sample) []float32 { return s.traj.LogProbs }), starts)
	}
	return b, err
}

// optimizerStep ends every update of both trainers: the ranks'
// gradients are summed (a data-parallel job's all-reduce, nothing
// alone), their global norm is clipped to maxNorm (measured only, for
// maxNorm 0), and the optimizer steps. A norm that is not finite skips
// the step, as verl's dp_actor does: stepped is then false and lr 0. It
// returns the norm before clipping and the step's learning rate.
func optimizerStep(ctx context.Context, j job, opt policy.Optimizer, maxNorm float64) (norm, lr float64, stepped bool, err error) {
	if err := j.sumGradients(ctx, opt); err != nil {
		return 0, 0, false, fmt.Errorf("gradient all-reduce: %w", err)
	}
	norm, err = clipOrMeasure(ctx, opt, maxNorm)
	switch {
	case errors.Is(err, policy.ErrNonFinite):
		return norm, 0, false, nil
	case err != nil:
		return norm, 0, false, fmt.Errorf("clip: %w", err)
	}
	if lr, err = stepOptimizer(ctx, opt); err != nil {
		return norm, 0, false, fmt.Errorf("optimizer: %w", err)
	}
	return norm, lr, true, nil
}

// publishDue is stage 5's publication: with TrainerParts.Sync, every
// SyncEvery steps, the samplers get the new weights as the version of
// the steps done. A failure leaves the step counted; the next step
// publishes again before its rollout.
func (t *Trainer) publishDue(ctx context.Context, m *StepMetrics) error {
	if t.parts.Sync == nil || t.stepsDone%t.cfg.syncEvery() != 0 {
		return nil
	}
	secs, err := t.publish(ctx)
	m.SyncSeconds += secs
	return err
}

// clock is stage 6's times: the step's own (from start), the wall time
// since the previous step ended, and its training interval (from
// trainStart), against which later steps' rollouts measure their overlap.
func (t *Trainer) clock(m *StepMetrics, start, trainStart time.Time) {
	now := time.Now()
	t.trainIntervals = append(t.trainIntervals, [2]time.Time{trainStart, now})
	if len(t.trainIntervals) > t.cfg.MaxStaleness+2 {
		t.trainIntervals = t.trainIntervals[1:]
	}
	m.StepSeconds = now.Sub(start).Seconds()
	m.WallSeconds = m.StepSeconds
	if !t.lastEnd.IsZero() {
		m.WallSeconds = now.Sub(t.lastEnd).Seconds()
	}
	t.lastEnd = now
}

// chunks cuts n items into consecutive ranges of size at most k.
func chunks(n, k int) [][2]int {
	var r [][2]int
	for lo := 0; lo < n; lo += k {
		r = append(r, [2]int{lo, min(lo+k, n)})
	}
	return r
}
