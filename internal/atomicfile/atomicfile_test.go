package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFileReplacesContent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new []byte // old nil: no file before
	}{
		{"new file", nil, []byte("hello")},
		{"longer", []byte("ab"), []byte("abcdefgh")},
		{"shorter", bytes.Repeat([]byte("x"), 1<<16), []byte("y")},
		{"empty", []byte("something"), []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.bin")
			if tc.old != nil {
				require.NoError(t, os.WriteFile(path, tc.old, 0o644))
			}
			require.NoError(t, WriteFile(path, tc.new, 0o644))
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tc.new, got)
			assert.Equal(t, []string{"f.bin"}, entries(t, dir), "no temporary file left")
		})
	}
}

func TestWriteFileMode(t *testing.T) {
	for _, perm := range []fs.FileMode{0o600, 0o644} {
		path := filepath.Join(t.TempDir(), "f")
		require.NoError(t, WriteFile(path, []byte("x"), perm))
		st, err := os.Stat(path)
		require.NoError(t, err)
		// The umask can only clear bits; 0o022, the usual one, keeps these.
		assert.Equal(t, perm&^0o022, st.Mode().Perm()&^0o022)
		assert.Zero(t, st.Mode().Perm()&^perm, "no bit beyond perm")
	}
}

func TestWriteRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	require.NoError(t, WriteFile("rel.txt", []byte("r"), 0o644))
	got, err := os.ReadFile("rel.txt")
	require.NoError(t, err)
	assert.Equal(t, "r", string(got))
}

func TestWriteFailureKeepsOldFile(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"fails before writing", func(io.Writer) error { return boom }},
		{"fails after a partial write", func(w io.Writer) error {
			if _, err := w.Write([]byte("half of the new")); err != nil {
				return err
			}
			return boom
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.json")
			require.NoError(t, WriteFile(path, []byte("old content"), 0o644))
			err := Write(path, 0o644, tc.write)
			require.ErrorIs(t, err, boom)
			assert.Contains(t, err.Error(), path)
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, "old content", string(got))
			assert.Equal(t, []string{"state.json"}, entries(t, dir), "temporary file removed")
		})
	}
}

func TestWriteRenameFailureLeavesNoTemp(t *testing.T) {
	// A non-empty folder at the target: the rename fails after the
	// temporary file was written, synced and closed.
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	require.NoError(t, os.MkdirAll(filepath.Join(target, "inside"), 0o755))
	err := WriteFile(target, []byte("data"), 0o644)
	require.Error(t, err)
	assert.Contains(t, err.Error(), target)
	assert.Equal(t, []string{"target"}, entries(t, dir))
	assert.Equal(t, []string{"inside"}, entries(t, target))
}

func TestWriteBadFolder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tc := range []struct {
		name     string
		path     string
		notExist bool   // errors.Is fs.ErrNotExist
		contains string // in the message
	}{
		{"missing folder", filepath.Join(dir, "missing", "f"), true, filepath.Join(dir, "missing")},
		{"missing folders", filepath.Join(dir, "a", "b", "f"), true, filepath.Join(dir, "a", "b")},
		{"folder is a file", filepath.Join(file, "f"), false, "plain"},
		{"no file name", dir + string(filepath.Separator), false, "names no file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteFile(tc.path, []byte("x"), 0o644)
			require.Error(t, err)
			assert.Equal(t, tc.notExist, errors.Is(err, fs.ErrNotExist), "%v", err)
			assert.Contains(t, err.Error(), tc.contains)
			assert.NotContains(t, err.Error(), tempMarker, "the error names the folder, not the temporary file")
		})
	}
	assert.Equal(t, []string{"plain"}, entries(t, dir), "nothing created")
}

func TestWriteRemovesCrashLeftovers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "optim.bin")
	require.NoError(t, WriteFile(path, []byte("old"), 0o644))
	// A crash mid-write leaves a partial temporary file; readers of path
	// still see the old content, and the next write removes it. Temporary
	// files of other targets are not touched.
	stale := filepath.Join(dir, ".optim.bin"+tempMarker+"deadbeef")
	other := filepath.Join(dir, ".other"+tempMarker+"deadbeef")
	require.NoError(t, os.WriteFile(stale, []byte("partial ne"), 0o644))
	require.NoError(t, os.WriteFile(other, []byte("someone else's"), 0o644))
	require.NoError(t, WriteFile(path, []byte("new"), 0o644))
	assert.ElementsMatch(t, []string{"optim.bin", filepath.Base(other)}, entries(t, dir))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
}

