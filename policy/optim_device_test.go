package policy

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
)

// trainSteps runs n steps of L = Σ w·logp + Σ u·H on seqs with opt:
// zero, forward, backward, optional clipping, update. It returns the
// gradient norms.
func trainSteps(t *testing.T, m *Model, opt Optimizer, seqs [][]int, w, u [][]float32, n int, clip float64) []float64 {
	t.Helper()
	ctx := context.Background()
	var norms []float64
	for range n {
		require.NoError(t, opt.ZeroGrad())
		_, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs, Temperature: 0.7}, true)
		require.NoError(t, err)
		require.NoError(t, back(ctx, w, u))
		var norm float64
		if clip > 0 {
			norm, err = opt.ClipGradNorm(clip)
		} else {
			norm, err = opt.GradNorm()
		}
		require.NoError(t, err)
		norms = append(norms, norm)
		_, err = opt.Step()
		require.NoError(t, err)
	}
	return norms
}

// TestDeviceAdamWMatchesHost: the backend-resident optimizer trains the
// model exactly as AdamW over host Params does — the same gradients
// (the same kernels), the same update (backend.AdamWUpdate) — bit for
// bit without clipping; with clipping the norms are float64 sums in
// another order, equal to 1e-12, and the weights to float32 rounding.
func TestDeviceAdamWMatchesHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		clip float64
		lora bool
	}{{"no clip", 0, false}, {"clip", 0.05, false}, {"lora", 0, true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := loadGolden(t, "qwen3-tiny")
			w, u := unpack(g.seqs, g.tensors["w"]), unpack(g.seqs, g.tensors["u"])
			host, dev := loadTiny(t, "qwen3-tiny"), loadTiny(t, "qwen3-tiny")
			if tc.lora {
				for _, m := range []*Model{host, dev} {
					require.NoError(t, m.AddLoRA(LoRAConfig{Rank: 2, Alpha: 4, TargetModules: []string{LoRAAllLinear}}, 5))
				}
			}
			cfg := AdamWConfig{LR: 1e-2, WeightDecay: 0.01}
			hopt, err := NewAdamW(host.Params(), cfg)
			require.NoError(t, err)
			dopt, err := dev.NewDeviceAdamW(cfg)
			require.NoError(t, err)
			hn := trainSteps(t, host, hopt, g.seqs, w, u, 3, tc.clip)
			dn := trainSteps(t, dev, dopt, g.seqs, w, u, 3, tc.clip)
			for i := range hn {
				assert.InDelta(t, hn[i], dn[i], 1e-12*hn[i], "grad norm of step %d", i+1)
			}
			if tc.clip > 0 {
				assert.Greater(t, hn[0], tc.clip, "the clip acts")
			}
			assert.Equal(t, int64(3), dopt.Steps())
			hp, dp := host.Params(), dev.Params()
			require.Len(t, dp, len(hp))
			for i := range hp {
				if tc.clip == 0 {
					assert.Equal(t, hp[i].Data, dp[i].Data, hp[i].Name)
					assert.Equal(t, hp[i].Grad, dp[i].Grad, hp[i].Name)
				} else {
					assert.Less(t, maxAbsDiff(hp[i].Data, dp[i].Data), 1e-6, hp[i].Name)
				}
			}
		})
	}
}

