package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// TestShardLayout: the partition's units, blocks and owners, by hand.
func TestShardLayout(t *testing.T) {
	for _, tc := range []struct {
		name              string
		sizes             []int
		ranks, unit       int
		wantUnit, wantK   int
		wantOwned         []int // per rank, padding excluded
		wantOwnerOfFloats []int // rank owning flat element i
	}{
		// 10 floats, 2 ranks, units of 4: [0,4) [4,8) [8,10)+2 padding;
		// blocks of 2: rank 0 owns 0-1, 4-5, 8-9; rank 1 owns 2-3, 6-7.
		{"padded last unit", []int{3, 5, 2}, 2, 4, 4, 3, []int{6, 4}, []int{0, 0, 1, 1, 0, 0, 1, 1, 0, 0}},
		// A unit of 5 over 2 ranks is rounded down to 4.
		{"unit rounded to the ranks", []int{10}, 2, 5, 4, 3, []int{6, 4}, []int{0, 0, 1, 1, 0, 0, 1, 1, 0, 0}},
		// A unit larger than needed shrinks to ⌈10/3⌉·3 = 12: one unit,
		// blocks of 4: rank 0 owns 0-3, rank 1 4-7, rank 2 8-9.
		{"one unit", []int{4, 6}, 3, 1000, 12, 1, []int{4, 4, 2}, []int{0, 0, 0, 0, 1, 1, 1, 1, 2, 2}},
		// One rank owns everything.
		{"one rank", []int{2, 3}, 1, 2, 2, 3, []int{5}, []int{0, 0, 0, 0, 0}},
		// Units of 3 over 3 ranks leave a block of one float each.
		{"blocks of one", []int{7}, 3, 3, 3, 3, []int{3, 2, 2}, []int{0, 1, 2, 0, 1, 2, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lay := newShardLayout(tc.sizes, tc.ranks, 0, tc.unit)
			assert.Equal(t, tc.wantUnit, lay.unit)
			assert.Equal(t, tc.wantK, lay.units)
			assert.Equal(t, tc.wantUnit/tc.ranks, lay.block)
			owner := make([]int, lay.total)
			for i := range owner {
				owner[i] = -1
			}
			for r := range tc.ranks {
				assert.Equal(t, tc.wantOwned[r], lay.owned(r), "rank %d", r)
				for k := range lay.units {
					lo, hi := lay.own(r, k)
					for i := lo; i < hi; i++ {
						require.Equal(t, -1, owner[i], "element %d owned twice", i)
						owner[i] = r
					}
				}
			}
			assert.Equal(t, tc.wantOwnerOfFloats, owner)
			// The pieces of any range tile it along the parameters.
			for lo := 0; lo <= lay.total; lo++ {
				for hi := lo; hi <= lay.total; hi++ {
					at := 0
					for _, pc := range lay.pieces(lo, hi) {
						require.Equal(t, at, pc.at)
						require.Equal(t, lo+at, lay.starts[pc.i]+pc.off, "piece of [%d,%d)", lo, hi)
						require.LessOrEqual(t, pc.off+pc.n, tc.sizes[pc.i])
						at += pc.n
					}
					require.Equal(t, hi-lo, at, "pieces of [%d,%d)", lo, hi)
				}
			}
		})
	}
}

func TestLayerOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		i    int
		ok   bool
	}{
		{"model.layers.3.self_attn.q_proj.weight", 3, true},
		{"base_model.model.model.layers.12.mlp.up_proj.lora_A.weight", 12, true},
		{"model.embed_tokens.weight", 0, false},
		{"model.norm.weight", 0, false},
		{"lm_head.weight", 0, false},
		{"model.sublayers.3.w", 0, false},
		{"model.layers.x.w", 0, false},
		{"model.layers.7", 0, false},
		{"layers.0.w", 0, true},
	} {
		i, ok := layerOf(tc.name)
		assert.Equal(t, tc.ok, ok, tc.name)
		if tc.ok {
			assert.Equal(t, tc.i, i, tc.name)
		}
	}
}

// TestGradGroups: the backward's ready points sort every trainable
// tensor once: a tied model's embedding last, an untied model's head
// first with the final norm.
func TestGradGroups(t *testing.T) {
	for _, name := range []string{"qwen3-tiny", "llama-tiny"} {
		t.Run(name, func(t *testing.T) {
			m := loadTiny(t, name)
			g := m.gradGroups()
			names := func(ps []*param) []string {
				var out []string
				for _, p := range ps {
					out = append(out, p.spec.Name)
				}
				return out
			}
			seen := 0
			for i, l := range g.layers {
				assert.NotEmpty(t, l)
				for _, n := range names(l) {
					assert.Contains(t, n, fmt.Sprintf("model.layers.%d.", i))
				}
				seen += len(l)
			}
			assert.Equal(t, []string{"model.embed_tokens.weight"}, names(g.rest))
			if m.Config().TieWordEmbeddings {
				assert.Equal(t, []string{"model.norm.weight"}, names(g.head))
			} else {
				assert.ElementsMatch(t, []string{"model.norm.weight", "lm_head.weight"}, names(g.head))
			}
			assert.Equal(t, len(m.w.trainable()), seen+len(g.head)+len(g.rest))
		})
	}
}

