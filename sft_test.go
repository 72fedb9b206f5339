package agentrl_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The SFT sequence over "abcd": a b c d a b c a, trained on positions 2,
// 3, 6 and 7 (tokens c d c a). The prediction at position t reads row
// tok[t-1] of the table, so the trained positions use rows b (t = 2, 6:
// both times "c") and c (t = 3: "d", t = 7: "a"); rows a and d are read
// only at untrained positions (t = 1, 5 and t = 4).
var (
	sftIDs  = []int{0, 1, 2, 3, 0, 1, 2, 0}
	sftMask = []float32{0, 0, 1, 1, 0, 0, 1, 1}
)

func sftConfig(batch int) agentrl.SFTConfig {
	return agentrl.SFTConfig{BatchSize: batch, Optimizer: policy.AdamWConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}}
}

func TestSFTFirstStepByHand(t *testing.T) {
	m := newTabular(banditAlphabet)
	tr, err := agentrl.NewSFTTrainer(sftConfig(1), agentrl.SFTParts{Policy: m, Data: []agentrl.SFTSample{{IDs: sftIDs, Mask: sftMask}}})
	require.NoError(t, err)
	st, err := tr.Step(context.Background())
	require.NoError(t, err)
	// Uniform start: every trained token has log-prob −ln 4.
	assert.InDelta(t, math.Log(4), st.Loss, 1e-6)
	assert.Equal(t, 4, st.Tokens)
	assert.Equal(t, 8, st.SeqTokens)
	// dL/dz_k of row b = −(1/4)·Σ_{t=2,6}(δ(k,c) − 1/4): negative for c,
	// positive for the others; row c: negative for d and a, positive for
	// b and c. AdamW's first update is lr·sign(g) (to ε): row b becomes
	// (−lr, −lr, +lr, −lr) and row c (+lr, −lr, −lr, +lr).
	lr := float32(0.1)
	row := func(r int) []float32 { return m.w[r*4 : r*4+4] }
	assert.InDeltaSlice(t, toF64([]float32{-lr, -lr, lr, -lr}), toF64(row(1)), 1e-6)
	assert.InDeltaSlice(t, toF64([]float32{lr, -lr, -lr, lr}), toF64(row(2)), 1e-6)
	// Rows a and d feed only masked-out tokens: zero gradient, unchanged.
	assert.Equal(t, []float32{0, 0, 0, 0}, row(0))
	assert.Equal(t, []float32{0, 0, 0, 0}, row(3))
}

// TestSFTLossDecreases: the loss falls towards its floor. Row b can learn
// to always say c (loss 0 at t = 2, 6), but row c must say d once and a
// once, so its best is p = ½ each: the minimum mean loss is (2·ln 2)/4.
func TestSFTLossDecreases(t *testing.T) {
	ctx := context.Background()
	m := newTabular(banditAlphabet)
	var log bytes.Buffer
	cfg := sftConfig(1)
	cfg.Epochs = 60
	cfg.MaxGradNorm = 1
	data := []agentrl.SFTSample{{IDs: sftIDs, Mask: sftMask}}
	tr, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: m, Data: data, Metrics: metrics.NewLogger(&log)})
	require.NoError(t, err)
	var losses []float64
	require.NoError(t, tr.Train(ctx, func(s agentrl.SFTMetrics) error {
		losses = append(losses, s.Loss)
		return nil
	}))
	require.Len(t, losses, 60)
	final, err := tr.Loss(ctx, data)
	require.NoError(t, err)
	floor := math.Log(2) / 2
	assert.Less(t, final, losses[0]/2)
	assert.Less(t, final, floor+0.05)
	assert.GreaterOrEqual(t, final, floor-1e-6, "no model beats the entropy of row c's targets")
	for i := 1; i < len(losses); i++ {
		assert.LessOrEqual(t, losses[i], losses[i-1]+1e-6, "loss at step %d rose", i+1)
	}
	rows, err := metrics.Read(&log)
	require.NoError(t, err)
	assert.Len(t, rows, 60)
	assert.InDelta(t, losses[59], rows[59].Values["train/loss"], 1e-12)
	// Train after the last epoch does nothing more.
	require.NoError(t, tr.Train(ctx, nil))
	assert.Equal(t, 60, tr.StepsDone())
}

