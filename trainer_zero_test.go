package agentrl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/safetensors"
	"github.com/agentrl/agentrl/rollout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The sharded-training tests (DataParallel.ZeRO) run the ranks as
// goroutines, as trainer_dp_test.go does; trainer_mpi_test.go runs them
// as processes under mpirun.

// zeroRun trains steps steps on n ranks of a fresh group with d (its
// Comm set per rank) and returns every rank's weights and metrics.
func zeroRun(t *testing.T, n, steps int, cfg agentrl.TrainerConfig, d agentrl.DataParallel) ([][]lm.Param, [][]agentrl.StepMetrics) {
	t.Helper()
	ctx := context.Background()
	params := make([][]lm.Param, n)
	metrics := make([][]agentrl.StepMetrics, n)
	errs := onRanks(t, n, time.Minute, func(r int, comm dist.Comm) error {
		d := d
		d.Comm = comm
		tr, ps := newDPTrainer(t, "transformer", cfg, d, nil)
		for range steps {
			m, err := tr.Step(ctx)
			if err != nil {
				return err
			}
			metrics[r] = append(metrics[r], m)
		}
		params[r] = ps()
		return nil
	})
	require.NoError(t, errors.Join(errs...))
	return params, metrics
}

// sameOnEveryRank checks that every rank holds rank 0's floats.
func sameOnEveryRank(t *testing.T, comm dist.Comm, mine []float32, what string) {
	t.Helper()
	all := make(dist.Float32s, len(mine)*comm.Size())
	require.NoError(t, comm.AllGather(context.Background(), dist.Float32s(mine), all))
	for r := 1; r < comm.Size(); r++ {
		assert.Equal(t, []float32(all[:len(mine)]), []float32(all[r*len(mine):(r+1)*len(mine)]), "rank %d holds rank 0's %s", r, what)
	}
}

// TestZeROMatchesDataParallel: after three steps, two ranks sharding
// the optimizer state (ZeRO-1) or the gradients too (ZeRO-2) hold the
// same model, bit for bit, and plain data parallelism's within float32
// reduction-order error.
//
// The bound: the ranks' gradients are the same floats under every
// stage; with two ranks a sum is one addition, a+b whichever collective
// makes it, so ZeRO-1's reduced gradient is data parallelism's bit for
// bit. Its norm is the square root of the ranks' float64 sums of squares
// over their shards added, not of one sum over the whole gradient: equal
// to float64 rounding, and the clip's float32 scale with it (a last-bit
// difference at worst). ZeRO-2 reduces each micro-batch's gradient as the
// backward makes it and adds the reductions, (a1+b1)+(a2+b2), where data
// parallelism sums (a1+a2)+(b1+b2): float32 rounding of the gradient
// (|Δg| ≲ 1e-8 here), which AdamW with these tests' ε = 1e-2 turns into
// at most 2·|Δg| per step (see TestDataParallelMatchesOneProcess). The
// test allows 1e-6 after three steps, the one-process bound.
func TestZeROMatchesDataParallel(t *testing.T) {
	for _, tc := range []struct {
		name        string
		mini, micro int
	}{
		{"one mini-batch, micro-batches of 2", 0, 2},
		{"two mini-batches of 8", 8, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := dpConfig(tc.mini, tc.micro)
			dp, dpm := zeroRun(t, 2, 3, cfg, agentrl.DataParallel{BucketBytes: 256})
			for _, stage := range []int{agentrl.ShardOptimizer, agentrl.ShardGradients} {
				t.Run(fmt.Sprintf("ZeRO-%d", stage), func(t *testing.T) {
					got, gm := zeroRun(t, 2, 3, cfg, agentrl.DataParallel{BucketBytes: 256, ZeRO: stage})
					var worst float64
					for i := range dp[0] {
						assert.Equal(t, got[0][i].Data, got[1][i].Data, "%s: both ranks hold the same model", dp[0][i].Name)
						d := maxAbsDiff(dp[0][i].Data, got[0][i].Data)
						worst = max(worst, d)
						assert.Less(t, d, 1e-6, "%s: ZeRO-%d's weights are data parallelism's", dp[0][i].Name, stage)
					}
					t.Logf("ZeRO-%d: max |θ(ZeRO) − θ(data parallel)| = %.3g", stage, worst)
					for s := range gm[0] {
						assert.Equal(t, gm[0][s].Map(), gm[1][s].Map(), "step %d: the job's metrics on every rank", s+1)
						tol := 1e-9 // ZeRO-1: the same gradient, its norm summed in another float64 order
						if stage == agentrl.ShardGradients {
							tol = 1e-6 // the gradient's own float32 reduction order
						}
						assert.InDelta(t, dpm[0][s].GradNorm, gm[0][s].GradNorm, tol*dpm[0][s].GradNorm, "step %d's gradient norm", s+1)
						assert.Equal(t, dpm[0][s].Updates, gm[0][s].Updates)
						assert.Equal(t, stage, gm[0][s].ZeRO.Stage)
						assert.Zero(t, gm[0][s].AllReduceBytes, "no gradient all-reduce")
					}
				})
			}
		})
	}
}

