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
	"github.com/agentrl/agentrl/tool"
	"gorgonia.org/tensor"
)

// ErrTrainer is wrapped by errors of NewTrainer for missing or inconsistent
// parts, and of Step for results of the parts that break their contracts
// (a Forward whose output does not match its input, trajectories without
// sampler log-probabilities where they are needed).
var ErrTrainer = errors.New("agentrl: trainer")

// Prompt is one training prompt: what the rollout engine continues, and
// what the reward function checks the response against.
type Prompt struct {
	// ID names the prompt in logs; it need not be unique. The trainer
	// gives each rollout group its own id.
	ID string
	// The prompt, in exactly one of the forms rollout.Request takes:
	// token ids (chat template applied), text, or messages.
	Tokens   []int
	Text     string
	Messages []rollout.Message
	// Tools the model may call; nil means the engine's.
	Tools []tool.Tool
	// GroundTruth, DataSource and Extra are passed to the reward function.
	GroundTruth string
	DataSource  string
	Extra       map[string]any
}

// RewardInput is what a reward function sees of trajectory tr, sampled
// for p: the response text with the tool results as the model saw them,
// p's ground truth, data source and extra info, the turn and tool-call
// counts, the tools' own rewards, and the generated and tool-result token
// counts that overlong shaping measures. The trainer, evaluation and the
// example programs all score trajectories through it.
func (p *Prompt) RewardInput(tr *rollout.Trajectory) reward.Input {
	return reward.Input{
		Response: tr.Response, GroundTruth: p.GroundTruth, DataSource: p.DataSource, Extra: p.Extra,
		Turns: len(tr.Turns), ToolCalls: len(tr.ToolCalls), ToolRewards: tr.ToolRewards(),
		ResponseTokens: tr.SampledTokens(), ToolTokens: tr.ResultTokens(),
	}
}

// request is the rollout request of n samples of p with params.
func (p *Prompt) request(id string, params lm.SampleParams, n int) rollout.Request {
	return rollout.Request{ID: id, Prompt: p.Tokens, PromptText: p.Text, Messages: p.Messages, Tools: p.Tools, Params: params, N: n}
}

// TrainerParts are the components a Trainer wires together.
type TrainerParts struct {
	// Policy is the model being trained; required.
	Policy lm.Trainable
	// Reference, when set, is a frozen model whose log-probabilities feed
	// the KL loss (forward only); required when Loss.KLCoef > 0.
	Reference lm.Trainable
	// Engine rolls out prompts; required. Build it over a Sampler that
	// shares the Policy's weights (the local model itself, or a server
	// that is synchronised with them), so that rollouts come from the
	// current policy.
	Engine *rollout.Engine
	// Reward scores trajectories; required. With TrainerConfig.Overlong
	// the trainer adds the overlong penalty to its score.
	Reward reward.Func
	// Prompts is the training set; the trainer draws PromptsPerStep of
	// them per generation batch, shuffled epoch by epoch with Seed
	// (dataset.Sampler, dropping an epoch's short last batch as verl
	// does).
	Prompts []Prompt
	// Metrics, when set, receives every step's StepMetrics.Map() (a
	// *metrics.Logger writes them to a JSON Lines file).
	Metrics MetricsSink
	// Losses resolves TrainerConfig.Loss.Mode: a loss.Registry holding
	// the program's own objectives (loss.NewRegistry, then Register)
	// beside the built-in modes. nil means the built-in modes.
	Losses *loss.Registry
	// Sync, when set, publishes the policy's weights to the samplers of
	// the rollouts (a *fleet.Fleet, which is then the Engine's Sampler):
	// before the first step of a run and after every SyncEvery steps,
	// as policy version = steps done. The Policy must then be a
	// lm.Saver (*policy.Model is). Required when MaxStaleness > 0.
	Sync WeightSync
	// Estimators resolves TrainerConfig.Advantage.Estimator: an
	// advantage.Registry holding the program's own estimators
	// (advantage.NewRegistry, then Register). nil means the built-in
	// estimators.
	Estimators *advantage.Registry
	// DataParallel, when its Comm has several ranks, makes this trainer
	// one rank of a data-parallel job (see DataParallel and the
	// README's "Several GPUs and machines"): each step's prompts are
	// shared among the ranks in whole groups, so that group-relative
	// advantages are those of one process; each rank rolls out, scores
	// and trains on its groups with TrainerConfig.MicroBatchSize
	// trajectories per pass (at most its share of a mini-batch); the
	// gradients are summed across the ranks before every update;
	// metrics are reduced (StepMetrics.WorldSize says how); rank 0
	// alone logs metrics, writes checkpoints and publishes weights. Every rank must be given the
	// same configuration, prompts and starting weights (the first step
	// checks the configuration and gives every rank rank 0's weights).
	// PromptsPerStep must be a multiple of the number of ranks and,
	// without dynamic sampling, each mini-batch must hold a multiple of
	// SamplesPerPrompt × ranks trajectories; then a step with one rank
	// per process equals one process's step over the whole batch, up to
	// the float32 rounding of the gradient sum's order (with
	// ShuffleMiniBatches or DynamicSampling, each rank shuffles or
	// filters its own groups, which one process would mix).
	DataParallel DataParallel
}