// onShardRanks runs f on n ranks, each with its own model (name) and
// the collectives of a dist group over its backend.
func onShardRanks(t *testing.T, n int, name string, f func(r int, m *Model, c Collectives) error) {
	t.Helper()
	comms, err := dist.NewGroup(context.Background(), n, dist.GroupOptions{Timeout: 30 * time.Second})
	require.NoError(t, err)
	defer func() {
		for _, c := range comms {
			_ = c.Close()
		}
	}()
	models := make([]*Model, n)
	for r := range n {
		models[r] = loadTiny(t, name)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r, models[r], dist.Buffers(comms[r], models[r].Backend()))
		}()
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// scaled returns rows multiplied by s.
func scaled(rows [][]float32, s float32) [][]float32 {
	out := make([][]float32, len(rows))
	for i, r := range rows {
		out[i] = make([]float32, len(r))
		for j, v := range r {
			out[i][j] = v * s
		}
	}
	return out
}

// shardedSteps is trainSteps for a sharded optimizer: the backward of
// every micro-batch (parts of seqs), the reduction, the norm (clipped
// when clip > 0) and the update, n times.
func shardedSteps(ctx context.Context, m *Model, s *ShardedAdamW, micro [][]int, seqs [][]int, w, u [][]float32, n int, clip float64) ([]float64, error) {
	var norms []float64
	for range n {
		if err := s.ZeroGrad(); err != nil {
			return nil, err
		}
		for _, part := range micro {
			_, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: pick(seqs, part), Temperature: 0.7}, true)
			if err != nil {
				return nil, err
			}
			if err := back(ctx, pickF(w, part), pickF(u, part)); err != nil {
				return nil, err
			}
		}
		if err := s.ReduceGradients(ctx); err != nil {
			return nil, err
		}
		var norm float64
		var err error
		if clip > 0 {
			norm, err = s.ClipGradNormContext(ctx, clip)
		} else {
			norm, err = s.GradNormContext(ctx)
		}
		if err != nil {
			return nil, err
		}
		norms = append(norms, norm)
		if _, err := s.StepContext(ctx); err != nil {
			return nil, err
		}
	}
	return norms, nil
}

func pick(seqs [][]int, idx []int) [][]int {
	out := make([][]int, len(idx))
	for i, j := range idx {
		out[i] = seqs[j]
	}
	return out
}

func pickF(rows [][]float32, idx []int) [][]float32 {
	out := make([][]float32, len(idx))
	for i, j := range idx {
		out[i] = rows[j]
	}
	return out
}

// deviceSteps is shardedSteps' reference: one process, DeviceAdamW,
// the same micro-batches and loss weights.
func deviceSteps(t *testing.T, m *Model, o *DeviceAdamW, micro [][]int, seqs [][]int, w, u [][]float32, n int, clip float64) []float64 {
	ctx := context.Background()
	var norms []float64
	for range n {
		require.NoError(t, o.ZeroGrad())
		for _, part := range micro {
			_, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: pick(seqs, part), Temperature: 0.7}, true)
			require.NoError(t, err)
			require.NoError(t, back(ctx, pickF(w, part), pickF(u, part)))
		}
		var norm float64
		var err error
		if clip > 0 {
			norm, err = o.ClipGradNorm(clip)
		} else {
			norm, err = o.GradNorm()
		}
		require.NoError(t, err)
		norms = append(norms, norm)
		_, err = o.Step()
		require.NoError(t, err)
	}
	return norms
}

func weightsOf(t *testing.T, o Optimizer) []float32 {
	ps, err := o.Params()
	require.NoError(t, err)
	var out []float32
	for _, p := range ps {
		out = append(out, p.Data...)
	}
	return out
}

