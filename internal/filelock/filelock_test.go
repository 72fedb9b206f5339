package filelock

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTryLock: a lock belongs to the open file, so a second open of the
// same file, in the same process, is refused with ErrLocked until the
// first unlocks, or closes.
func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b := open(), open()
	require.NoError(t, TryLock(a))
	require.ErrorIs(t, TryLock(b), ErrLocked)
	require.NoError(t, Unlock(a))
	require.NoError(t, TryLock(b))
	require.ErrorIs(t, TryLock(a), ErrLocked)
	require.NoError(t, b.Close())
	require.NoError(t, TryLock(a), "closing the holder releases its lock")
}
