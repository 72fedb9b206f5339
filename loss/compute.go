package loss

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Result is the outcome of one loss computation.
type Result struct {
	// Loss is the scalar objective to minimise: the policy term, minus
	// EntropyCoef·agg(H), plus KLCoef·agg(kl).
	Loss float64
	// GradLogProbs is dLoss/dLogProbs, [B,T] float32; zero where Mask is 0.
	GradLogProbs *tensor.Dense
	// GradEntropy is dLoss/dEntropy, [B,T] float32, or nil when the batch
	// has no Entropy.
	GradEntropy *tensor.Dense
	// Metrics uses verl's actor metric names without the "actor/" prefix:
	// pg_loss, pg_clipfrac, pg_clipfrac_lower, ppo_kl (from the variant);
	// entropy (agg of Batch.Entropy, when given); kl (agg of the KL
	// estimator, verl's kl_loss, when RefLogProbs is given) and kl_coef;
	// tis_imp_ratio_mean and tis_clipfrac when TISCap is set; loss. A
	// RolloutCorrection adds verl's rollout_corr/ metrics of the batch:
	// those of the IS weights (rollout_corr/rollout_is_*) and of the
	// rejection (rollout_corr/rollout_rs_*) when they are configured, and in
	// bypass mode the off-policy ones (rollout_corr/kl, k3_kl, ppl, χ²; see
	// MismatchMetrics), as verl's bypass loss reports them.
	Metrics map[string]float64
}

// Compute evaluates cfg's objective on b and its exact gradient. It builds
// and compiles a fresh gorgonia graph on every call; a Computer caches
// compiled graphs and is the faster choice for repeated calls.
//
// Fully masked rows are left out of the sequence means, as verl's agg_loss
// leaves them out, and a batch whose mask is all zero gives a zero loss and
// zero gradients, where verl's agg_loss on a single rank divides 0 by 0;
// neither produces NaN. Invalid configurations and batches return an
// error wrapping one of the package's sentinel errors.
func Compute(cfg Config, b Batch) (Result, error) {
	return NewComputer(nil, WithCacheSize(0)).Compute(cfg, b)
}

// Option configures a Computer.
type Option func(*Computer)

// WithCacheSize sets how many compiled graphs a Computer keeps (default 4).
// A graph keeps float64 buffers for its inputs and intermediate [B,T]
// tensors: measured 63 MB for vanilla at B = 64, T = 4096 (about 240 bytes
// per token), so large batches call for a small cache. Zero disables
// caching.
func WithCacheSize(n int) Option {
	return func(c *Computer) { c.size = max(n, 0) }
}

// Computer evaluates losses from a Registry and caches the compiled graph
// for each (Config, B, T, optional inputs present), so that repeated calls
// with the same shapes only bind new values and rerun the tape. It is safe
// for concurrent use; calls that share a cached graph run one at a time.
// The zero value runs the built-in modes without caching, like Compute.
type Computer struct {
	reg   *Registry
	size  int
	mu    sync.Mutex
	cache map[graphKey]*compiled
	order []graphKey // insertion order, oldest first, for eviction
}

