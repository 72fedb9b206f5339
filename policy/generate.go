package policy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
)

var (
	_ lm.Sampler       = (*Model)(nil)
	_ lm.SessionCloser = (*Model)(nil)
)

// prefillTokens bounds the prompt tokens prefilled in one scheduler step:
// prompts are prefilled in chunks beside the running sequences' decode
// rows, at most this many prompt tokens per step in all, so that a burst
// of new prompts delays the sequences already decoding by a bounded
// amount (vLLM's chunked prefill, max_num_batched_tokens).
const prefillTokens = 2048

// kvBlockSize is the rows of a KV-cache block (vLLM's default block size).
const kvBlockSize = 16

// generator is the sampler's state besides the model: its random source,
// the sessions, the queue of the continuous-batching scheduler, and the
// paged KV cache.
type generator struct {
	mu          sync.Mutex // guards everything below but decode, decodeRoom and the scheduler's fields
	rng         *rand.Rand
	decode      func([]int) string
	maxSessions int
	sessions    map[string]*session
	clock       uint64
	// decodeRoom is the rows per KV-cache block (kvBlockSize); tests
	// lower it so that sequences cross many blocks and sessions share
	// partly filled ones.
	decodeRoom int
	// prefill is the prompt tokens prefilled per step (prefillTokens);
	// tests lower it to exercise chunked prefill.
	prefill int

	pending []*genState // submitted, not yet taken by the scheduler, in submission order
	running bool        // a scheduler goroutine is working
	doomed  []*session  // closed while the scheduler ran; it releases them
	// onStep, when set (by tests), is called by the scheduler after each
	// step with the number of sequences it advanced.
	onStep func(sequences int)
	stats  GenerateStats

	// The scheduler's, under Model.mu: the options of the KV cache, the
	// decoder (the backend's, or hostDecoder) and the cache itself while
	// the model generates or sessions hold blocks.
	opt  GenerateOptions
	dec  backend.Decoder
	pool *kvPool
}

// session is what a session keeps of its last sequence: the tokens whose
// keys and values its blocks hold (references in the pool).
type session struct {
	tokens []int
	blocks []int32
	used   uint64
}

func newGenerator(o modelOptions) *generator {
	opt := o.gen
	if opt.MaxRunning <= 0 {
		opt.MaxRunning = defaultMaxRunning
	}
	if opt.GPUMemoryUtilization <= 0 || opt.GPUMemoryUtilization > 1 {
		opt.GPUMemoryUtilization = defaultGPUMemoryUtilization
	}
	g := &generator{
		rng:         rand.New(rand.NewPCG(o.seed, 0x243f6a8885a308d3)),
		decode:      o.decode,
		maxSessions: o.maxSessions,
		sessions:    make(map[string]*session),
		decodeRoom:  kvBlockSize,
		prefill:     prefillTokens,
		opt:         opt,
	}
	if d, ok := o.be.(backend.Decoder); ok {
		g.dec = d
	} else {
		g.dec = &hostDecoder{be: o.be}
	}
	return g
}

// releaseSession drops s's block references; the caller holds Model.mu.
func (g *generator) releaseSession(s *session) {
	if g.pool != nil {
		g.pool.release(s.blocks)
	}
	s.blocks = nil
}

// closeAll frees every session and the KV cache; the caller holds
// Model.mu, so no scheduler is running.
func (g *generator) closeAll(be backend.Backend) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, s := range g.sessions {
		g.releaseSession(s)
		delete(g.sessions, name)
	}
	g.freeDoomedLocked()
	g.freePoolLocked()
}

func (g *generator) freeDoomedLocked() {
	for _, s := range g.doomed {
		g.releaseSession(s)
	}
	g.doomed = nil
}

// freePoolLocked frees the KV cache (the sessions must be gone).
func (g *generator) freePoolLocked() {
	if g.pool == nil {
		return
	}
	_ = g.pool.close()
	g.pool = nil
	g.stats.KVBlocks, g.stats.KVBlocksUsed, g.stats.KVBytes = 0, 0, 0
}

