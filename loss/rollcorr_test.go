package loss_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/loss/losstest"
)

// rcBatch builds a batch at ratio 1 (LogProbs = OldLogProbs = old) with
// advantages 1 whose rollout log-probs differ from the old ones by the
// given log ratios δ = old − rollout: rollout = old − δ, written so that
// the float32 rounding stays far below the tests' tolerances. With vanilla
// PPO every kept token's loss is −A·r = −1 and its gradient −w/N under
// token-mean, w its IS weight and N the tokens kept.
func rcBatch(rows, cols int, delta, mask []float32) loss.Batch {
	old := make([]float32, len(delta))
	roll := make([]float32, len(delta))
	adv := make([]float32, len(delta))
	for i, d := range delta {
		old[i] = -3
		roll[i] = -3 - d
		adv[i] = 1
	}
	return loss.Batch{LogProbs: mat(rows, cols, old...), OldLogProbs: mat(rows, cols, append([]float32(nil), old...)...),
		Advantages: mat(rows, cols, adv...), Mask: mat(rows, cols, mask...), RolloutLogProbs: mat(rows, cols, roll...)}
}

// ln returns log x as the float32 the tests' batches hold.
func ln(x float64) float32 { return float32(math.Log(x)) }

// TestRejectedTokensLeaveTheDenominator is slime's PR #657 example (the
// denominator bug): one sequence of five tokens with log ratios log π_old −
// log π_rollout = [0.1, −1.5, 0.8, −10, 0.3] and token_k1 bounds [0.5, 2]
// rejects tokens 1, 2 and 3 (|δ| > log 2). The token-mean loss with token
// IS weights min(e^δ, 2) is −(e^0.1 + e^0.3)/2 = −1.227515: the two kept
// tokens divide, not the five. The bug divided by 5 (−0.491006).
func TestRejectedTokensLeaveTheDenominator(t *testing.T) {
	delta := []float32{0.1, -1.5, 0.8, -10, 0.3}
	b := rcBatch(1, 5, delta, []float32{1, 1, 1, 1, 1})
	b.Entropy = mat(1, 5, 1, 2, 3, 4, 5)
	w0, w4 := math.Exp(float64(delta[0])), math.Exp(float64(delta[4]))
	for _, tc := range []struct {
		agg  loss.Agg
		loss float64
		div  float64 // what the kept tokens' sum is divided by
	}{
		{loss.AggTokenMean, -(w0 + w4) / 2, 2},
		{loss.AggSeqMeanTokenMean, -(w0 + w4) / 2, 2},
		{loss.AggSeqMeanTokenSum, -(w0 + w4), 1}, // one sequence: the sum over its kept tokens
	} {
		t.Run(string(tc.agg), func(t *testing.T) {
			cfg := loss.Config{Agg: tc.agg, EntropyCoef: 0.1, RolloutCorrection: loss.RolloutCorrection{
				RolloutIS: loss.ISToken, RolloutISThreshold: 2, RolloutRS: loss.RSTokenK1, RolloutRSThreshold: "0.5_2.0"}}
			r, err := loss.Compute(cfg, b)
			require.NoError(t, err)
			assert.InDelta(t, tc.loss, r.Metrics["pg_loss"], 1e-6)
			assert.InDeltaSlice(t, []float64{-w0 / tc.div, 0, 0, 0, -w4 / tc.div}, grads(r), 1e-6)
			// decoupled mode rewrites the mask for the entropy too: tokens 0 and 4
			wantH := (1.0 + 5) / 2
			if tc.agg == loss.AggSeqMeanTokenSum {
				wantH = 1 + 5
			}
			assert.InDelta(t, wantH, r.Metrics["entropy"], 1e-6)
			assert.InDelta(t, 0.6, r.Metrics["rollout_corr/rollout_rs_token_k1_masked_fraction"], 1e-7)
			assert.InDelta(t, 0.6, r.Metrics["rollout_corr/rollout_rs_masked_fraction"], 1e-7)
			assert.InDelta(t, 1, r.Metrics["rollout_corr/rollout_rs_seq_masked_fraction"], 1e-7)
		})
	}
}

// isBatch is the 2×3 batch of the IS tests: log ratios δ = [ln 3, 0,
// −ln 4] in row 0 and [ln 4] in row 1, two padding positions.
func isBatch() loss.Batch {
	return rcBatch(2, 3, []float32{ln(3), 0, -ln(4), ln(4), 7, -7}, []float32{1, 1, 1, 1, 0, 0})
}