// NewComputer returns a Computer over reg (a NewRegistry() when reg is nil).
func NewComputer(reg *Registry, opts ...Option) *Computer {
	if reg == nil {
		reg = NewRegistry()
	}
	c := &Computer{reg: reg, size: 4, cache: map[graphKey]*compiled{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// graphKey identifies a compiled graph. The coefficients, the TIS cap,
// the aggregation divisor and the rollout correction's thresholds and
// rejection options are bound per call (scalar inputs and Go-computed
// weights and masks), so schedules and adaptive KL controllers that
// change them every step reuse one graph; cfg holds them zeroed, and the
// flags record which terms exist. hasTIS says that IS weights multiply
// the policy loss (TISCap or RolloutCorrection.RolloutIS); auxMask that
// the entropy and KL terms keep the batch's mask while the policy term
// has the rejection's (bypass mode with rejection).
type graphKey struct {
	cfg                                    Config
	rows, cols                             int
	hasRef, hasTIS, hasEntropy, hasRollout bool
	entTerm, klTerm, auxMask               bool
}

// weightKey names the aggregation weights of one term: aux for the
// entropy and KL terms when they aggregate over another mask than the
// policy term.
type weightKey struct {
	agg Agg
	aux bool
}

// compiled is one graph with its machine, input nodes and read-back slots.
type compiled struct {
	mu      sync.Mutex
	g       *gorgonia.ExprGraph
	vm      gorgonia.VM
	variant Variant
	key     graphKey

	logp, old, adv, mask, count, ref, tis, ent *gorgonia.Node
	roll                                       *gorgonia.Node // rollout log-probs, only when a variant's Loss uses them
	entCoef, klCoef                            *gorgonia.Node // scalar inputs, nil when the term is absent
	weights                                    map[weightKey]*gorgonia.Node

	// float64 buffers bound to the input nodes, refilled on every call
	vals    map[*gorgonia.Node]*tensor.Dense
	pins    []*pin // of every StopGradient in the graph, for Surrogate
	readout struct{ total, pg, kl, gLogp, gEnt gorgonia.Value }

	// corr holds the rollout correction for Surrogate: recorded at the
	// base batch, replayed at the other, as the weights are detached.
	corr rcPin
}

// rcPin is the rollout correction's counterpart of a StopGradient pin.
type rcPin struct {
	mode pinMode
	val  rcResult
}

// Compute evaluates cfg's objective on b. See the package function Compute.
func (c *Computer) Compute(cfg Config, b Batch) (res Result, err error) {
	if c == nil {
		return Result{}, fmt.Errorf("loss: Compute on a nil *Computer (use NewComputer): %w", ErrConfig)
	}
	ncfg, err := cfg.normalized()
	if err != nil {
		return Result{}, err
	}
	v, err := c.variant(ncfg)
	if err != nil {
		return Result{}, err
	}
	key, err := batchKey(ncfg, b)
	if err != nil {
		return Result{}, err
	}
	// gorgonia reports some graph errors by panicking; keep them inside.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("loss: mode %q: gorgonia panicked: %v: %w", ncfg.Mode, r, ErrConfig)
		}
	}()
	cg, err := c.graph(key, v)
	if err != nil {
		return Result{}, err
	}
	cg.mu.Lock()
	defer cg.mu.Unlock()
	return cg.run(ncfg, b)
}

// Lookup returns the variant c computes for the mode name, from the
// Registry c was made with.
func (c *Computer) Lookup(name Mode) (Variant, bool) {
	if c == nil {
		return Variant{}, false
	}
	return c.reg.Lookup(name)
}

// Surrogate returns the objective whose gradient Compute reports, evaluated
// at the batch at: the loss at at, with every StopGradient term held at its
// value at base. Objectives built with StopGradient (gspo, cispo, the "+"
// KL types) report a gradient that is not the derivative of their value,
// but it is the derivative of this surrogate at at = base; losstest's
// finite-difference check differentiates the surrogate for that reason.
// For objectives without StopGradient, Surrogate(cfg, base, at) is
// Compute(cfg, at).Loss. base and at must have the same shape and the same
// optional inputs.
func (c *Computer) Surrogate(cfg Config, base, at Batch) (value float64, err error) {
	if c == nil {
		return 0, fmt.Errorf("loss: Surrogate on a nil *Computer (use NewComputer): %w", ErrConfig)
	}
	ncfg, err := cfg.normalized()
	if err != nil {
		return 0, err
	}
	v, err := c.variant(ncfg)
	if err != nil {
		return 0, err
	}
	key, err := batchKey(ncfg, base)
	if err != nil {
		return 0, fmt.Errorf("loss: Surrogate base: %w", err)
	}
	atKey, err := batchKey(ncfg, at)
	if err != nil {
		return 0, fmt.Errorf("loss: Surrogate at: %w", err)
	}
	if atKey != key {
		return 0, fmt.Errorf("loss: Surrogate: base and at differ in shape or optional inputs: %w", ErrShape)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("loss: mode %q: gorgonia panicked: %v: %w", ncfg.Mode, r, ErrConfig)
		}
	}()
	cg, err := c.graph(key, v)
	if err != nil {
		return 0, err
	}
	cg.mu.Lock()
	defer cg.mu.Unlock()
	setPins := func(m pinMode) {
		for _, p := range cg.pins {
			p.mode = m
			if m == pinOff {
				p.val = nil
			}
		}
		cg.corr.mode = m
		if m == pinOff {
			cg.corr.val = rcResult{}
		}
	}
	defer setPins(pinOff)
	setPins(pinRecord)
	if _, err := cg.run(ncfg, base); err != nil {
		return 0, err
	}
	setPins(pinReplay)
	res, err := cg.run(ncfg, at)
	if err != nil {
		return 0, err
	}
	return res.Loss, nil
}

