package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
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

func TestRootSaveLatest(t *testing.T) {
	ctx := context.Background()
	root := Root{Dir: filepath.Join(t.TempDir(), "ckpt")}
	_, _, err := root.Latest()
	require.ErrorIs(t, err, ErrNotFound)

	dir, err := root.Save(ctx, 10, fillFiles("ten"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root.Dir, "step-10"), dir)
	step, latest, err := root.Latest()
	require.NoError(t, err)
	assert.Equal(t, 10, step)
	assert.Equal(t, dir, latest)
	assert.Equal(t, "ten", readCkpt(t, latest))
	ptr, err := os.ReadFile(filepath.Join(root.Dir, LatestFile))
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
	require.ErrorIs(t, err, ErrExists)
	assert.Equal(t, "twenty", readCkpt(t, latest))

	_, err = root.Save(ctx, -1, fillFiles("x"))
	require.Error(t, err)

	steps, err := root.Steps()
	require.NoError(t, err)
	assert.Equal(t, []int{10, 20}, steps)
}

func TestRootCrashes(t *testing.T) {
	ctx := context.Background()
	root := Root{Dir: t.TempDir()}
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

func TestRootPointerToMissingFolder(t *testing.T) {
	// latest names step-7, whose folder is gone: Latest reports it, and a
	// Save of step 7 may write it again.
	root := Root{Dir: t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(root.Dir, LatestFile), []byte("step-7\n"), 0o644))
	_, _, err := root.Latest()
	require.ErrorIs(t, err, ErrBadLatest)
	_, err = root.Save(context.Background(), 7, fillFiles("seven"))
	require.NoError(t, err)
	step, dir, err := root.Latest()
	require.NoError(t, err)
	assert.Equal(t, 7, step)
	assert.Equal(t, "seven", readCkpt(t, dir))
}

func TestRootContextCanceled(t *testing.T) {
	root := Root{Dir: t.TempDir()}
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

func TestRootBadPointer(t *testing.T) {
	for _, content := range []string{"garbage\n", "step-\n", "step-007\n", "step--1\n", "../etc\n", "step-99\n", string(bytes.Repeat([]byte("x"), 100))} {
		t.Run(strconv.Quote(content[:min(len(content), 10)]), func(t *testing.T) {
			root := Root{Dir: t.TempDir()}
			require.NoError(t, os.WriteFile(filepath.Join(root.Dir, LatestFile), []byte(content), 0o644))
			_, _, err := root.Latest()
			require.ErrorIs(t, err, ErrBadLatest)
		})
	}
}

func TestRootPrune(t *testing.T) {
	ctx := context.Background()
	root := Root{Dir: t.TempDir()}
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
	bare := Root{Dir: t.TempDir()}
	require.NoError(t, os.Mkdir(filepath.Join(bare.Dir, "step-3"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(bare.Dir, "step-4.tmp"), 0o755))
	require.NoError(t, bare.Prune(1))
	assert.Equal(t, []string{"step-3"}, names(t, bare.Dir))
	require.Error(t, Root{Dir: filepath.Join(bare.Dir, "missing")}.Prune(1))
}

func FuzzParseDirName(f *testing.F) {
	for _, s := range []string{"step-0", "step-12", "step-007", "step-", "step--1", "step-1e3", "step-99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		step, ok := parseDirName(name)
		if ok {
			require.GreaterOrEqual(t, step, 0)
			require.Equal(t, name, DirName(step))
		}
	})
}

// TestRootResumeStep: the newest committed step, −1 for a root without
// a checkpoint (missing, or with only an uncommitted leftover), and the
// error of a malformed pointer.
func TestRootResumeStep(t *testing.T) {
	ctx := context.Background()
	root := Root{Dir: filepath.Join(t.TempDir(), "ckpt")}
	step, err := root.ResumeStep()
	require.NoError(t, err)
	assert.Equal(t, -1, step)
	require.NoError(t, os.MkdirAll(filepath.Join(root.Dir, "step-3"), 0o755)) // never committed
	step, err = root.ResumeStep()
	require.NoError(t, err)
	assert.Equal(t, -1, step)
	for _, s := range []int{4, 8} {
		_, err := root.Save(ctx, s, fillFiles(strconv.Itoa(s)))
		require.NoError(t, err)
	}
	step, err = root.ResumeStep()
	require.NoError(t, err)
	assert.Equal(t, 8, step)
	require.NoError(t, os.WriteFile(filepath.Join(root.Dir, LatestFile), []byte("garbage\n"), 0o644))
	_, err = root.ResumeStep()
	require.ErrorIs(t, err, ErrBadLatest)
}
