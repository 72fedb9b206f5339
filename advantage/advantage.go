package advantage

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Names of the built-in estimators, as verl spells them in
// algorithm.adv_estimator (verl/trainer/ppo/core_algos.py, AdvantageEstimator).
// r_i is trajectory i's total reward, g its group; advantages are broadcast
// over the mask-1 tokens and 0 on mask-0 tokens.
const (
	// GRPO: (r_i − mean_g)/(std_g + ε), unbiased std; r_i − mean_g when
	// Config.NormByStd is false; a group of one has mean 0, std 1
	// (compute_grpo_outcome_advantage).
	GRPO = "grpo"
	// DrGRPO: r_i − mean_g, GRPO without the std (Liu et al. 2025,
	// arXiv:2503.20783; verl's grpo with norm_adv_by_std_in_grpo=False).
	DrGRPO = "drgrpo"
	// RLOO: r_i minus the mean of the other scores of its group
	// (compute_rloo_outcome_advantage).
	RLOO = "rloo"
	// ReinforcePlusPlus: the discounted return G_t over mask-1 tokens,
	// carried undiscounted through tool-output tokens (verl PR #7300),
	// whitened over the batch (compute_reinforce_plus_plus_outcome_advantage).
	ReinforcePlusPlus = "reinforce_plus_plus"
	// ReinforcePlusPlusBaseline: r_i − mean_g, whitened over the mask-1
	// tokens of the batch
	// (compute_reinforce_plus_plus_baseline_outcome_advantage).
	ReinforcePlusPlusBaseline = "reinforce_plus_plus_baseline"
	// GPG: (B/#{r ≠ 0})·(r_i − mean_g) (compute_gpg_outcome_advantage).
	GPG = "gpg"
	// OPO: r_i minus the length-weighted group mean
	// (compute_opo_outcome_advantage).
	OPO = "opo"
	// ReMax: the reward-to-go minus the greedy response's score,
	// Input.BaselineScores (compute_remax_outcome_advantage).
	ReMax = "remax"
	// GRPOPassK: the best trajectory of each group gets r_max − r_second
	// (over std_g + ε when Config.NormByStd), the others 0
	// (compute_grpo_passk_outcome_advantage).
	GRPOPassK = "grpo_passk"
	// GAE: generalized advantage estimation with the critic's
	// Input.Values, skipping tool-output tokens, whitened over the batch;
	// Returns are Â + V (compute_gae_advantage_return).
	GAE = "gae"
)

// Input is one batch of trajectories. Mask fixes the shape: len(Mask) is the
// batch size B and len(Mask[i]) the number of response tokens of trajectory
// i (rows may differ in length; a row may be empty). Every other per-token
// field, where set, has exactly the shape of Mask, and every per-trajectory
// field has length B.
//
// The reward of trajectory i is what verl calls token_level_rewards:
// Scores[i] placed on the last token of row i whose mask is 1, plus
// TokenRewards[i][t] on every token (e.g. a KL penalty or process rewards).
// Outcome estimators use its sum over the row, as verl sums
// token_level_rewards over the response; they count Scores[i] even when row i
// has no mask-1 token (the trajectory was sampled and scored, so it shapes
// its group's statistics, though it has no token to train). Token-level
// estimators ignore rewards on mask-0 tokens.
//
// verl's reward managers put the score on the last response token, which is
// the last mask-1 token unless the response ends inside a tool output (a
// truncated rollout); there verl's gae and (fixed) reinforce_plus_plus
// never see the score, as it sits on a mask-0 token. Placing it on the last
// mask-1 token instead is deliberate: the trajectory's own last action is
// credited with its outcome.
type Input struct {
	// Scores holds one outcome score per trajectory. It may be nil only
	// when TokenRewards is set (the scores are then taken as 0).
	Scores []float64
	// Groups holds one group id per trajectory: trajectories sampled from
	// the same prompt share an id (verl's uid / index). Ids must be
	// non-empty. Needed by the group-relative estimators (grpo, drgrpo,
	// rloo, reinforce_plus_plus_baseline, gpg, opo, grpo_passk).
	Groups []string
	// Mask is 1 on tokens the policy produced and is trained on, 0 on tokens
	// it did not produce (tool output spliced into the response). Entries
	// must be exactly 0 or 1.
	Mask [][]float32
	// TokenRewards, optional, adds a reward on each token.
	TokenRewards [][]float32
	// Values holds the critic's value of each token; needed by gae.
	Values [][]float32
	// BaselineScores holds the score of the greedy response to the same
	// prompt, one per trajectory; needed by remax.
	BaselineScores []float64
}

// Output holds per-token advantages and returns, in the shape of Mask.
// Advantages are 0 wherever the mask is 0. Returns follow verl, including on
// mask-0 tokens, where no loss reads them; reinforce_plus_plus's hold the
// return carried through the tool output there.
type Output struct {
	Advantages [][]float32
	Returns    [][]float32
}