// TestSFTMicroBatches: the loss is normalised by the batch's trained
// tokens before the micro-batches are cut, so accumulating micro-batches
// of 1 gives the update of one pass over the batch.
func TestSFTMicroBatches(t *testing.T) {
	ctx := context.Background()
	data := []agentrl.SFTSample{
		{IDs: sftIDs, Mask: sftMask},
		{IDs: []int{3, 2, 1, 0, 1}, Mask: []float32{0, 1, 1, 1, 1}},
	}
	a := newTabular(banditAlphabet)
	ta, err := agentrl.NewSFTTrainer(sftConfig(2), agentrl.SFTParts{Policy: a, Data: data})
	require.NoError(t, err)
	b := newTabular(banditAlphabet)
	cfg := sftConfig(2)
	cfg.MicroBatchSize = 1
	tb, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: b, Data: data})
	require.NoError(t, err)
	for range 3 {
		ma, err := ta.Step(ctx)
		require.NoError(t, err)
		mb, err := tb.Step(ctx)
		require.NoError(t, err)
		assert.InDelta(t, ma.Loss, mb.Loss, 1e-9)
		assert.InDelta(t, ma.GradNorm, mb.GradNorm, 1e-6)
	}
	assert.InDeltaSlice(t, toF64(a.w), toF64(b.w), 1e-6)
}

func TestSFTBadSamples(t *testing.T) {
	m := newTabular(banditAlphabet)
	cases := []struct {
		name   string
		sample agentrl.SFTSample
		want   string
	}{
		{"length mismatch", agentrl.SFTSample{IDs: []int{0, 1}, Mask: []float32{0}}, "2 ids but 1 mask"},
		{"mask not 0/1", agentrl.SFTSample{IDs: []int{0, 1}, Mask: []float32{0, 0.5}}, "Mask[1]"},
		{"NaN mask", agentrl.SFTSample{IDs: []int{0, 1}, Mask: []float32{0, float32(math.NaN())}}, "Mask[1]"},
		{"nothing to train", agentrl.SFTSample{IDs: []int{0, 1}, Mask: []float32{1, 0}}, "nothing to train"},
		{"empty", agentrl.SFTSample{}, "nothing to train"},
		{"negative id", agentrl.SFTSample{IDs: []int{0, -1}, Mask: []float32{0, 1}}, "IDs[1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := []agentrl.SFTSample{{IDs: sftIDs, Mask: sftMask}, c.sample}
			_, err := agentrl.NewSFTTrainer(sftConfig(1), agentrl.SFTParts{Policy: m, Data: data})
			require.ErrorIs(t, err, agentrl.ErrTrainer)
			assert.Contains(t, err.Error(), "sample 1")
			assert.Contains(t, err.Error(), c.want)
		})
	}
	_, err := agentrl.NewSFTTrainer(sftConfig(2), agentrl.SFTParts{Policy: m, Data: []agentrl.SFTSample{{IDs: sftIDs, Mask: sftMask}}})
	require.ErrorIs(t, err, agentrl.ErrTrainerConfig)
	_, err = agentrl.NewSFTTrainer(sftConfig(1), agentrl.SFTParts{Policy: nil, Data: []agentrl.SFTSample{{IDs: sftIDs, Mask: sftMask}}})
	require.ErrorIs(t, err, agentrl.ErrTrainer)

	// A token outside the model's vocabulary is the model's error, wrapped.
	tr, err := agentrl.NewSFTTrainer(sftConfig(1), agentrl.SFTParts{Policy: m, Data: []agentrl.SFTSample{{IDs: []int{0, 9}, Mask: []float32{0, 1}}}})
	require.NoError(t, err)
	_, err = tr.Step(context.Background())
	require.ErrorIs(t, err, policy.ErrInput)
	assert.Zero(t, tr.StepsDone())
}

