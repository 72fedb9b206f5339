package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/metrics"
)

// openLog opens the run's metrics log at path, on rank 0 (the other ranks
// of a job log nothing): a new run's, which must hold no rows, or with
// -resume the log of the run being resumed, cut after the step of the
// checkpoint it resumes from (all of it when there is none: the run
// starts over), so that the steps it makes again are logged once.
func openLog(o options, rd *setup.RunDir, root checkpoint.Root, path string, stdout io.Writer) (*metrics.Logger, error) {
	if !rd.Leader() {
		return metrics.NewLogger(io.Discard), nil
	}
	var opts metrics.Options
	if o.resume {
		step, err := root.ResumeStep()
		if err != nil {
			return nil, fmt.Errorf("-resume: %w", err)
		}
		opts.Resume, opts.ResumeStep = true, step
	}
	l, err := metrics.Open(path, opts)
	if errors.Is(err, metrics.ErrOwned) {
		return nil, fmt.Errorf("%w: pass -resume to continue that run, or choose another -out", err)
	}
	if err != nil {
		return nil, err
	}
	if n := l.Removed(); n > 0 {
		rows := "rows"
		if n == 1 {
			rows = "row"
		}
		fmt.Fprintf(stdout, "metrics: %s: cut %d %s logged after step %d, the checkpoint's; the resumed run logs those steps again\n", path, n, rows, opts.ResumeStep)
	}
	return l, nil
}