// variant returns the variant that computes ncfg's policy term: the
// Registry's for ncfg.Mode, or REINFORCE for the rollout correction's
// bypass-mode reinforce loss.
func (c *Computer) variant(ncfg Config) (Variant, error) {
	if ncfg.RolloutCorrection.BypassMode && ncfg.RolloutCorrection.LossType == BypassReinforce {
		return reinforceVariant(), nil
	}
	v, ok := c.reg.Lookup(ncfg.Mode)
	if !ok {
		return Variant{}, fmt.Errorf("loss: Config.Mode %q (registered: %s): %w", ncfg.Mode, modeList(c.reg.Names()), ErrUnknownName)
	}
	return v, nil
}

// batchKey validates b against cfg (normalised) and returns its graph key.
func batchKey(ncfg Config, b Batch) (graphKey, error) {
	rows, cols, err := b.dims()
	if err != nil {
		return graphKey{}, err
	}
	spec := ncfg.correction()
	shape := ncfg
	shape.EntropyCoef, shape.KLCoef, shape.TISCap, shape.AggDivisor = 0, 0, 0, 0
	rc := &shape.RolloutCorrection
	rc.RolloutISThreshold, rc.RolloutISBatchNormalize, rc.RolloutRS, rc.RolloutRSThreshold = 0, false, "", ""
	key := graphKey{cfg: shape, rows: rows, cols: cols, hasRef: b.RefLogProbs != nil, hasTIS: spec.appliesWeights(), hasEntropy: b.Entropy != nil,
		hasRollout: b.RolloutLogProbs != nil, entTerm: ncfg.EntropyCoef != 0, klTerm: ncfg.KLCoef != 0,
		auxMask: spec.bypass && len(spec.rs) > 0}
	switch {
	case ncfg.KLCoef != 0 && !key.hasRef:
		return key, fmt.Errorf("loss: Config.KLCoef = %v needs Batch.RefLogProbs: %w", ncfg.KLCoef, ErrMissing)
	case ncfg.EntropyCoef != 0 && !key.hasEntropy:
		return key, fmt.Errorf("loss: Config.EntropyCoef = %v needs Batch.Entropy: %w", ncfg.EntropyCoef, ErrMissing)
	case ncfg.TISCap > 0 && b.RolloutLogProbs == nil:
		return key, fmt.Errorf("loss: Config.TISCap = %v needs Batch.RolloutLogProbs: %w", ncfg.TISCap, ErrMissing)
	case ncfg.NeedsRolloutLogProbs() && b.RolloutLogProbs == nil:
		return key, fmt.Errorf("loss: Config.RolloutCorrection (decoupled mode) compares Batch.OldLogProbs with Batch.RolloutLogProbs, which is nil: %w", ErrMissing)
	}
	return key, nil
}

