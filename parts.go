package agentrl

import (
	"context"
	"io"

	"github.com/agentrl/agentrl/advantage"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// TrainerParts are the components a Trainer wires together.
type TrainerParts struct {
	// Policy is the model being trained; required.
	Policy lm.Trainable
	// Reference, when set, is a frozen model whose log-probabilities feed
	// the KL loss (forward only); required when Loss.KLCoef > 0.
	Reference lm.Trainable
	// Engine rolls out prompts; required unless Source is set. Build it
	// over a Sampler that shares the Policy's weights (the local model
	// itself, or a server that is synchronised with them), so that
	// rollouts come from the current policy.
	Engine *rollout.Engine
	// Source, set instead of Engine, rolls out prompts some other way:
	// a *record.Source runs an agent program of its own against an
	// OpenAI-compatible endpoint and returns the token-faithful
	// trajectories of what it sampled, with the rewards the episodes
	// posted. Validation (Trainer.Validate) needs an Engine.
	Source RolloutSource
	// Reward scores trajectories one by one; GroupReward scores the
	// trajectories of one rollout group (the SamplesPerPrompt samples of
	// one prompt) together, as a judge ranking them does
	// (reward/judge.Judge.Ranking), through reward.BatchGroups. Set
	// exactly one of them, or, with a Source, none: then every episode
	// must post its reward (posted rewards are used as posted, and one
	// of these scores the trajectories whose episodes posted none). With TrainerConfig.Overlong the trainer adds
	// the overlong penalty to each trajectory's score (reward.WithOverlong,
	// for a group reward through reward.ShapeGroup). Validation scores
	// with the same reward, without the penalty.
	Reward      reward.Func
	GroupReward reward.GroupFunc
	// RewardMetrics, when set, is called once per step, after the step's
	// rewards, and the metrics it returns join the step's row as they
	// are; Validator calls it after each validation's rewards and adds
	// them to the validation's row under "val-aux/". A judge's statistics
	// join the rows with
	//
	//	RewardMetrics: func() map[string]float64 { return j.TakeStats().Metrics("judge/") },
	//
	// With MaxStaleness ≥ 1 the rollouts of later steps are scored while
	// a step trains, so a step's row may count some of their calls. In a
	// data-parallel job each rank calls its own, and rank 0's are logged.
	RewardMetrics func() map[string]float64
	// GroundTruthOptional declares that the reward scores responses
	// without a reference: a judge's ranking, a rule on the format, a
	// tool's own reward. Without it NewTrainer (and Validate) refuse
	// prompts whose GroundTruth is empty: a reward that needs one (the
	// math and code rewards of package reward) scores every response to
	// such a prompt alike, as wrong, which teaches nothing. With a
	// Source, whose episodes post their rewards, it is implied.
	GroundTruthOptional bool
	// Prompts is the training set; the trainer draws PromptsPerStep of
	// them per generation batch, shuffled epoch by epoch with Seed
	// (dataset.Sampler, dropping an epoch's short last batch as verl
	// does). Prompts given as Tokens are checked against the context
	// (ContextLength) before any work; prompts given as Text or Messages
	// are encoded by the engine and cannot be (RenderPrompts makes
	// Tokens of them).
	Prompts []Prompt
	// ContextLength is the model's context in tokens, prompt and response
	// together: config.json's max_position_embeddings, a server's
	// max_model_len. 0 takes the Policy's when it is a *policy.Model,
	// and otherwise means unknown (nothing is checked). NewTrainer
	// refuses an engine whose response budget
	// (rollout.Config.MaxResponseTokens) fills the context, and leaves
	// out the prompts (given as Tokens) that would leave less than the
	// budget for their responses, as verl's filter_overlong_prompts does:
	// a response cut by the context instead of its budget would end
	// early, and the overlong penalty, measured against the budget, would
	// never fire. It says how many it left out on Notes, and every step's
	// metrics count them (data/prompts_left_out).
	ContextLength int
	// Notes, when set, receives the trainer's notes on a run that cannot
	// learn as configured, each at most once per Trainer: greedy
	// sampling with group-relative advantages, a step whose advantages
	// are all 0 (every group's rewards equal), prompts left out for the
	// context. A program passes its standard error; nil discards them.
	// In a data-parallel job rank 0 alone writes them.
	Notes io.Writer
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

// RolloutSource rolls out a trainer's requests some other way than a
// rollout.Engine (TrainerParts.Source): record.Source is one.
type RolloutSource interface {
	// Rollout returns N trajectories of every request (rollout.Request.N),
	// request-major as rollout.Engine.Run orders them, with their
	// Request and Sample set, and for each either the reward its episode
	// posted or nil (then TrainerParts.Reward scores it).
	Rollout(ctx context.Context, reqs []rollout.Request) ([]rollout.Trajectory, []*reward.Output, error)
}
