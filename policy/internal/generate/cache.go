package generate

import (
	"fmt"

	"github.com/agentrl/agentrl/policy/backend"
)

// The KV cache's budget in host memory: at most a quarter of the
// available memory, and at most hostKVMax; a decoder that reports no
// memory gets unknownKVBytes.
const (
	hostKVMax      = 8 << 30
	unknownKVBytes = 1 << 30
)

// ensurePool allocates the KV cache if there is none.
func (e *Engine) ensurePool(m Spec) error {
	if e.pool != nil {
		return nil
	}
	spec, per, err := e.kvSpec(m)
	if err != nil {
		return err
	}
	pool, err := newKVPool(e.dec, spec, e.cfg.PrefixCaching)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pool = pool
	e.stats.KVBlocks = spec.Blocks
	e.stats.KVBytes = int64(spec.Blocks) * per
	return nil
}

// kvSpec sizes the KV cache of a model of shape m, as
// policy.GenerateOptions documents: the budget's blocks, but never more
// than MaxRunning sequences of MaxPositions tokens can use. It returns
// the spec and the bytes of a block.
func (e *Engine) kvSpec(m Spec) (backend.KVCacheSpec, int64, error) {
	c := e.cfg
	spec := backend.KVCacheSpec{Layers: m.Layers, KVHeads: m.KVHeads, HeadDim: m.HeadDim, BlockSize: c.BlockSize, Blocks: 1}
	per, err := e.dec.KVBlockBytes(spec)
	if err != nil {
		return spec, 0, fmt.Errorf("policy: KV cache: %w", err)
	}
	budget := c.KVCacheBytes
	if budget <= 0 {
		info, err := e.dec.MemoryInfo()
		switch {
		case err != nil:
			budget = unknownKVBytes
		case info.Host:
			budget = min(info.Free/4, hostKVMax)
		default:
			budget = int64(c.GPUMemoryUtilization*float64(info.Total)) - (info.Total - info.Free) - e.stepBytes(m)
		}
	}
	perSeq := int64((m.MaxPositions + spec.BlockSize - 1) / spec.BlockSize)
	blocks := min(budget/per, int64(c.MaxRunning)*perSeq)
	if blocks < 1 {
		return spec, per, fmt.Errorf("%w: no memory for the KV cache: a budget of %d bytes, a block of %d rows takes %d (see GenerateOptions)", c.ErrInput, budget, spec.BlockSize, per)
	}
	spec.Blocks = int(blocks)
	return spec, per, nil
}

// stepBytes is the model's estimate of the memory of the largest step:
// PrefillTokens prompt rows beside MaxRunning decode rows, MaxRunning of
// them with logits.
func (e *Engine) stepBytes(m Spec) int64 {
	rows, outputs := int64(e.cfg.PrefillTokens+e.cfg.MaxRunning), int64(e.cfg.MaxRunning)
	return rows*m.Step.PerRow + outputs*m.Step.PerOutput + m.Step.Fixed
}
