package loss

import (
	"math"
	"slices"
)

// rcSafetyBound is verl's SAFETY_BOUND: log ratios are clamped to ±20
// before exp (verl/trainer/ppo/rollout_corr_helper.py).
const rcSafetyBound = 20.0

// rcPrefix prefixes the rollout-correction metrics, as verl's
// compute_rollout_correction_and_rejection_mask does.
const rcPrefix = "rollout_corr/"

// rcBatch is the view of a batch the correction reads: row-major [rows,
// cols] values, pi being the policy compared with the rollout (the old
// policy in decoupled mode, the current one in bypass mode).
type rcBatch struct {
	pi, rollout, mask []float64
	rows, cols        int
}

// maskedMean is verl_F.masked_mean over the batch's tokens.
func (b *rcBatch) maskedMean(x []float64) float64 { return maskedMean(x, b.mask) }

// maskedMean is verl_F.masked_mean: Σ x·m / (Σ m + 1e-8).
func maskedMean(x, mask []float64) float64 {
	var s, n float64
	for i, m := range mask {
		if m != 0 {
			s += x[i] * m
			n += m
		}
	}
	return s / (n + 1e-8)
}

// rowMeans returns each row's masked mean Σ_t m·x / (n_b + 1e-8)
// (verl_F.masked_mean along the last axis), over all rows, empty ones
// included (their mean is 0).
func (b *rcBatch) rowMeans(x []float64) []float64 {
	out := make([]float64, b.rows)
	for r := range b.rows {
		var s, n float64
		for t := range b.cols {
			if m := b.mask[r*b.cols+t]; m != 0 {
				s += x[r*b.cols+t] * m
				n += m
			}
		}
		out[r] = s / (n + 1e-8)
	}
	return out
}

// rowSums returns each row's masked sum Σ_t m·x (verl_F.masked_sum).
func (b *rcBatch) rowSums(x []float64) []float64 {
	out := make([]float64, b.rows)
	for r := range b.rows {
		for t := range b.cols {
			if m := b.mask[r*b.cols+t]; m != 0 {
				out[r] += x[r*b.cols+t] * m
			}
		}
	}
	return out
}

// validRows reports for each row whether it has a token (verl's
// seq_valid_mask).
func (b *rcBatch) validRows() []bool {
	valid := make([]bool, b.rows)
	for i, m := range b.mask {
		valid[i/b.cols] = valid[i/b.cols] || m != 0
	}
	return valid
}

// tokens reports the batch's token count.
func (b *rcBatch) tokens() float64 {
	var n float64
	for _, m := range b.mask {
		n += m
	}
	return n
}

// logRatio returns log π − log π_rollout per position, unclamped, and
// clamped to ±20.
func (b *rcBatch) logRatio() (raw, safe []float64) {
	raw, safe = make([]float64, len(b.pi)), make([]float64, len(b.pi))
	for i := range b.pi {
		raw[i] = b.pi[i] - b.rollout[i]
		safe[i] = clampF(raw[i], -rcSafetyBound, rcSafetyBound)
	}
	return raw, safe
}

// rcResult is a correction's outcome on one batch.
type rcResult struct {
	// weights are the IS weights to apply (truncated, normalised, zero on
	// padding), nil when none are computed.
	weights []float64
	// keep is 1 where every rejection option keeps the token, else 0; nil
	// without rejection.
	keep    []float64
	metrics map[string]float64 // with the rollout_corr/ prefix
}

// apply computes the IS weights, the rejection and their metrics, as
// verl's compute_rollout_correction_and_rejection_mask does; in bypass
// mode it adds the off-policy metrics, as compute_policy_loss_bypass_mode
// does. A batch without tokens gets the weights and no metrics (verl
// refuses it).
func (s rcSpec) apply(b *rcBatch) rcResult {
	res := rcResult{metrics: map[string]float64{}}
	raw, safe := b.logRatio()
	empty := b.tokens() == 0
	if s.is != "" {
		res.weights = s.isWeights(b, raw, safe, res.metrics, !empty)
	}
	if len(s.rs) > 0 {
		res.keep = s.rejection(b, safe, res.metrics, !empty)
	}
	if s.bypass && !empty {
		offPolicyMetrics(b, res.metrics)
	}
	if s.tisAlias { // Config.TISCap's keys, as before the rollout correction
		return res
	}
	out := make(map[string]float64, len(res.metrics))
	for k, v := range res.metrics {
		out[rcPrefix+k] = v
	}
	res.metrics = out
	return res
}

