package agentrl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/eval"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The data-parallel tests run the ranks of a job as goroutines of the
// test (dist.NewGroup), each with its own model and trainer: the same
// code as ranks in processes under mpirun (trainer_mpi_test.go runs it
// there), with collectives through shared memory.

// onRanks runs f on each of n ranks of a fresh group and returns their
// errors.
func onRanks(t *testing.T, n int, timeout time.Duration, f func(r int, comm dist.Comm) error) []error {
	t.Helper()
	comms, err := dist.NewGroup(context.Background(), n, dist.GroupOptions{Timeout: timeout})
	require.NoError(t, err)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r, comms[r])
		}()
	}
	wg.Wait()
	for _, c := range comms {
		_ = c.Close()
	}
	return errs
}

// dpModel is the model a data-parallel test trains.
type dpModel interface {
	lm.Trainable
	lm.Sampler
}

// newDPTrainer wires the bandit to model kind ("transformer": the tiny
// Qwen3 of trainer_model_test.go, whose training state lives on its
// backend, policy.DeviceAdamW; "deep": the same with 6 layers, whose
// layers hold most of the parameters; "tabular": AdamW over host
// Params), with the data-parallel settings d.
func newDPTrainer(t *testing.T, kind string, cfg agentrl.TrainerConfig, d agentrl.DataParallel, mlog agentrl.MetricsSink, opts ...policy.ModelOption) (*agentrl.Trainer, func() []lm.Param) {
	t.Helper()
	var m dpModel
	var params func() []lm.Param
	switch kind {
	case "transformer", "deep":
		layers := 1
		if kind == "deep" {
			layers = 6
		}
		pm, err := policy.New(policy.Config{
			ModelType: policy.ModelQwen3, VocabSize: 4, HiddenSize: 16, IntermediateSize: 32,
			NumHiddenLayers: layers, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
			MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
		}, 3, append([]policy.ModelOption{policy.WithDecoder(alphaTokenizer{banditAlphabet}.Decode)}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { pm.Close() })
		m = pm
	default:
		m = newTabular(banditAlphabet)
	}
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(8), Metrics: mlog, DataParallel: d})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Close() })
	params = func() []lm.Param {
		ps, err := tr.Optimizer().Params()
		require.NoError(t, err)
		out := make([]lm.Param, len(ps))
		for i, p := range ps {
			out[i] = lm.Param{Name: p.Name, Data: append([]float32(nil), p.Data...)}
		}
		return out
	}
	return tr, params
}

// dpConfig is the bandit over 4 prompts × 4 samples a step.
func dpConfig(mini, micro int) agentrl.TrainerConfig {
	c := banditConfig()
	c.PromptsPerStep, c.SamplesPerPrompt = 4, 4
	c.MiniBatchSize, c.MicroBatchSize = mini, micro
	c.Optimizer.LR, c.Optimizer.Eps = 0.02, 1e-2 // see TestDataParallelMatchesOneProcess
	return c
}

