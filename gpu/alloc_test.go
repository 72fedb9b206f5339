package gpu

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeDevice hands out increasing addresses and can be told how many bytes
// it holds, to simulate out-of-memory.
type fakeDevice struct {
	next     devPtr
	live     map[devPtr]uint64
	capacity uint64
	used     uint64
	allocs   int
	frees    int
}

func newFake(capacity uint64) *fakeDevice {
	return &fakeDevice{next: 0x1000, live: map[devPtr]uint64{}, capacity: capacity}
}

func (f *fakeDevice) alloc(n uint64) (devPtr, error) {
	if f.used+n > f.capacity {
		return 0, fmt.Errorf("fake: %w", errOutOfMemory)
	}
	p := f.next
	f.next += devPtr(n)
	f.live[p] = n
	f.used += n
	f.allocs++
	return p, nil
}

func (f *fakeDevice) free(p devPtr) error {
	n, ok := f.live[p]
	if !ok {
		return errors.New("fake: double free")
	}
	delete(f.live, p)
	f.used -= n
	f.frees++
	return nil
}

func TestRoundSize(t *testing.T) {
	cases := []struct{ in, want uint64 }{
		{0, 0}, {1, 512}, {512, 512}, {513, 1024},
		{1 << 20, 1 << 20},   // 1 MiB is still a small request: multiple of 512
		{1<<20 + 1, 2 << 20}, // above 1 MiB: multiples of 2 MiB
		{5 << 20, 6 << 20}, {6 << 20, 6 << 20},
	}
	for _, c := range cases {
		require.Equal(t, c.want, roundSize(c.in), "roundSize(%d)", c.in)
	}
}

func TestCacheReusesFreedBlocks(t *testing.T) {
	dev := newFake(1 << 30)
	c := newCache(dev, 1<<62)
	a, err := c.get(1000) // 1024-byte block
	require.NoError(t, err)
	b, err := c.get(700) // also 1024
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	require.Equal(t, CacheStats{InUse: 2048, DeviceAllocs: 2, PeakInUse: 2048, PeakReserved: 2048}, c.stats)

	require.NoError(t, c.put(a))
	require.Equal(t, uint64(1024), c.stats.Cached)
	// Same size class: served from the cache, no device call.
	a2, err := c.get(1020)
	require.NoError(t, err)
	require.Equal(t, a, a2)
	require.Equal(t, uint64(1), c.stats.Hits)
	require.Equal(t, 2, dev.allocs)
	// Another class: a new device block.
	_, err = c.get(3000)
	require.NoError(t, err)
	require.Equal(t, 3, dev.allocs)

	// Zero bytes: null pointer, nothing allocated, put is a no-op.
	z, err := c.get(0)
	require.NoError(t, err)
	require.Zero(t, z)
	require.NoError(t, c.put(0))

	require.Error(t, c.put(0xdead), "unknown pointers are rejected")
	require.NoError(t, c.put(b))
	require.Error(t, c.put(b), "a second put of the same block is rejected")
}

// TestCachePeaks follows the peaks through a sequence whose values are
// worked out by hand: blocks of 1 KiB (a), 2 KiB (b), a freed (cached),
// 1 KiB again (served from the cache), a reset, then 4 KiB (c).
func TestCachePeaks(t *testing.T) {
	c := newCache(newFake(1<<30), 1<<62)
	steps := []struct {
		name             string
		do               func() error
		inUse, peakInUse uint64
		peakReserved     uint64
	}{
		{"a 1 KiB", func() error { _, err := c.get(1024); return err }, 1024, 1024, 1024},
		{"b 2 KiB", func() error { _, err := c.get(2048); return err }, 3072, 3072, 3072},
		{"free a", func() error { return c.put(c.anyLive(1024)) }, 2048, 3072, 3072},
		{"1 KiB from the cache", func() error { _, err := c.get(1000); return err }, 3072, 3072, 3072},
		{"reset", func() error { c.resetPeak(); return nil }, 3072, 3072, 3072},
		{"free b", func() error { return c.put(c.anyLive(2048)) }, 1024, 3072, 3072},
		{"reset again", func() error { c.resetPeak(); return nil }, 1024, 1024, 3072},
		{"c 4 KiB", func() error { _, err := c.get(4096); return err }, 5120, 5120, 7168},
	}
	for _, s := range steps {
		require.NoError(t, s.do(), s.name)
		require.Equal(t, s.inUse, c.stats.InUse, s.name)
		require.Equal(t, s.peakInUse, c.stats.PeakInUse, s.name)
		require.Equal(t, s.peakReserved, c.stats.PeakReserved, s.name)
	}
}

// anyLive returns a live block of size bytes (tests only).
func (c *cache) anyLive(size uint64) devPtr {
	for p, s := range c.live {
		if s == size {
			return p
		}
	}
	return 0
}

func TestCacheLimitReturnsBlocksToDevice(t *testing.T) {
	dev := newFake(1 << 30)
	c := newCache(dev, 1024) // keeps at most one 1 KiB block
	p1, _ := c.get(1024)
	p2, _ := c.get(1024)
	require.NoError(t, c.put(p1))
	require.NoError(t, c.put(p2)) // over the limit: freed on the device
	require.Equal(t, 1, dev.frees)
	require.Equal(t, uint64(1024), c.stats.Cached)
	require.Equal(t, uint64(0), c.stats.InUse)
}

func TestCacheTrimsOnOutOfMemory(t *testing.T) {
	dev := newFake(4096)
	c := newCache(dev, 1<<62)
	small, err := c.get(2048)
	require.NoError(t, err)
	require.NoError(t, c.put(small)) // cached, still held on the device
	// 3 KiB does not fit next to the cached 2 KiB block: the cache frees it
	// and retries.
	big, err := c.get(3072)
	require.NoError(t, err)
	require.NotZero(t, big)
	require.Equal(t, uint64(0), c.stats.Cached)
	require.Equal(t, 1, dev.frees)
	// Nothing cached to release: the error comes back, wrapped.
	_, err = c.get(4096)
	require.ErrorIs(t, err, errOutOfMemory)
}

func TestCacheRelease(t *testing.T) {
	dev := newFake(1 << 30)
	c := newCache(dev, 1<<62)
	p, _ := c.get(100)
	q, _ := c.get(5 << 20)
	_, _ = c.get(9)
	require.NoError(t, c.put(p))
	require.NoError(t, c.put(q))
	require.NoError(t, c.release())
	require.Empty(t, dev.live, "every block returned to the device")
	require.Equal(t, uint64(0), c.stats.InUse)
	require.Equal(t, uint64(0), c.stats.Cached)
}

// TestCacheLowestFirst: blocks of one size come back lowest address
// first, whatever order they were freed in, so that two runs of the same
// allocations over the same free blocks get the same addresses.
func TestCacheLowestFirst(t *testing.T) {
	for _, order := range [][]int{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}} {
		c := newCache(newFake(1<<30), 1<<62)
		var ps []devPtr
		for range 3 {
			p, err := c.get(1024)
			require.NoError(t, err)
			ps = append(ps, p)
		}
		for _, i := range order {
			require.NoError(t, c.put(ps[i]))
		}
		var got []devPtr
		for range 3 {
			p, err := c.get(1000)
			require.NoError(t, err)
			got = append(got, p)
		}
		want := slices.Clone(ps)
		slices.Sort(want)
		require.Equal(t, want, got, "freed in order %v", order)
	}
}
