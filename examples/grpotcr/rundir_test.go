package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/runlock"
)

// TestOutInUse: a second run on an -out that a run holds (here through
// another lock of this process) stops before anything is loaded, naming
// the holder's process; the folder is left as it was.
func TestOutInUse(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	held, err := runlock.Acquire(out)
	require.NoError(t, err)
	defer held.Release()
	code, stdout, stderr := runMain(t, "-model", tinyCheckpoint(t), "-train", "testdata/train.jsonl", "-out", out)
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.Equal(t, fmt.Sprintf("grpotcr: -out: runlock: run folder %s is in use by %s: wait for that run to end, stop it, or choose another folder\n", out, held.Owner()), stderr)
	ents, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	assert.Equal(t, runlock.FileName, ents[0].Name())
}

// TestOutHoldsEarlierLog: an -out whose metrics log holds the rows of a
// run that ended before its first checkpoint is refused without
// -resume, before anything is loaded and with the log untouched; -resume
// would start that run over.
func TestOutHoldsEarlierLog(t *testing.T) {
	out := t.TempDir()
	logPath := filepath.Join(out, metricsFile)
	earlier := `{"step":0,"val-core/aime_toy/acc/mean@2":0}` + "\n" + `{"step":1,"critic/score/mean":-1}` + "\n"
	require.NoError(t, os.WriteFile(logPath, []byte(earlier), 0o644))
	code, stdout, stderr := runMain(t, "-model", tinyCheckpoint(t), "-train", "testdata/train.jsonl", "-out", out)
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "grpotcr: metrics: log belongs to another run: "+logPath+" already holds 2 rows (steps 0…1): pass -resume to continue that run, or choose another -out\n", stderr)
	got, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.Equal(t, earlier, string(got))
	assert.NoFileExists(t, filepath.Join(out, runlock.FileName), "released")
}