// TestRolloutISByHand derives the weights, the loss and verl's
// compute_is_metrics on isBatch with threshold 2 (lower bound 1/2).
//
// Token level: raw weights e^δ = [3, 1, 0.25 | 4], truncated [2, 1, 0.25 |
// 2]; the loss is −Σw/4 = −5.25/4. Metrics are of the raw weights: mean
// 8.25/4, max 4, min 0.25, above 2: 2 of 4, below 1/2: 1 of 4; the std and
// ESS use the weights clamped to [1/2, 2], [2, 1, 0.5, 2]: mean 1.375,
// mean of squares 9.25/4, std √(2.3125 − 1.375²) = √0.421875, ESS
// 1.375²/2.3125; the rows' mean weights are 4.25/3 and 4.
//
// Sequence level: row 0's Σδ = ln 0.75 → 0.75 on its three tokens, row 1's
// ln 4 → 4, truncated to 2; loss −(3·0.75 + 2)/4. Metrics: max
// exp(min(ln 4, 20)) = 4, min 0.75, mean (2.25 + 4)/4, rows above ln 2: 1
// of 2, below −ln 2: none.
//
// Batch normalisation divides the truncated weights by their mean: over
// tokens 5.25/4 (the loss becomes exactly −1), over the rows' means (0.75
// + 2)/2 for the sequence level.
func TestRolloutISByHand(t *testing.T) {
	seqStd := (4 - 4.25/3) / math.Sqrt2
	for _, tc := range []struct {
		name    string
		rc      loss.RolloutCorrection
		loss    float64
		grad    []float64
		metrics map[string]float64
	}{
		{"token", loss.RolloutCorrection{RolloutIS: loss.ISToken}, -5.25 / 4,
			[]float64{-2.0 / 4, -1.0 / 4, -0.25 / 4, -2.0 / 4, 0, 0},
			map[string]float64{"rollout_is_mean": 8.25 / 4, "rollout_is_max": 4, "rollout_is_min": 0.25,
				"rollout_is_ratio_fraction_high": 0.5, "rollout_is_ratio_fraction_low": 0.25,
				"rollout_is_std": math.Sqrt(0.421875), "rollout_is_eff_sample_size": 1.375 * 1.375 / 2.3125,
				"rollout_is_seq_mean": (4.25/3 + 4) / 2, "rollout_is_seq_std": seqStd, "rollout_is_seq_max": 4,
				"rollout_is_seq_min": 4.25 / 3, "rollout_is_seq_max_deviation": 3, "rollout_is_seq_fraction_high": 0.5,
				"rollout_is_seq_fraction_low": 0}},
		{"sequence", loss.RolloutCorrection{RolloutIS: loss.ISSequence, RolloutISThreshold: 2}, -(3*0.75 + 2) / 4,
			[]float64{-0.75 / 4, -0.75 / 4, -0.75 / 4, -2.0 / 4, 0, 0},
			map[string]float64{"rollout_is_mean": 6.25 / 4, "rollout_is_max": 4, "rollout_is_min": 0.75,
				"rollout_is_ratio_fraction_high": 0.5, "rollout_is_ratio_fraction_low": 0}},
		{"token normalised", loss.RolloutCorrection{RolloutIS: loss.ISToken, RolloutISBatchNormalize: true}, -1,
			[]float64{-2.0 / 5.25, -1.0 / 5.25, -0.25 / 5.25, -2.0 / 5.25, 0, 0},
			map[string]float64{"rollout_is_batch_norm_factor": 5.25 / 4, "rollout_is_mean": 8.25 / 4}},
		{"sequence normalised", loss.RolloutCorrection{RolloutIS: loss.ISSequence, RolloutISBatchNormalize: true},
			-(3*0.75 + 2) / 4 / 1.375,
			[]float64{-0.75 / 4 / 1.375, -0.75 / 4 / 1.375, -0.75 / 4 / 1.375, -2.0 / 4 / 1.375, 0, 0},
			map[string]float64{"rollout_is_batch_norm_factor": 1.375}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := loss.Compute(loss.Config{RolloutCorrection: tc.rc}, isBatch())
			require.NoError(t, err)
			assert.InDelta(t, tc.loss, r.Loss, 1e-6)
			assert.InDeltaSlice(t, tc.grad, grads(r), 1e-6)
			for k, want := range tc.metrics {
				got, ok := r.Metrics["rollout_corr/"+k]
				if assert.Truef(t, ok, "metric %s missing", k) {
					assert.InDeltaf(t, want, got, 1e-6, "metric %s", k)
				}
			}
			_, hasOffPolicy := r.Metrics["rollout_corr/kl"]
			assert.False(t, hasOffPolicy, "decoupled mode leaves the off-policy metrics to MismatchMetrics")
		})
	}
}

