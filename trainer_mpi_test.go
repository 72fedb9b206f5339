//go:build agentrl_mpi && cgo

package agentrl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/rollout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The data-parallel tests over MPI: under an MPI launcher (.ci/run runs
// mpirun -np 2 agentrl.test -test.run MPI) TestMain opens the process's
// one MPI communicator for them; without one they skip.

var mpiComm dist.Comm

func TestMain(m *testing.M) {
	env, err := dist.FromEnviron()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if os.Getenv(zeroScenarioVar) != "" && env.Size > 1 {
		os.Exit(playZeROScenario(env))
	}
	if env.Size > 1 {
		if mpiComm, err = dist.Open(context.Background(), dist.Options{Env: &env, Timeout: 2 * time.Minute}); err != nil {
			fmt.Fprintln(os.Stderr, "agentrl.test: opening MPI:", err)
			os.Exit(2)
		}
	}
	code := m.Run()
	if mpiComm != nil {
		if err := mpiComm.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "agentrl.test: closing MPI:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func needMPI(t *testing.T) dist.Comm {
	t.Helper()
	if mpiComm == nil {
		t.Skip("not under an MPI launcher: run mpirun -np 2 on this test binary")
	}
	return mpiComm
}

// TestDataParallelMPI: under mpirun, a data-parallel step over a batch
// split among the ranks — the tiny transformer on the CPU backend, its
// gradients summed by MPI — gives the same weights on every rank, bit
// for bit, and one process's weights over the whole batch (which every
// rank also computes, alone) within the float32 summation-order bound
// of TestDataParallelMatchesOneProcess (1e-6 after 3 steps).
func TestDataParallelMPI(t *testing.T) {
	comm := needMPI(t)
	ctx := context.Background()
	const steps = 3
	// 4 groups per rank per step: the job's batch grows with the ranks.
	cfg := dpConfig(0, 2)
	cfg.PromptsPerStep = 4 * comm.Size()
	one, oneParams := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{}, nil)
	for range steps {
		_, err := one.Step(ctx)
		require.NoError(t, err)
	}
	tr, params := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{Comm: comm, BucketBytes: 1024}, nil)
	var last agentrl.StepMetrics
	for range steps {
		var err error
		last, err = tr.Step(ctx)
		require.NoError(t, err)
	}
	mine, ref := flat(params()), flat(oneParams())
	diff := maxAbsDiff(ref, mine)
	t.Logf("rank %d of %d: max |θ(ranks) − θ(one process)| = %.3g over %d weights after %d steps; %d bytes all-reduced in step %d (%.2g s)",
		comm.Rank(), comm.Size(), diff, len(mine), steps, last.AllReduceBytes, steps, last.AllReduceSeconds)
	assert.Less(t, diff, 1e-6)

	all := make(dist.Float32s, len(mine)*comm.Size())
	require.NoError(t, comm.AllGather(ctx, dist.Float32s(mine), all))
	for r := 1; r < comm.Size(); r++ {
		assert.Equal(t, []float32(all[:len(mine)]), []float32(all[r*len(mine):(r+1)*len(mine)]), "rank %d holds rank 0's weights", r)
	}
}

// TestDataParallelMPIWorldSize: a checkpoint of the job records its
// world size; one process refuses it, and the job refuses one process's
// checkpoint, on every rank.
func TestDataParallelMPIWorldSize(t *testing.T) {
	comm := needMPI(t)
	ctx := context.Background()
	cfg := dpConfig(0, 0)
	cfg.PromptsPerStep = 4 * comm.Size()
	// A folder every rank sees: rank 0's, broadcast.
	dirBuf := make(dist.Bytes, 4096)
	if comm.Rank() == 0 {
		copy(dirBuf, t.TempDir())
	}
	require.NoError(t, comm.Broadcast(ctx, dirBuf, 0))
	shared := string(dirBuf[:indexByte(dirBuf, 0)])
	root := checkpoint.Root{Dir: filepath.Join(shared, "job")}

	tr, _ := newDPTrainer(t, "tabular", cfg, agentrl.DataParallel{Comm: comm}, nil)
	_, err := tr.Step(ctx)
	require.NoError(t, err)
	dir, err := tr.SaveCheckpoint(ctx, root, 0)
	require.NoError(t, err)

	alone, _ := newDPTrainer(t, "tabular", cfg, agentrl.DataParallel{}, nil)
	err = alone.LoadFrom(dir)
	require.ErrorIs(t, err, agentrl.ErrCheckpoint)
	assert.Contains(t, err.Error(), "written by a job of "+strconv.Itoa(comm.Size())+" rank(s), this one has 1")

	single := filepath.Join(shared, "single-"+strconv.Itoa(comm.Rank()))
	require.NoError(t, alone.SaveTo(single))
	again, _ := newDPTrainer(t, "tabular", cfg, agentrl.DataParallel{Comm: comm}, nil)
	err = again.LoadFrom(single)
	require.ErrorIs(t, err, agentrl.ErrCheckpoint)
	assert.Contains(t, err.Error(), "written by a job of 1 rank(s), this one has "+strconv.Itoa(comm.Size()))
	require.NoError(t, comm.Barrier(ctx)) // rank 0's folder outlives the others' reads
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return len(b)
}

