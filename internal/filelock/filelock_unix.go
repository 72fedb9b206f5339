//go:build unix

package filelock

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// TryLock takes an exclusive lock on f without waiting: ErrLocked when
// another open file holds one, ErrUnsupported when f's file system takes
// none.
func TryLock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return ErrLocked
		case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return fmt.Errorf("%w: flock %s: %w", ErrUnsupported, f.Name(), err)
		default:
			return fmt.Errorf("filelock: flock %s: %w", f.Name(), err)
		}
	}
}

// Unlock releases the lock TryLock took on f.
func Unlock(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_UN); err != nil {
		return fmt.Errorf("filelock: unlock %s: %w", f.Name(), err)
	}
	return nil
}