// TestDeviceAdamWHostViews: Params, Save and the state file see the
// backend's current values, and writes to Params take effect.
func TestDeviceAdamWHostViews(t *testing.T) {
	ctx := context.Background()
	g := loadGolden(t, "qwen3-tiny")
	w, u := unpack(g.seqs, g.tensors["w"]), unpack(g.seqs, g.tensors["u"])
	m := loadTiny(t, "qwen3-tiny")
	before := slices.Clone(m.Params()[1].Data)
	opt, err := m.NewDeviceAdamW(AdamWConfig{LR: 1e-2})
	require.NoError(t, err)
	trainSteps(t, m, opt, g.seqs, w, u, 2, 0)
	p, err := opt.Params()
	require.NoError(t, err)
	assert.NotEqual(t, before, p[1].Data, "Params shows the trained weights")

	// Save writes them: a reload computes the same log-probs.
	dir := t.TempDir()
	require.NoError(t, m.Save(dir, lm.SaveOptions{}))
	re, err := Load(dir)
	require.NoError(t, err)
	defer re.Close()
	a, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs}, false)
	require.NoError(t, err)
	b, _, err := re.Forward(ctx, lm.TokenBatch{Tokens: g.seqs}, false)
	require.NoError(t, err)
	assert.Equal(t, a.LogProbs, b.LogProbs)

	// LoadParams writes the weights (as a checkpoint restore does), and a
	// failing load leaves the backend's values in place.
	require.NoError(t, opt.LoadParams(func(p []lm.Param) error {
		copy(p[1].Data, before)
		return nil
	}))
	require.ErrorIs(t, opt.LoadParams(func(p []lm.Param) error {
		clear(p[1].Data)
		return ErrInput
	}), ErrInput)
	p, err = opt.Params()
	require.NoError(t, err)
	assert.Equal(t, before, p[1].Data, "the failed load's writes are dropped")
	c, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs}, false)
	require.NoError(t, err)
	assert.NotEqual(t, a.LogProbs, c.LogProbs)

	// The state file continues on a host AdamW bit for bit, and back.
	sdir := t.TempDir()
	require.NoError(t, opt.SaveStateFile(sdir))
	twin := loadTiny(t, "qwen3-tiny")
	tp := twin.Params()
	p, err = opt.Params()
	require.NoError(t, err)
	for i, x := range p {
		copy(tp[i].Data, x.Data)
	}
	hopt, err := NewAdamW(tp, AdamWConfig{LR: 1e-2})
	require.NoError(t, err)
	require.NoError(t, hopt.LoadStateFile(sdir))
	assert.Equal(t, int64(2), hopt.Steps())
	trainSteps(t, m, opt, g.seqs, w, u, 1, 0)
	trainSteps(t, twin, hopt, g.seqs, w, u, 1, 0)
	p, err = opt.Params()
	require.NoError(t, err)
	for i, x := range p {
		assert.Equal(t, twin.Params()[i].Data, x.Data, x.Name)
	}
	require.NoError(t, hopt.SaveStateFile(sdir))
	require.NoError(t, opt.LoadStateFile(sdir))
	assert.Equal(t, int64(3), opt.Steps())
	assert.Error(t, opt.LoadStateFile(filepath.Join(sdir, "missing")))

	// The model's own Params hands the training back to the host: the
	// device optimizer ends, and an AdamW over the slices trains on.
	hp := m.Params()
	_, err = opt.Step()
	assert.ErrorIs(t, err, ErrInput)
	_, err = opt.Params()
	assert.ErrorIs(t, err, ErrInput)
	hopt2, err := NewAdamW(hp, AdamWConfig{LR: 1e-2})
	require.NoError(t, err)
	prev := slices.Clone(hp[0].Data)
	norms := trainSteps(t, m, hopt2, g.seqs, w, u, 1, 0)
	assert.Greater(t, norms[0], 0.0, "the host sees the gradients")
	assert.NotEqual(t, prev, hp[0].Data)
}

// hiddenOptimizer is a backend without backend.Optimizer.
type hiddenOptimizer struct{ backend.Backend }

func TestDeviceAdamWErrors(t *testing.T) {
	g := loadGolden(t, "qwen3-tiny")
	t.Run("backend without optimizer", func(t *testing.T) {
		m := loadTiny(t, "qwen3-tiny", WithBackend(hiddenOptimizer{cpu.New()}))
		_, err := m.NewDeviceAdamW(AdamWConfig{})
		assert.ErrorIs(t, err, errors.ErrUnsupported)
	})
	t.Run("a second one replaces the first; an adapter ends it", func(t *testing.T) {
		m := loadTiny(t, "qwen3-tiny")
		first, err := m.NewDeviceAdamW(AdamWConfig{})
		require.NoError(t, err)
		second, err := m.NewDeviceAdamW(AdamWConfig{})
		require.NoError(t, err)
		_, err = first.Step()
		assert.ErrorIs(t, err, ErrInput)
		_, err = second.Step()
		assert.NoError(t, err)
		sp, err := second.Params()
		require.NoError(t, err)
		trained := slices.Clone(sp[2].Data)
		require.NoError(t, m.AddLoRA(LoRAConfig{Rank: 2}, 1))
		_, err = second.Step()
		assert.ErrorIs(t, err, ErrInput)
		// The base keeps the full stage's weights; B = 0 changes nothing.
		require.NoError(t, m.MergeLoRA())
		require.NoError(t, m.UnmergeLoRA())
		var base []float32
		for _, p := range m.w.base {
			if p.spec.Name == m.w.base[2].spec.Name {
				base = p.data
			}
		}
		assert.Equal(t, trained, base)
		third, err := m.NewDeviceAdamW(AdamWConfig{})
		require.NoError(t, err)
		assert.Len(t, third.params, len(m.Params()), "the adapters alone")
	})
	t.Run("bad config", func(t *testing.T) {
		m := loadTiny(t, "qwen3-tiny")
		_, err := m.NewDeviceAdamW(AdamWConfig{LR: -1})
		assert.Error(t, err)
	})
	t.Run("non-finite gradient", func(t *testing.T) {
		m := loadTiny(t, "qwen3-tiny")
		opt, err := m.NewDeviceAdamW(AdamWConfig{})
		require.NoError(t, err)
		require.NoError(t, opt.LoadParams(func(p []lm.Param) error {
			p[0].Grad[3] = float32(math.Inf(1))
			return nil
		}))
		_, err = opt.ClipGradNorm(1)
		assert.ErrorIs(t, err, ErrNonFinite)
		norm, err := opt.GradNorm()
		require.NoError(t, err)
		assert.True(t, math.IsInf(norm, 1))
		op, err := opt.Params()
		require.NoError(t, err)
		assert.True(t, math.IsInf(float64(op[0].Grad[3]), 1), "left unchanged")
		_, err = opt.ClipGradNorm(0)
		assert.Error(t, err)
	})
	t.Run("closed model", func(t *testing.T) {
		m, err := Load(filepath.Join("testdata", "model", "qwen3-tiny"))
		require.NoError(t, err)
		opt, err := m.NewDeviceAdamW(AdamWConfig{})
		require.NoError(t, err)
		require.NoError(t, m.Close())
		_, err = opt.Step()
		assert.ErrorIs(t, err, ErrInput)
		assert.ErrorIs(t, opt.ZeroGrad(), ErrInput)
		_, _, err = m.Forward(context.Background(), lm.TokenBatch{Tokens: g.seqs}, false)
		assert.Error(t, err)
	})
}

