package policy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/agentrl/agentrl/policy/backend"
)

var (
	_ Sampler       = (*Model)(nil)
	_ SessionCloser = (*Model)(nil)
)

// prefillTokens bounds the rows of one batched prefill call; prompts are
// grouped into calls of at most this many new tokens (a longer prompt
// goes alone).
const prefillTokens = 2048

// initialDecodeRoom is how many generated tokens a sequence's KV cache
// first has room for when MaxNewTokens does not bound it; the cache grows
// by doubling.
const initialDecodeRoom = 256

// generator is the sampler's state besides the model: its random source
// and the sessions' KV caches.
type generator struct {
	mu          sync.Mutex // guards rng, sessions, clock
	rng         *rand.Rand
	decode      func([]int) string
	maxSessions int
	sessions    map[string]*session
	clock       uint64
	decodeRoom  int // initialDecodeRoom; tests lower it to exercise growth
}

// session is the KV cache of a session's last sequence: tokens and, per
// layer, their keys and values [len(tokens), kvHeads·headDim].
type session struct {
	tokens []int
	k, v   []backend.Buffer
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

func (s *session) free(be backend.Backend) {
	for i := range s.k {
		_ = be.Free(s.k[i])
		_ = be.Free(s.v[i])
	}
	s.k, s.v = nil, nil
}

func (g *generator) closeAll(be backend.Backend) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, s := range g.sessions {
		s.free(be)
		delete(g.sessions, name)
	}
}

// CloseSession frees the KV cache kept for session; unknown sessions are
// ignored.
func (m *Model) CloseSession(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gen
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.sessions[name]; ok {
		s.free(m.be)
		delete(g.sessions, name)
	}
}

// Sessions reports how many sessions' KV caches are held.
func (m *Model) Sessions() int {
	m.gen.mu.Lock()
	defer m.gen.mu.Unlock()
	return len(m.gen.sessions)
}

// kvBatch is the KV cache of the sequences of one Generate call: per
// layer one buffer of rows, sequence i owning rows
// [slots[i].base, slots[i].base+slots[i].cap), of which the first
// slots[i].len hold keys/values of its tokens so far.
type kvBatch struct {
	k, v  []backend.Buffer
	slots []kvSlot
	rows  int
}

type kvSlot struct{ base, cap, len, limit int }

func (m *Model) newKVBatch(caps, limits []int) (*kvBatch, error) {
	kc := &kvBatch{}
	for i, c := range caps {
		kc.slots = append(kc.slots, kvSlot{base: kc.rows, cap: c, limit: limits[i]})
		kc.rows += c
	}
	kvw := m.cfg.NumKeyValueHeads * m.cfg.HeadDim
	for range m.layers {
		k, err := m.be.Alloc(kc.rows * kvw)
		if err != nil {
			kc.free(m.be)
			return nil, fmt.Errorf("policy: allocating the KV cache (%d rows): %w", kc.rows, err)
		}
		kc.k = append(kc.k, k)
		v, err := m.be.Alloc(kc.rows * kvw)
		if err != nil {
			_ = m.be.Free(k)
			kc.k = kc.k[:len(kc.k)-1]
			kc.free(m.be)
			return nil, fmt.Errorf("policy: allocating the KV cache (%d rows): %w", kc.rows, err)
		}
		kc.v = append(kc.v, v)
	}
	return kc, nil
}

func (kc *kvBatch) free(be backend.Backend) {
	for i := range kc.k {
		_ = be.Free(kc.k[i])
		_ = be.Free(kc.v[i])
	}
	kc.k, kc.v = nil, nil
}

// reserve makes room for need more rows in the slots listed, doubling
// their capacity (bounded by their limit) and moving every sequence's
// rows into new buffers when one must grow.
func (m *Model) reserve(kc *kvBatch, seqs []int, need []int) error {
	caps := make([]int, len(kc.slots))
	grow := false
	for i, s := range kc.slots {
		caps[i] = s.cap
	}
	for j, i := range seqs {
		s := kc.slots[i]
		if s.len+need[j] <= s.cap {
			continue
		}
		grow = true
		caps[i] = min(max(s.len+need[j], 2*s.cap), max(s.limit, s.len+need[j]))
	}
	if !grow {
		return nil
	}
	limits := make([]int, len(kc.slots))
	for i, s := range kc.slots {
		limits[i] = s.limit
	}
	nk, err := m.newKVBatch(caps, limits)
	if err != nil {
		return err
	}
	kvw := m.cfg.NumKeyValueHeads * m.cfg.HeadDim
	for i, s := range kc.slots {
		nk.slots[i].len = s.len
		if s.len == 0 {
			continue
		}
		for l := range kc.k {
			if err := m.be.Copy(nk.k[l], nk.slots[i].base*kvw, kc.k[l], s.base*kvw, s.len*kvw); err != nil {
				nk.free(m.be)
				return err
			}
			if err := m.be.Copy(nk.v[l], nk.slots[i].base*kvw, kc.v[l], s.base*kvw, s.len*kvw); err != nil {
				nk.free(m.be)
				return err
			}
		}
	}
	kc.free(m.be)
	*kc = *nk
	return nil
}

