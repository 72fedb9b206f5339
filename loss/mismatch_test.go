package loss_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/loss"
)

// TestMismatchMetricsByHand derives the metrics of two responses:
//
//	row 0 (source a): old [−1, −2, pad], rollout [−1.1, −2, pad]
//	row 1 (source b): old [−0.5],        rollout [−0.4]
//
// so δ = old − rollout = [0.1, 0 | −0.1] on the three trained tokens.
//
//	probabilities: old [e^−1, e^−2 | e^−0.5], rollout [e^−1.1, e^−2 | e^−0.4]
//	kl        mean(rollout − old) = (−0.1 + 0 + 0.1)/3 = 0
//	k3_kl     mean(e^δ − δ − 1) = (e^0.1 − 1.1 + e^−0.1 − 0.9)/3
//	a_b       rows' mean old log-probs −1.5, −0.5; ρ_b rollout's −1.55, −0.4
//	training_log_ppl (1.5 + 0.5)/2, training_ppl (e^1.5 + e^0.5)/2
//	rollout_log_ppl (1.55 + 0.4)/2, rollout_ppl (e^1.55 + e^0.4)/2
//	log_ppl_diff ρ − a = [−0.05, 0.1]: mean 0.025, |·| 0.075, max 0.1, min −0.05
//	ppl_ratio (e^−0.05 + e^0.1)/2
//	chi2_token (e^0.2 + 1 + e^−0.2)/3 − 1, chi2_seq (e^0.2 + e^−0.2)/2 − 1 (row sums 0.1, −0.1)
//
// and per source the same on each row alone.
func TestMismatchMetricsByHand(t *testing.T) {
	old := [][]float32{{-1, -2, 7}, {-0.5}}
	roll := [][]float32{{-1.1, -2, -7}, {-0.4}}
	mask := [][]float32{{1, 1, 0}, {1}}
	e := math.Exp
	// the float32 inputs, as the function reads them
	f := func(x float32) float64 { return float64(x) }
	d := []float64{f(-1) - f(-1.1), 0, f(-0.5) - f(-0.4)}
	pOld := []float64{e(-1), e(-2), e(-0.5)}
	pRoll := []float64{e(f(-1.1)), e(-2), e(f(-0.4))}
	diffs := []float64{math.Abs(pOld[0] - pRoll[0]), 0, math.Abs(pOld[2] - pRoll[2])}
	meanDiff := (diffs[0] + diffs[2]) / 3
	var ss float64
	for _, x := range diffs {
		ss += (x - meanDiff) * (x - meanDiff)
	}
	rho0, rho1 := (f(-1.1)-2)/2, f(-0.4)
	want := map[string]float64{
		"training/rollout_probs_diff_valid": 1,
		"training/rollout_probs_diff_max":   diffs[2],
		"training/rollout_probs_diff_mean":  meanDiff,
		"training/rollout_probs_diff_std":   math.Sqrt(ss / 2),
		"rollout_corr/kl":                   -(d[0] + d[1] + d[2]) / 3,
		"rollout_corr/k3_kl":                (e(d[0]) - d[0] - 1 + e(d[2]) - d[2] - 1) / 3,
		"rollout_corr/training_log_ppl":     1,
		"rollout_corr/training_ppl":         (e(1.5) + e(0.5)) / 2,
		"rollout_corr/rollout_log_ppl":      -(rho0 + rho1) / 2,
		"rollout_corr/rollout_ppl":          (e(-rho0) + e(-rho1)) / 2,
		"rollout_corr/log_ppl_diff":         (rho0 + 1.5 + rho1 + 0.5) / 2,
		"rollout_corr/log_ppl_abs_diff":     (math.Abs(rho0+1.5) + math.Abs(rho1+0.5)) / 2,
		"rollout_corr/log_ppl_diff_max":     rho1 + 0.5,
		"rollout_corr/log_ppl_diff_min":     rho0 + 1.5,
		"rollout_corr/ppl_ratio":            (e(rho0+1.5) + e(rho1+0.5)) / 2,
		"rollout_corr/chi2_token":           (e(2*d[0])+1+e(2*d[2]))/3 - 1,
		"rollout_corr/chi2_seq":             (e(2*d[0])+e(2*d[2]))/2 - 1,
		// per source: row 0 alone (two tokens) and row 1 alone (one token)
		"rollout_corr/kl/a":                           -d[0] / 2,
		"rollout_corr/kl/b":                           -d[2],
		"rollout_corr/chi2_seq/b":                     e(2*d[2]) - 1,
		"training/rollout_probs_diff_max/a":           diffs[0],
		"training/rollout_probs_diff_std/a":           diffs[0] / math.Sqrt2,
		"rollout_corr/training_log_ppl/a":             1.5,
		"rollout_corr/log_ppl_diff/b":                 rho1 + 0.5,
		"training/rollout_probs_diff_valid/b":         1,
		"training/rollout_probs_diff_mean/b":          diffs[2],
		"rollout_corr/rollout_log_ppl/a":              -rho0,
		"rollout_corr/ppl_ratio/a":                    e(rho0 + 1.5),
		"training/rollout_probs_diff_valid/a":         1,
		"training/rollout_probs_diff_max/b":           diffs[2],
		"rollout_corr/log_ppl_abs_diff/a":             math.Abs(rho0 + 1.5),
		"rollout_corr/chi2_token/a":                   (e(2*d[0])+1)/2 - 1,
		"rollout_corr/k3_kl/b":                        e(d[2]) - d[2] - 1,
		"rollout_corr/training_ppl/b":                 e(0.5),
		"rollout_corr/rollout_ppl/b":                  e(-rho1),
		"rollout_corr/log_ppl_diff_max/a":             rho0 + 1.5,
		"rollout_corr/log_ppl_diff_min/b":             rho1 + 0.5,
		"training/rollout_probs_diff_mean/a":          diffs[0] / 2,
		"rollout_corr/k3_kl/a":                        (e(d[0]) - d[0] - 1) / 2,
		"rollout_corr/training_log_ppl/b":             0.5,
		"rollout_corr/training_ppl/a":                 e(1.5),
		"rollout_corr/rollout_log_ppl/b":              -rho1,
		"rollout_corr/rollout_ppl/a":                  e(-rho0),
		"rollout_corr/log_ppl_diff/a":                 rho0 + 1.5,
		"rollout_corr/log_ppl_abs_diff/b":             math.Abs(rho1 + 0.5),
		"rollout_corr/log_ppl_diff_max/b":             rho1 + 0.5,
		"rollout_corr/log_ppl_diff_min/a":             rho0 + 1.5,
		"rollout_corr/ppl_ratio/b":                    e(rho1 + 0.5),
		"rollout_corr/chi2_token/b":                   e(2*d[2]) - 1,
		"rollout_corr/chi2_seq/a":                     e(2*d[0]) - 1,
		"training/rollout_actor_probs_pearson_corr/a": pearsonOf(pOld[:2], pRoll[:2]),
		"training/rollout_actor_probs_pearson_corr":   pearsonOf(pOld, pRoll),
	}
	got, err := loss.MismatchMetrics(old, roll, mask, []string{"a", "b"})
	require.NoError(t, err)
	for k, w := range want {
		g, ok := got[k]
		if assert.Truef(t, ok, "metric %s missing", k) {
			assert.InDeltaf(t, w, g, 1e-6, "metric %s", k)
		}
	}
	// one token: no std and no correlation for source b
	assert.NotContains(t, got, "training/rollout_probs_diff_std/b")
	assert.NotContains(t, got, "training/rollout_actor_probs_pearson_corr/b")
	assert.Len(t, got, len(want))

	// one source, or none: no per-source keys
	one, err := loss.MismatchMetrics(old, roll, mask, []string{"a", "a"})
	require.NoError(t, err)
	none, err := loss.MismatchMetrics(old, roll, mask, nil)
	require.NoError(t, err)
	assert.Equal(t, none, one)
	assert.Len(t, none, 18)
}

