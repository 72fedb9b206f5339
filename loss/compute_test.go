package loss_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/agentrl/agentrl/loss"
)

func mat(rows, cols int, v ...float32) *tensor.Dense {
	return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(v))
}

// handBatch is the 2×3 batch the hand-computed cases share:
//
//	token   logπ   logπ_old  δ = logπ−old    r = e^δ     A    mask
//	(0,0)   −1     −1         0              1           1    1
//	(0,1)   −0.5   −1         0.5            1.648721    2    1
//	(0,2)   −1     −1+ln2    −ln2            0.5        −1    1
//	(1,0)   −0.5   −2         1.5            4.481689   −1    1
//	(1,1), (1,2): padding (mask 0; values arbitrary)
//
// With ε_low = 0.2, ε_high = 0.28, c = 3, vanilla PPO gives per token
//
//	(0,0): pg1 = −1·1 = −1, pg2 = −1·clip(1) = −1 → −1, unclipped: dL/dlogπ = −A·r = −1 (before aggregation)
//	(0,1): pg1 = −2·1.648721 = −3.297443, pg2 = −2·1.28 = −2.56 → max −2.56, clipped: gradient 0
//	(0,2): pg1 = 0.5, pg2 = clip(0.5) = 0.8 → 0.8, clipped; dual clip min(3, 0.8) = 0.8: gradient 0
//	(1,0): pg1 = 4.481689, pg2 = 1.28 → 4.481689; dual clip min(−A·c = 3, 4.481689) = 3: gradient 0
func handBatch() loss.Batch {
	return loss.Batch{
		LogProbs:    mat(2, 3, -1, -0.5, -1, -0.5, -7, 0),
		OldLogProbs: mat(2, 3, -1, -1, float32(-1+math.Ln2), -2, 3, -9),
		Advantages:  mat(2, 3, 1, 2, -1, -1, 5, -4),
		Mask:        mat(2, 3, 1, 1, 1, 1, 0, 0),
	}
}

var handCfg = loss.Config{ClipLow: 0.2, ClipHigh: 0.28, ClipC: 3}

func grads(r loss.Result) []float64 {
	out := make([]float64, 0, 6)
	for _, v := range r.GradLogProbs.Float32s() {
		out = append(out, float64(v))
	}
	return out
}

func TestVanillaByHand(t *testing.T) {
	for _, tc := range []struct {
		name string
		agg  loss.Agg
		div  float64
		loss float64
		g00  float64 // dL/dlogπ at (0,0); every other gradient is 0
	}{
		// token-mean over N = 4 tokens: (−1 − 2.56 + 0.8 + 3)/4 = 0.24/4
		{"token-mean", loss.AggTokenMean, 0, 0.06, -1.0 / 4},
		// row sums −2.76 and 3, mean over 2 rows: 0.24/2; (0,0) weight 1/2
		{"seq-mean-token-sum", loss.AggSeqMeanTokenSum, 0, 0.12, -1.0 / 2},
		// row means −2.76/3 = −0.92 and 3/1, mean over rows: 1.04; (0,0) weight 1/(3·2)
		{"seq-mean-token-mean", loss.AggSeqMeanTokenMean, 0, 1.04, -1.0 / 6},
		// seq-mean-token-sum divided by T = 3: 0.04; weight 1/(2·3)
		{"seq-mean-token-sum-norm", loss.AggSeqMeanTokenSumNorm, 0, 0.04, -1.0 / 6},
		// ... by an explicit divisor 4: 0.03; weight 1/(2·4)
		{"seq-mean-token-sum-norm/4", loss.AggSeqMeanTokenSumNorm, 4, 0.03, -1.0 / 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := handCfg
			cfg.Agg, cfg.AggDivisor = tc.agg, tc.div
			r, err := loss.Compute(cfg, handBatch())
			require.NoError(t, err)
			assert.InDelta(t, tc.loss, r.Loss, 1e-6)
			assert.InDelta(t, tc.loss, r.Metrics["pg_loss"], 1e-6)
			assert.InDeltaSlice(t, []float64{tc.g00, 0, 0, 0, 0, 0}, grads(r), 1e-7)
			// (0,1) and (0,2) are clipped: 2 of 4; (1,0) hits the dual clip: 1 of 4
			assert.InDelta(t, 0.5, r.Metrics["pg_clipfrac"], 1e-7)
			assert.InDelta(t, 0.25, r.Metrics["pg_clipfrac_lower"], 1e-7)
			// ppo_kl = mean(−δ) = −(0 + 0.5 − ln2 + 1.5)/4
			assert.InDelta(t, -(2-math.Ln2)/4, r.Metrics["ppo_kl"], 1e-6)
		})
	}
}