// TestShardedAdamWMatchesDevice: N ranks that each train the whole batch
// with the loss weighted 1/N end where one process with DeviceAdamW
// ends, and every rank holds the same model.
//
// Exactness: the backward is linear in the loss weights, and scaling by
// 1/2 (a power of two) is exact in float32, so each of 2 ranks computes
// exactly half of every gradient float of the one process, and their
// sum (one addition, in a reduce-scatter) is exactly its gradient; with
// one rank the reduce-scatter copies. AdamW is elementwise, so the
// updates are then bit for bit the same, at stage 1 whatever the
// micro-batches (each rank accumulates them as the one process does,
// halved) and at stage 2 with one backward per update. Stage 2 with two
// backward passes adds (g1/2 + g1/2) + (g2/2 + g2/2) where the one
// process's kernels accumulate g2 into g1: float32 rounding apart, as
// with 3 ranks of a third each (1/3 is not exact). The norms are float64
// sums in another order (1e-12); the clip then scales by a float32 of
// that ratio, and the weights stay within float32 rounding (1e-6).
func TestShardedAdamWMatchesDevice(t *testing.T) {
	type tc struct {
		model        string
		ranks, stage int
		unit         int
		overlap      bool
		micro        int // backward passes per update
		clip         float64
		exact        bool
	}
	one, two := 1, 2
	var cases []tc
	for _, model := range []string{"qwen3-tiny", "llama-tiny"} {
		cases = append(cases,
			tc{model, 1, 1, 64, false, one, 0, true},
			tc{model, 2, 1, 64, false, two, 0, true},
			tc{model, 2, 2, 64, false, one, 0, true},
			tc{model, 2, 2, 64, true, one, 0, true},
			tc{model, 2, 2, 1 << 20, true, one, 0, true},
			tc{model, 2, 2, 50, true, two, 0, false},
			tc{model, 2, 1, 64, false, one, 0.05, false},
			tc{model, 2, 2, 64, true, one, 0.05, false},
			tc{model, 3, 2, 99, true, two, 0, false},
			tc{model, 3, 1, 30, false, one, 0, false},
		)
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s/%d ranks/stage %d/unit %d/overlap %v/%d micro/clip %v", c.model, c.ranks, c.stage, c.unit, c.overlap, c.micro, c.clip)
		t.Run(name, func(t *testing.T) {
			g := loadGolden(t, c.model)
			var micro [][]int // the sequences of each backward
			for i := range g.seqs {
				if i < c.micro {
					micro = append(micro, nil)
				}
				micro[i%c.micro] = append(micro[i%c.micro], i)
			}
			w, u := unpack(g.seqs, g.tensors["w"]), unpack(g.seqs, g.tensors["u"])
			cfg := AdamWConfig{LR: 1e-2, WeightDecay: 0.01, Eps: 1e-3}
			ref := loadTiny(t, c.model)
			ro, err := ref.NewDeviceAdamW(cfg)
			require.NoError(t, err)
			refNorms := deviceSteps(t, ref, ro, micro, g.seqs, w, u, 3, c.clip)
			want := weightsOf(t, ro)

			inv := 1 / float32(c.ranks)
			got := make([][]float32, c.ranks)
			norms := make([][]float64, c.ranks)
			onShardRanks(t, c.ranks, c.model, func(r int, m *Model, coll Collectives) error {
				s, err := m.NewShardedAdamW(cfg, coll, ShardOptions{Stage: c.stage, UnitElements: c.unit, Overlap: c.overlap})
				if err != nil {
					return err
				}
				ctx := context.Background()
				norms[r], err = shardedSteps(ctx, m, s, micro, g.seqs, scaled(w, inv), scaled(u, inv), 3, c.clip)
				if err != nil {
					return err
				}
				ps, err := s.Params()
				if err != nil {
					return err
				}
				for _, p := range ps {
					got[r] = append(got[r], p.Data...)
				}
				if s.Steps() != 3 {
					return fmt.Errorf("%d steps", s.Steps())
				}
				return nil
			})
			for r := 1; r < c.ranks; r++ {
				assert.Equal(t, got[0], got[r], "rank %d holds rank 0's model", r)
				assert.Equal(t, norms[0], norms[r], "rank %d's norms", r)
			}
			for i := range refNorms {
				assert.InDelta(t, refNorms[i], norms[0][i], 1e-6*refNorms[i], "norm of step %d", i+1)
			}
			if c.exact {
				assert.Equal(t, want, got[0], "bit for bit")
			} else {
				d := maxAbsDiff(want, got[0])
				t.Logf("max |θ(sharded) − θ(one process)| = %.3g", d)
				assert.Less(t, d, 1e-5)
			}
		})
	}
}

// allocCounter is the CPU backend counting the floats of the buffers
// allocated and not freed (live) and their most at once (peak): memory
// measured, not computed.
type allocCounter struct {
	*cpu.Backend
	mu         sync.Mutex
	live, peak int64
	sizes      map[backend.Buffer]int64
}

func newAllocCounter() *allocCounter {
	return &allocCounter{Backend: cpu.New(cpu.WithWorkers(1)), sizes: map[backend.Buffer]int64{}}
}

