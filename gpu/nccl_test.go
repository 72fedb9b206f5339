package gpu

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentrl/agentrl/policy/backend"
)

// lenBuf is a Buffer of n elements for the argument checks.
type lenBuf int

func (b lenBuf) Len() int { return int(b) }

// TestCollectiveSpans: what a collective reads and writes, per rank
// count, by hand: float32 words for the host types (8 Float64 elements
// are 16 words), elements for BFloat16 (bf16 buffers count theirs), and
// a call past a buffer's end refused.
func TestCollectiveSpans(t *testing.T) {
	for _, c := range []struct {
		name       string
		coll       Collective
		send, recv int
	}{
		{"all-gather float32", Collective{Kind: AllGather, Count: 6, Type: Float32}, 6, 24},
		{"all-gather bf16", Collective{Kind: AllGather, Count: 6, Type: BFloat16}, 6, 24},
		{"reduce-scatter bf16", Collective{Kind: ReduceScatter, Count: 5, Type: BFloat16}, 20, 5},
		{"all-reduce float64", Collective{Kind: AllReduce, Count: 8, Type: Float64}, 16, 16},
		{"broadcast uint8", Collective{Kind: Broadcast, Count: 5, Type: Uint8}, 2, 2},
	} {
		s, r := c.coll.spans(4)
		assert.Equal(t, [2]int{c.send, c.recv}, [2]int{s, r}, c.name)
	}
	ok := Collective{Kind: AllGather, Count: 6, Type: BFloat16, Send: lenBuf(6), Recv: lenBuf(24)}
	assert.NoError(t, ok.check(4))
	short := ok
	short.Recv = lenBuf(23)
	assert.ErrorIs(t, short.check(4), backend.ErrShape)
	bad := ok
	bad.Type = 10
	assert.ErrorIs(t, bad.check(4), backend.ErrArg)
}
