package policy

import (
	"context"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/policy/internal/generate"
)

var (
	_ lm.Sampler       = (*Model)(nil)
	_ lm.SessionCloser = (*Model)(nil)
)

// Generate continues every request with continuous batching: the
// requests join the sequences that the model is already decoding (from
// other Generate calls, such as other trajectories of a rollout), and all
// of them advance one token per step against a shared, paged KV cache. A
// sequence leaves the batch as soon as it finishes, and a call returns as
// soon as its own requests have finished, without waiting for longer
// generations of other calls; requests that arrive meanwhile are admitted
// between two steps, their prompts prefilled in the same forward pass as
// the other sequences' next tokens, in chunks of at most 2048 prompt
// tokens per step (a longer prompt is prefilled over several steps).
// On the CPU backend results do not depend on what else is in the
// batch, bit for bit: its kernels compute every row in an order fixed by
// the row (package internal/cpu), so a request's tokens and
// log-probabilities are the same whatever the requests beside it, the
// chunks of its prefill, the KV cache's layout and the number of
// threads, and with Logprobs and sampling that truncates nothing (no
// top-k, top-p or min-p) its LogProbs are, bit for bit, what Forward
// computes at the same temperature for the same sequence (RawLogProbs
// likewise at temperature 1) — the PPO ratio of a policy with itself is
// exactly 1. Other backends (the GPU's) guarantee this only up to float32
// rounding.
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
// stay fixed until the model falls idle: the burst holds the model, so
// training computations (Forward, a backward, a DeviceAdamW step, adapter
// changes) wait for it to end. Do not step a host optimizer, which writes
// Params' slices directly, while Generate calls are in flight. When ctx
// ends, Generate returns its error at once and the call's sequences leave
// the batch at the next step.
func (m *Model) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	// The engine (package policy/internal/generate) does the work; it
	// reaches the model through genModel.
	return m.gen.Generate(ctx, reqs)
}

// CloseSession releases the KV-cache blocks kept for session; unknown
// sessions are ignored. It does not wait for a running generation: the
// scheduler releases them between two steps.
func (m *Model) CloseSession(name string) { m.gen.CloseSession(name) }

// Sessions reports how many sessions' KV caches are held.
func (m *Model) Sessions() int { return m.gen.Sessions() }

// genModel is the model as its generation engine sees it
// (generate.Model): its shape, its lock, its weights brought up to date,
// and a forward step whose attention runs over the engine's paged KV
// cache.
type genModel struct {
	m    *Model
	step generate.StepMemory // of the model's config
}

var _ generate.Model = genModel{}

func newGenModel(m *Model) genModel {
	c := m.cfg
	q, kv := int64(c.NumAttentionHeads*c.HeadDim), int64(c.NumKeyValueHeads*c.HeadDim)
	// A step's float32 buffers per row: layer input and norm, queries,
	// keys, values, attention output, gate, up and their product,
	// doubled for the products' bf16 inputs and the allocator's rounding;
	// the logits of an output row, twice; bf16 copies of every weight,
	// and 256 MiB.
	perRow := 4 * (3*int64(c.HiddenSize) + 2*q + 2*kv + 3*int64(c.IntermediateSize))
	return genModel{m: m, step: generate.StepMemory{
		PerRow:    2 * perRow,
		PerOutput: 2 * 4 * int64(c.VocabSize),
		Fixed:     2*c.NumParams() + 256<<20,
	}}
}

// Lock and Unlock hold the model's mutex, which every computation on its
// backend takes.
func (g genModel) Lock()   { g.m.mu.Lock() }
func (g genModel) Unlock() { g.m.mu.Unlock() }

// Spec is the model's shape.
func (g genModel) Spec() generate.Spec {
	m := g.m
	return generate.Spec{
		Layers:       len(m.net.layers),
		KVHeads:      m.cfg.NumKeyValueHeads,
		HeadDim:      m.cfg.HeadDim,
		Vocab:        m.cfg.VocabSize,
		MaxPositions: m.cfg.MaxPositionEmbeddings,
		EOS:          m.eos,
		Step:         g.step,
	}
}

// SyncWeights uploads the weights written on the host since the last
// computation.
func (g genModel) SyncWeights() error { return g.m.w.sync() }

// Forward runs the transformer over the batch's rows, its attention
// b.Attend's, and hands the logits of b.Outputs to b.Sample.
func (g genModel) Forward(b *generate.Batch) error {
	m := g.m
	tp := m.newPass(false)
	defer tp.free()
	// The positions go to the backend once for every layer's RoPE; the
	// attention is b.Attend's, over the pages, so the rows have no spans.
	r := tp.newRows(b.Positions, nil)
	r.attend = attendFunc(b.Attend)
	hf := m.net.hidden(tp, b.Tokens, r, &hiddenSaved{})
	if len(b.Outputs) > 0 {
		logits := m.net.head.logits(tp, hf, len(b.Tokens), b.Outputs)
		tp.do("sampling", func() error { return b.Sample(logits) })
	}
	return tp.err
}

// decoderOf is be's own backend.Decoder, or a backend.HostDecoder over
// its Memory and Kernels.
func decoderOf(be backend.Backend) backend.Decoder {
	if d, ok := be.(backend.Decoder); ok {
		return d
	}
	return backend.NewHostDecoder(be)
}