// TestZeROMetrics: a step's metrics say what each rank holds and moves.
// The model's P trainable floats are partitioned into units of
// BucketBytes/4 = 64 floats, K = ⌈P/64⌉ of them, 32 per rank; so per
// rank the moments are 2·4·32·K bytes, and every update reduce-scatters
// the 4·64·K bytes of the gradient (at ZeRO-2 once per backward pass, as
// each backward makes it) and all-gathers as many of weights.
func TestZeROMetrics(t *testing.T) {
	cfg := dpConfig(8, 2) // two mini-batches of 8, micro-batches of 2: 2 updates of 2 backward passes per rank
	for _, stage := range []int{agentrl.ShardOptimizer, agentrl.ShardGradients} {
		t.Run(fmt.Sprintf("ZeRO-%d", stage), func(t *testing.T) {
			ps, ms := zeroRun(t, 2, 1, cfg, agentrl.DataParallel{BucketBytes: 256, ZeRO: stage})
			var P int64
			for _, p := range ps[0] {
				P += int64(len(p.Data))
			}
			k := (P + 63) / 64
			m := ms[0][0]
			require.Equal(t, 2, m.Updates)
			backwards := int64(2 * 2)
			assert.Equal(t, 4*P, m.Memory.Weights, "every rank holds the whole weights")
			assert.Equal(t, 8*32*k, m.Memory.Optimizer, "the moments of 32 floats a unit")
			rs := 2 * 4 * 64 * k // two updates
			if stage == agentrl.ShardGradients {
				rs = backwards * 4 * 64 * k
				assert.Equal(t, 4*32*k, m.Memory.Gradients, "the gradient shard only")
				// This model's one layer holds most of its parameters: a
				// backward holds them all at once (policy's
				// TestShardedAdamWMemory shows the layers one at a time).
				assert.Greater(t, m.Memory.GradientsPeak, m.Memory.Gradients)
			} else {
				assert.Equal(t, 4*P, m.Memory.Gradients, "the whole gradient (the reduced shard is freed with the step's last ZeroGrad)")
				assert.Equal(t, 4*P+4*32*k+4*64, m.Memory.GradientsPeak, "at most: the whole gradient, the reduced shard and one unit's staging")
			}
			assert.Equal(t, rs, m.ZeRO.ReduceScatterBytes)
			assert.Equal(t, 2*4*64*k, m.ZeRO.AllGatherBytes)
			assert.Positive(t, m.Memory.Activations)
			mp := m.Map()
			assert.Equal(t, float64(stage), mp["dist/zero_stage"])
			assert.Equal(t, float64(m.Memory.Optimizer), mp["memory/optimizer_bytes"])
			assert.Equal(t, float64(rs), mp["dist/grad_reduce_scatter_bytes"])
		})
	}
	// Alone: the memory of one process, no sharding.
	tr, ps := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{}, nil)
	m, err := tr.Step(context.Background())
	require.NoError(t, err)
	var P int64
	for _, p := range ps() {
		P += int64(len(p.Data))
	}
	assert.Equal(t, agentrl.RankMemory{Weights: 4 * P, Gradients: 4 * P, GradientsPeak: 4 * P, Optimizer: 8 * P, Activations: m.Memory.Activations}, m.Memory)
	assert.NotContains(t, m.Map(), "dist/zero_stage")
}

