//go:build agentrl_mpi && cgo

package policy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/dist"
)

// TestShardedAdamWMemoryMPI is TestShardedAdamWMemory with the ranks as
// processes under mpirun (.ci/run runs mpirun -np 2 policy.test
// -test.run MPI): each rank counts its own backend's allocations and
// holds 1/N of one process's optimizer state (and at stage 2 of its
// gradients and of all it holds between steps), up to the last unit's
// padding. Without a launcher it skips.
func TestShardedAdamWMemoryMPI(t *testing.T) {
	env, err := dist.FromEnviron()
	require.NoError(t, err)
	if env.Size < 2 {
		t.Skip("not under an MPI launcher of several ranks: run mpirun -np 2 on this test binary")
	}
	ctx := context.Background()
	comm, err := dist.Open(ctx, dist.Options{Env: &env, Timeout: 2 * time.Minute})
	require.NoError(t, err)
	defer func() { require.NoError(t, comm.Close()) }()
	cfg := AdamWConfig{LR: 1e-3}
	one, P := measureOneProcess(t, cfg)
	for _, stage := range []int{ShardOptimizer, ShardGradients} {
		t.Run(fmt.Sprintf("stage %d", stage), func(t *testing.T) {
			var lay ShardLayout
			got := measureMemory(t, func(m *Model) (Optimizer, error) {
				s, err := m.NewShardedAdamW(cfg, dist.Buffers(comm, m.Backend()), ShardOptions{Stage: stage, UnitElements: 512, Overlap: true})
				if err == nil {
					lay = s.Layout()
				}
				return s, err
			})
			require.Equal(t, comm.Size(), lay.Ranks)
			checkRankMemory(t, stage, lay, one, got, P, comm.Rank())
		})
	}
}
