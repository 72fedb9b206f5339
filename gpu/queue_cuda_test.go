//go:build agentrl_cuda && cgo

package gpu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQueuedErrorComesBack (fake driver or GPU): a queued call that fails
// on the worker — an Alloc of 2⁶⁰ bytes, more than any device has —
// returns nil itself, and its error comes back from the next call that
// waits for the worker, naming it as a queued call's; the calls queued
// after it are dropped (the Add below never runs, so y keeps its
// upload), and the Backend works on afterwards. Without the queue the
// Alloc returns the error itself.
func TestQueuedErrorComesBack(t *testing.T) {
	const huge = 1 << 58 // floats: 2⁶⁰ bytes
	be := newOrSkip(t)
	x, err := be.Alloc(4)
	require.NoError(t, err)
	y, err := be.Alloc(4)
	require.NoError(t, err)
	require.NoError(t, be.Upload(x, 0, []float32{1, 2, 3, 4}))
	require.NoError(t, be.Upload(y, 0, []float32{5, 6, 7, 8}))

	big, err := be.Alloc(huge)
	require.NoError(t, err, "queued: the failure is reported later")
	require.NoError(t, be.Add(y, x, x), "queued behind the failing call")
	err = be.Synchronize()
	require.ErrorIs(t, err, errOutOfMemory)
	require.ErrorContains(t, err, "a queued call failed")

	got := make([]float32, 4)
	require.NoError(t, be.Download(got, y, 0))
	require.Equal(t, []float32{5, 6, 7, 8}, got, "the Add queued after the failure was dropped")
	require.NoError(t, be.Free(big))
	require.NoError(t, be.Add(y, x, x))
	require.NoError(t, be.Download(got, y, 0))
	require.Equal(t, []float32{2, 4, 6, 8}, got, "the Backend works after the error")

	// Stats sends the queue but returns no error: the next call does.
	big2, err := be.Alloc(huge)
	require.NoError(t, err)
	_ = be.Stats()
	err = be.Synchronize()
	require.ErrorIs(t, err, errOutOfMemory, "the failure Stats sent is reported by the next call")
	require.NoError(t, be.Synchronize(), "and only once")
	require.NoError(t, be.Free(big2))

	plain := newOrSkip(t, WithLaunchQueue(false))
	_, err = plain.Alloc(huge)
	require.ErrorIs(t, err, errOutOfMemory, "without the queue the call returns its own error")
}
