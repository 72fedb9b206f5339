package generate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/policy/backend"
)

// The block manager by hand, over 4 blocks of 2 rows with prefix
// caching: blocks come off the free list in order, a full block is
// registered under its content and found again, a shared, partly filled
// block is copied before it is written, a grow that does not fit changes
// nothing, and a freed block keeps its registration until it is reused.
func TestKVPoolByHand(t *testing.T) {
	pool, err := newKVPool(cpu.New(), backend.KVCacheSpec{Layers: 1, KVHeads: 1, HeadDim: 2, BlockSize: 2, Blocks: 4}, true)
	require.NoError(t, err)
	defer func() { require.NoError(t, pool.close()) }()
	toks := []int{7, 8, 9, 10, 11}
	tok := func(i int) int { return toks[i] }
	var cows [2][]int32

	// Sequence a takes 3 positions: blocks 0 and 1 (positions 0–1, 2).
	a := &kvSeq{}
	require.True(t, pool.grow(a, 3, &cows))
	assert.Equal(t, []int32{0, 1}, a.blocks)
	assert.Equal(t, 2, pool.nFree)
	a.n = 3
	pool.register(a, tok) // block 0 is full: registered; block 1 is not
	assert.Equal(t, 1, a.reg)
	assert.Len(t, pool.prefix, 1)

	// A sequence starting with tokens 7, 8 finds block 0 (retained).
	assert.Equal(t, []int32{0}, pool.lookup(tok, 2))
	assert.Equal(t, int32(2), pool.ref[0])
	assert.Empty(t, pool.lookup(func(i int) int { return 100 + i }, 2), "other tokens find nothing")

	// b shares all of a (a session's next turn): writing its position 3
	// lands in block 1, shared and partly filled, so block 1 is copied to
	// the next free block, 2, which b writes instead.
	b := &kvSeq{blocks: []int32{0, 1}, n: 3}
	pool.retain(1) // block 0 was retained by lookup
	require.True(t, pool.grow(b, 1, &cows))
	assert.Equal(t, [2][]int32{{1}, {2}}, cows)
	assert.Equal(t, []int32{0, 2}, b.blocks)
	assert.Equal(t, []int32{2, 1, 1, 0}, pool.ref)
	assert.Equal(t, 1, pool.nFree)

	// Growing b by 4 positions, to 7 in 4 blocks, needs 2 more; 1 is
	// free: nothing changes.
	cows = [2][]int32{}
	require.False(t, pool.grow(b, 4, &cows))
	assert.Equal(t, []int32{0, 2}, b.blocks)
	assert.Empty(t, cows[0])
	assert.Equal(t, 1, pool.nFree)

	// Dropping both frees every block; the free list is 3, then 1, 0 and
	// 2 in the order their last references went, block 0 still
	// registered.
	pool.drop(a)
	pool.drop(b)
	assert.Equal(t, 4, pool.nFree)
	assert.Equal(t, 0, pool.used())
	assert.Equal(t, 3, pool.peak)
	found := pool.lookup(tok, 2)
	assert.Equal(t, []int32{0}, found, "a freed block keeps its registration")
	pool.release(found)

	// Reusing the blocks: 3, 1, then 2 (block 0, released last, is now
	// at the end), then 0, whose registration is dropped and whose epoch
	// advances.
	c := &kvSeq{}
	require.True(t, pool.grow(c, 8, &cows))
	assert.Equal(t, []int32{3, 1, 2, 0}, c.blocks)
	assert.Empty(t, pool.prefix)
	assert.Equal(t, uint32(2), pool.epoch[0], "block 0 allocated twice")
	assert.Empty(t, pool.lookup(tok, 2))
}
