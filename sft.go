package agentrl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// SFTSample is one supervised sequence: token ids and a loss mask of the
// same length, 1 on the tokens the model is trained to produce (the
// assistant's turns, tool-call markup included) and 0 elsewhere (system,
// user and tool-result tokens, template glue). Position 0 has no
// prediction (nothing precedes it) and is never trained, as verl's SFT
// trainer shifts labels by one.
type SFTSample struct {
	IDs  []int
	Mask []float32
}

// SFTSamplesFrom takes the ids and masks of encoded conversations
// (dataset.SFTEncoder's output).
func SFTSamplesFrom(examples []dataset.SFTExample) []SFTSample {
	out := make([]SFTSample, len(examples))
	for i, e := range examples {
		out[i] = SFTSample{IDs: e.InputIDs, Mask: e.LossMask}
	}
	return out
}

// trainable counts the tokens the sample trains on.
func (s SFTSample) trainable() int {
	n := 0
	for _, m := range s.Mask[min(1, len(s.Mask)):] {
		if m != 0 {
			n++
		}
	}
	return n
}

// check reports an unusable sample.
func (s SFTSample) check() error {
	if len(s.IDs) != len(s.Mask) {
		return fmt.Errorf("%d ids but %d mask values", len(s.IDs), len(s.Mask))
	}
	for t, id := range s.IDs {
		if id < 0 {
			return fmt.Errorf("IDs[%d] = %d is negative", t, id)
		}
	}
	for t, m := range s.Mask {
		if m != 0 && m != 1 {
			return fmt.Errorf("Mask[%d] = %v, want 0 or 1", t, m)
		}
	}
	if s.trainable() == 0 {
		return errors.New("no token after the first has mask 1: nothing to train")
	}
	return nil
}

// SFTConfig configures an SFTTrainer (verl's sft_trainer.yaml names where
// they exist).
type SFTConfig struct {
	// BatchSize is the number of sequences per optimiser update (verl's
	// data.train_batch_size); > 0 and at most the number of samples.
	BatchSize int
	// MicroBatchSize is the number of sequences per forward/backward
	// pass (verl's micro_batch_size_per_gpu); 0 means BatchSize. It must
	// divide BatchSize.
	MicroBatchSize int
	// Epochs is the number of passes Train makes (verl's
	// trainer.total_epochs); 0 means 1.
	Epochs int
	// Optimizer configures AdamW and its schedule (counted in updates).
	Optimizer policy.AdamWConfig
	// MaxGradNorm clips the gradient norm (verl's optim.clip_grad); 0
	// disables clipping.
	MaxGradNorm float64
	// Seed fixes the shuffled order of every epoch.
	Seed uint64
	// InOrder draws every epoch in the data's own order, batch after
	// batch from the first sample, instead of shuffling it (Seed then
	// orders nothing): a curriculum is the data laid out in the order it
	// is to be trained on.
	InOrder bool
	// LoRA, when set, fine-tunes low-rank adapters instead of the full
	// weights, as TrainerConfig.LoRA does for RL (A drawn from Seed).
	LoRA *policy.LoRAConfig
}

// SFTParts are the components an SFTTrainer works on, as TrainerParts
// are for the RL Trainer.
type SFTParts struct {
	// Policy is the model being fine-tuned; required.
	Policy lm.Trainable
	// Data are the training sequences; at least SFTConfig.BatchSize of
	// them. They are retained, not copied.
	Data []SFTSample
	// Metrics, when set, receives every step's SFTMetrics.Map() (a
	// *metrics.Logger writes them to a JSON Lines file).
	Metrics MetricsSink
	// DataParallel, when its Comm has several ranks, makes this trainer
	// one rank of a data-parallel job, as TrainerParts.DataParallel does
	// for RL: every rank draws the same batch and trains on its
	// contiguous share of it (BatchSize must be a multiple of the ranks;
	// MicroBatchSize counts sequences per pass on one rank, at most its
	// share); the loss is
	// still normalised by the whole batch's trained tokens, the
	// gradients are summed across the ranks before the update, and rank
	// 0 alone logs and writes checkpoints. One update then equals one
	// process's on the whole batch, up to float32 rounding.
	DataParallel DataParallel
}

