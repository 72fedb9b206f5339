package agentrl

import (
	"errors"
	"fmt"
	"math"

	"github.com/agentrl/agentrl/advantage"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/reward"
	"gorgonia.org/tensor"
)

// ErrTrainerConfig is wrapped by every error of TrainerConfig.Validate and
// SFTConfig.Validate; the message names the field.
var ErrTrainerConfig = errors.New("agentrl: invalid trainer configuration")

// OldLogProbsSource says where the PPO ratio's old log-probabilities
// come from (TrainerConfig.OldLogProbs).
type OldLogProbsSource string

// Old log-probability sources of TrainerConfig.OldLogProbs.
const (
	// OldLogProbsRecompute scores the rollout with the trainable policy
	// before the first update, as verl's actor compute_log_prob does: the
	// PPO ratio then compares the policy with itself at rollout time, and
	// sampler/trainer numerical mismatch does not enter it.
	OldLogProbsRecompute OldLogProbsSource = "recompute"
	// OldLogProbsRollout takes the sampler's log-probabilities
	// (rollout.Trajectory.LogProbs) as the old policy, saving one forward
	// pass (verl's use of rollout log-probs in "bypass" mode).
	OldLogProbsRollout OldLogProbsSource = "rollout"
)

// FilterMetric names the per-trajectory value whose variation within a
// group dynamic sampling requires (verl's algorithm.filter_groups.metric).
type FilterMetric string

// Dynamic-sampling metrics of DynamicSamplingConfig.Metric.
const (
	// FilterByAcc keeps groups whose reward.Output.Acc varies.
	FilterByAcc FilterMetric = "acc"
	// FilterByScore keeps groups whose reward.Output.Score varies.
	FilterByScore FilterMetric = "score"
)

// DynamicSamplingConfig configures dynamic sampling (DAPO §3.2; verl's
// algorithm.filter_groups): generation batches are added to a step until
// PromptsPerStep groups whose Metric varies are collected.
type DynamicSamplingConfig struct {
	// Metric is FilterByAcc (also when empty) or FilterByScore (verl's
	// filter_groups.metric).
	Metric FilterMetric
	// MaxGenBatches bounds the generation batches per step, after which
	// the step fails with dataset.ErrTooManyGenBatches; 0 means
	// unbounded (verl's filter_groups.max_num_gen_batches).
	MaxGenBatches int
}

// metric returns the metric, FilterByAcc when empty.
func (d DynamicSamplingConfig) metric() FilterMetric {
	if d.Metric == "" {
		return FilterByAcc
	}
	return d.Metric
}