// TestZeROCheckpoint: two ranks write a ZeRO-2 checkpoint, each its
// shard of the optimizer state in parallel; it resumes at two ranks to
// the uninterrupted job's next step, bit for bit, and at one rank (a
// plain optimizer, which reads the shards whole) to the same weights
// and moments, whose next step on the whole batch is the job's within
// reduction-order error.
func TestZeROCheckpoint(t *testing.T) {
	ctx := context.Background()
	cfg := dpConfig(0, 2)
	root := checkpoint.Root{Dir: t.TempDir()}
	d := agentrl.DataParallel{BucketBytes: 256, ZeRO: agentrl.ShardGradients, AllowWorldSizeChange: true}
	dirs := make([]string, 2)
	saved := make([][]lm.Param, 2)
	next := make([][]lm.Param, 2)
	errs := onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
		d := d
		d.Comm = comm
		tr, ps := newDPTrainer(t, "transformer", cfg, d, nil)
		for range 2 {
			if _, err := tr.Step(ctx); err != nil {
				return err
			}
		}
		var err error
		if dirs[r], err = tr.SaveCheckpoint(ctx, root, 0); err != nil {
			return err
		}
		saved[r] = ps()
		if _, err := tr.Step(ctx); err != nil {
			return err
		}
		next[r] = ps()
		return nil
	})
	require.NoError(t, errors.Join(errs...))
	assert.Equal(t, dirs[0], dirs[1])
	for _, f := range []string{policy.ShardStateIndex, policy.ShardFileName(0, 2), policy.ShardFileName(1, 2), agentrl.CheckpointParamsFile, agentrl.CheckpointStateFile} {
		assert.FileExists(t, filepath.Join(dirs[0], f))
	}
	assert.NoFileExists(t, filepath.Join(dirs[0], policy.StateFileName), "the state is sharded")
	left, err := os.ReadDir(root.Dir)
	require.NoError(t, err)
	assert.Len(t, left, 2, "step-2 and latest, no temporary folder")

	// Two ranks resume (with ZeRO-2 or ZeRO-1: the partition is the
	// same) and take the job's next step.
	for _, stage := range []int{agentrl.ShardGradients, agentrl.ShardOptimizer} {
		resumed := make([][]lm.Param, 2)
		errs = onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
			d := d
			d.Comm, d.ZeRO = comm, stage
			tr, ps := newDPTrainer(t, "transformer", cfg, d, nil)
			if ok, err := tr.Resume(root); err != nil || !ok {
				return errors.Join(err, errors.New("nothing resumed"))
			}
			if _, err := tr.Step(ctx); err != nil {
				return err
			}
			resumed[r] = ps()
			return nil
		})
		require.NoError(t, errors.Join(errs...))
		for r := range 2 {
			for i := range next[r] {
				if stage == agentrl.ShardGradients {
					assert.Equal(t, next[r][i].Data, resumed[r][i].Data, "rank %d %s", r, next[r][i].Name)
				} else {
					assert.Less(t, maxAbsDiff(next[r][i].Data, resumed[r][i].Data), 1e-6, "rank %d %s (ZeRO-1)", r, next[r][i].Name)
				}
			}
		}
	}

	// One rank, unsharded: the same weights; one step on the whole batch.
	one, ps := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{AllowWorldSizeChange: true}, nil)
	require.NoError(t, one.LoadFrom(dirs[0]))
	assert.Equal(t, int64(2), one.Optimizer().Steps(), "two steps of one update")
	for i, p := range ps() {
		assert.Equal(t, saved[0][i].Data, p.Data, "%s: the checkpoint's weights", p.Name)
	}
	_, err = one.Step(ctx)
	require.NoError(t, err)
	for i, p := range ps() {
		assert.Less(t, maxAbsDiff(next[0][i].Data, p.Data), 1e-6, "%s: one process's step is the job's", p.Name)
	}
	// Without AllowWorldSizeChange the job's checkpoint is refused.
	strict, _ := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{}, nil)
	err = strict.LoadFrom(dirs[0])
	require.ErrorIs(t, err, agentrl.ErrCheckpoint)
}