func (c *allocCounter) Alloc(n int) (backend.Buffer, error) {
	b, err := c.Backend.Alloc(n)
	if err == nil {
		c.mu.Lock()
		c.sizes[b] = int64(n)
		c.live += int64(n)
		c.peak = max(c.peak, c.live)
		c.mu.Unlock()
	}
	return b, err
}

func (c *allocCounter) Free(b backend.Buffer) error {
	c.mu.Lock()
	c.live -= c.sizes[b]
	delete(c.sizes, b)
	c.mu.Unlock()
	return c.Backend.Free(b)
}

func (c *allocCounter) bytes() (live, peak int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return 4 * c.live, 4 * c.peak
}

func (c *allocCounter) resetPeak() {
	c.mu.Lock()
	c.peak = c.live
	c.mu.Unlock()
}

// memConfig is a Qwen3 of 6 layers over 16 words, whose layers hold most
// of the parameters (so that stage 2's one layer at a time shows).
var memConfig = Config{
	ModelType: ModelQwen3, VocabSize: 16, HiddenSize: 32, IntermediateSize: 64,
	NumHiddenLayers: 6, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 8,
	MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
}

// memMeasured is what measureMemory counts of one process or rank.
type memMeasured struct {
	mem              Memory
	weights, created int64 // counted: the model's, then the optimizer's
	held, peak       int64 // counted: between steps, and the most during a step
}

// measureMemory makes memConfig's model on a backend that counts its
// allocations and the optimizer newOpt makes for it, takes two steps
// and counts the bytes held between them and the most held during the
// second, beyond the weights.
func measureMemory(t *testing.T, newOpt func(m *Model) (Optimizer, error)) memMeasured {
	ctx := context.Background()
	seqs := [][]int{{1, 2, 3, 4, 5, 6, 7, 8}, {9, 10, 11, 12}}
	w := [][]float32{{0, 1, -1, 1, -1, 1, -1, 1}, {0, 1, 1, -1}}
	step := func(o Optimizer, m *Model) {
		require.NoError(t, o.ZeroGrad())
		_, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs}, true)
		require.NoError(t, err)
		require.NoError(t, back(ctx, w, nil))
		if s, ok := o.(*ShardedAdamW); ok {
			require.NoError(t, s.ReduceGradients(ctx))
		}
		_, err = o.ClipGradNorm(1)
		require.NoError(t, err)
		_, err = o.Step()
		require.NoError(t, err)
	}
	cb := newAllocCounter()
	m, err := New(memConfig, 7, WithBackend(cb))
	require.NoError(t, err)
	defer m.Close()
	var r memMeasured
	r.weights, _ = cb.bytes()
	o, err := newOpt(m)
	require.NoError(t, err)
	live, _ := cb.bytes()
	r.created = live - r.weights
	step(o, m)
	cb.resetPeak()
	step(o, m)
	r.held, r.peak = cb.bytes()
	r.peak -= r.weights
	r.held -= r.weights
	r.mem, err = o.(interface{ Memory() (Memory, error) }).Memory()
	require.NoError(t, err)
	return r
}

// measureOneProcess is measureMemory of a DeviceAdamW, checked against
// P, memConfig's parameters: the reference a rank's shard is 1/N of.
func measureOneProcess(t *testing.T, cfg AdamWConfig) (one memMeasured, P int64) {
	one = measureMemory(t, func(m *Model) (Optimizer, error) { return m.NewDeviceAdamW(cfg) })
	m, err := New(memConfig, 7)
	require.NoError(t, err)
	for _, p := range m.Params() {
		P += int64(len(p.Data))
	}
	m.Close()
	assert.Equal(t, 4*P, one.weights, "the weights counted")
	assert.Equal(t, one.weights, one.mem.Weights)
	assert.Equal(t, 8*P, one.mem.Optimizer, "one process: both moments of every parameter")
	assert.Equal(t, 4*P, one.mem.Gradients)
	assert.Equal(t, one.held, one.mem.Gradients+one.mem.Optimizer, "Memory matches the buffers counted between steps")
	t.Logf("one process: P = %d; weights %d B, gradients %d B, optimizer %d B, activations peak %d B; counted peak of a step beyond the weights %d B",
		P, one.mem.Weights, one.mem.Gradients, one.mem.Optimizer, one.mem.Activations, one.peak)
	return one, P
}