// isWeights returns the truncated IS weights of verl's
// compute_rollout_correction_weights (rollout_corr_helper.py):
//
//	token:    w_t = exp(clamp(δ_t, ±20))·m_t
//	sequence: w_t = exp(clamp(Σ_t' m·δ_t', ±20))·m_t
//	then w = min(w, threshold), and with batch normalisation w /= mean(w)
//
// and, when withMetrics, adds compute_is_metrics' statistics of the
// weights before truncation to metrics.
func (s rcSpec) isWeights(b *rcBatch, raw, safe []float64, metrics map[string]float64, withMetrics bool) []float64 {
	w := make([]float64, len(raw))
	var seqLog []float64 // Σ_t m·δ_t per row, for ISSequence
	if s.is == ISSequence {
		seqLog = b.rowSums(raw)
		for r, l := range seqLog {
			v := math.Exp(clampF(l, -rcSafetyBound, rcSafetyBound))
			for t := range b.cols {
				w[r*b.cols+t] = v * b.mask[r*b.cols+t]
			}
		}
	} else {
		for i, d := range safe {
			w[i] = math.Exp(d) * b.mask[i]
		}
	}
	if withMetrics {
		if s.tisAlias {
			tisMetrics(b, w, s.isThr, metrics)
		} else {
			isMetrics(b, w, seqLog, s.isThr, metrics)
		}
	}
	for i := range w {
		w[i] = math.Min(w[i], s.isThr)
	}
	if !s.isNorm {
		return w
	}
	var mean float64
	if s.is == ISToken {
		mean = b.maskedMean(w)
	} else {
		valid := b.validRows()
		var sum, n float64
		for r, m := range b.rowMeans(w) {
			if valid[r] {
				sum += m
				n++
			}
		}
		mean = sum / math.Max(n, 1e-8)
	}
	factor := 1.0
	if mean > 1e-8 {
		factor = mean
		for i := range w {
			w[i] /= mean
		}
	}
	if withMetrics {
		metrics["rollout_is_batch_norm_factor"] = factor
	}
	return w
}

// tisMetrics are Config.TISCap's metrics: the masked mean of the weight
// after truncation and the fraction truncated.
func tisMetrics(b *rcBatch, w []float64, cap float64, metrics map[string]float64) {
	truncated, capped := make([]float64, len(w)), make([]float64, len(w))
	for i, x := range w {
		truncated[i] = math.Min(x, cap)
		capped[i] = b2f(x > cap)
	}
	metrics["tis_imp_ratio_mean"] = b.maskedMean(truncated)
	metrics["tis_clipfrac"] = b.maskedMean(capped)
}

