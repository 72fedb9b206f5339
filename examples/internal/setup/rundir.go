package setup

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/runlock"
)

// RunDir is a program's hold on its run folder (-out): the folder's
// lock (package runlock), which rank 0 of a job — the rank that writes
// the folder, or the process alone — takes before any work, so that a
// second run on the folder stops at once naming the first. The other
// ranks of a job take nothing.
type RunDir struct {
	// Dir is the folder.
	Dir  string
	lock *runlock.Lock
}

// LockRunDir takes dir for this run (creating it when missing) on rank 0
// of the launcher's job (dist.FromEnviron).
func LockRunDir(dir string) (*RunDir, error) {
	env, err := dist.FromEnviron()
	if err != nil {
		return nil, err
	}
	r := &RunDir{Dir: dir}
	if !env.Leader() {
		return r, nil
	}
	if r.lock, err = runlock.Acquire(dir); err != nil {
		return nil, fmt.Errorf("-out: %w", err)
	}
	return r, nil
}

// Leader reports whether this process writes the folder: it holds the
// lock.
func (r *RunDir) Leader() bool { return r.lock != nil }

// Release releases the lock, and removes the folder when the lock made
// it and nothing else was written into it.
func (r *RunDir) Release() {
	if r.lock != nil {
		_ = r.lock.Release()
		r.lock = nil
	}
}

// CheckNew returns an error, on rank 0, when a metrics log that matches
// one of patterns (filepath.Glob patterns under Dir: "metrics.jsonl",
// "*/seed-*/metrics.jsonl") holds rows: the folder holds an earlier run,
// whose logs a new run must not append to (metrics.Open refuses them,
// but only when the run gets there, after its work). The error names the
// log and its rows.
func (r *RunDir) CheckNew(patterns ...string) error {
	if !r.Leader() {
		return nil
	}
	var logs []string
	for _, p := range patterns {
		m, err := filepath.Glob(filepath.Join(r.Dir, p))
		if err != nil {
			return fmt.Errorf("-out: %w", err)
		}
		logs = append(logs, m...)
	}
	slices.Sort(logs)
	for _, l := range slices.Compact(logs) {
		rows, err := metrics.ReadFile(l)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("-out %s holds an unreadable metrics log: %w: choose another -out", r.Dir, err)
		}
		if len(rows) > 0 {
			return fmt.Errorf("-out %s holds an earlier run: %s has %s; choose another -out", r.Dir, l, describeRows(rows))
		}
	}
	return nil
}

// describeRows describes a log's rows: "1 row (step 4)", "3 rows (steps
// 0…2)".
func describeRows(rows []metrics.Row) string {
	if len(rows) == 1 {
		return fmt.Sprintf("1 row (step %d)", rows[0].Step)
	}
	return fmt.Sprintf("%d rows (steps %d…%d)", len(rows), rows[0].Step, rows[len(rows)-1].Step)
}