// TestZeROSFT: SFT with ZeRO-2 over two ranks makes data parallelism's
// updates within reduction-order error, and both ranks the same model.
func TestZeROSFT(t *testing.T) {
	ctx := context.Background()
	data := []agentrl.SFTSample{
		{IDs: []int{0, 1, 2, 3}, Mask: []float32{0, 1, 1, 1}},
		{IDs: []int{0, 2}, Mask: []float32{0, 1}},
		{IDs: []int{1, 3, 3}, Mask: []float32{0, 0, 1}},
		{IDs: []int{2, 0, 1, 2, 3}, Mask: []float32{0, 1, 0, 1, 1}},
	}
	cfg := agentrl.SFTConfig{BatchSize: 4, MicroBatchSize: 1, Epochs: 3, Optimizer: policy.AdamWConfig{LR: 0.05, Eps: 1e-2}, MaxGradNorm: 1, Seed: 3}
	run := func(zero int) ([][]float32, [][]agentrl.SFTMetrics) {
		weights := make([][]float32, 2)
		ms := make([][]agentrl.SFTMetrics, 2)
		errs := onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
			m, err := policy.New(policy.Config{
				ModelType: policy.ModelQwen3, VocabSize: 4, HiddenSize: 16, IntermediateSize: 32,
				NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
				MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
			}, 3)
			if err != nil {
				return err
			}
			defer m.Close()
			s, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: m, Data: data, DataParallel: agentrl.DataParallel{Comm: comm, ZeRO: zero, BucketBytes: 512}})
			if err != nil {
				return err
			}
			if err := s.Train(ctx, func(x agentrl.SFTMetrics) error { ms[r] = append(ms[r], x); return nil }); err != nil {
				return err
			}
			for _, p := range m.Params() {
				weights[r] = append(weights[r], p.Data...)
			}
			return nil
		})
		require.NoError(t, errors.Join(errs...))
		return weights, ms
	}
	want, wm := run(0)
	got, gm := run(agentrl.ShardGradients)
	assert.Equal(t, got[0], got[1], "both ranks hold the same model")
	assert.Less(t, maxAbsDiff(want[0], got[0]), 1e-6)
	require.Len(t, gm[0], len(wm[0]))
	for i := range wm[0] {
		assert.InDelta(t, wm[0][i].Loss, gm[0][i].Loss, 1e-6, "step %d", i+1)
		assert.Equal(t, gm[0][i].Map(), gm[1][i].Map())
		assert.Positive(t, gm[0][i].ZeRO.ReduceScatterBytes)
		assert.Less(t, gm[0][i].Memory.Optimizer, wm[0][i].Memory.Optimizer)
	}
}

