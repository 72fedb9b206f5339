package rollout

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrl/agentrl/lm"
)

// BatchConfig configures a Batcher.
type BatchConfig struct {
	// MaxSize is the most requests sent to the sampler in one call;
	// 0 means 64.
	MaxSize int
	// Window is how long the first request of a batch waits for others
	// to join; 0 means 2ms.
	Window time.Duration
	// MaxInFlight is how many sampler calls may run at once; 0 means 1,
	// right for a local model that batches internally. While a call runs,
	// arriving requests gather into the next batch.
	MaxInFlight int
}

// Batcher is a lm.Sampler that gathers the requests of concurrent
// Generate calls into batches for an underlying sampler: the requests that
// arrive within Window of the first, up to MaxSize, go to the sampler in
// one call. It serves samplers that cannot batch concurrent calls
// themselves (a batch-at-a-time model, or a server without its own
// scheduler): the rollout engine runs each trajectory in its own
// goroutine, so such a sampler sees every sequence that is ready to
// decode together, while sequences waiting on tools are absent from the
// batch. policy.Model needs none: it batches continuously.
//
// A Batcher holds no goroutine while idle; it is safe for concurrent use.
type Batcher struct {
	sampler lm.Sampler
	cfg     BatchConfig
	slots   chan struct{}

	mu      sync.Mutex
	queue   []*batchItem
	queued  int // requests in queue
	leading bool
	full    chan struct{} // signalled when queued reaches MaxSize
}

type batchItem struct {
	ctx  context.Context
	reqs []lm.GenerateRequest
	done chan struct{}
	gens []lm.Generation
	err  error
}

// NewBatcher returns a Batcher over sampler.
func NewBatcher(sampler lm.Sampler, cfg BatchConfig) *Batcher {
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = 64
	}
	if cfg.Window <= 0 {
		cfg.Window = 2 * time.Millisecond
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 1
	}
	return &Batcher{
		sampler: sampler,
		cfg:     cfg,
		slots:   make(chan struct{}, cfg.MaxInFlight),
		full:    make(chan struct{}, 1),
	}
}

// CloseSession forwards to the underlying sampler when it keeps sessions.
func (b *Batcher) CloseSession(session string) {
	if c, ok := b.sampler.(lm.SessionCloser); ok {
		c.CloseSession(session)
	}
}

// Generate queues reqs for the next batch and waits for their
// generations. When ctx ends first it returns ctx's error at once; the
// batch goes on for the other callers.
func (b *Batcher) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	it := &batchItem{ctx: ctx, reqs: reqs, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, it)
	b.queued += len(reqs)
	if b.queued >= b.cfg.MaxSize {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
	if !b.leading {
		b.leading = true
		go b.lead()
	}
	b.mu.Unlock()
	select {
	case <-it.done:
		return it.gens, it.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// lead forms batches while requests are queued, then exits.
func (b *Batcher) lead() {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		t := time.NewTimer(b.cfg.Window)
		select {
		case <-t.C:
		case <-b.full:
		}
		t.Stop()
		b.slots <- struct{}{}
		b.mu.Lock()
		batch := b.takeLocked()
		if len(batch) == 0 {
			b.leading = false
			b.mu.Unlock()
			<-b.slots
			return
		}
		b.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-b.slots }()
			b.run(batch)
		}()
	}
}

// takeLocked removes up to MaxSize requests' worth of items from the
// queue, skipping items whose caller has gone.
func (b *Batcher) takeLocked() []*batchItem {
	var batch []*batchItem
	n := 0
	for len(b.queue) > 0 {
		it := b.queue[0]
		if it.ctx.Err() != nil {
			b.queue = b.queue[1:]
			b.queued -= len(it.reqs)
			continue
		}
		if n > 0 && n+len(it.reqs) > b.cfg.MaxSize {
			break
		}
		b.queue = b.queue[1:]
		b.queued -= len(it.reqs)
		n += len(it.reqs)
		batch = append(batch, it)
	}
	// Drain a stale full signal so the next batch waits its window.
	select {
	case <-b.full:
	default:
	}
	if b.queued >= b.cfg.MaxSize {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
	return batch
}

// run calls the sampler for one batch, under a context that ends when
// every caller in the batch has gone.
func (b *Batcher) run(batch []*batchItem) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	defer cancel()
	var alive atomic.Int64
	alive.Store(int64(len(batch)))
	var reqs []lm.GenerateRequest
	for _, it := range batch {
		reqs = append(reqs, it.reqs...)
		stop := context.AfterFunc(it.ctx, func() {
			if alive.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	gens, err := b.sampler.Generate(ctx, reqs)
	if err == nil && len(gens) != len(reqs) {
		err = fmt.Errorf("rollout: sampler returned %d generations for %d requests", len(gens), len(reqs))
	}
	off := 0
	for _, it := range batch {
		if err != nil {
			it.err = err
		} else {
			it.gens = gens[off : off+len(it.reqs) : off+len(it.reqs)]
		}
		off += len(it.reqs)
		close(it.done)
	}
}
