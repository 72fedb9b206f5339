package gpu

import (
	"encoding/binary"
	"errors"
)

// The fused optimizer pass and the gradient norm run over a table of
// tensors (kernels.cu: OptEntry, opt_pass, grad_sumsq_partial). These
// constants must agree with OPT_SCALE, OPT_ADAM, OPT_ZERO and OPT_CHUNK
// there.
const (
	optScale     = 1    // g ← g·gscale (Scale)
	optAdam      = 2    // then AdamW from g
	optZero      = 4    // then g ← 0 (Fill with 0); else a scaled g is stored back
	optChunk     = 8192 // elements per block
	optThreads   = 256  // threads per block: 32 elements each
	optEntrySize = 64   // bytes of an OptEntry
)

// optTensor is one entry of the table: device addresses of the
// parameter, gradient, moments and bf16 copy (0 where the entry has
// none), its length and its operations.
type optTensor struct {
	p, g, m, v, wb devPtr
	n              int64
	flags          int32
}

// optTable packs tensors as kernels.cu's OptEntry array — five 8-byte
// addresses, the length, the first block of the grid that covers the
// tensor, the flags and 4 bytes of padding, little-endian — and returns
// it with the grid's block count: ⌈n/optChunk⌉ blocks per tensor, in
// order. Tensors without elements take no block and no entry, so every
// entry's blocks follow the previous entry's, as opt_entry's search
// assumes.
func optTable(ts []optTensor) (table []byte, blocks int64) {
	for _, t := range ts {
		if t.n <= 0 {
			continue
		}
		var e [optEntrySize]byte
		for i, p := range []devPtr{t.p, t.g, t.m, t.v, t.wb} {
			binary.LittleEndian.PutUint64(e[8*i:], uint64(p))
		}
		binary.LittleEndian.PutUint64(e[40:], uint64(t.n))
		binary.LittleEndian.PutUint64(e[48:], uint64(blocks))
		binary.LittleEndian.PutUint32(e[56:], uint32(t.flags))
		table = append(table, e[:]...)
		blocks += (t.n + optChunk - 1) / optChunk
	}
	return table, blocks
}

// optEntryOf is opt_entry of kernels.cu written in Go: the entry of the
// table (as optTable packs it) whose blocks include block b.
func optEntryOf(table []byte, b int64) int {
	first := func(i int) int64 { return int64(binary.LittleEndian.Uint64(table[i*optEntrySize+48:])) }
	lo, hi := 0, len(table)/optEntrySize-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if first(mid) <= b {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// deviceTables keeps the tables the optimizer uploaded, by content: a
// step's pass and gradient norm name the same tensors with the same
// operations every step, so after the first step their tables are found
// here and nothing is copied to the device. At most maxTables are kept;
// the least recently used goes first.
type deviceTables struct {
	list []deviceTable // most recently used last
}

// deviceTable is one uploaded table.
type deviceTable struct {
	content string
	ptr     devPtr
}

const maxTables = 8

// get returns the device copy of table, uploading a new one through
// alloc and upload when none has this content, and freeing the least
// recently used beyond maxTables through free.
func (d *deviceTables) get(table []byte, alloc func(uint64) (devPtr, error), upload func(devPtr, []byte) error, free func(devPtr) error) (devPtr, error) {
	for i, t := range d.list {
		if t.content == string(table) {
			d.list = append(append(d.list[:i:i], d.list[i+1:]...), t)
			return t.ptr, nil
		}
	}
	p, err := alloc(uint64(len(table)))
	if err != nil {
		return 0, err
	}
	if err := upload(p, table); err != nil {
		return 0, errors.Join(err, free(p))
	}
	d.list = append(d.list, deviceTable{content: string(table), ptr: p})
	if len(d.list) > maxTables {
		old := d.list[0]
		d.list = d.list[1:]
		return p, free(old.ptr)
	}
	return p, nil
}