func TestSFTTrainStopsOnCallbackAndContext(t *testing.T) {
	m := newTabular(banditAlphabet)
	cfg := sftConfig(1)
	cfg.Epochs = 5
	tr, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: m, Data: []agentrl.SFTSample{{IDs: sftIDs, Mask: sftMask}}})
	require.NoError(t, err)
	stop := errors.New("enough")
	err = tr.Train(context.Background(), func(s agentrl.SFTMetrics) error {
		if s.Step == 2 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	assert.Equal(t, 2, tr.StepsDone())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, tr.Train(ctx, nil), context.Canceled)
}

func TestSFTSamplesFrom(t *testing.T) {
	got := agentrl.SFTSamplesFrom([]dataset.SFTExample{{InputIDs: []int{1, 2}, LossMask: []float32{0, 1}}})
	assert.Equal(t, []agentrl.SFTSample{{IDs: []int{1, 2}, Mask: []float32{0, 1}}}, got)
}

// firstTokens records the first token of every sequence each forward
// pass with gradients trains on: the batches an SFT trainer draws.
type firstTokens struct {
	*tabular
	batches [][]int
}

func (m *firstTokens) Forward(ctx context.Context, batch lm.TokenBatch, withGrad bool) (lm.TokenStats, lm.BackwardFunc, error) {
	if withGrad {
		b := make([]int, len(batch.Tokens))
		for i, toks := range batch.Tokens {
			b[i] = toks[0]
		}
		m.batches = append(m.batches, b)
	}
	return m.tabular.Forward(ctx, batch, withGrad)
}

// TestSFTInOrder: with InOrder every epoch draws the data as laid out,
// the last short batch dropped, and a checkpoint of such a run resumes
// only a run drawing in order; without it the same seed shuffles.
func TestSFTInOrder(t *testing.T) {
	ctx := context.Background()
	data := make([]agentrl.SFTSample, 3) // sample i starts with token i
	for i := range data {
		data[i] = agentrl.SFTSample{IDs: []int{i, 0, 1}, Mask: []float32{0, 1, 1}}
	}
	draw := func(inOrder bool) ([][]int, *agentrl.SFTTrainer) {
		cfg := sftConfig(2)
		cfg.Epochs, cfg.Seed, cfg.InOrder = 2, 3, inOrder
		m := &firstTokens{tabular: newTabular(banditAlphabet)}
		tr, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: m, Data: data})
		require.NoError(t, err)
		require.NoError(t, tr.Train(ctx, nil))
		return m.batches, tr
	}
	got, inOrder := draw(true)
	assert.Equal(t, [][]int{{0, 1}, {0, 1}}, got)
	shuffled, _ := draw(false)
	require.Len(t, shuffled, 2)
	assert.NotEqual(t, got, shuffled, "seed 3 shuffles these 3 samples")

	dir := t.TempDir()
	require.NoError(t, inOrder.SaveTo(dir))
	cfg := sftConfig(2)
	cfg.Epochs, cfg.Seed = 2, 3
	other, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: newTabular(banditAlphabet), Data: data})
	require.NoError(t, err)
	err = other.LoadFrom(dir)
	require.ErrorIs(t, err, agentrl.ErrCheckpoint)
	assert.ErrorContains(t, err, "in_order true, but SFTConfig.InOrder is false")
	cfg.InOrder = true
	same, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: newTabular(banditAlphabet), Data: data})
	require.NoError(t, err)
	require.NoError(t, same.LoadFrom(dir))
	assert.Equal(t, 2, same.StepsDone())
}