func TestModesByHand(t *testing.T) {
	cfg := handCfg
	t.Run("gpg", func(t *testing.T) {
		cfg := cfg
		cfg.Mode = loss.ModeGPG
		r, err := loss.Compute(cfg, handBatch())
		require.NoError(t, err)
		// −logπ·A: 1 + 1 − 1 − 0.5 = 0.5, over 4 tokens; gradient −A/4
		assert.InDelta(t, 0.125, r.Loss, 1e-7)
		assert.InDeltaSlice(t, []float64{-0.25, -0.5, 0.25, 0.25, 0, 0}, grads(r), 1e-7)
	})
	t.Run("cispo", func(t *testing.T) {
		cfg := cfg
		cfg.Mode = loss.ModeCISPO
		b := loss.Batch{LogProbs: mat(1, 2, -1, -0.5), OldLogProbs: mat(1, 2, -1, -1), Advantages: mat(1, 2, 1, 1), Mask: mat(1, 2, 1, 1)}
		r, err := loss.Compute(cfg, b)
		require.NoError(t, err)
		// w = sg(clip(r)) = [1, clip(e^0.5) = 1.28]; −w·A·logπ = [1, 0.64], mean 0.82; gradient −w·A/2
		assert.InDelta(t, 0.82, r.Loss, 1e-7)
		assert.InDeltaSlice(t, []float64{-0.5, -0.64}, grads(r), 1e-7)
		assert.InDelta(t, 0.5, r.Metrics["pg_clipfrac"], 1e-7)
	})
	t.Run("sapo", func(t *testing.T) {
		cfg := cfg
		cfg.Mode = loss.ModeSAPO
		// r = 1: gate = σ(0)·4/τ = 2/τ; τ = 1 for A = 1, 1.05 for A = −1.
		// Row means (one token each): −2 and +2/1.05; loss = their mean.
		// d gate/d logπ at r = 1 is σ'(0)·τ·4/τ = 1, so the gradient is −A/2.
		b := loss.Batch{LogProbs: mat(2, 1, -1, -2), OldLogProbs: mat(2, 1, -1, -2), Advantages: mat(2, 1, 1, -1), Mask: mat(2, 1, 1, 1)}
		r, err := loss.Compute(cfg, b)
		require.NoError(t, err)
		assert.InDelta(t, (-2+2/1.05)/2, r.Loss, 1e-7)
		assert.InDeltaSlice(t, []float64{-0.5, 0.5}, grads(r), 1e-7)
	})
	t.Run("gspo", func(t *testing.T) {
		cfg := cfg
		cfg.Mode = loss.ModeGSPO
		// δ = [0.2, 0.4] (logπ − old with exact float32 values below is 0.2, 0.4 to ~1e-8);
		// s = e^0.3 = 1.3498588 > 1.28.
		b := loss.Batch{LogProbs: mat(1, 2, -0.8, -0.6), OldLogProbs: mat(1, 2, -1, -1), Mask: mat(1, 2, 1, 1)}
		// A = 1: max(−s, −1.28) = −1.28 on both tokens, clipped, no gradient
		b.Advantages = mat(1, 2, 1, 1)
		r, err := loss.Compute(cfg, b)
		require.NoError(t, err)
		assert.InDelta(t, -1.28, r.Loss, 1e-6)
		assert.InDeltaSlice(t, []float64{0, 0}, grads(r), 1e-7)
		assert.InDelta(t, 1, r.Metrics["pg_clipfrac"], 1e-7)
		// A = −1: max(s, 1.28) = s, unclipped; the token ratio s·e^(logπ−sg(logπ)) has
		// derivative s, so dL/dlogπ_t = −A·s/2 under seq-mean-token-mean
		b.Advantages = mat(1, 2, -1, -1)
		r, err = loss.Compute(cfg, b)
		require.NoError(t, err)
		assert.InDelta(t, math.Exp(0.3), r.Loss, 1e-6)
		assert.InDeltaSlice(t, []float64{math.Exp(0.3) / 2, math.Exp(0.3) / 2}, grads(r), 1e-6)
	})
	t.Run("geo_mean", func(t *testing.T) {
		cfg := cfg
		cfg.Mode = loss.ModeGeoMean
		// δ = [0.1, 0.5], A = 1: clamp to [−0.2, 0.28] gives [0.1, 0.28]; min(δ, clamped) = [0.1, 0.28];
		// ratio = e^((0.1+0.28)/2) = e^0.19; loss = −1·e^0.19.
		// Token 0 is inside the clip range: dL/dδ₀ = −e^0.19/2; token 1 is clipped: 0.
		b := loss.Batch{LogProbs: mat(1, 2, -0.9, -0.5), OldLogProbs: mat(1, 2, -1, -1), Advantages: mat(1, 2, 1, 1), Mask: mat(1, 2, 1, 1)}
		r, err := loss.Compute(cfg, b)
		require.NoError(t, err)
		assert.InDelta(t, -math.Exp(0.19), r.Loss, 1e-6)
		assert.InDeltaSlice(t, []float64{-math.Exp(0.19) / 2, 0}, grads(r), 1e-6)
		assert.InDelta(t, 0.5, r.Metrics["pg_clipfrac"], 1e-7)
		assert.InDelta(t, 0, r.Metrics["pg_clipfrac_lower"], 1e-7)
	})
}