// TestDeviceAdamWStages: a new optimizer on a resident model (RL after
// SFT) starts from the weights the first one trained, not from the host
// copies of before; an adapter attached after full training keeps them
// as its base; a failed LoadAdapter ends nothing.
func TestDeviceAdamWStages(t *testing.T) {
	ctx := context.Background()
	g := loadGolden(t, "qwen3-tiny")
	w, u := unpack(g.seqs, g.tensors["w"]), unpack(g.seqs, g.tensors["u"])
	m := loadTiny(t, "qwen3-tiny")
	fresh, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs}, false)
	require.NoError(t, err)
	first, err := m.NewDeviceAdamW(AdamWConfig{LR: 1e-2})
	require.NoError(t, err)
	trainSteps(t, m, first, g.seqs, w, u, 3, 0)
	trained, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs}, false)
	require.NoError(t, err)
	require.NotEqual(t, fresh.LogProbs, trained.LogProbs)

	second, err := m.NewDeviceAdamW(AdamWConfig{LR: 1e-2})
	require.NoError(t, err)
	again, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs}, false)
	require.NoError(t, err)
	assert.Equal(t, trained.LogProbs, again.LogProbs, "the second stage starts where the first ended")

	// A failed load changes nothing: the optimizer goes on.
	bad := t.TempDir()
	assert.Error(t, m.LoadAdapter(bad))
	trainSteps(t, m, second, g.seqs, w, u, 1, 0)
	stepped, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs}, false)
	require.NoError(t, err)

	// An adapter (B = 0) on top keeps the trained weights as its base.
	require.NoError(t, m.AddLoRA(LoRAConfig{Rank: 2, TargetModules: []string{LoRAAllLinear}}, 1))
	with, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs}, false)
	require.NoError(t, err)
	assert.Equal(t, stepped.LogProbs, with.LogProbs)
}

// TestDeviceAdamWAccumulation: over several accumulated backward passes
// the resident gradients equal the host's to float32 rounding (a tied
// embedding's two contributions are summed in another order).
func TestDeviceAdamWAccumulation(t *testing.T) {
	ctx := context.Background()
	g := loadGolden(t, "qwen3-tiny")
	w, u := unpack(g.seqs, g.tensors["w"]), unpack(g.seqs, g.tensors["u"])
	host, dev := loadTiny(t, "qwen3-tiny"), loadTiny(t, "qwen3-tiny")
	hopt, err := NewAdamW(host.Params(), AdamWConfig{})
	require.NoError(t, err)
	dopt, err := dev.NewDeviceAdamW(AdamWConfig{})
	require.NoError(t, err)
	for _, m := range []*Model{host, dev} {
		for range 3 {
			_, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs, Temperature: 0.7}, true)
			require.NoError(t, err)
			require.NoError(t, back(ctx, w, u))
		}
	}
	hp, err := hopt.Params()
	require.NoError(t, err)
	dp, err := dopt.Params()
	require.NoError(t, err)
	for i := range hp {
		// Three passes of the single-pass gradients checked against torch
		// (model_test.go); float32 sums of three terms differ by a few ulps.
		assert.Less(t, relErr(dp[i].Grad, hp[i].Grad), 1e-6, hp[i].Name)
	}
}

// countingBackend counts the uploads of whole weight tensors.
type countingBackend struct {
	backend.Backend
	uploads int
}