// rsDelta is the batch of the rejection tests, all six tokens trained:
// δ = [ln 3, 0, −ln 4] and [0.1, −0.1, 0.05]. Per token, with k1 = −δ,
// k2 = δ²/2, k3 = e^δ − 1 − δ:
//
//	row 0: k1 [−1.0986, 0, 1.3863]  k2 [0.6035, 0, 0.9609]  k3 [0.9014, 0, 0.6363]
//	row 1: k1 [−0.1, 0.1, −0.05]    k2 [0.005, 0.005, 0.00125]  k3 [0.00517, 0.00484, 0.00127]
//
// so that row 0's k1 sum is ln(4/3) = 0.2877 (mean 0.0959), its k2 sum
// 1.5644 (mean 0.5215, max 0.9609) and its k3 sum 1.5377 (mean 0.5126,
// max 0.9014); row 1's sums stay below 0.06 in absolute value.
var rsDelta = []float32{ln(3), 0, -ln(4), 0.1, -0.1, 0.05}

// TestRolloutRejectionByHand checks every rejection option (verl's
// rollout_rs) against the keep patterns the table above gives. At ratio 1
// with A = 1 and token-mean the gradient is −1/N on the N kept tokens and
// 0 on the rejected ones, so it shows both the mask and the denominator.
func TestRolloutRejectionByHand(t *testing.T) {
	for _, tc := range []struct {
		rs, threshold string
		keep          []float32
		why           string
	}{
		{loss.RSTokenK1, "0.5_2.0", []float32{0, 1, 0, 1, 1, 1}, "|k1| ≤ ln 2 = 0.693"},
		{loss.RSTokenK1, "2", []float32{0, 1, 0, 1, 1, 1}, "a lone upper bound 2 takes 1/2 as the lower"},
		// verl tests k1 = −δ = log(π_rollout/π_old) against [log lower,
		// log upper]: bounds [0.5, 5] reject (0,0), where π_old/π_rollout is
		// 3 (k1 = −1.0986 < ln 0.5), and keep (0,2), where it is 1/4 (k1 =
		// 1.3863 ≤ ln 5). Bounds on π_old/π_rollout would do the opposite.
		{loss.RSTokenK1, "0.5_5", []float32{0, 1, 1, 1, 1, 1}, "asymmetric bounds apply to π_rollout/π"},
		{loss.RSTokenK2, "0.7", []float32{1, 1, 0, 1, 1, 1}, "k2 0.9609 > 0.7"},
		{loss.RSTokenK3, "0.7", []float32{0, 1, 1, 1, 1, 1}, "k3 0.9014 > 0.7"},
		{loss.RSSeqSumK1, "0.5_2.0", []float32{1, 1, 1, 1, 1, 1}, "row sums 0.2877, −0.05 within ±0.693"},
		{loss.RSSeqSumK1, "0.8_1.25", []float32{0, 0, 0, 1, 1, 1}, "0.2877 > ln 1.25 = 0.2231"},
		{loss.RSSeqSumK2, "1.0", []float32{0, 0, 0, 1, 1, 1}, "1.5644 > 1"},
		{loss.RSSeqSumK3, "1.6", []float32{1, 1, 1, 1, 1, 1}, "1.5377 ≤ 1.6"},
		{loss.RSSeqMeanK1, "0.9_1.1", []float32{0, 0, 0, 1, 1, 1}, "geometric mean: 0.0959 > ln 1.1 = 0.0953"},
		{loss.RSSeqMeanK2, "0.5", []float32{0, 0, 0, 1, 1, 1}, "0.5215 > 0.5"},
		{loss.RSSeqMeanK3, "0.5", []float32{0, 0, 0, 1, 1, 1}, "0.5126 > 0.5"},
		{loss.RSSeqMaxK2, "0.9", []float32{0, 0, 0, 1, 1, 1}, "0.9609 > 0.9"},
		{loss.RSSeqMaxK3, "0.95", []float32{1, 1, 1, 1, 1, 1}, "0.9014 ≤ 0.95"},
		{"token_k2, seq_max_k3", "0.7,0.95", []float32{1, 1, 0, 1, 1, 1}, "every option must keep a token"},
		{"seq_max_k3,token_k2,seq_max_k3", "0.95, 0.7", []float32{1, 1, 0, 1, 1, 1}, "a repeated option counts once"},
	} {
		t.Run(tc.rs+"@"+tc.threshold, func(t *testing.T) {
			b := rcBatch(2, 3, rsDelta, []float32{1, 1, 1, 1, 1, 1})
			cfg := loss.Config{RolloutCorrection: loss.RolloutCorrection{RolloutRS: tc.rs, RolloutRSThreshold: tc.threshold}}
			r, err := loss.Compute(cfg, b)
			require.NoError(t, err)
			var n, rejectedRows float64
			for row := range 2 {
				rejected := false
				for _, k := range tc.keep[3*row : 3*row+3] {
					n += float64(k)
					rejected = rejected || k == 0
				}
				rejectedRows += b2f(rejected)
			}
			want := make([]float64, 6)
			for i, k := range tc.keep {
				want[i] = -float64(k) / n
			}
			assert.InDeltaSlice(t, want, grads(r), 1e-7, tc.why)
			assert.InDelta(t, -1, r.Loss, 1e-7)
			assert.InDelta(t, (6-n)/6, r.Metrics["rollout_corr/rollout_rs_masked_fraction"], 1e-7)
			assert.InDelta(t, rejectedRows/2, r.Metrics["rollout_corr/rollout_rs_seq_masked_fraction"], 1e-7)
		})
	}
}

