package generate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
)

// genJob is one Generate call: its requests' states, and what the
// scheduler reports back.
type genJob struct {
	ctx    context.Context
	states []*genState
	done   chan struct{} // closed when every state finished or the job failed
	err    error         // set before done is closed
	left   int           // unfinished states; scheduler only
	ended  bool          // done is closed; scheduler only
	// interrupted is set (before done is closed) when the scheduler let
	// the job's unfinished sequences go because its context ended with
	// cause lm.ErrInterrupted: their outputs are what they sampled.
	interrupted bool
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

// scheduler is one burst of the continuous-batching loop: the running
// sequences, in admission order, and those waiting for admission
// (preempted ones first, then new ones in submission order).
type scheduler struct {
	e       *Engine
	spec    Spec // the model's, read when the burst starts
	running []*genState
	waiting []*genState
}

// schedule is the continuous-batching loop. It runs while there is work,
// holding the model's lock (so training computations wait for generation
// to fall idle), and exits when no sequence is running or waiting.
func (e *Engine) schedule() {
	e.model.Lock()
	defer e.model.Unlock()
	s := &scheduler{e: e, spec: e.model.Spec()}
	synced := e.model.SyncWeights()
	if e.pool != nil && e.pool.prefix != nil {
		// The weights may have changed since the blocks were computed.
		clear(e.pool.prefix)
		clear(e.pool.key)
	}
	for {
		e.mu.Lock()
		e.freeDoomedLocked()
		s.waiting = append(s.waiting, e.pending...)
		e.pending = nil
		// After the intake, so that a call whose caller left while it
		// was queued never reaches a step.
		s.dropEnded()
		if len(s.running) == 0 && len(s.waiting) == 0 {
			e.running = false
			if len(e.sessions) == 0 {
				e.freePoolLocked()
			}
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		if synced != nil {
			// No weights, no generation: fail every request, including
			// those that arrive meanwhile, until the queue is empty.
			s.fail(synced)
			continue
		}
		if err := e.ensurePool(s.spec); err != nil {
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
		res, err := s.step(plan)
		if err != nil {
			s.fail(err)
			continue
		}
		if e.cfg.OnStep != nil {
			e.cfg.OnStep(StepInfo{Sequences: len(plan.seqs), KVBlocksUsed: e.pool.used()})
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
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.sessions)
	e.doomed = nil
	e.freePoolLocked()
}

// dropEnded releases the blocks of sequences whose call has failed or
// whose caller has gone, and forgets waiting ones of such calls.
func (s *scheduler) dropEnded() {
	pool := s.e.pool
	var interrupted []*genJob
	gone := func(st *genState) bool {
		if !st.job.ended && st.job.ctx.Err() == nil {
			return false
		}
		if !st.job.ended && !slices.Contains(interrupted, st.job) && errors.Is(context.Cause(st.job.ctx), lm.ErrInterrupted) {
			interrupted = append(interrupted, st.job)
		}
		if st.seq != nil && pool != nil {
			pool.drop(st.seq)
		}
		st.seq = nil
		return true
	}
	s.running = slices.DeleteFunc(s.running, gone)
	s.waiting = slices.DeleteFunc(s.waiting, gone)
	// A call interrupted (lm.ErrInterrupted) gets its sequences back as
	// they are, now that no step will touch them.
	for _, j := range interrupted {
		j.interrupted = true
		j.finish(nil)
	}
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
// newly admitted ones within Config.PrefillTokens, and the blocks they
// write. When the blocks run out it frees sessions, least recently used
// first, then preempts running sequences, most recently admitted first.
func (s *scheduler) plan() (*stepPlan, error) {
	e := s.e
	pool := e.pool
	p := &stepPlan{}
	budget := e.cfg.PrefillTokens
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
	for len(s.waiting) > 0 && len(s.running) < e.cfg.MaxRunning && budget > 0 {
		st := s.waiting[0]
		seq := e.reuse(st)
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
			seq = e.reuse(st)
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
			e.mu.Lock()
			e.stats.PromptTokens += int64(len(st.req.Prompt))
			e.stats.CachedTokens += int64(seq.n)
			e.mu.Unlock()
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
func (e *Engine) reuse(st *genState) *kvSeq {
	pool := e.pool
	total := st.known()
	seq := &kvSeq{}
	if name := st.req.Session; name != "" {
		e.mu.Lock()
		if ss := e.sessions[name]; ss != nil && len(ss.tokens) <= total && ss.blocks != nil {
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
		e.mu.Unlock()
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
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	var oldest string
	var t uint64
	for name, ss := range e.sessions {
		if ss.blocks != nil && (oldest == "" || ss.used < t) {
			oldest, t = name, ss.used
		}
	}
	if oldest == "" {
		return false
	}
	e.releaseSession(e.sessions[oldest])
	delete(e.sessions, oldest)
	return true
}

// preempt moves running sequence i back to the front of the waiting
// queue, releasing its blocks; it is recomputed when admitted again
// (vLLM's recompute preemption).
func (s *scheduler) preempt(i int) {
	st := s.running[i]
	s.e.pool.drop(st.seq)
	st.seq = nil
	s.running = slices.Delete(s.running, i, i+1)
	s.waiting = slices.Insert(s.waiting, 0, st)
	e := s.e
	e.mu.Lock()
	e.stats.Preemptions++
	e.mu.Unlock()
}

// finishFull ends a sequence that fills the whole cache by itself.
func (s *scheduler) finishFull(st *genState) {
	st.done = true
	st.out.FinishReason = lm.FinishLength
	s.e.pool.drop(st.seq)
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
	pool := s.e.pool
	st.job.finish(fmt.Errorf("%w: request %d: a prompt of %d tokens needs %d KV-cache blocks of %d rows; the cache has %d (see GenerateOptions)",
		s.e.cfg.ErrInput, st.index, len(st.req.Prompt), len(st.req.Prompt)/pool.bs+1, pool.bs, pool.blocks()))
}

// step runs the model's forward pass over a plan, attention over the
// paged cache, and samples the next token of every sequence whose known
// tokens are all fed.
func (s *scheduler) step(p *stepPlan) ([]backend.SampleResult, error) {
	dec, pool := s.e.dec, s.e.pool
	if len(p.cows[0]) > 0 {
		if err := dec.CopyKVBlocks(pool.cache, p.cows[0], p.cows[1]); err != nil {
			return nil, fmt.Errorf("policy: copying shared KV blocks: %w", err)
		}
	}
	b := &Batch{}
	var srows []backend.SampleRow
	ps := backend.PagedStep{Seqs: make([]backend.PagedSeq, len(p.seqs))}
	t := 0
	for j, st := range p.seqs {
		c, n := p.chunk[j], st.seq.n
		for i := range c {
			b.Tokens = append(b.Tokens, int32(st.token(n+i)))
			b.Positions = append(b.Positions, int32(n+i))
		}
		ps.Seqs[j] = backend.PagedSeq{Q0: t, QLen: c, KLen: n + c, Blocks: st.seq.blocks}
		t += c
		if n+c == st.known() {
			b.Outputs = append(b.Outputs, int32(t-1))
			srows = append(srows, st.sampleRow())
		}
	}
	ps.Rows = t
	layout, err := dec.PrepareStep(pool.cache, ps)
	if err != nil {
		return nil, fmt.Errorf("policy: preparing a decode step: %w", err)
	}
	defer func() { _ = dec.ReleaseStep(layout) }()
	b.Attend = func(layer int, a backend.Attention, out, q, k, v backend.Buffer) error {
		if err := dec.AppendKV(layout, layer, k, v); err != nil {
			return err
		}
		return dec.PagedAttention(layout, layer, a, out, q)
	}
	res := make([]backend.SampleResult, len(srows))
	b.Sample = func(logits backend.Buffer) error { return dec.SampleRows(logits, s.spec.Vocab, srows, res) }
	if err := s.e.model.Forward(b); err != nil {
		return nil, err
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
	e := s.e
	finished := map[*genState]bool{}
	k := 0
	for _, st := range p.seqs {
		if st.seq.n != st.known() {
			continue // prefill not complete: nothing sampled
		}
		r := res[k]
		k++
		if err := s.takeToken(st, r); err != nil {
			st.job.finish(fmt.Errorf("request %d: %w", st.index, err))
			finished[st] = true
			continue
		}
		if !st.done {
			continue
		}
		finished[st] = true
		e.keepSession(st)
		if st.job.left--; st.job.left == 0 {
			st.job.finish(nil)
		}
	}
	e.mu.Lock()
	e.stats.Steps++
	e.stats.GeneratedTokens += int64(k)
	e.stats.KVBlocksUsed = e.pool.used()
	e.stats.KVBlocksPeak = max(e.stats.KVBlocksPeak, e.pool.peak)
	e.mu.Unlock()
	if len(finished) == 0 {
		return
	}
	s.running = slices.DeleteFunc(s.running, func(st *genState) bool {
		if !finished[st] {
			return false
		}
		if st.seq != nil {
			e.pool.drop(st.seq)
			st.seq = nil
		}
		return true
	})
}

// takeToken appends a sampled token to st and applies the stop rules.
func (s *scheduler) takeToken(st *genState, r backend.SampleResult) error {
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
	if st.known() >= s.spec.MaxPositions {
		st.done = true
		st.out.FinishReason = lm.FinishLength
	}
	return nil
}

// keepSession hands the blocks of a finished request with a Session to
// the session (replacing its earlier sequence) and evicts the least
// recently used sessions above Config.MaxSessions.
func (e *Engine) keepSession(st *genState) {
	name := st.req.Session
	if name == "" || st.seq == nil {
		return
	}
	n := st.seq.n
	toks := make([]int, n)
	for i := range toks {
		toks[i] = st.token(i)
	}
	s := &session{tokens: toks, blocks: st.seq.blocks}
	st.seq.blocks = nil // the session holds the references now
	e.mu.Lock()
	defer e.mu.Unlock()
	if old, ok := e.sessions[name]; ok {
		e.releaseSession(old)
	}
	e.clock++
	s.used = e.clock
	e.sessions[name] = s
	for len(e.sessions) > e.cfg.MaxSessions {
		var oldest string
		var t uint64
		for name, s := range e.sessions {
			if oldest == "" || s.used < t {
				oldest, t = name, s.used
			}
		}
		e.releaseSession(e.sessions[oldest])
		delete(e.sessions, oldest)
	}
}
