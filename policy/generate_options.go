package policy

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
	return func(mo *modelOptions) {
		mo.gen.KVCacheBytes, mo.gen.GPUMemoryUtilization = o.KVCacheBytes, o.GPUMemoryUtilization
		mo.gen.MaxRunning, mo.gen.PrefixCaching = o.MaxRunning, o.PrefixCaching
	}
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
func (m *Model) GenerateStats() GenerateStats { return GenerateStats(m.gen.Stats()) }