// TestZeROConfig: a stage out of range, and sharding a policy whose
// training state is not on a backend, are configuration errors; with one
// rank ZeRO is ignored.
func TestZeROConfig(t *testing.T) {
	cfg := dpConfig(0, 0)
	eng := func() agentrl.TrainerParts {
		m := newTabular(banditAlphabet)
		e, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
		require.NoError(t, err)
		return agentrl.TrainerParts{Policy: m, Engine: e, Reward: banditReward, Prompts: banditPrompts(8)}
	}
	for _, tc := range []struct {
		name string
		d    agentrl.DataParallel
		want string
	}{
		{"stage 3", agentrl.DataParallel{Comm: fakeComm{size: 2}, ZeRO: 3}, "TrainerParts.DataParallel.ZeRO 3"},
		{"stage -1", agentrl.DataParallel{ZeRO: -1}, "ZeRO -1"},
		{"a host policy", agentrl.DataParallel{Comm: fakeComm{size: 2}, ZeRO: 1}, "needs a policy that keeps its training state on its backend"},
		{"bf16 weights without ZeRO", agentrl.DataParallel{Comm: fakeComm{size: 2}, ZeROBF16Weights: true}, "ZeROBF16Weights needs ZeRO 1 or 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parts := eng()
			parts.DataParallel = tc.d
			_, err := agentrl.NewTrainer(cfg, parts)
			require.ErrorIs(t, err, agentrl.ErrTrainerConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	tr, _ := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{Comm: dist.Local(nil), ZeRO: 2}, nil)
	_, isSharded := tr.Optimizer().(*policy.ShardedAdamW)
	assert.False(t, isSharded, "one rank: nothing to shard")
}

// TestZeROResumeFromOneRank: a checkpoint written by one process (its
// optimizer state whole, in one file) resumes at two ranks under ZeRO-1
// and ZeRO-2, each rank taking its shard of the moments (resharded on
// load): the weights are the checkpoint's, bit for bit; the moments the
// two ranks then write, each its shard, consolidate to the one
// process's file, bit for bit; and the next step on two ranks is one
// process's next step within reduction-order error (the bound of
// TestDataParallelMatchesOneProcess: 1e-6 after a step).
func TestZeROResumeFromOneRank(t *testing.T) {
	ctx := context.Background()
	cfg := dpConfig(0, 2)
	root := checkpoint.Root{Dir: t.TempDir()}
	one, ps := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{}, nil)
	for range 2 {
		_, err := one.Step(ctx)
		require.NoError(t, err)
	}
	dir, err := one.SaveCheckpoint(ctx, root, 0)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, policy.StateFileName))
	saved := ps()
	_, err = one.Step(ctx)
	require.NoError(t, err)
	next := ps()

	for _, stage := range []int{agentrl.ShardOptimizer, agentrl.ShardGradients} {
		t.Run(fmt.Sprintf("ZeRO-%d", stage), func(t *testing.T) {
			again := checkpoint.Root{Dir: t.TempDir()}
			loaded := make([][]lm.Param, 2)
			stepped := make([][]lm.Param, 2)
			dirs := make([]string, 2)
			errs := onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
				tr, ps := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{Comm: comm, BucketBytes: 256, ZeRO: stage, AllowWorldSizeChange: true}, nil)
				if err := tr.LoadFrom(dir); err != nil {
					return err
				}
				loaded[r] = ps()
				var err error
				if dirs[r], err = tr.SaveCheckpoint(ctx, again, 0); err != nil {
					return err
				}
				if _, err := tr.Step(ctx); err != nil {
					return err
				}
				stepped[r] = ps()
				return nil
			})
			require.NoError(t, errors.Join(errs...))
			for r := range 2 {
				assert.Equal(t, flat(saved), flat(loaded[r]), "rank %d: the checkpoint's weights", r)
			}
			assert.Equal(t, flat(stepped[0]), flat(stepped[1]), "both ranks hold the same model")
			diff := maxAbsDiff(flat(next), flat(stepped[0]))
			t.Logf("ZeRO-%d at 2 ranks from one process's checkpoint: max |Δθ| after a step = %.3g", stage, diff)
			assert.Less(t, diff, 1e-6, "the next step is one process's")

			// The two ranks' shards, consolidated, are the one process's
			// moments and step.
			assert.FileExists(t, filepath.Join(dirs[0], policy.ShardFileName(1, 2)))
			var buf bytes.Buffer
			require.NoError(t, policy.ConsolidateState(dirs[0], &buf))
			got, err := safetensors.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			require.NoError(t, err)
			want, err := safetensors.Open(filepath.Join(dir, policy.StateFileName))
			require.NoError(t, err)
			defer want.Close()
			assert.Equal(t, want.Metadata()["step"], got.Metadata()["step"])
			require.Len(t, got.Tensors(), len(want.Tensors()))
			for _, ti := range want.Tensors() {
				w, err := want.Float32(ti.Name)
				require.NoError(t, err)
				g, err := got.Float32(ti.Name)
				require.NoError(t, err, ti.Name)
				assert.Equal(t, w, g, ti.Name)
			}
		})
	}
}

// hfFleet is an inference fleet of one server shared by the ranks, as
// a real one would be: Publish writes the weights in the Hugging Face
// layout (config.json and model.safetensors) and the server loads that
// folder with policy.Load and samples from it, tagging its generations
// with the version.
type hfFleet struct {
	dir string

	mu      sync.RWMutex
	server  *policy.Model
	version int
}

func (f *hfFleet) Publish(_ context.Context, version int, w lm.Saver) error {
	dir := filepath.Join(f.dir, strconv.Itoa(version))
	if err := w.Save(dir, lm.SaveOptions{}); err != nil {
		return err
	}
	m, err := policy.Load(dir, policy.WithDecoder(alphaTokenizer{banditAlphabet}.Decode))
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.server != nil {
		_ = f.server.Close()
	}
	f.server, f.version = m, version
	return nil
}