// checkRankMemory: rank r of a job of lay.Ranks at stage holds 1/N of
// one process's optimizer state (and at stage 2 of its gradients), up to
// the last unit's padding, as counted from its backend's allocations.
func checkRankMemory(t *testing.T, stage int, lay ShardLayout, one, got memMeasured, P int64, r int) {
	n := int64(lay.Ranks)
	shard := int64(lay.Units * lay.Block) // floats per rank, padding included
	padding := int64(lay.Units*lay.Unit) - P
	require.Less(t, padding, int64(lay.Unit))
	assert.Equal(t, one.weights, got.weights, "rank %d holds the whole weights", r)
	assert.Equal(t, 8*shard, got.mem.Optimizer, "rank %d's moments", r)
	// 1/N of one process's, up to the padding.
	assert.Equal(t, n*got.mem.Optimizer, one.mem.Optimizer+8*padding, "rank %d: 1/N of one process's optimizer state", r)
	assert.Equal(t, got.held, got.mem.Gradients+got.mem.Optimizer, "rank %d: Memory matches the buffers counted between steps", r)
	if stage == ShardGradients {
		assert.Equal(t, 4*shard, got.mem.Gradients, "rank %d holds its gradient shard only", r)
		assert.Equal(t, n*got.mem.Gradients, one.mem.Gradients+4*padding, "rank %d: 1/N of one process's gradients", r)
		assert.Equal(t, n*got.held, one.held+12*padding, "rank %d: 1/N of the bytes one process holds between steps, counted", r)
		assert.Less(t, got.mem.GradientsPeak, one.mem.Gradients, "rank %d never holds the whole gradient", r)
		assert.Less(t, got.peak, one.peak, "rank %d's step peaks lower", r)
	} else {
		assert.Equal(t, 4*P+4*shard, got.mem.Gradients, "rank %d: the whole gradient and the reduced shard", r)
	}
	t.Logf("rank %d of %d, stage %d: gradients %d B (peak %d B), optimizer %d B; counted between steps %d B, peak of a step beyond the weights %d B (one process: %d B, %d B)",
		r, n, stage, got.mem.Gradients, got.mem.GradientsPeak, got.mem.Optimizer, got.held, got.peak, one.held, one.peak)
}

// TestShardedAdamWMemory: per rank of 2, the optimizer state and (at
// stage 2) the gradients held are half of one process's, up to the last
// unit's padding — counted from the backend's allocations, which
// Memory's report matches float for float — and at stage 2 no rank
// holds the whole gradient even during the backward.
func TestShardedAdamWMemory(t *testing.T) {
	ctx := context.Background()
	cfg := AdamWConfig{LR: 1e-3}
	one, P := measureOneProcess(t, cfg)
	const unit = 512
	for _, stage := range []int{ShardOptimizer, ShardGradients} {
		t.Run(fmt.Sprintf("stage %d", stage), func(t *testing.T) {
			var ranks [2]memMeasured
			var lay ShardLayout
			comms, err := dist.NewGroup(ctx, 2, dist.GroupOptions{Timeout: 30 * time.Second})
			require.NoError(t, err)
			var wg sync.WaitGroup
			for r := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ranks[r] = measureMemory(t, func(m *Model) (Optimizer, error) {
						s, err := m.NewShardedAdamW(cfg, dist.Buffers(comms[r], m.Backend()), ShardOptions{Stage: stage, UnitElements: unit, Overlap: true})
						if err == nil && r == 0 {
							lay = s.Layout()
						}
						return s, err
					})
				}()
			}
			wg.Wait()
			for _, c := range comms {
				_ = c.Close()
			}
			for r, got := range ranks {
				checkRankMemory(t, stage, lay, one, got, P, r)
			}
		})
	}
}