// CloseSession releases the KV-cache blocks kept for session; unknown
// sessions are ignored. It does not wait for a running generation: the
// scheduler releases them between two steps.
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
	// The pool is used only under Model.mu, which serialises all use of
	// the backend. The session is out of the map, so nothing else will
	// reach it.
	m.mu.Lock()
	defer m.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.releaseSession(s)
	if !g.running && len(g.sessions) == 0 {
		g.freePoolLocked()
	}
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
	job   *genJob
	index int // the request's index in its Generate call
	req   lm.GenerateRequest
	seed  uint64 // of SampleUniform; the step is the token's index
	stop  *lm.StopChecker
	text  *lm.TextStream
	out   lm.Generation
	done  bool
	seq   *kvSeq // the sequence's blocks while it runs; nil while it waits
	began bool   // admitted once (CachedTokens is set then)
}

// known is the number of tokens of the sequence: prompt and generated.
func (st *genState) known() int { return len(st.req.Prompt) + len(st.out.Tokens) }

// token is token p of the sequence.
func (st *genState) token(p int) int {
	if p < len(st.req.Prompt) {
		return st.req.Prompt[p]
	}
	return st.out.Tokens[p-len(st.req.Prompt)]
}

// sampleRow is the backend's description of the next draw.
func (st *genState) sampleRow() backend.SampleRow {
	p := st.req.Params
	return backend.SampleRow{
		Greedy:      p.Temperature < lm.GreedyTemperature,
		Temperature: p.Temperature,
		TopK:        max(p.TopK, 0),
		TopP:        p.TopP,
		MinP:        p.MinP,
		Seed:        st.seed,
		Step:        uint64(len(st.out.Tokens)),
		TopLogprobs: p.TopLogprobs,
	}
}

// Generate continues every request with continuous batching: the
// requests join the sequences that the model is already decoding (from
// other Generate calls, such as other trajectories of a rollout), and all
// of them advance one token per step against a shared, paged KV cache. A
// sequence leaves the batch as soon as it finishes, and a call returns as
// soon as its own requests have finished, without waiting for longer
// generations of other calls; requests that arrive meanwhile are admitted
// between two steps, their prompts prefilled in the same forward pass as
// the other sequences' next tokens, in chunks of at most prefillTokens
// prompt tokens per step (a longer prompt is prefilled over several
// steps). Results do not depend on what else is in the batch, up to
// float32 rounding: the batched matrix products sum in an order that
// depends on the batch's shape, so a log-probability can differ in its
// last bits from the same request's in another batch (and, rarely, a
// sampled token whose draw falls on such a boundary). Runs that must be
// bit-reproducible should not rely on the batch's composition.
//
// Sampling follows SampleParams with backend.SampleRow's rule: vLLM's
// temperature, min-p, top-k and top-p, then one uniform number per token,
// backend.SampleUniform(seed, i) for the request's i-th token — a
// counter-based stream (Philox4x32-10) that the CPU and the GPU compute
// alike, so a token depends on the request's seed and its position only.
// A request with Seed uses it; others draw seeds from the sampler's
// source (WithSamplerSeed) when the call is made, so results are
// reproducible for a fixed call order. The logits stay on the backend:
// only the token ids and their log-probabilities cross to the host.
// Generation ends on an end-of-sequence token (EOSTokenIDs) or one of
// StopTokenIDs, a Stop string (decoded on the host with the WithDecoder
// function), at MaxNewTokens, or when the sequence fills
// max_position_embeddings (or, alone, the whole KV cache).
//
// The KV cache is a pool of fixed-size blocks (vLLM's PagedAttention)
// sized when generation starts (see GenerateOptions): when it is full,
// new requests wait, and a running sequence that needs a block takes one
// from the least recently used session or, failing that, preempts the
// most recently admitted sequence, which is recomputed later — a full
// cache delays requests and never fails them.
//
// With Session set, the blocks holding the session's last sequence are
// kept when the request finishes; a later request whose Prompt extends
// that sequence shares them and prefills only the new tokens
// (Generation.CachedTokens). At most WithMaxSessions sessions are kept,
// least recently used dropped first. The cache is freed when the model
// falls idle with no session left, so that training finds the memory.
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
		st := &genState{job: job, index: i, req: r, seed: seed, stop: lm.NewStopChecker(r.Params, m.eos)}
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

