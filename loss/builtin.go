package loss

import "math"

// builtinVariant returns the built-in variant called name. A switch, not
// a package-level map, so that no package state can be mutated.
func builtinVariant(name Mode) (Variant, bool) {
	switch name {
	case ModeVanilla:
		return Variant{Loss: lossVanilla, Metrics: metricsVanilla, ReducesToREINFORCE: true}, true
	case ModeGSPO:
		return Variant{Loss: lossGSPO, Agg: AggSeqMeanTokenMean, Metrics: metricsGSPO, ReducesToREINFORCE: true}, true
	case ModeCISPO:
		return Variant{Loss: lossCISPO, Metrics: metricsCISPO, ReducesToREINFORCE: true}, true
	case ModeGPG:
		return Variant{Loss: lossGPG, Metrics: metricsPlain, ReducesToREINFORCE: true}, true
	case ModeSAPO:
		return Variant{Loss: lossSAPO, Agg: AggSeqMeanTokenMean, Metrics: metricsPlain, ReducesToREINFORCE: true}, true
	case ModeGeoMean:
		// The mean over rows of per-row token means is seq-mean-token-mean
		// when no row is empty.
		return Variant{Loss: lossGeoMean, Agg: AggSeqMeanTokenMean, Metrics: metricsGeoMean, ReducesToREINFORCE: true}, true
	}
	return Variant{}, false
}

// builtinModes returns the names of the built-in modes, sorted, in a
// fresh slice.
func builtinModes() []Mode {
	return []Mode{ModeCISPO, ModeGeoMean, ModeGPG, ModeGSPO, ModeSAPO, ModeVanilla}
}

// The built-in objectives below build their graphs in the order the
// gorgonia-only versions before them did, operation for operation, so
// that their float64 results are unchanged to the last bit.

// lossVanilla is PPO-clip with decoupled bounds and dual-clip, after
// verl's compute_policy_loss_vanilla (verl/trainer/ppo/core_algos.py):
//
//	r    = exp(clamp(logπ − logπ_old, −20, 20))
//	L1   = max(−A·r, −A·clamp(r, 1−ε_low, 1+ε_high))
//	L    = A < 0 ? min(−A·c, L1) : L1
func lossVanilla(v *Vars) Expr {
	cfg, a, r := v.Config(), v.Advantages(), v.Ratio()
	negA := a.Neg()
	l1 := negA.Mul(r).Max(negA.Mul(r.Clip(1-cfg.ClipLow, 1+cfg.ClipHigh)))
	return v.Where(a.LT(0), negA.Mul(cfg.ClipC).Min(l1), l1)
}

// lossGSPO is GSPO's token-level form of the sequence ratio, after verl's
// compute_policy_loss_gspo (Zheng et al. 2025, arXiv:2507.18071):
//
//	s_b    = Σ_t m·(logπ − logπ_old) / max(n_b, 1)
//	log r  = min(logπ − sg(logπ) + sg(s_b), 10)
//	L      = max(−A·r, −A·clamp(r, 1−ε_low, 1+ε_high)), aggregated seq-mean-token-mean
func lossGSPO(v *Vars) Expr {
	cfg, lp := v.Config(), v.LogProbs()
	s := lp.Sub(v.OldLogProbs()).SeqMean()
	r := lp.Sub(lp.StopGradient()).Add(s.StopGradient()).Min(10).Exp()
	negA := v.Advantages().Neg()
	return negA.Mul(r).Max(negA.Mul(r.Clip(1-cfg.ClipLow, 1+cfg.ClipHigh)))
}

// lossCISPO is CISPO (MiniMax-M1, arXiv:2506.13585), after verl's
// compute_policy_loss_cispo: the clipped ratio is a detached weight on the
// REINFORCE term,
//
//	L = −sg(clamp(exp(clamp(logπ − logπ_old, ±20)), 1−ε_low, 1+ε_high))·A·logπ
func lossCISPO(v *Vars) Expr {
	cfg := v.Config()
	w := v.Ratio().Clip(1-cfg.ClipLow, 1+cfg.ClipHigh).StopGradient()
	return w.Mul(v.Advantages()).Mul(v.LogProbs()).Neg()
}

// lossGPG is GPG (arXiv:2504.02546), after verl's compute_policy_loss_gpg:
// L = −logπ·A.
func lossGPG(v *Vars) Expr {
	return v.LogProbs().Mul(v.Advantages()).Neg()
}

