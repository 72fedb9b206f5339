package loss

import (
	"math"

	"gorgonia.org/gorgonia"
)

// builtinVariant returns the built-in variant called name. A switch, not
// a package-level map, so that no package state can be mutated.
func builtinVariant(name Mode) (Variant, bool) {
	switch name {
	case ModeVanilla:
		return Variant{Build: buildVanilla, Metrics: metricsVanilla}, true
	case ModeGSPO:
		return Variant{Build: buildGSPO, Metrics: metricsGSPO}, true
	case ModeCISPO:
		return Variant{Build: buildCISPO, Metrics: metricsCISPO}, true
	case ModeGPG:
		return Variant{Build: buildGPG, Metrics: metricsPlain}, true
	case ModeSAPO:
		return Variant{Build: buildSAPO, Metrics: metricsPlain}, true
	case ModeGeoMean:
		return Variant{Build: buildGeoMean, Metrics: metricsGeoMean}, true
	}
	return Variant{}, false
}

// builtinModes returns the names of the built-in modes, sorted, in a
// fresh slice.
func builtinModes() []Mode {
	return []Mode{ModeCISPO, ModeGeoMean, ModeGPG, ModeGSPO, ModeSAPO, ModeVanilla}
}

// buildVanilla is PPO-clip with decoupled bounds and dual-clip, after
// verl's compute_policy_loss_vanilla (verl/trainer/ppo/core_algos.py):
//
//	r    = exp(clamp(logπ − logπ_old, −20, 20))
//	L1   = max(−A·r, −A·clamp(r, 1−ε_low, 1+ε_high))
//	L    = A < 0 ? min(−A·c, L1) : L1
func buildVanilla(in *Inputs) (Term, error) {
	e := &ex{}
	cfg := in.Config
	a := in.Advantages
	ratio := e.exp(e.clamp(e.sub(in.LogProbs, in.OldLogProbs), -20, 20))
	negA := e.neg(a)
	pg1 := e.mul(negA, ratio)
	pg2 := e.mul(negA, e.clamp(ratio, 1-cfg.ClipLow, 1+cfg.ClipHigh))
	clip1 := e.max(pg1, pg2)
	pg3 := e.scale(negA, cfg.ClipC)
	clip2 := e.min(pg3, clip1)
	pg := e.where(e.lt0(a), clip2, clip1)
	return Term{PerToken: pg}, e.err
}

// buildGSPO is GSPO's token-level form of the sequence ratio, after verl's
// compute_policy_loss_gspo (Zheng et al. 2025, arXiv:2507.18071):
//
//	s_b    = Σ_t m·(logπ − logπ_old) / max(n_b, 1)
//	log r  = min(logπ − sg(logπ) + sg(s_b), 10)
//	L      = max(−A·r, −A·clamp(r, 1−ε_low, 1+ε_high)), aggregated seq-mean-token-mean
func buildGSPO(in *Inputs) (Term, error) {
	e := &ex{}
	cfg := in.Config
	seqKL := e.div(e.sum(e.mul(e.sub(in.LogProbs, in.OldLogProbs), in.Mask), 1), e.clamp(in.Count, 1, math.Inf(1)))
	logRatio := e.addRow(e.sub(in.LogProbs, e.sg(in.LogProbs)), e.sg(seqKL))
	ratio := e.exp(e.clamp(logRatio, math.Inf(-1), 10))
	negA := e.neg(in.Advantages)
	pg1 := e.mul(negA, ratio)
	pg2 := e.mul(negA, e.clamp(ratio, 1-cfg.ClipLow, 1+cfg.ClipHigh))
	return Term{PerToken: e.max(pg1, pg2), Agg: AggSeqMeanTokenMean}, e.err
}

