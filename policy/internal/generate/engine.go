// Package generate is the generation engine behind package policy's
// Model.Generate: a continuous-batching scheduler (chunked prefill beside
// decodes, preemption when the KV cache is full), the paged KV cache's
// block manager (reference counts, blocks shared by sessions and common
// prompt prefixes, copy on write), the sessions that keep a
// conversation's blocks between turns, and the stop rules.
//
// An Engine reaches its model only through the Model interface — the
// model's shape, its lock, its weights brought up to date, and a forward
// step over a Batch whose attention runs over the engine's cache — and
// the cache and sampling through a backend.Decoder. ollama splits its Go
// engine the same way: the models (model/), the KV cache (kvcache/) and
// the runner that schedules sequences over both (runner/ollamarunner).
//
// The files: engine.go the Engine, its sessions and its counters;
// schedule.go the scheduler's loop and one step; cache.go the sizing of
// the KV cache; kvpool.go the block manager; model.go the Model interface.
package generate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
)

// ErrInput is what errors about requests an Engine cannot run wrap when
// Config.ErrInput is nil.
var ErrInput = errors.New("generate: invalid input")

// Config configures an Engine; the zero value takes every default.
type Config struct {
	// KVCacheBytes, GPUMemoryUtilization, MaxRunning and PrefixCaching
	// are policy.GenerateOptions' (which documents them): the KV cache's
	// size, or the fraction of device memory it fills; the sequences
	// decoded together; whether blocks are shared between any requests
	// whose tokens start alike, besides a session's turns.
	KVCacheBytes         int64
	GPUMemoryUtilization float64
	MaxRunning           int
	PrefixCaching        bool
	// BlockSize is the rows of a KV-cache block (default 16, vLLM's
	// block size).
	BlockSize int
	// PrefillTokens bounds the prompt tokens prefilled in one step
	// (default 2048, vLLM's max_num_batched_tokens): prompts are
	// prefilled in chunks beside the running sequences' decode rows, so
	// that a burst of new prompts delays the sequences already decoding
	// by a bounded amount.
	PrefillTokens int
	// MaxSessions bounds the sessions whose blocks are kept, the least
	// recently used dropped first (default 64).
	MaxSessions int
	// Seed seeds the source from which requests without
	// SampleParams.Seed draw theirs.
	Seed uint64
	// Decode is the detokeniser Stop strings need; without one, a
	// request with Stop strings is an error.
	Decode func(ids []int) string
	// ErrInput is the error wrapped by the errors about requests that
	// cannot run (bad prompts or parameters, a prompt the KV cache
	// cannot hold, no memory for the cache): policy passes its own
	// ErrInput. Nil: this package's ErrInput.
	ErrInput error
	// OnStep, when set, is called by the scheduler after each forward
	// step, on its goroutine, which waits for it (it must not wait for
	// the engine in turn).
	OnStep func(StepInfo)
}

// Defaults of Config.
const (
	DefaultMaxRunning           = 256
	DefaultGPUMemoryUtilization = 0.9
	DefaultBlockSize            = 16
	DefaultPrefillTokens        = 2048
	DefaultMaxSessions          = 64
)

// StepInfo describes a forward step that has just run.
type StepInfo struct {
	// Sequences are the sequences the step advanced.
	Sequences int
	// KVBlocksUsed are the blocks referenced after the step's writes,
	// before finished sequences give theirs back.
	KVBlocksUsed int
}

// Stats counts an Engine's work since it was made, and describes its KV
// cache; policy.GenerateStats has the same fields and documents them.
type Stats struct {
	Steps                                             int64
	PromptTokens, CachedTokens, GeneratedTokens       int64
	Preemptions                                       int64
	KVBlocks, KVBlockSize, KVBlocksUsed, KVBlocksPeak int
	KVBytes                                           int64
	Decoder                                           string
}