// Validate reports the first unusable field, wrapping ErrTrainerConfig.
func (c SFTConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: SFTConfig.%s: %s", ErrTrainerConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.BatchSize <= 0:
		return bad("BatchSize", "%d, want > 0", c.BatchSize)
	case c.MicroBatchSize < 0:
		return bad("MicroBatchSize", "%d, want ≥ 0", c.MicroBatchSize)
	case c.MicroBatchSize > 0 && c.BatchSize%c.MicroBatchSize != 0:
		return bad("MicroBatchSize", "%d does not divide BatchSize %d", c.MicroBatchSize, c.BatchSize)
	case c.Epochs < 0:
		return bad("Epochs", "%d, want ≥ 0", c.Epochs)
	case !finiteNonNeg(c.MaxGradNorm):
		return bad("MaxGradNorm", "%v, want finite and ≥ 0", c.MaxGradNorm)
	}
	if err := validateAdamW(c.Optimizer); err != nil {
		return fmt.Errorf("%w: SFTConfig.Optimizer.%w", ErrTrainerConfig, err)
	}
	if c.LoRA != nil {
		if err := c.LoRA.Validate(); err != nil {
			return fmt.Errorf("%w: SFTConfig.LoRA: %w", ErrTrainerConfig, err)
		}
	}
	return nil
}

// SFTMetrics describes one SFT update.
type SFTMetrics struct {
	// Step is the 1-based update number and Epoch the 0-based epoch its
	// batch came from.
	Step, Epoch int
	// Loss is the mean negative log-likelihood per trained token of the
	// batch, before the update.
	Loss float64
	// Tokens is the number of trained tokens (mask 1) and SeqTokens the
	// number of tokens the forward pass processed.
	Tokens, SeqTokens int
	// GradNorm is the gradient norm before clipping and LR the learning
	// rate of the update; Skipped reports an update skipped for a
	// non-finite gradient norm.
	GradNorm, LR float64
	Skipped      bool
	// TokensPerSec is SeqTokens over the step's wall-clock Seconds.
	TokensPerSec, Seconds float64
	// WorldSize is the number of data-parallel ranks (1 alone); with
	// several, Loss, Tokens and SeqTokens are the whole batch's, Seconds
	// the slowest rank's, AllReduceWaitSeconds the longest wait for the
	// slowest rank before the gradient all-reduce, AllReduceSeconds the
	// slowest rank's time in it and AllReduceBytes what each rank
	// all-reduced.
	WorldSize            int
	AllReduceWaitSeconds float64
	AllReduceSeconds     float64
	AllReduceBytes       int64
	// Memory is what a rank holds for training (the most of any rank),
	// and ZeRO the collectives of sharded training
	// (DataParallel.ZeRO), as StepMetrics'.
	Memory RankMemory
	ZeRO   ZeROMetrics
}

