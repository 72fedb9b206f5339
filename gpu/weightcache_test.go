package gpu

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWeightCache drives the cache with a fake allocator and converter:
// one conversion per write, hits in between, the copy's memory reused
// across writes and returned on drop, and a failed conversion never
// leaving a copy that looks current.
func TestWeightCache(t *testing.T) {
	w := newWeightCache()
	var allocs, frees, converts int
	next := devPtr(0x1000)
	alloc := func(n uint64) (devPtr, error) {
		allocs++
		next += devPtr(n)
		return next, nil
	}
	convert := func(devPtr) error { converts++; return nil }
	b, other := &buffer{n: 8}, &buffer{n: 8}

	p1, err := w.get(b, 16, alloc, convert)
	require.NoError(t, err)
	require.Equal(t, 1, converts)
	p2, err := w.get(b, 16, alloc, convert)
	require.NoError(t, err)
	require.Equal(t, p1, p2)
	require.Equal(t, 1, converts, "unchanged weight: no conversion")
	require.Equal(t, uint64(1), w.hits)

	w.wrote(nil, other) // writes to other buffers leave b's copy current
	_, err = w.get(b, 16, alloc, convert)
	require.NoError(t, err)
	require.Equal(t, 1, converts)

	w.wrote(b)
	p3, err := w.get(b, 16, alloc, convert)
	require.NoError(t, err)
	require.Equal(t, 2, converts, "a written weight is converted again")
	require.Equal(t, p1, p3, "into the same memory")
	require.Equal(t, 1, allocs)
	require.Equal(t, uint64(16), w.bytes)
	require.Equal(t, uint64(2), w.conversions)

	// A failed conversion returns its error, and the next call converts
	// again even though the buffer was not written in between.
	w.wrote(b)
	boom := errors.New("launch failed")
	_, err = w.get(b, 16, alloc, func(devPtr) error { return boom })
	require.ErrorIs(t, err, boom)
	_, err = w.get(b, 16, alloc, convert)
	require.NoError(t, err)
	require.Equal(t, 3, converts)

	_, err = w.get(b, 32, alloc, convert)
	require.ErrorIs(t, err, errWeightCopySize)

	// A failed allocation leaves nothing behind.
	_, err = w.get(other, 16, func(uint64) (devPtr, error) { return 0, errOutOfMemory }, convert)
	require.ErrorIs(t, err, errOutOfMemory)
	require.NotContains(t, w.copies, other)

	free := func(p devPtr) error {
		frees++
		require.Equal(t, p1, p)
		return nil
	}
	require.NoError(t, w.drop(b, free))
	require.NoError(t, w.drop(b, free), "dropping twice is harmless")
	require.Equal(t, 1, frees)
	require.Zero(t, w.bytes)
}