// TestShardedStateReshards: the moments saved by 2 ranks are those of
// the unsharded state made from them, and load at 1, 2 and 3 ranks (any
// unit), into DeviceAdamW and into AdamW, and save again to the same.
func TestShardedStateReshards(t *testing.T) {
	ctx := context.Background()
	g := loadGolden(t, "qwen3-tiny")
	w, u := unpack(g.seqs, g.tensors["w"]), unpack(g.seqs, g.tensors["u"])
	cfg := AdamWConfig{LR: 1e-2, WeightDecay: 0.01}
	dir := t.TempDir()
	onShardRanks(t, 2, "qwen3-tiny", func(r int, m *Model, c Collectives) error {
		s, err := m.NewShardedAdamW(cfg, c, ShardOptions{Stage: ShardGradients, UnitElements: 70})
		if err != nil {
			return err
		}
		if _, err := shardedSteps(ctx, m, s, [][]int{{0, 1, 2}}, g.seqs, scaled(w, 0.5), scaled(u, 0.5), 2, 0); err != nil {
			return err
		}
		return s.SaveStateFile(dir)
	})
	var full bytes.Buffer
	require.NoError(t, ConsolidateState(dir, &full))
	want := readState(t, full.Bytes())
	assert.Equal(t, "2", want.meta["step"])

	// ReadStateInfo: the same parameters and step from the shards'
	// headers and from the consolidated file.
	info, err := ReadStateInfo(dir)
	require.NoError(t, err)
	assert.Equal(t, 2, info.WorldSize)
	assert.Equal(t, int64(2), info.Step)
	flatInfo := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(flatInfo, StateFileName), full.Bytes(), 0o600))
	one, err := ReadStateInfo(flatInfo)
	require.NoError(t, err)
	assert.Equal(t, 0, one.WorldSize)
	assert.Equal(t, int64(2), one.Step)
	assert.ElementsMatch(t, info.Params, one.Params)
	var params []ShardParam
	for _, p := range loadTiny(t, "qwen3-tiny").Params() {
		params = append(params, ShardParam{Name: p.Name, Size: len(p.Data)})
	}
	assert.Equal(t, params, info.Params, "the model's parameters in order")

	// The reference: one process's state after the same two steps.
	ref := loadTiny(t, "qwen3-tiny")
	ro, err := ref.NewDeviceAdamW(cfg)
	require.NoError(t, err)
	deviceSteps(t, ref, ro, [][]int{{0, 1, 2}}, g.seqs, w, u, 2, 0)
	var refBuf bytes.Buffer
	require.NoError(t, ro.SaveState(&refBuf))
	assert.Equal(t, readState(t, refBuf.Bytes()).tensors, want.tensors, "the shards are one process's moments")

	// Into a DeviceAdamW and an AdamW: the whole state.
	for _, kind := range []string{"device", "host"} {
		m := loadTiny(t, "qwen3-tiny")
		var buf bytes.Buffer
		if kind == "device" {
			d, err := m.NewDeviceAdamW(cfg)
			require.NoError(t, err)
			require.NoError(t, d.LoadStateFile(dir))
			assert.Equal(t, int64(2), d.Steps())
			require.NoError(t, d.SaveState(&buf))
		} else {
			a, err := NewAdamW(m.Params(), cfg)
			require.NoError(t, err)
			require.NoError(t, a.LoadStateFile(dir))
			require.NoError(t, a.SaveState(&buf))
		}
		assert.Equal(t, want.tensors, readState(t, buf.Bytes()).tensors, kind)
	}

	// Into 1 and 3 ranks with other units, saved again: the same state.
	for _, tc := range []struct{ ranks, unit int }{{1, 1 << 20}, {3, 33}, {2, 70}} {
		t.Run(fmt.Sprintf("%d ranks", tc.ranks), func(t *testing.T) {
			again := t.TempDir()
			onShardRanks(t, tc.ranks, "qwen3-tiny", func(r int, m *Model, c Collectives) error {
				s, err := m.NewShardedAdamW(cfg, c, ShardOptions{Stage: ShardOptimizer, UnitElements: tc.unit})
				if err != nil {
					return err
				}
				if err := s.LoadStateFile(dir); err != nil {
					return err
				}
				if s.Steps() != 2 {
					return fmt.Errorf("step %d", s.Steps())
				}
				return s.SaveStateFile(again)
			})
			var buf bytes.Buffer
			require.NoError(t, ConsolidateState(again, &buf))
			assert.Equal(t, want.tensors, readState(t, buf.Bytes()).tensors)
		})
	}

	// From the unsharded file into 2 ranks.
	flat := t.TempDir()
	require.NoError(t, ro.SaveStateFile(flat))
	resharded := t.TempDir()
	onShardRanks(t, 2, "qwen3-tiny", func(r int, m *Model, c Collectives) error {
		s, err := m.NewShardedAdamW(cfg, c, ShardOptions{Stage: ShardGradients, UnitElements: 40})
		if err != nil {
			return err
		}
		if err := s.LoadStateFile(flat); err != nil {
			return err
		}
		return s.SaveStateFile(resharded)
	})
	var buf bytes.Buffer
	require.NoError(t, ConsolidateState(resharded, &buf))
	assert.Equal(t, want.tensors, readState(t, buf.Bytes()).tensors)
	_, err = os.Stat(filepath.Join(resharded, StateFileName))
	assert.True(t, os.IsNotExist(err))
}

type stateFile struct {
	meta    map[string]string
	tensors map[string][]float32
}