// graph returns the cached graph for key, building it when absent.
func (c *Computer) graph(key graphKey, v Variant) (*compiled, error) {
	c.mu.Lock()
	cg, ok := c.cache[key]
	c.mu.Unlock()
	if ok {
		return cg, nil
	}
	cg, err := build(key, v)
	if err != nil {
		return nil, err
	}
	if c.size == 0 {
		return cg, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.cache[key]; ok { // built concurrently by another call
		return prev, nil
	}
	for len(c.order) >= c.size {
		delete(c.cache, c.order[0])
		c.order = c.order[1:]
	}
	c.cache[key] = cg
	c.order = append(c.order, key)
	return cg, nil
}

// build constructs, differentiates and compiles the graph for key.
func build(key graphKey, v Variant) (*compiled, error) {
	cg, err := buildGraph(key, v, true)
	if errors.Is(err, errEntropyNoGradient) {
		// The variant uses the entropy only where no gradient reaches it
		// (through StopGradient): its gradient is zero.
		return buildGraph(key, v, false)
	}
	return cg, err
}

// errEntropyNoGradient reports that a variant's Loss used the entropy but
// gorgonia found no gradient path to it.
var errEntropyNoGradient = errors.New("no gradient reaches the entropy")

// buildGraph is build; entGrad says whether to differentiate with respect
// to an entropy the variant's Loss uses.
func buildGraph(key graphKey, v Variant, entGrad bool) (*compiled, error) {
	cfg, rows, cols := key.cfg, key.rows, key.cols
	g := gorgonia.NewGraph()
	cg := &compiled{g: g, variant: v, key: key, weights: map[weightKey]*gorgonia.Node{}, vals: map[*gorgonia.Node]*tensor.Dense{}}
	input := func(name string, shape ...int) *gorgonia.Node {
		var n *gorgonia.Node
		if len(shape) == 1 {
			n = gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(shape...), gorgonia.WithName(name))
		} else {
			n = gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(shape...), gorgonia.WithName(name))
		}
		size := 1
		for _, s := range shape {
			size *= s
		}
		cg.vals[n] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]float64, size)))
		return n
	}
	weight := func(agg Agg, aux bool) *gorgonia.Node {
		k := weightKey{agg, aux && key.auxMask}
		if n, ok := cg.weights[k]; ok {
			return n
		}
		name := "w_" + string(agg)
		if k.aux {
			name += "_aux"
		}
		n := input(name, rows, cols)
		cg.weights[k] = n
		return n
	}
	cg.logp, cg.old, cg.adv, cg.mask = input("logp", rows, cols), input("old_logp", rows, cols), input("adv", rows, cols), input("mask", rows, cols)
	cg.count = input("count", rows)
	if key.hasRef {
		cg.ref = input("ref_logp", rows, cols)
	}
	if key.hasTIS {
		cg.tis = input("tis_w", rows, cols)
	}
	if key.hasEntropy {
		cg.ent = input("entropy", rows, cols)
	}
	in := &Inputs{Graph: g, LogProbs: cg.logp, OldLogProbs: cg.old, Advantages: cg.adv, Mask: cg.mask, Count: cg.count,
		TISWeights: cg.tis, Config: cfg, Rows: rows, Cols: cols}
	x := &Vars{in: in, ref: cg.ref, ent: cg.ent}
	if key.hasRollout {
		x.rollout = func() *gorgonia.Node {
			cg.roll = input("rollout_logp", rows, cols)
			return cg.roll
		}
	}
	pg, err := policyTerm(v, in, x, func(agg Agg) *gorgonia.Node { return weight(agg, false) })
	if err != nil {
		return nil, fmt.Errorf("loss: mode %q: %w", cfg.Mode, err)
	}
	total := pg
	wrt := gorgonia.Nodes{cg.logp}
	if key.entTerm {
		// verl dp_actor: policy_loss = pg_loss − entropy_coeff·agg_loss(entropy)
		cg.entCoef = gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("entropy_coef"))
		total = total.Sub(x.Wrap(cg.ent, nil).Mul(x.Wrap(weight(cfg.Agg, true), nil)).sumAll().Mul(x.Wrap(cg.entCoef, nil)))
	}
	entOnlyInLoss := !key.entTerm && x.usedEntropy && entGrad
	if key.entTerm || entOnlyInLoss {
		wrt = append(wrt, cg.ent)
	}
	var klAgg Expr
	if key.hasRef {
		// verl dp_actor: policy_loss += kl_loss_coef·agg_loss(kl_penalty(logπ, ref))
		klAgg = klExpr(x.LogProbs(), x.RefLogProbs(), cfg.KLType).Mul(x.Wrap(weight(cfg.Agg, true), nil)).sumAll()
		if key.klTerm {
			cg.klCoef = gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("kl_coef"))
			total = total.Add(klAgg.Mul(x.Wrap(cg.klCoef, nil)))
		}
	}
	if x.err != nil {
		return nil, fmt.Errorf("loss: mode %q: building the loss: %w", cfg.Mode, x.err)
	}
	grads, err := gorgonia.Grad(total.n, wrt...)
	if err != nil && entOnlyInLoss {
		return nil, errEntropyNoGradient
	}
	if err != nil {
		return nil, fmt.Errorf("loss: mode %q: differentiating the loss (does it depend on LogProbs?): %v: %w", cfg.Mode, err, ErrConfig)
	}
	gorgonia.Read(total.n, &cg.readout.total)
	gorgonia.Read(pg.n, &cg.readout.pg)
	gorgonia.Read(grads[0], &cg.readout.gLogp)
	if len(grads) > 1 {
		gorgonia.Read(grads[1], &cg.readout.gEnt)
	}
	if klAgg.n != nil {
		gorgonia.Read(klAgg.n, &cg.readout.kl)
	}
	for _, n := range g.AllNodes() {
		if op, ok := n.Op().(stopGradOp); ok && op.pin != nil {
			cg.pins = append(cg.pins, op.pin)
		}
	}
	cg.vm = gorgonia.NewTapeMachine(g)
	return cg, nil
}

