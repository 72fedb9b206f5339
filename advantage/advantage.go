package advantage

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// Estimator names an advantage estimator: a built-in one below or one
// registered in a Registry (verl's algorithm.adv_estimator).
type Estimator string

// Names of the built-in estimators, as verl spells them in
// algorithm.adv_estimator (verl/trainer/ppo/core_algos.py, AdvantageEstimator).
// r_i is trajectory i's total reward, g its group; advantages are broadcast
// over the mask-1 tokens and 0 on mask-0 tokens.
const (
	// GRPO: (r_i − mean_g)/(std_g + ε), unbiased std; r_i − mean_g when
	// Config.NormByStd is false; a group of one has mean 0, std 1
	// (compute_grpo_outcome_advantage).
	GRPO Estimator = "grpo"
	// DrGRPO: r_i − mean_g, GRPO without the std (Liu et al. 2025,
	// arXiv:2503.20783; verl's grpo with norm_adv_by_std_in_grpo=False).
	DrGRPO Estimator = "drgrpo"
	// RLOO: r_i minus the mean of the other scores of its group
	// (compute_rloo_outcome_advantage).
	RLOO Estimator = "rloo"
	// ReinforcePlusPlus: the discounted return G_t over mask-1 tokens,
	// carried undiscounted through tool-output tokens (verl PR #7300),
	// whitened over the batch (compute_reinforce_plus_plus_outcome_advantage).
	ReinforcePlusPlus Estimator = "reinforce_plus_plus"
	// ReinforcePlusPlusBaseline: r_i − mean_g, whitened over the mask-1
	// tokens of the batch
	// (compute_reinforce_plus_plus_baseline_outcome_advantage).
	ReinforcePlusPlusBaseline Estimator = "reinforce_plus_plus_baseline"
	// GPG: (B/#{r ≠ 0})·(r_i − mean_g) (compute_gpg_outcome_advantage).
	GPG Estimator = "gpg"
	// OPO: r_i minus the length-weighted group mean
	// (compute_opo_outcome_advantage).
	OPO Estimator = "opo"
	// ReMax: the reward-to-go minus the greedy response's score,
	// Input.BaselineScores (compute_remax_outcome_advantage).
	ReMax Estimator = "remax"
	// GRPOPassK: the best trajectory of each group gets r_max − r_second
	// (over std_g + ε when Config.NormByStd), the others 0
	// (compute_grpo_passk_outcome_advantage).
	GRPOPassK Estimator = "grpo_passk"
	// GAE: generalized advantage estimation with the critic's
	// Input.Values, skipping tool-output tokens, whitened over the batch;
	// Returns are Â + V (compute_gae_advantage_return).
	GAE Estimator = "gae"

	// The turn-level estimators give each turn of a multi-turn trajectory
	// (Input.Turns) an advantage of its own, from the discounted return
	// of its turn rewards G_{i,k} = Σ_{j≥k} γ^{j−k} r_{i,j}, the score
	// counted on the last turn.

	// TurnGRPO: (G_{i,k} − mean)/(std + ε) over the turns at the same
	// index k in the trajectories of i's group.
	TurnGRPO Estimator = "turn_grpo"
	// GiGPO: GRPO's episode advantage plus Config.StepWeight times a
	// step advantage, (G_{i,k} − mean)/(std + ε) over the group's turns
	// taken in the same state (Turn.State) (Feng et al., 2025,
	// arXiv:2505.10978).
	GiGPO Estimator = "gigpo"
)

// Input is one batch of trajectories. Mask fixes the shape: len(Mask) is the
// batch size B and len(Mask[i]) the number of response tokens of trajectory
// i (rows may differ in length; a row may be empty). Every other per-token
// field, where set, has exactly the shape of Mask, and every per-trajectory
// field has length B.
//
// The reward of trajectory i is what verl calls token_level_rewards:
// Scores[i] placed on the last token of row i whose mask is 1, plus
// TokenRewards[i][t] on every token (e.g. a KL penalty or process rewards),
// plus each turn's Turns[i][k].Reward on the turn's last mask-1 token.
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
	// Turns, optional, divides each row into the turns of a multi-turn
	// trajectory (see Turn): Turns[i] lists trajectory i's turns in
	// order, each with the environment's reward for it and the state it
	// was taken in. The turn-level estimators (turn_grpo, gigpo) need
	// them for multi-turn trajectories; the others count the turns'
	// rewards (Turn.Reward). A row with no turns has no mask-1 token for
	// the turn-level estimators.
	Turns [][]Turn
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

