package gpu

import "errors"

// errWeightCopySize: a buffer's copy was asked for at another size. The
// size follows from the buffer's length and the Backend's precision and
// GEMM, which never change, so this is a bug; it fails the call rather
// than hand out a short copy.
var errWeightCopySize = errors.New("gpu: weight copy requested at a different size")

// weightCopy is the converted copy of one weight buffer that a BF16 GEMM
// multiplies (bf16, or bf16-rounded float32 for the fallback GEMM).
type weightCopy struct {
	ptr   devPtr
	bytes uint64
	gen   uint64 // the buffer's generation the copy was made from
	valid bool   // false until a conversion has succeeded
}

// weightCache keeps the converted copies of weight buffers between calls,
// so that a weight is rounded to bf16 once per update instead of once per
// product. A copy is current while its buffer's generation is the one it
// was made from; every backend call that writes a buffer advances the
// buffer's generation first (Backend.runW), so a stale copy is never used.
// Like the allocator it is touched only on the Backend's worker thread,
// which also orders it with the stream: a conversion queued there reads
// the buffer after every write queued before it.
type weightCache struct {
	copies            map[*buffer]*weightCopy
	bytes             uint64 // device memory held by copies
	hits, conversions uint64
}

func newWeightCache() *weightCache { return &weightCache{copies: map[*buffer]*weightCopy{}} }

// wrote advances the generation of every non-nil buffer: their copies, if
// any, are stale from now on.
func (w *weightCache) wrote(bufs ...*buffer) {
	for _, b := range bufs {
		if b != nil {
			b.gen++
		}
	}
}

// get returns the current copy of b, of size bytes. A buffer without a
// copy gets memory from alloc; a missing or stale copy is (re)made by
// convert, into the copy's own memory.
func (w *weightCache) get(b *buffer, bytes uint64, alloc func(uint64) (devPtr, error), convert func(dst devPtr) error) (devPtr, error) {
	c := w.copies[b]
	if c != nil && c.bytes != bytes {
		return 0, errWeightCopySize
	}
	if c != nil && c.valid && c.gen == b.gen {
		w.hits++
		return c.ptr, nil
	}
	if c == nil {
		p, err := alloc(bytes)
		if err != nil {
			return 0, err
		}
		c = &weightCopy{ptr: p, bytes: bytes}
		w.copies[b] = c
		w.bytes += bytes
	}
	c.valid = false
	if err := convert(c.ptr); err != nil {
		return 0, err
	}
	c.gen, c.valid = b.gen, true
	w.conversions++
	return c.ptr, nil
}

// drop releases b's copy (b is being freed) through free.
func (w *weightCache) drop(b *buffer, free func(devPtr) error) error {
	c := w.copies[b]
	if c == nil {
		return nil
	}
	delete(w.copies, b)
	w.bytes -= c.bytes
	return free(c.ptr)
}
