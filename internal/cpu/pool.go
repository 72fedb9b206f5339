package cpu

import (
	mbits "math/bits"
	"sync"
)

// minPooled is the smallest buffer, in floats (64 KiB), that the pool
// keeps: below it Go's allocator serves from its size-classed spans,
// which stay mapped and need no help.
const minPooled = 1 << 14

// pool keeps the arrays of freed buffers for later allocations, as
// PyTorch's caching allocator does on a GPU. Without it every training
// pass allocates its activations afresh: a pass's arrays are large, Go
// hands their memory back to the operating system once they are garbage,
// and the next pass takes a page fault on every 4 KiB it touches first —
// in the main job's RL updates that cost as much CPU time as the matrix
// products of the forward (the faults land in the first write of each
// product's output).
//
// Arrays are kept by size class: lengths are rounded up to one of eight
// steps per power of two. A request takes an array of its class, or the
// smallest held one up to twice its class (the main job's RL passes vary
// in length from one mini-batch to the next). The pool holds at most as many floats as were ever
// live at once in pooled buffers (so it at most doubles the peak it
// serves); past that, freed arrays go to the garbage collector.
type pool struct {
	mu     sync.Mutex
	free   map[int][][]float32 // by class length
	held   int64               // floats in free
	live   int64               // floats of pooled-size buffers in use
	peak   int64               // the most live ever
	reused int64               // allocations served from free (tests)
}

// classLen is the length n is rounded up to: a multiple of 2^(b−4),
// where b is n's bit length: n ≥ 2^(b−1), so at most 12.5% above it.
func classLen(n int) int {
	step := 1 << max(mbits.Len(uint(n))-4, 0)
	return (n + step - 1) / step * step
}

// get returns a zeroed array of n floats, from the pool when it holds
// one of n's class.
func (p *pool) get(n int) []float32 {
	if n < minPooled {
		return make([]float32, n)
	}
	c := classLen(n)
	p.mu.Lock()
	p.live += int64(c)
	var a []float32
	if fit := p.fit(c); fit > 0 {
		list := p.free[fit]
		a = list[len(list)-1]
		list[len(list)-1] = nil
		p.free[fit] = list[:len(list)-1]
		p.held -= int64(fit)
		p.live += int64(fit - c)
		p.reused++
	}
	p.peak = max(p.peak, p.live)
	p.mu.Unlock()
	if a == nil {
		return make([]float32, n, c)
	}
	a = a[:n]
	clear(a)
	return a
}

// fit is the class whose held arrays serve a request of class c: c
// itself, or else the smallest held class up to twice c (a pass of
// shorter sequences than the last reuses its arrays); 0 when none.
func (p *pool) fit(c int) int {
	if len(p.free[c]) > 0 {
		return c
	}
	best := 0
	for k, list := range p.free {
		if len(list) > 0 && k > c && k <= 2*c && (best == 0 || k < best) {
			best = k
		}
	}
	return best
}

// put takes back the array of a freed buffer.
func (p *pool) put(a []float32) {
	c := cap(a)
	if c < minPooled || c != classLen(c) {
		return // not one of get's arrays: the garbage collector's
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live -= int64(c)
	if p.held+int64(c) > p.peak {
		return
	}
	if p.free == nil {
		p.free = make(map[int][][]float32)
	}
	p.free[c] = append(p.free[c], a[:c])
	p.held += int64(c)
}
