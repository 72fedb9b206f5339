package agentrl

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	require.NoError(t, WriteFileAtomic(path, []byte("v1"), 0o600))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "v1", string(got))
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	require.NoError(t, WriteFileAtomic(path, []byte("version 2"), 0o600))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "version 2", string(got))
	assert.Equal(t, []string{"model.safetensors"}, names(t, dir))
}

func TestWriteFileAtomicCrashLeftover(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "optim.bin")
	require.NoError(t, WriteFileAtomic(path, []byte("old"), 0o644))
	// A crash mid-write leaves a partial temporary file behind; readers of
	// path still see the old content.
	stale := filepath.Join(dir, ".optim.bin.tmp-deadbeef")
	require.NoError(t, os.WriteFile(stale, []byte("partial ne"), 0o644))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
	// The next write of the same file clears the leftover.
	require.NoError(t, WriteFileAtomic(path, []byte("new"), 0o644))
	assert.Equal(t, []string{"optim.bin"}, names(t, dir))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
}

func TestWriteFileAtomicFuncError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, WriteFileAtomic(path, []byte("keep"), 0o644))
	boom := errors.New("boom")
	err := WriteFileAtomicFunc(path, 0o644, func(w io.Writer) error {
		_, _ = w.Write([]byte("half"))
		return boom
	})
	require.ErrorIs(t, err, boom)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(got))
	assert.Equal(t, []string{"f"}, names(t, dir), "temporary file removed")

	require.Error(t, WriteFileAtomic(filepath.Join(dir, "missing", "f"), nil, 0o644))
	require.Error(t, WriteFileAtomic(dir+string(filepath.Separator), nil, 0o644))
}

func TestWriteFileAtomicReaderNeverSeesPartial(t *testing.T) {
	path := filepath.Join(t.TempDir(), "weights")
	const size = 1 << 20
	a, b := bytes.Repeat([]byte{'a'}, size), bytes.Repeat([]byte{'b'}, size)
	require.NoError(t, WriteFileAtomic(path, a, 0o644))
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
		require.NoError(t, WriteFileAtomic(path, data, 0o644))
	}
	stop.Store(true)
	wg.Wait()
	assert.Zero(t, bad.Load(), "a reader saw a partial or missing file")
	assert.Positive(t, reads.Load())
}

// fillFiles writes a small checkpoint: a weights file and a nested file.
func fillFiles(content string) func(context.Context, string) error {
	return func(_ context.Context, dir string) error {
		if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte(content), 0o644); err != nil {
			return err
		}
		if err := os.Mkdir(filepath.Join(dir, "optim"), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "optim", "state.bin"), []byte(content+"-optim"), 0o644)
	}
}

func readCkpt(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	require.NoError(t, err)
	return string(b)
}

func TestCheckpointRootSaveLatest(t *testing.T) {
	ctx := context.Background()
	root := CheckpointRoot{Dir: filepath.Join(t.TempDir(), "ckpt")}
	_, _, err := root.Latest()
	require.ErrorIs(t, err, ErrNoCheckpoint)

	dir, err := root.Save(ctx, 10, fillFiles("ten"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root.Dir, "step-10"), dir)
	step, latest, err := root.Latest()
	require.NoError(t, err)
	assert.Equal(t, 10, step)
	assert.Equal(t, dir, latest)
	assert.Equal(t, "ten", readCkpt(t, latest))
	ptr, err := os.ReadFile(filepath.Join(root.Dir, CheckpointLatestFile))
	require.NoError(t, err)
	assert.Equal(t, "step-10\n", string(ptr))

	_, err = root.Save(ctx, 20, fillFiles("twenty"))
	require.NoError(t, err)
	step, latest, err = root.Latest()
	require.NoError(t, err)
	assert.Equal(t, 20, step)
	assert.Equal(t, "twenty", readCkpt(t, latest))
	assert.Equal(t, []string{"latest", "step-10", "step-20"}, names(t, root.Dir))

	_, err = root.Save(ctx, 20, fillFiles("again"))
	require.ErrorIs(t, err, ErrCheckpointExists)
	assert.Equal(t, "twenty", readCkpt(t, latest))

	_, err = root.Save(ctx, -1, fillFiles("x"))
	require.Error(t, err)

	steps, err := root.Steps()
	require.NoError(t, err)
	assert.Equal(t, []int{10, 20}, steps)
}