// Map returns the metrics under verl's SFT names (train/loss, train/lr).
func (m SFTMetrics) Map() map[string]float64 {
	skipped := 0.0
	if m.Skipped {
		skipped = 1
	}
	out := map[string]float64{
		"train/loss":            m.Loss,
		"train/lr":              m.LR,
		"train/grad_norm":       m.GradNorm,
		"train/tokens":          float64(m.Tokens),
		"train/epoch":           float64(m.Epoch),
		"train/skipped":         skipped,
		"perf/tokens_per_s":     m.TokensPerSec,
		"timing_s/step":         m.Seconds,
		"train/sequence_tokens": float64(m.SeqTokens),
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

// headline is the SFT step's loss per trained token, and the tokens of
// its forward passes.
func (m SFTMetrics) headline() ([]Figure, int64) {
	return []Figure{{"loss", m.Loss}}, int64(m.SeqTokens)
}

// SFTTrainer fine-tunes a policy on fixed sequences with the masked
// cross-entropy −(1/N) Σ mask·log p(token | prefix), N the number of
// trained tokens of the whole batch (verl's fsdp_sft_trainer with
// token-mean over the global batch). It reaches the model only through
// lm.Trainable: the gradient with respect to each log-probability is
// −mask/N. It is not safe for concurrent use.
type SFTTrainer struct {
	model     lm.Trainable
	data      []SFTSample
	metrics   MetricsSink
	cfg       SFTConfig
	sampler   *dataset.Sampler
	opt       policy.Optimizer
	stepsDone int // completed updates
	job       job // the data-parallel job (alone: a job of one)
	// allowResize is SFTParts.DataParallel.AllowWorldSizeChange.
	allowResize bool
}

// NewSFTTrainer checks cfg and parts (naming the first bad sample) and
// returns a trainer at step 0, as NewTrainer does for RL.
func NewSFTTrainer(cfg SFTConfig, parts SFTParts) (*SFTTrainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	model, data := parts.Policy, parts.Data
	if model == nil {
		return nil, fmt.Errorf("%w: SFTParts.Policy is nil", ErrTrainer)
	}
	if len(data) < cfg.BatchSize {
		return nil, fmt.Errorf("%w: SFTConfig.BatchSize %d exceeds the %d samples", ErrTrainerConfig, cfg.BatchSize, len(data))
	}
	for i, s := range data {
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("%w: SFT sample %d: %w", ErrTrainer, i, err)
		}
	}
	j, err := newJob(parts.DataParallel, "SFTParts.DataParallel")
	if err != nil {
		return nil, err
	}
	if w := j.size(); w > 1 {
		local := cfg.BatchSize / w
		switch {
		case cfg.BatchSize%w != 0:
			return nil, fmt.Errorf("%w: SFTConfig.BatchSize %d is not a multiple of the %d ranks", ErrTrainerConfig, cfg.BatchSize, w)
		case cfg.MicroBatchSize > 0 && local%min(cfg.MicroBatchSize, local) != 0:
			return nil, fmt.Errorf("%w: SFTConfig.MicroBatchSize %d does not divide the %d sequences each of the %d ranks trains per update", ErrTrainerConfig, cfg.MicroBatchSize, local, w)
		}
	}
	sampler, err := dataset.NewSampler(len(data), dataset.SamplerConfig{BatchSize: cfg.BatchSize, Seed: cfg.Seed, Shuffle: !cfg.InOrder, DropLast: true})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTrainer, err)
	}
	// Last, after every check: attaching changes the user's model.
	if err := attachLoRA(model, cfg.LoRA, cfg.Seed, "SFTConfig.LoRA"); err != nil {
		return nil, err
	}
	opt, err := j.newOptimizer(model, cfg.Optimizer)
	if err != nil {
		return nil, err
	}
	return &SFTTrainer{model: model, data: data, metrics: parts.Metrics, cfg: cfg, sampler: sampler, opt: opt, job: j, allowResize: parts.DataParallel.AllowWorldSizeChange}, nil
}

// StepsPerEpoch is the number of updates in one pass over the data (the
// last short batch of an epoch is dropped).
func (s *SFTTrainer) StepsPerEpoch() int { return len(s.data) / s.cfg.BatchSize }

// StepsDone is the number of updates made.
func (s *SFTTrainer) StepsDone() int { return s.stepsDone }

// microBatch is the number of sequences of one pass on this rank.
func (s *SFTTrainer) microBatch() int {
	local := s.cfg.BatchSize / s.job.size()
	if s.cfg.MicroBatchSize == 0 {
		return local
	}
	return min(s.cfg.MicroBatchSize, local)
}

// Step makes one update on the next batch and returns its metrics.
func (s *SFTTrainer) Step(ctx context.Context) (SFTMetrics, error) {
	m, err := s.trainStep(ctx)
	if err != nil {
		return m, err
	}
	if s.metrics != nil && s.job.leader() {
		if err := s.metrics.Log(m.Step, m.Map()); err != nil {
			return m, fmt.Errorf("agentrl: SFT step %d: metrics log: %w", m.Step, err)
		}
	}
	return m, nil
}