// klExpr is verl's kl_penalty (verl/trainer/ppo/core_algos.py, kl_penalty
// and kl_penalty_forward) as an expression in logπ and logπ_ref:
//
//	k1:  logπ − ref
//	abs: |logπ − ref|
//	k2:  ½(logπ − ref)²
//	k3:  clamp(e^δ − δ − 1, −10, 10), δ = clamp(ref − logπ, −20, 20)
//	x+:  ½(logπ − ref)² − sg(½(logπ − ref)²) + sg(x)   (value of x, gradient of k2)
func klExpr(logp, ref Expr, typ KLType) Expr {
	b, plus := strings.CutSuffix(string(typ), "+")
	diff := logp.Sub(ref)
	var fwd Expr
	switch KLType(b) {
	case KLK1:
		fwd = diff
	case KLAbs:
		fwd = diff.Abs()
	case KLK2:
		fwd = diff.Square().Mul(0.5)
	case KLK3:
		d := ref.Sub(logp).Clip(-20, 20)
		fwd = d.Exp().Add(-1).Sub(d).Clip(-10, 10)
	default:
		return logp.v.fail(fmt.Errorf("loss: Config.KLType %q: %w", typ, ErrUnknownName))
	}
	if !plus {
		return fwd
	}
	bw := diff.Square().Mul(0.5)
	return bw.Sub(bw.StopGradient()).Add(fwd.StopGradient())
}

// callLoss calls loss on x. gorgonia panics on some misuse, such as an
// operation on the nil node of a failed Expr; the first error recorded
// explains such a panic better than the panic does.
func callLoss(loss func(*Vars) Expr, x *Vars) (l Expr, err error) {
	defer func() {
		if r := recover(); r != nil {
			if x.err != nil {
				err = fmt.Errorf("Loss: %w", x.err)
				return
			}
			err = fmt.Errorf("Loss: gorgonia panicked: %v: %w", r, ErrConfig)
		}
	}()
	return loss(x), nil
}