// scheduler is one burst of the continuous-batching loop: the running
// sequences, in admission order, and those waiting for admission
// (preempted ones first, then new ones in submission order).
type scheduler struct {
	m       *Model
	running []*genState
	waiting []*genState
}

// schedule is the continuous-batching loop. It runs while there is work,
// holding Model.mu (so training computations wait for generation to fall
// idle), and exits when no sequence is running or waiting.
func (m *Model) schedule() {
	g := m.gen
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &scheduler{m: m}
	synced := m.w.sync()
	if g.pool != nil && g.pool.prefix != nil {
		// The weights may have changed since the blocks were computed.
		clear(g.pool.prefix)
		clear(g.pool.key)
	}
	for {
		s.dropEnded()
		g.mu.Lock()
		g.freeDoomedLocked()
		s.waiting = append(s.waiting, g.pending...)
		g.pending = nil
		if len(s.running) == 0 && len(s.waiting) == 0 {
			g.running = false
			if len(g.sessions) == 0 {
				g.freePoolLocked()
			}
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		if synced != nil {
			// No weights, no generation: fail every request, including
			// those that arrive meanwhile, until the queue is empty.
			s.fail(synced)
			continue
		}
		if err := m.ensurePool(); err != nil {
			s.fail(err)
			continue
		}
		plan, err := s.plan()
		if err != nil {
			s.fail(err)
			continue
		}
		if len(plan.seqs) == 0 {
			continue // every sequence left (a request that can never fit failed)
		}
		res, err := m.step(plan)
		if err != nil {
			s.fail(err)
			continue
		}
		if g.onStep != nil {
			g.onStep(len(plan.seqs))
		}
		s.apply(plan, res)
	}
}

// fail ends every running and waiting sequence with err and frees the KV
// cache, whose contents are unknown after a backend failure (the
// sessions, whose blocks it held, are dropped too).
func (s *scheduler) fail(err error) {
	for _, list := range [][]*genState{s.running, s.waiting} {
		for _, st := range list {
			st.job.finish(err)
		}
	}
	s.running, s.waiting = nil, nil
	g := s.m.gen
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.sessions)
	g.doomed = nil
	g.freePoolLocked()
}

// dropEnded releases the blocks of sequences whose call has failed or
// whose caller has gone, and forgets waiting ones of such calls.
func (s *scheduler) dropEnded() {
	pool := s.m.gen.pool
	gone := func(st *genState) bool {
		if !st.job.ended && st.job.ctx.Err() == nil {
			return false
		}
		if st.seq != nil && pool != nil {
			pool.drop(st.seq)
		}
		st.seq = nil
		return true
	}
	s.running = slices.DeleteFunc(s.running, gone)
	s.waiting = slices.DeleteFunc(s.waiting, gone)
}

// stepPlan is one forward step: the sequences it advances, the tokens
// each feeds, and the block copies (source, copy) to make first.
type stepPlan struct {
	seqs  []*genState
	chunk []int
	cows  [2][]int32
}

