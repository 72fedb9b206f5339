package setup

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/runlock"
)

// TestRunDir: the lock is held from LockRunDir to Release; CheckNew
// passes missing, empty and row-less logs and refuses, naming the log,
// one with rows or one it cannot read.
func TestRunDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	rd, err := LockRunDir(dir)
	require.NoError(t, err)
	assert.True(t, rd.Leader())
	_, err = LockRunDir(dir)
	require.ErrorIs(t, err, runlock.ErrLocked)
	assert.ErrorContains(t, err, "-out: runlock: run folder "+dir+" is in use by ")

	require.NoError(t, rd.CheckNew("metrics.jsonl", "*/seed-*/metrics.jsonl"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte("\n"), 0o644))
	require.NoError(t, rd.CheckNew("metrics.jsonl"), "a blank line is no row")

	seed := filepath.Join(dir, "grpo", "seed-2")
	require.NoError(t, os.MkdirAll(seed, 0o755))
	l, err := metrics.Open(filepath.Join(seed, "metrics.jsonl"), metrics.Options{})
	require.NoError(t, err)
	require.NoError(t, l.Log(3, map[string]float64{"a": 1}))
	require.NoError(t, l.Log(4, map[string]float64{"a": 1}))
	require.NoError(t, l.Close())
	err = rd.CheckNew("metrics.jsonl", "*/seed-*/metrics.jsonl")
	assert.EqualError(t, err, "-out "+dir+" holds an earlier run: "+filepath.Join(seed, "metrics.jsonl")+" has 2 rows (steps 3…4); choose another -out")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "sft_metrics.jsonl"), []byte("{\"step\":1}\n{]\n"), 0o644))
	err = rd.CheckNew("sft_metrics.jsonl")
	require.ErrorIs(t, err, metrics.ErrSyntax)
	assert.ErrorContains(t, err, "holds an unreadable metrics log")

	rd.Release()
	rd.Release()
	again, err := LockRunDir(dir)
	require.NoError(t, err)
	again.Release()
}