// policyTerm builds v's policy term and aggregates it: Σ W·L over the
// tokens, W being the weights of the aggregation (see aggWeights), for a
// per-token L, which TIS weights first; a scalar as it is.
func policyTerm(v Variant, in *Inputs, x *Vars, weight func(Agg) *gorgonia.Node) (Expr, error) {
	rows, cols := in.Rows, in.Cols
	var term Term
	if v.Loss != nil {
		l, err := callLoss(v.Loss, x)
		switch {
		case err != nil:
			return Expr{}, err
		case x.err != nil:
			return Expr{}, fmt.Errorf("Loss: %w", x.err)
		case l.v != x || l.n == nil:
			return Expr{}, fmt.Errorf("Loss returned the zero Expr or one of another Vars: %w", ErrConfig)
		case l.n.IsScalar():
			term.Scalar = l.n
		case l.isTokens():
			term.PerToken = l.n
		default:
			return Expr{}, fmt.Errorf("Loss returned a %v expression, want [%d %d] or a scalar (reduce a per-sequence value with Sum or Mean): %w",
				l.n.Shape(), rows, cols, ErrShape)
		}
	} else {
		var err error
		if term, err = v.Build(in); err != nil {
			return Expr{}, fmt.Errorf("Build: %w: %w", err, ErrConfig)
		}
	}
	switch {
	case term.PerToken != nil:
		if !term.PerToken.Shape().Eq(tensor.Shape{rows, cols}) {
			return Expr{}, fmt.Errorf("Term.PerToken has shape %v, want [%d %d]: %w", term.PerToken.Shape(), rows, cols, ErrShape)
		}
		agg := cmp.Or(term.Agg, v.Agg, in.Config.Agg)
		if term.Agg != "" && v.Agg != "" && term.Agg != v.Agg {
			return Expr{}, fmt.Errorf("Term.Agg %q contradicts Variant.Agg %q: %w", term.Agg, v.Agg, ErrConfig)
		}
		if err := checkAgg("Term.Agg", agg); err != nil {
			return Expr{}, err
		}
		pt := x.Wrap(term.PerToken, nil)
		if in.TISWeights != nil {
			pt = pt.Mul(x.Wrap(in.TISWeights, nil))
		}
		return pt.Mul(x.Wrap(weight(agg), nil)).sumAll(), x.err
	case term.Scalar != nil:
		if !term.Scalar.IsScalar() {
			return Expr{}, fmt.Errorf("Term.Scalar has shape %v, want a scalar: %w", term.Scalar.Shape(), ErrShape)
		}
		return x.Wrap(term.Scalar, nil), x.err
	}
	return Expr{}, fmt.Errorf("Build returned an empty Term: %w", ErrConfig)
}

