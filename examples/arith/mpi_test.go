//go:build agentrl_mpi && cgo

package main

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/metrics"
)

// TestRunUnderMPI: under mpirun -np 2 (.ci/run runs this test binary so)
// the program, unchanged, trains data-parallel: every rank runs it,
// rank 0 prints the table and the JSON line and writes the run folder,
// whose metrics say two ranks, and the other rank prints and writes
// nothing there. With AGENTRL_TEST_ZERO=2 in the environment (a
// second mpirun: a process initialises MPI once) it runs with -zero 2,
// the training state sharded, and the metrics say the stage and what
// each rank moved.
func TestRunUnderMPI(t *testing.T) {
	env, err := dist.FromEnviron()
	require.NoError(t, err)
	if env.Size < 2 {
		t.Skip("not under a launcher: run mpirun -np 2 on this test binary")
	}
	zero := cmp.Or(os.Getenv("AGENTRL_TEST_ZERO"), "0")
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, tinyArgs(dir, "-tool", "calculator", "-zero", zero), &stdout, &stderr), stderr.String())
	if env.Rank != 0 {
		assert.Empty(t, stdout.String())
		_, err := os.Stat(filepath.Join(dir, "metrics.jsonl"))
		assert.True(t, os.IsNotExist(err), "rank %d writes no run folder", env.Rank)
		return
	}
	assert.True(t, strings.Contains(stdout.String(), `{"sft": `), stdout.String())
	assert.Contains(t, stderr.String(), "job: 2 ranks (openmpi)")
	for _, f := range []string{"metrics.jsonl", "sft_metrics.jsonl"} {
		rows, err := metrics.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		require.NotEmpty(t, rows)
		last := rows[len(rows)-1].Values
		assert.Equal(t, 2.0, last["dist/world_size"], f)
		assert.Positive(t, last["memory/optimizer_bytes"], f)
		if zero == "2" {
			assert.Equal(t, 2.0, last["dist/zero_stage"], f)
			assert.Positive(t, last["dist/grad_reduce_scatter_bytes"], f)
			assert.Positive(t, last["dist/weight_allgather_bytes"], f)
		} else {
			assert.NotContains(t, last, "dist/zero_stage", f)
		}
	}
}