func readState(t *testing.T, b []byte) stateFile {
	t.Helper()
	f, err := safetensors.NewReader(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	s := stateFile{meta: f.Metadata(), tensors: map[string][]float32{}}
	for _, info := range f.Tensors() {
		v, err := f.Float32(info.Name)
		require.NoError(t, err)
		s.tensors[info.Name] = v
	}
	return s
}

// TestShardedStateErrors: a sharded state that does not fit is an
// error naming what, and leaves the optimizer as it was.
func TestShardedStateErrors(t *testing.T) {
	cfg := AdamWConfig{LR: 1e-2}
	dir := t.TempDir()
	onShardRanks(t, 2, "qwen3-tiny", func(r int, m *Model, c Collectives) error {
		s, err := m.NewShardedAdamW(cfg, c, ShardOptions{Stage: ShardOptimizer, UnitElements: 100})
		if err != nil {
			return err
		}
		return s.SaveStateFile(dir)
	})
	index, err := os.ReadFile(filepath.Join(dir, ShardStateIndex))
	require.NoError(t, err)
	shard1, err := os.ReadFile(filepath.Join(dir, ShardFileName(1, 2)))
	require.NoError(t, err)
	edit := func(f func(*ShardIndex)) func(string) {
		return func(d string) {
			var idx ShardIndex
			require.NoError(t, json.Unmarshal(index, &idx))
			f(&idx)
			b, err := json.Marshal(idx)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(d, ShardStateIndex), b, 0o644))
		}
	}
	for _, tc := range []struct {
		name  string
		spoil func(dir string)
		want  string
	}{
		{"a shard missing", func(d string) { require.NoError(t, os.Remove(filepath.Join(d, ShardFileName(1, 2)))) }, "optimizer-shard-00001-of-00002.safetensors"},
		{"a shard of another step", edit(func(i *ShardIndex) { i.Step = 5 }), `step "0", the index says "5"`},
		{"another format", edit(func(i *ShardIndex) { i.Format = "x" }), `format "x"`},
		{"another parameter", edit(func(i *ShardIndex) { i.Params[3].Name = "other" }), "parameter 3 is other"},
		{"fewer parameters", edit(func(i *ShardIndex) { i.Params = i.Params[1:] }), "holds 23 parameters, want 24"},
		{"a bad unit", edit(func(i *ShardIndex) { i.Unit = 3 }), "unit 3 is not a positive multiple of the 2 ranks"},
		{"files misnamed", edit(func(i *ShardIndex) { i.Files[0] = "x" }), `file 0 is "x"`},
		{"a world size the files do not match", edit(func(i *ShardIndex) { i.WorldSize = 4 }), "2 files for 4 ranks"},
		{"not JSON", func(d string) {
			require.NoError(t, os.WriteFile(filepath.Join(d, ShardStateIndex), []byte("{"), 0o644))
		}, "unexpected end of JSON"},
		{"a truncated shard", func(d string) {
			require.NoError(t, os.WriteFile(filepath.Join(d, ShardFileName(1, 2)), shard1[:len(shard1)-8], 0o644))
		}, "optimizer state"},
		{"both layouts", func(d string) { require.NoError(t, os.WriteFile(filepath.Join(d, StateFileName), nil, 0o644)) }, "is there too"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(d, e.Name()), b, 0o644))
			}
			tc.spoil(d)
			onShardRanks(t, 1, "qwen3-tiny", func(r int, m *Model, c Collectives) error {
				s, err := m.NewShardedAdamW(cfg, c, ShardOptions{Stage: ShardOptimizer})
				require.NoError(t, err)
				err = s.LoadStateFile(d)
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				assert.Equal(t, int64(0), s.Steps())
				return nil
			})
			m := loadTiny(t, "qwen3-tiny")
			o, err := m.NewDeviceAdamW(cfg)
			require.NoError(t, err)
			assert.Error(t, o.LoadStateFile(d), "DeviceAdamW refuses it too")
			// The headers alone show every spoiling but a renamed
			// parameter (which only the model tells).
			if _, err := ReadStateInfo(d); tc.name != "another parameter" && tc.name != "fewer parameters" {
				require.Error(t, err, "ReadStateInfo")
				assert.Contains(t, err.Error(), tc.want)
			}
		})
	}
}