// plan chooses the step's work: a decode row for every running sequence
// with a token to feed, prompt chunks for those still prefilling and for
// newly admitted ones within prefillTokens, and the blocks they write.
// When the blocks run out it frees sessions, least recently used first,
// then preempts running sequences, most recently admitted first.
func (s *scheduler) plan() (*stepPlan, error) {
	m, g := s.m, s.m.gen
	pool := g.pool
	p := &stepPlan{}
	budget := g.prefill
	for i := 0; i < len(s.running); i++ {
		st := s.running[i]
		c := st.known() - st.seq.n
		if c > 1 {
			c = min(c, budget)
			budget -= c
		}
		if c == 0 {
			continue
		}
		for !pool.grow(st.seq, c, &p.cows) {
			if s.evictSession() {
				continue
			}
			last := len(s.running) - 1
			if last == i {
				if st.seq.n > 0 && i == 0 && len(p.seqs) == 0 {
					// Alone, and the cache cannot hold its next token.
					s.finishFull(st)
					s.running = s.running[:last]
					return p, nil
				}
				s.preempt(last)
				return p, nil
			}
			s.preempt(last)
		}
		p.seqs = append(p.seqs, st)
		p.chunk = append(p.chunk, c)
	}
	// New sequences are admitted while the free blocks hold their tokens
	// and a first generated one, above a watermark of 1% of the cache
	// (vLLM's), so that running sequences rarely need preempting.
	watermark := max(1, pool.blocks()/100)
	for len(s.waiting) > 0 && len(s.running) < g.opt.MaxRunning && budget > 0 {
		st := s.waiting[0]
		seq := m.reuse(st)
		need := st.known()/pool.bs + 1 - len(seq.blocks)
		if seq.n%pool.bs != 0 {
			need++ // a copy of the shared, partly filled last block
		}
		if need+watermark > pool.nFree {
			pool.drop(seq)
			if len(s.running) > 0 {
				break // wait for running sequences to finish
			}
			if s.evictSession() {
				continue
			}
			if need > pool.nFree {
				// Nothing runs and the cache cannot hold it: it never will.
				s.waiting = s.waiting[1:]
				s.tooLong(st)
				continue
			}
			seq = m.reuse(st)
		}
		c := min(st.known()-seq.n, budget)
		if !pool.grow(seq, c, &p.cows) {
			// Unreachable (need counts every block the chunk takes), but
			// never loop on it.
			pool.drop(seq)
			if len(s.running) == 0 {
				s.waiting = s.waiting[1:]
				s.tooLong(st)
				continue
			}
			break
		}
		budget -= c
		s.waiting = s.waiting[1:]
		st.seq = seq
		if !st.began {
			st.began = true
			st.out.CachedTokens = seq.n
			g.mu.Lock()
			g.stats.PromptTokens += int64(len(st.req.Prompt))
			g.stats.CachedTokens += int64(seq.n)
			g.mu.Unlock()
		}
		s.running = append(s.running, st)
		p.seqs = append(p.seqs, st)
		p.chunk = append(p.chunk, c)
	}
	return p, nil
}

// reuse returns a sequence for st holding what the cache already has of
// its tokens: its session's blocks when the session's sequence is a
// prefix of st's tokens, or registered blocks of the longest cached
// prefix (prefix caching), whichever covers more — always leaving at
// least one token to feed, whose logits give the next token.
func (m *Model) reuse(st *genState) *kvSeq {
	g := m.gen
	pool := g.pool
	total := st.known()
	seq := &kvSeq{}
	if name := st.req.Session; name != "" {
		g.mu.Lock()
		if ss := g.sessions[name]; ss != nil && len(ss.tokens) <= total && ss.blocks != nil {
			same := true
			for i, t := range ss.tokens {
				if st.token(i) != t {
					same = false
					break
				}
			}
			if n := min(len(ss.tokens), total-1); same && n > 0 {
				seq.blocks = slices.Clone(ss.blocks[:(n+pool.bs-1)/pool.bs])
				for _, b := range seq.blocks {
					pool.retain(b)
				}
				seq.n = n
			}
		}
		g.mu.Unlock()
	}
	if full := (total - 1) / pool.bs; full*pool.bs > seq.n {
		if blocks := pool.lookup(st.token, full); len(blocks)*pool.bs > seq.n {
			pool.drop(seq)
			seq.blocks, seq.n, seq.reg = blocks, len(blocks)*pool.bs, len(blocks)
		} else {
			pool.release(blocks)
		}
	}
	return seq
}