// TestDataParallelMPIOverhead measures, when AGENTRL_DIST_BENCH is set,
// a step of an examples/arith-sized model (a Qwen3 of hidden 128, 2
// layers, over 256 byte tokens: 426,752 parameters) with 8 prompts × 8
// samples of 16 tokens, alone on this rank and as one rank of the job,
// each rank with the same CPU workers (GOMAXPROCS; run mpirun with
// -x GOMAXPROCS=… to share the cores), and prints the step's time, the
// all-reduce's part and the bytes each rank moved. The job's batch is
// one process's: each of N ranks rolls out 8/N prompts.
func TestDataParallelMPIOverhead(t *testing.T) {
	comm := needMPI(t)
	if os.Getenv("AGENTRL_DIST_BENCH") == "" {
		t.Skip("set AGENTRL_DIST_BENCH=1 to measure")
	}
	ctx := context.Background()
	build := func(d agentrl.DataParallel) *agentrl.Trainer {
		m, err := policy.New(policy.Config{
			ModelType: policy.ModelQwen3, VocabSize: 256, HiddenSize: 128, IntermediateSize: 384,
			NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 32,
			MaxPositionEmbeddings: 64, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
		}, 1, policy.WithDecoder(alphaTokenizer{byteAlphabet()}.Decode))
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{byteAlphabet()}, MaxResponseTokens: 16})
		require.NoError(t, err)
		cfg := agentrl.GRPOTCR()
		cfg.PromptsPerStep, cfg.SamplesPerPrompt, cfg.MiniBatchSize, cfg.MicroBatchSize = 8, 8, 0, 8
		cfg.Sampling = lm.SampleParams{Temperature: 1, MaxNewTokens: 16}
		cfg.Overlong = nil
		prompts := make([]agentrl.Prompt, 64)
		for i := range prompts {
			prompts[i] = agentrl.Prompt{ID: "p", Tokens: []int{'0' + i%10, '+', '1', '='}}
		}
		tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: prompts, DataParallel: d})
		require.NoError(t, err)
		return tr
	}
	measure := func(tr *agentrl.Trainer) (step, train, wait, allreduce float64, bytes int64) {
		const warm, n = 1, 5
		for i := range warm + n {
			m, err := tr.Step(ctx)
			require.NoError(t, err)
			if i >= warm {
				step += m.StepSeconds / n
				train += m.TrainSeconds / n
				wait += m.AllReduceWaitSeconds / n
				allreduce += m.AllReduceSeconds / n
				bytes = m.AllReduceBytes
			}
		}
		return
	}
	var s1, t1 float64
	if comm.Rank() == 0 {
		s1, t1, _, _, _ = measure(build(agentrl.DataParallel{}))
	}
	require.NoError(t, comm.Barrier(ctx))
	s2, t2, wait, ar, bytes := measure(build(agentrl.DataParallel{Comm: comm}))
	if comm.Rank() == 0 {
		t.Logf("one process, 64 trajectories: step %.3f s (update %.3f s)", s1, t1)
		t.Logf("%d ranks, 64/%d trajectories each: step %.3f s (update %.3f s); waiting for the slowest rank %.4f s; gradient all-reduce %.5f s = %.3f%% of the step, %d bytes per rank per step (%.2f GB/s algorithm bandwidth)",
			comm.Size(), comm.Size(), s2, t2, wait, ar, 100*ar/s2, bytes, float64(bytes)/ar/1e9)
	}
}