// lossSAPO is SAPO's soft gate (Gao et al. 2025, arXiv:2511.20347), after
// verl's compute_policy_loss_sapo:
//
//	r = exp(clamp(logπ − logπ_old, ±20)),  τ = A > 0 ? τ_pos : τ_neg
//	L = −σ(τ·(r − 1))·(4/τ)·A, aggregated seq-mean-token-mean
//
// r − 1 is written r + (−1): gorgonia rewrites exp(x) − 1 as expm1(x),
// which would change the last bits of the values verl's formula gives.
func lossSAPO(v *Vars) Expr {
	cfg, a, r := v.Config(), v.Advantages(), v.Ratio()
	tau := a.GT(0).Mul(cfg.TauPos - cfg.TauNeg).Add(cfg.TauNeg) // τ_neg + (τ_pos − τ_neg)·[A > 0]
	gate := tau.Mul(r.Add(-1)).Sigmoid().Mul(4).Div(tau)
	return gate.Mul(a).Neg()
}

// lossGeoMean is GMPO (Zhao et al. 2025, arXiv:2507.20673), after verl's
// compute_policy_loss_geo_mean: the token log-ratio δ is clipped to
// [−ε_low, ε_high] in the direction that matters for sign(A), and the
// sequence ratio is the geometric mean of the token ratios:
//
//	δ'  = sign(A)·min(sign(A)·δ, sign(A)·clamp(δ, −ε_low, ε_high))
//	L_b = −Ā_b·exp(Σ_t m·δ' / (n_b + 1e-8)),  Ā_b = Σ_t m·A / (n_b + 1e-8)
//	L   = mean_b L_b (over all B rows, as torch.mean in verl)
//
// With TIS, each L_b is weighted by the geometric mean of the row's
// token weights, exp(Σ_t m·log(w + 1e-10) / (n_b + 1e-8)), as verl does.
func lossGeoMean(v *Vars) Expr {
	cfg, a := v.Config(), v.Advantages()
	delta := v.LogProbs().Sub(v.OldLogProbs())
	sgn := a.Sign()
	clipped := delta.Clip(-cfg.ClipLow, cfg.ClipHigh)
	dmin := sgn.Mul(sgn.Mul(delta).Min(sgn.Mul(clipped)))
	n := v.Count().Add(1e-8)
	pg := a.SeqSum().Div(n).Mul(dmin.SeqSum().Div(n).Exp()).Neg()
	if w, ok := v.TISWeights(); ok {
		pg = pg.Mul(w.Add(1e-10).Log().SeqSum().Div(n).Exp())
	}
	return pg.Mean()
}

// The metrics below follow the pg_metrics dictionaries of the verl
// functions cited on the matching build functions. Each is a masked mean
// (verl_F.masked_mean, Σ x·m / (Σ m + 1e-8)), accumulated in one sweep
// over the real tokens.

// means accumulates masked means of a few per-token quantities.
type means struct {
	n   float64
	sum [3]float64
}

func (m *means) add(x ...float64) {
	m.n++
	for i, v := range x {
		m.sum[i] += v
	}
}

func (m *means) mean(i int) float64 { return m.sum[i] / (m.n + 1e-8) }

func metricsVanilla(d *Data) map[string]float64 {
	cfg := d.Config
	// With r = e^δ: pg2 > pg1 (clipped) iff A > 0 and r > 1+ε_high, or A < 0
	// and r < 1−ε_low; the dual clip binds iff A < 0 and max(r, 1−ε_low) > c,
	// that is r > c as c > 1. Comparing δ with log-thresholds saves an exp
	// per token.
	logHi, logLo, logC := math.Log(1+cfg.ClipHigh), logLowerBound(cfg.ClipLow), math.Log(cfg.ClipC)
	var m means
	for i, mk := range d.Mask {
		if mk == 0 {
			continue
		}
		delta := clampF(d.LogProbs[i]-d.OldLogProbs[i], -20, 20)
		a := d.Advantages[i]
		clipped := (a > 0 && delta > logHi) || (a < 0 && delta < logLo)
		m.add(b2f(clipped), b2f(a < 0 && delta > logC), -delta)
	}
	return map[string]float64{"pg_clipfrac": m.mean(0), "pg_clipfrac_lower": m.mean(1), "ppo_kl": m.mean(2)}
}

