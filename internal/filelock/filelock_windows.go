//go:build windows

package filelock

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// lockOffsetHigh is the high word of the locked byte's offset: far past
// any content, since Windows locks are mandatory for the bytes they cover
// and a reader must still read the file.
const lockOffsetHigh = 0x7fffffff

// TryLock takes an exclusive lock on f without waiting: ErrLocked when
// another open file holds one.
func TryLock(f *os.File) error {
	ol := &windows.Overlapped{OffsetHigh: lockOffsetHigh}
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, windows.ERROR_LOCK_VIOLATION), errors.Is(err, windows.ERROR_IO_PENDING):
		return ErrLocked
	case errors.Is(err, windows.ERROR_NOT_SUPPORTED), errors.Is(err, windows.ERROR_INVALID_FUNCTION):
		return fmt.Errorf("%w: LockFileEx %s: %w", ErrUnsupported, f.Name(), err)
	default:
		return fmt.Errorf("filelock: LockFileEx %s: %w", f.Name(), err)
	}
}

// Unlock releases the lock TryLock took on f.
func Unlock(f *os.File) error {
	ol := &windows.Overlapped{OffsetHigh: lockOffsetHigh}
	if err := windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, ol); err != nil {
		return fmt.Errorf("filelock: unlock %s: %w", f.Name(), err)
	}
	return nil
}