// run binds b and the per-call settings of cfg (normalised) to the graph's
// inputs, runs it and assembles the Result.
func (cg *compiled) run(cfg Config, b Batch) (Result, error) {
	key := cg.key
	rows, cols := key.rows, key.cols
	fill := func(n *gorgonia.Node, t *tensor.Dense) []float64 {
		d := cg.vals[n]
		widen(d.Float64s(), t)
		return d.Float64s()
	}
	logp, old, adv, mask := fill(cg.logp, b.LogProbs), fill(cg.old, b.OldLogProbs), fill(cg.adv, b.Advantages), fill(cg.mask, b.Mask)
	metrics := map[string]float64{}
	// The rollout correction rewrites the policy term's mask (cg.mask,
	// from which Count and the aggregation weights follow); auxMask is the
	// entropy and KL terms' mask, the batch's own where they keep it.
	auxMask := mask
	corr, err := cg.correct(cfg, b, logp, old, mask)
	if err != nil {
		return Result{}, err
	}
	if corr.keep != nil {
		if key.auxMask {
			auxMask = slices.Clone(mask)
		}
		for i, k := range corr.keep {
			mask[i] *= k
		}
	}
	maps.Copy(metrics, corr.metrics)
	count := cg.vals[cg.count].Float64s()
	rowCounts(count, mask, cols)
	auxCount := count
	if key.auxMask {
		auxCount = rowCounts(make([]float64, rows), auxMask, cols)
	}
	divisor := cfg.AggDivisor
	if divisor == 0 {
		divisor = float64(cols)
	}
	for k, n := range cg.weights {
		if k.aux {
			aggWeights(cg.vals[n].Float64s(), k.agg, auxMask, auxCount, cols, divisor)
		} else {
			aggWeights(cg.vals[n].Float64s(), k.agg, mask, count, cols, divisor)
		}
	}
	data := &Data{LogProbs: logp, OldLogProbs: old, Advantages: adv, Mask: mask, Rows: rows, Cols: cols, Config: cfg}
	if cg.ref != nil {
		fill(cg.ref, b.RefLogProbs)
		metrics["kl_coef"] = cfg.KLCoef
	}
	if cg.roll != nil {
		fill(cg.roll, b.RolloutLogProbs)
	}
	if cg.tis != nil {
		w := cg.vals[cg.tis].Float64s()
		copy(w, corr.weights)
		data.TISWeights = w
	}
	if cg.ent != nil {
		h := fill(cg.ent, b.Entropy)
		wts := make([]float64, len(h))
		aggWeights(wts, cfg.Agg, auxMask, auxCount, cols, divisor)
		var s float64
		for i, x := range h {
			s += x * wts[i]
		}
		metrics["entropy"] = s
	}
	for n, t := range cg.vals {
		if err := gorgonia.Let(n, t); err != nil {
			return Result{}, fmt.Errorf("loss: binding %s: %w", n.Name(), err)
		}
	}
	for _, s := range []struct {
		n *gorgonia.Node
		v float64
	}{{cg.entCoef, cfg.EntropyCoef}, {cg.klCoef, cfg.KLCoef}} {
		if s.n == nil {
			continue
		}
		if err := gorgonia.Let(s.n, s.v); err != nil {
			return Result{}, fmt.Errorf("loss: binding %s: %w", s.n.Name(), err)
		}
	}
	defer cg.vm.Reset()
	if err := cg.vm.RunAll(); err != nil {
		return Result{}, fmt.Errorf("loss: mode %q: running the graph: %v: %w", cfg.Mode, err, ErrConfig)
	}
	res := Result{Metrics: metrics}
	if res.Loss, err = scalarOf(cg.readout.total); err != nil {
		return Result{}, err
	}
	if metrics["pg_loss"], err = scalarOf(cg.readout.pg); err != nil {
		return Result{}, err
	}
	metrics["loss"] = res.Loss
	if cg.readout.kl != nil {
		if metrics["kl"], err = scalarOf(cg.readout.kl); err != nil {
			return Result{}, err
		}
	}
	gl, err := denseOf(cg.readout.gLogp, rows*cols)
	if err != nil {
		return Result{}, err
	}
	res.GradLogProbs = narrow(gl, rows, cols)
	if cg.ent != nil {
		if cg.readout.gEnt != nil {
			ge, err := denseOf(cg.readout.gEnt, rows*cols)
			if err != nil {
				return Result{}, err
			}
			res.GradEntropy = narrow(ge, rows, cols)
		} else {
			res.GradEntropy = tensor.New(tensor.WithShape(rows, cols), tensor.Of(tensor.Float32))
		}
	}
	if cg.variant.Metrics != nil {
		for k, v := range cg.variant.Metrics(data) {
			metrics[k] = v
		}
	}
	if err := checkFinite(res); err != nil {
		return Result{}, fmt.Errorf("loss: mode %q: %w", cfg.Mode, err)
	}
	return res, nil
}

