//go:build !unix && !windows

package filelock

import (
	"fmt"
	"os"
	"runtime"
)

// TryLock returns ErrUnsupported: this platform takes no file locks.
func TryLock(f *os.File) error {
	return fmt.Errorf("%w: %s on %s", ErrUnsupported, f.Name(), runtime.GOOS)
}

// Unlock does nothing: TryLock never locks here.
func Unlock(*os.File) error { return nil }
