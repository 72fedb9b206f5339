//go:build agentrl_cuda && cgo

package gpu

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// trainModel is a Qwen3-shaped model of the given layers over 256 ids on
// be, its random weights drawn there from seed.
func trainModel(t *testing.T, be *Backend, layers int, seed uint64) *policy.Model {
	t.Helper()
	cfg := policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 256, HiddenSize: 64, IntermediateSize: 96,
		NumHiddenLayers: layers, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 16,
		MaxPositionEmbeddings: 128, RMSNormEps: 1e-6, RopeTheta: 1e4, TieWordEmbeddings: true,
	}
	m, err := policy.New(cfg, seed, policy.WithBackend(be), policy.WithBackendInit())
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// stepCounts trains a Qwen3-shaped model of the given layers on the CUDA
// backend — forward with gradients, backward from token-mean NLL
// gradients, ClipGradNorm, AdamW on the device, ZeroGrad — once to warm
// the allocator and the weight copies, then once more counted.
func stepCounts(t *testing.T, layers int, lens []int) Counters {
	t.Helper()
	be := newOrSkip(t, WithPrecision(BF16))
	m := trainModel(t, be, layers, 1)
	vocab := m.Config().VocabSize
	opt, err := m.NewDeviceAdamW(policy.AdamWConfig{LR: 1e-3})
	require.NoError(t, err)
	var toks [][]int
	var grads [][]float32
	for b, n := range lens {
		seq, g := make([]int, n), make([]float32, n)
		for i := range seq {
			seq[i] = (7*b + 13*i) % vocab
			if i > 0 {
				g[i] = -0.01
			}
		}
		toks, grads = append(toks, seq), append(grads, g)
	}
	ctx := context.Background()
	step := func() {
		_, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: toks}, true)
		require.NoError(t, err)
		require.NoError(t, back(ctx, grads, nil))
		_, err = opt.ClipGradNorm(1e-3) // small enough to scale: the Scale launches are counted
		require.NoError(t, err)
		_, err = opt.Step()
		require.NoError(t, err)
		require.NoError(t, opt.ZeroGrad())
	}
	step()
	require.NoError(t, be.ResetCounters())
	step()
	c, err := be.Counters()
	require.NoError(t, err)
	return c
}