// flat concatenates parameters.
func flat(ps []lm.Param) []float32 {
	var out []float32
	for _, p := range ps {
		out = append(out, p.Data...)
	}
	return out
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// TestDataParallelMatchesOneProcess: two ranks, each training its two
// groups of every step's four, end with the same weights, bit for bit,
// and with one process's weights over the whole batch up to the float32
// rounding of the gradient sum's order.
//
// The bound: one process accumulates the micro-batches' gradients as
// ((g0+g1)+g2)+g3, the ranks as (g0+g1)+(g2+g3); the two sums differ by
// a few units of 2⁻²⁴ of the terms' magnitude (|Δg| ≲ 1e-8 here). AdamW
// turns g into the update lr·m̂/(√v̂+ε), whose sensitivity to g is at
// most about lr/ε: with torch's ε = 1e-8 a gradient element that is
// zero up to rounding (|g| ~ ε) moves by up to lr·(1/2) either way, so
// the weights of one process and of two ranks differ by ~1e-3 there — a
// property of Adam under any change of summation order, not of the
// all-reduce. These tests take ε = 1e-2, where lr/ε = 2: 3 steps move
// the weights apart by at most 3·2·1e-8 plus their own rounding (2⁻²³
// at |θ| ≈ 1), and the test allows 1e-6. (The tabular model meets the
// bound with any ε: its gradients have no such elements.) The sampled
// responses are the same — each request is seeded by its place in the
// step's batch, whichever rank rolls it out — so the rewards, advantages
// and metrics are one process's.
func TestDataParallelMatchesOneProcess(t *testing.T) {
	for _, tc := range []struct {
		name        string
		kind        string
		mini, micro int
	}{
		{"transformer (device optimizer), one mini-batch, micro-batches of 2", "transformer", 0, 2},
		{"transformer, two mini-batches of 8", "transformer", 8, 2},
		{"tabular (AdamW over host params), two mini-batches", "tabular", 8, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const steps = 3
			ctx := context.Background()
			cfg := dpConfig(tc.mini, tc.micro)
			one, oneParams := newDPTrainer(t, tc.kind, cfg, agentrl.DataParallel{}, nil)
			var want []agentrl.StepMetrics
			for range steps {
				m, err := one.Step(ctx)
				require.NoError(t, err)
				want = append(want, m)
			}
			got := make([][]agentrl.StepMetrics, 2)
			params := make([][]lm.Param, 2)
			errs := onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
				// Small buckets: several all-reduces a step, tensors split
				// across buckets.
				tr, ps := newDPTrainer(t, tc.kind, cfg, agentrl.DataParallel{Comm: comm, BucketBytes: 256}, nil)
				for range steps {
					m, err := tr.Step(ctx)
					if err != nil {
						return err
					}
					got[r] = append(got[r], m)
				}
				params[r] = ps()
				return nil
			})
			require.NoError(t, errors.Join(errs...))
			ref := oneParams()
			for i := range ref {
				assert.Equal(t, params[0][i].Data, params[1][i].Data, "%s: rank 0 and rank 1 hold the same weights", ref[i].Name)
				assert.Less(t, maxAbsDiff(ref[i].Data, params[0][i].Data), 1e-6, "%s: the ranks' weights are one process's", ref[i].Name)
			}
			for s := range steps {
				w, g0, g1 := want[s], got[0][s], got[1][s]
				assert.Equal(t, g0.Map(), g1.Map(), "step %d: every rank reports the job's metrics", s+1)
				assert.Equal(t, w.Trajectories, g0.Trajectories)
				assert.Equal(t, w.KeptGroups, g0.KeptGroups)
				assert.Equal(t, w.GenBatches, g0.GenBatches)
				assert.Equal(t, w.Updates, g0.Updates)
				assert.InDelta(t, w.RewardMean, g0.RewardMean, 1e-12, "step %d: the same responses", s+1)
				assert.InDelta(t, w.RewardStd, g0.RewardStd, 1e-12)
				assert.InDelta(t, w.Acc, g0.Acc, 1e-12)
				assert.InDelta(t, w.ResponseLenMean, g0.ResponseLenMean, 1e-12)
				assert.InDelta(t, w.GradNorm, g0.GradNorm, 1e-5*w.GradNorm)
				assert.InDelta(t, w.Loss, g0.Loss, 1e-6)
				assert.Equal(t, 2, g0.WorldSize)
				assert.Positive(t, g0.AllReduceBytes)
				require.NotEmpty(t, w.Mismatch)
				assert.Len(t, g0.Mismatch, len(w.Mismatch), "step %d: the mismatch of the whole batch", s+1)
				for k, v := range w.Mismatch {
					assert.InDelta(t, v, g0.Mismatch[k], 1e-6, "step %d: %s over every rank's rows", s+1, k)
				}
			}
			ps := ref
			var n int64
			for _, p := range ps {
				n += int64(len(p.Data))
			}
			updates := int64(want[0].Updates)
			assert.Equal(t, 4*n*updates, got[0][0].AllReduceBytes, "4 bytes per parameter per update")
		})
	}
}

