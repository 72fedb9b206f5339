//go:build agentrl_mpi && cgo

package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/examples/internal/setup/setuptest"
	"github.com/agentrl/agentrl/metrics"
)

// TestTrainUnderMPI: under mpirun -np 2 (.ci/run runs this test binary
// so) the program, unchanged, trains data-parallel on the tiny model:
// rank 0 prints, validates with the other rank's help and writes the
// metrics, checkpoints and export; the other rank prints nothing.
func TestTrainUnderMPI(t *testing.T) {
	env, err := dist.FromEnviron()
	require.NoError(t, err)
	if env.Size < 2 {
		t.Skip("not under a launcher: run mpirun -np 2 on this test binary")
	}
	setuptest.NeedPython(t)
	out := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runMain(t, "-model", tinyCheckpoint(t), "-train", "testdata/train.jsonl", "-val", "testdata/val.jsonl",
		"-batch", "2", "-n", "2", "-max-response", "12", "-overlong-buffer", "4", "-steps", "2",
		"-val-every", "2", "-sandbox-workers", "1", "-out", out)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if env.Rank != 0 {
		assert.Empty(t, stdout)
		return
	}
	assert.Contains(t, stdout, "trained policy:")
	rows, err := metrics.ReadFile(filepath.Join(out, metricsFile))
	require.NoError(t, err)
	require.Len(t, rows, 3, "validation at step 0, then steps 1 and 2, logged once")
	assert.Equal(t, 2.0, rows[2].Values["dist/world_size"])
	assert.Contains(t, rows[2].Values, "val-core/aime_toy/acc/mean@2", "the ranks' shares of the validation, gathered")
}
