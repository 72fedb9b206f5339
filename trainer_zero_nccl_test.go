//go:build agentrl_cuda && cgo

package agentrl_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZeRONCCL is TestZeROMPI on GPUs: under torchrun (torchrun
// --no-python --nproc-per-node 2 agentrl.test -test.run ZeRONCCL) each
// rank trains the 6-layer tiny transformer on its own GPU in fp32, its
// gradients reduce-scattered and its weights all-gathered by NCCL in
// the device's memory. After three steps ZeRO-1 and ZeRO-2 hold plain
// data parallelism's weights within the bound of
// TestZeROMatchesDataParallel, the same on every rank, and each rank
// 1/N of data parallelism's optimizer state (at ZeRO-2, of its
// gradients too), up to the last unit's padding.
func TestZeRONCCL(t *testing.T) {
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
	n := comm.Size()
	cfg := dpConfig(0, 2)
	cfg.PromptsPerStep = 4 * n
	dp, dpParams := newDPTrainer(t, "deep", cfg, agentrl.DataParallel{Comm: comm, BucketBytes: 1024}, nil, policy.WithBackend(g))
	var plain agentrl.StepMetrics
	for range steps {
		plain, err = dp.Step(ctx)
		require.NoError(t, err)
	}
	ref := flat(dpParams())
	for _, stage := range []int{agentrl.ShardOptimizer, agentrl.ShardGradients} {
		t.Run(fmt.Sprintf("ZeRO-%d", stage), func(t *testing.T) {
			tr, params := newDPTrainer(t, "deep", cfg, agentrl.DataParallel{Comm: comm, BucketBytes: 1024, ZeRO: stage}, nil, policy.WithBackend(g))
			var last agentrl.StepMetrics
			for range steps {
				var err error
				last, err = tr.Step(ctx)
				require.NoError(t, err)
			}
			mine := flat(params())
			diff := maxAbsDiff(ref, mine)
			sameOnEveryRank(t, comm, mine, "weights")
			assert.Less(t, diff, 1e-6)
			lay := tr.Optimizer().(*policy.ShardedAdamW).Layout()
			padding := int64(lay.Units*lay.Unit - lay.Elements)
			mem := last.Memory
			assert.Equal(t, plain.Memory.Optimizer+8*padding, int64(n)*mem.Optimizer, "1/N of the optimizer state")
			if stage == agentrl.ShardGradients {
				assert.Equal(t, plain.Memory.Gradients+4*padding, int64(n)*mem.Gradients, "1/N of the gradients")
			}
			t.Logf("rank %d of %d, ZeRO-%d over NCCL: max |θ(ZeRO) − θ(data parallel)| = %.3g; optimizer %d B per rank (data parallel %d B); %d B reduce-scattered in %.2g s, %d B all-gathered in %.2g s in step %d",
				comm.Rank(), n, stage, diff, mem.Optimizer, plain.Memory.Optimizer,
				last.ZeRO.ReduceScatterBytes, last.ZeRO.ReduceScatterSeconds, last.ZeRO.AllGatherBytes, last.ZeRO.AllGatherSeconds, steps)
		})
	}
}