// TestDataParallelRankZeroLogs: every rank computes the job's metrics,
// rank 0 alone writes them and tells its Recorder.
func TestDataParallelRankZeroLogs(t *testing.T) {
	ctx := context.Background()
	logs := make([]*bytes.Buffer, 2)
	recs := []*recorder{{}, {}}
	errs := onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
		logs[r] = &bytes.Buffer{}
		tr, _ := newDPTrainer(t, "tabular", dpConfig(0, 0), agentrl.DataParallel{Comm: comm}, metrics.NewLogger(logs[r]))
		return tr.Run(ctx, agentrl.RunConfig{Steps: 2, Recorder: recs[r]})
	})
	require.NoError(t, errors.Join(errs...))
	rows, err := metrics.Read(logs[0])
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, 2.0, rows[0].Values["dist/world_size"])
	assert.Equal(t, 16.0, rows[0].Values["train/trajectories"], "the job's 4 × 4 trajectories")
	assert.Contains(t, rows[0].Values, "timing_s/grad_allreduce")
	assert.Contains(t, rows[0].Values, "timing_s/grad_wait")
	assert.Zero(t, logs[1].Len(), "rank 1 writes nothing")
	assert.Equal(t, [][2]int{{0, 2}}, recs[0].inits)
	assert.Len(t, recs[0].records, 2)
	assert.Empty(t, recs[1].inits, "rank 1 records nothing")
	assert.Empty(t, recs[1].records)
}

func TestDataParallelConfig(t *testing.T) {
	two := fakeComm{size: 2}
	for _, tc := range []struct {
		name string
		edit func(c *agentrl.TrainerConfig)
		want string
	}{
		{"prompts not a multiple of the ranks", func(c *agentrl.TrainerConfig) { c.PromptsPerStep = 3 }, "PromptsPerStep: 3 is not a multiple of the 2 ranks"},
		{"mini-batch of one group", func(c *agentrl.TrainerConfig) { c.MiniBatchSize = 4 }, "MiniBatchSize: 4 trajectories: with 2 ranks each mini-batch must hold a multiple of 2 whole groups of 4"},
		{"mini-batch cutting a group", func(c *agentrl.TrainerConfig) { c.MiniBatchSize = 2 }, "MiniBatchSize: 2 trajectories"},
		{"micro-batch not dividing a rank's share", func(c *agentrl.TrainerConfig) {
			c.PromptsPerStep, c.SamplesPerPrompt, c.MiniBatchSize, c.MicroBatchSize = 4, 6, 12, 4
		}, "MicroBatchSize: 4 does not divide the 6 trajectories each of the 2 ranks trains"},
		{"dynamic sampling ahead of training", func(c *agentrl.TrainerConfig) {
			c.DynamicSampling, c.MaxStaleness = &agentrl.DynamicSamplingConfig{}, 1
		}, "DynamicSampling: with MaxStaleness 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := dpConfig(0, 0)
			tc.edit(&cfg)
			m := newTabular(banditAlphabet)
			eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
			require.NoError(t, err)
			parts := agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(8), DataParallel: agentrl.DataParallel{Comm: two}}
			if cfg.MaxStaleness > 0 {
				parts.Sync = &testFleet{model: m, dir: t.TempDir()}
			}
			_, err = agentrl.NewTrainer(cfg, parts)
			require.ErrorIs(t, err, agentrl.ErrTrainerConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// The same configuration with one rank is fine, and a micro-batch
	// above a rank's share of a mini-batch is that share.
	_, _ = newDPTrainer(t, "tabular", dpConfig(4, 0), agentrl.DataParallel{Comm: fakeComm{size: 1}}, nil)
	_, _ = newDPTrainer(t, "tabular", dpConfig(8, 8), agentrl.DataParallel{Comm: fakeComm{size: 2}}, nil)
}

// fakeComm is a communicator whose collectives fail: enough for the
// checks of NewTrainer, which runs none.
type fakeComm struct{ size int }

func (f fakeComm) Rank() int { return 0 }
func (f fakeComm) Size() int { return f.size }
func (fakeComm) AllReduce(context.Context, dist.Buf, dist.Op) error {
	return errors.New("fake")
}
func (fakeComm) ReduceScatter(context.Context, dist.Buf, dist.Buf, dist.Op) error {
	return errors.New("fake")
}
func (fakeComm) AllGather(context.Context, dist.Buf, dist.Buf) error { return errors.New("fake") }
func (fakeComm) Broadcast(context.Context, dist.Buf, int) error      { return errors.New("fake") }
func (fakeComm) Barrier(context.Context) error                       { return errors.New("fake") }
func (fakeComm) Close() error                                        { return nil }

// TestDataParallelRanksMustAgree: ranks given different seeds fail at
// the first step, on every rank, naming the setting.
func TestDataParallelRanksMustAgree(t *testing.T) {
	errs := onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
		cfg := dpConfig(0, 0)
		cfg.Seed += uint64(r)
		tr, _ := newDPTrainer(t, "tabular", cfg, agentrl.DataParallel{Comm: comm}, nil)
		_, err := tr.Step(context.Background())
		return err
	})
	for r, err := range errs {
		require.ErrorIs(t, err, agentrl.ErrTrainer, "rank %d", r)
		assert.Contains(t, err.Error(), "the ranks disagree on TrainerConfig.Seed (low 32 bits) (from 7 to 8", "rank %d", r)
	}
}

