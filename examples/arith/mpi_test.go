//go:build agentrl_mpi && cgo

package main

import (
	"bytes"
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
// nothing there.
func TestRunUnderMPI(t *testing.T) {
	env, err := dist.FromEnviron()
	require.NoError(t, err)
	if env.Size < 2 {
		t.Skip("not under a launcher: run mpirun -np 2 on this test binary")
	}
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, tinyArgs(dir, "-tool", "calculator"), &stdout, &stderr), stderr.String())
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
		assert.Equal(t, 2.0, rows[len(rows)-1].Values["dist/world_size"], f)
	}
}
