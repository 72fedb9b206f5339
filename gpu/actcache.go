package gpu

// actCache keeps the bf16 copies of activations that BF16 products
// multiply, so that an activation is converted once per write however
// many products read it: the input of the q, k and v projections (and of
// gate and up) is converted once for the three (two) forward products,
// and again — for the weight gradients dW = dyᵀ·x of the backward — only
// if its copy was dropped in between. A copy is current while its
// buffer's generation is the one it was made from (every write advances
// it: Backend.runW), exactly as for weights (weightCache). Unlike weight
// copies, activation copies are bounded: beyond limit bytes the least
// recently used are released, so the cache holds the copies of the last
// layers of a forward pass — the first ones its backward reads. Touched
// only on the worker thread, which orders it with the stream.
type actCache struct {
	copies      map[*buffer]*actCopy
	tick        uint64 // use counter: the order of last uses
	bytes       uint64 // device memory held by copies
	limit       uint64
	hits, convs uint64
}

// actCopy is one activation's copy and its last use.
type actCopy struct {
	weightCopy
	used uint64
}

func newActCache(limit uint64) *actCache {
	return &actCache{copies: map[*buffer]*actCopy{}, limit: limit}
}

// get returns the current copy of b, of size bytes, making it with
// convert (into memory from alloc, or the stale copy's own) when missing
// or stale, and then releasing least recently used copies through free
// until the cache is within its limit (never the one returned). A copy
// larger than the limit is not kept: ok is false, and the caller converts
// into memory of its own.
func (c *actCache) get(b *buffer, bytes uint64, alloc func(uint64) (devPtr, error), free func(devPtr) error,
	convert func(dst devPtr) error) (p devPtr, ok bool, err error) {
	if bytes > c.limit {
		return 0, false, nil
	}
	c.tick++
	e := c.copies[b]
	if e != nil && e.bytes != bytes {
		if err := c.drop(b, free); err != nil {
			return 0, false, err
		}
		e = nil
	}
	if e != nil && e.valid && e.gen == b.gen {
		e.used = c.tick
		c.hits++
		return e.ptr, true, nil
	}
	if e == nil {
		p, err := alloc(bytes)
		if err != nil {
			return 0, false, err
		}
		e = &actCopy{weightCopy: weightCopy{ptr: p, bytes: bytes}}
		c.copies[b] = e
		c.bytes += bytes
	}
	e.valid, e.used = false, c.tick
	if err := convert(e.ptr); err != nil {
		return 0, false, err
	}
	e.gen, e.valid = b.gen, true
	c.convs++
	for c.bytes > c.limit {
		var lru *buffer
		for k, v := range c.copies {
			if v != e && (lru == nil || v.used < c.copies[lru].used) {
				lru = k
			}
		}
		if err := c.drop(lru, free); err != nil {
			return 0, false, err
		}
	}
	return e.ptr, true, nil
}

// drop releases b's copy, if any (b is being freed, or evicted).
func (c *actCache) drop(b *buffer, free func(devPtr) error) error {
	e := c.copies[b]
	if e == nil {
		return nil
	}
	delete(c.copies, b)
	c.bytes -= e.bytes
	return free(e.ptr)
}