// TestTrainStepStructure counts what one training step asks of the
// driver, at 1 and 3 layers, and holds it to bounds derived from the
// shape: T = 48 tokens in two sequences of 24, 4 query and 2 KV heads of
// 16, tensor-core attention (tiles of 64 query or key rows).
//
// Host-to-device copies, each made once per step whatever the layers:
// forward — one asynchronous copy of what its calls staged (token ids,
// targets and positions, 4T = 192 bytes each, and RoPE's frequencies,
// 4·16/2 = 32 bytes, each in a 256-byte slot of the step's block: 1,024
// bytes), at the round trip of its first download; attention's query
// tiles (one tile of 16 bytes per sequence: 32, a plain copy at their
// first use); backward — dL/dlogp (4T, Upload), one asynchronous copy of
// its staged targets (a 256-byte slot) and token ids grouped by id for
// the embedding's gradient (embeddingGroups: the 48 distinct ids, 49
// offsets and the 48 positions, 580 bytes in a 1,024-byte slot; a slot
// is a power of two, stageSlot) at the gradient norm's round trip, key
// tiles (one of 24 bytes per sequence: 48, plain). 5 copies, 2 of them
// asynchronous: 1,024 + 32 + 4T + 1,280 + 48 = 2,576 bytes. Device-to-host copies:
// log-probs and entropies (4T each) and the gradient norm (8 bytes): 3
// copies, 392 bytes. So 6 host synchronizations (3 plain uploads, 3
// downloads), and no cuMemAlloc/Free once the allocator is warm.
// None of these has a term per layer: the positions, spans and tiles
// are uploaded once per batch (backend.Rows), not by each layer's RoPE
// and attention call (11 copies per layer before), so the device never
// waits for the host mid-step.
//
// Kernels and products do grow with the layers: 7 projections, each one
// product forward and two backward (dx, dW), so 21 cuBLAS products per
// layer, and the kernel launches per layer ((launches at 3 − at 1)/2)
// stay under a ceiling that a change adding passes over the activations
// would cross.
func TestTrainStepStructure(t *testing.T) {
	lens := []int{24, 24}
	const T = 48
	counts := map[int]Counters{}
	for _, layers := range []int{1, 3} {
		c := stepCounts(t, layers, lens)
		t.Logf("%d layers: %d launches, %d products, %d H2D (%d B), %d D2H (%d B), %d host syncs", layers,
			c.Launches, c.Gemms, c.HtoD, c.HtoDBytes, c.DtoH, c.DtoHBytes, c.HostSyncs())
		name := fmt.Sprintf("%d layers", layers)
		require.Equal(t, uint64(5), c.HtoD, name)
		require.Equal(t, uint64(2), c.HtoDAsync, name)
		require.Equal(t, uint64(4*256+32+4*T+256+1024+48), c.HtoDBytes, name)
		require.Equal(t, uint64(3), c.DtoH, name)
		require.Equal(t, uint64(8*T+8), c.DtoHBytes, name)
		require.Zero(t, c.DeviceAllocs, name+": cuMemAlloc")
		require.Zero(t, c.DeviceFrees, name+": cuMemFree")
		require.Zero(t, c.StreamSyncs, name+": stream syncs")
		require.Equal(t, uint64(6), c.HostSyncs(), name)
		counts[layers] = c
	}
	require.Equal(t, uint64(2*21), counts[3].Gemms-counts[1].Gemms, "products per layer")
	d := counts[3].Launches - counts[1].Launches
	require.Zero(t, d%2)
	perLayer := d / 2
	require.LessOrEqual(t, perLayer, uint64(90), "kernel launches per layer")
	t.Logf("per layer: %d kernel launches, 21 products", perLayer)
	// The optimizer (issue #37): one fused pass over a table of every
	// tensor, and a two-stage gradient norm, whatever the number of
	// tensors — 3 layers have 9 × 2 more tensors than 1, and launch the
	// optimizer's kernels exactly as often. Per step: ClipGradNorm's norm
	// (grad_sumsq_partial, grad_sumsq_finish) and one opt_pass for the
	// clip's Scale, Step and ZeroGrad together.
	for _, k := range []string{"opt_pass", "grad_sumsq_partial", "grad_sumsq_finish"} {
		require.NotZero(t, counts[1].Kernels[k], k)
		require.Equal(t, counts[1].Kernels[k], counts[3].Kernels[k], "%s launches grow with the tensors", k)
	}
	for _, k := range []string{"adamw", "sumsq", "scale_f32"} {
		require.Zero(t, counts[3].Kernels[k], "per-tensor optimizer kernel %s", k)
	}
	for k, n := range counts[3].Sub(counts[1]).Kernels {
		t.Logf("  per layer %-22s %d", k, n/2)
	}
}

// TestTrainingRunToRun (issue #35, item 4): three training steps of a
// Qwen3-shaped model in bf16 — tied embedding with repeated token ids,
// tensor-core attention, the fused optimizer — twice from the same seed
// on fresh backends end with the same weights, bit for bit. On a GPU it
// checks that nothing reduces in an order that changes from run to run
// (float atomics, a nondeterministic cuBLAS algorithm).
func TestTrainingRunToRun(t *testing.T) {
	run := func() map[string][]float32 {
		m := trainModel(t, newOrSkip(t, WithPrecision(BF16)), 2, 7)
		opt, err := m.NewDeviceAdamW(policy.AdamWConfig{LR: 1e-2})
		require.NoError(t, err)
		var toks [][]int
		var grads [][]float32
		for b, n := range []int{40, 33, 17} {
			seq, g := make([]int, n), make([]float32, n)
			for i := range seq {
				seq[i] = (5*b + 3*i) % 11 // 11 ids, each many times
				g[i] = -0.02 * float32(1+i%3)
			}
			toks, grads = append(toks, seq), append(grads, g)
		}
		ctx := context.Background()
		for range 3 {
			_, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: toks}, true)
			require.NoError(t, err)
			require.NoError(t, back(ctx, grads, nil))
			_, err = opt.ClipGradNorm(1)
			require.NoError(t, err)
			_, err = opt.Step()
			require.NoError(t, err)
			require.NoError(t, opt.ZeroGrad())
		}
		out := map[string][]float32{}
		for _, p := range m.Params() {
			out[p.Name] = append([]float32(nil), p.Data...)
		}
		return out
	}
	first, second := run(), run()
	require.NotEmpty(t, first)
	for name, w := range first {
		require.Equal(t, w, second[name], "%s differs between two runs", name)
	}
}