// TrainerConfig configures a Trainer: the RL algorithm, the batch
// geometry and the optimiser. Names follow verl's ppo_trainer.yaml where
// verl has the knob. Start from a preset (GRPOTCR, DAPO, DrGRPO) and
// adjust; Validate says what is wrong, naming the field.
//
// The conventions are those of loss.Config and advantage.Config: a zero
// field means its default (or, for a single coefficient or bound such as
// MaxGradNorm and MaxStaleness, that the feature is off); an optional
// feature with settings of its own is a pointer to its configuration,
// nil meaning off (Overlong, DynamicSampling, LoRA); and the variants are
// named inside their configurations (Loss.Mode, Advantage.Estimator).
type TrainerConfig struct {
	// Advantage names the estimator and holds its hyper-parameters
	// (verl's algorithm.adv_estimator, norm_adv_by_std_in_grpo, gamma and
	// lam). Advantage.Estimator is a built-in name (advantage.GRPO,
	// advantage.DrGRPO, advantage.RLOO, ...) or one registered in
	// TrainerParts.Estimators; empty means "grpo". gae and remax need
	// critic values or greedy baselines, which the Trainer does not
	// produce.
	Advantage advantage.Config
	// Loss names the policy objective (Loss.Mode) and holds its
	// aggregation, clipping, KL and entropy terms (verl's
	// actor_rollout_ref.actor.* policy-loss knobs).
	Loss loss.Config

	// PromptsPerStep is the number of prompts (groups) in one training
	// batch: verl's data.train_batch_size.
	PromptsPerStep int
	// SamplesPerPrompt is the group size: verl's rollout.n.
	SamplesPerPrompt int
	// MiniBatchSize is the number of trajectories per optimiser update
	// (verl's ppo_mini_batch_size × rollout.n; here counted in
	// trajectories). 0 means the whole batch: one update per epoch.
	MiniBatchSize int
	// MicroBatchSize is the number of trajectories per forward/backward
	// pass; gradients of a mini-batch's micro-batches are accumulated
	// (verl's ppo_micro_batch_size_per_gpu). 0 means MiniBatchSize. As in
	// verl's dp_actor, each micro-batch's loss is aggregated on its own
	// and weighted by its share of the mini-batch's trajectories, so with
	// "token-mean" and responses of unequal length the accumulated loss
	// differs slightly from a token-mean over the whole mini-batch.
	MicroBatchSize int
	// PPOEpochs is the number of passes over the batch (verl's
	// ppo_epochs); 0 means 1.
	PPOEpochs int
	// ShuffleMiniBatches reorders the trajectories of each epoch before
	// cutting mini-batches (verl's actor.shuffle), from a generator seeded
	// by Seed, the step and the epoch.
	ShuffleMiniBatches bool

	// Sampling holds the sampling parameters of every rollout turn. Its
	// Temperature also divides the logits when the trainer recomputes
	// log-probabilities, as verl does. Seed is ignored: the trainer seeds
	// every request from Seed and the step, so that a step's rollout is
	// reproducible and a resumed run samples what an uninterrupted one
	// would (given a sampler that honours SampleParams.Seed).
	Sampling lm.SampleParams
	// OldLogProbs is OldLogProbsRecompute (also when empty) or
	// OldLogProbsRollout. With Loss.TISCap > 0, or a
	// Loss.RolloutCorrection that weights or rejects, the sampler's
	// log-probabilities also enter the loss as RolloutLogProbs. In
	// RolloutCorrection's bypass mode the sampler's log-probabilities are
	// the old ones (verl's bypass skips the recomputation): leave it
	// empty or OldLogProbsRollout. When the trainer recomputes and the
	// sampler recorded its log-probabilities, every step's metrics hold
	// the rollout-vs-trainer mismatch (loss.MismatchMetrics, verl's
	// rollout_corr/ names).
	OldLogProbs OldLogProbsSource

	// Optimizer configures AdamW, its learning rate schedule included
	// (the schedule counts optimiser updates, not training steps).
	Optimizer policy.AdamWConfig
	// MaxGradNorm clips the global gradient norm before each update
	// (verl's actor.grad_clip); 0 disables clipping (the norm is still
	// measured).
	MaxGradNorm float64

	// Overlong enables DAPO's soft overlong punishment when not nil. Its
	// MaxLen is the response budget the rollout engine enforces
	// (rollout.Config.MaxResponseTokens, verl's
	// data.max_response_length), the one source of truth: leave MaxLen 0
	// and NewTrainer takes it from TrainerParts.Engine. A non-zero MaxLen
	// that differs from the engine's budget is an error, because a
	// penalty zone the engine never lets a response reach never fires.
	Overlong *reward.OverlongConfig

	// DynamicSampling, when set, keeps generating batches until
	// PromptsPerStep groups whose metric varies are collected (DAPO §3.2;
	// verl's algorithm.filter_groups with enable: true). nil trains on
	// one generation batch per step.
	DynamicSampling *DynamicSamplingConfig

	// Reward bounds the reward computation: parallelism and per-item
	// deadline (reward.Batch).
	Reward reward.BatchOptions

	// Seed fixes the rollout seeds and mini-batch shuffles.
	Seed uint64

	// LoRA, when set, trains low-rank adapters instead of the full
	// weights (TRL's peft_config, verl's actor_rollout_ref.model.lora_rank
	// and lora_alpha): NewTrainer attaches them to the Policy, which must
	// be a LoRAPolicy (*policy.Model is), drawing A from Seed; a Policy
	// that already carries an adapter (policy.Model.LoadAdapter, a resumed
	// run) must carry this one. nil trains every weight.
	LoRA *policy.LoRAConfig

	// MaxStaleness is η, how many policy versions (steps) the weights
	// that sampled a trajectory may lag behind the policy that trains on
	// it (AReaL's max_head_offpolicyness). 0 is synchronous: each step
	// samples with the weights it trains. With η ≥ 1 the rollouts of the
	// next steps run while the current step trains, on the samplers of
	// TrainerParts.Sync, and the batch of step k starts sampling only once
	// the samplers hold version k−1−η or newer, so no token is staler
	// than η (the bound is checked token by token: a turn that a weight
	// update cut and the rollout continued under the new weights, a
	// partial rollout of fleet.Config.PartialRollouts, holds tokens of
	// several versions, each with its own version's log-probability). The PPO ratio then compares with the old policy as
	// OldLogProbs says; Loss.TISCap corrects for the sampler's weights
	// (decoupled PPO, verl's rollout_is with a token-level truncated
	// weight).
	MaxStaleness int
	// SyncEvery is K: with TrainerParts.Sync the trainer publishes its
	// weights after every K steps; 0 means 1. K must not exceed
	// MaxStaleness+1, or the staleness bound could not hold.
	SyncEvery int
}