// TestRolloutRejectionMetricsByHand checks compute_rs_metrics for a token
// option and a sequence option on rsDelta.
//
// token_k1 at "0.5_2.0" (log bounds ±ln 2): the statistic k1 =
// [−ln 3, 0, ln 4, −0.1, 0.1, −0.05] has mean (ln(4/3) − 0.05)/6, max ln 4,
// min −ln 3, one value above ln 2 and one below −ln 2 (1/6 each); clamped to
// ±ln 2 it is [−ln 2, 0, ln 2, −0.1, 0.1, −0.05]; the rows' means are
// ln(4/3)/3 and −0.05/3, the rows' deviation max |·| = ln(4/3)/3; two
// tokens of six are rejected, both in row 0 (one row of two).
//
// seq_sum_k2 at 1.0: the statistic is the row's sum, [1.5644 ×3, 0.01125
// ×3], so mean (3·1.5644 + 3·0.01125)/6, max 1.5644, min 0.01125; one row
// of two above 1, none below (no lower bound).
func TestRolloutRejectionMetricsByHand(t *testing.T) {
	b := rcBatch(2, 3, rsDelta, []float32{1, 1, 1, 1, 1, 1})
	d := make([]float64, 6)
	for i, v := range rsDelta {
		d[i] = float64(v)
	}
	k1 := []float64{-d[0], -d[1], -d[2], -d[3], -d[4], -d[5]}
	clamped := []float64{-math.Ln2, 0, math.Ln2, k1[3], k1[4], k1[5]}
	var cm, cm2 float64
	for _, c := range clamped {
		cm += c / 6
		cm2 += c * c / 6
	}
	row0, row1 := (k1[0]+k1[1]+k1[2])/3, (k1[3]+k1[4]+k1[5])/3
	r, err := loss.Compute(loss.Config{RolloutCorrection: loss.RolloutCorrection{RolloutRS: "token_k1", RolloutRSThreshold: "0.5_2.0"}}, b)
	require.NoError(t, err)
	for k, want := range map[string]float64{
		"mean": (k1[0] + k1[1] + k1[2] + k1[3] + k1[4] + k1[5]) / 6, "max": k1[2], "min": k1[0],
		"fraction_high": 1.0 / 6, "fraction_low": 1.0 / 6, "std": math.Sqrt(cm2 - cm*cm),
		"seq_mean": (row0 + row1) / 2, "seq_std": math.Abs(row0-row1) / math.Sqrt2, "seq_max": row0, "seq_min": row1,
		"seq_max_deviation": math.Max(math.Abs(row0), math.Abs(row1)), "seq_fraction_high": 0, "seq_fraction_low": 0,
		"masked_fraction": 2.0 / 6, "seq_masked_fraction": 0.5,
	} {
		assert.InDeltaf(t, want, r.Metrics["rollout_corr/rollout_rs_token_k1_"+k], 1e-6, "token_k1_%s", k)
	}
	s0 := 0.5 * (d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
	s1 := 0.5 * (d[3]*d[3] + d[4]*d[4] + d[5]*d[5])
	r, err = loss.Compute(loss.Config{RolloutCorrection: loss.RolloutCorrection{RolloutRS: "seq_sum_k2", RolloutRSThreshold: "1"}}, b)
	require.NoError(t, err)
	// clamped to [0, 1]: [1 ×3, s1 ×3]
	cm, cm2 = (1+s1)/2, (1+s1*s1)/2
	for k, want := range map[string]float64{
		"mean": (s0 + s1) / 2, "max": s0, "min": s1, "fraction_high": 0.5, "fraction_low": 0,
		"std": math.Sqrt(cm2 - cm*cm), "seq_mean": (s0 + s1) / 2, "seq_std": (s0 - s1) / math.Sqrt2,
		"seq_max": s0, "seq_min": s1, "seq_max_deviation": s0, "seq_fraction_high": 0.5,
		"masked_fraction": 0.5, "seq_masked_fraction": 0.5,
	} {
		assert.InDeltaf(t, want, r.Metrics["rollout_corr/rollout_rs_seq_sum_k2_"+k], 1e-6, "seq_sum_k2_%s", k)
	}
	_, ok := r.Metrics["rollout_corr/rollout_rs_seq_sum_k2_seq_fraction_low"]
	assert.False(t, ok, "seq_fraction_low is a k1 option's metric")
}

// TestBypassModeByHand: in bypass mode the old log-probs are the rollout's,
// and the weights and the rejection compare the current policy with them.
//
// The batch: logπ − old = [0.1, −0.1, 1.5 | 0.2], A = [1, −1, 1 | 2], mask
// all four, entropy [1, 2, 3 | 4]; token_k1 at "0.5_2.0" rejects the third
// token (k1 = −1.5 < −ln 2).
//
// ppo_clip (ε 0.2, 0.28): the kept tokens' ratios e^0.1, e^−0.1, e^0.2 lie
// inside [0.8, 1.28], so L = −A·r: −e^0.1 + e^−0.1 − 2e^0.2 over 3 kept
// tokens, gradient −A·r/3; token IS weights are computed but not applied
// (verl: the ratio already is π_θ/π_rollout). The entropy keeps the
// batch's mask: (1 + 2 + 3 + 4)/4.
//
// reinforce with token IS at 2: L = −sg(w)·A·logπ, w = min(e^(logπ −
// old), 2) = [e^0.1, e^−0.1, 2, e^0.2]; over the 3 kept tokens the
// gradient is −w·A/3.
func TestBypassModeByHand(t *testing.T) {
	old := []float32{-1, -2, -3, -0.5}
	lp := []float32{-0.9, -2.1, -1.5, -0.3}
	b := loss.Batch{LogProbs: mat(1, 4, lp...), OldLogProbs: mat(1, 4, old...), Advantages: mat(1, 4, 1, -1, 1, 2),
		Mask: mat(1, 4, 1, 1, 1, 1), Entropy: mat(1, 4, 1, 2, 3, 4)}
	d := make([]float64, 4)
	for i := range d {
		d[i] = float64(lp[i]) - float64(old[i])
	}
	rs := loss.RolloutCorrection{BypassMode: true, RolloutIS: loss.ISToken, RolloutRS: loss.RSTokenK1, RolloutRSThreshold: "0.5_2.0"}

	cfg := loss.Config{ClipLow: 0.2, ClipHigh: 0.28, EntropyCoef: 0.1, RolloutCorrection: rs}
	r, err := loss.Compute(cfg, b)
	require.NoError(t, err)
	e := func(i int) float64 { return math.Exp(d[i]) }
	assert.InDelta(t, (-e(0)+e(1)-2*e(3))/3, r.Metrics["pg_loss"], 1e-6)
	assert.InDeltaSlice(t, []float64{-e(0) / 3, e(1) / 3, 0, -2 * e(3) / 3}, grads(r), 1e-6)
	assert.InDelta(t, 2.5, r.Metrics["entropy"], 1e-6)
	assert.InDeltaSlice(t, []float64{-0.025, -0.025, -0.025, -0.025}, f64s(r.GradEntropy), 1e-8)
	assert.InDelta(t, (e(0)+e(1)+e(2)+e(3))/4, r.Metrics["rollout_corr/rollout_is_mean"], 1e-6, "computed for the metrics")
	assert.InDelta(t, -(d[0]+d[1]+d[2]+d[3])/4, r.Metrics["rollout_corr/kl"], 1e-6, "off-policy metrics of π_θ against the rollout")

	cfg.RolloutCorrection.LossType = loss.BypassReinforce
	r, err = loss.Compute(cfg, b)
	require.NoError(t, err)
	w := []float64{e(0), e(1), 2, e(3)}
	a := []float64{1, -1, 1, 2}
	var pg float64
	for _, i := range []int{0, 1, 3} {
		pg -= w[i] * a[i] * float64(lp[i]) / 3
	}
	assert.InDelta(t, pg, r.Metrics["pg_loss"], 1e-6)
	assert.InDeltaSlice(t, []float64{-w[0] * a[0] / 3, -w[1] * a[1] / 3, 0, -w[3] * a[3] / 3}, grads(r), 1e-6)
	assert.InDelta(t, -(d[0]+d[1]+d[3])/3, r.Metrics["ppo_kl"], 1e-6, "masked_mean(rollout − logπ) over the kept tokens")

	// Batch.RolloutLogProbs may be given, equal to the old log-probs on
	// trained tokens.
	b.RolloutLogProbs = mat(1, 4, old...)
	again, err := loss.Compute(cfg, b)
	require.NoError(t, err)
	assert.Equal(t, r.Loss, again.Loss)
}

func f64s(d *tensor.Dense) []float64 {
	out := make([]float64, 0, d.Shape().TotalSize())
	for _, v := range d.Float32s() {
		out = append(out, float64(v))
	}
	return out
}

// TestTISCapIsTokenLevelIS: Config.TISCap computes what
// RolloutCorrection{RolloutIS: token, RolloutISThreshold: TISCap} does, to
// the last bit, for every mode and aggregation; only the metrics' names
// differ.
func TestTISCapIsTokenLevelIS(t *testing.T) {
	c := loss.NewComputer(nil)
	for seed := range uint64(3) {
		b := losstest.RandomBatch(rand.New(rand.NewPCG(seed, 11)), 4, 6)
		for _, mode := range []loss.Mode{loss.ModeVanilla, loss.ModeGSPO, loss.ModeCISPO, loss.ModeGPG, loss.ModeSAPO, loss.ModeGeoMean} {
			for _, agg := range []loss.Agg{loss.AggTokenMean, loss.AggSeqMeanTokenSum, loss.AggSeqMeanTokenMean, loss.AggSeqMeanTokenSumNorm} {
				base := loss.Config{Mode: mode, Agg: agg, KLCoef: 0.1, EntropyCoef: 0.01}
				tis := base
				tis.TISCap = 1.3
				rc := base
				rc.RolloutCorrection = loss.RolloutCorrection{RolloutIS: loss.ISToken, RolloutISThreshold: 1.3}
				a, err := c.Compute(tis, b)
				require.NoError(t, err)
				z, err := c.Compute(rc, b)
				require.NoError(t, err)
				require.Equal(t, math.Float64bits(a.Loss), math.Float64bits(z.Loss), "%s %s", mode, agg)
				require.Equal(t, a.GradLogProbs.Float32s(), z.GradLogProbs.Float32s(), "%s %s", mode, agg)
				require.Equal(t, a.GradEntropy.Float32s(), z.GradEntropy.Float32s(), "%s %s", mode, agg)
				assert.Contains(t, a.Metrics, "tis_clipfrac")
				assert.NotContains(t, a.Metrics, "rollout_corr/rollout_is_mean")
				assert.Contains(t, z.Metrics, "rollout_corr/rollout_is_mean")
			}
		}
	}
}

// TestRolloutCorrectionChecks runs losstest's checks that apply to a
// corrected objective: finite differences of the surrogate (the weights
// and the rejection detached, also where bypass mode computes them from
// the policy being differentiated), invariance to padding, zero
// advantages, and for bypass REINFORCE without rejection the REINFORCE
// gradient (its weights are 1 at ratio 1).
func TestRolloutCorrectionChecks(t *testing.T) {
	c := loss.NewComputer(nil)
	for _, tc := range []struct {
		name      string
		cfg       loss.Config
		reinforce bool
	}{
		{"seq-mis", loss.Config{RolloutCorrection: mustPreset(t, "decoupled_seq_is_rs")}, false},
		{"token-is+token-rs/gspo", loss.Config{Mode: loss.ModeGSPO, RolloutCorrection: loss.RolloutCorrection{
			RolloutIS: loss.ISToken, RolloutRS: "token_k2,seq_max_k3", RolloutRSThreshold: "0.1,0.5"}}, false},
		{"geo-rs+token-tis/geo_mean", loss.Config{Mode: loss.ModeGeoMean, RolloutCorrection: loss.RolloutCorrection{
			RolloutIS: loss.ISToken, RolloutRS: loss.RSSeqMeanK1, RolloutRSThreshold: "0.8_1.25"}}, false},
		{"bypass ppo_clip k3-rs", loss.Config{KLCoef: 0.1, EntropyCoef: 0.01, RolloutCorrection: loss.RolloutCorrection{
			BypassMode: true, RolloutIS: loss.ISSequence, RolloutRS: loss.RSTokenK3, RolloutRSThreshold: "0.05"}}, false},
		{"bypass reinforce token-is+rs", loss.Config{Agg: loss.AggSeqMeanTokenSum, EntropyCoef: 0.01, RolloutCorrection: loss.RolloutCorrection{
			BypassMode: true, LossType: loss.BypassReinforce, RolloutIS: loss.ISToken, RolloutISThreshold: 1.2,
			RolloutRS: loss.RSTokenK1, RolloutRSThreshold: "0.7_1.4"}}, false},
		{"bypass reinforce seq-is", loss.Config{RolloutCorrection: mustPreset(t, "bypass_pg_is")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for si, sh := range [][2]int{{4, 6}, {3, 5}} {
				b := losstest.RandomBatch(rand.New(rand.NewPCG(uint64(si), 21)), sh[0], sh[1])
				if tc.cfg.RolloutCorrection.BypassMode {
					b.RolloutLogProbs = nil // the old log-probs are the rollout's
				}
				require.NoError(t, losstest.CheckPadding(c, tc.cfg, b, rand.New(rand.NewPCG(uint64(si), 22))), "padding")
				require.NoError(t, losstest.CheckZeroAdvantage(c, tc.cfg, b), "zero advantage")
				require.NoError(t, losstest.CheckGradient(c, tc.cfg, b), "gradient")
				if tc.reinforce {
					require.NoError(t, losstest.CheckREINFORCE(c, tc.cfg, b, loss.AggTokenMean), "REINFORCE")
				}
			}
		})
	}
}

func mustPreset(t *testing.T, name string) loss.RolloutCorrection {
	t.Helper()
	rc, err := loss.RolloutCorrectionPreset(name)
	require.NoError(t, err)
	return rc
}

// TestRolloutCorrectionPresets: every preset verl names validates and
// runs; the ones the issue names hold verl's settings.
func TestRolloutCorrectionPresets(t *testing.T) {
	names := loss.RolloutCorrectionPresets()
	assert.IsIncreasing(t, names)
	b := losstest.RandomBatch(rand.New(rand.NewPCG(1, 1)), 3, 5)
	bypass := b
	bypass.RolloutLogProbs = nil
	for _, name := range names {
		rc, err := loss.RolloutCorrectionPreset(name)
		require.NoError(t, err, name)
		require.NoError(t, rc.Validate(), name)
		in := b
		if rc.BypassMode {
			in = bypass
		}
		_, err = loss.Compute(loss.Config{RolloutCorrection: rc}, in)
		require.NoError(t, err, name)
	}
	for name, want := range map[string]loss.RolloutCorrection{
		"decoupled_token_is":  {RolloutIS: loss.ISToken, RolloutISThreshold: 2},
		"decoupled_seq_is":    {RolloutIS: loss.ISSequence, RolloutISThreshold: 2},
		"decoupled_seq_is_rs": {RolloutIS: loss.ISSequence, RolloutISThreshold: 2, RolloutRS: "seq_sum_k1", RolloutRSThreshold: "0.5_2.0"},
		"decoupled_geo_rs":    {RolloutRS: "seq_mean_k1", RolloutRSThreshold: "0.999_1.001"},
		"decoupled_k3_rs":     {RolloutRS: "seq_mean_k3", RolloutRSThreshold: "0.01"},
		"bypass_ppo_clip":     {BypassMode: true, LossType: loss.BypassPPOClip},
		"bypass_pg_is":        {RolloutIS: loss.ISSequence, RolloutISThreshold: 2, BypassMode: true, LossType: loss.BypassReinforce},
		"bypass_pg_geo_rs_token_tis": {RolloutIS: loss.ISToken, RolloutISThreshold: 2, RolloutRS: "seq_mean_k1",
			RolloutRSThreshold: "0.999_1.001", BypassMode: true, LossType: loss.BypassReinforce},
		"disabled": {},
	} {
		got, err := loss.RolloutCorrectionPreset(name)
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
	}
	_, err := loss.RolloutCorrectionPreset("decoupled_seq_mis")
	assert.ErrorIs(t, err, loss.ErrUnknownName)
}

// TestRolloutCorrectionErrors: every invalid setting is refused with a
// message naming the field; Validate refuses those that lie in the
// RolloutCorrection alone.
func TestRolloutCorrectionErrors(t *testing.T) {
	rs := func(options, threshold string) loss.Config {
		return loss.Config{RolloutCorrection: loss.RolloutCorrection{RolloutRS: options, RolloutRSThreshold: threshold}}
	}
	is := func(level loss.ISLevel, threshold float64) loss.Config {
		return loss.Config{RolloutCorrection: loss.RolloutCorrection{RolloutIS: level, RolloutISThreshold: threshold}}
	}
	b := rcBatch(2, 3, rsDelta, []float32{1, 1, 1, 1, 1, 0})
	noRollout := b
	noRollout.RolloutLogProbs = nil
	otherRollout := b
	otherRollout.RolloutLogProbs = mat(2, 3, -1, -1, -1, -1, -1, -1)
	bypass := func(lt loss.BypassLoss) loss.RolloutCorrection {
		return loss.RolloutCorrection{BypassMode: true, LossType: lt}
	}
	for _, tc := range []struct {
		name    string
		cfg     loss.Config
		b       loss.Batch
		err     error
		msg     string
		invalid bool // the RolloutCorrection alone is invalid: Validate says so too
	}{
		{"unknown IS level", is("geometric", 0), b, loss.ErrUnknownName, "RolloutIS", true},
		{"negative IS threshold", is(loss.ISToken, -1), b, loss.ErrConfig, "RolloutISThreshold", true},
		{"NaN IS threshold", is(loss.ISToken, math.NaN()), b, loss.ErrConfig, "RolloutISThreshold", true},
		{"infinite IS threshold", is("", math.Inf(1)), b, loss.ErrConfig, "RolloutISThreshold", true},
		{"unknown RS option", rs("geometric", "2"), b, loss.ErrUnknownName, "geometric", true},
		{"seq_max_k1 is not verl's", rs("seq_max_k1", "2"), b, loss.ErrUnknownName, "seq_max_k1", true},
		{"RS without options", rs(" , ", "2"), b, loss.ErrConfig, "names no option", true},
		{"RS without threshold", rs("token_k1", ""), b, loss.ErrConfig, "RolloutRSThreshold is empty", true},
		{"threshold count", rs("token_k1,token_k2,token_k3", "2,3"), b, loss.ErrConfig, "2 values for 3 options", true},
		{"k2 with two bounds", rs("token_k2", "0.1_2"), b, loss.ErrConfig, "one upper bound", true},
		{"not a number", rs("token_k1", "0.5_two"), b, loss.ErrConfig, "not a number", true},
		{"zero bound", rs("token_k1", "0_2"), b, loss.ErrConfig, "> 0", true},
		{"infinite bound", rs("seq_sum_k3", "inf"), b, loss.ErrConfig, "finite", true},
		{"lower above upper", rs("token_k1", "2_0.5"), b, loss.ErrConfig, "rejects everything", true},
		{"unknown loss type", loss.Config{RolloutCorrection: bypass("pg")}, b, loss.ErrUnknownName, "LossType", true},
		{"reinforce without bypass", loss.Config{RolloutCorrection: loss.RolloutCorrection{LossType: loss.BypassReinforce}},
			b, loss.ErrConfig, "needs BypassMode", true},
		{"reinforce with another mode", loss.Config{Mode: loss.ModeGSPO, RolloutCorrection: bypass(loss.BypassReinforce)},
			b, loss.ErrConfig, "would be ignored", false},
		{"TISCap and RolloutCorrection", loss.Config{TISCap: 2, RolloutCorrection: loss.RolloutCorrection{RolloutIS: loss.ISToken}},
			b, loss.ErrConfig, "set one", false},
		{"decoupled without rollout log-probs", is(loss.ISSequence, 0), noRollout, loss.ErrMissing, "RolloutLogProbs", false},
		{"bypass with other rollout log-probs", loss.Config{RolloutCorrection: bypass("")}, otherRollout, loss.ErrConfig,
			"differs from Batch.OldLogProbs", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loss.Compute(tc.cfg, tc.b)
			require.ErrorIs(t, err, tc.err)
			assert.Contains(t, err.Error(), tc.msg)
			if verr := tc.cfg.RolloutCorrection.Validate(); tc.invalid {
				assert.ErrorIs(t, verr, tc.err)
			} else {
				assert.NoError(t, verr)
			}
		})
	}
}

