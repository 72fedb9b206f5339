package agentrl

import (
	"fmt"
	"math"

	"github.com/agentrl/agentrl/rollout"
	"gonum.org/v1/gonum/stat"
)

// StepMetrics describes one training step. Map gives them under verl's
// metric names (verl/trainer/ppo/metric_utils.py compute_data_metrics,
// verl/workers/actor/dp_actor.py update_policy), which the default plot
// panels read.
type StepMetrics struct {
	// Step is the 1-based number of the step.
	Step int
	// Trajectories is the number of trajectories trained on.
	Trajectories int
	// RewardMean and RewardStd are the mean and population standard
	// deviation of the sequence scores (shaping included); Acc is the
	// fraction of correct responses (reward.Output.Acc).
	RewardMean, RewardStd, Acc float64
	// ResponseLenMean and ResponseLenMax count the response span's tokens
	// (generated and tool results, verl's response_length).
	ResponseLenMean, ResponseLenMax float64
	// OverlongFrac is the fraction of trajectories cut by a token budget
	// (turn, response or total) rather than ending on their own: verl's
	// response_length/clip_ratio.
	OverlongFrac float64
	// ToolCallsMean is the mean number of tool calls per trajectory, and
	// ToolErrors the number of calls that failed (a malformed call, an
	// unknown tool, a timeout, a call over the limits, or a tool that
	// reported failure).
	ToolCallsMean float64
	ToolErrors    int
	// EnvErrors is the number of trajectories whose environment failed
	// (rollout.Trajectory.EnvErr: an error, a panic, a call past
	// rollout.Config.EnvTimeout, an answer the engine could not use, or a
	// failed Close); TurnRewardMean is the mean over trajectories of the
	// sum of the environment's per-turn rewards.
	EnvErrors      int
	TurnRewardMean float64
	// GenBatches is the number of generation batches the step used (more
	// than 1 only with dynamic sampling) and KeptGroups the groups trained
	// on.
	GenBatches, KeptGroups int
	// AdvantageMean, AdvantageMax and AdvantageMin summarise the
	// advantages of the trained (mask-1) response tokens, as verl's
	// critic/advantages/* do: all three 0 means that the step learned
	// nothing from its rewards.
	AdvantageMean, AdvantageMax, AdvantageMin float64
	// PromptsLeftOut is the number of training prompts the trainer left
	// out because the model's context could not hold them with a whole
	// response budget (TrainerParts.ContextLength).
	PromptsLeftOut int
	// RewardMetrics are those of TrainerParts.RewardMetrics (a judge's
	// requests, tokens, latency), taken after the step's rewards.
	RewardMetrics map[string]float64

	// Loss, Entropy, PGClipFrac, PGClipFracLower, PPOKL and KL are the
	// means over micro-batches of loss.Result.Metrics' "loss", "entropy",
	// "pg_clipfrac", "pg_clipfrac_lower", "ppo_kl" and "kl" (KL is 0
	// without a KL term); LossMetrics holds every key so averaged.
	Loss, Entropy, PGClipFrac, PGClipFracLower, PPOKL, KL float64
	LossMetrics                                           map[string]float64
	// Mismatch is the rollout-vs-trainer mismatch of the step's whole
	// batch, loss.MismatchMetrics of the recomputed and the sampled
	// log-probabilities, under verl's rollout_corr/ names (nil when the
	// trainer does not recompute or the sampler recorded none). Map adds
	// it, and LossMetrics' rollout_corr/ keys, to the step's row.
	Mismatch map[string]float64
	// GradNorm is the mean pre-clipping gradient norm over the updates, LR
	// the learning rate of the last update, Updates the number of
	// optimiser updates and SkippedUpdates those skipped for a non-finite
	// gradient norm.
	GradNorm, LR            float64
	Updates, SkippedUpdates int

	// Throughput and time: generated tokens per second of rollout
	// (rewards included), forward-backward tokens per second of training,
	// and the wall-clock seconds of the rollout, the update and the step.
	RolloutTokensPerSec, TrainTokensPerSec    float64
	RolloutSeconds, TrainSeconds, StepSeconds float64

	// PolicyVersion is the version of the policy the step trained (the
	// steps done before it). StalenessHist counts the trajectories by
	// staleness — how many versions older than PolicyVersion the weights
	// that sampled them were (index 0 to MaxStaleness) — and
	// StalenessMean and StalenessMax summarise it.
	PolicyVersion int
	StalenessHist []int
	StalenessMean float64
	StalenessMax  int
	// StalenessTokenMean is the staleness of the sampled tokens, token
	// by token (each token's own version: a turn that a weight update
	// cut and the rollout continued has tokens of several), averaged
	// over them; PartialTurns counts the turns so continued (partial
	// rollouts, fleet.Config.PartialRollouts).
	StalenessTokenMean float64
	PartialTurns       int
	// OverlapSeconds is the part of the step's rollout that ran while
	// earlier steps trained (0 when synchronous), SyncSeconds the time
	// spent publishing weights, and WallSeconds the time since the
	// previous step ended (the step's own time for the first): with
	// rollouts ahead it is shorter than RolloutSeconds + TrainSeconds.
	OverlapSeconds, SyncSeconds, WallSeconds float64

	// WorldSize is the number of data-parallel ranks (1 alone). With
	// several, the metrics above are the whole job's: counts and sums
	// over every rank's trajectories (means, and the score's population
	// standard deviation, over all of them; maxima of the ranks' maxima;
	// KeptGroups summed, GenBatches the most any rank took), the loss
	// metrics the mean of the ranks' (each rank's the mean over its
	// micro-batches, which are as many on every rank), GradNorm and LR
	// as they are (the same on every rank, after the all-reduce), the
	// times the slowest rank's, and the throughputs the job's tokens over
	// those times. AllReduceWaitSeconds is the longest any rank waited,
	// before the step's gradient all-reduces, for the slowest rank to
	// finish its backward (load imbalance); AllReduceSeconds the slowest
	// rank's time in the all-reduces themselves (communication), and
	// AllReduceBytes the bytes each rank all-reduced (4 per trained
	// parameter per update).
	WorldSize            int
	AllReduceWaitSeconds float64
	AllReduceSeconds     float64
	AllReduceBytes       int64
	// Memory is what a rank holds for training, by kind (the most of any
	// rank), measured at the end of the step: under memory/… in Map.
	// ZeRO are the step's collectives of sharded training
	// (DataParallel.ZeRO), under dist/… and timing_s/… in Map.
	Memory RankMemory
	ZeRO   ZeROMetrics

	generatedTokens int
	trainedTokens   int
	advTokens       int // mask-1 response tokens, over which the advantages are summarised
	// staleTokens and staleTokenSum: the sampled tokens whose staleness
	// StalenessTokenMean averages, and the sum of their staleness.
	staleTokens, staleTokenSum int
}