// isMetrics adds verl's compute_is_metrics (rollout_corr_helper.py) for
// the weights w before truncation; seqLog holds each row's summed log
// ratio for sequence-level weights and is nil for token-level ones. With
// c the threshold and masked means over the batch's tokens:
//
//	rollout_is_mean            masked mean of w
//	rollout_is_max, _min       token: over the tokens; sequence: exp(min(max Σδ, 20)), exp(min Σδ) over all rows
//	rollout_is_ratio_fraction_high, _low
//	                           token: masked mean of [w > c], [w < 1/c];
//	                           sequence: mean over rows of [Σδ > log c], [Σδ < −log c]
//	rollout_is_std             √max(0, mean(w̃²) − mean(w̃)²), w̃ = clamp(w, 1/c, c); 0 for one token
//	rollout_is_eff_sample_size 1 / mean((w̃ / (mean w̃ + 1e-8))²)
//	rollout_is_seq_mean, _std, _max, _min, _max_deviation, _fraction_high, _fraction_low
//	                           of the rows' masked means s_b of w, over all rows
//	                           (std unbiased, 0 for one row; deviation max |s_b − 1|)
func isMetrics(b *rcBatch, w, seqLog []float64, c float64, metrics map[string]float64) {
	lo := 1 / c
	metrics["rollout_is_mean"] = b.maskedMean(w)
	if seqLog != nil {
		logHi, logLo := math.Log(c), math.Log(lo)
		metrics["rollout_is_max"] = math.Exp(math.Min(slices.Max(seqLog), rcSafetyBound))
		metrics["rollout_is_min"] = math.Exp(slices.Min(seqLog))
		var high, low float64
		for _, l := range seqLog {
			high += b2f(l > logHi)
			low += b2f(l < logLo)
		}
		metrics["rollout_is_ratio_fraction_high"] = high / float64(b.rows)
		metrics["rollout_is_ratio_fraction_low"] = low / float64(b.rows)
	} else {
		high, low := make([]float64, len(w)), make([]float64, len(w))
		maxW, minW := math.Inf(-1), math.Inf(1)
		for i, x := range w {
			high[i], low[i] = b2f(x > c), b2f(x < lo)
			if b.mask[i] != 0 {
				maxW, minW = math.Max(maxW, x), math.Min(minW, x)
			}
		}
		metrics["rollout_is_ratio_fraction_high"] = b.maskedMean(high)
		metrics["rollout_is_ratio_fraction_low"] = b.maskedMean(low)
		metrics["rollout_is_max"] = maxW
		metrics["rollout_is_min"] = minW
	}
	clamped := make([]float64, len(w))
	for i, x := range w {
		clamped[i] = clampF(x, lo, c)
	}
	mean := b.maskedMean(clamped)
	if b.tokens() > 1 {
		metrics["rollout_is_std"] = math.Sqrt(math.Max(maskedMeanSq(b, clamped)-mean*mean, 0))
	} else {
		metrics["rollout_is_std"] = 0
	}
	norm := make([]float64, len(w))
	for i, x := range clamped {
		norm[i] = x / (mean + 1e-8)
	}
	metrics["rollout_is_eff_sample_size"] = 1 / maskedMeanSq(b, norm)
	seq := b.rowMeans(w)
	var dev float64
	var high, low float64
	for _, s := range seq {
		dev = math.Max(dev, math.Abs(s-1))
		high += b2f(s > c)
		low += b2f(s < lo)
	}
	n := float64(len(seq))
	metrics["rollout_is_seq_mean"] = meanOf(seq)
	metrics["rollout_is_seq_std"] = unbiasedStd(seq)
	metrics["rollout_is_seq_max"] = slices.Max(seq)
	metrics["rollout_is_seq_min"] = slices.Min(seq)
	metrics["rollout_is_seq_max_deviation"] = dev
	metrics["rollout_is_seq_fraction_high"] = high / n
	metrics["rollout_is_seq_fraction_low"] = low / n
}

// rejection returns the keep mask of verl's compute_rollout_rejection_mask
// (rollout_corr_helper.py): every option computes its statistic from the
// clamped log ratio δ (k1 = −δ, k2 = ½δ², k3 = e^δ − 1 − δ) per token or
// per sequence (masked sum, masked mean over n_b + 1e-8, maximum over the
// tokens or 0 for a row without any), keeps a value in [log lower, log
// upper] (k1) or ≤ upper (k2, k3), and a token is kept when every option
// keeps it. When withMetrics it adds each option's compute_rs_metrics and
// masked fractions, and the combined ones.
func (s rcSpec) rejection(b *rcBatch, safe []float64, metrics map[string]float64, withMetrics bool) []float64 {
	keep := make([]float64, len(safe))
	for i := range keep {
		keep[i] = 1
	}
	var div [4][]float64 // per-token k1, k2, k3, by k
	for k := 1; k <= 3; k++ {
		div[k] = make([]float64, len(safe))
	}
	for i, d := range safe {
		div[1][i], div[2][i], div[3][i] = -d, 0.5*d*d, math.Exp(d)-1-d
	}
	valid := b.validRows()
	for _, o := range s.rs {
		stat := div[o.k]
		var seq []float64 // per-row statistic, sequence options only
		switch o.level {
		case rcSeqSum:
			seq = b.rowSums(stat)
		case rcSeqMean:
			seq = b.rowMeans(stat)
		case rcSeqMax:
			seq = make([]float64, b.rows)
			for r := range b.rows {
				if !valid[r] {
					continue
				}
				seq[r] = math.Inf(-1)
				for t := range b.cols {
					if b.mask[r*b.cols+t] != 0 {
						seq[r] = math.Max(seq[r], stat[r*b.cols+t])
					}
				}
			}
		}
		if seq != nil { // broadcast the row's statistic to its tokens
			stat = make([]float64, len(safe))
			for i := range stat {
				stat[i] = seq[i/b.cols]
			}
		}
		logLo, logHi := math.Log(o.lower), math.Log(o.upper)
		kept := func(x float64) bool {
			if o.k == 1 {
				return x >= logLo && x <= logHi
			}
			return x <= o.upper
		}
		optKeep := make([]float64, len(stat))
		for i, x := range stat {
			optKeep[i] = b2f(kept(x))
			keep[i] *= optKeep[i]
		}
		if !withMetrics {
			continue
		}
		prefix := "rollout_rs_" + o.name
		hi, lo := o.upper, 0.0
		if o.k == 1 {
			hi, lo = logHi, logLo
		}
		rsMetrics(b, prefix, stat, seq, valid, hi, lo, o.k == 1, metrics)
		frac, rowRejected := b.rejected(optKeep)
		metrics[prefix+"_masked_fraction"] = frac
		var seqRejected, seqValid float64
		for r, v := range valid {
			if v {
				seqValid++
				seqRejected += b2f(rowRejected[r])
			}
		}
		if seqValid > 0 {
			metrics[prefix+"_seq_masked_fraction"] = seqRejected / seqValid
		} else {
			metrics[prefix+"_seq_masked_fraction"] = 0
		}
	}
	if withMetrics {
		frac, rowRejected := b.rejected(keep)
		var seqRejected float64
		for _, r := range rowRejected {
			seqRejected += b2f(r)
		}
		metrics["rollout_rs_masked_fraction"] = frac
		metrics["rollout_rs_seq_masked_fraction"] = seqRejected / float64(b.rows) // over all rows, as verl
	}
	return keep
}