// pearsonOf is Pearson's r, written out.
func pearsonOf(x, y []float64) float64 {
	var mx, my float64
	for i := range x {
		mx += x[i] / float64(len(x))
		my += y[i] / float64(len(y))
	}
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	return sxy / math.Sqrt(sxx*syy)
}

// TestMismatchMetricsZeroWithoutMismatch: when the sampler is the
// trainer's own model (rollout = old), every difference is zero, the
// ratios and the correlation are 1. chi2_token is mean(ρ²) − 1 with the
// masked mean's ε, −1e-8/(N + 1e-8), as in verl.
func TestMismatchMetricsZeroWithoutMismatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	var old, mask [][]float32
	var sources []string
	var n float64
	for i := range 12 {
		row, m := make([]float32, 3+i%5), make([]float32, 3+i%5)
		for t := range row {
			row[t] = float32(-3 * rng.Float64())
			if t%3 != 1 {
				m[t] = 1
				n++
			}
		}
		old, mask = append(old, row), append(mask, m)
		sources = append(sources, []string{"math", "code", ""}[i%3])
	}
	got, err := loss.MismatchMetrics(old, old, mask, sources)
	require.NoError(t, err)
	for _, suffix := range []string{"", "/math", "/code", "/unknown"} {
		for _, k := range []string{"training/rollout_probs_diff_max", "training/rollout_probs_diff_mean", "training/rollout_probs_diff_std",
			"rollout_corr/kl", "rollout_corr/k3_kl", "rollout_corr/log_ppl_diff", "rollout_corr/log_ppl_abs_diff",
			"rollout_corr/log_ppl_diff_max", "rollout_corr/log_ppl_diff_min", "rollout_corr/chi2_seq"} {
			v, ok := got[k+suffix]
			require.Truef(t, ok, "%s%s missing", k, suffix)
			assert.Zerof(t, v, "%s%s", k, suffix)
		}
		assert.Equal(t, 1.0, got["rollout_corr/ppl_ratio"+suffix])
		assert.InDelta(t, 1, got["training/rollout_actor_probs_pearson_corr"+suffix], 1e-12)
		assert.Equal(t, got["rollout_corr/training_ppl"+suffix], got["rollout_corr/rollout_ppl"+suffix])
		assert.InDelta(t, 0, got["rollout_corr/chi2_token"+suffix], 1e-9)
	}
	assert.InDelta(t, -1e-8/(n+1e-8), got["rollout_corr/chi2_token"], 1e-15)

	// bypass mode with an unchanged policy: Compute's off-policy metrics are zero too
	rows := [][]float32{{-1, -2, -0.5}, {-0.25, -3, -1}}
	b := loss.Batch{LogProbs: mat(2, 3, -1, -2, -0.5, -0.25, -3, -1), OldLogProbs: mat(2, 3, -1, -2, -0.5, -0.25, -3, -1),
		Advantages: mat(2, 3, 1, 1, 1, -1, -1, -1), Mask: mat(2, 3, 1, 1, 1, 1, 1, 0)}
	r, err := loss.Compute(loss.Config{RolloutCorrection: loss.RolloutCorrection{BypassMode: true}}, b)
	require.NoError(t, err)
	for _, k := range []string{"kl", "k3_kl", "log_ppl_diff", "log_ppl_abs_diff", "chi2_seq"} {
		assert.Zero(t, r.Metrics["rollout_corr/"+k], k)
	}
	m, err := loss.MismatchMetrics(rows, rows, [][]float32{{1, 1, 1}, {1, 1, 0}}, nil)
	require.NoError(t, err)
	for k, v := range r.Metrics {
		if w, ok := m[k]; ok {
			assert.Equalf(t, w, v, "%s: Compute's bypass metrics and MismatchMetrics agree", k)
		}
	}
}