// Map returns the metrics under verl's names, for a MetricsSink.
func (m StepMetrics) Map() map[string]float64 {
	out := map[string]float64{
		"critic/score/mean":          m.RewardMean,
		"critic/score/std":           m.RewardStd,
		"critic/acc/mean":            m.Acc,
		"response_length/mean":       m.ResponseLenMean,
		"response_length/max":        m.ResponseLenMax,
		"response_length/clip_ratio": m.OverlongFrac,
		"tool_call_counts/mean":      m.ToolCallsMean,
		"tool_errors/total":          float64(m.ToolErrors),
		"env_errors/total":           float64(m.EnvErrors),
		"env/turn_reward/mean":       m.TurnRewardMean,
		"train/num_gen_batches":      float64(m.GenBatches),
		"train/kept_groups":          float64(m.KeptGroups),
		"train/trajectories":         float64(m.Trajectories),
		"critic/advantages/mean":     m.AdvantageMean,
		"critic/advantages/max":      m.AdvantageMax,
		"critic/advantages/min":      m.AdvantageMin,
		"data/prompts_left_out":      float64(m.PromptsLeftOut),
		"actor/entropy":              m.Entropy,
		"actor/pg_clipfrac":          m.PGClipFrac,
		"actor/pg_clipfrac_lower":    m.PGClipFracLower,
		"actor/ppo_kl":               m.PPOKL,
		"actor/kl_loss":              m.KL,
		"actor/loss":                 m.Loss,
		"actor/grad_norm":            m.GradNorm,
		"actor/lr":                   m.LR,
		"actor/updates":              float64(m.Updates),
		"actor/skipped_updates":      float64(m.SkippedUpdates),
		"perf/rollout_tokens_per_s":  m.RolloutTokensPerSec,
		"perf/train_tokens_per_s":    m.TrainTokensPerSec,
		"timing_s/gen":               m.RolloutSeconds,
		"timing_s/update_actor":      m.TrainSeconds,
		"timing_s/step":              m.StepSeconds,
		"timing_s/overlap":           m.OverlapSeconds,
		"timing_s/sync_weights":      m.SyncSeconds,
		"timing_s/wall":              m.WallSeconds,
		"async/policy_version":       float64(m.PolicyVersion),
		"async/staleness_mean":       m.StalenessMean,
		"async/staleness_max":        float64(m.StalenessMax),
		"async/staleness_token_mean": m.StalenessTokenMean,
		"async/partial_turns":        float64(m.PartialTurns),
	}
	if m.WallSeconds > 0 {
		out["perf/steps_per_s"] = 1 / m.WallSeconds
		out["perf/throughput"] = float64(m.generatedTokens+m.trainedTokens) / m.WallSeconds
	}
	for s, n := range m.StalenessHist {
		if m.Trajectories > 0 {
			out[fmt.Sprintf("async/staleness_frac/%d", s)] = float64(n) / float64(m.Trajectories)
		}
	}
	if v, ok := m.LossMetrics["pg_loss"]; ok {
		out["actor/pg_loss"] = v
	}
	for k, v := range m.RewardMetrics {
		out[k] = v
	}
	for k, v := range rolloutCorrMetrics(m.LossMetrics) {
		out[k] = v
	}
	for k, v := range m.Mismatch {
		out[k] = v
	}
	if m.WorldSize > 1 {
		out["dist/world_size"] = float64(m.WorldSize)
		out["dist/grad_allreduce_bytes"] = float64(m.AllReduceBytes)
		out["timing_s/grad_allreduce"] = m.AllReduceSeconds
		out["timing_s/grad_wait"] = m.AllReduceWaitSeconds
	}
	m.Memory.addTo(out)
	m.ZeRO.addTo(out)
	return out
}