// TestDataParallelRankFails: a rank whose reward fails stops; the other
// fails at the timeout naming it, rather than waiting forever.
func TestDataParallelRankFails(t *testing.T) {
	errs := onRanks(t, 2, 500*time.Millisecond, func(r int, comm dist.Comm) error {
		cfg := dpConfig(0, 0)
		m := newTabular(banditAlphabet)
		eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
		require.NoError(t, err)
		rf := banditReward
		if r == 1 {
			rf = func(context.Context, reward.Input) (reward.Output, error) {
				return reward.Output{}, errors.New("sandbox down")
			}
		}
		tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: rf, Prompts: banditPrompts(8), DataParallel: agentrl.DataParallel{Comm: comm}})
		require.NoError(t, err)
		_, err = tr.Step(context.Background())
		return err
	})
	assert.ErrorContains(t, errs[1], "sandbox down")
	var re *dist.RankError
	require.ErrorAs(t, errs[0], &re)
	assert.Equal(t, []int{1}, re.Missing)
	assert.ErrorContains(t, errs[0], "rank 1 did not arrive within 500ms")
}

// TestDataParallelCheckpoint: rank 0 writes the checkpoint of a job of
// two ranks, which records its world size; every rank resumes it and
// takes the step the uninterrupted job takes; a trainer of another
// world size refuses it unless AllowWorldSizeChange, and then holds its
// weights.
func TestDataParallelCheckpoint(t *testing.T) {
	ctx := context.Background()
	cfg := dpConfig(0, 0)
	root := checkpoint.Root{Dir: t.TempDir()}
	dirs := make([]string, 2)
	next := make([][]lm.Param, 2)
	errs := onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
		tr, ps := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{Comm: comm}, nil)
		if _, err := tr.Step(ctx); err != nil {
			return err
		}
		var err error
		if dirs[r], err = tr.SaveCheckpoint(ctx, root, 0); err != nil {
			return err
		}
		if _, err := tr.Step(ctx); err != nil {
			return err
		}
		next[r] = ps()
		return nil
	})
	require.NoError(t, errors.Join(errs...))
	assert.Equal(t, dirs[0], dirs[1], "every rank returns the folder")
	b, err := os.ReadFile(filepath.Join(dirs[0], agentrl.CheckpointStateFile))
	require.NoError(t, err)
	var st agentrl.TrainerState
	require.NoError(t, json.Unmarshal(b, &st))
	assert.Equal(t, 2, st.WorldSize)
	assert.Equal(t, 1, st.Step)

	// Both ranks resume and take the same step as the uninterrupted job.
	resumed := make([][]lm.Param, 2)
	errs = onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
		tr, ps := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{Comm: comm}, nil)
		ok, err := tr.Resume(root)
		if err != nil || !ok {
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
			assert.Equal(t, next[r][i].Data, resumed[r][i].Data, "rank %d %s", r, next[r][i].Name)
		}
	}

	// One process refuses the job's checkpoint …
	alone, _ := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{}, nil)
	err = alone.LoadFrom(dirs[0])
	require.ErrorIs(t, err, agentrl.ErrCheckpoint)
	assert.Contains(t, err.Error(), "written by a job of 2 rank(s), this one has 1")
	// … and takes it when allowed.
	allowed, aps := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{Comm: dist.Local(nil), AllowWorldSizeChange: true}, nil)
	require.NoError(t, allowed.LoadFrom(dirs[0]))
	assert.Equal(t, 1, allowed.StepsDone())
	_ = aps

	// Two ranks refuse one process's checkpoint, both of them, and take
	// it when allowed.
	single := t.TempDir()
	require.NoError(t, alone.SaveTo(single))
	for _, allow := range []bool{false, true} {
		errs = onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
			tr, _ := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{Comm: comm, AllowWorldSizeChange: allow}, nil)
			return tr.LoadFrom(single)
		})
		for r, err := range errs {
			if allow {
				assert.NoError(t, err, "rank %d", r)
			} else {
				require.ErrorIs(t, err, agentrl.ErrCheckpoint, "rank %d", r)
				assert.Contains(t, err.Error(), "written by a job of 1 rank(s), this one has 2")
			}
		}
	}
}