// buildCISPO is CISPO (MiniMax-M1, arXiv:2506.13585), after verl's
// compute_policy_loss_cispo: the clipped ratio is a detached weight on the
// REINFORCE term,
//
//	L = −sg(clamp(exp(clamp(logπ − logπ_old, ±20)), 1−ε_low, 1+ε_high))·A·logπ
func buildCISPO(in *Inputs) (Term, error) {
	e := &ex{}
	cfg := in.Config
	ratio := e.exp(e.clamp(e.sub(in.LogProbs, in.OldLogProbs), -20, 20))
	w := e.sg(e.clamp(ratio, 1-cfg.ClipLow, 1+cfg.ClipHigh))
	pg := e.neg(e.mul(e.mul(w, in.Advantages), in.LogProbs))
	return Term{PerToken: pg}, e.err
}

// buildGPG is GPG (arXiv:2504.02546), after verl's compute_policy_loss_gpg:
// L = −logπ·A.
func buildGPG(in *Inputs) (Term, error) {
	e := &ex{}
	return Term{PerToken: e.neg(e.mul(in.LogProbs, in.Advantages))}, e.err
}

// buildSAPO is SAPO's soft gate (Gao et al. 2025, arXiv:2511.20347), after
// verl's compute_policy_loss_sapo:
//
//	r = exp(clamp(logπ − logπ_old, ±20)),  τ = A > 0 ? τ_pos : τ_neg
//	L = −σ(τ·(r − 1))·(4/τ)·A, aggregated seq-mean-token-mean
func buildSAPO(in *Inputs) (Term, error) {
	e := &ex{}
	cfg := in.Config
	ratio := e.exp(e.clamp(e.sub(in.LogProbs, in.OldLogProbs), -20, 20))
	// τ = τ_neg + (τ_pos − τ_neg)·[A > 0]
	tau := e.addS(e.scale(e.gt0(in.Advantages), cfg.TauPos-cfg.TauNeg), cfg.TauNeg)
	gate := e.div(e.scale(e.sigmoid(e.mul(tau, e.addS(ratio, -1))), 4), tau)
	pg := e.neg(e.mul(gate, in.Advantages))
	return Term{PerToken: pg, Agg: AggSeqMeanTokenMean}, e.err
}