// extend feeds chunks[j] to sequence seqs[j] of the KV cache (prefill
// with many tokens, decode with one), appending their keys and values,
// and returns the logits [vocab] after the last token of each chunk.
func (m *Model) extend(kc *kvBatch, seqs []int, chunks [][]int) ([][]float32, error) {
	need := make([]int, len(chunks))
	for j, c := range chunks {
		need[j] = len(c)
	}
	if err := m.reserve(kc, seqs, need); err != nil {
		return nil, err
	}
	var ids, pos, last []int32
	spans := make([]backend.Span, len(seqs))
	offs := make([]int, len(seqs))
	t := 0
	for j, i := range seqs {
		s := kc.slots[i]
		offs[j] = t
		for n, id := range chunks[j] {
			ids = append(ids, int32(id))
			pos = append(pos, int32(s.len+n))
		}
		spans[j] = backend.Span{Q0: t, QLen: len(chunks[j]), K0: s.base, KLen: s.len + len(chunks[j])}
		t += len(chunks[j])
		last = append(last, int32(t-1))
	}
	a := &arena{be: m.be}
	defer a.free()
	x, err := m.embedTokens(a, ids)
	if err != nil {
		return nil, err
	}
	kvw := m.cfg.NumKeyValueHeads * m.cfg.HeadDim
	store := func(l int, k, v backend.Buffer) (backend.Buffer, backend.Buffer, error) {
		for j, i := range seqs {
			s := kc.slots[i]
			n := len(chunks[j]) * kvw
			if err := m.be.Copy(kc.k[l], (s.base+s.len)*kvw, k, offs[j]*kvw, n); err != nil {
				return nil, nil, err
			}
			if err := m.be.Copy(kc.v[l], (s.base+s.len)*kvw, v, offs[j]*kvw, n); err != nil {
				return nil, nil, err
			}
		}
		return kc.k[l], kc.v[l], nil
	}
	if _, x, err = m.layersForward(a, x, t, pos, spans, store, false); err != nil {
		return nil, err
	}
	for j, i := range seqs {
		kc.slots[i].len += len(chunks[j])
	}
	hf, _, err := m.finalNorm(a, x, t, false)
	if err != nil {
		return nil, err
	}
	v := m.cfg.VocabSize
	out := a.alloc(len(seqs) * v)
	if a.err != nil {
		return nil, a.err
	}
	if err := m.be.Logits(backend.LMHead{Rows: t, Dim: m.cfg.HiddenSize, Vocab: v, InvTemp: 1}, last, out, hf, m.head.w); err != nil {
		return nil, fmt.Errorf("policy: lm_head: %w", err)
	}
	flat := make([]float32, len(seqs)*v)
	if err := m.be.Download(flat, out, 0); err != nil {
		return nil, err
	}
	logits := make([][]float32, len(seqs))
	for j := range logits {
		logits[j] = flat[j*v : (j+1)*v]
	}
	return logits, nil
}

// genState is one request's progress.
type genState struct {
	req     GenerateRequest
	sampler *TokenSampler
	stop    *StopChecker
	text    *TextStream
	out     Generation
	done    bool
}

