package agentrl

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/lm"
)

// WeightSync publishes the trained weights to the samplers of the
// rollouts: *fleet.Fleet implements it over vLLM, SGLang or package
// serve. Publish makes weights the samplers' weights as policy version
// version (the trainer's steps done); the samplers must then tag their
// generations with it (lm.Generation.WeightVersion), so that the
// trainer can measure and bound each trajectory's staleness.
type WeightSync interface {
	Publish(ctx context.Context, version int, weights lm.Saver) error
}

// produced is the rollout of one step: its batch and what the step
// reports of its making.
type produced struct {
	stepsDone              int // steps done before it: it trains step stepsDone+1
	batch                  []*sample
	genBatches, keptGroups int
	start, end             time.Time
	after                  dataset.SamplerState // the prompt sampler after it
	err                    error
}

// produce makes the batch of the step after stepsDone completed steps.
func (t *Trainer) produce(ctx context.Context, stepsDone int) produced {
	p := produced{stepsDone: stepsDone, start: time.Now()}
	p.batch, p.genBatches, p.keptGroups, p.err = t.collect(ctx, stepsDone)
	p.end = time.Now()
	p.after = t.sampler.State()
	return p
}

// producer makes the batches of the steps to come, ahead of training,
// each once the samplers hold a recent enough version.
type producer struct {
	cancel  context.CancelFunc
	out     chan produced
	stopped chan struct{} // closed when the producing goroutine ends

	mu        sync.Mutex
	published int
	changed   chan struct{} // closed and replaced at each publication
}

// nextBatch returns the batch of the next step: made now when
// MaxStaleness is 0, else taken from the producer (started on demand).
func (t *Trainer) nextBatch(ctx context.Context) (produced, error) {
	if t.cfg.MaxStaleness == 0 {
		p := t.produce(ctx, t.stepsDone)
		return p, p.err
	}
	if t.async == nil {
		t.startProducer()
	}
	select {
	case p := <-t.async.out:
		if p.err != nil {
			t.stopProducer()
			return p, p.err
		}
		if p.stepsDone != t.stepsDone {
			t.stopProducer()
			return p, fmt.Errorf("%w: step %d: the rollout ahead made the batch of step %d", ErrTrainer, t.stepsDone+1, p.stepsDone+1)
		}
		return p, nil
	case <-ctx.Done():
		return produced{}, ctx.Err()
	}
}

// startProducer starts making batches from the next step on, with the
// prompt sampler where the next step's batch starts.
func (t *Trainer) startProducer() {
	_ = t.sampler.Restore(t.samplerState) // a state the sampler gave; cannot fail
	ctx, cancel := context.WithCancel(context.Background())
	pr := &producer{
		cancel: cancel, out: make(chan produced, t.cfg.MaxStaleness),
		stopped: make(chan struct{}), published: t.published, changed: make(chan struct{}),
	}
	t.async = pr
	first := t.stepsDone // read here: Step advances t.stepsDone while this runs
	go func() {
		defer close(pr.stopped)
		for stepsDone := first; ; stepsDone++ {
			// The batch of step stepsDone+1 may sample with version
			// stepsDone−MaxStaleness or newer.
			if !pr.waitFor(ctx, stepsDone-t.cfg.MaxStaleness) {
				return
			}
			p := t.produce(ctx, stepsDone)
			select {
			case pr.out <- p:
			case <-ctx.Done():
				return
			}
			if p.err != nil {
				return
			}
		}
	}()
}