// Engine generates for one Model: it owns the scheduler, the paged KV
// cache, the sessions and their prefix sharing. It is safe for
// concurrent use; Generate calls made while others run join their batch.
type Engine struct {
	model Model
	dec   backend.Decoder
	cfg   Config // defaults filled in

	mu       sync.Mutex // guards everything below but the pool
	rng      *rand.Rand
	sessions map[string]*session
	clock    uint64
	pending  []*genState // submitted, not yet taken by the scheduler, in submission order
	running  bool        // a scheduler goroutine is working
	doomed   []*session  // closed while the scheduler ran; it releases them
	stats    Stats

	// pool is the KV cache while the engine generates or sessions hold
	// blocks. It is used under the model's lock only (the scheduler's,
	// or that of Reset's and CloseSession's callers); setting or
	// clearing it also takes mu.
	pool *kvPool
}

// session is what a session keeps of its last sequence: the tokens whose
// keys and values its blocks hold (references in the pool).
type session struct {
	tokens []int
	blocks []int32
	used   uint64
}

// New returns an engine for m that keeps its KV cache and samples with
// dec: the backend's own Decoder, or a backend.HostDecoder over it.
func New(m Model, dec backend.Decoder, c Config) *Engine {
	if c.MaxRunning <= 0 {
		c.MaxRunning = DefaultMaxRunning
	}
	if c.GPUMemoryUtilization <= 0 || c.GPUMemoryUtilization > 1 {
		c.GPUMemoryUtilization = DefaultGPUMemoryUtilization
	}
	if c.BlockSize <= 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.PrefillTokens <= 0 {
		c.PrefillTokens = DefaultPrefillTokens
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.ErrInput == nil {
		c.ErrInput = ErrInput
	}
	return &Engine{
		model:    m,
		dec:      dec,
		cfg:      c,
		rng:      rand.New(rand.NewPCG(c.Seed, 0x243f6a8885a308d3)),
		sessions: make(map[string]*session),
	}
}

// Config returns the engine's configuration, defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Generate continues every request with continuous batching, as
// policy.Model.Generate documents: the requests join the sequences the
// engine is decoding, and the call returns as soon as its own requests
// have finished, or at once with ctx's error when ctx ends (its
// sequences then leave the batch at the next step). When ctx ends with
// cause lm.ErrInterrupted (context.CancelCauseFunc), the call instead
// waits for the scheduler to let its sequences go — at the end of the
// step under way — and returns, with no error, the finished ones whole
// and the others as far as they got, with lm.FinishAbort: their tokens
// and log-probabilities exactly as sampled (a request still waiting for
// admission has none). Their KV blocks are freed, and a Session keeps
// the sequence it held before the call.
func (e *Engine) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	spec := e.model.Spec()
	for i, r := range reqs {
		if err := e.check(spec, i, r); err != nil {
			return nil, err
		}
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		if errors.Is(context.Cause(ctx), lm.ErrInterrupted) {
			out := make([]lm.Generation, len(reqs))
			for i := range out {
				out[i].FinishReason = lm.FinishAbort
			}
			return out, nil
		}
		return nil, err
	}
	job := &genJob{ctx: ctx, done: make(chan struct{}), left: len(reqs)}
	e.mu.Lock()
	for i, r := range reqs {
		seed := e.rng.Uint64()
		if r.Params.Seed != nil {
			seed = *r.Params.Seed
		}
		st := &genState{job: job, index: i, req: r, seed: seed, stop: lm.NewStopChecker(r.Params, spec.EOS)}
		if len(r.Params.Stop) > 0 {
			st.text = lm.NewTextStream(e.cfg.Decode, r.Prompt)
		}
		job.states = append(job.states, st)
	}
	e.pending = append(e.pending, job.states...)
	if !e.running {
		e.running = true
		go e.schedule()
	}
	e.mu.Unlock()
	select {
	case <-job.done:
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), lm.ErrInterrupted) {
			return nil, ctx.Err()
		}
		// Interrupted: the scheduler hands the sequences back at its
		// next step (or they finished or failed meanwhile).
		<-job.done
	}
	if job.err != nil {
		return nil, job.err
	}
	out := make([]lm.Generation, len(job.states))
	for i, st := range job.states {
		out[i] = st.out
		if job.interrupted && !st.done {
			out[i].FinishReason = lm.FinishAbort
		}
	}
	return out, nil
}

