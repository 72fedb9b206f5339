// Package checkpoint keeps a crash-safe series of checkpoint folders
// under one root: root/step-N for each committed step and root/latest
// naming the newest. A folder is built as step-N.tmp, every file and
// folder in it is fsynced, and it is renamed to step-N when complete;
// then latest is replaced atomically (a temporary file renamed over it,
// the folder fsynced). A reader sees the previous checkpoint or the new
// one, never a part. Leftovers of a crash — temporary files and .tmp
// folders — are never read and are removed by the next Save or Prune.
//
// What a folder holds is its writer's: the trainers of package agentrl
// write their parameters, optimizer state and position into it
// (Trainer.SaveCheckpoint, SFTTrainer.SaveCheckpoint).
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl/internal/atomicfile"
)

// Errors of a checkpoint root.
var (
	// ErrNotFound reports a checkpoint root without a committed
	// checkpoint.
	ErrNotFound = errors.New("checkpoint: no checkpoint")
	// ErrExists reports a Save of the step that "latest" names:
	// replacing the only committed checkpoint in place cannot be atomic.
	ErrExists = errors.New("checkpoint: exists")
	// ErrBadLatest reports a "latest" file that does not name a
	// checkpoint folder.
	ErrBadLatest = errors.New("checkpoint: malformed latest pointer")
)

// LatestFile is the name of the pointer file in a checkpoint root:
// it holds the folder name of the newest complete checkpoint ("step-120")
// and a newline.
const LatestFile = "latest"

// Root manages the checkpoint folders under one root:
// root/step-N for each committed step and root/latest naming the newest.
type Root struct {
	// Dir is the root folder; Save creates it when missing.
	Dir string
}

// DirName returns the folder name of step's checkpoint, "step-N".
func DirName(step int) string { return "step-" + strconv.Itoa(step) }

// Save writes the checkpoint of step: it creates root/step-N.tmp (removing
// one left by a crash), lets fill write the checkpoint's files into it,
// fsyncs every file and folder in it, renames it to root/step-N, fsyncs the
// root, and then points root/latest at it, replacing the file atomically. A crash at
// any point leaves latest naming a complete checkpoint (or none).
//
// A step-N folder that latest does not name is an uncommitted leftover
// and is replaced; Save of the step latest names (when its folder exists)
// returns ErrExists. Save returns the checkpoint's folder. It returns
// ctx's error, before the rename, when ctx ends during fill.
func (c Root) Save(ctx context.Context, step int, fill func(ctx context.Context, dir string) error) (string, error) {
	if step < 0 {
		return "", fmt.Errorf("checkpoint: save: step %d < 0", step)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("checkpoint: save: %w", err)
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint: save: %w", err)
	}
	name := DirName(step)
	final := filepath.Join(c.Dir, name)
	if _, latest, err := c.Latest(); err == nil && latest == final {
		return "", fmt.Errorf("%w: %s is the latest checkpoint", ErrExists, final)
	}
	tmp := final + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", fmt.Errorf("checkpoint: save: clear leftover: %w", err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint: save: %w", err)
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("checkpoint: save %s: %w", name, err)
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
	if err := atomicfile.SyncDir(c.Dir); err != nil {
		return "", fmt.Errorf("checkpoint: save %s: %w", name, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(c.Dir, LatestFile), []byte(name+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("checkpoint: save %s: %w", name, err)
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
		if err := atomicfile.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// Latest returns the step and folder of the newest committed checkpoint.
// It returns ErrNotFound when there is none, and
// ErrBadLatest when latest is malformed or names a missing
// folder.
func (c Root) Latest() (step int, dir string, err error) {
	name, err := c.latestName()
	if err != nil {
		return 0, "", err
	}
	step, ok := parseDirName(name)
	if !ok {
		return 0, "", fmt.Errorf("%w: %s holds %q", ErrBadLatest,
			filepath.Join(c.Dir, LatestFile), name)
	}
	dir = filepath.Join(c.Dir, name)
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return 0, "", fmt.Errorf("%w: %s names missing folder %s", ErrBadLatest,
			filepath.Join(c.Dir, LatestFile), dir)
	}
	return step, dir, nil
}

// ResumeStep is the step a run resumed from the root goes on from: that
// of the newest committed checkpoint, or −1 when there is none (the run
// starts over). It is what metrics.Options.ResumeStep wants. A malformed
// latest pointer is an error (ErrBadLatest), as for Latest.
func (c Root) ResumeStep() (int, error) {
	step, _, err := c.Latest()
	if errors.Is(err, ErrNotFound) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	return step, nil
}

// latestName reads the pointer file.
func (c Root) latestName() (string, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, LatestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w in %s", ErrNotFound, c.Dir)
	}
	if err != nil {
		return "", fmt.Errorf("checkpoint: read latest: %w", err)
	}
	if len(b) > 64 {
		return "", fmt.Errorf("%w: %s is %d bytes", ErrBadLatest,
			filepath.Join(c.Dir, LatestFile), len(b))
	}
	return strings.TrimSpace(string(b)), nil
}

// parseDirName parses "step-N".
func parseDirName(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "step-")
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	step, err := strconv.Atoi(digits)
	if err != nil || DirName(step) != name {
		return 0, false
	}
	return step, true
}

// Steps returns the steps of the complete checkpoint folders under the
// root, ascending; .tmp folders and other entries are skipped.
func (c Root) Steps() ([]int, error) {
	entries, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list: %w", err)
	}
	var steps []int
	for _, e := range entries {
		if step, ok := parseDirName(e.Name()); ok && e.IsDir() {
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
func (c Root) Prune(keep int) error {
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return fmt.Errorf("checkpoint: prune: %w", err)
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
				errs = append(errs, os.RemoveAll(filepath.Join(c.Dir, DirName(s))))
			} else {
				committed = append(committed, s)
			}
		}
		keep = max(keep, 1)
		for _, s := range committed[:max(len(committed)-keep, 0)] {
			errs = append(errs, os.RemoveAll(filepath.Join(c.Dir, DirName(s))))
		}
	} else if !errors.Is(err, ErrNotFound) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("checkpoint: prune: %w", err)
	}
	if err := atomicfile.SyncDir(c.Dir); err != nil {
		return fmt.Errorf("checkpoint: prune: %w", err)
	}
	return nil
}