// Config names the estimator and holds its hyper-parameters. The zero
// value is verl's adv_estimator=grpo with verl's defaults: std
// normalisation on, γ = 1, λ = 1, ε = 1e-6.
//
// A zero field means its default. The fields whose zero is itself a
// setting a user may want, different from the default (NormByStd false,
// Gamma 0, Lambda 0), are pointers, nil meaning the default; set them with
// new, e.g. Config{Gamma: new(0.99)}.
type Config struct {
	// Estimator names the estimator: a built-in constant (GRPO, RLOO,
	// ...) or a name registered in the Registry that computes. Empty means
	// GRPO. (verl's yaml defaults algorithm.adv_estimator to gae, which
	// needs a critic; GRPO is the default of the recipes this module
	// follows.)
	Estimator Estimator
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
	// StepWeight is GiGPO's ω, the weight of the step-level advantage
	// (verl-agent's algorithm.gigpo.step_advantage_w), finite and ≥ 0.
	// nil means 1.
	StepWeight *float64
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

// stepWeight returns ω.
func (c Config) stepWeight() float64 {
	if c.StepWeight == nil {
		return 1
	}
	return *c.StepWeight
}

// epsilon returns ε.
func (c Config) epsilon() float64 {
	if c.Epsilon == 0 {
		return defaultEpsilon
	}
	return c.Epsilon
}

// Validate reports a hyper-parameter outside its domain. Compute and
// Registry.Compute call it before every estimator. It does not resolve
// Estimator: only the Registry that computes knows its names.
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
	if w := c.StepWeight; w != nil {
		if math.IsNaN(*w) || math.IsInf(*w, 0) {
			return fieldErr("Config.StepWeight", -1, -1, ErrNonFinite, "%v", *w)
		}
		if *w < 0 {
			return fieldErr("Config.StepWeight", -1, -1, ErrInvalidValue, "%v is negative", *w)
		}
	}
	return nil
}

// EstimatorFunc computes advantages and returns for a batch: an
// estimator's implementation, registered under its name with
// Registry.Register. Registry.Compute calls it only with an Input and a
// Config that passed Validate, with cfg.Estimator set to the name it
// resolved, and checks that the Output has the shape of in.Mask and finite
// values (ErrInvalidOutput). An EstimatorFunc that needs an optional field
// (Groups, Values, ...) checks for it and returns a *FieldError wrapping
// ErrMissingInput. It must not modify in.
type EstimatorFunc func(in Input, cfg Config) (Output, error)

// builtinEstimator returns the built-in estimator called name. A switch, not
// a package-level map, so that no package state can be mutated. The
// built-ins are trusted to return well-shaped, finite output (each one
// checks float32 overflow as it writes), which spares a full pass over the
// output on the hot path.
func builtinEstimator(name Estimator) (EstimatorFunc, bool) {
	switch name {
	case GRPO:
		return grpo, true
	case DrGRPO:
		return drgrpo, true
	case RLOO:
		return rloo, true
	case ReinforcePlusPlus:
		return reinforcePlusPlus, true
	case ReinforcePlusPlusBaseline:
		return reinforcePlusPlusBaseline, true
	case GPG:
		return gpg, true
	case OPO:
		return opo, true
	case ReMax:
		return remax, true
	case GRPOPassK:
		return grpoPassK, true
	case GAE:
		return gae, true
	case TurnGRPO:
		return turnGRPO, true
	case GiGPO:
		return gigpo, true
	}
	return nil, false
}

// builtinNames returns the names of the built-in estimators, sorted, in a
// fresh slice.
func builtinNames() []Estimator {
	return []Estimator{
		DrGRPO, GAE, GiGPO, GPG, GRPO, GRPOPassK, OPO, ReinforcePlusPlus,
		ReinforcePlusPlusBaseline, ReMax, RLOO, TurnGRPO,
	}
}

