package generate

import (
	"encoding/binary"
	"fmt"

	"github.com/agentrl/agentrl/policy/backend"
)

// kvPool is the engine's paged KV cache (vLLM's block manager over
// PagedAttention's blocks): a backend cache of blocks of bs rows, a
// reference count per block, and a free list. A sequence holds its blocks
// through a block table (kvSeq); a session kept between turns holds the
// blocks of its last sequence, and a later turn that extends it shares
// them: its full blocks by reference, its last, partly filled one by a
// copy made when the new sequence first writes into it (copy on write).
// No key or value row is ever copied per sequence otherwise.
//
// With prefix caching on, every full block is registered under its
// content — the block before it (id and epoch) and its tokens — so that a
// new sequence whose prompt starts with the same tokens takes those blocks
// instead of recomputing them. Freed blocks keep their registration in the
// free list, least recently freed first out, until they are reused (then
// their epoch advances, which makes stale registrations of the blocks
// after them unreachable).
//
// A kvPool is used only under the model's lock (see Engine.pool).
type kvPool struct {
	dec   backend.Decoder
	cache backend.KVCache
	bs    int
	// Per block: references, epoch (advanced at each reuse), and the
	// prefix-map key it is registered under ("" when none).
	ref   []int32
	epoch []uint32
	key   []string
	// The free list, doubly linked through prev and next (−1 ends).
	prev, next []int32
	head, tail int32
	nFree      int
	prefix     map[string]int32 // nil: prefix caching off
	peak       int              // most blocks in use at once
}

// kvSeq is a sequence's block table: its first n positions' keys and
// values are in the cache, position p in block blocks[p/bs].
type kvSeq struct {
	blocks []int32
	n      int
	reg    int // leading full blocks already registered (or found) in the prefix map
}

// newKVPool allocates a cache of spec's shape on dec.
func newKVPool(dec backend.Decoder, spec backend.KVCacheSpec, prefixCaching bool) (*kvPool, error) {
	c, err := dec.NewKVCache(spec)
	if err != nil {
		return nil, fmt.Errorf("policy: allocating the KV cache (%d blocks of %d rows): %w", spec.Blocks, spec.BlockSize, err)
	}
	n := spec.Blocks
	p := &kvPool{dec: dec, cache: c, bs: spec.BlockSize, ref: make([]int32, n), epoch: make([]uint32, n), key: make([]string, n),
		prev: make([]int32, n), next: make([]int32, n), head: -1, tail: -1}
	if prefixCaching {
		p.prefix = make(map[string]int32)
	}
	for b := range int32(n) {
		p.pushFree(b)
	}
	return p, nil
}

// close frees the backend cache.
func (p *kvPool) close() error { return p.dec.FreeKVCache(p.cache) }

// blocks is the pool's capacity; used the blocks referenced now.
func (p *kvPool) blocks() int { return len(p.ref) }
func (p *kvPool) used() int   { return len(p.ref) - p.nFree }

func (p *kvPool) pushFree(b int32) {
	p.prev[b], p.next[b] = p.tail, -1
	if p.tail >= 0 {
		p.next[p.tail] = b
	} else {
		p.head = b
	}
	p.tail = b
	p.nFree++
}

func (p *kvPool) unlinkFree(b int32) {
	if p.prev[b] >= 0 {
		p.next[p.prev[b]] = p.next[b]
	} else {
		p.head = p.next[b]
	}
	if p.next[b] >= 0 {
		p.prev[p.next[b]] = p.prev[b]
	} else {
		p.tail = p.prev[b]
	}
	p.nFree--
}

// alloc takes the least recently freed block, dropping its registration;
// ok is false when every block is in use.
func (p *kvPool) alloc() (b int32, ok bool) {
	if p.head < 0 {
		return -1, false
	}
	b = p.head
	p.unlinkFree(b)
	if k := p.key[b]; k != "" {
		delete(p.prefix, k)
		p.key[b] = ""
	}
	p.epoch[b]++
	p.ref[b] = 1
	p.peak = max(p.peak, p.used())
	return b, true
}

