package loss

import (
	"fmt"
	"slices"
	"sync"

	"gorgonia.org/gorgonia"
)

// Variant is a policy-gradient objective. Its Loss writes the policy term
// as an expression in the batch's quantities, for instance the tanh-gated
// objective L = −w(A)·A·(1 + tanh(r − 1)), w(A) = 1 if A ≥ 0 else β, as
//
//	Loss: func(v *loss.Vars) loss.Expr {
//		a := v.Advantages()
//		w := v.Where(a.GE(0), 1, beta)
//		return w.Mul(a).Mul(v.Ratio().Sub(1).Tanh().Add(1)).Neg()
//	},
//
// Compute weights the per-token loss by the importance weights (TISCap,
// rollout correction), aggregates it, adds the entropy and KL terms,
// differentiates the total symbolically and evaluates it. Build is the same thing in gorgonia nodes, for objectives
// that need gorgonia directly; a Variant sets one of the two.
//
// The graph is float64. Compute calls Loss or Build when it builds a
// graph for a new (Config, shape) and then reuses the compiled graph, so
// they must only build the expression, not look at values or keep state.
type Variant struct {
	// Loss returns the variant's policy-gradient term: a [B,T] per-token
	// loss (verl's pg_losses), which Compute weights by TIS and aggregates
	// with Agg, or a scalar the variant aggregated itself (a [B] value must
	// be reduced with Sum or Mean first). An error met while building the
	// expression is returned by Compute, wrapped.
	Loss func(v *Vars) Expr
	// Build returns the variant's policy-gradient term as gorgonia nodes.
	// Set it instead of Loss.
	Build func(in *Inputs) (Term, error)
	// Agg, if set, aggregates the per-token loss instead of Config.Agg
	// (verl's gspo and sapo force "seq-mean-token-mean"); Config.Agg still
	// aggregates the entropy and KL terms. A variant whose Loss returns a
	// scalar names here the aggregation its scalar amounts to at ratio 1,
	// for losstest's REINFORCE check.
	Agg Agg
	// ReducesToREINFORCE declares that at ratio 1 (OldLogProbs =
	// LogProbs), with advantages constant along each sequence and no TIS,
	// the policy term's gradient is the REINFORCE gradient −A·w, w being
	// the token's weight under Agg (or Config.Agg). Every built-in mode
	// declares it; an objective that reweights advantages by sign or size
	// does not hold it. losstest checks it when it is declared.
	ReducesToREINFORCE bool
	// Metrics, if set, computes diagnostics (verl's pg_clipfrac,
	// pg_clipfrac_lower, ppo_kl, ...) from the batch values. Keys it
	// returns are added to Result.Metrics.
	Metrics func(d *Data) map[string]float64
}

// Inputs are the graph nodes a Variant builds its expression from. All
// [B,T] nodes are float64; only LogProbs carries a gradient to the caller.
type Inputs struct {
	Graph *gorgonia.ExprGraph
	// LogProbs is log π_θ, the input the gradient is taken against.
	LogProbs *gorgonia.Node
	// OldLogProbs, Advantages and Mask are data (no gradient is taken
	// against them).
	OldLogProbs, Advantages, Mask *gorgonia.Node
	// Count is a [B] node: the number of mask-1 tokens in each row.
	Count *gorgonia.Node
	// TISWeights is the [B,T] truncated importance weight when one
	// multiplies the policy loss (Config.TISCap, or a
	// Config.RolloutCorrection with RolloutIS), else nil. Compute already
	// applies it to Term.PerToken; a variant that returns Term.Scalar must
	// apply it itself.
	TISWeights *gorgonia.Node
	// Config is the normalised configuration (defaults filled in), except
	// that EntropyCoef, KLCoef, TISCap and AggDivisor, and
	// RolloutCorrection's RolloutISThreshold, RolloutISBatchNormalize,
	// RolloutRS and RolloutRSThreshold, read 0: they are bound per call,
	// so that one graph serves every value, and an expression must not
	// bake them in (TISWeights tells whether IS weights apply). Mask and
	// Count are the policy term's: a rollout correction's rejection has
	// removed the rejected tokens from them.
	Config Config
	// Rows and Cols are B and T.
	Rows, Cols int
}

// Term is the policy-gradient part of the loss returned by Variant.Build: either
// a per-token loss matrix that Compute weights by TIS and aggregates, or a
// scalar the variant aggregated itself.
type Term struct {
	// PerToken is the [B,T] per-token loss (verl's pg_losses).
	PerToken *gorgonia.Node
	// Agg, if set, aggregates PerToken instead of Config.Agg, as
	// Variant.Agg does; if both are set they must agree.
	Agg Agg
	// Scalar is the aggregated loss, used when PerToken is nil.
	Scalar *gorgonia.Node
}