// trainStep is one SFT update, stage by stage; Step is it and the
// metrics log:
//
//  1. the next batch of BatchSize sequences
//  2. the gradients of this rank's share of it, micro-batch by
//     micro-batch (accumulate)
//  3. the optimizer step: the ranks' gradients summed, clipped, AdamW
//  4. the job's loss and, with several ranks, the slowest rank's times
//
// At the first step of a data-parallel job the ranks first check that
// they agree and take rank 0's weights.
func (s *SFTTrainer) trainStep(ctx context.Context) (SFTMetrics, error) {
	start := time.Now()
	m := SFTMetrics{Step: s.stepsDone + 1, Epoch: s.sampler.State().Epoch, WorldSize: s.job.size()}
	if err := s.job.join(ctx, s.opt, s.fingerprint()); err != nil {
		return m, fmt.Errorf("agentrl: SFT step %d: data parallel: %w", m.Step, err)
	}
	batch, err := dataset.Gather(s.data, s.sampler.Next())
	if err != nil {
		return m, fmt.Errorf("%w: %w", ErrTrainer, err)
	}
	for _, b := range batch {
		m.Tokens += b.trainable()
		m.SeqTokens += len(b.IDs)
	}
	inv := 1 / float64(m.Tokens) // the whole batch's tokens, on every rank
	nll, err := s.accumulate(ctx, batch, inv)
	if err != nil {
		return m, fmt.Errorf("agentrl: SFT step %d: %w", m.Step, err)
	}
	var stepped bool
	if m.GradNorm, m.LR, stepped, err = optimizerStep(ctx, s.job, s.opt, s.cfg.MaxGradNorm); err != nil {
		return m, fmt.Errorf("agentrl: SFT step %d: %w", m.Step, err)
	}
	if !stepped {
		m.Skipped, m.LR = true, s.opt.LR()
	}
	if err := s.opt.ZeroGrad(); err != nil {
		return m, fmt.Errorf("agentrl: SFT step %d: %w", m.Step, err)
	}
	s.stepsDone++

	loss := []float64{nll} // the job's Σ −mask·log p
	if err := s.job.reduce(ctx, loss, dist.Sum); err != nil {
		return m, fmt.Errorf("agentrl: SFT step %d: %w", m.Step, err)
	}
	m.Loss = loss[0] * inv
	m.Seconds = time.Since(start).Seconds()
	var bytes int64
	m.AllReduceWaitSeconds, m.AllReduceSeconds, bytes = s.job.takeCounters()
	slowest := []float64{m.Seconds, m.AllReduceSeconds, m.AllReduceWaitSeconds}
	if err := s.job.reduce(ctx, slowest, dist.Max); err != nil {
		return m, fmt.Errorf("agentrl: SFT step %d: %w", m.Step, err)
	}
	m.Seconds, m.AllReduceSeconds, m.AllReduceWaitSeconds, m.AllReduceBytes = slowest[0], slowest[1], slowest[2], bytes
	if m.Memory, m.ZeRO, err = s.job.sharding(ctx); err != nil {
		return m, fmt.Errorf("agentrl: SFT step %d: %w", m.Step, err)
	}
	if m.Seconds > 0 {
		m.TokensPerSec = float64(m.SeqTokens) / m.Seconds
	}
	return m, nil
}

// accumulate zeroes the gradients and accumulates those of this rank's
// share of batch, micro-batch by micro-batch (micro), each trained
// token's loss −log p weighted by inv, one over the whole batch's trained
// tokens. It returns this rank's Σ −mask·log p.
func (s *SFTTrainer) accumulate(ctx context.Context, batch []SFTSample, inv float64) (float64, error) {
	if err := s.opt.ZeroGrad(); err != nil {
		return 0, err
	}
	var nll float64
	lo, hi := s.job.share(len(batch))
	for _, c := range chunks(hi-lo, s.microBatch()) {
		v, err := s.micro(ctx, batch[lo+c[0]:lo+c[1]], inv, true)
		if err != nil {
			return 0, err
		}
		nll += v
	}
	return nll, nil
}

