package agentrl

import (
	"context"

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
	// Reward scores trajectories; required unless Source is set, and
	// then used for the trajectories whose episodes posted no reward
	// (with none, such a trajectory is an error). With
	// TrainerConfig.Overlong the trainer adds the overlong penalty to
	// its score; posted rewards are used as posted.
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

// RolloutSource rolls out a trainer's requests some other way than a
// rollout.Engine (TrainerParts.Source): record.Source is one.
type RolloutSource interface {
	// Rollout returns N trajectories of every request (rollout.Request.N),
	// request-major as rollout.Engine.Run orders them, with their
	// Request and Sample set, and for each either the reward its episode
	// posted or nil (then TrainerParts.Reward scores it).
	Rollout(ctx context.Context, reqs []rollout.Request) ([]rollout.Trajectory, []*reward.Output, error)
}
