package loss

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Mode names a policy-gradient objective: a built-in one below or a
// variant registered in a Registry (verl's policy_loss.loss_mode).
type Mode string

// Policy-loss modes, named as in verl's POLICY_LOSS_REGISTRY
// (verl/trainer/ppo/core_algos.py, register_policy_loss).
const (
	ModeVanilla Mode = "vanilla"  // PPO clip, clip-higher, dual-clip (compute_policy_loss_vanilla)
	ModeGSPO    Mode = "gspo"     // sequence-level ratio (compute_policy_loss_gspo)
	ModeCISPO   Mode = "cispo"    // clipped, detached IS weight times log-prob (compute_policy_loss_cispo)
	ModeGPG     Mode = "gpg"      // plain −A·logπ (compute_policy_loss_gpg)
	ModeSAPO    Mode = "sapo"     // soft sigmoid gate (compute_policy_loss_sapo)
	ModeGeoMean Mode = "geo_mean" // geometric-mean ratio, GMPO (compute_policy_loss_geo_mean)
)

// Agg names how per-token losses become one scalar (verl's
// loss_agg_mode).
type Agg string

// Aggregation modes of verl's agg_loss (verl/trainer/ppo/core_algos.py).
const (
	AggTokenMean           Agg = "token-mean"
	AggSeqMeanTokenSum     Agg = "seq-mean-token-sum"
	AggSeqMeanTokenMean    Agg = "seq-mean-token-mean"
	AggSeqMeanTokenSumNorm Agg = "seq-mean-token-sum-norm"
)

// KLType names a KL estimator (verl's kl_loss_type).
type KLType string

// KL estimators of verl's kl_penalty / kl_penalty_forward
// (verl/trainer/ppo/core_algos.py). verl's aliases "kl", "mse" and
// "low_var_kl" are accepted too, and a "+" suffix on k1, k3 or abs selects
// the straight-through form (forward value of the estimator, gradient of k2).
const (
	KLK1     KLType = "k1"  // logπ − logπ_ref
	KLK2     KLType = "k2"  // ½(logπ − logπ_ref)²
	KLK3     KLType = "k3"  // low_var_kl: e^(ref−logπ) − (ref−logπ) − 1, clamped to [−10, 10]
	KLAbs    KLType = "abs" // |logπ − logπ_ref|
	KLK3Plus KLType = "k3+" // k3 forward, k2 gradient
)

// Defaults applied to zero-valued Config fields; they are verl's ActorConfig
// defaults (clip_ratio 0.2, clip_ratio_c 3.0, tau_pos 1.0, tau_neg 1.05,
// kl_loss_type low_var_kl, loss_agg_mode token-mean).
const (
	DefaultClip   = 0.2
	DefaultClipC  = 3.0
	DefaultTauPos = 1.0
	DefaultTauNeg = 1.05
)

// Sentinel errors. Every error returned by Compute wraps one of them, so
// callers can branch with errors.Is; the message names the field and, for
// data errors, the position.
var (
	// ErrConfig: a Config value is out of its domain, a Register call is
	// invalid (nil registry, empty name, nil Build), or a variant's
	// expression could not be built or run.
	ErrConfig = errors.New("invalid loss config")
	// ErrShape: a Batch tensor is not a [B,T] float32 tensor of the
	// batch's shape in host memory, or a variant returned a wrong shape.
	ErrShape = errors.New("shape mismatch")
	// ErrNonFinite: an input is NaN or ±Inf, or the loss, a metric or a
	// gradient overflowed.
	ErrNonFinite = errors.New("non-finite value")
	// ErrEmptyBatch: B or T is 0.
	ErrEmptyBatch = errors.New("empty batch")
	// ErrMissing: a required Batch tensor is nil, or a Config term needs
	// an optional one that is nil.
	ErrMissing = errors.New("missing input")
	// ErrMaskValue: a Mask entry is neither 0 nor 1.
	ErrMaskValue = errors.New("mask value is neither 0 nor 1")
	// ErrUnknownName: Mode, Agg or KLType names nothing known.
	ErrUnknownName = errors.New("unknown name")
	// ErrDuplicateName: Register was given a name already registered.
	ErrDuplicateName = errors.New("name already registered")
)

