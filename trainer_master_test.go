package agentrl_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/internal/bf16ckpt"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// The checkpoints of a job with bf16 weights and sharded master weights
// (DataParallel.ZeROBF16Weights) are made from a float32 ZeRO-1 run's by
// bf16ckpt.Write, since the CPU backend refuses bf16 weights: the run's
// weights become the master, their bf16 rounding the params file.

// checkpointer is a trainer, RL or SFT, as masterCheckpoints saves it.
type checkpointer interface {
	SaveCheckpoint(ctx context.Context, root checkpoint.Root, keep int) (string, error)
}

// masterCheckpoints trains two ranks at ZeRO-1 with train (one rank's
// trainer over comm, returning it ready to save) and returns the run's
// float32 checkpoint, the same run as a job of three ranks with bf16
// weights saves it (in units of 63 floats, the last one cut short: the
// ranks' shards differ in size), and that checkpoint without its
// master: the bf16 rounding alone.
func masterCheckpoints(t *testing.T, train func(comm dist.Comm) (checkpointer, error)) (f32, master, rounded string) {
	t.Helper()
	root := checkpoint.Root{Dir: t.TempDir()}
	errs := onRanks(t, 2, time.Minute, func(_ int, comm dist.Comm) error {
		tr, err := train(comm)
		if err != nil {
			return err
		}
		_, err = tr.SaveCheckpoint(context.Background(), root, 0)
		return err
	})
	require.NoError(t, errors.Join(errs...))
	_, f32, err := root.Latest()
	require.NoError(t, err)
	master, rounded = filepath.Join(t.TempDir(), "master"), filepath.Join(t.TempDir(), "rounded")
	require.NoError(t, bf16ckpt.Write(f32, master, 3, 63, true))
	require.NoError(t, bf16ckpt.Write(f32, rounded, 3, 63, false))
	info, err := policy.ReadStateInfo(master)
	require.NoError(t, err)
	require.True(t, info.Master)
	total := 0
	for _, p := range info.Params {
		total += p.Size
	}
	require.NotZero(t, total%63, "the last unit is cut short")
	return f32, master, rounded
}

// bitsOf is the bits of ps's values, flat.
func bitsOf(ps []lm.Param) []uint32 {
	var out []uint32
	for _, p := range ps {
		for _, x := range p.Data {
			out = append(out, math.Float32bits(x))
		}
	}
	return out
}

// resumed are a resume's weights, bit for bit: as loaded, and after
// further steps.
type resumed struct{ loaded, stepped []uint32 }

// assertResumesFromMaster: resuming the master checkpoint gives, loaded
// and after the further steps, the weights of resuming the float32 one,
// bit for bit, not those of resuming from the bf16 rounding.
func assertResumesFromMaster(t *testing.T, resume func(dir string) resumed, f32, master, rounded string) {
	t.Helper()
	want, got, bad := resume(f32), resume(master), resume(rounded)
	require.NotEmpty(t, want.loaded)
	require.Greater(t, differ(want.loaded, bad.loaded), len(want.loaded)/2, "most weights are not bf16 values: the test tells the master from its rounding")
	assert.Zero(t, differ(want.loaded, got.loaded), "weights resumed that are not the master (the params file's bf16 rounding)")
	assert.Zero(t, differ(want.stepped, got.stepped), "weights after two steps that are not the float32 run's")
	assert.NotZero(t, differ(bad.stepped, got.stepped), "resuming from the rounding is another run")
}