// Compute runs the built-in estimator cfg.Estimator names (GRPO when it
// is empty) on in, after validating cfg and in. It keeps no state and is
// safe for concurrent use. To add estimators of your own, use a Registry.
func Compute(cfg Config, in Input) (Output, error) {
	var builtins *Registry
	return builtins.Compute(cfg, in)
}

// Registry maps estimator names to EstimatorFuncs: the built-in estimators
// and any a program registers. loss.Registry has the same shape:
//
//   - The zero value and a nil *Registry hold the built-ins and are ready
//     to use; NewRegistry is the same as new(Registry). A nil *Registry
//     cannot Register.
//   - Register adds an estimator under a new name; a name is never
//     replaced, so that a typo cannot silently replace grpo.
//   - Lookup resolves a name; Names lists every name, sorted.
//   - A Registry is safe for concurrent use: Register may run while
//     Compute runs.
type Registry struct {
	mu    sync.RWMutex
	added map[Estimator]EstimatorFunc // the program's estimators; the built-ins are builtinEstimator's
}

// NewRegistry returns an empty registry: one that holds the built-in
// estimators and nothing else.
func NewRegistry() *Registry { return new(Registry) }

// Register adds f under name. It fails if the registry is nil, name is
// empty or f is nil (ErrInvalidValue), or name is taken
// (ErrDuplicateName).
func (r *Registry) Register(name Estimator, f EstimatorFunc) error {
	switch {
	case r == nil:
		return fmt.Errorf("advantage: Register(%q): nil *Registry: %w", name, ErrInvalidValue)
	case name == "":
		return fmt.Errorf("advantage: Register(%q): empty name: %w", name, ErrInvalidValue)
	case f == nil:
		return fmt.Errorf("advantage: Register(%q): nil EstimatorFunc: %w", name, ErrInvalidValue)
	}
	if _, ok := builtinEstimator(name); ok {
		return fmt.Errorf("advantage: Register(%q): %w", name, ErrDuplicateName)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.added[name]; ok {
		return fmt.Errorf("advantage: Register(%q): %w", name, ErrDuplicateName)
	}
	if r.added == nil {
		r.added = make(map[Estimator]EstimatorFunc)
	}
	r.added[name] = f
	return nil
}

// Lookup returns the estimator registered under name. The empty name is
// not an estimator (Compute reads it as GRPO before looking it up).
func (r *Registry) Lookup(name Estimator) (EstimatorFunc, bool) {
	if f, ok := builtinEstimator(name); ok || r == nil {
		return f, ok
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.added[name]
	return f, ok
}

// Names returns the registered names, the built-in ones included, sorted
// in byte order.
func (r *Registry) Names() []Estimator {
	names := builtinNames()
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

// Compute runs the estimator cfg.Estimator names (GRPO when it is empty)
// on in, after validating cfg and in, and checks the output of a
// registered estimator.
func (r *Registry) Compute(cfg Config, in Input) (Output, error) {
	if cfg.Estimator == "" {
		cfg.Estimator = GRPO
	}
	f, trusted := builtinEstimator(cfg.Estimator)
	if !trusted {
		var ok bool
		if f, ok = r.Lookup(cfg.Estimator); !ok {
			return Output{}, fmt.Errorf("advantage: Config.Estimator %q (registered: %s): %w", cfg.Estimator, nameList(r.Names()), ErrUnknownName)
		}
	}
	out, err := run(f, trusted, in, cfg)
	if err != nil {
		return Output{}, fmt.Errorf("advantage: %s: %w", cfg.Estimator, err)
	}
	return out, nil
}

// nameList joins estimator names for error messages.
func nameList(ns []Estimator) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// run validates, estimates and checks the output; trusted skips the check
// for non-finite values, which the built-ins make as they write. Its
// errors read "<what and where>"; Compute adds the package and estimator.
func run(f EstimatorFunc, trusted bool, in Input, cfg Config) (Output, error) {
	if err := cfg.validate(); err != nil {
		return Output{}, err
	}
	if err := in.validate(); err != nil {
		return Output{}, err
	}
	out, err := f(in, cfg)
	if err != nil {
		return Output{}, err
	}
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