// Generate continues every request: the prompts' new tokens are prefilled
// in batches, then all unfinished sequences decode together, one token
// each per step, against a shared KV cache. Sampling follows SampleParams
// (TokenSampler); a request with Seed draws from its own PCG source
// seeded with it, others from seeds drawn from the sampler's source
// (WithSamplerSeed), so results are reproducible for a fixed call order.
// Generation ends on an end-of-sequence token (EOSTokenIDs) or one of
// StopTokenIDs, a Stop string (decoded with the WithDecoder function), at
// MaxNewTokens, or when the sequence fills max_position_embeddings.
//
// With Session set, the KV cache of the session's last sequence is kept
// after the call; a later request whose Prompt extends that sequence
// prefills only the new tokens (Generation.CachedTokens). At most
// WithMaxSessions sessions are kept, least recently used dropped first.
func (m *Model) Generate(ctx context.Context, reqs []GenerateRequest) ([]Generation, error) {
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
		if err := CheckSampleParams(r.Params); err != nil {
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.syncWeights(); err != nil {
		return nil, err
	}
	g := m.gen
	states := make([]*genState, len(reqs))
	caps, limits, reuse := make([]int, len(reqs)), make([]int, len(reqs)), make([]int, len(reqs))
	var reused []*session
	g.mu.Lock()
	for i, r := range reqs {
		seed := g.rng.Uint64()
		if r.Params.Seed != nil {
			seed = *r.Params.Seed
		}
		st := &genState{req: r, sampler: NewTokenSampler(rand.New(rand.NewPCG(seed, 0))), stop: NewStopChecker(r.Params, m.eos)}
		if len(r.Params.Stop) > 0 {
			st.text = NewTextStream(g.decode, r.Prompt)
		}
		states[i] = st
		limits[i] = maxPos
		room := maxPos - len(r.Prompt)
		if r.Params.MaxNewTokens > 0 {
			room = min(room, r.Params.MaxNewTokens)
			limits[i] = len(r.Prompt) + room
		}
		caps[i] = len(r.Prompt) + min(room, g.decodeRoom)
		var s *session
		if r.Session != "" {
			s = g.sessions[r.Session]
		}
		if s != nil && len(s.tokens) <= len(r.Prompt) && equalInts(s.tokens, r.Prompt[:len(s.tokens)]) {
			// At least one token must be fed to get the next logits.
			reuse[i] = min(len(s.tokens), len(r.Prompt)-1)
		} else {
			s = nil
		}
		reused = append(reused, s)
	}
	g.mu.Unlock()

	kc, err := m.newKVBatch(caps, limits)
	if err != nil {
		return nil, err
	}
	defer kc.free(m.be)
	kvw := m.cfg.NumKeyValueHeads * m.cfg.HeadDim
	for i, s := range reused {
		if s == nil || reuse[i] == 0 {
			continue
		}
		for l := range kc.k {
			if err := m.be.Copy(kc.k[l], kc.slots[i].base*kvw, s.k[l], 0, reuse[i]*kvw); err != nil {
				return nil, err
			}
			if err := m.be.Copy(kc.v[l], kc.slots[i].base*kvw, s.v[l], 0, reuse[i]*kvw); err != nil {
				return nil, err
			}
		}
		kc.slots[i].len = reuse[i]
		states[i].out.CachedTokens = reuse[i]
	}

	// Prefill, in groups of at most prefillTokens new tokens.
	for i := 0; i < len(reqs); {
		var seqs []int
		var chunks [][]int
		n := 0
		for ; i < len(reqs); i++ {
			c := reqs[i].Prompt[reuse[i]:]
			if len(seqs) > 0 && n+len(c) > prefillTokens {
				break
			}
			seqs, chunks = append(seqs, i), append(chunks, c)
			n += len(c)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		logits, err := m.extend(kc, seqs, chunks)
		if err != nil {
			return nil, err
		}
		for j, i := range seqs {
			if err := m.sampleNext(states[i], logits[j]); err != nil {
				return nil, fmt.Errorf("request %d: %w", i, err)
			}
		}
	}
	// Decode: every unfinished sequence advances by one token per step.
	for {
		var seqs []int
		var chunks [][]int
		for i, st := range states {
			if !st.done {
				seqs = append(seqs, i)
				chunks = append(chunks, st.out.Tokens[len(st.out.Tokens)-1:])
			}
		}
		if len(seqs) == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		logits, err := m.extend(kc, seqs, chunks)
		if err != nil {
			return nil, err
		}
		for j, i := range seqs {
			if err := m.sampleNext(states[i], logits[j]); err != nil {
				return nil, fmt.Errorf("request %d: %w", i, err)
			}
		}
	}
	if err := m.keepSessions(kc, states); err != nil {
		return nil, err
	}
	out := make([]Generation, len(states))
	for i, st := range states {
		out[i] = st.out
	}
	return out, nil
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
		case FinishStopToken:
			st.out.StopToken = stop.Token
		case FinishStop:
			st.out.StopString = stop.String
		}
		return nil
	}
	if len(st.req.Prompt)+len(st.out.Tokens) >= m.cfg.MaxPositionEmbeddings {
		st.done = true
		st.out.FinishReason = FinishLength
	}
	return nil
}

// keepSessions stores the KV cache of each request with a Session (the
// last such request of a session wins) and evicts the least recently
// used sessions above the cap.
func (m *Model) keepSessions(kc *kvBatch, states []*genState) error {
	g := m.gen
	g.mu.Lock()
	defer g.mu.Unlock()
	kvw := m.cfg.NumKeyValueHeads * m.cfg.HeadDim
	for i, st := range states {
		name := st.req.Session
		if name == "" {
			continue
		}
		n := kc.slots[i].len
		s := &session{tokens: append(append(make([]int, 0, n), st.req.Prompt...), st.out.Tokens...)[:n]}
		for l := range kc.k {
			k, err := m.be.Alloc(n * kvw)
			if err != nil {
				s.free(m.be)
				return err
			}
			v, err := m.be.Alloc(n * kvw)
			if err != nil {
				_ = m.be.Free(k)
				s.free(m.be)
				return err
			}
			s.k, s.v = append(s.k, k), append(s.v, v)
			if err := m.be.Copy(k, 0, kc.k[l], kc.slots[i].base*kvw, n*kvw); err != nil {
				s.free(m.be)
				return err
			}
			if err := m.be.Copy(v, 0, kc.v[l], kc.slots[i].base*kvw, n*kvw); err != nil {
				s.free(m.be)
				return err
			}
		}
		if old, ok := g.sessions[name]; ok {
			old.free(m.be)
		}
		g.clock++
		s.used = g.clock
		g.sessions[name] = s
	}
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