// TestMismatchMetricsErrors: malformed rows are errors, an empty batch
// gives no metrics.
func TestMismatchMetricsErrors(t *testing.T) {
	ok := [][]float32{{-1, -2}}
	one := [][]float32{{1, 1}}
	for _, tc := range []struct {
		name            string
		old, roll, mask [][]float32
		sources         []string
		err             error
		msg             string
	}{
		{"row count", ok, [][]float32{{-1, -2}, {-1}}, one, nil, loss.ErrShape, "rollout rows"},
		{"row length", ok, [][]float32{{-1}}, one, nil, loss.ErrShape, "row 0"},
		{"sources", ok, ok, one, []string{"a", "b"}, loss.ErrShape, "2 sources for 1 rows"},
		{"NaN", [][]float32{{float32(math.NaN()), -1}}, ok, one, nil, loss.ErrNonFinite, "old[0][0]"},
		{"Inf rollout", ok, [][]float32{{-1, float32(math.Inf(-1))}}, one, nil, loss.ErrNonFinite, "rollout[0][1]"},
		{"mask value", ok, ok, [][]float32{{1, 0.5}}, nil, loss.ErrMaskValue, "mask[0][1]"},
		{"k3 overflows", [][]float32{{0, 0}}, [][]float32{{-800, 0}}, one, nil, loss.ErrNonFinite, "k3_kl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loss.MismatchMetrics(tc.old, tc.roll, tc.mask, tc.sources)
			require.ErrorIs(t, err, tc.err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	got, err := loss.MismatchMetrics(ok, ok, [][]float32{{0, 0}}, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = loss.MismatchMetrics(nil, nil, nil, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
}