func TestEntropyKLAndTISByHand(t *testing.T) {
	b := handBatch()
	b.Entropy = mat(2, 3, 1, 2, 3, 4, 9, 9)
	// ref = logπ − 0.2 on real tokens, so logπ − ref = 0.2
	b.RefLogProbs = mat(2, 3, -1.2, -0.7, -1.2, -0.7, 0, 0)
	k3 := math.Exp(-0.2) + 0.2 - 1 // e^(ref−logπ) − (ref−logπ) − 1
	for _, tc := range []struct {
		kl     loss.KLType
		value  float64 // per-token KL estimate
		dvalue float64 // its derivative wrt logπ used by the gradient
	}{
		{loss.KLK1, 0.2, 1},
		{loss.KLAbs, 0.2, 1},
		{loss.KLK2, 0.5 * 0.04, 0.2},
		{loss.KLK3, k3, 1 - math.Exp(-0.2)},
		{loss.KLK3Plus, k3, 0.2}, // k3's value, k2's gradient
	} {
		t.Run(string(tc.kl), func(t *testing.T) {
			cfg := handCfg
			cfg.EntropyCoef, cfg.KLCoef, cfg.KLType = 0.1, 0.5, tc.kl
			r, err := loss.Compute(cfg, b)
			require.NoError(t, err)
			// entropy: token-mean of [1, 2, 3, 4] = 2.5; the bonus subtracts 0.1·2.5
			assert.InDelta(t, 2.5, r.Metrics["entropy"], 1e-7)
			assert.InDelta(t, tc.value, r.Metrics["kl"], 1e-6)
			assert.InDelta(t, 0.06-0.25+0.5*tc.value, r.Loss, 1e-6)
			g := 0.5 * tc.dvalue / 4 // KL gradient on every real token
			assert.InDeltaSlice(t, []float64{-0.25 + g, g, g, g, 0, 0}, grads(r), 1e-6)
			ge := make([]float64, 0, 6)
			for _, v := range r.GradEntropy.Float32s() {
				ge = append(ge, float64(v))
			}
			// dL/dH = −0.1/4 on real tokens
			assert.InDeltaSlice(t, []float64{-0.025, -0.025, -0.025, -0.025, 0, 0}, ge, 1e-8)
		})
	}
	t.Run("tis", func(t *testing.T) {
		b := handBatch()
		// old − rollout = ln 3 at (0,0) → weight min(3, 2) = 2; 0 elsewhere → weight 1
		b.RolloutLogProbs = mat(2, 3, float32(-1-math.Log(3)), -1, float32(-1+math.Ln2), -2, 0, 0)
		cfg := handCfg
		cfg.TISCap = 2
		r, err := loss.Compute(cfg, b)
		require.NoError(t, err)
		// (−1·2 − 2.56 + 0.8 + 3)/4 = −0.19; gradient at (0,0) −1·2/4
		assert.InDelta(t, -0.19, r.Loss, 1e-6)
		assert.InDeltaSlice(t, []float64{-0.5, 0, 0, 0, 0, 0}, grads(r), 1e-7)
		assert.InDelta(t, 0.25, r.Metrics["tis_clipfrac"], 1e-7)
		assert.InDelta(t, 1.25, r.Metrics["tis_imp_ratio_mean"], 1e-6)
	})
}

