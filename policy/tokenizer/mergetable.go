package tokenizer

import "math/bits"

// mergeTable maps a token pair to its merge rank and result: an
// open-addressing hash table with linear probing, built once and then only
// read. It is a plain array probe with a multiplicative hash, which the
// merge loops call for every adjacent pair (Go's map costs a hash call and
// group matching on this hot path).
type mergeTable struct {
	keys  []uint64 // pair+1; 0 marks an empty slot
	vals  []uint64 // rank<<32 | merged id
	shift uint
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func newMergeTable(n int) *mergeTable {
	size := 1 << bits.Len(uint(2*n+1)) // load factor at most 1/2
	return &mergeTable{keys: make([]uint64, size), vals: make([]uint64, size), shift: uint(64 - bits.Len(uint(size-1)))}
}

func (t *mergeTable) slot(key uint64) uint64 {
	return (key * 0x9E3779B97F4A7C15) >> t.shift
}

// set stores v under key, replacing an earlier value.
func (t *mergeTable) set(key, v uint64) {
	mask := uint64(len(t.keys) - 1)
	for i := t.slot(key); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case 0:
			t.keys[i], t.vals[i] = key+1, v
			return
		case key + 1:
			t.vals[i] = v
			return
		}
	}
}

func (t *mergeTable) get(key uint64) (uint64, bool) {
	mask := uint64(len(t.keys) - 1)
	for i := t.slot(key); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case key + 1:
			return t.vals[i], true
		case 0:
			return 0, false
		}
	}
}
