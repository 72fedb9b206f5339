package policy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
)

var (
	_ lm.Sampler       = (*Model)(nil)
	_ lm.SessionCloser = (*Model)(nil)
)

// prefillTokens bounds the prompt tokens admitted in one scheduler step:
// new requests join the running batch in groups of at most this many
// prompt tokens (a longer prompt joins alone), so that a burst of new
// prompts delays the sequences already decoding by a bounded amount.
const prefillTokens = 2048

// initialDecodeRoom is how many generated tokens a sequence's KV cache
// first has room for when MaxNewTokens does not bound it; the cache grows
// by doubling.
const initialDecodeRoom = 256

// generator is the sampler's state besides the model: its random source,
// the sessions' KV caches, and the queue of the continuous-batching
// scheduler.
type generator struct {
	mu          sync.Mutex // guards everything below but decode and decodeRoom
	rng         *rand.Rand
	decode      func([]int) string
	maxSessions int
	sessions    map[string]*session
	clock       uint64
	decodeRoom  int // initialDecodeRoom; tests lower it to exercise growth

	pending []*genState // submitted, not yet admitted, in submission order
	running bool        // a scheduler goroutine is working
	doomed  []*session  // closed while the scheduler ran; it frees them
	// onStep, when set (by tests), is called by the scheduler after each
	// step with the number of sequences it advanced.
	onStep func(sequences int)
}

// session is the KV cache of a session's last sequence: tokens and, per
// layer, their keys and values [len(tokens), kvHeads·headDim].
type session struct {
	tokens []int
	kv     kvBuffers
	used   uint64
}

func newGenerator(o modelOptions) *generator {
	return &generator{
		rng:         rand.New(rand.NewPCG(o.seed, 0x243f6a8885a308d3)),
		decode:      o.decode,
		maxSessions: o.maxSessions,
		sessions:    make(map[string]*session),
		decodeRoom:  initialDecodeRoom,
	}
}

func (s *session) free(be backend.Backend) { s.kv.free(be) }

// closeAll frees every session; the caller holds Model.mu, so no
// scheduler is running.
func (g *generator) closeAll(be backend.Backend) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, s := range g.sessions {
		s.free(be)
		delete(g.sessions, name)
	}
	g.freeDoomedLocked(be)
}

func (g *generator) freeDoomedLocked(be backend.Backend) {
	for _, s := range g.doomed {
		s.free(be)
	}
	g.doomed = nil
}