func (c *countingBackend) Upload(dst backend.Buffer, off int, src []float32) error {
	c.uploads++
	return c.Backend.Upload(dst, off, src)
}

// TestWeightsUploadedOnlyWhenTheyCanChange: a model that only computes
// (a server's, an evaluation's) uploads its weights once; once Params has
// handed the host slices out, every computation uploads them (a holder
// may write them), and writes through them take effect.
func TestWeightsUploadedOnlyWhenTheyCanChange(t *testing.T) {
	ctx := context.Background()
	be := &countingBackend{Backend: cpu.New()}
	m := loadTiny(t, "qwen3-tiny", WithBackend(be))
	seqs := loadGolden(t, "qwen3-tiny").seqs
	nw := len(m.w.base)
	forward := func() lm.TokenStats {
		st, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs}, false)
		require.NoError(t, err)
		return st
	}
	be.uploads = 0
	first := forward()
	assert.Equal(t, nw, be.uploads, "the first computation uploads every weight")
	be.uploads = 0
	forward()
	_, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: seqs[0][:3], Params: lm.SampleParams{MaxNewTokens: 2}}})
	require.NoError(t, err)
	_, err = m.Logits(seqs[0])
	require.NoError(t, err)
	assert.Zero(t, be.uploads, "no weight can have changed")

	p := m.Params()
	p[1].Data[0] += 1
	be.uploads = 0
	changed := forward()
	assert.Equal(t, nw, be.uploads, "handed out: uploaded before each computation")
	assert.NotEqual(t, first.LogProbs, changed.LogProbs, "the write took effect")
}

// TestClone: a clone computes what its source does, on its own weights,
// without handing the source's out; a model with an adapter is refused.
func TestClone(t *testing.T) {
	ctx := context.Background()
	be := &countingBackend{Backend: cpu.New()}
	m := loadTiny(t, "qwen3-tiny", WithBackend(be))
	seqs := loadGolden(t, "qwen3-tiny").seqs
	a, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs}, false)
	require.NoError(t, err)
	c, err := m.Clone()
	require.NoError(t, err)
	defer c.Close()
	b, _, err := c.Forward(ctx, lm.TokenBatch{Tokens: seqs}, false)
	require.NoError(t, err)
	assert.Equal(t, a.LogProbs, b.LogProbs)
	assert.Equal(t, m.EOSTokenIDs(), c.EOSTokenIDs())
	c.Params()[1].Data[0] += 1
	be.uploads = 0
	again, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs}, false)
	require.NoError(t, err)
	assert.Equal(t, a.LogProbs, again.LogProbs, "the source keeps its weights")
	assert.Zero(t, be.uploads, "and they were not handed out")

	require.NoError(t, c.AddLoRA(LoRAConfig{Rank: 2}, 1))
	_, err = c.Clone()
	assert.ErrorIs(t, err, ErrLoRA)
}

// TestDeviceAdamWReduceGrads: what ReduceGrads writes into the
// gradient buffers is the gradient from then on. Doubling every element
// (as a sum over two ranks with equal gradients would) doubles the norm
// exactly: scaling by a power of two rounds nothing.
func TestDeviceAdamWReduceGrads(t *testing.T) {
	ctx := context.Background()
	g := loadGolden(t, "qwen3-tiny")
	w, u := unpack(g.seqs, g.tensors["w"]), unpack(g.seqs, g.tensors["u"])
	m := loadTiny(t, "qwen3-tiny")
	opt, err := m.NewDeviceAdamW(AdamWConfig{LR: 1e-2})
	require.NoError(t, err)
	require.NoError(t, opt.ZeroGrad())
	_, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs, Temperature: 0.7}, true)
	require.NoError(t, err)
	require.NoError(t, back(ctx, w, u))
	before, err := opt.GradNorm()
	require.NoError(t, err)
	var count int
	require.NoError(t, opt.ReduceGrads(func(be backend.Backend, grads []backend.Buffer) error {
		count = len(grads)
		for _, b := range grads {
			h := make([]float32, b.Len())
			if err := be.Download(h, b, 0); err != nil {
				return err
			}
			for i := range h {
				h[i] *= 2
			}
			if err := be.Upload(b, 0, h); err != nil {
				return err
			}
		}
		return nil
	}))
	after, err := opt.GradNorm()
	require.NoError(t, err)
	assert.Equal(t, 2*before, after)
	ps, err := opt.Params()
	require.NoError(t, err)
	assert.Len(t, ps, count, "one buffer per trainable parameter, in Params order")
	wantErr := errors.New("reduce failed")
	assert.ErrorIs(t, opt.ReduceGrads(func(backend.Backend, []backend.Buffer) error { return wantErr }), wantErr)
}