func metricsGSPO(d *Data) map[string]float64 {
	cfg := d.Config
	var m means
	for b := range d.Rows {
		row := b * d.Cols
		var s, cnt float64
		for t := range d.Cols {
			i := row + t
			s += (d.LogProbs[i] - d.OldLogProbs[i]) * d.Mask[i]
			cnt += d.Mask[i]
		}
		r := math.Exp(math.Min(s/math.Max(cnt, 1), 10))
		for t := range d.Cols {
			i := row + t
			if d.Mask[i] == 0 {
				continue
			}
			a := d.Advantages[i]
			m.add(b2f(-a*clampF(r, 1-cfg.ClipLow, 1+cfg.ClipHigh) > -a*r), d.OldLogProbs[i]-d.LogProbs[i])
		}
	}
	return map[string]float64{"pg_clipfrac": m.mean(0), "pg_clipfrac_lower": 0, "ppo_kl": m.mean(1)}
}

func metricsCISPO(d *Data) map[string]float64 {
	cfg := d.Config
	logHi, logLo := math.Log(1+cfg.ClipHigh), logLowerBound(cfg.ClipLow)
	var m means
	for i, mk := range d.Mask {
		if mk == 0 {
			continue
		}
		delta := clampF(d.LogProbs[i]-d.OldLogProbs[i], -20, 20)
		// r = e^δ leaves [1−ε_low, 1+ε_high] iff δ leaves [log(1−ε_low), log(1+ε_high)]
		m.add(b2f(delta < logLo || delta > logHi), -delta)
	}
	return map[string]float64{"pg_clipfrac": m.mean(0), "pg_clipfrac_lower": 0, "ppo_kl": m.mean(1)}
}

// metricsPlain serves gpg and sapo, which clip nothing; ppo_kl is
// masked_mean(−clamp(logπ − logπ_old, ±20)) as in compute_policy_loss_sapo.
// verl's compute_policy_loss_gpg reports no metrics at all; gpg reports the
// same three here so that every mode fills the same keys.
func metricsPlain(d *Data) map[string]float64 {
	var m means
	for i, mk := range d.Mask {
		if mk != 0 {
			m.add(-clampF(d.LogProbs[i]-d.OldLogProbs[i], -20, 20))
		}
	}
	return map[string]float64{"pg_clipfrac": 0, "pg_clipfrac_lower": 0, "ppo_kl": m.mean(0)}
}

func metricsGeoMean(d *Data) map[string]float64 {
	cfg := d.Config
	var m means
	for i, mk := range d.Mask {
		if mk == 0 {
			continue
		}
		delta := d.LogProbs[i] - d.OldLogProbs[i]
		clipped := delta != clampF(delta, -cfg.ClipLow, cfg.ClipHigh)
		m.add(b2f(clipped && d.Advantages[i] > 0), b2f(clipped && d.Advantages[i] < 0), -delta)
	}
	return map[string]float64{"pg_clipfrac": m.mean(0), "pg_clipfrac_lower": m.mean(1), "ppo_kl": m.mean(2)}
}

// logLowerBound is log(1 − clipLow), the log-ratio below which the lower
// clip binds, or −Inf when clipLow ≥ 1 leaves the ratio unbounded below.
func logLowerBound(clipLow float64) float64 {
	if clipLow >= 1 {
		return math.Inf(-1)
	}
	return math.Log(1 - clipLow)
}

func clampF(x, lo, hi float64) float64 { return math.Min(math.Max(x, lo), hi) }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// reinforceVariant is the policy loss of the rollout correction's bypass
// mode with loss_type reinforce, after verl's compute_policy_loss_reinforce
// (verl/trainer/ppo/core_algos.py): L = −A·logπ per token, which Compute
// multiplies by the detached, truncated IS weight π_θ/π_rollout when
// RolloutIS is set, and aggregates with Config.Agg.
func reinforceVariant() Variant {
	return Variant{Loss: lossReinforce, Metrics: metricsReinforce, ReducesToREINFORCE: true}
}

func lossReinforce(v *Vars) Expr {
	return v.Advantages().Neg().Mul(v.LogProbs())
}

// metricsReinforce reports ppo_kl = masked_mean(log π_rollout − logπ), the
// rollout's log-probs being the old ones in bypass mode, as verl's
// compute_policy_loss_reinforce does; it clips nothing, and reports
// pg_clipfrac and pg_clipfrac_lower as 0 so that every mode fills the same
// keys (verl reports neither).
func metricsReinforce(d *Data) map[string]float64 {
	var m means
	for i, mk := range d.Mask {
		if mk != 0 {
			m.add(d.OldLogProbs[i] - d.LogProbs[i])
		}
	}
	return map[string]float64{"pg_clipfrac": 0, "pg_clipfrac_lower": 0, "ppo_kl": m.mean(0)}
}