// correct computes cfg's rollout correction for b, whose log-probs,
// old log-probs and mask are widened in logp, old and mask: from the old
// policy and Batch.RolloutLogProbs in decoupled mode, from the current
// policy and the old one (the rollout's) in bypass mode; TISCap is the
// first case. Surrogate replays the base batch's correction.
func (cg *compiled) correct(cfg Config, b Batch, logp, old, mask []float64) (rcResult, error) {
	spec := cfg.correction()
	if !spec.active() {
		return rcResult{}, nil
	}
	if cg.corr.mode == pinReplay {
		return cg.corr.val, nil
	}
	rb := &rcBatch{pi: old, mask: mask, rows: cg.key.rows, cols: cg.key.cols}
	if spec.bypass {
		rb.pi, rb.rollout = logp, old
		if b.RolloutLogProbs != nil {
			for i, r := range b.RolloutLogProbs.Float32s() {
				if mask[i] != 0 && float64(r) != old[i] {
					return rcResult{}, fmt.Errorf("loss: RolloutCorrection.BypassMode takes the rollout's log-probs as the old policy, but Batch.RolloutLogProbs[%d,%d] = %v differs from Batch.OldLogProbs = %v (use the rollout's log-probs as the old ones, or leave RolloutLogProbs nil): %w",
						i/cg.key.cols, i%cg.key.cols, r, old[i], ErrConfig)
				}
			}
		}
	} else {
		rb.rollout = widen(nil, b.RolloutLogProbs)
	}
	res := spec.apply(rb)
	if !spec.appliesWeights() {
		res.weights = nil
	}
	if cg.corr.mode == pinRecord {
		cg.corr.val = res
	}
	return res, nil
}

// rowCounts fills count with each row's number of mask-1 tokens and
// returns it.
func rowCounts(count, mask []float64, cols int) []float64 {
	for r := range count {
		var n float64
		for _, m := range mask[r*cols : (r+1)*cols] {
			n += m
		}
		count[r] = n
	}
	return count
}

func scalarOf(v gorgonia.Value) (float64, error) {
	switch x := v.(type) {
	case *gorgonia.F64:
		return float64(*x), nil
	case *tensor.Dense:
		if x.Shape().TotalSize() == 1 && x.Dtype() == tensor.Float64 {
			return x.Float64s()[0], nil
		}
	}
	return 0, fmt.Errorf("loss: expected a float64 scalar from the graph, got %T: %w", v, ErrShape)
}

func denseOf(v gorgonia.Value, n int) ([]float64, error) {
	if d, ok := v.(*tensor.Dense); ok && d.Dtype() == tensor.Float64 && len(d.Float64s()) == n {
		return d.Float64s(), nil
	}
	return nil, fmt.Errorf("loss: expected a float64 tensor of %d values from the graph, got %T: %w", n, v, ErrShape)
}

// checkFinite rejects results that overflowed: inputs are finite, but an
// objective such as geo_mean can exponentiate a huge log-ratio.
func checkFinite(r Result) error {
	bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }
	if bad(r.Loss) {
		return fmt.Errorf("Loss = %v: %w", r.Loss, ErrNonFinite)
	}
	for k, v := range r.Metrics {
		if bad(v) {
			return fmt.Errorf("Metrics[%q] = %v: %w", k, v, ErrNonFinite)
		}
	}
	for _, t := range []struct {
		name string
		d    *tensor.Dense
	}{{"GradLogProbs", r.GradLogProbs}, {"GradEntropy", r.GradEntropy}} {
		if t.d == nil {
			continue
		}
		cols := t.d.Shape()[1]
		for i, v := range t.d.Float32s() {
			if bad(float64(v)) {
				return fmt.Errorf("%s[%d,%d] = %v: %w", t.name, i/cols, i%cols, v, ErrNonFinite)
			}
		}
	}
	return nil
}

// modeList joins mode names for error messages.
func modeList(ms []Mode) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}