// waitFor blocks until the samplers hold version v or newer; false when
// ctx ends first.
func (pr *producer) waitFor(ctx context.Context, v int) bool {
	for {
		pr.mu.Lock()
		ok, ch := pr.published >= v, pr.changed
		pr.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// setPublished tells the producer that the samplers hold version v.
func (pr *producer) setPublished(v int) {
	pr.mu.Lock()
	pr.published = v
	close(pr.changed)
	pr.changed = make(chan struct{})
	pr.mu.Unlock()
}

// stopProducer cancels the rollouts ahead and waits for them to stop;
// their batches are dropped, and the next step makes its own again.
func (t *Trainer) stopProducer() {
	if t.async == nil {
		return
	}
	t.async.cancel()
	<-t.async.stopped
	t.async = nil
}

// Close stops the rollouts running ahead of training (MaxStaleness > 0)
// and waits for them to end. A Trainer that is stepped again after Close
// starts them anew; Close of a synchronous trainer does nothing.
func (t *Trainer) Close() error {
	t.stopProducer()
	return t.job.close()
}

// publish sends the policy's weights to the samplers as version t.stepsDone
// and returns the seconds it took.
func (t *Trainer) publish(ctx context.Context) (float64, error) {
	start := time.Now()
	saver, _ := t.parts.Policy.(lm.Saver) // checked by NewTrainer
	var err error
	if t.job.leader() { // rank 0 publishes for every rank
		err = t.parts.Sync.Publish(ctx, t.stepsDone, saver)
	}
	if err := t.job.agree(ctx, err, "publishing the weights"); err != nil {
		return time.Since(start).Seconds(), fmt.Errorf("agentrl: step %d: publishing the weights (version %d): %w", t.stepsDone, t.stepsDone, err)
	}
	t.published = t.stepsDone
	if t.async != nil {
		t.async.setPublished(t.stepsDone)
	}
	return time.Since(start).Seconds(), nil
}

// staleness measures how many versions behind the policy the weights
// that sampled each token of each trajectory were, and fails when a
// token's are beyond MaxStaleness or a version not yet trained: the
// bound holds token by token, so that a turn cut by a weight update and
// continued under the new weights (a partial rollout) is bounded by its
// oldest token. StalenessHist counts each trajectory at its oldest
// token's staleness; StalenessTokenMean averages over the tokens.
// Without Sync the sampler is the policy itself, and every token is
// current.
func (t *Trainer) staleness(batch []*sample, m *StepMetrics) error {
	m.StalenessHist = make([]int, t.cfg.MaxStaleness+1)
	if t.parts.Sync == nil {
		m.StalenessHist[0] = len(batch)
		return nil
	}
	var sum int
	for i, s := range batch {
		versions, ok := s.traj.TokenVersions()
		if !ok || len(s.traj.Turns) == 0 {
			return fmt.Errorf("%w: step %d: trajectory %d (prompt %q) has no weight version: with TrainerParts.Sync the sampler must tag its generations (lm.Generation.WeightVersion)", ErrTrainer, t.stepsDone+1, i, s.prompt.ID)
		}
		for p, v := range versions {
			if v < 0 {
				continue // not sampled
			}
			st := t.stepsDone - v
			if st < 0 || st > t.cfg.MaxStaleness {
				return fmt.Errorf("%w: step %d: trajectory %d (prompt %q): token %d was sampled with weight version %d, %d versions from the policy's %d (MaxStaleness %d)", ErrTrainer, t.stepsDone+1, i, s.prompt.ID, p, v, st, t.stepsDone, t.cfg.MaxStaleness)
			}
			m.staleTokens++
			m.staleTokenSum += st
		}
		v, _ := s.traj.OldestWeightVersion()
		st := t.stepsDone - v
		if st < 0 || st > t.cfg.MaxStaleness { // a trajectory of empty turns
			return fmt.Errorf("%w: step %d: trajectory %d (prompt %q) was sampled with weight version %d, %d versions from the policy's %d (MaxStaleness %d)", ErrTrainer, t.stepsDone+1, i, s.prompt.ID, v, st, t.stepsDone, t.cfg.MaxStaleness)
		}
		m.StalenessHist[st]++
		sum += st
		m.StalenessMax = max(m.StalenessMax, st)
		for _, tr := range s.traj.Turns {
			if tr.Segments != nil {
				m.PartialTurns++
			}
		}
	}
	if len(batch) > 0 {
		m.StalenessMean = float64(sum) / float64(len(batch))
	}
	if m.staleTokens > 0 {
		m.StalenessTokenMean = float64(m.staleTokenSum) / float64(m.staleTokens)
	}
	return nil
}

// overlap returns the seconds of [start, end] during which earlier steps
// trained.
func (t *Trainer) overlap(start, end time.Time) float64 {
	var d time.Duration
	for _, iv := range t.trainIntervals {
		lo, hi := iv[0], iv[1]
		if start.After(lo) {
			lo = start
		}
		if end.Before(hi) {
			hi = end
		}
		if hi.After(lo) {
			d += hi.Sub(lo)
		}
	}
	return d.Seconds()
}