// Validate reports the first unusable field, wrapping ErrTrainerConfig
// (and the sub-package's own error where it decided). It resolves
// Advantage.Estimator and Loss.Mode among the built-in estimators and
// loss modes; a configuration that names the user's own is checked with
// ValidateWith, as NewTrainer does with TrainerParts' registries.
func (c TrainerConfig) Validate() error { return c.ValidateWith(nil, nil) }

// ValidateWith is Validate with Loss.Mode resolved in losses and
// Advantage.Estimator in estimators; nil means the built-in modes
// (loss.NewRegistry) and estimators (advantage.NewRegistry).
func (c TrainerConfig) ValidateWith(losses *loss.Registry, estimators *advantage.Registry) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: TrainerConfig.%s: %s", ErrTrainerConfig, field, fmt.Sprintf(format, args...))
	}
	est := c.Advantage.Estimator
	if est == "" {
		est = advantage.GRPO
	}
	if _, ok := estimators.Lookup(est); !ok {
		return bad("Advantage.Estimator", "unknown estimator %q (known: %v)", est, estimators.Names())
	}
	if est == advantage.GAE || est == advantage.ReMax {
		return bad("Advantage.Estimator", "%q needs critic values or greedy baselines, which Trainer does not produce", est)
	}
	if err := c.Advantage.Validate(); err != nil {
		return fmt.Errorf("%w: TrainerConfig.Advantage: %w", ErrTrainerConfig, err)
	}
	if err := validateLoss(c.Loss, losses); err != nil {
		return fmt.Errorf("%w: TrainerConfig.Loss: %w", ErrTrainerConfig, err)
	}
	if c.LoRA != nil {
		if err := c.LoRA.Validate(); err != nil {
			return fmt.Errorf("%w: TrainerConfig.LoRA: %w", ErrTrainerConfig, err)
		}
	}
	switch {
	case c.PromptsPerStep <= 0:
		return bad("PromptsPerStep", "%d, want > 0", c.PromptsPerStep)
	case c.SamplesPerPrompt <= 0:
		return bad("SamplesPerPrompt", "%d, want > 0", c.SamplesPerPrompt)
	case c.MiniBatchSize < 0:
		return bad("MiniBatchSize", "%d, want ≥ 0", c.MiniBatchSize)
	case c.MicroBatchSize < 0:
		return bad("MicroBatchSize", "%d, want ≥ 0", c.MicroBatchSize)
	case c.PPOEpochs < 0:
		return bad("PPOEpochs", "%d, want ≥ 0", c.PPOEpochs)
	case !finiteNonNeg(c.MaxGradNorm):
		return bad("MaxGradNorm", "%v, want finite and ≥ 0", c.MaxGradNorm)
	case c.Reward.Limit < 0:
		return bad("Reward.Limit", "%d, want ≥ 0", c.Reward.Limit)
	case c.Reward.ItemTimeout < 0:
		return bad("Reward.ItemTimeout", "%v, want ≥ 0", c.Reward.ItemTimeout)
	case c.MaxStaleness < 0:
		return bad("MaxStaleness", "%d, want ≥ 0", c.MaxStaleness)
	case c.SyncEvery < 0:
		return bad("SyncEvery", "%d, want ≥ 0", c.SyncEvery)
	case c.syncEvery() > c.MaxStaleness+1:
		return bad("SyncEvery", "%d exceeds MaxStaleness+1 = %d: step k must sample with version k−1−MaxStaleness or newer, which publishing every %d steps does not provide", c.SyncEvery, c.MaxStaleness+1, c.SyncEvery)
	}
	batch := c.PromptsPerStep * c.SamplesPerPrompt
	mini := c.miniBatch()
	if mini > batch {
		return bad("MiniBatchSize", "%d exceeds the batch of %d trajectories (PromptsPerStep×SamplesPerPrompt)", mini, batch)
	}
	if batch%mini != 0 {
		return bad("MiniBatchSize", "%d does not divide the batch of %d trajectories", mini, batch)
	}
	if micro := c.microBatch(); micro > mini || mini%micro != 0 {
		return bad("MicroBatchSize", "%d does not divide MiniBatchSize %d", micro, mini)
	}
	switch c.OldLogProbs {
	case "", OldLogProbsRecompute, OldLogProbsRollout:
	default:
		return bad("OldLogProbs", "%q, want %q or %q", c.OldLogProbs, OldLogProbsRecompute, OldLogProbsRollout)
	}
	if c.Loss.RolloutCorrection.BypassMode && c.OldLogProbs == OldLogProbsRecompute {
		return bad("OldLogProbs", "%q with Loss.RolloutCorrection.BypassMode, which takes the sampler's log-probabilities as the old ones: leave it empty or %q", c.OldLogProbs, OldLogProbsRollout)
	}
	if ds := c.DynamicSampling; ds != nil {
		switch ds.Metric {
		case "", FilterByAcc, FilterByScore:
		default:
			return bad("DynamicSampling.Metric", "%q, want %q or %q", ds.Metric, FilterByAcc, FilterByScore)
		}
		if ds.MaxGenBatches < 0 {
			return bad("DynamicSampling.MaxGenBatches", "%d, want ≥ 0", ds.MaxGenBatches)
		}
	}
	if p := c.Sampling; p.Temperature < 0 || math.IsNaN(p.Temperature) || math.IsInf(p.Temperature, 0) {
		return bad("Sampling.Temperature", "%v, want finite and ≥ 0", p.Temperature)
	}
	if err := lm.CheckSampleParams(c.Sampling); err != nil {
		return fmt.Errorf("%w: TrainerConfig.Sampling: %w", ErrTrainerConfig, err)
	}
	if err := validateAdamW(c.Optimizer); err != nil {
		return fmt.Errorf("%w: TrainerConfig.Optimizer.%w", ErrTrainerConfig, err)
	}
	if c.Overlong != nil {
		// The budget comes from the engine when MaxLen is 0; check the
		// other fields against the smallest budget they allow.
		o := *c.Overlong
		if o.MaxLen == 0 {
			o.MaxLen = max(o.Buffer, 1)
		}
		if err := o.Validate(); err != nil {
			return fmt.Errorf("%w: TrainerConfig.Overlong: %w", ErrTrainerConfig, err)
		}
	}
	return nil
}

