package agentrl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl/internal/atomicfile"
)

// Crash-safe writing of files and checkpoint folders.
//
// A file is replaced atomically by writing a temporary file in the same
// folder, syncing it, renaming it over the target (rename(2) is atomic
// within a file system) and syncing the folder so that the rename itself
// is durable. A reader sees the old file or the new one, never a part.
// A checkpoint folder is built as step-N.tmp and renamed to step-N when
// complete; the file "latest" names the newest complete one. Leftovers of
// a crash — temporary files and .tmp folders — are never read and are
// removed by the next write.

// Errors of the checkpoint helpers.
var (
	// ErrNoCheckpoint reports a checkpoint root without a committed
	// checkpoint.
	ErrNoCheckpoint = errors.New("agentrl: no checkpoint")
	// ErrCheckpointExists reports a Save of the step that "latest" names:
	// replacing the only committed checkpoint in place cannot be atomic.
	ErrCheckpointExists = errors.New("agentrl: checkpoint exists")
	// ErrBadCheckpointPointer reports a "latest" file that does not name a
	// checkpoint folder.
	ErrBadCheckpointPointer = errors.New("agentrl: malformed latest checkpoint pointer")
)

// WriteFileAtomic writes data to path so that a concurrent or later reader
// sees either the previous content or all of data, even across a crash:
// it writes a temporary file in the same folder, fsyncs it, renames it over
// path and fsyncs the folder. Temporary files left behind by an earlier
// crash of a write to the same path are removed first, so two writers of
// one path at the same time are not supported (one of them may fail; the
// file is never corrupted).
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	if err := atomicfile.WriteFile(path, data, perm); err != nil {
		return fmt.Errorf("agentrl: %w", err)
	}
	return nil
}

// WriteFileAtomicFunc is WriteFileAtomic for content that is streamed:
// write fills the temporary file. When write returns an error the temporary
// file is removed and path is untouched.
func WriteFileAtomicFunc(path string, perm fs.FileMode, write func(io.Writer) error) error {
	if err := atomicfile.Write(path, perm, write); err != nil {
		return fmt.Errorf("agentrl: %w", err)
	}
	return nil
}

// SyncDir fsyncs the folder dir, making renames and removals of its entries
// durable.
func SyncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("agentrl: %w", err)
	}
	return nil
}

// CheckpointLatestFile is the name of the pointer file in a checkpoint root:
// it holds the folder name of the newest complete checkpoint ("step-120")
// and a newline.
const CheckpointLatestFile = "latest"

// CheckpointRoot manages the checkpoint folders under one root:
// root/step-N for each committed step and root/latest naming the newest.
type CheckpointRoot struct {
	// Dir is the root folder; Save creates it when missing.
	Dir string
}

// CheckpointDirName returns the folder name of step's checkpoint, "step-N".
func CheckpointDirName(step int) string { return "step-" + strconv.Itoa(step) }

