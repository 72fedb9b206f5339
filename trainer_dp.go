package agentrl

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/rollout"
)

// checkDataParallel checks the batch geometry for w data-parallel ranks
// (nothing for one).
func (c TrainerConfig) checkDataParallel(w int) error {
	if w <= 1 {
		return nil
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: TrainerConfig.%s: %s", ErrTrainerConfig, field, fmt.Sprintf(format, args...))
	}
	p, n, m := c.PromptsPerStep, c.SamplesPerPrompt, c.miniBatch()
	switch {
	case p%w != 0:
		return bad("PromptsPerStep", "%d is not a multiple of the %d ranks: each rank rolls out whole groups", p, w)
	case c.DynamicSampling == nil && (m%n != 0 || (m/n)%w != 0):
		return bad("MiniBatchSize", "%d trajectories: with %d ranks each mini-batch must hold a multiple of %d whole groups of %d (of %d trajectories), so that every rank trains its share of every mini-batch", m, w, w, n, w*n)
	case c.DynamicSampling != nil && m%w != 0:
		return bad("MiniBatchSize", "%d is not a multiple of the %d ranks", m, w)
	case c.DynamicSampling != nil && c.MaxStaleness > 0:
		return bad("DynamicSampling", "with MaxStaleness %d: a data-parallel trainer's ranks agree on the generation batches of each step, which rollouts made ahead of training cannot", c.MaxStaleness)
	}
	local := m / w
	if micro := min(c.MicroBatchSize, local); micro > 0 && local%micro != 0 {
		return bad("MicroBatchSize", "%d does not divide the %d trajectories each of the %d ranks trains per mini-batch (MiniBatchSize %d / ranks)", micro, local, w, m)
	}
	return nil
}

// localMicro is the number of trajectories of one forward/backward pass
// on this rank: MicroBatchSize, at most this rank's share of a
// mini-batch (which is also what 0 means).
func (t *Trainer) localMicro() int {
	local := t.cfg.miniBatch() / t.job.size()
	if t.cfg.MicroBatchSize > 0 {
		return min(t.cfg.MicroBatchSize, local)
	}
	return local
}

// shard returns the positions, in a generation batch of n prompts, of
// this rank's groups (all of them alone). Without dynamic sampling,
// rank r takes the r-th share of the groups of every mini-batch, so
// that the ranks' mini-batches together are one process's; with it,
// the r-th contiguous share.
func (t *Trainer) shard(n int) []int {
	w := t.job.size()
	pos := make([]int, 0, n/w)
	if w == 1 || t.cfg.DynamicSampling != nil {
		lo, hi := t.job.share(n)
		for i := lo; i < hi; i++ {
			pos = append(pos, i)
		}
		return pos
	}
	per := t.cfg.miniBatch() / t.cfg.SamplesPerPrompt // groups per mini-batch
	share := per / w
	for j := 0; j+per <= n; j += per {
		for k := range share {
			pos = append(pos, j+t.job.rank()*share+k)
		}
	}
	return pos
}

// fingerprint is what every rank's configuration must agree on.
func (t *Trainer) fingerprint() []namedValue {
	c := t.cfg
	return []namedValue{
		{"TrainerConfig.Seed (low 32 bits)", float64(uint32(c.Seed))},
		{"TrainerConfig.Seed (high 32 bits)", float64(c.Seed >> 32)},
		{"the number of training prompts", float64(len(t.parts.Prompts))},
		{"TrainerConfig.PromptsPerStep", float64(c.PromptsPerStep)},
		{"TrainerConfig.SamplesPerPrompt", float64(c.SamplesPerPrompt)},
		{"TrainerConfig.MiniBatchSize", float64(c.miniBatch())},
		{"the micro-batch size", float64(t.localMicro())},
		{"TrainerConfig.PPOEpochs", float64(c.epochs())},
		{"TrainerConfig.MaxStaleness", float64(c.MaxStaleness)},
		{"the steps done", float64(t.stepsDone)},
		{"the optimizer's steps", float64(t.opt.Steps())},
	}
}

