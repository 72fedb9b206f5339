// Package atomicfile replaces files atomically and durably.
//
// WriteFile and Write write the new content to a temporary file in the
// target's folder, fsync it, rename it over the target (rename(2) is
// atomic within a file system) and fsync the folder, so that the rename
// itself survives a crash. A reader sees the old file or the new one,
// never a part of either; after a crash the target holds one of the two.
// On every failure the temporary file is removed and the target is left
// as it was.
//
// Stage splits Write before the rename, so that a writer of several
// files can write them all before putting any in place.
//
// Temporary files are named ".<name>.tmp-<random>" (IsTemp recognises
// them). One left behind by a crash is never read, and the next write of
// the same target removes it; so two writers of one path at the same time
// are not supported: one of them may fail, and the file is never
// corrupted.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// tempMarker separates the target's name from the random suffix in the
// name of a temporary file.
const tempMarker = ".tmp-"

// WriteFile replaces the file at path with data, atomically and durably;
// a new file gets mode perm (before the umask), like os.WriteFile.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write is WriteFile for content that is streamed: write fills the
// temporary file. When write returns an error, Write returns it wrapped,
// removes the temporary file and leaves path as it was.
//
// The errors name path; a missing folder is reported as such (errors.Is
// fs.ErrNotExist), not as a failure to create the temporary file.
func Write(path string, perm fs.FileMode, write func(io.Writer) error) error {
	s, err := Stage(path, perm, write)
	if err != nil {
		return err
	}
	return s.Commit()
}

// Staged is the new content of a file, written and synced aside by
// Stage: Commit puts it in place, Abort discards it. Staging every file
// of a set before committing any lets a writer of several files (the
// shards of a checkpoint) fail without replacing one of them.
type Staged struct {
	path, dir, tmp string
	done           bool
}

// Stage is Write without the rename: the temporary file, complete and
// synced, waits for Commit or Abort. On error nothing is left behind, as
// with Write.
func Stage(path string, perm fs.FileMode, write func(io.Writer) error) (_ *Staged, err error) {
	dir, base := filepath.Split(path)
	dir = filepath.Clean(dir) // "" becomes "."
	if base == "" {
		return nil, fmt.Errorf("atomic write %q: the path names no file", path)
	}
	removeStaleTemps(dir, tempPrefix(base))
	suffix, err := randomSuffix()
	if err != nil {
		return nil, fmt.Errorf("atomic write %s: %w", path, err)
	}
	tmp := filepath.Join(dir, tempPrefix(base)+suffix)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		// Name the folder when it is the problem, not the temporary file.
		if st, serr := os.Stat(dir); serr != nil {
			return nil, fmt.Errorf("atomic write %s: folder: %w", path, serr)
		} else if !st.IsDir() {
			return nil, fmt.Errorf("atomic write %s: %s is not a folder", path, dir)
		}
		return nil, fmt.Errorf("atomic write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close() // may be a second Close; its error adds nothing
			os.Remove(tmp)
		}
	}()
	if err := write(f); err != nil {
		return nil, fmt.Errorf("atomic write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("atomic write %s: sync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("atomic write %s: close: %w", path, err)
	}
	return &Staged{path: path, dir: dir, tmp: tmp}, nil
}

// Commit renames the staged file over its path and fsyncs the folder;
// if the rename fails, the temporary file is removed and the path left
// as it was. A second Commit, or one after Abort, does nothing.
func (s *Staged) Commit() error {
	if s.done {
		return nil
	}
	s.done = true
	if err := os.Rename(s.tmp, s.path); err != nil {
		os.Remove(s.tmp)
		return fmt.Errorf("atomic write %s: %w", s.path, err)
	}
	// The new content is in place; a failed folder sync makes only the
	// rename's durability uncertain, and the temporary file is gone.
	if err := SyncDir(s.dir); err != nil {
		return fmt.Errorf("atomic write %s: %w", s.path, err)
	}
	return nil
}

// Abort removes the staged file, leaving its path as it was; after
// Commit it does nothing.
func (s *Staged) Abort() {
	if s.done {
		return
	}
	s.done = true
	os.Remove(s.tmp)
}

// SyncDir fsyncs the folder dir, making the creation, renaming and
// removal of its entries durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync folder: %w", err)
	}
	errSync := d.Sync()
	errClose := d.Close()
	if err := errors.Join(errSync, errClose); err != nil {
		return fmt.Errorf("sync folder %s: %w", dir, err)
	}
	return nil
}

// IsTemp reports whether name, a file name without folder, has the form
// of this package's temporary files; a checkpoint pruner removes such
// files as crash leftovers.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker)
}

// tempPrefix is the name of base's temporary files without the random
// suffix.
func tempPrefix(base string) string { return "." + base + tempMarker }

// removeStaleTemps removes the files in dir whose names start with prefix:
// temporary files of an earlier write that crashed. Failures are ignored:
// a leftover temporary file is harmless, and a folder that cannot be read
// may still be written.
func removeStaleTemps(dir, prefix string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && !e.IsDir() {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

func randomSuffix() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