// rejected returns the masked mean of 1 − keep, the fraction of the
// batch's tokens rejected, and for each row whether a token of it is
// rejected.
func (b *rcBatch) rejected(keep []float64) (float64, []bool) {
	out := make([]float64, len(keep))
	rows := make([]bool, b.rows)
	for i, k := range keep {
		out[i] = 1 - k
		rows[i/b.cols] = rows[i/b.cols] || (k == 0 && b.mask[i] != 0)
	}
	return b.maskedMean(out), rows
}

// rsMetrics adds verl's compute_rs_metrics (rollout_corr_helper.py) for
// one option: stat is the per-token statistic (the row's value broadcast
// for a sequence option, whose per-row values seq holds; seq is nil for a
// token option), hi and lo the thresholds it is compared with (log bounds
// for k1; upper and 0 otherwise), lower whether the lower bound applies:
//
//	_mean                   masked mean of stat
//	_max, _min              over the non-empty rows' values (sequence) or the tokens (token)
//	_fraction_high, _low    of values above hi, below lo (low only for k1): over the
//	                        non-empty rows (sequence) or the tokens (token)
//	_std                    √max(0, mean(s̃²) − mean(s̃)²), s̃ = clamp(stat, lo, hi), over the tokens; 0 for one token
//	_seq_mean, _seq_std, _seq_max, _seq_min, _seq_max_deviation (max |v|),
//	_seq_fraction_high, _seq_fraction_low (k1)
//	                        over the non-empty rows' values (the rows' masked means of
//	                        stat for a token option; std unbiased, 0 for one row)
func rsMetrics(b *rcBatch, prefix string, stat, seq []float64, valid []bool, hi, lo float64, lower bool, metrics map[string]float64) {
	rowVals := seq
	if rowVals == nil {
		rowVals = b.rowMeans(stat)
	}
	var vals []float64 // the non-empty rows' values
	for r, v := range rowVals {
		if valid[r] {
			vals = append(vals, v)
		}
	}
	above := func(x float64) float64 { return b2f(x > hi) }
	below := func(x float64) float64 {
		if !lower {
			return 0
		}
		return b2f(x < lo)
	}
	fracOf := func(f func(float64) float64) float64 {
		var s float64
		for _, v := range vals {
			s += f(v)
		}
		return s / float64(len(vals))
	}
	metrics[prefix+"_mean"] = b.maskedMean(stat)
	if seq != nil {
		metrics[prefix+"_max"] = slices.Max(vals)
		metrics[prefix+"_min"] = slices.Min(vals)
		metrics[prefix+"_fraction_high"] = fracOf(above)
		metrics[prefix+"_fraction_low"] = fracOf(below)
	} else {
		maxV, minV := math.Inf(-1), math.Inf(1)
		high, low := make([]float64, len(stat)), make([]float64, len(stat))
		for i, x := range stat {
			high[i], low[i] = above(x), below(x)
			if b.mask[i] != 0 {
				maxV, minV = math.Max(maxV, x), math.Min(minV, x)
			}
		}
		metrics[prefix+"_max"] = maxV
		metrics[prefix+"_min"] = minV
		metrics[prefix+"_fraction_high"] = b.maskedMean(high)
		metrics[prefix+"_fraction_low"] = b.maskedMean(low)
	}
	if b.tokens() > 1 {
		clamped := make([]float64, len(stat))
		for i, x := range stat {
			clamped[i] = clampF(x, lo, hi)
		}
		mean := b.maskedMean(clamped)
		metrics[prefix+"_std"] = math.Sqrt(math.Max(maskedMeanSq(b, clamped)-mean*mean, 0))
	} else {
		metrics[prefix+"_std"] = 0
	}
	var dev float64
	for _, v := range vals {
		dev = math.Max(dev, math.Abs(v))
	}
	metrics[prefix+"_seq_mean"] = meanOf(vals)
	metrics[prefix+"_seq_std"] = unbiasedStd(vals)
	metrics[prefix+"_seq_max"] = slices.Max(vals)
	metrics[prefix+"_seq_min"] = slices.Min(vals)
	metrics[prefix+"_seq_max_deviation"] = dev
	metrics[prefix+"_seq_fraction_high"] = fracOf(above)
	if lower {
		metrics[prefix+"_seq_fraction_low"] = fracOf(below)
	}
}