// stepMetrics makes m, this rank's metrics of batch, the job's: counts
// and sums over every rank's trajectories, maxima of the ranks' maxima,
// the loss metrics the mean of the ranks' (StepMetrics.WorldSize).
func (j *ranks) stepMetrics(ctx context.Context, m *StepMetrics, batch []*sample) error {
	var score, acc, lens, overlong, calls, stale float64
	for _, s := range batch {
		score += s.out.Score
		if s.out.Acc {
			acc++
		}
		lens += float64(s.traj.ResponseLen())
		calls += float64(len(s.traj.ToolCalls))
		switch s.traj.Stop {
		case rollout.StopTurnBudget, rollout.StopResponseBudget, rollout.StopTotalBudget:
			overlong++
		}
	}
	for st, n := range m.StalenessHist {
		stale += float64(st * n)
	}
	keys := make([]string, 0, len(m.LossMetrics))
	for k := range m.LossMetrics {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	sums := []float64{float64(len(batch)), score, acc, lens, overlong, calls, float64(m.ToolErrors), float64(m.KeptGroups),
		float64(m.generatedTokens), float64(m.trainedTokens), stale}
	sums = append(sums, intsToFloats(m.StalenessHist)...)
	for _, k := range keys {
		sums = append(sums, m.LossMetrics[k])
	}
	var err error
	if m.Memory, m.ZeRO, err = j.sharding(ctx); err != nil {
		return err
	}
	wait, allreduce, bytes := j.takeCounters()
	// A rank without advantage tokens has no maximum or minimum.
	amax, amin := m.AdvantageMax, m.AdvantageMin
	if m.advTokens == 0 {
		amax, amin = -math.MaxFloat64, math.MaxFloat64
	}
	adv := []float64{m.AdvantageMean * float64(m.advTokens), float64(m.advTokens),
		float64(m.staleTokenSum), float64(m.staleTokens), float64(m.PartialTurns)}
	maxes := []float64{m.ResponseLenMax, float64(m.GenBatches), m.RolloutSeconds, m.TrainSeconds, m.StepSeconds, m.WallSeconds,
		m.SyncSeconds, m.OverlapSeconds, float64(m.StalenessMax), allreduce, float64(len(keys)), -float64(len(keys)), wait,
		amax, -amin}
	if err := j.reduce(ctx, adv, dist.Sum); err != nil {
		return err
	}
	if err := j.reduce(ctx, sums, dist.Sum); err != nil {
		return err
	}
	if err := j.reduce(ctx, maxes, dist.Max); err != nil {
		return err
	}
	if maxes[10] != -maxes[11] {
		return fmt.Errorf("%w: the ranks' loss metrics have different keys", ErrTrainer)
	}
	n := sums[0]
	mean := sums[1] / n
	dev := []float64{0}
	for _, s := range batch {
		dev[0] += (s.out.Score - mean) * (s.out.Score - mean)
	}
	if err := j.reduce(ctx, dev, dist.Sum); err != nil {
		return err
	}
	m.Trajectories = int(n)
	m.RewardMean, m.RewardStd, m.Acc = mean, math.Sqrt(dev[0]/n), sums[2]/n
	m.ResponseLenMean, m.OverlongFrac, m.ToolCallsMean = sums[3]/n, sums[4]/n, sums[5]/n
	m.ToolErrors, m.KeptGroups = int(sums[6]), int(sums[7])
	m.generatedTokens, m.trainedTokens = int(sums[8]), int(sums[9])
	m.StalenessMean = sums[10] / n
	m.staleTokenSum, m.staleTokens, m.PartialTurns = int(adv[2]), int(adv[3]), int(adv[4])
	m.StalenessTokenMean = 0
	if m.staleTokens > 0 {
		m.StalenessTokenMean = adv[2] / adv[3]
	}
	h := len(m.StalenessHist)
	for i := range m.StalenessHist {
		m.StalenessHist[i] = int(sums[11+i])
	}
	for i, k := range keys {
		m.LossMetrics[k] = sums[11+h+i] / float64(j.n)
	}
	m.Loss = m.LossMetrics["loss"]
	m.PGClipFrac = m.LossMetrics["pg_clipfrac"]
	m.PGClipFracLower = m.LossMetrics["pg_clipfrac_lower"]
	m.PPOKL = m.LossMetrics["ppo_kl"]
	m.Entropy = m.LossMetrics["entropy"]
	m.KL = m.LossMetrics["kl"]
	m.ResponseLenMax, m.GenBatches = maxes[0], int(maxes[1])
	m.RolloutSeconds, m.TrainSeconds, m.StepSeconds, m.WallSeconds = maxes[2], maxes[3], maxes[4], maxes[5]
	m.SyncSeconds, m.OverlapSeconds, m.StalenessMax = maxes[6], maxes[7], int(maxes[8])
	m.AllReduceSeconds, m.AllReduceBytes, m.AllReduceWaitSeconds = maxes[9], bytes, maxes[12]
	m.advTokens, m.AdvantageMean, m.AdvantageMax, m.AdvantageMin = int(adv[1]), 0, 0, 0
	if m.advTokens > 0 {
		m.AdvantageMean, m.AdvantageMax, m.AdvantageMin = adv[0]/adv[1], maxes[13], -maxes[14]
	}
	m.RolloutTokensPerSec, m.TrainTokensPerSec = 0, 0
	if m.RolloutSeconds > 0 {
		m.RolloutTokensPerSec = float64(m.generatedTokens) / m.RolloutSeconds
	}
	if m.TrainSeconds > 0 {
		m.TrainTokensPerSec = float64(m.trainedTokens) / m.TrainSeconds
	}
	return nil
}

func intsToFloats(v []int) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// checkWorldSize refuses a checkpoint written by a job of recorded
// ranks (0: one process) in a job of have ranks, unless allow.
func checkWorldSize(recorded, have int, allow bool) error {
	if recorded == 0 {
		recorded = 1 // checkpoints of one process do not record it
	}
	if recorded == have || allow {
		return nil
	}
	return fmt.Errorf("%w: %s: written by a job of %d rank(s), this one has %d: the batches' shards and the gradient sums' order would differ from the uninterrupted run (set DataParallel.AllowWorldSizeChange to resume anyway; every rank's state is complete)",
		ErrCheckpoint, CheckpointStateFile, recorded, have)
}
