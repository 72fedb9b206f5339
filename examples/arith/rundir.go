package main

import (
	"fmt"
	"os"

	"github.com/agentrl/agentrl/examples/internal/setup"
)

// lockRunDir takes the run folder dir for this run before any work: its
// lock (a run going on in it stops this one, naming that run's process)
// and, as the program has no resume, the refusal of a folder whose
// metrics logs hold an earlier run's rows.
func lockRunDir(dir string) (*setup.RunDir, error) {
	rd, err := setup.LockRunDir(dir)
	if err != nil {
		return nil, err
	}
	if err := rd.CheckNew("metrics.jsonl", "sft_metrics.jsonl"); err != nil {
		rd.Release()
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil { // the other ranks of a job
		rd.Release()
		return nil, fmt.Errorf("run folder: %w", err)
	}
	return rd, nil
}