// Config holds the estimators' hyper-parameters. The zero value is verl's
// default configuration: std normalisation on, γ = 1, λ = 1, ε = 1e-6.
// Set a pointer field with new, e.g. Config{Gamma: new(0.99)}.
type Config struct {
	// NormByStd divides grpo and grpo_passk advantages by the group's
	// standard deviation (verl: algorithm.norm_adv_by_std_in_grpo).
	// nil means true.
	NormByStd *bool
	// Gamma is the discount γ of reinforce_plus_plus and gae, in [0, 1].
	// nil means 1 (verl: algorithm.gamma).
	Gamma *float64
	// Lambda is the GAE λ, in [0, 1]. nil means 1 (verl: algorithm.lam).
	Lambda *float64
	// Epsilon is added to the group std before dividing by it. 0 means
	// 1e-6, verl's default; negative values are an error.
	Epsilon float64
}

// Default hyper-parameters, verl's.
const (
	defaultEpsilon = 1e-6
	// whitenEps is the constant under the square root in verl's
	// masked_whiten (verl/utils/torch_functional.py).
	whitenEps = 1e-8
)

// normByStd reports whether grpo divides by the group std.
func (c Config) normByStd() bool { return c.NormByStd == nil || *c.NormByStd }

// gamma returns γ.
func (c Config) gamma() float64 {
	if c.Gamma == nil {
		return 1
	}
	return *c.Gamma
}

// lambda returns λ.
func (c Config) lambda() float64 {
	if c.Lambda == nil {
		return 1
	}
	return *c.Lambda
}

// epsilon returns ε.
func (c Config) epsilon() float64 {
	if c.Epsilon == 0 {
		return defaultEpsilon
	}
	return c.Epsilon
}

// Validate reports a hyper-parameter outside its domain. Compute and
// Registry.Compute call it before every estimator.
func (c Config) Validate() error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("advantage: %w", err)
	}
	return nil
}

func (c Config) validate() error {
	check01 := func(field string, p *float64) error {
		if p == nil {
			return nil
		}
		v := *p
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fieldErr(field, -1, -1, ErrNonFinite, "%v", v)
		}
		if v < 0 || v > 1 {
			return fieldErr(field, -1, -1, ErrInvalidValue, "%v is outside [0, 1]", v)
		}
		return nil
	}
	if err := check01("Config.Gamma", c.Gamma); err != nil {
		return err
	}
	if err := check01("Config.Lambda", c.Lambda); err != nil {
		return err
	}
	if math.IsNaN(c.Epsilon) || math.IsInf(c.Epsilon, 0) {
		return fieldErr("Config.Epsilon", -1, -1, ErrNonFinite, "%v", c.Epsilon)
	}
	if c.Epsilon < 0 {
		return fieldErr("Config.Epsilon", -1, -1, ErrInvalidValue, "%v is negative", c.Epsilon)
	}
	return nil
}

// Estimator computes advantages and returns for a batch. Registry.Compute
// and Compute call Estimate only with an Input and a Config that passed
// Validate, and check that the Output of a user's Estimator has the shape
// of in.Mask and finite values (ErrInvalidOutput). An Estimator that needs
// an optional field (Groups, Values, ...) checks for it and returns a
// *FieldError wrapping ErrMissingInput. Estimate must not modify in.
type Estimator interface {
	Estimate(in Input, cfg Config) (Output, error)
}

// EstimatorFunc adapts a function to the Estimator interface.
type EstimatorFunc func(in Input, cfg Config) (Output, error)

// Estimate calls f.
func (f EstimatorFunc) Estimate(in Input, cfg Config) (Output, error) { return f(in, cfg) }

// builtin is the type of the package's own estimators. It is trusted to
// return well-shaped, finite output (each one checks float32 overflow as it
// writes), which spares a full pass over the output on the hot path.
type builtin func(in Input, cfg Config) (Output, error)

// Estimate calls f.
func (f builtin) Estimate(in Input, cfg Config) (Output, error) { return f(in, cfg) }

// builtinEstimator returns the built-in estimator called name. A switch, not
// a package-level map, so that no package state can be mutated.
func builtinEstimator(name string) (Estimator, bool) {
	switch name {
	case GRPO:
		return builtin(grpo), true
	case DrGRPO:
		return builtin(drgrpo), true
	case RLOO:
		return builtin(rloo), true
	case ReinforcePlusPlus:
		return builtin(reinforcePlusPlus), true
	case ReinforcePlusPlusBaseline:
		return builtin(reinforcePlusPlusBaseline), true
	case GPG:
		return builtin(gpg), true
	case OPO:
		return builtin(opo), true
	case ReMax:
		return builtin(remax), true
	case GRPOPassK:
		return builtin(grpoPassK), true
	case GAE:
		return builtin(gae), true
	}
	return nil, false
}

// Names returns the names of the built-in estimators, sorted.
func Names() []string {
	return []string{
		DrGRPO, GAE, GPG, GRPO, GRPOPassK, OPO, ReinforcePlusPlus,
		ReinforcePlusPlusBaseline, ReMax, RLOO,
	}
}

