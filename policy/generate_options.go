package policy

import (
	"fmt"

	"github.com/agentrl/agentrl/policy/backend"
)

// Defaults of GenerateOptions.
const (
	defaultMaxRunning           = 256
	defaultGPUMemoryUtilization = 0.9
	// Host memory: at most a quarter of the available memory, and at
	// most hostKVMax; a backend that reports no memory gets unknownKVBytes.
	hostKVMax      = 8 << 30
	unknownKVBytes = 1 << 30
)

// GenerateOptions configure Generate's KV cache and scheduler; the zero
// value takes every default.
type GenerateOptions struct {
	// KVCacheBytes sizes the KV cache; 0 sizes it from the backend's
	// memory when generation starts, as below.
	KVCacheBytes int64
	// GPUMemoryUtilization is vLLM's gpu_memory_utilization, for a cache
	// in device memory: it gets what keeps the device's memory in use
	// under this fraction of its total, u·total − (total − free), less an
	// estimate of what one step's activations need (default 0.9). In host
	// memory (the CPU backend) the cache gets a quarter of the available
	// memory, at most 8 GiB; the CPU allocates a block when it is first
	// written, so only what sequences use is taken. A backend without
	// backend.Decoder gets 1 GiB, also allocated as used.
	GPUMemoryUtilization float64
	// MaxRunning bounds the sequences decoded together (vLLM's
	// max_num_seqs); default 256.
	MaxRunning int
	// PrefixCaching shares KV blocks between any requests whose token
	// sequences start with the same full blocks (vLLM's automatic prefix
	// caching), besides a session's turns; CachedTokens counts both. Off
	// by default: then only sessions are reused. Registrations are
	// dropped whenever a burst of generation starts, since the weights
	// may have changed.
	PrefixCaching bool
}

// WithGenerateOptions configures Generate's KV cache and scheduler.
func WithGenerateOptions(o GenerateOptions) ModelOption {
	return func(mo *modelOptions) { mo.gen = o }
}

// GenerateStats counts the work of Generate since the model was made,
// and describes its KV cache.
type GenerateStats struct {
	// Steps are the scheduler's forward passes.
	Steps int64
	// PromptTokens are the prompt tokens of admitted requests, of which
	// CachedTokens were reused rather than computed; GeneratedTokens the
	// tokens sampled.
	PromptTokens, CachedTokens, GeneratedTokens int64
	// Preemptions counts sequences preempted for lack of KV blocks.
	Preemptions int64
	// KVBlocks is the cache's capacity in blocks of KVBlockSize rows and
	// KVBytes its memory (0 while no cache is allocated); KVBlocksUsed
	// the blocks referenced after the last step, KVBlocksPeak the most at
	// once.
	KVBlocks, KVBlockSize, KVBlocksUsed, KVBlocksPeak int
	KVBytes                                           int64
	// Decoder says what runs the KV cache and sampling: "backend" when
	// the backend implements backend.Decoder (only token ids and
	// log-probabilities cross to the host), "host" otherwise.
	Decoder string
}

// GenerateStats returns Generate's counters.
func (m *Model) GenerateStats() GenerateStats {
	g := m.gen
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stats
	s.KVBlockSize = g.decodeRoom
	s.Decoder = "backend"
	if _, ok := g.dec.(*backend.HostDecoder); ok {
		s.Decoder = "host"
	}
	return s
}

// ensurePool allocates the KV cache if there is none.
func (m *Model) ensurePool() error {
	g := m.gen
	if g.pool != nil {
		return nil
	}
	spec, per, err := m.kvSpec()
	if err != nil {
		return err
	}
	pool, err := newKVPool(g.dec, spec, g.opt.PrefixCaching)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pool = pool
	g.stats.KVBlocks = spec.Blocks
	g.stats.KVBytes = int64(spec.Blocks) * per
	return nil
}

// kvSpec sizes the KV cache (see GenerateOptions): the budget's blocks,
// but never more than MaxRunning sequences of max_position_embeddings
// tokens can use. It returns the spec and the bytes of a block.
func (m *Model) kvSpec() (backend.KVCacheSpec, int64, error) {
	g := m.gen
	spec := backend.KVCacheSpec{Layers: len(m.net.layers), KVHeads: m.cfg.NumKeyValueHeads, HeadDim: m.cfg.HeadDim, BlockSize: g.decodeRoom, Blocks: 1}
	per, err := g.dec.KVBlockBytes(spec)
	if err != nil {
		return spec, 0, fmt.Errorf("policy: KV cache: %w", err)
	}
	budget := g.opt.KVCacheBytes
	if budget <= 0 {
		info, err := g.dec.MemoryInfo()
		switch {
		case err != nil:
			budget = unknownKVBytes
		case info.Host:
			budget = min(info.Free/4, hostKVMax)
		default:
			budget = int64(g.opt.GPUMemoryUtilization*float64(info.Total)) - (info.Total - info.Free) - m.activationBytes()
		}
	}
	perSeq := int64((m.cfg.MaxPositionEmbeddings + spec.BlockSize - 1) / spec.BlockSize)
	blocks := min(budget/per, int64(g.opt.MaxRunning)*perSeq)
	if blocks < 1 {
		return spec, per, fmt.Errorf("%w: no memory for the KV cache: a budget of %d bytes, a block of %d rows takes %d (see GenerateOptions)", ErrInput, budget, spec.BlockSize, per)
	}
	spec.Blocks = int(blocks)
	return spec, per, nil
}

// activationBytes estimates the device memory a scheduler step needs
// besides the KV cache, for the cache's sizing: the float32 buffers of a
// pass over prefillTokens+MaxRunning rows (layer input and norm, queries,
// keys, values, attention output, gate, up and their product, doubled
// for the products' bf16 inputs and the allocator's rounding), the logits
// of MaxRunning rows twice, bf16 copies of every weight, and 256 MiB.
func (m *Model) activationBytes() int64 {
	c := m.cfg
	rows := int64(prefillTokens + m.gen.opt.MaxRunning)
	q, kv := int64(c.NumAttentionHeads*c.HeadDim), int64(c.NumKeyValueHeads*c.HeadDim)
	perRow := 4 * (3*int64(c.HiddenSize) + 2*q + 2*kv + 3*int64(c.IntermediateSize))
	return 2*rows*perRow + 2*4*int64(m.gen.opt.MaxRunning)*int64(c.VocabSize) + 2*c.NumParams() + 256<<20
}