// TestDataParallelDynamicSampling: with DAPO's dynamic sampling each
// rank keeps its share of the groups, the ranks take the same number of
// generation batches and end with the same weights.
func TestDataParallelDynamicSampling(t *testing.T) {
	ctx := context.Background()
	cfg := dpConfig(0, 0)
	cfg.DynamicSampling = &agentrl.DynamicSamplingConfig{MaxGenBatches: 20}
	got := make([]agentrl.StepMetrics, 2)
	params := make([][]lm.Param, 2)
	errs := onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
		tr, ps := newDPTrainer(t, "tabular", cfg, agentrl.DataParallel{Comm: comm}, nil)
		for range 2 {
			m, err := tr.Step(ctx)
			if err != nil {
				return err
			}
			got[r] = m
		}
		params[r] = ps()
		return nil
	})
	require.NoError(t, errors.Join(errs...))
	assert.Equal(t, 4, got[0].KeptGroups, "PromptsPerStep groups in all")
	assert.Equal(t, 16, got[0].Trajectories)
	assert.Equal(t, got[0].Map(), got[1].Map())
	assert.Equal(t, params[0][0].Data, params[1][0].Data)
}

// TestDataParallelValidate: the ranks share the validation prompts and
// report what one process reports (TestValidate's derivation: sample s of
// prompt i is seeded Seed + i·N + s, and paritySampler answers "c", the
// reward-1 answer, to an even seed).
func TestDataParallelValidate(t *testing.T) {
	ctx := context.Background()
	vc := agentrl.ValidationConfig{N: 3, Seed: 1}
	for range 5 {
		vc.Prompts = append(vc.Prompts, agentrl.Prompt{ID: "v", Tokens: []int{tokA}, DataSource: "s"})
	}
	cfg := dpConfig(0, 0)
	cfg.PromptsPerStep = 6 // a multiple of 3 ranks
	validator := func(d agentrl.DataParallel) *agentrl.Trainer {
		eng, err := rollout.NewEngine(rollout.Config{Sampler: paritySampler{}, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
		require.NoError(t, err)
		tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: newTabular(banditAlphabet), Engine: eng, Reward: banditReward, Prompts: banditPrompts(8), DataParallel: d})
		require.NoError(t, err)
		return tr
	}
	want, err := validator(agentrl.DataParallel{}).Validate(ctx, vc)
	require.NoError(t, err)
	got := make([]eval.Result, 3)
	errs := onRanks(t, 3, time.Minute, func(r int, comm dist.Comm) error {
		var err error
		got[r], err = validator(agentrl.DataParallel{Comm: comm}).Validate(ctx, vc)
		return err
	})
	require.NoError(t, errors.Join(errs...))
	for r := range got {
		assert.Equal(t, want.Map(), got[r].Map(), "rank %d", r)
	}
	// Prompts 0–4 draw seeds 1–15: 7 even of 15, mean@3 = 7/15.
	v, ok := got[2].Value("s", eval.VarAcc, "mean@3")
	require.True(t, ok)
	assert.InDelta(t, 7.0/15, v, 1e-12)
}

