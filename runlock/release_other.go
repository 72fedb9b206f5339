//go:build !unix

package runlock

import (
	"errors"
	"os"

	"github.com/agentrl/agentrl/internal/filelock"
)

// release unlocks and closes the lock file, then removes it. Windows
// removes no file that another process holds open, so a file that an
// Acquire opened meanwhile stays, and that Acquire's lock with it.
func release(f *os.File, path string) error {
	errUnlock := filelock.Unlock(f)
	errClose := f.Close()
	_ = os.Remove(path) // fails, as it should, while another process has it open
	return errors.Join(errUnlock, errClose)
}