// Trainer runs reinforcement-learning steps: rollout, rewards, advantages,
// optional dynamic sampling, and PPO epochs of clipped policy-gradient
// updates, as verl's RayPPOTrainer.fit and dp_actor.update_policy do.
// A Trainer is not safe for concurrent use.
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
	// trained holds the recent steps' training intervals, for the
	// overlap metric; lastEnd is when the previous step ended.
	trained [][2]time.Time
	lastEnd time.Time
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
	case parts.Engine == nil:
		return nil, fmt.Errorf("%w: TrainerParts.Engine is nil", ErrTrainer)
	case parts.Reward == nil:
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
		oc, err := cfg.overlong(parts.Engine.MaxResponseTokens())
		if err != nil {
			return nil, fmt.Errorf("%w: TrainerConfig.Overlong: %w", ErrTrainerConfig, err)
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
	opt, err := newOptimizer(parts.Policy, cfg.Optimizer)
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

// sample is one trajectory of a step with what the trainer learns about it.
type sample struct {
	traj   rollout.Trajectory
	prompt *Prompt
	out    reward.Output
	group  string
	// Per-token arrays aligned with traj.Tokens[traj.PromptLen:].
	adv, old, ref []float32
}

func (s *sample) respMask() []float32 { return s.traj.Mask[s.traj.PromptLen:] }

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

// trainStep is Step without the metrics log.
func (t *Trainer) trainStep(ctx context.Context) (StepMetrics, error) {
	start := time.Now()
	m := StepMetrics{Step: t.stepsDone + 1, PolicyVersion: t.stepsDone, WorldSize: t.job.size()}
	if err := t.job.join(ctx, t.opt, t.fingerprint()); err != nil {
		return m, fmt.Errorf("agentrl: step %d: data parallel: %w", m.Step, err)
	}

	// A run's first step, and the first after a resume, make sure the
	// samplers hold the policy being trained.
	if t.parts.Sync != nil && t.published != t.stepsDone {
		secs, err := t.publish(ctx)
		m.SyncSeconds += secs
		if err != nil {
			return m, err
		}
	}
	p, err := t.nextBatch(ctx)
	if err != nil {
		return m, err
	}
	batch := p.batch
	m.GenBatches, m.KeptGroups = p.genBatches, p.keptGroups
	m.RolloutSeconds = p.end.Sub(p.start).Seconds()
	m.OverlapSeconds = t.overlap(p.start, p.end)
	m.observeBatch(batch, t.cfg)
	if m.RolloutSeconds > 0 {
		m.RolloutTokensPerSec = float64(m.generatedTokens) / m.RolloutSeconds
	}
	if err := t.staleness(batch, &m); err != nil {
		return m, err
	}

	trainStart := time.Now()
	if err := t.advantages(batch); err != nil {
		return m, err
	}
	if err := t.oldAndRef(ctx, batch); err != nil {
		return m, err
	}
	updateStart := time.Now()
	if err := t.update(ctx, batch, &m); err != nil {
		return m, err
	}
	now := time.Now()
	m.TrainSeconds = now.Sub(updateStart).Seconds()
	if m.TrainSeconds > 0 {
		m.TrainTokensPerSec = float64(m.trainedTokens) / m.TrainSeconds
	}
	t.stepsDone++
	t.samplerState = p.after
	if t.parts.Sync != nil && t.stepsDone%t.cfg.syncEvery() == 0 {
		secs, err := t.publish(ctx)
		m.SyncSeconds += secs
		if err != nil {
			return m, err
		}
		now = time.Now()
	}
	t.trained = append(t.trained, [2]time.Time{trainStart, now})
	if len(t.trained) > t.cfg.MaxStaleness+2 {
		t.trained = t.trained[1:]
	}
	m.StepSeconds = now.Sub(start).Seconds()
	m.WallSeconds = m.StepSeconds
	if !t.lastEnd.IsZero() {
		m.WallSeconds = now.Sub(t.lastEnd).Seconds()
	}
	t.lastEnd = now
	if err := t.job.stepMetrics(ctx, &m, batch); err != nil {
		return m, fmt.Errorf("agentrl: step %d: reducing the metrics: %w", m.Step, err)
	}
	return m, nil
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

// generate rolls out and scores one generation batch of the step after
// stepsDone completed steps.
func (t *Trainer) generate(ctx context.Context, stepsDone, genBatch int) ([]*sample, error) {
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
	trajs, err := t.parts.Engine.Run(ctx, reqs)
	if err != nil {
		return nil, fmt.Errorf("agentrl: step %d: %w", stepsDone+1, rolloutError(err))
	}
	if len(trajs) != len(idx)*t.cfg.SamplesPerPrompt {
		return nil, fmt.Errorf("%w: step %d: rollout returned %d trajectories for %d requests of %d samples", ErrTrainer, stepsDone+1, len(trajs), len(idx), t.cfg.SamplesPerPrompt)
	}
	inputs := make([]reward.Input, len(trajs))
	samples := make([]*sample, len(trajs))
	for i := range trajs {
		tr := &trajs[i]
		if tr.Request < 0 || tr.Request >= len(idx) || len(tr.Mask) != len(tr.Tokens) || tr.PromptLen > len(tr.Tokens) {
			return nil, fmt.Errorf("%w: step %d: trajectory %d is malformed (request %d, %d tokens, %d mask, prompt %d)", ErrTrainer, stepsDone+1, i, tr.Request, len(tr.Tokens), len(tr.Mask), tr.PromptLen)
		}
		p := &t.parts.Prompts[idx[tr.Request]]
		samples[i] = &sample{traj: *tr, prompt: p, group: groups[tr.Request]}
		inputs[i] = p.RewardInput(tr)
	}
	outs, err := reward.Batch(ctx, t.reward, inputs, t.cfg.Reward)
	if err != nil {
		return nil, fmt.Errorf("agentrl: step %d: reward: %w", stepsDone+1, err)
	}
	for i, o := range outs {
		if math.IsNaN(o.Score) || math.IsInf(o.Score, 0) {
			return nil, fmt.Errorf("%w: step %d: reward of trajectory %d (prompt %q) is %v", ErrTrainer, stepsDone+1, i, samples[i].prompt.ID, o.Score)
		}
		samples[i].out = o
	}
	return samples, nil
}

// collect gathers the batch of the step after stepsDone completed steps: one
// generation batch, or with dynamic sampling as many as it takes to fill
// PromptsPerStep groups whose metric varies. It returns the batch, the
// generation batches it took and the groups kept.
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

// advantages fills s.adv from the estimator; groups are the rollout
// groups (one per prompt and generation batch).
func (t *Trainer) advantages(batch []*sample) error {
	in := advantage.Input{
		Scores: make([]float64, len(batch)),
		Groups: make([]string, len(batch)),
		Mask:   make([][]float32, len(batch)),
	}
	for i, s := range batch {
		in.Scores[i] = s.out.Score
		in.Groups[i] = s.group
		in.Mask[i] = s.respMask()
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

// chunks cuts n items into consecutive ranges of size at most k.
func chunks(n, k int) [][2]int {
	var r [][2]int
	for lo := 0; lo < n; lo += k {
		r = append(r, [2]int{lo, min(lo+k, n)})
	}
	return r
}

// oldAndRef fills the old (and reference) log-probabilities of the
// response tokens before any update, as verl's compute_log_prob and
// compute_ref_log_prob do.
func (t *Trainer) oldAndRef(ctx context.Context, batch []*sample) error {
	needRollout := !t.cfg.recompute() || t.cfg.Loss.TISCap > 0
	for i, s := range batch {
		if needRollout && len(s.traj.LogProbs) != len(s.traj.Tokens) {
			return fmt.Errorf("%w: step %d: trajectory %d (prompt %q) has no sampler log-probabilities, which OldLogProbs %q or TISCap need", ErrTrainer, t.stepsDone+1, i, s.prompt.ID, t.cfg.OldLogProbs)
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

// update runs the PPO epochs: mini-batches of MiniBatchSize trajectories,
// each one optimiser update after accumulating the gradients of its
// micro-batches.
func (t *Trainer) update(ctx context.Context, batch []*sample, m *StepMetrics) error {
	var acc metricMean
	var gradNorms, lrs []float64
	order := make([]int, len(batch))
	for ep := range t.cfg.epochs() {
		for i := range order {
			order[i] = i
		}
		if t.cfg.ShuffleMiniBatches {
			rng := rand.New(rand.NewPCG(t.cfg.Seed, uint64(t.stepsDone)<<20|uint64(ep)))
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		for _, mb := range chunks(len(batch), t.cfg.miniBatch()/t.job.size()) {
			mini := make([]*sample, 0, mb[1]-mb[0])
			for _, k := range order[mb[0]:mb[1]] {
				mini = append(mini, batch[k])
			}
			if err := t.opt.ZeroGrad(); err != nil {
				return fmt.Errorf("agentrl: step %d: %w", t.stepsDone+1, err)
			}
			// Each micro-batch's loss is weighted by its share of the
			// whole mini-batch, on every rank: the sum over the ranks is
			// one process's gradient.
			for _, c := range chunks(len(mini), t.localMicro()) {
				res, tokens, err := t.microStep(ctx, mini[c[0]:c[1]], float32(c[1]-c[0])/float32(len(mini)*t.job.size()))
				if err != nil {
					return fmt.Errorf("agentrl: step %d: epoch %d: %w", t.stepsDone+1, ep, err)
				}
				m.trainedTokens += tokens
				acc.add(res.Metrics)
			}
			if err := t.job.sumGradients(ctx, t.opt); err != nil {
				return fmt.Errorf("agentrl: step %d: epoch %d: gradient all-reduce: %w", t.stepsDone+1, ep, err)
			}
			norm, err := clipOrMeasure(t.opt, t.cfg.MaxGradNorm)
			gradNorms = append(gradNorms, norm)
			if errors.Is(err, policy.ErrNonFinite) {
				// verl's dp_actor skips the update when the norm is not
				// finite; the step goes on and reports it.
				m.SkippedUpdates++
				continue
			} else if err != nil {
				return fmt.Errorf("agentrl: step %d: clip: %w", t.stepsDone+1, err)
			}
			lr, err := t.opt.Step()
			if err != nil {
				return fmt.Errorf("agentrl: step %d: optimizer: %w", t.stepsDone+1, err)
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
	if t.cfg.Loss.TISCap > 0 {
		b.RolloutLogProbs = pad(resp(func(s *sample) []float32 { return s.traj.LogProbs }), starts)
	}
	return b, err
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