// offPolicyMetrics adds verl's compute_offpolicy_metrics
// (rollout_corr_helper.py) for π = b.pi (the trainer's policy) and the
// rollout's: with a_b and ρ_b the rows' masked mean log-probs of each
// (over all rows, empty ones at 0), δ = log π − log π_rollout and masked
// means over the tokens,
//
//	training_ppl      mean_b exp(−a_b)          training_log_ppl  mean_b −a_b
//	rollout_ppl       mean_b exp(−ρ_b)          rollout_log_ppl   mean_b −ρ_b
//	kl                mean(log π_rollout − log π): KL(π_rollout‖π), direct estimator
//	k3_kl             mean(e^δ − δ − 1)
//	log_ppl_diff      mean_b (ρ_b − a_b), and _abs_diff (mean |·|), _diff_max, _diff_min
//	ppl_ratio         mean_b exp(ρ_b − a_b)
//	chi2_token        mean(exp(clamp(δ, ±20))²) − 1
//	chi2_seq          mean_b exp(2·clamp(Σ_t m·δ, ±20)) − 1
func offPolicyMetrics(b *rcBatch, metrics map[string]float64) {
	a, rho := b.rowMeans(b.pi), b.rowMeans(b.rollout)
	n := float64(b.rows)
	var ppl, logPPL, rppl, rlogPPL, diff, absDiff, ratio float64
	diffs := make([]float64, b.rows)
	for r := range b.rows {
		ppl += math.Exp(-a[r])
		logPPL -= a[r]
		rppl += math.Exp(-rho[r])
		rlogPPL -= rho[r]
		diffs[r] = rho[r] - a[r]
		diff += diffs[r]
		absDiff += math.Abs(diffs[r])
		ratio += math.Exp(diffs[r])
	}
	metrics["training_ppl"] = ppl / n
	metrics["training_log_ppl"] = logPPL / n
	metrics["rollout_ppl"] = rppl / n
	metrics["rollout_log_ppl"] = rlogPPL / n
	metrics["log_ppl_diff"] = diff / n
	metrics["log_ppl_abs_diff"] = absDiff / n
	metrics["log_ppl_diff_max"] = slices.Max(diffs)
	metrics["log_ppl_diff_min"] = slices.Min(diffs)
	metrics["ppl_ratio"] = ratio / n
	raw, safe := b.logRatio()
	neg, k3, rho2 := make([]float64, len(raw)), make([]float64, len(raw)), make([]float64, len(raw))
	for i, d := range raw {
		neg[i] = -d
		k3[i] = math.Exp(d) - d - 1
		rho2[i] = math.Exp(2 * safe[i])
	}
	metrics["kl"] = b.maskedMean(neg)
	metrics["k3_kl"] = b.maskedMean(k3)
	metrics["chi2_token"] = b.maskedMean(rho2) - 1
	var chi2 float64
	for _, s := range b.rowSums(raw) {
		chi2 += math.Exp(2 * clampF(s, -rcSafetyBound, rcSafetyBound))
	}
	metrics["chi2_seq"] = chi2/n - 1
}

// maskedMeanSq is the masked mean of x².
func maskedMeanSq(b *rcBatch, x []float64) float64 {
	sq := make([]float64, len(x))
	for i, v := range x {
		sq[i] = v * v
	}
	return b.maskedMean(sq)
}

func meanOf(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// unbiasedStd is torch.std's default (Bessel-corrected) standard deviation,
// or 0 for fewer than two values, as verl reports it.
func unbiasedStd(x []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	m := meanOf(x)
	var s float64
	for _, v := range x {
		s += (v - m) * (v - m)
	}
	return math.Sqrt(s / float64(len(x)-1))
}