// differ counts the places where a and b, of one length, differ.
func differ(a, b []uint32) int {
	if len(a) != len(b) {
		return max(len(a), len(b))
	}
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestResumeMasterWeights: a trainer that keeps no master weights of its
// own — one process (AdamW over the backend, reading the shards
// consolidated, with AllowWorldSizeChange) or a ZeRO-1 job without bf16
// weights — resumes a checkpoint whose optimizer state holds float32
// master weights from the master, not from the params file's bf16
// rounding: as loaded and after two more steps its weights are, bit for
// bit, those of resuming the float32 run's own checkpoint. So does the
// SFT trainer in one process.
func TestResumeMasterWeights(t *testing.T) {
	ctx := context.Background()
	cfg := dpConfig(0, 2)
	zero1 := agentrl.DataParallel{BucketBytes: 256, ZeRO: agentrl.ShardOptimizer}
	f32, master, rounded := masterCheckpoints(t, func(comm dist.Comm) (checkpointer, error) {
		d := zero1
		d.Comm = comm
		tr, _ := newDPTrainer(t, "transformer", cfg, d, nil)
		for range 2 {
			if _, err := tr.Step(ctx); err != nil {
				return nil, err
			}
		}
		return tr, nil
	})

	t.Run("one process", func(t *testing.T) {
		assertResumesFromMaster(t, func(dir string) resumed {
			tr, ps := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{AllowWorldSizeChange: true}, nil)
			require.NoError(t, tr.LoadFrom(dir))
			var r resumed
			r.loaded = bitsOf(ps())
			for range 2 {
				_, err := tr.Step(ctx)
				require.NoError(t, err)
			}
			r.stepped = bitsOf(ps())
			return r
		}, f32, master, rounded)
	})

	t.Run("ZeRO-1 job", func(t *testing.T) {
		assertResumesFromMaster(t, func(dir string) resumed {
			out := make([]resumed, 2)
			errs := onRanks(t, 2, time.Minute, func(r int, comm dist.Comm) error {
				d := zero1
				d.Comm, d.AllowWorldSizeChange = comm, true
				tr, ps := newDPTrainer(t, "transformer", cfg, d, nil)
				if s, ok := tr.Optimizer().(*policy.ShardedAdamW); !ok || s.BF16Weights() {
					return errors.New("not a sharded optimizer with float32 weights")
				}
				if err := tr.LoadFrom(dir); err != nil {
					return err
				}
				out[r].loaded = bitsOf(ps())
				for range 2 {
					if _, err := tr.Step(ctx); err != nil {
						return err
					}
				}
				out[r].stepped = bitsOf(ps())
				return nil
			})
			require.NoError(t, errors.Join(errs...))
			assert.Equal(t, out[0], out[1], "both ranks hold the same model")
			return out[0]
		}, f32, master, rounded)
	})

	t.Run("SFT", func(t *testing.T) {
		data := []agentrl.SFTSample{
			{IDs: []int{0, 1, 2, 3}, Mask: []float32{0, 1, 1, 1}},
			{IDs: []int{0, 2}, Mask: []float32{0, 1}},
			{IDs: []int{1, 3, 3}, Mask: []float32{0, 0, 1}},
			{IDs: []int{2, 0, 1, 2, 3}, Mask: []float32{0, 1, 0, 1, 1}},
		}
		sftCfg := agentrl.SFTConfig{BatchSize: 2, MicroBatchSize: 1, Epochs: 3, Optimizer: policy.AdamWConfig{LR: 0.05, Eps: 1e-2}, MaxGradNorm: 1, Seed: 3}
		newSFT := func(d agentrl.DataParallel) *agentrl.SFTTrainer {
			m, err := policy.New(policy.Config{
				ModelType: policy.ModelQwen3, VocabSize: 4, HiddenSize: 16, IntermediateSize: 32,
				NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
				MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
			}, 3)
			require.NoError(t, err)
			t.Cleanup(func() { m.Close() })
			s, err := agentrl.NewSFTTrainer(sftCfg, agentrl.SFTParts{Policy: m, Data: data, DataParallel: d})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}
		// The weights, as a checkpoint saves them (Model.Params would
		// end the trainer's optimizer).
		weights := func(s *agentrl.SFTTrainer) []uint32 {
			dir := t.TempDir()
			require.NoError(t, s.SaveTo(dir))
			f, err := safetensors.Open(filepath.Join(dir, agentrl.CheckpointParamsFile))
			require.NoError(t, err)
			defer f.Close()
			var ps []lm.Param
			for _, info := range f.Tensors() {
				x, err := f.Float32(info.Name)
				require.NoError(t, err)
				ps = append(ps, lm.Param{Name: info.Name, Data: x})
			}
			return bitsOf(ps)
		}
		f32, master, rounded := masterCheckpoints(t, func(comm dist.Comm) (checkpointer, error) {
			d := zero1
			d.Comm = comm
			s := newSFT(d)
			for range 2 {
				if _, err := s.Step(ctx); err != nil {
					return nil, err
				}
			}
			return s, nil
		})
		assertResumesFromMaster(t, func(dir string) resumed {
			s := newSFT(agentrl.DataParallel{AllowWorldSizeChange: true})
			require.NoError(t, s.LoadFrom(dir))
			var r resumed
			r.loaded = weights(s)
			for range 2 {
				_, err := s.Step(ctx)
				require.NoError(t, err)
			}
			r.stepped = weights(s)
			return r
		}, f32, master, rounded)
	})
}

// TestResumeMasterWeightsLoRA: a LoRA run refuses a checkpoint whose
// optimizer state holds master weights (bf16 weights are not trained
// with a LoRA adapter), rather than resuming from the params file.
func TestResumeMasterWeightsLoRA(t *testing.T) {
	ctx := context.Background()
	cfg := dpConfig(0, 2)
	cfg.LoRA = &policy.LoRAConfig{Rank: 2, TargetModules: []string{policy.LoRAAllLinear}}
	f32, master, _ := masterCheckpoints(t, func(comm dist.Comm) (checkpointer, error) {
		tr, _ := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{Comm: comm, BucketBytes: 256, ZeRO: agentrl.ShardOptimizer}, nil)
		_, err := tr.Step(ctx)
		return tr, err
	})
	one, _ := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{AllowWorldSizeChange: true}, nil)
	require.NoError(t, one.LoadFrom(f32), "the float32 run's own checkpoint resumes")
	again, _ := newDPTrainer(t, "transformer", cfg, agentrl.DataParallel{AllowWorldSizeChange: true}, nil)
	err := again.LoadFrom(master)
	require.ErrorIs(t, err, agentrl.ErrCheckpoint)
	assert.ErrorContains(t, err, "master weights")
	assert.ErrorContains(t, err, "LoRA adapter")
}