// Save writes the checkpoint of step: it creates root/step-N.tmp (removing
// one left by a crash), lets fill write the checkpoint's files into it,
// fsyncs every file and folder in it, renames it to root/step-N, fsyncs the
// root, and then points root/latest at it with WriteFileAtomic. A crash at
// any point leaves latest naming a complete checkpoint (or none).
//
// A step-N folder that latest does not name is an uncommitted leftover
// and is replaced; Save of the step latest names (when its folder exists)
// returns ErrCheckpointExists. Save returns the checkpoint's folder. It returns
// ctx's error, before the rename, when ctx ends during fill.
func (c CheckpointRoot) Save(ctx context.Context, step int, fill func(ctx context.Context, dir string) error) (string, error) {
	if step < 0 {
		return "", fmt.Errorf("agentrl: save checkpoint: step %d < 0", step)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("agentrl: save checkpoint: %w", err)
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", fmt.Errorf("agentrl: save checkpoint: %w", err)
	}
	name := CheckpointDirName(step)
	final := filepath.Join(c.Dir, name)
	if _, latest, err := c.Latest(); err == nil && latest == final {
		return "", fmt.Errorf("%w: %s is the latest checkpoint", ErrCheckpointExists, final)
	}
	tmp := final + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", fmt.Errorf("agentrl: save checkpoint: clear leftover: %w", err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", fmt.Errorf("agentrl: save checkpoint: %w", err)
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("agentrl: save checkpoint %s: %w", name, err)
	}
	if err := fill(ctx, tmp); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := syncTree(tmp); err != nil {
		return fail(err)
	}
	if err := os.RemoveAll(final); err != nil { // an uncommitted leftover
		return fail(err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fail(err)
	}
	if err := SyncDir(c.Dir); err != nil {
		return "", fmt.Errorf("agentrl: save checkpoint %s: %w", name, err)
	}
	if err := WriteFileAtomic(filepath.Join(c.Dir, CheckpointLatestFile), []byte(name+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("agentrl: save checkpoint %s: %w", name, err)
	}
	return final, nil
}

// syncTree fsyncs every regular file and folder under dir, folders after
// their entries.
func syncTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		errSync := f.Sync()
		return errors.Join(errSync, f.Close())
	})
	if err != nil {
		return err
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// Latest returns the step and folder of the newest committed checkpoint.
// It returns ErrNoCheckpoint when there is none, and
// ErrBadCheckpointPointer when latest is malformed or names a missing
// folder.
func (c CheckpointRoot) Latest() (step int, dir string, err error) {
	name, err := c.latestName()
	if err != nil {
		return 0, "", err
	}
	step, ok := parseCheckpointName(name)
	if !ok {
		return 0, "", fmt.Errorf("%w: %s holds %q", ErrBadCheckpointPointer,
			filepath.Join(c.Dir, CheckpointLatestFile), name)
	}
	dir = filepath.Join(c.Dir, name)
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return 0, "", fmt.Errorf("%w: %s names missing folder %s", ErrBadCheckpointPointer,
			filepath.Join(c.Dir, CheckpointLatestFile), dir)
	}
	return step, dir, nil
}

// latestName reads the pointer file.
func (c CheckpointRoot) latestName() (string, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, CheckpointLatestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w in %s", ErrNoCheckpoint, c.Dir)
	}
	if err != nil {
		return "", fmt.Errorf("agentrl: read latest checkpoint: %w", err)
	}
	if len(b) > 64 {
		return "", fmt.Errorf("%w: %s is %d bytes", ErrBadCheckpointPointer,
			filepath.Join(c.Dir, CheckpointLatestFile), len(b))
	}
	return strings.TrimSpace(string(b)), nil
}

// parseCheckpointName parses "step-N".
func parseCheckpointName(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "step-")
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	step, err := strconv.Atoi(digits)
	if err != nil || CheckpointDirName(step) != name {
		return 0, false
	}
	return step, true
}

// Steps returns the steps of the complete checkpoint folders under the
// root, ascending; .tmp folders and other entries are skipped.
func (c CheckpointRoot) Steps() ([]int, error) {
	entries, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agentrl: list checkpoints: %w", err)
	}
	var steps []int
	for _, e := range entries {
		if step, ok := parseCheckpointName(e.Name()); ok && e.IsDir() {
			steps = append(steps, step)
		}
	}
	slices.Sort(steps)
	return steps, nil
}

// Prune removes crash leftovers and old checkpoints: .tmp folders,
// temporary files, step folders newer than the one latest names (renamed
// into place by a Save that crashed before updating latest), and all but
// the newest keep committed checkpoints (verl's max_actor_ckpt_to_keep);
// the folder latest names is always kept, so keep < 1 keeps only it.
// Without a latest file Prune removes only the leftovers.
func (c CheckpointRoot) Prune(keep int) error {
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return fmt.Errorf("agentrl: prune checkpoints: %w", err)
	}
	var errs []error
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".tmp") && e.IsDir() || atomicfile.IsTemp(n) && !e.IsDir() {
			errs = append(errs, os.RemoveAll(filepath.Join(c.Dir, n)))
		}
	}
	latestStep, _, err := c.Latest()
	if err == nil {
		steps, err := c.Steps()
		if err != nil {
			return err
		}
		var committed []int
		for _, s := range steps {
			if s > latestStep {
				errs = append(errs, os.RemoveAll(filepath.Join(c.Dir, CheckpointDirName(s))))
			} else {
				committed = append(committed, s)
			}
		}
		keep = max(keep, 1)
		for _, s := range committed[:max(len(committed)-keep, 0)] {
			errs = append(errs, os.RemoveAll(filepath.Join(c.Dir, CheckpointDirName(s))))
		}
	} else if !errors.Is(err, ErrNoCheckpoint) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("agentrl: prune checkpoints: %w", err)
	}
	return SyncDir(c.Dir)
}