func TestEmptyRowsDoNotProduceNaN(t *testing.T) {
	for _, mode := range []loss.Mode{loss.ModeVanilla, loss.ModeGSPO, loss.ModeCISPO, loss.ModeGPG, loss.ModeSAPO, loss.ModeGeoMean} {
		for _, agg := range []loss.Agg{loss.AggTokenMean, loss.AggSeqMeanTokenSum, loss.AggSeqMeanTokenMean, loss.AggSeqMeanTokenSumNorm} {
			t.Run(string(mode)+"/"+string(agg), func(t *testing.T) {
				b := handBatch()
				b.Mask = mat(2, 3, 1, 1, 1, 0, 0, 0) // row 1 is all padding
				b.Entropy = mat(2, 3, 1, 1, 1, 1, 1, 1)
				cfg := handCfg
				cfg.Mode, cfg.Agg, cfg.EntropyCoef = mode, agg, 0.1
				r, err := loss.Compute(cfg, b)
				require.NoError(t, err)
				for _, g := range grads(r)[3:] {
					assert.Zero(t, g)
				}
				b.Mask = mat(2, 3, 0, 0, 0, 0, 0, 0) // nothing to train on: verl returns a zero loss
				r, err = loss.Compute(cfg, b)
				require.NoError(t, err)
				assert.Zero(t, r.Loss)
				for _, g := range grads(r) {
					assert.Zero(t, g)
				}
				for k, v := range r.Metrics {
					assert.False(t, math.IsNaN(v), "metric %s", k)
				}
			})
		}
	}
	// vanilla, token-mean, only row 0: (−1 − 2.56 + 0.8)/3
	b := handBatch()
	b.Mask = mat(2, 3, 1, 1, 1, 0, 0, 0)
	r, err := loss.Compute(handCfg, b)
	require.NoError(t, err)
	assert.InDelta(t, -0.92, r.Loss, 1e-6)
}