// TestNeedsRolloutLogProbs: which configurations read
// Batch.RolloutLogProbs.
func TestNeedsRolloutLogProbs(t *testing.T) {
	for _, tc := range []struct {
		cfg  loss.Config
		want bool
	}{
		{loss.Config{}, false},
		{loss.Config{TISCap: 2}, true},
		{loss.Config{RolloutCorrection: loss.RolloutCorrection{RolloutIS: loss.ISSequence}}, true},
		{loss.Config{RolloutCorrection: loss.RolloutCorrection{RolloutRS: "token_k1", RolloutRSThreshold: "2"}}, true},
		{loss.Config{RolloutCorrection: loss.RolloutCorrection{BypassMode: true, RolloutIS: loss.ISToken}}, false},
		{loss.Config{RolloutCorrection: loss.RolloutCorrection{RolloutISThreshold: 3}}, false},
	} {
		assert.Equal(t, tc.want, tc.cfg.NeedsRolloutLogProbs(), "%+v", tc.cfg)
	}
}

// TestRolloutCorrectionWithoutTokens: a batch whose mask is all zero
// gives a zero loss and gradient, as without correction, and no
// rollout_corr/ metrics (verl refuses such a batch; its statistics are
// undefined).
func TestRolloutCorrectionWithoutTokens(t *testing.T) {
	b := rcBatch(2, 3, rsDelta, []float32{0, 0, 0, 0, 0, 0})
	for _, name := range []string{"decoupled_seq_is_rs", "decoupled_k3_rs_token_tis", "bypass_pg_geo_rs_seq_tis", "bypass_ppo_clip"} {
		in := b
		if rc := mustPreset(t, name); rc.BypassMode {
			in.RolloutLogProbs = nil
		}
		r, err := loss.Compute(loss.Config{RolloutCorrection: mustPreset(t, name)}, in)
		require.NoError(t, err, name)
		assert.Zero(t, r.Loss, name)
		assert.Equal(t, make([]float64, 6), grads(r), name)
		assert.Empty(t, prefixed(r.Metrics, "rollout_corr/"), name)
	}
}