// check validates request i against the model.
func (e *Engine) check(spec Spec, i int, r lm.GenerateRequest) error {
	if len(r.Prompt) == 0 {
		return fmt.Errorf("%w: request %d has an empty prompt", e.cfg.ErrInput, i)
	}
	if len(r.Prompt) >= spec.MaxPositions {
		return fmt.Errorf("%w: request %d: prompt of %d tokens leaves no room below max_position_embeddings %d", e.cfg.ErrInput, i, len(r.Prompt), spec.MaxPositions)
	}
	for t, id := range r.Prompt {
		if id < 0 || id >= spec.Vocab {
			return fmt.Errorf("request %d: %w: sequence %d, position %d: token id %d outside [0, %d)", i, e.cfg.ErrInput, i, t, id, spec.Vocab)
		}
	}
	if err := lm.CheckSampleParams(r.Params); err != nil {
		return fmt.Errorf("request %d: %w", i, err)
	}
	if len(r.Params.Stop) > 0 && e.cfg.Decode == nil {
		return fmt.Errorf("%w: request %d has Stop strings but the sampler has no decoder (WithDecoder)", e.cfg.ErrInput, i)
	}
	return nil
}

// CloseSession releases the KV-cache blocks kept for session; unknown
// sessions are ignored. It does not wait for a running generation: the
// scheduler releases them between two steps.
func (e *Engine) CloseSession(name string) {
	e.mu.Lock()
	s, ok := e.sessions[name]
	if !ok {
		e.mu.Unlock()
		return
	}
	delete(e.sessions, name)
	if e.running {
		e.doomed = append(e.doomed, s)
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	// The pool is used only under the model's lock, which serialises
	// all use of the backend. The session is out of the map, so nothing
	// else will reach it.
	e.model.Lock()
	defer e.model.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.releaseSession(s)
	if !e.running && len(e.sessions) == 0 {
		e.freePoolLocked()
	}
}

// Sessions reports how many sessions' KV caches are held.
func (e *Engine) Sessions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sessions)
}

// Pending reports the requests submitted that the scheduler has not yet
// taken up (it takes them between two steps).
func (e *Engine) Pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.pending)
}

// Busy reports whether a burst of generation is under way: a scheduler
// holds the model, or is about to.
func (e *Engine) Busy() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.KVBlockSize = e.cfg.BlockSize
	s.Decoder = "backend"
	if _, ok := e.dec.(*backend.HostDecoder); ok {
		s.Decoder = "host"
	}
	return s
}

// Reset drops every session and frees the KV cache: for a model whose
// function has changed (the blocks hold keys and values the new one
// would not compute) or that closes. The caller holds the model's lock,
// so no step runs meanwhile.
func (e *Engine) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, s := range e.sessions {
		e.releaseSession(s)
		delete(e.sessions, name)
	}
	e.freeDoomedLocked()
	e.freePoolLocked()
}

// releaseSession drops s's block references; the caller holds the
// model's lock.
func (e *Engine) releaseSession(s *session) {
	if e.pool != nil {
		e.pool.release(s.blocks)
	}
	s.blocks = nil
}

func (e *Engine) freeDoomedLocked() {
	for _, s := range e.doomed {
		e.releaseSession(s)
	}
	e.doomed = nil
}

// freePoolLocked frees the KV cache (the sessions must be gone).
func (e *Engine) freePoolLocked() {
	if e.pool == nil {
		return
	}
	_ = e.pool.close()
	e.pool = nil
	e.stats.KVBlocks, e.stats.KVBlocksUsed, e.stats.KVBytes = 0, 0, 0
}