// Config selects the objective and its terms. Zero values select verl's
// defaults (see the Default constants); so Config{} is PPO-clip with
// ε = 0.2, dual-clip c = 3, token-mean aggregation and no entropy, KL or
// TIS term. The paper's GRPO-TCR uses Mode "vanilla", ClipLow 0.2,
// ClipHigh 0.28, ClipC 10, Agg "token-mean".
type Config struct {
	// Mode names the policy-gradient objective: a built-in mode constant or
	// a name registered in the Registry. Empty means "vanilla".
	Mode Mode
	// ClipLow and ClipHigh bound the importance ratio to
	// [1−ClipLow, 1+ClipHigh] (verl clip_ratio_low / clip_ratio_high;
	// decoupled bounds are DAPO's clip-higher). geo_mean applies them to the
	// log-ratio, as verl does. Zero means DefaultClip. ClipLow ≥ 1 leaves
	// the ratio without a lower bound, as verl allows: MiniMax-M1 runs
	// CISPO that way ("ε_low set to a large value").
	ClipLow, ClipHigh float64
	// ClipC is the dual-clip bound applied where A < 0 (verl clip_ratio_c,
	// Ye et al. 2019, arXiv:1912.09729); it must exceed 1. Zero means
	// DefaultClipC. Only "vanilla" uses it.
	ClipC float64
	// Agg aggregates per-token losses into a scalar (verl agg_loss). Empty
	// means "token-mean". verl's gspo and sapo always aggregate their policy
	// term with "seq-mean-token-mean" and geo_mean with a mean over
	// sequences; Agg still aggregates their entropy and KL terms.
	Agg Agg
	// AggDivisor is the constant divisor of "seq-mean-token-sum-norm"
	// (verl loss_scale_factor, Dr. GRPO's MAX_TOKENS). Zero means the
	// batch's T. The mode is the mean over non-empty rows of the row sums,
	// divided by AggDivisor, as in current verl; releases before verl's
	// global-batch agg_loss divided the plain sum over rows by T, without
	// the mean over rows.
	AggDivisor float64
	// EntropyCoef weighs the entropy bonus: loss −= EntropyCoef·agg(H)
	// (verl entropy_coeff; agg(H) is verl's compute_entropy_loss on the
	// model's per-token entropies). Non-zero requires Batch.Entropy.
	EntropyCoef float64
	// KLCoef weighs the KL loss: loss += KLCoef·agg(kl(logπ, logπ_ref))
	// (verl kl_loss_coef). Non-zero requires Batch.RefLogProbs.
	KLCoef float64
	// KLType is the KL estimator (verl kl_loss_type). Empty means "k3".
	KLType KLType
	// TISCap, when positive, multiplies every per-token policy loss by the
	// truncated importance weight min(exp(old − rollout), TISCap) between
	// the trainer's old log-probs and the rollout sampler's (verl
	// tis_imp_ratio_cap; Yao et al., "Your efficient RL framework secretly
	// brings you off-policy RL training"). Requires Batch.RolloutLogProbs.
	// Two departures from verl's tis_imp_ratio_cap, both deliberate: the
	// weight applies to every mode (verl applied that cap in vanilla only;
	// its later rollout_is_weights apply to every loss, as here, with
	// geo_mean taking the geometric mean per row), and old − rollout is
	// clamped to ±20 before exp, as the policy ratio is, which changes the
	// weight only where it is below e^−20.
	//
	// TISCap is an alias: it computes exactly what RolloutCorrection
	// {RolloutIS: ISToken, RolloutISThreshold: TISCap} computes (verl's
	// decoupled_token_is preset), but reports its own two metrics,
	// tis_imp_ratio_mean (the mean truncated weight) and tis_clipfrac,
	// instead of the rollout_corr/ ones. Setting both is an error.
	TISCap float64
	// RolloutCorrection is verl's rollout correction (importance weights,
	// rejection, bypass mode) for tokens another engine or an older policy
	// sampled; see RolloutCorrection. The zero value corrects nothing.
	RolloutCorrection RolloutCorrection
	// TauPos and TauNeg are SAPO's gate temperatures for A > 0 and A ≤ 0
	// (verl tau_pos, tau_neg). Zero means DefaultTauPos / DefaultTauNeg.
	TauPos, TauNeg float64
}

