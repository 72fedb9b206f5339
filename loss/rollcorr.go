package loss

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ISLevel names the level of rollout importance weights (verl's
// rollout_is).
type ISLevel string

// Levels of verl's compute_rollout_correction_weights
// (verl/trainer/ppo/rollout_corr_helper.py).
const (
	ISToken    ISLevel = "token"    // ρ_t = π/π_rollout per token
	ISSequence ISLevel = "sequence" // ρ = Π_t ρ_t, the same for every token of the sequence
)

// BypassLoss names the policy loss of bypass mode (verl's
// rollout_correction.loss_type).
type BypassLoss string

// Bypass-mode losses of verl's compute_policy_loss_bypass_mode
// (verl/trainer/ppo/core_algos.py).
const (
	// BypassPPOClip runs Config.Mode's objective with the rollout as the old
	// policy and applies no IS weight: the ratio π_θ/π_rollout already is
	// one (verl's default).
	BypassPPOClip BypassLoss = "ppo_clip"
	// BypassReinforce replaces the policy loss by REINFORCE with the
	// detached, truncated IS weight: −sg(w)·A·logπ_θ
	// (verl's compute_policy_loss_reinforce).
	BypassReinforce BypassLoss = "reinforce"
)

// The rejection options of verl's rollout_rs (SUPPORTED_ROLLOUT_RS_OPTIONS
// in verl/trainer/ppo/rollout_corr_helper.py). RolloutCorrection.RolloutRS
// lists one or more of them, comma-separated. With δ_t = clamp(log π_t −
// log π_rollout,t, ±20) the per-token divergences are
//
//	k1 = −δ_t,  k2 = ½δ_t²,  k3 = e^δ_t − 1 − δ_t
//
// and a token_ option tests each token's value, seq_sum_ the sum over the
// sequence's tokens, seq_mean_ their mean (seq_mean_k1 is the geometric
// mean of the ratios, verl's Geo-RS), seq_max_ their maximum; a sequence
// option keeps or rejects the whole sequence. k1 options keep a value in
// [log lower, log upper]; k2 and k3 options keep a value ≤ upper.
const (
	RSTokenK1   = "token_k1"
	RSTokenK2   = "token_k2"
	RSTokenK3   = "token_k3"
	RSSeqSumK1  = "seq_sum_k1"
	RSSeqSumK2  = "seq_sum_k2"
	RSSeqSumK3  = "seq_sum_k3"
	RSSeqMeanK1 = "seq_mean_k1"
	RSSeqMeanK2 = "seq_mean_k2"
	RSSeqMeanK3 = "seq_mean_k3"
	RSSeqMaxK2  = "seq_max_k2"
	RSSeqMaxK3  = "seq_max_k3"
)

// DefaultISThreshold is verl's rollout_is_threshold default.
const DefaultISThreshold = 2.0

// RolloutCorrection is verl's algorithm.rollout_correction
// (RolloutCorrectionConfig in verl/trainer/config/algorithm.py): importance
// weights and rejection that correct for tokens another engine or an older
// policy sampled. Each field is the verl key of the same name, so a verl
// configuration carries over field by field; RolloutCorrectionPreset gives
// verl's presets by their names. The zero value corrects nothing.
//
// In decoupled mode (BypassMode false) the weights and the rejection
// compare the trainer's old policy with the rollout's (Batch.OldLogProbs
// against Batch.RolloutLogProbs, which Compute then requires), as verl's
// compute_rollout_correction_and_add_to_batch does; the rejection rewrites
// the batch's mask for every term of the loss (policy, entropy, KL), as
// verl rewrites response_mask. In bypass mode the rollout's log-probs are
// the old policy (Batch.OldLogProbs; a trainer sets its OldLogProbs source
// to "rollout") and the weights and the rejection compare the current
// policy, detached, with them, per call, as verl's
// compute_policy_loss_bypass_mode does; the rejection masks the policy
// term only.
//
// Rejected tokens leave both the numerator and the denominator of the
// aggregation: token-mean divides by the tokens kept, the sequence means
// count the tokens and sequences kept (the bug slime's PR #657 fixed was a
// denominator that still counted rejected tokens).
type RolloutCorrection struct {
	// RolloutIS is the level of the truncated importance weight that
	// multiplies each token's policy loss (rollout_is): "" for none,
	// ISToken or ISSequence. As in verl the weight is
	// exp(clamp(log ratio, ±20)) — the log ratio summed over the sequence's
	// tokens first for ISSequence — truncated above at
	// RolloutISThreshold, detached, zero on padding
	// (compute_rollout_correction_weights).
	RolloutIS ISLevel
	// RolloutISThreshold truncates the weight (rollout_is_threshold); its
	// inverse is the lower bound the metrics count against. Zero means
	// DefaultISThreshold.
	RolloutISThreshold float64
	// RolloutISBatchNormalize divides the truncated weights by their mean
	// (rollout_is_batch_normalize): over the batch's tokens for ISToken,
	// over its non-empty sequences for ISSequence. The mean is taken over
	// the batch given to Compute: per micro-batch, as in verl's bypass
	// mode; verl's decoupled mode takes it over the whole step's batch,
	// which Compute matches when it is given the whole batch.
	RolloutISBatchNormalize bool
	// RolloutRS lists the rejection options, comma-separated (rollout_rs):
	// the RS constants, for instance "seq_sum_k1" or "token_k1,seq_max_k3".
	// A token or sequence is kept when every option keeps it. Empty means
	// no rejection.
	RolloutRS string
	// RolloutRSThreshold gives each option's threshold, comma-separated,
	// or one for all of them (rollout_rs_threshold): "lower_upper" or
	// "upper" for a k1 option (ratio bounds; a lone upper bound takes
	// 1/upper as the lower), a number for k2 and k3 options (the upper
	// bound of the divergence). Note that k1 tests −log(π/π_rollout), so
	// that the bounds apply to π_rollout/π, as in verl. Required when
	// RolloutRS is set; ignored otherwise, as verl ignores it.
	RolloutRSThreshold string
	// BypassMode takes the rollout's log-probs as the old policy
	// (bypass_mode; see the type's doc). Without it the correction is in
	// verl's decoupled mode.
	BypassMode bool
	// LossType is the bypass-mode loss (loss_type): BypassPPOClip (also
	// when empty) or BypassReinforce, which requires BypassMode and
	// Config.Mode vanilla (the default), since it replaces the policy loss
	// as verl's bypass_mode loss does. BypassPPOClip runs Config.Mode:
	// verl runs vanilla there, and the other modes are this package's
	// extension.
	LossType BypassLoss
}

// Active reports whether rc changes the loss: it weights, rejects or
// bypasses.
func (rc RolloutCorrection) Active() bool {
	return rc.RolloutIS != "" || rc.RolloutRS != "" || rc.BypassMode
}

// Validate checks rc by verl's rules (rollout_corr_helper.py's
// _parse_rollout_rs_thresholds and compute_rollout_correction_weights) and
// a few of its own: a threshold must be finite, a k1 lower bound must not
// exceed its upper bound, and LossType reinforce needs BypassMode. Errors
// wrap ErrConfig, or ErrUnknownName for a name verl does not know.
func (rc RolloutCorrection) Validate() error {
	_, err := rc.spec()
	return err
}

// rcLevel is where a rejection option looks: at each token, or at the
// sum, mean or maximum over the sequence.
type rcLevel uint8

const (
	rcToken rcLevel = iota
	rcSeqSum
	rcSeqMean
	rcSeqMax
)

// rsOption is one parsed rejection option with its thresholds; lower is
// used by k1 options only.
type rsOption struct {
	name         string
	level        rcLevel
	k            int // 1, 2 or 3
	lower, upper float64
}

// rcSpec is a validated correction, with the defaults filled in.
type rcSpec struct {
	is        ISLevel
	isThr     float64
	isNorm    bool
	rs        []rsOption
	bypass    bool
	reinforce bool
	// tisAlias marks Config.TISCap: token-level weights that report
	// tis_imp_ratio_mean and tis_clipfrac instead of the rollout_corr/
	// metrics.
	tisAlias bool
}

// active reports whether the spec computes anything.
func (s rcSpec) active() bool { return s.is != "" || len(s.rs) > 0 || s.bypass }

// appliesWeights reports whether the IS weights multiply the policy loss:
// in bypass mode with ppo_clip they are computed for the metrics only.
func (s rcSpec) appliesWeights() bool { return s.is != "" && (!s.bypass || s.reinforce) }

// spec validates rc and returns it parsed.
func (rc RolloutCorrection) spec() (rcSpec, error) {
	s := rcSpec{is: rc.RolloutIS, isThr: rc.RolloutISThreshold, isNorm: rc.RolloutISBatchNormalize, bypass: rc.BypassMode}
	if s.isThr == 0 {
		s.isThr = DefaultISThreshold
	}
	switch rc.RolloutIS {
	case "", ISToken, ISSequence:
	default:
		return s, fmt.Errorf("loss: RolloutCorrection.RolloutIS %q (want %q, %q or empty): %w", rc.RolloutIS, ISToken, ISSequence, ErrUnknownName)
	}
	if !(s.isThr > 0) || math.IsInf(s.isThr, 0) {
		return s, fmt.Errorf("loss: RolloutCorrection.RolloutISThreshold = %v, want finite and > 0 (0 means %v): %w",
			rc.RolloutISThreshold, DefaultISThreshold, ErrConfig)
	}
	switch rc.LossType {
	case "", BypassPPOClip:
	case BypassReinforce:
		if !rc.BypassMode {
			return s, fmt.Errorf("loss: RolloutCorrection.LossType %q needs BypassMode (verl ignores loss_type in decoupled mode): %w",
				rc.LossType, ErrConfig)
		}
		s.reinforce = true
	default:
		return s, fmt.Errorf("loss: RolloutCorrection.LossType %q (want %q or %q): %w", rc.LossType, BypassPPOClip, BypassReinforce, ErrUnknownName)
	}
	if rc.RolloutRS == "" {
		return s, nil
	}
	rs, err := parseRS(rc.RolloutRS, rc.RolloutRSThreshold)
	if err != nil {
		return s, err
	}
	s.rs = rs
	return s, nil
}

// parseRS parses rollout_rs and rollout_rs_threshold as verl's
// compute_rollout_rejection_mask and _parse_rollout_rs_thresholds do:
// options are comma-separated, trimmed, empty ones skipped and repeats
// dropped; there is one threshold for all of them or one each.
func parseRS(options, thresholds string) ([]rsOption, error) {
	var opts []rsOption
	seen := map[string]bool{}
	for _, part := range strings.Split(options, ",") {
		name := strings.TrimSpace(part)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		o, ok := rsOptionNamed(name)
		if !ok {
			return nil, fmt.Errorf("loss: RolloutCorrection.RolloutRS option %q (want %s): %w", name, strings.Join(rsOptionNames(), ", "), ErrUnknownName)
		}
		opts = append(opts, o)
	}
	if len(opts) == 0 {
		return nil, fmt.Errorf("loss: RolloutCorrection.RolloutRS %q names no option: %w", options, ErrConfig)
	}
	var specs []string
	for _, part := range strings.Split(thresholds, ",") {
		if p := strings.TrimSpace(part); p != "" {
			specs = append(specs, p)
		}
	}
	switch {
	case len(specs) == 0:
		return nil, fmt.Errorf("loss: RolloutCorrection.RolloutRSThreshold is empty; RolloutRS %q needs one: %w", options, ErrConfig)
	case len(specs) != 1 && len(specs) != len(opts):
		return nil, fmt.Errorf("loss: RolloutCorrection.RolloutRSThreshold %q has %d values for %d options (want 1 or %d): %w",
			thresholds, len(specs), len(opts), len(opts), ErrConfig)
	}
	for i := range opts {
		spec := specs[0]
		if len(specs) > 1 {
			spec = specs[i]
		}
		if err := opts[i].setThreshold(spec); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

// setThreshold parses one threshold entry for o.
func (o *rsOption) setThreshold(spec string) error {
	num := func(s string) (float64, error) {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		switch {
		case err != nil:
			return 0, fmt.Errorf("loss: RolloutCorrection.RolloutRSThreshold %q for option %s: not a number: %w", spec, o.name, ErrConfig)
		case !(v > 0) || math.IsInf(v, 0):
			return 0, fmt.Errorf("loss: RolloutCorrection.RolloutRSThreshold %q for option %s: want finite and > 0: %w", spec, o.name, ErrConfig)
		}
		return v, nil
	}
	lo, hi, two := strings.Cut(spec, "_")
	if o.k != 1 {
		if two {
			return fmt.Errorf("loss: RolloutCorrection.RolloutRSThreshold %q for option %s: a k2/k3 option takes one upper bound, not lower_upper: %w",
				spec, o.name, ErrConfig)
		}
		v, err := num(spec)
		o.upper = v
		return err
	}
	if !two {
		hi = spec
	}
	upper, err := num(hi)
	if err != nil {
		return err
	}
	lower := 1 / upper
	if two {
		if lower, err = num(lo); err != nil {
			return err
		}
	}
	if lower > upper {
		return fmt.Errorf("loss: RolloutCorrection.RolloutRSThreshold %q for option %s: lower bound %v above upper bound %v rejects everything: %w",
			spec, o.name, lower, upper, ErrConfig)
	}
	o.lower, o.upper = lower, upper
	return nil
}

// rsOptionNamed returns the option called name, thresholds unset.
func rsOptionNamed(name string) (rsOption, bool) {
	level, k, ok := rcLevel(0), 0, true
	switch name {
	case RSTokenK1, RSTokenK2, RSTokenK3:
		level = rcToken
	case RSSeqSumK1, RSSeqSumK2, RSSeqSumK3:
		level = rcSeqSum
	case RSSeqMeanK1, RSSeqMeanK2, RSSeqMeanK3:
		level = rcSeqMean
	case RSSeqMaxK2, RSSeqMaxK3:
		level = rcSeqMax
	default:
		ok = false
	}
	if ok {
		k = int(name[len(name)-1] - '0')
	}
	return rsOption{name: name, level: level, k: k}, ok
}

// rsOptionNames lists the rejection options, sorted.
func rsOptionNames() []string {
	return []string{RSSeqMaxK2, RSSeqMaxK3, RSSeqMeanK1, RSSeqMeanK2, RSSeqMeanK3, RSSeqSumK1, RSSeqSumK2, RSSeqSumK3,
		RSTokenK1, RSTokenK2, RSTokenK3}
}

// RolloutCorrectionPresets lists the names RolloutCorrectionPreset knows,
// sorted: verl's RolloutCorrectionConfig factory methods.
func RolloutCorrectionPresets() []string {
	return []string{
		"bypass_pg_geo_rs", "bypass_pg_geo_rs_seq_tis", "bypass_pg_geo_rs_token_tis", "bypass_pg_is",
		"bypass_ppo_clip", "bypass_ppo_clip_geo_rs", "bypass_ppo_clip_k3_rs",
		"decoupled_geo_rs", "decoupled_geo_rs_seq_tis", "decoupled_geo_rs_token_tis",
		"decoupled_k3_rs", "decoupled_k3_rs_seq_tis", "decoupled_k3_rs_token_tis",
		"decoupled_seq_is", "decoupled_seq_is_rs", "decoupled_token_is", "disabled",
	}
}

// RolloutCorrectionPreset returns verl's preset of that name
// (RolloutCorrectionConfig's factory methods in
// verl/trainer/config/algorithm.py) with verl's default thresholds, which
// a caller may then change field by field:
//
//	decoupled_token_is         Token-TIS: RolloutIS token, threshold 2
//	decoupled_seq_is           Seq-TIS: RolloutIS sequence, threshold 2
//	decoupled_seq_is_rs        Seq-MIS: Seq-TIS + seq_sum_k1 rejection at "0.5_2.0"
//	decoupled_geo_rs           Geo-RS: seq_mean_k1 at "0.999_1.001", no weights
//	decoupled_geo_rs_seq_tis   Geo-RS + Seq-TIS
//	decoupled_geo_rs_token_tis Geo-RS + Token-TIS
//	decoupled_k3_rs            K3-RS: seq_mean_k3 at 0.01, no weights
//	decoupled_k3_rs_seq_tis    K3-RS + Seq-TIS
//	decoupled_k3_rs_token_tis  K3-RS + Token-TIS
//	bypass_ppo_clip            bypass, PPO-clip, no weights, no rejection
//	bypass_ppo_clip_geo_rs     bypass, PPO-clip + Geo-RS
//	bypass_ppo_clip_k3_rs      bypass, PPO-clip + K3-RS
//	bypass_pg_is               bypass, REINFORCE + Seq-TIS
//	bypass_pg_geo_rs           bypass, REINFORCE + Geo-RS
//	bypass_pg_geo_rs_seq_tis   bypass, REINFORCE + Geo-RS + Seq-TIS
//	bypass_pg_geo_rs_token_tis bypass, REINFORCE + Geo-RS + Token-TIS
//	disabled                   the zero value: no correction
//
// An unknown name is an error wrapping ErrUnknownName.
func RolloutCorrectionPreset(name string) (RolloutCorrection, error) {
	const geo, k3, seqMIS = "0.999_1.001", "0.01", "0.5_2.0"
	tokenIS := RolloutCorrection{RolloutIS: ISToken, RolloutISThreshold: DefaultISThreshold}
	seqIS := RolloutCorrection{RolloutIS: ISSequence, RolloutISThreshold: DefaultISThreshold}
	rs := func(rc RolloutCorrection, option, threshold string) RolloutCorrection {
		rc.RolloutRS, rc.RolloutRSThreshold = option, threshold
		return rc
	}
	bypass := func(rc RolloutCorrection, lt BypassLoss) RolloutCorrection {
		rc.BypassMode, rc.LossType = true, lt
		return rc
	}
	switch name {
	case "decoupled_token_is":
		return tokenIS, nil
	case "decoupled_seq_is":
		return seqIS, nil
	case "decoupled_seq_is_rs":
		return rs(seqIS, RSSeqSumK1, seqMIS), nil
	case "decoupled_geo_rs":
		return rs(RolloutCorrection{}, RSSeqMeanK1, geo), nil
	case "decoupled_geo_rs_seq_tis":
		return rs(seqIS, RSSeqMeanK1, geo), nil
	case "decoupled_geo_rs_token_tis":
		return rs(tokenIS, RSSeqMeanK1, geo), nil
	case "decoupled_k3_rs":
		return rs(RolloutCorrection{}, RSSeqMeanK3, k3), nil
	case "decoupled_k3_rs_seq_tis":
		return rs(seqIS, RSSeqMeanK3, k3), nil
	case "decoupled_k3_rs_token_tis":
		return rs(tokenIS, RSSeqMeanK3, k3), nil
	case "bypass_ppo_clip":
		return bypass(RolloutCorrection{}, BypassPPOClip), nil
	case "bypass_ppo_clip_geo_rs":
		return bypass(rs(RolloutCorrection{}, RSSeqMeanK1, geo), BypassPPOClip), nil
	case "bypass_ppo_clip_k3_rs":
		return bypass(rs(RolloutCorrection{}, RSSeqMeanK3, k3), BypassPPOClip), nil
	case "bypass_pg_is":
		return bypass(seqIS, BypassReinforce), nil
	case "bypass_pg_geo_rs":
		return bypass(rs(RolloutCorrection{}, RSSeqMeanK1, geo), BypassReinforce), nil
	case "bypass_pg_geo_rs_seq_tis":
		return bypass(rs(seqIS, RSSeqMeanK1, geo), BypassReinforce), nil
	case "bypass_pg_geo_rs_token_tis":
		return bypass(rs(tokenIS, RSSeqMeanK1, geo), BypassReinforce), nil
	case "disabled":
		return RolloutCorrection{}, nil
	}
	return RolloutCorrection{}, fmt.Errorf("loss: rollout correction preset %q (want one of %s): %w",
		name, strings.Join(RolloutCorrectionPresets(), ", "), ErrUnknownName)
}