// evictSession releases the least recently used session's blocks;
// false when there is none to release.
func (s *scheduler) evictSession() bool {
	g := s.m.gen
	g.mu.Lock()
	defer g.mu.Unlock()
	var oldest string
	var t uint64
	for name, ss := range g.sessions {
		if ss.blocks != nil && (oldest == "" || ss.used < t) {
			oldest, t = name, ss.used
		}
	}
	if oldest == "" {
		return false
	}
	g.releaseSession(g.sessions[oldest])
	delete(g.sessions, oldest)
	return true
}

// preempt moves running sequence i back to the front of the waiting
// queue, releasing its blocks; it is recomputed when admitted again
// (vLLM's recompute preemption).
func (s *scheduler) preempt(i int) {
	st := s.running[i]
	s.m.gen.pool.drop(st.seq)
	st.seq = nil
	s.running = slices.Delete(s.running, i, i+1)
	s.waiting = slices.Insert(s.waiting, 0, st)
	g := s.m.gen
	g.mu.Lock()
	g.stats.Preemptions++
	g.mu.Unlock()
}

// finishFull ends a sequence that fills the whole cache by itself.
func (s *scheduler) finishFull(st *genState) {
	st.done = true
	st.out.FinishReason = lm.FinishLength
	s.m.gen.pool.drop(st.seq)
	st.seq = nil
	if st.job.left--; st.job.left == 0 {
		st.job.finish(nil)
	}
}

// tooLong ends a waiting sequence that the cache cannot hold even alone:
// a new request fails (its prompt does not fit), a preempted one ends as
// if it had filled the cache.
func (s *scheduler) tooLong(st *genState) {
	if st.began {
		st.seq = &kvSeq{}
		s.finishFull(st)
		return
	}
	pool := s.m.gen.pool
	st.job.finish(fmt.Errorf("%w: request %d: a prompt of %d tokens needs %d KV-cache blocks of %d rows; the cache has %d (see GenerateOptions)",
		ErrInput, st.index, len(st.req.Prompt), len(st.req.Prompt)/pool.bs+1, pool.bs, pool.blocks()))
}

// step runs the forward pass of a plan over the paged cache and samples
// the next token of every sequence whose known tokens are all fed.
func (m *Model) step(p *stepPlan) ([]backend.SampleResult, error) {
	g := m.gen
	dec, pool := g.dec, g.pool
	if len(p.cows[0]) > 0 {
		if err := dec.CopyKVBlocks(pool.cache, p.cows[0], p.cows[1]); err != nil {
			return nil, fmt.Errorf("policy: copying shared KV blocks: %w", err)
		}
	}
	var ids, pos, last []int32
	var srows []backend.SampleRow
	ps := backend.PagedStep{Seqs: make([]backend.PagedSeq, len(p.seqs))}
	t := 0
	for j, st := range p.seqs {
		c, n := p.chunk[j], st.seq.n
		for i := range c {
			ids = append(ids, int32(st.token(n+i)))
			pos = append(pos, int32(n+i))
		}
		ps.Seqs[j] = backend.PagedSeq{Q0: t, QLen: c, KLen: n + c, Blocks: st.seq.blocks}
		t += c
		if n+c == st.known() {
			last = append(last, int32(t-1))
			srows = append(srows, st.sampleRow())
		}
	}
	ps.Rows = t
	layout, err := dec.PrepareStep(pool.cache, ps)
	if err != nil {
		return nil, fmt.Errorf("policy: preparing a decode step: %w", err)
	}
	defer func() { _ = dec.ReleaseStep(layout) }()
	attend := func(layer int, a backend.Attention, out, q, k, v backend.Buffer) error {
		if err := dec.AppendKV(layout, layer, k, v); err != nil {
			return err
		}
		return dec.PagedAttention(layout, layer, a, out, q)
	}
	tp := m.newPass(false)
	defer tp.free()
	// The positions go to the backend once for every layer's RoPE; the
	// attention is attend's, over the pages, so the rows have no spans.
	r := tp.newRows(pos, nil)
	r.attend = attend
	hf := m.net.hidden(tp, ids, r, &hiddenSaved{})
	res := make([]backend.SampleResult, len(srows))
	if len(srows) > 0 {
		logits := m.net.head.logits(tp, hf, t, last)
		tp.do("sampling", func() error { return dec.SampleRows(logits, m.cfg.VocabSize, srows, res) })
	}
	if !tp.ok() {
		return nil, tp.err
	}
	for j, st := range p.seqs {
		st.seq.n += p.chunk[j]
		pool.register(st.seq, st.token)
	}
	return res, nil
}