// normalized returns cfg with defaults filled in and names canonicalised,
// or an error naming the offending field.
func (cfg Config) normalized() (Config, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeVanilla
	}
	if cfg.Agg == "" {
		cfg.Agg = AggTokenMean
	}
	if cfg.KLType == "" {
		cfg.KLType = KLK3
	}
	if cfg.ClipLow == 0 {
		cfg.ClipLow = DefaultClip
	}
	if cfg.ClipHigh == 0 {
		cfg.ClipHigh = DefaultClip
	}
	if cfg.ClipC == 0 {
		cfg.ClipC = DefaultClipC
	}
	if cfg.TauPos == 0 {
		cfg.TauPos = DefaultTauPos
	}
	if cfg.TauNeg == 0 {
		cfg.TauNeg = DefaultTauNeg
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"ClipLow", cfg.ClipLow}, {"ClipHigh", cfg.ClipHigh}, {"ClipC", cfg.ClipC},
		{"AggDivisor", cfg.AggDivisor}, {"EntropyCoef", cfg.EntropyCoef}, {"KLCoef", cfg.KLCoef},
		{"TISCap", cfg.TISCap}, {"TauPos", cfg.TauPos}, {"TauNeg", cfg.TauNeg},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return cfg, fmt.Errorf("loss: Config.%s = %v: %w", f.name, f.v, ErrConfig)
		}
	}
	switch {
	case cfg.ClipLow < 0:
		return cfg, fmt.Errorf("loss: Config.ClipLow = %v, want > 0 (≥ 1 for no lower bound): %w", cfg.ClipLow, ErrConfig)
	case cfg.ClipHigh < 0:
		return cfg, fmt.Errorf("loss: Config.ClipHigh = %v, want > 0: %w", cfg.ClipHigh, ErrConfig)
	case cfg.ClipC <= 1:
		return cfg, fmt.Errorf("loss: Config.ClipC = %v, want > 1 (dual-clip lower bound): %w", cfg.ClipC, ErrConfig)
	case cfg.AggDivisor < 0:
		return cfg, fmt.Errorf("loss: Config.AggDivisor = %v, want >= 0: %w", cfg.AggDivisor, ErrConfig)
	case cfg.KLCoef < 0:
		return cfg, fmt.Errorf("loss: Config.KLCoef = %v, want >= 0: %w", cfg.KLCoef, ErrConfig)
	case cfg.TISCap < 0:
		return cfg, fmt.Errorf("loss: Config.TISCap = %v, want >= 0 (0 disables TIS): %w", cfg.TISCap, ErrConfig)
	case cfg.TauPos < 0 || cfg.TauNeg < 0:
		return cfg, fmt.Errorf("loss: Config.TauPos/TauNeg = %v/%v, want > 0: %w", cfg.TauPos, cfg.TauNeg, ErrConfig)
	}
	if err := checkAgg("Config.Agg", cfg.Agg); err != nil {
		return cfg, fmt.Errorf("loss: %w", err)
	}
	kt, err := canonicalKL(cfg.KLType)
	if err != nil {
		return cfg, err
	}
	cfg.KLType = kt
	if cfg.RolloutCorrection.Active() && cfg.TISCap > 0 {
		return cfg, fmt.Errorf("loss: Config.TISCap = %v and Config.RolloutCorrection are both set; TISCap is RolloutCorrection{RolloutIS: %q, RolloutISThreshold: TISCap}: set one: %w",
			cfg.TISCap, ISToken, ErrConfig)
	}
	rc := &cfg.RolloutCorrection
	if _, err := rc.spec(); err != nil {
		return cfg, err
	}
	if rc.RolloutISThreshold == 0 {
		rc.RolloutISThreshold = DefaultISThreshold
	}
	if rc.LossType == "" {
		rc.LossType = BypassPPOClip
	}
	if rc.LossType == BypassReinforce && cfg.Mode != ModeVanilla {
		return cfg, fmt.Errorf("loss: RolloutCorrection.LossType %q replaces the policy loss (verl's bypass_mode loss), so Config.Mode %q would be ignored: leave Mode empty: %w",
			rc.LossType, cfg.Mode, ErrConfig)
	}
	return cfg, nil
}

// correction returns the rollout correction of a normalised cfg: its
// RolloutCorrection, or TISCap's token-level weights.
func (cfg Config) correction() rcSpec {
	if cfg.TISCap > 0 {
		return rcSpec{is: ISToken, isThr: cfg.TISCap, tisAlias: true}
	}
	s, _ := cfg.RolloutCorrection.spec() // validated by normalized
	return s
}

// NeedsRolloutLogProbs reports whether Compute needs Batch.RolloutLogProbs
// for cfg: for TISCap, and for a RolloutCorrection that weights or rejects
// in decoupled mode. In bypass mode the rollout's log-probs are
// Batch.OldLogProbs.
func (cfg Config) NeedsRolloutLogProbs() bool {
	rc := cfg.RolloutCorrection
	return cfg.TISCap > 0 || (!rc.BypassMode && (rc.RolloutIS != "" || rc.RolloutRS != ""))
}

// checkAgg returns an error naming field unless agg is a known
// aggregation; the caller adds the package prefix.
func checkAgg(field string, agg Agg) error {
	switch agg {
	case AggTokenMean, AggSeqMeanTokenSum, AggSeqMeanTokenMean, AggSeqMeanTokenSumNorm:
		return nil
	}
	return fmt.Errorf("%s %q (want one of %s, %s, %s, %s): %w", field, agg,
		AggTokenMean, AggSeqMeanTokenSum, AggSeqMeanTokenMean, AggSeqMeanTokenSumNorm, ErrUnknownName)
}

// canonicalKL maps verl's KL names and aliases onto k1, k2, k3, abs and their
// "+" (straight-through) forms.
func canonicalKL(name KLType) (KLType, error) {
	b, plus := strings.CutSuffix(string(name), "+")
	base := KLType(b)
	switch base {
	case "kl", KLK1:
		base = KLK1
	case "mse", KLK2:
		base, plus = KLK2, false // k2's gradient is already the k2 gradient
	case "low_var_kl", KLK3:
		base = KLK3
	case KLAbs:
	default:
		return "", fmt.Errorf("loss: Config.KLType %q (want k1, k2, k3, abs, or k1+, k3+, abs+; verl's kl, mse, low_var_kl also accepted): %w",
			name, ErrUnknownName)
	}
	if plus {
		return base + "+", nil
	}
	return base, nil
}
