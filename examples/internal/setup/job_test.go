package setup

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/policy"
)

// rankComm is a communicator that only says its rank.
type rankComm struct {
	dist.Comm
	rank int
}

func (c rankComm) Rank() int    { return c.rank }
func (c rankComm) Close() error { return nil }

func TestJob(t *testing.T) {
	var out, errs bytes.Buffer
	alone := &Job{Comm: dist.Local(nil), Env: dist.Env{Launcher: dist.Alone, Size: 1}}
	o, e := alone.Output(&out, &errs)
	assert.Same(t, &out, o)
	assert.Same(t, &errs, e)
	dir, err := alone.Dir("runs/x")
	require.NoError(t, err)
	assert.Equal(t, "runs/x", dir, "alone, the folder is the program's")
	assert.Equal(t, alone.Comm, alone.DataParallel().Comm)

	other := &Job{Comm: rankComm{rank: 1}, Env: dist.Env{Launcher: dist.OpenMPI, Rank: 1, Size: 2}}
	o, e = other.Output(&out, &errs)
	assert.Equal(t, io.Discard, o)
	assert.Equal(t, io.Discard, e)
	scratch, err := other.Dir("runs/x")
	require.NoError(t, err)
	assert.NotEqual(t, "runs/x", scratch, "rank 1 writes elsewhere")
	again, err := other.Dir("runs/y")
	require.NoError(t, err)
	assert.Equal(t, scratch, again, "one scratch folder")
	require.NoError(t, other.Close())
	_, err = os.Stat(scratch)
	assert.True(t, os.IsNotExist(err), "Close removes it")
}

func TestJoinJobAlone(t *testing.T) {
	for _, v := range []string{"RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	dev, err := device.Open(context.Background(), device.Config{Device: device.Spec{Kind: device.CPU}}, policy.Config{})
	require.NoError(t, err)
	var errs bytes.Buffer
	j, err := JoinJob(context.Background(), dev, &errs)
	require.NoError(t, err)
	assert.Equal(t, 1, j.Comm.Size())
	assert.True(t, j.Leader())
	assert.Empty(t, errs.String(), "a job of one says nothing")
	require.NoError(t, j.Close())
}
