//go:build agentrl_cuda && cgo

package agentrl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDataParallelNCCL is TestDataParallelMPI on GPUs: under torchrun
// (torchrun --no-python --nproc-per-node 2 agentrl.test -test.run
// DataParallelNCCL, with a binary built with -tags agentrl_cuda only),
// each rank trains the tiny transformer on its own GPU in fp32, its
// training state on the device and its gradients summed by NCCL on the
// device's memory; the ranks end with the same weights, bit for bit, and
// with one process's (every rank also trains alone on its GPU) within the
// bound of TestDataParallelMatchesOneProcess.
func TestDataParallelNCCL(t *testing.T) {
	env, err := dist.FromEnviron()
	require.NoError(t, err)
	if env.Size < 2 {
		t.Skip("not under a launcher: torchrun --no-python --nproc-per-node 2 on this test binary")
	}
	ctx := context.Background()
	g, err := gpu.New(ctx, gpu.WithDevice(env.LocalRank), gpu.WithPrecision(gpu.FP32))
	if errors.Is(err, gpu.ErrNoDriver) || errors.Is(err, gpu.ErrNoDevice) {
		t.Skip("no GPU:", err)
	}
	require.NoError(t, err)
	defer g.Close()
	comm, err := dist.Open(ctx, dist.Options{Env: &env, Backend: g, Timeout: 2 * time.Minute})
	require.NoError(t, err)
	defer comm.Close()
	_, ok := comm.(dist.DeviceComm)
	require.True(t, ok, "NCCL on the GPU's memory")

	const steps = 3
	cfg := dpConfig(0, 2)
	cfg.PromptsPerStep = 4 * comm.Size()
	one, oneParams := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{}, nil, policy.WithBackend(g))
	for range steps {
		_, err := one.Step(ctx)
		require.NoError(t, err)
	}
	tr, params := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{Comm: comm, BucketBytes: 1024}, nil, policy.WithBackend(g))
	var last agentrl.StepMetrics
	for range steps {
		last, err = tr.Step(ctx)
		require.NoError(t, err)
	}
	mine, ref := flat(params()), flat(oneParams())
	diff := maxAbsDiff(ref, mine)
	t.Logf("rank %d of %d: max |θ(ranks) − θ(one process)| = %.3g over %d weights; %d bytes all-reduced in step %d (%.2g s)",
		comm.Rank(), comm.Size(), diff, len(mine), last.AllReduceBytes, steps, last.AllReduceSeconds)
	assert.Less(t, diff, 1e-6)
	all := make(dist.Float32s, len(mine)*comm.Size())
	require.NoError(t, comm.AllGather(ctx, dist.Float32s(mine), all))
	for r := 1; r < comm.Size(); r++ {
		assert.Equal(t, []float32(all[:len(mine)]), []float32(all[r*len(mine):(r+1)*len(mine)]), "rank %d holds rank 0's weights", r)
	}
}