// TestSFTDataParallel: two ranks fine-tune as one process does on the
// whole batch (the loss normalised by the whole batch's tokens), up to
// float32 rounding, with the same weights on both.
func TestSFTDataParallel(t *testing.T) {
	ctx := context.Background()
	data := []agentrl.SFTSample{
		{IDs: []int{0, 1, 2, 3}, Mask: []float32{0, 1, 1, 1}},
		{IDs: []int{0, 2}, Mask: []float32{0, 1}},
		{IDs: []int{1, 3, 3}, Mask: []float32{0, 0, 1}},
		{IDs: []int{2, 0, 1, 2, 3}, Mask: []float32{0, 1, 0, 1, 1}},
	}
	cfg := agentrl.SFTConfig{BatchSize: 4, MicroBatchSize: 1, Epochs: 3, Optimizer: policy.AdamWConfig{LR: 0.05}, MaxGradNorm: 1, Seed: 3}
	one := newTabular(banditAlphabet)
	s1, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: one, Data: data})
	require.NoError(t, err)
	var want []agentrl.SFTMetrics
	require.NoError(t, s1.Train(ctx, func(m agentrl.SFTMetrics) error { want = append(want, m); return nil }))
	wantLoss, err := s1.Loss(ctx, data)
	require.NoError(t, err)

	models := []*tabular{newTabular(banditAlphabet), newTabular(banditAlphabet)}
	got := make([][]agentrl.SFTMetrics, 2)
	losses := make([]float64, 2)
	errs := onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
		s, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: models[r], Data: data, DataParallel: agentrl.DataParallel{Comm: comm}})
		if err != nil {
			return err
		}
		if err := s.Train(ctx, func(m agentrl.SFTMetrics) error { got[r] = append(got[r], m); return nil }); err != nil {
			return err
		}
		losses[r], err = s.Loss(ctx, data)
		return err
	})
	require.NoError(t, errors.Join(errs...))
	assert.Equal(t, models[0].w, models[1].w)
	assert.Less(t, maxAbsDiff(one.w, models[0].w), 1e-6)
	require.Len(t, got[0], len(want))
	for i := range want {
		assert.InDelta(t, want[i].Loss, got[0][i].Loss, 1e-12, "step %d", i+1)
		assert.Equal(t, want[i].Tokens, got[0][i].Tokens)
		assert.InDelta(t, want[i].GradNorm, got[1][i].GradNorm, 1e-6*want[i].GradNorm)
	}
	assert.InDelta(t, wantLoss, losses[0], 1e-6)
	assert.Equal(t, losses[0], losses[1])

	_, err = agentrl.NewSFTTrainer(agentrl.SFTConfig{BatchSize: 3}, agentrl.SFTParts{Policy: newTabular(banditAlphabet), Data: data, DataParallel: agentrl.DataParallel{Comm: fakeComm{size: 2}}})
	assert.ErrorContains(t, err, "BatchSize 3 is not a multiple of the 2 ranks")
}

// TestDataParallelFleet: against one inference fleet, rank 0 alone
// publishes (before the first rollout and after each step: versions 0–3)
// and every rank samples its groups from the servers, one step ahead of
// training; the ranks end with the same policy, and no trajectory is
// staler than the bound.
func TestDataParallelFleet(t *testing.T) {
	ctx := context.Background()
	cfg := dpConfig(0, 0)
	cfg.MaxStaleness, cfg.SyncEvery = 1, 1
	f := newTestFleet(t)
	models := make([]*tabular, 2)
	errs := onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
		models[r] = newTabular(banditAlphabet)
		eng, err := rollout.NewEngine(rollout.Config{Sampler: f, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
		if err != nil {
			return err
		}
		tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: models[r], Engine: eng, Reward: banditReward, Prompts: banditPrompts(8), Sync: f, DataParallel: agentrl.DataParallel{Comm: comm}})
		if err != nil {
			return err
		}
		defer tr.Close()
		for range 3 {
			m, err := tr.Step(ctx)
			if err != nil {
				return err
			}
			if m.StalenessMax > 1 {
				return errors.New("staler than the bound")
			}
		}
		return nil
	})
	require.NoError(t, errors.Join(errs...))
	assert.Equal(t, []int{0, 1, 2, 3}, f.versions(), "rank 0 publishes, once per version")
	assert.Equal(t, models[0].w, models[1].w)
}
