package loss

import (
	"fmt"
	"math"
	"slices"
)

// UnknownSource is the data-source label MismatchMetrics gives a row whose
// label is empty, as verl labels a batch without data_source "unknown".
const UnknownSource = "unknown"

// MismatchMetrics measures, for one training step, how far the rollout
// sampler's log-probabilities are from the trainer's, under verl's metric
// names. Row i is one response: old[i] the trainer's log-probabilities of
// its tokens (recomputed, verl's old_log_probs), rollout[i] the sampler's,
// mask[i] 1 for a trained token and 0 elsewhere (tool output, padding);
// the three rows have the same length, which may differ from row to row.
// sources, nil or one label per row, names each row's data source.
//
// The keys are those verl logs for the same quantities:
//
//   - from calculate_debug_metrics (verl/utils/debug/metrics.py), over the
//     trained tokens, with p = exp(log-prob):
//     training/rollout_probs_diff_valid (1), training/rollout_probs_diff_max,
//     _mean and _std (of |p_old − p_rollout|; std unbiased, left out for
//     fewer than two tokens) and training/rollout_actor_probs_pearson_corr
//     (Pearson's r of p_old and p_rollout; left out where it is undefined:
//     fewer than two tokens, or a constant side);
//   - from compute_offpolicy_metrics (verl/trainer/ppo/rollout_corr_helper.py,
//     see offPolicyMetrics for the formulas): rollout_corr/training_ppl,
//     training_log_ppl, rollout_ppl, rollout_log_ppl, kl (the direct estimate
//     of KL(π_rollout‖π_old)), k3_kl, log_ppl_diff, log_ppl_abs_diff,
//     log_ppl_diff_max, log_ppl_diff_min, ppl_ratio, chi2_token and chi2_seq.
//
// Where the sampler is the trainer's own model and nothing differs, every
// difference reads 0 — probs_diff, kl, k3_kl, log_ppl_diff and its
// variants, chi2_seq; chi2_token reads −1e-8/(N + 1e-8) for N tokens, the
// masked mean's ε, as in verl — ppl_ratio and the Pearson correlation read
// 1, and training_ppl equals rollout_ppl.
//
// When sources holds two labels or more (an empty label counts as
// UnknownSource), every key is repeated for each source's rows with
// "/<source>" appended, for instance rollout_corr/kl/math. A batch, or a
// source, without a trained token adds no keys (verl refuses such a
// batch).
//
// A trainer calls it once a step, where verl's decoupled mode logs these
// metrics: after recomputing the old log-probabilities and before the
// update, with row i the response part of trajectory i (its recomputed
// log-probabilities, the sampler's, its loss mask, its prompt's data
// source), and adds the map to the step's metrics. That is also verl's
// "disabled" preset: measurement without correction. In bypass mode there
// are no recomputed log-probabilities; Compute then reports the
// rollout_corr/ metrics of the current policy, as verl's bypass loss does.
//
// Rows of different lengths, a sources slice of another length, a mask
// value other than 0 or 1 and a non-finite value are errors wrapping
// ErrShape, ErrMaskValue or ErrNonFinite; so is a metric that overflows
// (k3_kl exponentiates the log ratio unclamped, as verl does).
func MismatchMetrics(old, rollout, mask [][]float32, sources []string) (map[string]float64, error) {
	switch {
	case len(rollout) != len(old) || len(mask) != len(old):
		return nil, fmt.Errorf("loss: MismatchMetrics: %d old rows, %d rollout rows, %d mask rows: %w", len(old), len(rollout), len(mask), ErrShape)
	case sources != nil && len(sources) != len(old):
		return nil, fmt.Errorf("loss: MismatchMetrics: %d sources for %d rows: %w", len(sources), len(old), ErrShape)
	}
	for i := range old {
		if len(rollout[i]) != len(old[i]) || len(mask[i]) != len(old[i]) {
			return nil, fmt.Errorf("loss: MismatchMetrics: row %d has %d old, %d rollout and %d mask values: %w",
				i, len(old[i]), len(rollout[i]), len(mask[i]), ErrShape)
		}
		for t := range old[i] {
			for _, f := range []struct {
				name string
				v    float32
			}{{"old", old[i][t]}, {"rollout", rollout[i][t]}, {"mask", mask[i][t]}} {
				if math.IsNaN(float64(f.v)) || math.IsInf(float64(f.v), 0) {
					return nil, fmt.Errorf("loss: MismatchMetrics: %s[%d][%d] = %v: %w", f.name, i, t, f.v, ErrNonFinite)
				}
			}
			if m := mask[i][t]; m != 0 && m != 1 {
				return nil, fmt.Errorf("loss: MismatchMetrics: mask[%d][%d] = %v: %w", i, t, m, ErrMaskValue)
			}
		}
	}
	all := make([]int, len(old))
	for i := range all {
		all[i] = i
	}
	out := map[string]float64{}
	if err := mismatchOf(old, rollout, mask, all, "", out); err != nil {
		return nil, err
	}
	groups := map[string][]int{}
	var labels []string
	for i, s := range sources {
		if s == "" {
			s = UnknownSource
		}
		if _, ok := groups[s]; !ok {
			labels = append(labels, s)
		}
		groups[s] = append(groups[s], i)
	}
	if len(labels) < 2 {
		return out, nil
	}
	slices.Sort(labels)
	for _, s := range labels {
		if err := mismatchOf(old, rollout, mask, groups[s], "/"+s, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// mismatchOf adds the metrics of rows idx to out, each key followed by
// suffix.
func mismatchOf(old, rollout, mask [][]float32, idx []int, suffix string, out map[string]float64) error {
	cols := 1
	for _, i := range idx {
		cols = max(cols, len(old[i]))
	}
	n := len(idx) * cols
	b := &rcBatch{pi: make([]float64, n), rollout: make([]float64, n), mask: make([]float64, n), rows: len(idx), cols: cols}
	for r, i := range idx {
		for t := range old[i] {
			b.pi[r*cols+t], b.rollout[r*cols+t], b.mask[r*cols+t] = float64(old[i][t]), float64(rollout[i][t]), float64(mask[i][t])
		}
	}
	if b.tokens() == 0 {
		return nil
	}
	off := map[string]float64{}
	offPolicyMetrics(b, off)
	m := make(map[string]float64, len(off)+5)
	for k, v := range off {
		m[rcPrefix+k] = v
	}
	probsDiffMetrics(b, m)
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("loss: MismatchMetrics: %s%s = %v: %w", k, suffix, v, ErrNonFinite)
		}
		out[k+suffix] = v
	}
	return nil
}

// probsDiffMetrics adds verl's calculate_debug_metrics
// (verl/utils/debug/metrics.py) over the batch's tokens: the maximum, mean
// and unbiased standard deviation of |exp(log π) − exp(log π_rollout)|,
// and Pearson's correlation of the two probabilities (torch.corrcoef).
// The standard deviation and the correlation, which verl would report as
// NaN where they are undefined, are left out there.
func probsDiffMetrics(b *rcBatch, m map[string]float64) {
	var p, q, d []float64
	for i, mk := range b.mask {
		if mk == 0 {
			continue
		}
		pi, pr := math.Exp(b.pi[i]), math.Exp(b.rollout[i])
		p, q, d = append(p, pi), append(q, pr), append(d, math.Abs(pi-pr))
	}
	m["training/rollout_probs_diff_valid"] = 1
	m["training/rollout_probs_diff_max"] = slices.Max(d)
	m["training/rollout_probs_diff_mean"] = meanOf(d)
	if len(d) >= 2 {
		m["training/rollout_probs_diff_std"] = unbiasedStd(d)
	}
	if r, ok := pearson(p, q); ok {
		m["training/rollout_actor_probs_pearson_corr"] = r
	}
}

// pearson returns Pearson's correlation of x and y, and false where it is
// undefined (fewer than two values, or either constant).
func pearson(x, y []float64) (float64, bool) {
	if len(x) < 2 {
		return 0, false
	}
	mx, my := meanOf(x), meanOf(y)
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0, false
	}
	// torch.corrcoef clips to [−1, 1] against rounding.
	return clampF(sxy/math.Sqrt(sxx*syy), -1, 1), true
}