// buildGeoMean is GMPO (Zhao et al. 2025, arXiv:2507.20673), after verl's
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
func buildGeoMean(in *Inputs) (Term, error) {
	e := &ex{}
	cfg := in.Config
	delta := e.sub(in.LogProbs, in.OldLogProbs)
	sgn := e.sign(in.Advantages)
	clipped := e.clamp(delta, -cfg.ClipLow, cfg.ClipHigh)
	dmin := e.mul(sgn, e.min(e.mul(sgn, delta), e.mul(sgn, clipped)))
	den := e.addS(in.Count, 1e-8)
	ratio := e.exp(e.div(e.sum(e.mul(dmin, in.Mask), 1), den))
	adv := e.div(e.sum(e.mul(in.Advantages, in.Mask), 1), den)
	pg := e.neg(e.mul(adv, ratio))
	if in.TISWeights != nil {
		logW := e.log(e.addS(in.TISWeights, 1e-10))
		seqW := e.exp(e.div(e.sum(e.mul(logW, in.Mask), 1), den))
		pg = e.mul(pg, seqW)
	}
	return Term{Scalar: e.scale(e.sum(pg), 1/float64(in.Rows))}, e.err
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

// ex builds gorgonia expressions and keeps the first error, so expression
// code reads like the formula it implements. Every method returns nil once
// an error has occurred.
type ex struct{ err error }

func (e *ex) do(f func() (*gorgonia.Node, error)) *gorgonia.Node {
	if e.err != nil {
		return nil
	}
	n, err := f()
	if err != nil {
		e.err = err
		return nil
	}
	return n
}

func (e *ex) ok(ns ...*gorgonia.Node) bool {
	if e.err != nil {
		return false
	}
	for _, n := range ns {
		if n == nil {
			return false
		}
	}
	return true
}

func (e *ex) bin(f func(a, b *gorgonia.Node) (*gorgonia.Node, error), a, b *gorgonia.Node) *gorgonia.Node {
	if !e.ok(a, b) {
		return nil
	}
	return e.do(func() (*gorgonia.Node, error) { return f(a, b) })
}

func (e *ex) un(f func(a *gorgonia.Node) (*gorgonia.Node, error), a *gorgonia.Node) *gorgonia.Node {
	if !e.ok(a) {
		return nil
	}
	return e.do(func() (*gorgonia.Node, error) { return f(a) })
}

func (e *ex) add(a, b *gorgonia.Node) *gorgonia.Node { return e.bin(gorgonia.Add, a, b) }
func (e *ex) sub(a, b *gorgonia.Node) *gorgonia.Node { return e.bin(gorgonia.Sub, a, b) }
func (e *ex) mul(a, b *gorgonia.Node) *gorgonia.Node { return e.bin(gorgonia.HadamardProd, a, b) }
func (e *ex) div(a, b *gorgonia.Node) *gorgonia.Node { return e.bin(gorgonia.HadamardDiv, a, b) }
func (e *ex) min(a, b *gorgonia.Node) *gorgonia.Node { return e.bin(Min, a, b) }
func (e *ex) max(a, b *gorgonia.Node) *gorgonia.Node { return e.bin(Max, a, b) }
func (e *ex) neg(a *gorgonia.Node) *gorgonia.Node    { return e.un(gorgonia.Neg, a) }
func (e *ex) exp(a *gorgonia.Node) *gorgonia.Node    { return e.un(gorgonia.Exp, a) }
func (e *ex) log(a *gorgonia.Node) *gorgonia.Node    { return e.un(gorgonia.Log, a) }
func (e *ex) abs(a *gorgonia.Node) *gorgonia.Node    { return e.un(gorgonia.Abs, a) }
func (e *ex) square(a *gorgonia.Node) *gorgonia.Node { return e.un(gorgonia.Square, a) }
func (e *ex) sign(a *gorgonia.Node) *gorgonia.Node   { return e.un(gorgonia.Sign, a) }
func (e *ex) sg(a *gorgonia.Node) *gorgonia.Node     { return e.un(StopGradient, a) }
func (e *ex) sigmoid(a *gorgonia.Node) *gorgonia.Node {
	return e.un(gorgonia.Sigmoid, a)
}

func (e *ex) sum(a *gorgonia.Node, along ...int) *gorgonia.Node {
	return e.un(func(a *gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.Sum(a, along...) }, a)
}

func (e *ex) clamp(a *gorgonia.Node, lo, hi float64) *gorgonia.Node {
	return e.un(func(a *gorgonia.Node) (*gorgonia.Node, error) { return Clamp(a, lo, hi) }, a)
}

func (e *ex) where(c, a, b *gorgonia.Node) *gorgonia.Node {
	if !e.ok(c, a, b) {
		return nil
	}
	return e.do(func() (*gorgonia.Node, error) { return Where(c, a, b) })
}

// scale multiplies a by the constant s.
func (e *ex) scale(a *gorgonia.Node, s float64) *gorgonia.Node {
	return e.bin(gorgonia.Mul, a, gorgonia.NewConstant(s))
}

// addS adds the constant s to a.
func (e *ex) addS(a *gorgonia.Node, s float64) *gorgonia.Node {
	return e.bin(gorgonia.Add, a, gorgonia.NewConstant(s))
}

// lt0 and gt0 are the 0/1 indicators of a < 0 and a > 0.
func (e *ex) lt0(a *gorgonia.Node) *gorgonia.Node {
	return e.bin(func(a, b *gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.Lt(a, b, true) }, a, gorgonia.NewConstant(0.0))
}

func (e *ex) gt0(a *gorgonia.Node) *gorgonia.Node {
	return e.bin(func(a, b *gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.Gt(a, b, true) }, a, gorgonia.NewConstant(0.0))
}

// addRow adds the [B] vector v to every column of the [B,T] matrix x.
func (e *ex) addRow(x, v *gorgonia.Node) *gorgonia.Node {
	return e.bin(func(x, v *gorgonia.Node) (*gorgonia.Node, error) {
		return gorgonia.BroadcastAdd(x, v, nil, []byte{1})
	}, x, v)
}