// FuzzShardIndex: any bytes as the index of a sharded state are read
// or refused, never a panic.
func FuzzShardIndex(f *testing.F) {
	f.Add([]byte(`{"format":"agentrl.adamw.shards.v1","world_size":2,"unit":4,"step":1,"params":[{"name":"a","size":6}],"files":["optimizer-shard-00000-of-00002.safetensors","optimizer-shard-00001-of-00002.safetensors"]}`))
	f.Add([]byte(`{"format":"agentrl.adamw.shards.v1","world_size":0,"unit":0}`))
	f.Add([]byte(`{"world_size":-1,"params":[{"name":"","size":-5}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, ShardStateIndex), b, 0o644))
		idx, err := readShardIndex(dir)
		if err != nil {
			return
		}
		// A valid index over missing files is refused by the reader.
		if _, err := openShards(dir, idx); err == nil {
			t.Fatalf("shards opened without files: %+v", idx)
		}
		var buf bytes.Buffer
		assert.Error(t, ConsolidateState(dir, &buf))
	})
}

// TestShardedAdamWArguments: bad options are errors.
func TestShardedAdamWArguments(t *testing.T) {
	m := loadTiny(t, "qwen3-tiny")
	comms, err := dist.NewGroup(context.Background(), 1, dist.GroupOptions{})
	require.NoError(t, err)
	c := dist.Buffers(comms[0], m.Backend())
	for _, tc := range []struct {
		name string
		coll Collectives
		o    ShardOptions
		want string
	}{
		{"stage 0", c, ShardOptions{}, "sharding stage 0"},
		{"stage 3", c, ShardOptions{Stage: 3}, "sharding stage 3"},
		{"no collectives", nil, ShardOptions{Stage: 1}, "without collectives"},
		{"negative unit", c, ShardOptions{Stage: 1, UnitElements: -1}, "UnitElements -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.NewShardedAdamW(AdamWConfig{}, tc.coll, tc.o)
			require.ErrorIs(t, err, ErrInput)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	s, err := m.NewShardedAdamW(AdamWConfig{}, c, ShardOptions{Stage: ShardOptimizer})
	require.NoError(t, err)
	_, err = s.GradNorm()
	require.ErrorIs(t, err, ErrInput, "stage 1 before ReduceGradients")
	assert.Contains(t, err.Error(), "ReduceGradients")
	// Params hands the training back to the host: the optimizer ends.
	m.Params()
	_, err = s.Step()
	assert.ErrorIs(t, err, ErrInput)
}

// TestMasterWeights: the master weights of a sharded state saved with
// ShardOptions.BF16Weights, by 1 to 3 ranks with units that cut
// parameters anywhere, read back by parameter in their places
// (OpenMasterWeights), and ReadStateInfo says the state has them; a
// state without them, an unknown parameter or a wrong size is an error,
// and so is a shard file without them, naming it.
func TestMasterWeights(t *testing.T) {
	sizes := []int{100, 3, 0, 250, 1, 64}
	for _, c := range []struct{ ranks, unit int }{{1, 1 << 20}, {2, 8}, {3, 33}, {3, 420}} {
		t.Run(fmt.Sprintf("%d ranks, unit %d", c.ranks, c.unit), func(t *testing.T) {
			dir := t.TempDir()
			shardedStateFixtureMaster(t, dir, sizes, c.ranks, c.unit, true)
			info, err := ReadStateInfo(dir)
			require.NoError(t, err)
			assert.True(t, info.Master)
			w, err := OpenMasterWeights(dir)
			require.NoError(t, err)
			defer w.Close()
			off := 0
			for i, n := range sizes {
				name := fmt.Sprintf("p%03d.weight", i)
				require.True(t, w.Has(name))
				got := make([]float32, n)
				require.NoError(t, w.ReadFloat32(name, got))
				want := make([]float32, n)
				for j := range want {
					want[j] = masterValue(off + j)
				}
				assert.Equal(t, want, got, name)
				off += n
			}
			assert.False(t, w.Has("other"))
			assert.ErrorContains(t, w.ReadFloat32("other", nil), `no parameter "other"`)
			assert.ErrorContains(t, w.ReadFloat32("p000.weight", make([]float32, 99)), "holds 100 floats, not 99")
		})
	}

	t.Run("none", func(t *testing.T) {
		dir := t.TempDir()
		shardedStateFixture(t, dir, sizes, 2, 8)
		info, err := ReadStateInfo(dir)
		require.NoError(t, err)
		assert.False(t, info.Master)
		_, err = OpenMasterWeights(dir)
		assert.ErrorContains(t, err, "holds none")
		_, err = OpenMasterWeights(t.TempDir())
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.ErrorContains(t, err, "not sharded")
	})

	t.Run("a shard without them", func(t *testing.T) {
		dir, other := t.TempDir(), t.TempDir()
		shardedStateFixtureMaster(t, dir, sizes, 3, 33, true)
		shardedStateFixture(t, other, sizes, 3, 33)
		b, err := os.ReadFile(filepath.Join(other, ShardFileName(1, 3)))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, ShardFileName(1, 3)), b, 0o644))
		for _, err := range []error{
			func() error { _, err := ReadStateInfo(dir); return err }(),
			func() error { _, err := OpenMasterWeights(dir); return err }(),
			ConsolidateState(dir, io.Discard),
		} {
			require.Error(t, err)
			assert.Contains(t, err.Error(), ShardFileName(1, 3)+" lacks the master weights")
		}
	})
}
