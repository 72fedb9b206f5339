// Package runlock locks a run folder — the folder a training program
// writes its metrics log, checkpoints and exports into — so that two runs
// never write one folder at once: the second fails at once, with an
// error naming the process that holds the folder, instead of mixing its
// rows into the first run's metrics log and failing at its first
// checkpoint after doing the work.
//
// The lock is the file run.lock in the folder, locked exclusively
// (flock(2) on Unix, LockFileEx on Windows) for as long as the run holds
// it, and holding the owner's process id, host, command and start time
// as JSON. The kernel releases the lock when its holder ends, so a
// crashed run never leaves its folder locked: the next Acquire takes the
// lock and writes over the dead run's record. The lock is advisory: it
// binds the programs that take it (every program of this module that
// writes a run folder does, before any work). On Linux it holds across
// hosts on NFS, whose clients lock through the server.
package runlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentrl/agentrl/internal/filelock"
)

// FileName is the name of the lock file in a locked folder.
const FileName = "run.lock"

// ErrLocked is wrapped by Acquire's error (a *LockedError) for a folder
// that another run holds.
var ErrLocked = errors.New("runlock: run folder in use")

// maxRecord bounds the lock file a reader reads.
const maxRecord = 64 << 10

// Owner describes the process that holds a lock.
type Owner struct {
	// PID is the process id.
	PID int `json:"pid"`
	// Host is the host name the process runs on.
	Host string `json:"host"`
	// Command is the base name of the program (os.Args[0]).
	Command string `json:"command"`
	// Started is when the process took the lock.
	Started time.Time `json:"started"`
}

// String describes the owner as "grpotcr (pid 4242 on gpu0, since
// 2025-06-01 10:02:03 UTC)".
func (o Owner) String() string {
	if o.PID == 0 {
		return "another process (which has not written its name yet)"
	}
	cmd := o.Command
	if cmd == "" {
		cmd = "a process"
	}
	s := cmd + " (pid " + strconv.Itoa(o.PID)
	if o.Host != "" {
		s += " on " + o.Host
	}
	if !o.Started.IsZero() {
		s += ", since " + o.Started.UTC().Format("2006-01-02 15:04:05 MST")
	}
	return s + ")"
}

// LockedError is Acquire's error for a folder another run holds; it
// wraps ErrLocked.
type LockedError struct {
	// Dir is the folder.
	Dir string
	// Owner is the holder, as its lock file names it (zero when it has
	// not written it yet).
	Owner Owner
}

// Error names the folder and the process that holds it.
func (e *LockedError) Error() string {
	return fmt.Sprintf("runlock: run folder %s is in use by %s: wait for that run to end, stop it, or choose another folder", e.Dir, e.Owner)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// Lock is a held lock on a run folder. Release it when the run ends; a
// process that ends without releasing it releases it all the same.
type Lock struct {
	dir     string
	path    string
	f       *os.File
	created bool
	owner   Owner
}

// Acquire locks the run folder dir, creating it (and its parents) when
// missing, without waiting: when another open lock file holds it (another
// process, or another Acquire in this one) it returns a *LockedError,
// wrapping ErrLocked, that names the holder. A platform or file system
// that takes no locks is an error too, so that a run never goes on
// believing itself alone.
func Acquire(dir string) (*Lock, error) {
	if dir == "" {
		return nil, errors.New("runlock: empty folder name")
	}
	created, err := makeDir(dir)
	if err != nil {
		return nil, fmt.Errorf("runlock: %w", err)
	}
	path := filepath.Join(dir, FileName)
	// A holder releasing the folder removes its lock file, and the folder
	// when it made it and left it empty: a file opened just before that
	// is not the lock file any more, and the open or the check after the
	// lock tells, so Acquire tries again.
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if errors.Is(err, fs.ErrNotExist) && attempt < 8 {
			if c, err := makeDir(dir); err != nil {
				return nil, fmt.Errorf("runlock: %w", err)
			} else if c {
				created = true
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("runlock: %w", err)
		}
		if err := filelock.TryLock(f); err != nil {
			defer f.Close()
			if errors.Is(err, filelock.ErrLocked) {
				owner, _ := readOwner(f)
				return nil, &LockedError{Dir: dir, Owner: owner}
			}
			return nil, fmt.Errorf("runlock: run folder %s: %w", dir, err)
		}
		if same, err := isPath(f, path); err != nil || !same {
			_ = filelock.Unlock(f)
			f.Close()
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("runlock: %w", err)
			}
			if attempt < 8 {
				continue
			}
			return nil, fmt.Errorf("runlock: run folder %s: its lock file keeps being replaced", dir)
		}
		l := &Lock{dir: dir, path: path, f: f, created: created, owner: self()}
		if err := l.writeOwner(); err != nil {
			_ = l.Release()
			return nil, fmt.Errorf("runlock: %w", err)
		}
		return l, nil
	}
}

// makeDir makes dir, and its parents when missing; it reports whether it
// made dir itself.
func makeDir(dir string) (bool, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return false, err
	}
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	return err == nil, err
}

// isPath reports whether the open file f is the file at path.
func isPath(f *os.File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	pi, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, pi), nil
}

// self is this process as an Owner.
func self() Owner {
	host, _ := os.Hostname()
	cmd := ""
	if len(os.Args) > 0 {
		cmd = filepath.Base(os.Args[0])
	}
	return Owner{PID: os.Getpid(), Host: host, Command: cmd, Started: time.Now().UTC().Truncate(time.Second)}
}

// writeOwner writes the holder's record into the lock file.
func (l *Lock) writeOwner() error {
	b, err := json.Marshal(l.owner)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	if _, err := l.f.WriteAt(b, 0); err != nil {
		return err
	}
	return l.f.Sync()
}

// readOwner reads the record of the lock file f.
func readOwner(f *os.File) (Owner, error) {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, maxRecord))
	if err != nil {
		return Owner{}, err
	}
	return ParseOwner(b)
}

// ParseOwner parses a lock file's record, the JSON object Acquire
// writes. An empty record (a holder that has not written its own yet)
// is the zero Owner.
func ParseOwner(b []byte) (Owner, error) {
	var o Owner
	if len(b) == 0 {
		return o, nil
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return Owner{}, fmt.Errorf("runlock: lock record: %w", err)
	}
	if o.PID < 0 {
		return Owner{}, fmt.Errorf("runlock: lock record: pid %d", o.PID)
	}
	return o, nil
}

// Dir is the locked folder.
func (l *Lock) Dir() string { return l.dir }

// Owner is this process's record in the lock file.
func (l *Lock) Owner() Owner { return l.owner }

// Release releases the lock and removes the lock file, and the folder
// when Acquire created it and nothing else was written into it. Releasing
// twice does nothing.
func (l *Lock) Release() error {
	if l.f == nil {
		return nil
	}
	err := release(l.f, l.path)
	l.f = nil
	if l.created {
		// Fails, as it should, when the folder holds anything.
		_ = os.Remove(l.dir)
	}
	if err != nil {
		return fmt.Errorf("runlock: release %s: %w", l.dir, err)
	}
	return nil
}