func TestValidation(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	withB := func(f func(b *loss.Batch)) loss.Batch {
		b := handBatch()
		f(&b)
		return b
	}
	for _, tc := range []struct {
		name string
		cfg  loss.Config
		b    loss.Batch
		err  error
		msg  string
	}{
		{"nil log-probs", handCfg, withB(func(b *loss.Batch) { b.LogProbs = nil }), loss.ErrMissing, "Batch.LogProbs"},
		{"nil mask", handCfg, withB(func(b *loss.Batch) { b.Mask = nil }), loss.ErrMissing, "Batch.Mask"},
		{"shape mismatch", handCfg, withB(func(b *loss.Batch) { b.Advantages = mat(3, 2, 1, 1, 1, 1, 1, 1) }), loss.ErrShape, "Batch.Advantages has shape (3, 2)"},
		{"optional shape mismatch", handCfg, withB(func(b *loss.Batch) { b.Entropy = mat(2, 2, 1, 1, 1, 1) }), loss.ErrShape, "Batch.Entropy"},
		{"not 2-D", handCfg, withB(func(b *loss.Batch) {
			b.Mask = tensor.New(tensor.WithShape(6), tensor.WithBacking([]float32{1, 1, 1, 1, 0, 0}))
		}), loss.ErrShape, "Batch.Mask"},
		{"float64", handCfg, withB(func(b *loss.Batch) {
			b.OldLogProbs = tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(make([]float64, 6)))
		}), loss.ErrShape, "dtype float64"},
		{"zero tensor.Dense", handCfg, withB(func(b *loss.Batch) { b.Advantages = &tensor.Dense{} }), loss.ErrShape,
			"loss: Batch.Advantages is an uninitialised tensor.Dense"},
		{"zero optional tensor.Dense", handCfg, withB(func(b *loss.Batch) { b.Entropy = &tensor.Dense{} }), loss.ErrShape,
			"loss: Batch.Entropy is an uninitialised tensor.Dense"},
		{"empty batch", handCfg, loss.Batch{LogProbs: mat(0, 3), OldLogProbs: mat(0, 3), Advantages: mat(0, 3), Mask: mat(0, 3)}, loss.ErrEmptyBatch, "Batch.LogProbs"},
		{"zero-length rows", handCfg, loss.Batch{LogProbs: mat(2, 0), OldLogProbs: mat(2, 0), Advantages: mat(2, 0), Mask: mat(2, 0)}, loss.ErrEmptyBatch, "Batch.LogProbs"},
		{"NaN", handCfg, withB(func(b *loss.Batch) { b.OldLogProbs.Float32s()[5] = nan }), loss.ErrNonFinite, "Batch.OldLogProbs[1,2] = NaN"},
		{"Inf in padding", handCfg, withB(func(b *loss.Batch) { b.LogProbs.Float32s()[4] = -inf }), loss.ErrNonFinite, "Batch.LogProbs[1,1] = -Inf"},
		{"Inf in optional", handCfg, withB(func(b *loss.Batch) { b.Entropy = mat(2, 3, 1, 1, inf, 1, 1, 1) }), loss.ErrNonFinite, "Batch.Entropy[0,2]"},
		{"fractional mask", handCfg, withB(func(b *loss.Batch) { b.Mask.Float32s()[2] = 0.5 }), loss.ErrMaskValue, "Batch.Mask[0,2] = 0.5"},
		{"unknown mode", loss.Config{Mode: "ppo2"}, handBatch(), loss.ErrUnknownName, `Config.Mode "ppo2"`},
		{"unknown agg", loss.Config{Agg: "token-sum"}, handBatch(), loss.ErrUnknownName, `Config.Agg "token-sum"`},
		{"unknown kl", loss.Config{KLType: "k4"}, handBatch(), loss.ErrUnknownName, `Config.KLType "k4"`},
		{"dual-clip bound", loss.Config{ClipC: 0.5}, handBatch(), loss.ErrConfig, "Config.ClipC"},
		{"clip low", loss.Config{ClipLow: -0.1}, handBatch(), loss.ErrConfig, "Config.ClipLow"},
		{"NaN coefficient", loss.Config{EntropyCoef: math.NaN()}, handBatch(), loss.ErrConfig, "Config.EntropyCoef"},
		{"negative KL coef", loss.Config{KLCoef: -1}, handBatch(), loss.ErrConfig, "Config.KLCoef"},
		{"KL without ref", loss.Config{KLCoef: 0.1}, handBatch(), loss.ErrMissing, "Batch.RefLogProbs"},
		{"entropy without entropy", loss.Config{EntropyCoef: 0.1}, handBatch(), loss.ErrMissing, "Batch.Entropy"},
		{"TIS without rollout", loss.Config{TISCap: 2}, handBatch(), loss.ErrMissing, "Batch.RolloutLogProbs"},
		{"overflow", loss.Config{Mode: loss.ModeGeoMean}, loss.Batch{
			LogProbs: mat(1, 1, 0), OldLogProbs: mat(1, 1, -1000), Advantages: mat(1, 1, -1), Mask: mat(1, 1, 1),
		}, loss.ErrNonFinite, "Loss = +Inf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loss.Compute(tc.cfg, tc.b)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.err)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestKLAliases(t *testing.T) {
	b := handBatch()
	b.RefLogProbs = mat(2, 3, -1.2, -0.7, -1.2, -0.7, 0, 0)
	for alias, canon := range map[loss.KLType]loss.KLType{"kl": "k1", "mse": "k2", "low_var_kl": "k3", "low_var_kl+": "k3+", "k2+": "k2"} {
		a, err := loss.Compute(loss.Config{KLCoef: 1, KLType: alias}, b)
		require.NoError(t, err)
		c, err := loss.Compute(loss.Config{KLCoef: 1, KLType: canon}, b)
		require.NoError(t, err)
		assert.Equal(t, c.Loss, a.Loss, alias)
		assert.Equal(t, c.GradLogProbs.Data(), a.GradLogProbs.Data(), alias)
	}
}

func TestRegistry(t *testing.T) {
	reg := loss.NewRegistry()
	assert.Equal(t, []loss.Mode{"cispo", "geo_mean", "gpg", "gspo", "sapo", "vanilla"}, reg.Names())
	gpg := func(in *loss.Inputs) (loss.Term, error) {
		pt, err := gorgonia.HadamardProd(in.LogProbs, in.Advantages)
		if err != nil {
			return loss.Term{}, err
		}
		pt, err = gorgonia.Neg(pt)
		return loss.Term{PerToken: pt}, err
	}
	assert.ErrorIs(t, reg.Register("vanilla", loss.Variant{Build: gpg}), loss.ErrDuplicateName)
	assert.ErrorIs(t, reg.Register("", loss.Variant{Build: gpg}), loss.ErrConfig)
	assert.ErrorIs(t, reg.Register("nil", loss.Variant{}), loss.ErrConfig)
	require.NoError(t, reg.Register("my-gpg", loss.Variant{Build: gpg}))

	// a user variant runs through the same path as the built-in it copies
	c := loss.NewComputer(reg)
	mine, err := c.Compute(loss.Config{Mode: "my-gpg"}, handBatch())
	require.NoError(t, err)
	builtin, err := c.Compute(loss.Config{Mode: loss.ModeGPG}, handBatch())
	require.NoError(t, err)
	assert.Equal(t, builtin.Loss, mine.Loss)
	assert.Equal(t, builtin.GradLogProbs.Data(), mine.GradLogProbs.Data())

	for name, v := range map[loss.Mode]loss.Variant{
		"empty-term": {Build: func(*loss.Inputs) (loss.Term, error) { return loss.Term{}, nil }},
		"wrong-shape": {Build: func(in *loss.Inputs) (loss.Term, error) {
			s, err := gorgonia.Sum(in.LogProbs, 1)
			return loss.Term{PerToken: s}, err
		}},
		"bad-agg": {Build: func(in *loss.Inputs) (loss.Term, error) {
			t, err := gpg(in)
			t.Agg = "median"
			return t, err
		}},
		"no-logprobs": {Build: func(in *loss.Inputs) (loss.Term, error) {
			s, err := gorgonia.Sum(in.Advantages)
			return loss.Term{Scalar: s}, err
		}},
	} {
		require.NoError(t, reg.Register(name, v))
		_, err := c.Compute(loss.Config{Mode: name}, handBatch())
		assert.Error(t, err, string(name))
		assert.ErrorContains(t, err, string(name))
	}
}

func TestComputerCachesGraphs(t *testing.T) {
	c := loss.NewComputer(nil, loss.WithCacheSize(2))
	b := handBatch()
	b.Entropy = mat(2, 3, 1, 2, 3, 4, 9, 9)
	b.RefLogProbs = mat(2, 3, -1.2, -0.7, -1.2, -0.7, 0, 0)
	b.RolloutLogProbs = mat(2, 3, -1.5, -1, -0.5, -2, 0, 0)
	// Coefficients, TIS cap and divisor are bound per call: configurations that
	// differ only in them share a graph and must still give their own answers.
	cfgs := []loss.Config{{}, {Mode: loss.ModeGPG}, {Mode: loss.ModeCISPO}, {},
		{KLCoef: 0.5, EntropyCoef: 0.1, TISCap: 2, Agg: loss.AggSeqMeanTokenSumNorm},
		{KLCoef: 0.25, EntropyCoef: 0.3, TISCap: 1.5, Agg: loss.AggSeqMeanTokenSumNorm, AggDivisor: 7}}
	want := make([]float64, len(cfgs))
	for i, cfg := range cfgs {
		r, err := loss.Compute(cfg, b)
		require.NoError(t, err)
		want[i] = r.Loss
	}
	// repeated and evicted graphs give the same answers as fresh ones
	for round := range 3 {
		for i, cfg := range cfgs {
			r, err := c.Compute(cfg, b)
			require.NoError(t, err)
			assert.Equal(t, want[i], r.Loss, "round %d cfg %d", round, i)
		}
	}
}

func TestComputerConcurrentUse(t *testing.T) {
	c := loss.NewComputer(nil, loss.WithCacheSize(2))
	cfgs := []loss.Config{{}, {Mode: loss.ModeGSPO}, {Mode: loss.ModeGeoMean}}
	want := make([]loss.Result, len(cfgs))
	for i, cfg := range cfgs {
		r, err := loss.Compute(cfg, handBatch())
		require.NoError(t, err)
		want[i] = r
	}
	errs := make(chan error, 24)
	for g := range 24 {
		go func() {
			i := g % len(cfgs)
			r, err := c.Compute(cfgs[i], handBatch())
			if err == nil && (r.Loss != want[i].Loss || !assert.ObjectsAreEqual(r.GradLogProbs.Data(), want[i].GradLogProbs.Data())) {
				err = assert.AnError
			}
			errs <- err
		}()
	}
	for range 24 {
		assert.NoError(t, <-errs)
	}
}

// At the reference policy (ref = logπ, as at the first step of training)
// every estimator is 0; |x| has a kink there and, as in PyTorch, contributes
// a zero gradient rather than NaN. k1's gradient is 1 for any logπ.
func TestKLAtReferencePolicy(t *testing.T) {
	b := handBatch()
	b.RefLogProbs = b.LogProbs
	for kl, dkl := range map[loss.KLType]float64{"k1": 1, "k2": 0, "k3": 0, "abs": 0, "k3+": 0, "abs+": 0} {
		cfg := handCfg
		cfg.KLCoef, cfg.KLType = 1, kl
		r, err := loss.Compute(cfg, b)
		require.NoError(t, err, kl)
		assert.Zero(t, r.Metrics["kl"], kl)
		g := dkl / 4
		assert.InDeltaSlice(t, []float64{-0.25 + g, g, g, g, 0, 0}, grads(r), 1e-7, kl)
	}
}

// ClipLow ≥ 1 removes the lower bound on the ratio, as MiniMax-M1 runs
// CISPO ("ε_low set to a large value"); verl takes any clip_ratio_low.
func TestClipLowAboveOneRemovesLowerBound(t *testing.T) {
	// CISPO, ε_low = 10 (bounds [−9, 1.28]), token-mean over 3 tokens:
	//	δ = (−1, 0.5, 0), r = (e^−1 ≈ 0.367879, 1.648721, 1), A = 1
	//	w = sg(clip(r)) = (0.367879, 1.28, 1): only token 1 is clipped
	//	L = −w·A·logπ = (0.735759, 0.64, 1), mean 2.375759/3 = 0.791920
	//	dL/dlogπ = −w·A/3 = (−0.122626, −0.426667, −0.333333)
	// With the default ε_low = 0.2, token 0 would get w = 0.8 instead.
	b := loss.Batch{LogProbs: mat(1, 3, -2, -0.5, -1), OldLogProbs: mat(1, 3, -1, -1, -1),
		Advantages: mat(1, 3, 1, 1, 1), Mask: mat(1, 3, 1, 1, 1)}
	r, err := loss.Compute(loss.Config{Mode: loss.ModeCISPO, ClipLow: 10, ClipHigh: 0.28}, b)
	require.NoError(t, err)
	e1 := math.Exp(-1)
	assert.InDelta(t, (2*e1+0.64+1)/3, r.Loss, 1e-6)
	assert.InDeltaSlice(t, []float64{-e1 / 3, -1.28 / 3, -1.0 / 3}, grads(r), 1e-6)
	assert.InDelta(t, 1.0/3, r.Metrics["pg_clipfrac"], 1e-7)

	// vanilla, ε_low = 1.5: a token with r = e^−1 and A = −1 is not clipped
	// from below (the lower bound 1 − 1.5 is negative), so
	// L = −A·r = e^−1 and dL/dlogπ = −A·r = e^−1; pg_clipfrac 0.
	b = loss.Batch{LogProbs: mat(1, 1, -2), OldLogProbs: mat(1, 1, -1), Advantages: mat(1, 1, -1), Mask: mat(1, 1, 1)}
	r, err = loss.Compute(loss.Config{ClipLow: 1.5, ClipHigh: 0.28, ClipC: 10}, b)
	require.NoError(t, err)
	assert.InDelta(t, e1, r.Loss, 1e-6)
	assert.InDeltaSlice(t, []float64{e1}, grads(r), 1e-6)
	assert.Zero(t, r.Metrics["pg_clipfrac"])
}

// Zero values are usable and nil receivers fail with an error, never a
// panic: a zero Registry resolves the built-ins and accepts Register, a
// nil *Registry resolves the built-ins only, a zero Computer computes
// without caching, a nil *Computer reports ErrConfig.
func TestZeroValuesAndNilReceivers(t *testing.T) {
	gpg := loss.Variant{Build: func(in *loss.Inputs) (loss.Term, error) {
		pt, err := gorgonia.HadamardProd(in.LogProbs, in.Advantages)
		if err != nil {
			return loss.Term{}, err
		}
		pt, err = gorgonia.Neg(pt)
		return loss.Term{PerToken: pt}, err
	}}

	var zero loss.Registry
	_, ok := zero.Lookup(loss.ModeVanilla)
	assert.True(t, ok)
	require.NoError(t, zero.Register("mine", gpg))
	assert.Equal(t, []loss.Mode{"cispo", "geo_mean", "gpg", "gspo", "mine", "sapo", "vanilla"}, zero.Names())
	assert.ErrorIs(t, zero.Register("vanilla", gpg), loss.ErrDuplicateName)

	var nilReg *loss.Registry
	_, ok = nilReg.Lookup(loss.ModeGSPO)
	assert.True(t, ok)
	assert.Equal(t, []loss.Mode{"cispo", "geo_mean", "gpg", "gspo", "sapo", "vanilla"}, nilReg.Names())
	assert.ErrorIs(t, nilReg.Register("mine", gpg), loss.ErrConfig)

	// the hand batch under handCfg, token-mean: 0.06 (see TestVanillaByHand)
	var c loss.Computer
	r, err := c.Compute(handCfg, handBatch())
	require.NoError(t, err)
	assert.InDelta(t, 0.06, r.Loss, 1e-6)
	v, err := c.Surrogate(handCfg, handBatch(), handBatch())
	require.NoError(t, err)
	assert.InDelta(t, 0.06, v, 1e-6)

	var nilC *loss.Computer
	_, err = nilC.Compute(handCfg, handBatch())
	assert.ErrorIs(t, err, loss.ErrConfig)
	_, err = nilC.Surrogate(handCfg, handBatch(), handBatch())
	assert.ErrorIs(t, err, loss.ErrConfig)
}