// headline is the RL step's mean reward and accuracy, and the tokens it
// generated and trained on.
func (m StepMetrics) headline() ([]Figure, int64) {
	return []Figure{{"reward", m.RewardMean}, {"acc", m.Acc}}, int64(m.generatedTokens + m.trainedTokens)
}

// observeBatch records the batch statistics of the step's trajectories.
func (m *StepMetrics) observeBatch(batch []*sample, cfg TrainerConfig) {
	m.Trajectories = len(batch)
	if len(batch) == 0 {
		return
	}
	scores := make([]float64, len(batch))
	lens := make([]float64, len(batch))
	calls := make([]float64, len(batch))
	turnRewards := make([]float64, len(batch))
	var acc, overlong int
	for i, s := range batch {
		scores[i] = s.out.Score
		if s.out.Acc {
			acc++
		}
		lens[i] = float64(s.traj.ResponseLen())
		m.ResponseLenMax = math.Max(m.ResponseLenMax, lens[i])
		calls[i] = float64(len(s.traj.ToolCalls))
		for _, c := range s.traj.ToolCalls {
			if c.Err != nil || c.Result.Failed {
				m.ToolErrors++
			}
		}
		if s.traj.EnvErr != nil {
			m.EnvErrors++
		}
		for _, r := range s.traj.TurnRewards() {
			turnRewards[i] += r
		}
		switch s.traj.Stop {
		case rollout.StopTurnBudget, rollout.StopResponseBudget, rollout.StopTotalBudget:
			overlong++
		}
		m.generatedTokens += s.traj.SampledTokens()
	}
	n := float64(len(batch))
	m.RewardMean, m.RewardStd = stat.PopMeanStdDev(scores, nil)
	m.Acc = float64(acc) / n
	m.ResponseLenMean = stat.Mean(lens, nil)
	m.ToolCallsMean = stat.Mean(calls, nil)
	m.TurnRewardMean = stat.Mean(turnRewards, nil)
	m.OverlongFrac = float64(overlong) / n
}

// observeAdvantages records the mean, maximum and minimum advantage over
// the batch's mask-1 response tokens (0 for none).
func (m *StepMetrics) observeAdvantages(batch []*sample) {
	var sum float64
	first := true
	m.advTokens = 0
	for _, s := range batch {
		for i, w := range s.respMask() {
			if w == 0 {
				continue
			}
			a := float64(s.adv[i])
			sum += a
			m.advTokens++
			if first || a > m.AdvantageMax {
				m.AdvantageMax = a
			}
			if first || a < m.AdvantageMin {
				m.AdvantageMin = a
			}
			first = false
		}
	}
	m.AdvantageMean = 0
	if m.advTokens > 0 {
		m.AdvantageMean = sum / float64(m.advTokens)
	}
}

// metricMean averages metric maps key by key (verl appends each
// micro-batch's metrics and reports their mean).
type metricMean struct {
	vals map[string][]float64
}

func (a *metricMean) add(m map[string]float64) {
	if a.vals == nil {
		a.vals = map[string][]float64{}
	}
	for k, v := range m {
		a.vals[k] = append(a.vals[k], v)
	}
}

func (a *metricMean) mean() map[string]float64 {
	out := make(map[string]float64, len(a.vals))
	for k, vs := range a.vals {
		out[k] = stat.Mean(vs, nil)
	}
	return out
}

// meanOf returns the mean of v, or 0 for none.
func meanOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return stat.Mean(v, nil)
}