func TestCheckpointRootCrashes(t *testing.T) {
	ctx := context.Background()
	root := CheckpointRoot{Dir: t.TempDir()}
	_, err := root.Save(ctx, 20, fillFiles("twenty"))
	require.NoError(t, err)

	// fill fails: the .tmp folder is removed, latest is unchanged.
	boom := errors.New("disk full")
	_, err = root.Save(ctx, 30, func(ctx context.Context, dir string) error {
		require.NoError(t, fillFiles("thir")(ctx, dir))
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, []string{"latest", "step-20"}, names(t, root.Dir))

	// Crash during fill: a partial step-30.tmp stays behind. Readers ignore it.
	require.NoError(t, os.MkdirAll(filepath.Join(root.Dir, "step-30.tmp"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root.Dir, "step-30.tmp", "model.safetensors"), []byte("th"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root.Dir, "step-30.tmp", "junk"), []byte("x"), 0o644))
	// Crash while rewriting the pointer: a partial temp pointer stays behind.
	require.NoError(t, os.WriteFile(filepath.Join(root.Dir, ".latest.tmp-0123"), []byte("st"), 0o644))
	step, dir, err := root.Latest()
	require.NoError(t, err)
	assert.Equal(t, 20, step)
	assert.Equal(t, "twenty", readCkpt(t, dir))

	// The next Save replaces the leftovers.
	dir, err = root.Save(ctx, 30, fillFiles("thirty"))
	require.NoError(t, err)
	assert.Equal(t, "thirty", readCkpt(t, dir))
	assert.NoFileExists(t, filepath.Join(dir, "junk"))
	assert.Equal(t, []string{"latest", "step-20", "step-30"}, names(t, root.Dir))

	// Crash after the rename, before the pointer update: step-40 exists
	// but latest still names step-30; a later Save(40) replaces it.
	require.NoError(t, os.Mkdir(filepath.Join(root.Dir, "step-40"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root.Dir, "step-40", "model.safetensors"), []byte("stale"), 0o644))
	step, _, err = root.Latest()
	require.NoError(t, err)
	assert.Equal(t, 30, step)
	dir, err = root.Save(ctx, 40, fillFiles("forty"))
	require.NoError(t, err)
	assert.Equal(t, "forty", readCkpt(t, dir))
}

func TestCheckpointRootPointerToMissingFolder(t *testing.T) {
	// latest names step-7, whose folder is gone: Latest reports it, and a
	// Save of step 7 may write it again.
	root := CheckpointRoot{Dir: t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(root.Dir, CheckpointLatestFile), []byte("step-7\n"), 0o644))
	_, _, err := root.Latest()
	require.ErrorIs(t, err, ErrBadCheckpointPointer)
	_, err = root.Save(context.Background(), 7, fillFiles("seven"))
	require.NoError(t, err)
	step, dir, err := root.Latest()
	require.NoError(t, err)
	assert.Equal(t, 7, step)
	assert.Equal(t, "seven", readCkpt(t, dir))
}

func TestCheckpointRootContextCanceled(t *testing.T) {
	root := CheckpointRoot{Dir: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	_, err := root.Save(ctx, 5, func(ctx context.Context, dir string) error {
		cancel() // the run is stopped while the files are written
		return fillFiles("five")(ctx, dir)
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, names(t, root.Dir))
	_, err = root.Save(ctx, 6, fillFiles("six")) // already canceled
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, names(t, root.Dir))
}

func TestCheckpointRootBadPointer(t *testing.T) {
	for _, content := range []string{"garbage\n", "step-\n", "step-007\n", "step--1\n", "../etc\n", "step-99\n", string(bytes.Repeat([]byte("x"), 100))} {
		t.Run(strconv.Quote(content[:min(len(content), 10)]), func(t *testing.T) {
			root := CheckpointRoot{Dir: t.TempDir()}
			require.NoError(t, os.WriteFile(filepath.Join(root.Dir, CheckpointLatestFile), []byte(content), 0o644))
			_, _, err := root.Latest()
			require.ErrorIs(t, err, ErrBadCheckpointPointer)
		})
	}
}

func TestCheckpointRootPrune(t *testing.T) {
	ctx := context.Background()
	root := CheckpointRoot{Dir: t.TempDir()}
	for s := 1; s <= 5; s++ {
		_, err := root.Save(ctx, s, fillFiles(strconv.Itoa(s)))
		require.NoError(t, err)
	}
	// Leftovers: a .tmp folder, a temp pointer, an uncommitted step-6.
	require.NoError(t, os.Mkdir(filepath.Join(root.Dir, "step-7.tmp"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root.Dir, ".latest.tmp-ab"), nil, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(root.Dir, "step-6"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root.Dir, "notes.txt"), nil, 0o644))

	require.NoError(t, root.Prune(2))
	assert.Equal(t, []string{"latest", "notes.txt", "step-4", "step-5"}, names(t, root.Dir))
	require.NoError(t, root.Prune(0))
	assert.Equal(t, []string{"latest", "notes.txt", "step-5"}, names(t, root.Dir))

	// Without a pointer only leftovers go.
	bare := CheckpointRoot{Dir: t.TempDir()}
	require.NoError(t, os.Mkdir(filepath.Join(bare.Dir, "step-3"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(bare.Dir, "step-4.tmp"), 0o755))
	require.NoError(t, bare.Prune(1))
	assert.Equal(t, []string{"step-3"}, names(t, bare.Dir))
	require.Error(t, CheckpointRoot{Dir: filepath.Join(bare.Dir, "missing")}.Prune(1))
}

func FuzzParseCheckpointName(f *testing.F) {
	for _, s := range []string{"step-0", "step-12", "step-007", "step-", "step--1", "step-1e3", "step-99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		step, ok := parseCheckpointName(name)
		if ok {
			require.GreaterOrEqual(t, step, 0)
			require.Equal(t, name, CheckpointDirName(step))
		}
	})
}

func BenchmarkWriteFileAtomic1MiB(b *testing.B) {
	path := filepath.Join(b.TempDir(), "f")
	data := bytes.Repeat([]byte{1}, 1<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := WriteFileAtomic(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