// retain adds a reference to b (taking it off the free list if it was
// there: a registered block being reused).
func (p *kvPool) retain(b int32) {
	if p.ref[b] == 0 {
		p.unlinkFree(b)
	}
	p.ref[b]++
	p.peak = max(p.peak, p.used())
}

// release drops a reference to each block; unreferenced ones go to the
// end of the free list, registrations kept.
func (p *kvPool) release(blocks []int32) {
	for _, b := range blocks {
		if p.ref[b]--; p.ref[b] == 0 {
			p.pushFree(b)
		}
	}
}

// blockKey is the prefix-map key of a block holding toks after the block
// parent (−1 for the first block) at parent's epoch.
func blockKey(parent int32, epoch uint32, toks []int) string {
	b := make([]byte, 8, 8+4*len(toks))
	binary.LittleEndian.PutUint32(b, uint32(parent))
	binary.LittleEndian.PutUint32(b[4:], epoch)
	for _, t := range toks {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return string(b)
}

// parentOf returns the block before block i of a table and its epoch.
func (p *kvPool) parentOf(blocks []int32, i int) (int32, uint32) {
	if i == 0 {
		return -1, 0
	}
	return blocks[i-1], p.epoch[blocks[i-1]]
}

// lookup returns, retained, the registered blocks that hold the longest
// run of at most maxBlocks leading full blocks of tok (tok(i) is token i
// of the sequence).
func (p *kvPool) lookup(tok func(int) int, maxBlocks int) []int32 {
	if p.prefix == nil {
		return nil
	}
	var out []int32
	toks := make([]int, p.bs)
	for i := range maxBlocks {
		for j := range toks {
			toks[j] = tok(i*p.bs + j)
		}
		parent, epoch := p.parentOf(out, i)
		b, ok := p.prefix[blockKey(parent, epoch, toks)]
		if !ok {
			break
		}
		p.retain(b)
		out = append(out, b)
	}
	return out
}

// register records s's full blocks not yet registered (tok(i) is token i
// of the sequence). A block whose content is already registered under
// another block stays unregistered.
func (p *kvPool) register(s *kvSeq, tok func(int) int) {
	if p.prefix == nil {
		return
	}
	for ; (s.reg+1)*p.bs <= s.n; s.reg++ {
		b := s.blocks[s.reg]
		if p.key[b] != "" {
			continue // shared from the map already
		}
		toks := make([]int, p.bs)
		for j := range toks {
			toks[j] = tok(s.reg*p.bs + j)
		}
		parent, epoch := p.parentOf(s.blocks, s.reg)
		k := blockKey(parent, epoch, toks)
		if _, dup := p.prefix[k]; dup {
			continue
		}
		p.prefix[k] = b
		p.key[b] = k
	}
}

// grow makes room in s for positions up to n+more: a new block for each
// block boundary crossed, and, when position n falls inside a shared
// block, a private copy of it, appended to cows as (source, copy) pairs
// for the caller to copy before the step writes. It changes nothing and
// returns false when the free blocks do not suffice.
func (p *kvPool) grow(s *kvSeq, more int, cows *[2][]int32) bool {
	need := (s.n+more+p.bs-1)/p.bs - len(s.blocks)
	last := len(s.blocks) - 1
	cow := s.n%p.bs != 0 && more > 0 && p.ref[s.blocks[last]] > 1
	if cow {
		need++
	}
	if need > p.nFree {
		return false
	}
	if cow {
		b, _ := p.alloc()
		cows[0] = append(cows[0], s.blocks[last])
		cows[1] = append(cows[1], b)
		p.release(s.blocks[last : last+1])
		s.blocks[last] = b
		need--
	}
	for range need {
		b, _ := p.alloc()
		s.blocks = append(s.blocks, b)
	}
	return true
}

// drop releases all of s's blocks.
func (p *kvPool) drop(s *kvSeq) {
	p.release(s.blocks)
	s.blocks, s.n, s.reg = nil, 0, 0
}