// apply records the step's sampled tokens, applies the stop rules and
// retires finished sequences.
func (s *scheduler) apply(p *stepPlan, res []backend.SampleResult) {
	m, g := s.m, s.m.gen
	finished := map[*genState]bool{}
	k := 0
	for _, st := range p.seqs {
		if st.seq.n != st.known() {
			continue // prefill not complete: nothing sampled
		}
		r := res[k]
		k++
		if err := m.takeToken(st, r); err != nil {
			st.job.finish(fmt.Errorf("request %d: %w", st.index, err))
			finished[st] = true
			continue
		}
		if !st.done {
			continue
		}
		finished[st] = true
		if err := m.keepSession(st); err != nil {
			st.job.finish(err)
		}
		if st.job.left--; st.job.left == 0 {
			st.job.finish(nil)
		}
	}
	g.mu.Lock()
	g.stats.Steps++
	g.stats.GeneratedTokens += int64(k)
	g.stats.KVBlocksUsed = g.pool.used()
	g.stats.KVBlocksPeak = max(g.stats.KVBlocksPeak, g.pool.peak)
	g.mu.Unlock()
	if len(finished) == 0 {
		return
	}
	s.running = slices.DeleteFunc(s.running, func(st *genState) bool {
		if !finished[st] {
			return false
		}
		if st.seq != nil {
			g.pool.drop(st.seq)
			st.seq = nil
		}
		return true
	})
}

// takeToken appends a sampled token to st and applies the stop rules.
func (m *Model) takeToken(st *genState, r backend.SampleResult) error {
	if r.Token < 0 {
		return fmt.Errorf("%w: the logits hold a NaN or +Inf, or no finite value", lm.ErrSampling)
	}
	p := st.req.Params
	tok := int(r.Token)
	st.out.Tokens = append(st.out.Tokens, tok)
	if p.Logprobs {
		st.out.LogProbs = append(st.out.LogProbs, r.LogProb)
		st.out.RawLogProbs = append(st.out.RawLogProbs, r.RawLogProb)
	}
	if p.TopLogprobs > 0 {
		top := make([]lm.TokenLogProb, len(r.Top))
		for i, c := range r.Top {
			top[i] = lm.TokenLogProb{Token: int(c.Token), LogProb: c.LogProb, RawLogProb: c.RawLogProb}
		}
		st.out.TopLogProbs = append(st.out.TopLogProbs, top)
	}
	delta := ""
	if st.text != nil {
		delta = st.text.Push(tok)
	}
	if stop, end := st.stop.Next(tok, delta); end {
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
	if st.known() >= m.cfg.MaxPositionEmbeddings {
		st.done = true
		st.out.FinishReason = lm.FinishLength
	}
	return nil
}

// keepSession hands the blocks of a finished request with a Session to
// the session (replacing its earlier sequence) and evicts the least
// recently used sessions above the cap.
func (m *Model) keepSession(st *genState) error {
	name := st.req.Session
	if name == "" || st.seq == nil {
		return nil
	}
	g := m.gen
	n := st.seq.n
	toks := make([]int, n)
	for i := range toks {
		toks[i] = st.token(i)
	}
	s := &session{tokens: toks, blocks: st.seq.blocks}
	st.seq.blocks = nil // the session holds the references now
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.sessions[name]; ok {
		g.releaseSession(old)
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
		g.releaseSession(g.sessions[oldest])
		delete(g.sessions, oldest)
	}
	return nil
}