func TestWriteTempFileName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	var tempName string
	require.NoError(t, Write(path, 0o644, func(w io.Writer) error {
		f, ok := w.(*os.File)
		require.True(t, ok, "the writer is the temporary file")
		tempName = filepath.Base(f.Name())
		assert.Equal(t, dir, filepath.Dir(f.Name()), "in the target's folder")
		_, err := io.WriteString(w, "weights")
		return err
	}))
	assert.True(t, strings.HasPrefix(tempName, ".model.safetensors"+tempMarker), tempName)
	assert.True(t, IsTemp(tempName))
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{
		".latest.tmp-0123abcd":            true,
		".model.safetensors.tmp-ab":       true,
		"latest":                          false,
		"model.safetensors":               false,
		"step-10.tmp":                     false, // a checkpoint folder in the making, not ours
		"notes.tmp-1":                     false, // not hidden
		".hidden":                         false,
		".optimizer.safetensors.tmp12345": false, // os.CreateTemp's form
	} {
		assert.Equal(t, want, IsTemp(name), name)
	}
}

func TestSyncDir(t *testing.T) {
	require.NoError(t, SyncDir(t.TempDir()))
	missing := filepath.Join(t.TempDir(), "missing")
	err := SyncDir(missing)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), missing)
}

// TestWriteFileReaderNeverSeesPartial: a reader of path during 20
// replacements reads one whole version or the other, never a part, and
// never finds the file missing.
func TestWriteFileReaderNeverSeesPartial(t *testing.T) {
	path := filepath.Join(t.TempDir(), "weights")
	const size = 1 << 20
	a, b := bytes.Repeat([]byte{'a'}, size), bytes.Repeat([]byte{'b'}, size)
	require.NoError(t, WriteFile(path, a, 0o644))
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads, bad atomic.Int64
	wg.Go(func() {
		for !stop.Load() {
			got, err := os.ReadFile(path)
			if err != nil {
				bad.Add(1)
				continue
			}
			reads.Add(1)
			if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
				bad.Add(1)
			}
		}
	})
	for i := range 20 {
		data := a
		if i%2 == 0 {
			data = b
		}
		require.NoError(t, WriteFile(path, data, 0o644))
	}
	stop.Store(true)
	wg.Wait()
	assert.Zero(t, bad.Load(), "a reader saw a partial or missing file")
	assert.Positive(t, reads.Load())
}

func BenchmarkWriteFile1MiB(b *testing.B) {
	path := filepath.Join(b.TempDir(), "f")
	data := bytes.Repeat([]byte{1}, 1<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStage: a staged file is invisible at its path until Commit, Abort
// leaves the old content and no temporary file, and a failing write
// stages nothing.
func TestStage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		commit bool
		want   string
	}{
		{"commit", true, "new"},
		{"abort", false, "old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			require.NoError(t, WriteFile(path, []byte("old"), 0o644))
			s, err := Stage(path, 0o644, func(w io.Writer) error {
				_, err := w.Write([]byte("new"))
				return err
			})
			require.NoError(t, err)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, "old", string(b), "not in place before Commit")
			assert.Len(t, entries(t, dir), 2, "the staged temporary file")
			if tc.commit {
				require.NoError(t, s.Commit())
			} else {
				s.Abort()
			}
			s.Abort() // no effect after either
			require.NoError(t, s.Commit())
			b, err = os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(b))
			assert.Equal(t, []string{"f"}, entries(t, dir))
		})
	}
	dir := t.TempDir()
	boom := errors.New("boom")
	s, err := Stage(filepath.Join(dir, "f"), 0o644, func(io.Writer) error { return boom })
	require.ErrorIs(t, err, boom)
	assert.Nil(t, s)
	assert.Empty(t, entries(t, dir))
}