func (c TrainerConfig) batchSize() int { return c.PromptsPerStep * c.SamplesPerPrompt }

func (c TrainerConfig) miniBatch() int {
	if c.MiniBatchSize == 0 {
		return c.batchSize()
	}
	return c.MiniBatchSize
}

func (c TrainerConfig) microBatch() int {
	if c.MicroBatchSize == 0 {
		return c.miniBatch()
	}
	return c.MicroBatchSize
}

func (c TrainerConfig) epochs() int { return max(c.PPOEpochs, 1) }

func (c TrainerConfig) syncEvery() int { return max(c.SyncEvery, 1) }

func (c TrainerConfig) recompute() bool {
	return c.OldLogProbs != OldLogProbsRollout && !c.Loss.RolloutCorrection.BypassMode
}

// overlong returns the overlong configuration with MaxLen resolved
// against budget, the engine's response budget (0 when the engine has
// none): MaxLen 0 takes the budget, and a MaxLen that disagrees with a
// budget is an error.
func (c TrainerConfig) overlong(budget int) (reward.OverlongConfig, error) {
	o := *c.Overlong
	switch {
	case o.MaxLen == 0 && budget == 0:
		return o, errors.New("MaxLen is 0 and the rollout engine has no response budget (rollout.Config.MaxResponseTokens is 0): the penalty needs one")
	case o.MaxLen == 0:
		o.MaxLen = budget
	case budget != 0 && o.MaxLen != budget:
		return o, fmt.Errorf("MaxLen %d differs from the rollout engine's response budget %d (rollout.Config.MaxResponseTokens); leave MaxLen 0 to use the engine's", o.MaxLen, budget)
	}
	return o, o.Validate()
}

// validateLoss checks cfg by the loss package's own rules, with the
// mode resolved in reg (nil: the built-ins): it evaluates the objective
// on a one-token batch, which runs loss's validation and the variant's
// own checks, and nothing else of consequence.
func validateLoss(cfg loss.Config, reg *loss.Registry) error {
	one := func(v float32) *tensor.Dense {
		return tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]float32{v}))
	}
	b := loss.Batch{LogProbs: one(-1), OldLogProbs: one(-1), Advantages: one(1), Mask: one(1), Entropy: one(0.5)}
	if cfg.KLCoef != 0 {
		b.RefLogProbs = one(-1)
	}
	if cfg.NeedsRolloutLogProbs() {
		b.RolloutLogProbs = one(-1)
	}
	_, err := loss.NewComputer(reg).Compute(cfg, b)
	return err
}

func validateAdamW(c policy.AdamWConfig) error {
	c = c.WithDefaults() // zero LR, Eps and betas are torch's, as NewAdamW applies them
	switch {
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("LR: %v, want finite and > 0", c.LR)
	case !(c.Beta1 >= 0 && c.Beta1 < 1):
		return fmt.Errorf("Beta1: %v, want in [0, 1)", c.Beta1)
	case !(c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("Beta2: %v, want in [0, 1)", c.Beta2)
	case !(c.Eps > 0) || math.IsInf(c.Eps, 0):
		return fmt.Errorf("Eps: %v, want finite and > 0", c.Eps)
	case !finiteNonNeg(c.WeightDecay):
		return fmt.Errorf("WeightDecay: %v, want finite and ≥ 0", c.WeightDecay)
	}
	return nil
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }
