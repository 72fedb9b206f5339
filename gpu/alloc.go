package gpu

import (
	"errors"
	"fmt"
	"sort"
)

// devPtr is a device address (CUdeviceptr).
type devPtr uint64

// rawAllocator is the device memory the cache draws from: cuMemAlloc and
// cuMemFree on the device, a fake in tests.
type rawAllocator interface {
	alloc(bytes uint64) (devPtr, error)
	free(p devPtr) error
}

// errOutOfMemory marks an allocation the device refused for lack of memory;
// the cache then returns its free blocks to the device and retries once.
var errOutOfMemory = errors.New("gpu: out of device memory")

// Size classes of the caching allocator, after PyTorch's
// CUDACachingAllocator: small requests round up to 512 bytes, requests
// above 1 MiB to a multiple of 2 MiB, so that blocks of nearby sizes are
// interchangeable while waste stays bounded.
const (
	smallRound = 512
	largeFrom  = 1 << 20
	largeRound = 2 << 20
)

// roundSize returns the block size serving a request of n bytes (0 for 0).
func roundSize(n uint64) uint64 {
	if n == 0 {
		return 0
	}
	r := uint64(smallRound)
	if n > largeFrom {
		r = largeRound
	}
	return (n + r - 1) / r * r
}

// CacheStats describes the caching allocator.
type CacheStats struct {
	// InUse and Cached are bytes of blocks handed out and blocks kept for
	// reuse; both are in rounded block sizes.
	InUse, Cached uint64
	// Hits counts requests served from the cache, DeviceAllocs and
	// DeviceFrees the calls that reached the driver.
	Hits, DeviceAllocs, DeviceFrees uint64
	// WeightBytes is the memory held by converted weight copies (part of
	// InUse; see WithWeightCache). WeightHits counts products that used a
	// current copy, WeightConversions the copies made: a weight's first
	// use, and its first use after each write.
	WeightBytes, WeightHits, WeightConversions uint64
	// ActivationBytes is the memory held by the bf16 copies of
	// activations (part of InUse; see WithActivationCache),
	// ActivationHits the products that used a current copy,
	// ActivationConversions the copies made.
	ActivationBytes, ActivationHits, ActivationConversions uint64
	// PeakInUse is the most InUse has been since New or the last
	// ResetPeak (the counterpart of torch.cuda.max_memory_allocated),
	// PeakReserved the most InUse + Cached has been (the memory taken
	// from the device, torch.cuda.max_memory_reserved).
	PeakInUse, PeakReserved uint64
}

// cache is a caching device allocator: freed blocks are kept in per-size
// free lists and handed out again, lowest address first, for requests of
// the same rounded size,
// so that the steady state of a training step makes no cuMemAlloc or
// cuMemFree calls (they synchronize the device). It is not safe for
// concurrent use; a Backend calls it from its worker thread only.
type cache struct {
	src   rawAllocator
	limit uint64 // most bytes kept in free lists
	free  map[uint64][]devPtr
	live  map[devPtr]uint64
	stats CacheStats
}

func newCache(src rawAllocator, limit uint64) *cache {
	return &cache{src: src, limit: limit, free: map[uint64][]devPtr{}, live: map[devPtr]uint64{}}
}

// get returns a block of at least n bytes. A request of 0 bytes returns the
// null pointer and allocates nothing.
func (c *cache) get(n uint64) (devPtr, error) {
	size := roundSize(n)
	if size == 0 {
		return 0, nil
	}
	if l := c.free[size]; len(l) > 0 {
		// The lowest address of the size, whatever the order the blocks
		// came back in: the same free blocks give the same addresses, so
		// that a decode step, whose caller frees its buffers in no
		// particular order, has the same launches as the step before
		// (what a CUDA graph replays).
		i := 0
		for j, q := range l {
			if q < l[i] {
				i = j
			}
		}
		p := l[i]
		l[i] = l[len(l)-1]
		c.free[size] = l[:len(l)-1]
		c.stats.Cached -= size
		c.stats.Hits++
		c.live[p] = size
		c.stats.InUse += size
		c.stats.PeakInUse = max(c.stats.PeakInUse, c.stats.InUse)
		return p, nil
	}
	p, err := c.src.alloc(size)
	if errors.Is(err, errOutOfMemory) && c.stats.Cached > 0 {
		// Blocks of other sizes may be what the device lacks.
		if terr := c.trim(); terr != nil {
			return 0, fmt.Errorf("allocating %d bytes: %w (releasing the cache: %v)", size, err, terr)
		}
		p, err = c.src.alloc(size)
	}
	if err != nil {
		return 0, fmt.Errorf("allocating %d bytes: %w", size, err)
	}
	c.stats.DeviceAllocs++
	c.live[p] = size
	c.stats.InUse += size
	c.stats.PeakInUse = max(c.stats.PeakInUse, c.stats.InUse)
	c.stats.PeakReserved = max(c.stats.PeakReserved, c.stats.InUse+c.stats.Cached)
	return p, nil
}

// resetPeak starts the peaks over from the present use.
func (c *cache) resetPeak() {
	c.stats.PeakInUse = c.stats.InUse
	c.stats.PeakReserved = c.stats.InUse + c.stats.Cached
}

// put returns a block from get to the cache (or to the device when the
// cache would exceed its limit). Putting an unknown pointer is an error.
func (c *cache) put(p devPtr) error {
	if p == 0 {
		return nil
	}
	size, ok := c.live[p]
	if !ok {
		return fmt.Errorf("gpu: free of unknown device pointer %#x", uint64(p))
	}
	delete(c.live, p)
	c.stats.InUse -= size
	if c.stats.Cached+size > c.limit {
		c.stats.DeviceFrees++
		return c.src.free(p)
	}
	c.free[size] = append(c.free[size], p)
	c.stats.Cached += size
	return nil
}

// trim returns every cached block to the device, largest first.
func (c *cache) trim() error {
	sizes := make([]uint64, 0, len(c.free))
	for s := range c.free {
		sizes = append(sizes, s)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] > sizes[j] })
	var first error
	for _, s := range sizes {
		for _, p := range c.free[s] {
			c.stats.DeviceFrees++
			if err := c.src.free(p); err != nil && first == nil {
				first = err
			}
		}
		c.stats.Cached -= s * uint64(len(c.free[s]))
		delete(c.free, s)
	}
	return first
}

// release returns every block, live or cached, to the device (Close).
func (c *cache) release() error {
	first := c.trim()
	for p, size := range c.live {
		c.stats.DeviceFrees++
		c.stats.InUse -= size
		if err := c.src.free(p); err != nil && first == nil {
			first = err
		}
		delete(c.live, p)
	}
	return first
}