// Compute runs the built-in estimator called name (see Names) on in, after
// validating in and cfg. It keeps no state and is safe for concurrent use.
// To add estimators of your own, use a Registry.
func Compute(name string, in Input, cfg Config) (Output, error) {
	e, ok := builtinEstimator(name)
	if !ok {
		return Output{}, fmt.Errorf("advantage: %w %q (built-in: %s)", ErrUnknownEstimator, name, strings.Join(Names(), ", "))
	}
	return run(name, e, in, cfg)
}

// Registry maps names to estimators: the built-in ones and any a program
// adds, as loss.Registry does for objectives. Register everything before
// sharing a Registry between goroutines; Compute and Lookup may then run
// concurrently. The zero value, like a nil *Registry, holds the built-in
// estimators and is ready to use; a nil *Registry cannot Register.
type Registry struct {
	estimators map[string]Estimator // nil until the first Register: the built-ins only
}

// NewRegistry returns a registry holding the built-in estimators (see
// Names). Each call returns a fresh registry, so registering into one
// never affects another.
func NewRegistry() *Registry { return &Registry{} }

// builtinMap returns a fresh map of the built-in estimators.
func builtinMap() map[string]Estimator {
	m := make(map[string]Estimator, 16)
	for _, n := range Names() {
		m[n], _ = builtinEstimator(n)
	}
	return m
}

// Register adds e under name. The name must be non-empty and not yet taken
// (ErrDuplicateName), so that a typo cannot silently replace grpo.
func (r *Registry) Register(name string, e Estimator) error {
	if r == nil {
		return fmt.Errorf("advantage: %w: Register on a nil *Registry", ErrInvalidValue)
	}
	if name == "" {
		return fmt.Errorf("advantage: %w", fieldErr("name", -1, -1, ErrInvalidValue, "estimator name is empty"))
	}
	if f, isFunc := e.(EstimatorFunc); e == nil || isFunc && f == nil {
		return fmt.Errorf("advantage: %w", fieldErr("name", -1, -1, ErrInvalidValue, "estimator %q is nil", name))
	}
	if r.estimators == nil {
		r.estimators = builtinMap()
	}
	if _, dup := r.estimators[name]; dup {
		return fmt.Errorf("advantage: %w: %q", ErrDuplicateName, name)
	}
	r.estimators[name] = e
	return nil
}

// Lookup returns the estimator registered under name.
func (r *Registry) Lookup(name string) (Estimator, bool) {
	if r == nil || r.estimators == nil {
		return builtinEstimator(name)
	}
	e, ok := r.estimators[name]
	return e, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	if r == nil || r.estimators == nil {
		return Names()
	}
	names := make([]string, 0, len(r.estimators))
	for n := range r.estimators {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Compute runs the estimator registered under name on in.
func (r *Registry) Compute(name string, in Input, cfg Config) (Output, error) {
	e, ok := r.Lookup(name)
	if !ok {
		return Output{}, fmt.Errorf("advantage: %w %q (registered: %s)", ErrUnknownEstimator, name, strings.Join(r.Names(), ", "))
	}
	return run(name, e, in, cfg)
}

// run validates, estimates and checks the output. Its errors read
// "advantage: <estimator>: <what and where>".
func run(name string, e Estimator, in Input, cfg Config) (Output, error) {
	out, err := runUnwrapped(e, in, cfg)
	if err != nil {
		return Output{}, fmt.Errorf("advantage: %s: %w", name, err)
	}
	return out, nil
}

func runUnwrapped(e Estimator, in Input, cfg Config) (Output, error) {
	if err := cfg.validate(); err != nil {
		return Output{}, err
	}
	if err := in.validate(); err != nil {
		return Output{}, err
	}
	out, err := e.Estimate(in, cfg)
	if err != nil {
		return Output{}, err
	}
	_, trusted := e.(builtin)
	if err := checkOutput(in.Mask, out, !trusted); err != nil {
		return Output{}, err
	}
	return out, nil
}

// checkOutput checks that out has the shape of mask and, if finite is set,
// that every value is finite.
func checkOutput(mask [][]float32, out Output, finite bool) error {
	for _, f := range []struct {
		name string
		rows [][]float32
	}{{"Advantages", out.Advantages}, {"Returns", out.Returns}} {
		if len(f.rows) != len(mask) {
			return fieldErr(f.name, -1, -1, ErrInvalidOutput, "%d rows, Mask has %d", len(f.rows), len(mask))
		}
		for i, row := range f.rows {
			if len(row) != len(mask[i]) {
				return fieldErr(f.name, i, -1, ErrInvalidOutput, "%d tokens, Mask has %d", len(row), len(mask[i]))
			}
			if !finite {
				continue
			}
			for t, v := range row {
				if v != v || math.IsInf(float64(v), 0) {
					return fieldErr(f.name, i, t, ErrInvalidOutput, "%v", v)
				}
			}
		}
	}
	return nil
}
