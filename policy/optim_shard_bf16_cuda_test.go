//go:build agentrl_cuda && cgo

package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/lm"
)

// newGPU opens the GPU backend in BF16 precision, or skips the test
// without one (fails when AGENTRL_REQUIRE_GPU is set, as under the fake
// driver of gpu/kernels/emu).
func newGPU(t *testing.T) *gpu.Backend {
	t.Helper()
	be, err := gpu.New(context.Background(), gpu.WithPrecision(gpu.BF16))
	if err != nil {
		require.True(t, errors.Is(err, gpu.ErrNoDriver) || errors.Is(err, gpu.ErrNoDevice), "unexpected error: %v", err)
		if os.Getenv("AGENTRL_REQUIRE_GPU") != "" {
			t.Fatalf("AGENTRL_REQUIRE_GPU is set but no GPU: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

// bf16Round rounds f to the nearest bfloat16, ties to even (torch's and
// CUDA's __float2bfloat16_rn, as gpu's f32_to_bf16 kernel).
func bf16Round(f float32) float32 {
	b := math.Float32bits(f)
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

// loadGPUModel loads a tiny model on a new GPU backend with its weights
// rounded to bf16, so that a float32 forward and a bf16-weights forward
// start from the same values.
func loadGPUModel(t *testing.T, name string) (*Model, *gpu.Backend) {
	t.Helper()
	be := newGPU(t)
	m := loadTiny(t, name, WithBackend(be))
	for _, p := range m.Params() {
		for i, v := range p.Data {
			p.Data[i] = bf16Round(v)
		}
	}
	return m, be
}

// masterOf is this rank's master shard, downloaded, one block per unit
// (padding included).
func masterOf(t *testing.T, s *ShardedAdamW) [][]float32 {
	be := s.core.model.be
	out := make([][]float32, len(s.master))
	for u, b := range s.master {
		out[u] = make([]float32, b.Len())
		require.NoError(t, be.Download(out[u], b, 0))
	}
	return out
}

// flatMaster assembles the ranks' master shards into the flat parameter
// vector (padding dropped).
func flatMaster(lay ShardLayout, shards [][][]float32) []float32 {
	out := make([]float32, lay.Elements)
	for r, units := range shards {
		for u, block := range units {
			lo := u*lay.Unit + r*lay.Block
			for i, v := range block {
				if lo+i < lay.Elements {
					out[lo+i] = v
				}
			}
		}
	}
	return out
}

// adamStepBound is c_t of AdamW's update bound |Δθ_t| ≤ lr·c_t, whatever
// the gradients: with m_t = (1−β1)Σ_i β1^(t−i) g_i and v_t = (1−β2)Σ_i
// β2^(t−i) g_i², Cauchy–Schwarz gives |m_t| ≤ (1−β1)/√(1−β2) ·
// √(Σ_{j<t} (β1²/β2)^j) · √v_t, so the bias-corrected step
// lr/(1−β1^t) · m_t / (√v_t/√(1−β2^t) + ε) is at most lr times
// (1−β1)/(1−β1^t) · √((1−β2^t)/(1−β2)) · √(Σ_{j<t} (β1²/β2)^j).
// For β1 = 0.9, β2 = 0.999: c1 = 1, c2 ≈ 1.0013, c3 ≈ 1.0036.
func adamStepBound(b1, b2 float64, t int) float64 {
	var s float64
	for j := range t {
		s += math.Pow(b1*b1/b2, float64(j))
	}
	tt := float64(t)
	return (1 - b1) / (1 - math.Pow(b1, tt)) * math.Sqrt((1-math.Pow(b2, tt))/(1-b2)) * math.Sqrt(s)
}

// TestShardedBF16Weights: ShardedAdamW with ShardOptions.BF16Weights on
// the GPU backend (bf16 weights, the float32 master sharded), against
// the same optimizer at one rank and against DeviceAdamW's float32
// weights in BF16 precision, on tiny models with biases (qwen2) and
// per-head norms and tied embeddings (qwen3), weights rounded to bf16 at
// the start.
//
//   - Two ranks, each training the whole batch with the loss weighted
//     1/2, end with the one rank's master weights bit for bit, at stages
//     1 and 2 (TestShardedAdamWMatchesDevice's argument: halving is exact,
//     and so are its bf16 roundings, and the sum of two halves is one
//     addition), and both hold the same bf16 model, which is the master
//     rounded to bf16.
//   - The first update is DeviceAdamW's bit for bit: from bf16-exact
//     weights both forwards read the same values (the products read bf16
//     in both; the embedding, norms and biases the same numbers), so the
//     gradients and the elementwise update are the same.
//   - After that the float32 run's embedding, norms and biases read
//     unrounded values, so the runs part; each update moves a weight by
//     at most lr·c_t (adamStepBound) in either, so after k steps they
//     differ by at most 2·lr·Σ_{t=2..k} c_t (plus float32 rounding).
//   - Memory per rank, by kind (Memory): bf16 weights 2P, the master and
//     the gradient shard 4·K·U/N each, the moments 8·K·U/N; and the
//     device's bytes in use (the allocator's, measured) change by what
//     the buffers the option frees and allocates take.
func TestShardedBF16Weights(t *testing.T) {
	const steps = 3
	cfg := AdamWConfig{LR: 1e-2, WeightDecay: 0.01, Eps: 1e-3}
	for _, model := range []string{"qwen2-tiny", "qwen3-tiny"} {
		t.Run(model, func(t *testing.T) {
			g, micro, w, u := wholeBatch(t, model)
			ctx := context.Background()

			// The float32-weights reference, after one step and after k.
			ref, _ := loadGPUModel(t, model)
			ro, err := ref.NewDeviceAdamW(cfg)
			require.NoError(t, err)
			deviceSteps(t, ref, ro, micro, g.seqs, w, u, 1, 0)
			refOne := weightsOf(t, ro)
			deviceSteps(t, ref, ro, micro, g.seqs, w, u, steps-1, 0)
			refK := weightsOf(t, ro)

			// One rank with the option: the unsharded bf16-weights run.
			var oneLay ShardLayout
			var oneFirst, oneMaster []float32
			onGPURanks(t, 1, model, func(_ int, m *Model, be *gpu.Backend, c Collectives) error {
				s, err := m.NewShardedAdamW(cfg, c, ShardOptions{Stage: ShardOptimizer, UnitElements: 1000, BF16Weights: true})
				if err != nil {
					return err
				}
				if _, err := shardedSteps(ctx, m, s, micro, g.seqs, w, u, 1, 0); err != nil {
					return err
				}
				oneLay = s.Layout()
				oneFirst = flatMaster(oneLay, [][][]float32{masterOf(t, s)})
				if _, err := shardedSteps(ctx, m, s, micro, g.seqs, w, u, steps-1, 0); err != nil {
					return err
				}
				oneMaster = flatMaster(oneLay, [][][]float32{masterOf(t, s)})
				return nil
			})
			requireBitsF(t, "the first update against DeviceAdamW's", refOne, oneFirst)
			bound := 0.0
			for k := 2; k <= steps; k++ {
				bound += 2 * cfg.LR * adamStepBound(0.9, 0.999, k)
			}
			d := maxAbsDiff(refK, oneMaster)
			t.Logf("max |θ(bf16 weights, master) − θ(float32 weights)| after %d steps = %.3g (bound %.3g)", steps, d, bound)
			assert.LessOrEqual(t, d, bound*(1+1e-5))

			for _, stage := range []int{ShardOptimizer, ShardGradients} {
				t.Run(fmt.Sprintf("stage %d", stage), func(t *testing.T) {
					shards := make([][][]float32, 2)
					models := make([][]float32, 2)
					var lay ShardLayout
					onGPURanks(t, 2, model, func(r int, m *Model, be *gpu.Backend, c Collectives) error {
						P := 0
						for _, p := range m.w.trainable() {
							P += len(p.data)
						}
						if err := be.Synchronize(); err != nil {
							return err
						}
						before := be.Stats().InUse
						hadGrad := map[*param]bool{}
						for _, p := range m.w.trainable() {
							hadGrad[p] = p.dw != nil
						}
						s, err := m.NewShardedAdamW(cfg, c, ShardOptions{Stage: stage, UnitElements: 1000, BF16Weights: true})
						if err != nil {
							return err
						}
						if err := be.Synchronize(); err != nil {
							return err
						}
						after := be.Stats().InUse
						lay = s.Layout()
						// The device bytes the option's buffers take, in the
						// allocator's units (gpu's roundSize, 512 bytes).
						round := func(b int) int64 { return int64((b + 511) / 512 * 512) }
						var want int64
						for _, p := range m.w.trainable() {
							n := len(p.data)
							want += round(4*((n+1)/2)) - round(4*n) // bf16 in place of float32
							if p.dw != nil && !hadGrad[p] {
								// Stage 1: the model's gradient buffers, made when the
								// host gradients (handed out by Params) move to the
								// backend, as without the option.
								want += round(4 * n)
							}
						}
						shardBufs := int64(3) // master, two moments
						if stage == ShardGradients {
							shardBufs++ // the gradient shard
						}
						want += shardBufs * int64(lay.Units) * round(4*lay.Block)
						if got := int64(after) - int64(before); got != want {
							return fmt.Errorf("rank %d: device bytes in use changed by %d, want %d", r, got, want)
						}
						mem, err := s.Memory()
						if err != nil {
							return err
						}
						shard := int64(4 * lay.Units * lay.Block)
						wantMem := Memory{Weights: int64(2 * P), Master: shard, Optimizer: 2 * shard}
						if stage == ShardGradients {
							wantMem.Gradients, wantMem.GradientsPeak = shard, shard
						} else { // the model's whole gradient, as without the option
							wantMem.Gradients, wantMem.GradientsPeak = int64(4*P), int64(4*P)
						}
						if mem != wantMem {
							return fmt.Errorf("rank %d: memory %+v, want %+v", r, mem, wantMem)
						}
						if _, err := shardedSteps(ctx, m, s, micro, g.seqs, scaled(w, 0.5), scaled(u, 0.5), steps, 0); err != nil {
							return err
						}
						shards[r] = masterOf(t, s)
						ps, err := s.Params()
						if err != nil {
							return err
						}
						for _, p := range ps {
							models[r] = append(models[r], p.Data...)
						}
						return nil
					})
					assert.Equal(t, 2, lay.Ranks)
					got := flatMaster(lay, shards)
					requireBitsF(t, "two ranks' master against one rank's", oneMaster, got)
					requireBitsF(t, "rank 1's model against rank 0's", models[0], models[1])
					roundedMaster := make([]float32, len(got))
					for i, v := range got {
						roundedMaster[i] = bf16Round(v)
					}
					requireBitsF(t, "the model against the master rounded to bf16", roundedMaster, models[0])
				})
			}
		})
	}
}

func requireBitsF(t *testing.T, what string, want, got []float32) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%s: element %d = %v, want %v", what, i, got[i], want[i])
	}
}

// onGPURanks is onShardRanks on GPU backends: n ranks, each with its own
// backend and model (weights rounded to bf16), in one process.
func onGPURanks(t *testing.T, n int, name string, f func(r int, m *Model, be *gpu.Backend, c Collectives) error) {
	t.Helper()
	comms, err := dist.NewGroup(context.Background(), n, dist.GroupOptions{Timeout: 60 * time.Second})
	require.NoError(t, err)
	defer func() {
		for _, c := range comms {
			_ = c.Close()
		}
	}()
	models := make([]*Model, n)
	bes := make([]*gpu.Backend, n)
	for r := range n {
		models[r], bes[r] = loadGPUModel(t, name)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r, models[r], bes[r], dist.Buffers(comms[r], models[r].Backend()))
		}()
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// TestShardedBF16WeightsRefused: the option needs a backend with bf16
// weight buffers (the CPU backend has none).
func TestShardedBF16WeightsRefused(t *testing.T) {
	onShardRanks(t, 1, "qwen3-tiny", func(_ int, m *Model, c Collectives) error {
		_, err := m.NewShardedAdamW(AdamWConfig{LR: 1e-3}, c, ShardOptions{Stage: 1, BF16Weights: true})
		if !errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("CPU backend: got %v, want ErrUnsupported", err)
		}
		return nil
	})
}

// TestShardedBF16WeightsResume: a checkpoint of two ranks with the
// option — the model's (bf16) weights through Params, and the state
// files with the master shards — resumes at two ranks and at one to the
// uninterrupted job's next step, master and model bit for bit (at one
// rank by the halving argument of TestShardedBF16Weights); without the
// master in the state, the resumed master would be the bf16 weights,
// which the first check would catch.
func TestShardedBF16WeightsResume(t *testing.T) {
	const model = "qwen2-tiny"
	cfg := AdamWConfig{LR: 1e-2, WeightDecay: 0.01, Eps: 1e-3}
	g, micro, w, u := wholeBatch(t, model)
	ctx := context.Background()
	opts := ShardOptions{Stage: ShardGradients, UnitElements: 1000, BF16Weights: true}
	dir := t.TempDir()
	saved := make([][]float32, 2)
	shards := make([][][]float32, 2)
	var lay ShardLayout
	onGPURanks(t, 2, model, func(r int, m *Model, _ *gpu.Backend, c Collectives) error {
		s, err := m.NewShardedAdamW(cfg, c, opts)
		if err != nil {
			return err
		}
		if _, err := shardedSteps(ctx, m, s, micro, g.seqs, scaled(w, 0.5), scaled(u, 0.5), 2, 0); err != nil {
			return err
		}
		ps, err := s.Params()
		if err != nil {
			return err
		}
		for _, p := range ps {
			saved[r] = append(saved[r], p.Data...)
		}
		if err := s.SaveStateFile(dir); err != nil {
			return err
		}
		if _, err := shardedSteps(ctx, m, s, micro, g.seqs, scaled(w, 0.5), scaled(u, 0.5), 1, 0); err != nil {
			return err
		}
		lay = s.Layout()
		shards[r] = masterOf(t, s)
		return nil
	})
	want := flatMaster(lay, shards)
	for _, n := range []int{2, 1} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			got := make([][][]float32, n)
			var lay ShardLayout
			scale := 1 / float32(n)
			onGPURanks(t, n, model, func(r int, m *Model, _ *gpu.Backend, c Collectives) error {
				s, err := m.NewShardedAdamW(cfg, c, opts)
				if err != nil {
					return err
				}
				if err := s.LoadParams(func(ps []lm.Param) error {
					at := 0
					for _, p := range ps {
						at += copy(p.Data, saved[0][at:at+len(p.Data)])
					}
					return nil
				}); err != nil {
					return err
				}
				if err := s.LoadStateFile(dir); err != nil {
					return err
				}
				if s.Steps() != 2 {
					return fmt.Errorf("resumed at step %d, want 2", s.Steps())
				}
				if _, err := shardedSteps(ctx, m, s, micro, g.seqs, scaled(w, scale), scaled(u, scale), 1, 0); err != nil {
					return err
				}
				lay = s.Layout()
				got[r] = masterOf(t, s)
				return nil
			})
			requireBitsF(t, "the resumed master against the uninterrupted job's", want, flatMaster(lay, got))
		})
	}
	requireBitsF(t, "the saved model of rank 1 against rank 0's", saved[0], saved[1])
}

// wholeBatch is model's golden data as one micro-batch of all its
// sequences, with the per-token loss weights w and u of the goldens.
func wholeBatch(t *testing.T, model string) (g golden, micro [][]int, w, u [][]float32) {
	g = loadGolden(t, model)
	micro = [][]int{nil}
	for i := range g.seqs {
		micro[0] = append(micro[0], i)
	}
	return g, micro, unpack(g.seqs, g.tensors["w"]), unpack(g.seqs, g.tensors["u"])
}