// micro runs one micro-batch: it returns Σ −mask·log p over the batch and,
// with grad, backpropagates d/dlogp = −mask·inv.
func (s *SFTTrainer) micro(ctx context.Context, part []SFTSample, inv float64, grad bool) (float64, error) {
	tb := lm.TokenBatch{Tokens: make([][]int, len(part)), Mask: make([][]float32, len(part))}
	for i, p := range part {
		tb.Tokens[i], tb.Mask[i] = p.IDs, p.Mask
	}
	stats, back, err := s.model.Forward(ctx, tb, grad)
	if err != nil {
		return 0, fmt.Errorf("forward: %w", err)
	}
	if len(stats.LogProbs) != len(part) {
		return 0, fmt.Errorf("%w: forward returned %d rows for %d sequences", ErrTrainer, len(stats.LogProbs), len(part))
	}
	var nll float64
	var g [][]float32
	if grad {
		if back == nil {
			return 0, fmt.Errorf("%w: forward with gradients returned no BackwardFunc", ErrTrainer)
		}
		g = make([][]float32, len(part))
	}
	for i, p := range part {
		lp := stats.LogProbs[i]
		if len(lp) != len(p.IDs) {
			return 0, fmt.Errorf("%w: forward returned %d log-probs for sequence %d of %d tokens", ErrTrainer, len(lp), i, len(p.IDs))
		}
		if grad {
			g[i] = make([]float32, len(lp))
		}
		for t := 1; t < len(lp); t++ {
			if p.Mask[t] == 0 {
				continue
			}
			nll -= float64(lp[t])
			if grad {
				g[i][t] = float32(-inv)
			}
		}
	}
	if math.IsNaN(nll) || math.IsInf(nll, 0) {
		return 0, fmt.Errorf("%w: negative log-likelihood is %v", policy.ErrNonFinite, nll)
	}
	if grad {
		if err := back(ctx, g, nil); err != nil {
			return 0, fmt.Errorf("backward: %w", err)
		}
	}
	return nll, nil
}

// Loss returns the mean negative log-likelihood per trained token of data
// under the current parameters, without gradients (a validation loss).
func (s *SFTTrainer) Loss(ctx context.Context, data []SFTSample) (float64, error) {
	tokens := 0
	for i, d := range data {
		if err := d.check(); err != nil {
			return 0, fmt.Errorf("%w: SFT sample %d: %w", ErrTrainer, i, err)
		}
		tokens += d.trainable()
	}
	if tokens == 0 {
		return 0, fmt.Errorf("%w: no samples to evaluate", ErrTrainer)
	}
	// A validation before the first step scores rank 0's weights too.
	if err := s.job.join(ctx, s.opt, s.fingerprint()); err != nil {
		return 0, fmt.Errorf("agentrl: SFT loss: data parallel: %w", err)
	}
	// In a data-parallel job each rank scores its share of data.
	var nll float64
	lo, hi := s.job.share(len(data))
	for _, c := range chunks(hi-lo, s.microBatch()) {
		v, err := s.micro(ctx, data[lo+c[0]:lo+c[1]], 0, false)
		if err != nil {
			return 0, fmt.Errorf("agentrl: SFT loss: %w", err)
		}
		nll += v
	}
	sum := []float64{nll} // the job's
	if err := s.job.reduce(ctx, sum, dist.Sum); err != nil {
		return 0, fmt.Errorf("agentrl: SFT loss: %w", err)
	}
	nll = sum[0]
	return nll / float64(tokens), nil
}

// Train runs the remaining steps of cfg.Epochs epochs, calling onStep
// (when not nil) after each; an error from onStep stops training and is
// returned. It checks ctx between steps. Run does the same with
// validation, checkpoints and a Recorder.
func (s *SFTTrainer) Train(ctx context.Context, onStep func(SFTMetrics) error) error {
	for s.stepsDone < s.totalSteps() {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := s.Step(ctx)
		if err != nil {
			return err
		}
		if onStep != nil {
			if err := onStep(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// totalSteps is the number of updates of cfg.Epochs epochs.
func (s *SFTTrainer) totalSteps() int { return max(s.cfg.Epochs, 1) * s.StepsPerEpoch() }

// fingerprint is what every rank's SFT configuration must agree on.
func (s *SFTTrainer) fingerprint() []namedValue {
	return []namedValue{
		{"SFTConfig.Seed (low 32 bits)", float64(uint32(s.cfg.Seed))},
		{"SFTConfig.Seed (high 32 bits)", float64(s.cfg.Seed >> 32)},
		{"the number of SFT samples", float64(len(s.data))},
		{"SFTConfig.BatchSize", float64(s.cfg.BatchSize)},
		{"SFTConfig.InOrder", oneIf(s.cfg.InOrder)},
		{"the micro-batch size", float64(s.microBatch())},
		{"the steps done", float64(s.stepsDone)},
		{"the optimizer's steps", float64(s.opt.Steps())},
	}
}

// Close releases what data-parallel training holds on the backend (the
// gradient bucket of NCCL); alone it does nothing. The trainer may be
// stepped again after it.
func (s *SFTTrainer) Close() error { return s.job.close() }

// oneIf is 1 for true and 0 for false, for a fingerprint.
func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