// CloseSession frees the KV cache kept for session; unknown sessions are
// ignored. It does not wait for a running generation: the scheduler frees
// the cache between two steps.
func (m *Model) CloseSession(name string) {
	g := m.gen
	g.mu.Lock()
	s, ok := g.sessions[name]
	if !ok {
		g.mu.Unlock()
		return
	}
	delete(g.sessions, name)
	if g.running {
		g.doomed = append(g.doomed, s)
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	// Buffers are freed only under Model.mu, which serialises all use of
	// the backend. The session is out of the map, so nothing else will
	// reach it.
	m.mu.Lock()
	defer m.mu.Unlock()
	s.free(m.be)
}

// Sessions reports how many sessions' KV caches are held.
func (m *Model) Sessions() int {
	m.gen.mu.Lock()
	defer m.gen.mu.Unlock()
	return len(m.gen.sessions)
}

// genJob is one Generate call: its requests' states, and what the
// scheduler reports back.
type genJob struct {
	ctx    context.Context
	states []*genState
	done   chan struct{} // closed when every state finished or the job failed
	err    error         // set before done is closed
	left   int           // unfinished states; scheduler only
	ended  bool          // done is closed; scheduler only
}

// finish closes the job's done channel with err (nil on success) once.
func (j *genJob) finish(err error) {
	if j.ended {
		return
	}
	j.ended, j.err = true, err
	close(j.done)
}

// genState is one request's progress.
type genState struct {
	job     *genJob
	index   int // the request's index in its Generate call
	req     lm.GenerateRequest
	sampler *TokenSampler
	stop    *lm.StopChecker
	text    *lm.TextStream
	out     lm.Generation
	done    bool
	slot    *kvSlot // the sequence's KV rows while it is admitted
}

// Generate continues every request with continuous batching: the
// requests join the sequences that the model is already decoding (from
// other Generate calls, such as other trajectories of a rollout), and all
// of them advance one token per step against a shared KV cache. A
// sequence leaves the batch as soon as it finishes, and a call returns as
// soon as its own requests have finished, without waiting for longer
// generations of other calls; requests that arrive meanwhile are admitted
// between two steps, their prompts prefilled in the same forward pass as
// the other sequences' next tokens (at most prefillTokens prompt tokens
// per step). Results do not depend on what else is in the batch, up to
// float32 rounding: the batched matrix products sum in an order that
// depends on the batch's shape, so a log-probability can differ in its
// last bits from the same request's in another batch (and, rarely, a
// sampled token whose draw falls on such a boundary). Runs that must be
// bit-reproducible should not rely on the batch's composition.
//
// Sampling follows SampleParams (TokenSampler); a request with Seed draws
// from its own PCG source seeded with it, others from seeds drawn from the
// sampler's source (WithSamplerSeed) when the call is made, so results
// are reproducible for a fixed call order. Generation ends on an
// end-of-sequence token (EOSTokenIDs) or one of StopTokenIDs, a Stop
// string (decoded with the WithDecoder function), at MaxNewTokens, or when
// the sequence fills max_position_embeddings.
//
// With Session set, the KV cache of the session's last sequence is kept
// when the request finishes; a later request whose Prompt extends that
// sequence prefills only the new tokens (Generation.CachedTokens). At most
// WithMaxSessions sessions are kept, least recently used dropped first.
//
// The weights are read from Params when a burst of generation starts and
// stay fixed until the model falls idle, so do not step an optimizer
// while Generate calls are in flight. When ctx ends, Generate returns its
// error at once and the call's sequences leave the batch at the next step.
func (m *Model) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	maxPos := m.cfg.MaxPositionEmbeddings
	for i, r := range reqs {
		if len(r.Prompt) == 0 {
			return nil, fmt.Errorf("%w: request %d has an empty prompt", ErrInput, i)
		}
		if len(r.Prompt) >= maxPos {
			return nil, fmt.Errorf("%w: request %d: prompt of %d tokens leaves no room below max_position_embeddings %d", ErrInput, i, len(r.Prompt), maxPos)
		}
		if err := m.checkIDs(i, r.Prompt); err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		if err := lm.CheckSampleParams(r.Params); err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		if r.Params.MaxNewTokens < 0 {
			return nil, fmt.Errorf("%w: request %d: MaxNewTokens %d is negative", ErrInput, i, r.Params.MaxNewTokens)
		}
		if len(r.Params.Stop) > 0 && m.gen.decode == nil {
			return nil, fmt.Errorf("%w: request %d has Stop strings but the sampler has no decoder (WithDecoder)", ErrInput, i)
		}
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g := m.gen
	job := &genJob{ctx: ctx, done: make(chan struct{}), left: len(reqs)}
	g.mu.Lock()
	for i, r := range reqs {
		seed := g.rng.Uint64()
		if r.Params.Seed != nil {
			seed = *r.Params.Seed
		}
		st := &genState{job: job, index: i, req: r, sampler: NewTokenSampler(rand.New(rand.NewPCG(seed, 0))), stop: lm.NewStopChecker(r.Params, m.eos)}
		if len(r.Params.Stop) > 0 {
			st.text = lm.NewTextStream(g.decode, r.Prompt)
		}
		job.states = append(job.states, st)
	}
	g.pending = append(g.pending, job.states...)
	if !g.running {
		g.running = true
		go m.schedule()
	}
	g.mu.Unlock()
	select {
	case <-job.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if job.err != nil {
		return nil, job.err
	}
	out := make([]lm.Generation, len(job.states))
	for i, st := range job.states {
		out[i] = st.out
	}
	return out, nil
}

// schedule is the continuous-batching loop. It runs while there is work,
// holding Model.mu (so training computations wait for generation to fall
// idle), and exits when no sequence is admitted or pending.
func (m *Model) schedule() {
	g := m.gen
	m.mu.Lock()
	defer m.mu.Unlock()
	pool := &kvPool{}
	defer pool.free(m.be)
	var active []*genState
	// A failure of the backend leaves the KV cache in no known state:
	// every sequence in it fails, and the pool starts afresh.
	fail := func(err error, states ...[]*genState) {
		for _, list := range states {
			for _, st := range list {
				st.job.finish(err)
			}
		}
		pool.free(m.be)
		active = nil
	}
	synced := m.w.sync()
	for {
		active = dropEnded(pool, active)
		g.mu.Lock()
		g.freeDoomedLocked(m.be)
		admit := g.takePendingLocked(synced == nil)
		if len(active) == 0 && len(admit) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		if synced != nil {
			// No weights, no generation: fail every request, including
			// those that arrive meanwhile, until the queue is empty.
			fail(synced, admit)
			continue
		}
		if err := m.admit(pool, admit); err != nil {
			fail(err, active, admit)
			continue
		}
		steps := append(active, admit...)
		slots := make([]*kvSlot, len(steps))
		chunks := make([][]int, len(steps))
		for j, st := range steps {
			slots[j] = st.slot
			if j < len(active) {
				chunks[j] = st.out.Tokens[len(st.out.Tokens)-1:]
			} else {
				chunks[j] = st.req.Prompt[st.slot.len:]
			}
		}
		logits, err := m.extend(pool, slots, chunks)
		if err != nil {
			fail(err, steps)
			continue
		}
		if g.onStep != nil {
			g.onStep(len(steps))
		}
		active = active[:0:0]
		for j, st := range steps {
			if err := m.sampleNext(st, logits[j]); err != nil {
				st.job.finish(fmt.Errorf("request %d: %w", st.index, err))
				pool.release(st.slot)
				continue
			}
			if !st.done {
				active = append(active, st)
				continue
			}
			if err := m.keepSession(pool, st); err != nil {
				st.job.finish(err)
			}
			pool.release(st.slot)
			if st.job.left--; st.job.left == 0 {
				st.job.finish(nil)
			}
		}
	}
}

// dropEnded releases the rows of sequences whose call has failed or whose
// caller has gone, and returns the others.
func dropEnded(pool *kvPool, active []*genState) []*genState {
	kept := active[:0]
	for _, st := range active {
		if st.job.ended || st.job.ctx.Err() != nil {
			pool.release(st.slot)
			continue
		}
		kept = append(kept, st)
	}
	return kept
}

// takePendingLocked removes from the queue the requests to admit in the
// next step: those of live calls, in order, while their prompts total at
// most prefillTokens (the first is always taken). Without limit it takes
// every pending request (to fail them).
func (g *generator) takePendingLocked(limit bool) []*genState {
	var out []*genState
	n, i := 0, 0
	for ; i < len(g.pending); i++ {
		st := g.pending[i]
		if st.job.ended || st.job.ctx.Err() != nil {
			continue
		}
		if limit && len(out) > 0 && n+len(st.req.Prompt) > prefillTokens {
			break
		}
		out = append(out, st)
		n += len(st.req.Prompt)
	}
	g.pending = append(g.pending[:0], g.pending[i:]...)
	return out
}

// admit gives each new sequence KV rows, copying a matching session's
// cache into them so that only the prompt's new tokens are prefilled.
func (m *Model) admit(pool *kvPool, states []*genState) error {
	if len(states) == 0 {
		return nil
	}
	g := m.gen
	maxPos := m.cfg.MaxPositionEmbeddings
	slots := make([]*kvSlot, len(states))
	for i, st := range states {
		p := st.req.Params
		limit := maxPos
		room := maxPos - len(st.req.Prompt)
		if p.MaxNewTokens > 0 {
			room = min(room, p.MaxNewTokens)
			limit = len(st.req.Prompt) + room
		}
		slots[i] = &kvSlot{cap: len(st.req.Prompt) + min(room, g.decodeRoom), limit: limit}
		st.slot = slots[i]
	}
	if err := m.place(pool, slots); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, st := range states {
		if st.req.Session == "" {
			continue
		}
		s := g.sessions[st.req.Session]
		prompt := st.req.Prompt
		if s == nil || len(s.tokens) > len(prompt) || !equalInts(s.tokens, prompt[:len(s.tokens)]) {
			continue
		}
		// At least one token must be fed to get the next logits.
		reuse := min(len(s.tokens), len(prompt)-1)
		if reuse == 0 {
			continue
		}
		if err := m.copyKV(pool.kvBuffers, st.slot.base, s.kv, 0, reuse); err != nil {
			return err
		}
		st.slot.len = reuse
		st.out.CachedTokens = reuse
	}
	return nil
}

// sampleNext draws a token for st from logits and applies the stop rules.
func (m *Model) sampleNext(st *genState, logits []float32) error {
	p := st.req.Params
	s, err := st.sampler.Sample(logits, p)
	if err != nil {
		return err
	}
	st.out.Tokens = append(st.out.Tokens, s.Token)
	if p.Logprobs {
		st.out.LogProbs = append(st.out.LogProbs, float32(s.LogProb))
		st.out.RawLogProbs = append(st.out.RawLogProbs, float32(s.RawLogProb))
	}
	delta := ""
	if st.text != nil {
		delta = st.text.Push(s.Token)
	}
	if stop, end := st.stop.Next(s.Token, delta); end {
		st.done = true
		st.out.FinishReason = stop.Reason
		switch stop.Reason {
		case lm.FinishStopToken:
			st.out.StopToken = stop.Token
		case lm.FinishStop:
			st.out.StopString = stop.String
		}
		return nil
	}
	if len(st.req.Prompt)+len(st.out.Tokens) >= m.cfg.MaxPositionEmbeddings {
		st.done = true
		st.out.FinishReason = lm.FinishLength
	}
	return nil
}

// keepSession stores the KV cache of a finished request with a Session
// (replacing the session's earlier sequence) and evicts the least
// recently used sessions above the cap.
func (m *Model) keepSession(pool *kvPool, st *genState) error {
	name := st.req.Session
	if name == "" {
		return nil
	}
	n := st.slot.len
	kv, err := m.allocKV(n)
	if err != nil {
		return err
	}
	if err := m.copyKV(kv, 0, pool.kvBuffers, st.slot.base, n); err != nil {
		kv.free(m.be)
		return err
	}
	s := &session{tokens: append(append(make([]int, 0, n+1), st.req.Prompt...), st.out.Tokens...)[:n], kv: kv}
	g := m.gen
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.sessions[name]; ok {
		old.free(m.be)
	}
	g.clock++
	s.used = g.clock
	g.sessions[name] = s
	for len(g.sessions) > g.maxSessions {
		var oldest string
		var t uint64
		for name, s := range g.sessions {
			if oldest == "" || s.used < t {
				oldest, t = name, s.used
			}
		}
		g.sessions[oldest].free(m.be)
		delete(g.sessions, oldest)
	}
	return nil
}