// Data holds the batch values, widened to float64 and row-major, for
// Variant.Metrics. The slices are the Computer's buffers: valid during the
// Metrics call only, and not to be modified.
type Data struct {
	LogProbs, OldLogProbs, Advantages, Mask []float64
	// TISWeights is nil unless IS weights multiply the policy loss
	// (Config.TISCap or RolloutCorrection.RolloutIS). Mask is the policy
	// term's, without the tokens a rollout correction rejected.
	TISWeights []float64
	Rows, Cols int
	Config     Config
}

// MaskedMean is verl_F.masked_mean: Σ x·m / (Σ m + 1e-8).
func (d *Data) MaskedMean(x []float64) float64 { return maskedMean(x, d.Mask) }

// Registry maps mode names to Variants: the built-in modes and any a
// program registers. advantage.Registry has the same shape:
//
//   - The zero value and a nil *Registry hold the built-ins and are ready
//     to use; NewRegistry is the same as new(Registry). A nil *Registry
//     cannot Register.
//   - Register adds a variant under a new name; a name is never replaced,
//     so a built-in cannot be shadowed and a compiled graph cached under a
//     name always belongs to the variant registered there.
//   - Lookup resolves a name; Names lists every name, sorted.
//   - A Registry is safe for concurrent use: Register may run while
//     Computers look modes up.
type Registry struct {
	mu    sync.RWMutex
	added map[Mode]Variant // the program's variants; the built-ins are builtinVariant's
}

// NewRegistry returns an empty registry: one that holds the built-in modes
// (vanilla, gspo, cispo, gpg, sapo and geo_mean) and nothing else.
func NewRegistry() *Registry { return new(Registry) }

// Register adds v under name. It fails if the registry is nil, name is
// empty, or v sets neither or both of Loss and Build (ErrConfig), if v.Agg
// names no aggregation (ErrUnknownName), or if name is taken
// (ErrDuplicateName).
func (r *Registry) Register(name Mode, v Variant) error {
	switch {
	case r == nil:
		return fmt.Errorf("loss: Register(%q): nil *Registry: %w", name, ErrConfig)
	case name == "":
		return fmt.Errorf("loss: Register(%q): empty name: %w", name, ErrConfig)
	case v.Loss == nil && v.Build == nil:
		return fmt.Errorf("loss: Register(%q): Variant sets neither Loss nor Build: %w", name, ErrConfig)
	case v.Loss != nil && v.Build != nil:
		return fmt.Errorf("loss: Register(%q): Variant sets both Loss and Build: %w", name, ErrConfig)
	}
	if v.Agg != "" {
		if err := checkAgg("Variant.Agg", v.Agg); err != nil {
			return fmt.Errorf("loss: Register(%q): %w", name, err)
		}
	}
	if _, ok := builtinVariant(name); ok {
		return fmt.Errorf("loss: Register(%q): %w", name, ErrDuplicateName)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.added[name]; ok {
		return fmt.Errorf("loss: Register(%q): %w", name, ErrDuplicateName)
	}
	if r.added == nil {
		r.added = make(map[Mode]Variant)
	}
	r.added[name] = v
	return nil
}

// Lookup returns the variant registered under name. The empty name is
// not a mode (Compute reads it as "vanilla" before looking it up).
func (r *Registry) Lookup(name Mode) (Variant, bool) {
	if v, ok := builtinVariant(name); ok || r == nil {
		return v, ok
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.added[name]
	return v, ok
}

// Names returns the registered names, the built-in ones included, sorted
// in byte order.
func (r *Registry) Names() []Mode {
	names := builtinModes()
	if r != nil {
		r.mu.RLock()
		for n := range r.added {
			names = append(names, n)
		}
		r.mu.RUnlock()
	}
	slices.Sort(names)
	return names
}

// aggWeights fills w with the per-token weights W such that verl's
// agg_loss(L, mask, agg) = Σ W·L (verl/trainer/ppo/core_algos.py, agg_loss,
// single data-parallel rank):
//
//	token-mean:              m / Σm
//	seq-mean-token-sum:      m / S
//	seq-mean-token-sum-norm: m / S / divisor   (divisor = loss_scale_factor, default T)
//	seq-mean-token-mean:     m / (n_b + 1e-8) / S
//
// where n_b is row b's token count and S the number of rows with n_b > 0
// (verl excludes fully masked rows). When Σm or S is 0 verl returns a zero
// loss, and so do all-zero weights.
func aggWeights(w []float64, agg Agg, mask, count []float64, cols int, divisor float64) {
	var total, seqs float64
	for _, n := range count {
		total += n
		if n > 0 {
			seqs++
		}
	}
	for i := range w {
		w[i] = 0
	}
	if total == 0 {
		return
	}
	for b, n := range count {
		var rw float64
		switch agg {
		case AggTokenMean:
			rw = 1 / total
		case AggSeqMeanTokenSum:
			rw = 1 / seqs
		case AggSeqMeanTokenSumNorm:
			rw = 1 / seqs / divisor
		case AggSeqMeanTokenMean:
			rw = 1 / (n + 1e-8) / seqs
		}
		row := w[b*cols : (b+1)*cols]
		for t := range row {
			row[t] = mask[b*cols+t] * rw
		}
	}
}
