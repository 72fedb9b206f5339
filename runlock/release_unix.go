//go:build unix

package runlock

import (
	"errors"
	"os"
)

// release removes the lock file while its lock is held, so that no other
// process locks the file on its way out, then closes it, which unlocks.
// An Acquire that opened the file before the removal finds, after taking
// the lock, that the path names another file or none, and tries again.
func release(f *os.File, path string) error {
	errRm := os.Remove(path)
	return errors.Join(errRm, f.Close())
}
