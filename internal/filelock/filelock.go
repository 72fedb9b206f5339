// Package filelock takes advisory, exclusive, non-blocking locks on open
// files: flock(2) on Unix, LockFileEx on Windows. The kernel releases a
// lock when its file is closed or its process ends, so a crashed
// holder never leaves a lock behind. A lock belongs to the open file (the
// file description), not to the process: two opens of one file, even in
// one process, exclude each other.
package filelock

import "errors"

// ErrLocked reports a file that another open file holds locked.
var ErrLocked = errors.New("filelock: locked by another open file")

// ErrUnsupported reports a file system or platform that takes no locks.
var ErrUnsupported = errors.New("filelock: locks not supported here")