func (f *hfFleet) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.server == nil {
		return nil, errors.New("nothing published yet")
	}
	gens, err := f.server.Generate(ctx, reqs)
	for i := range gens {
		gens[i].WeightVersion = strconv.Itoa(f.version)
	}
	return gens, err
}

// serverParams are the served model's weights.
func (f *hfFleet) serverParams() []lm.Param {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.server.Params()
}

// TestZeROPublishesFullModel: a ZeRO-2 job's publications to a fleet
// are the whole model: the server that loads the published Hugging Face
// folder after each of two steps holds the trainer's every weight, bit
// for bit (rank 0 publishes; both ranks sample from the server).
func TestZeROPublishesFullModel(t *testing.T) {
	ctx := context.Background()
	cfg := dpConfig(0, 2)
	f := &hfFleet{dir: t.TempDir()}
	t.Cleanup(func() {
		if f.server != nil {
			_ = f.server.Close()
		}
	})
	weights := make([][]lm.Param, 2)
	errs := onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
		m, err := policy.New(policy.Config{
			ModelType: policy.ModelQwen3, VocabSize: 4, HiddenSize: 16, IntermediateSize: 32,
			NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
			MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
		}, 3, policy.WithDecoder(alphaTokenizer{banditAlphabet}.Decode))
		if err != nil {
			return err
		}
		defer m.Close()
		eng, err := rollout.NewEngine(rollout.Config{Sampler: f, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
		if err != nil {
			return err
		}
		tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(8), Sync: f,
			DataParallel: agentrl.DataParallel{Comm: comm, BucketBytes: 256, ZeRO: agentrl.ShardGradients}})
		if err != nil {
			return err
		}
		defer tr.Close()
		for range 2 {
			if _, err := tr.Step(ctx); err != nil {
				return err
			}
		}
		weights[r] = m.Params()
		return nil
	})
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, 2, f.version, "published after each step")
	for _, name := range []string{"config.json", "model.safetensors"} {
		assert.FileExists(t, filepath.Join(f.dir, "2", name))
	}
	served := map[string][]float32{}
	for _, p := range f.serverParams() {
		served[p.Name] = p.Data
	}
	require.Len(t, served, len(weights[0]))
	for r := range 2 {
		for _, p := range weights[r] {
			assert.Equal(t, p.Data, served[p.Name], "rank %d: %s is the server's", r, p.Name)
		}
	}
}

// TestZeROLoRA: with LoRA the trainable parameters are the adapters'
// only, and so is what ZeRO shards: after three steps ZeRO-2's adapters
// are data parallelism's within the bound of TestZeROMatchesDataParallel,
// the same on both ranks, and each rank holds half of the adapters'
// moments.
func TestZeROLoRA(t *testing.T) {
	cfg := dpConfig(0, 2)
	cfg.LoRA = &policy.LoRAConfig{Rank: 2, TargetModules: []string{policy.LoRAAllLinear}}
	dp, _ := zeroRun(t, 2, 3, cfg, agentrl.DataParallel{BucketBytes: 256})
	got, gm := zeroRun(t, 2, 3, cfg, agentrl.DataParallel{BucketBytes: 256, ZeRO: agentrl.ShardGradients})
	var adapters int64
	var worst float64
	for i, p := range dp[0] {
		adapters += int64(len(p.Data))
		assert.Equal(t, got[0][i].Data, got[1][i].Data, "%s: both ranks hold the same adapter", p.Name)
		worst = max(worst, maxAbsDiff(p.Data, got[0][i].Data))
	}
	t.Logf("%d adapter weights: max |θ(ZeRO-2) − θ(data parallel)| = %.3g", adapters, worst)
	assert.Less(t, worst, 1e-6)
	require.NotEmpty(t, dp[0])
	assert.Contains(t, dp[0][0].Name, "lora", "the trained parameters are the adapters'")
	k := (adapters + 63) / 64 // 64-float units, 32 floats a rank
	assert.Equal(t, 8*32*k, gm[0][2].Memory.Optimizer)
}
