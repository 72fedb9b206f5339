package advantage

import (
	"math"

	"gonum.org/v1/gonum/floats"
)

// This file holds the outcome estimators: each trajectory gets one scalar
// advantage, computed from its total reward and its group, and broadcast
// over its tokens with mask 1.

// grouping is the partition of a batch into groups of the same prompt.
type grouping struct {
	of    []int    // of[i]: group of trajectory i, in 0..len(size)-1
	size  []int    // number of trajectories in each group
	first []int    // first trajectory of each group, to name it in errors
	ids   []string // the caller's id of each group
}

// groupBy partitions the batch by ids, numbering groups in order of first
// appearance.
func groupBy(ids []string) grouping {
	g := grouping{of: make([]int, len(ids))}
	index := make(map[string]int)
	for i, id := range ids {
		k, ok := index[id]
		if !ok {
			k = len(g.size)
			index[id] = k
			g.size = append(g.size, 0)
			g.first = append(g.first, i)
			g.ids = append(g.ids, id)
		}
		g.of[i] = k
		g.size[k]++
	}
	return g
}

// requireGroups returns the batch's grouping, or an error if Groups is unset.
func requireGroups(in Input) (grouping, error) {
	if in.Groups == nil {
		return grouping{}, fieldErr("Groups", -1, -1, ErrMissingInput, "this estimator compares trajectories of the same prompt")
	}
	return groupBy(in.Groups), nil
}

// totalRewards returns each trajectory's total reward, verl's
// token_level_rewards.sum(dim=-1): Scores[i] plus the sum of TokenRewards[i],
// plus the rewards of its Turns.
func totalRewards(in Input) []float64 {
	s := make([]float64, len(in.Mask))
	copy(s, in.Scores)
	for i, row := range in.TokenRewards {
		sum := 0.0
		for _, r := range row {
			sum += float64(r)
		}
		s[i] += sum
	}
	for i, row := range in.Turns {
		for _, tu := range row {
			s[i] += tu.Reward
		}
	}
	return s
}

// groupMean returns each group's mean score; a group of one gets mean 0,
// as in verl (its advantage is then its score).
func groupMean(s []float64, g grouping) []float64 {
	m := make([]float64, len(g.size))
	for k, xs := range groupValues(s, g) {
		if len(xs) > 1 {
			m[k] = scaledMean(xs, nil)
		}
	}
	return m
}

// groupStd returns each group's Bessel-corrected standard deviation (as
// torch.std) about the true group mean (scaledMeanStd: finite however
// large the deviations); a group of one gets std 1, as in verl.
func groupStd(s []float64, g grouping) []float64 {
	std := make([]float64, len(g.size))
	for k, xs := range groupValues(s, g) {
		if len(xs) == 1 {
			std[k] = 1
		} else {
			_, std[k] = scaledMeanStd(xs, nil)
		}
	}
	return std
}

// grpo is verl's compute_grpo_outcome_advantage
// (verl/trainer/ppo/core_algos.py): A_i = (r_i − mean_g) / (std_g + ε) with
// the unbiased std of the group g of trajectory i, or A_i = r_i − mean_g when
// Config.NormByStd is false. A group of one has mean 0 and std 1.
func grpo(in Input, cfg Config) (Output, error) {
	return grpoWith(in, cfg.normByStd(), cfg.epsilon())
}

// drgrpo is Dr. GRPO (Liu et al., 2025, arXiv:2503.20783): grpo without the
// division by the std, which verl gets from compute_grpo_outcome_advantage
// with norm_adv_by_std_in_grpo=False. Config.NormByStd is ignored.
func drgrpo(in Input, cfg Config) (Output, error) {
	return grpoWith(in, false, cfg.epsilon())
}

func grpoWith(in Input, normByStd bool, eps float64) (Output, error) {
	g, err := requireGroups(in)
	if err != nil {
		return Output{}, err
	}
	s := totalRewards(in)
	mean := groupMean(s, g)
	var std []float64
	if normByStd {
		std = groupStd(s, g)
	}
	adv := make([]float64, len(s))
	for i, x := range s {
		k := g.of[i]
		adv[i] = x - mean[k]
		if normByStd {
			adv[i] /= std[k] + eps
		}
	}
	return broadcast(in.Mask, adv)
}

// rloo is verl's compute_rloo_outcome_advantage (core_algos.py), REINFORCE
// leave-one-out (Ahmadian et al., 2024, arXiv:2402.14740): in a group of
// n > 1, A_i = r_i·n/(n−1) − mean_g·n/(n−1), which is r_i minus the mean of
// the other n−1 scores; a group of one keeps A_i = r_i.
func rloo(in Input, _ Config) (Output, error) {
	g, err := requireGroups(in)
	if err != nil {
		return Output{}, err
	}
	s := totalRewards(in)
	mean := groupMean(s, g)
	adv := make([]float64, len(s))
	for i, x := range s {
		n := float64(g.size[g.of[i]])
		if n > 1 {
			adv[i] = x*n/(n-1) - mean[g.of[i]]*n/(n-1)
		} else {
			adv[i] = x
		}
	}
	return broadcast(in.Mask, adv)
}

// reinforcePlusPlusBaseline is verl's
// compute_reinforce_plus_plus_baseline_outcome_advantage (core_algos.py),
// REINFORCE++-baseline (Hu, 2025, arXiv:2501.03262): a_i = r_i − mean_g (a
// group of one has mean 0), broadcast to the tokens, then whitened over all
// mask-1 tokens of the batch as verl's masked_whiten does:
// A = (a − μ)/sqrt(σ² + 1e-8), μ and σ² the mean and Bessel-corrected
// variance over the N mask-1 tokens. Needs N ≥ 2.
func reinforcePlusPlusBaseline(in Input, _ Config) (Output, error) {
	g, err := requireGroups(in)
	if err != nil {
		return Output{}, err
	}
	s := totalRewards(in)
	mean := groupMean(s, g)
	a := make([]float64, len(s))
	n := make([]float64, len(s)) // tokens with mask 1 per trajectory
	for i, x := range s {
		a[i] = x - mean[g.of[i]]
		n[i] = float64(countOnes(in.Mask[i]))
	}
	// Every mask-1 token of trajectory i carries a[i], so the token-level
	// mean and variance are those of a weighted by n. scaledMeanStd keeps
	// σ finite for deviations beyond about 1e154, whose squares overflow
	// float64, and hypot(σ, √1e-8) = sqrt(σ² + 1e-8) does not square σ.
	var total float64
	for i := range a {
		total += n[i]
	}
	if total < 2 {
		return Output{}, fieldErr("Mask", -1, -1, ErrDegenerate, "whitening needs at least 2 tokens with mask 1 in the batch, got %v", total)
	}
	mu, sigma := scaledMeanStd(a, n)
	inv := 1 / math.Hypot(sigma, math.Sqrt(whitenEps))
	for i := range a {
		a[i] = (a[i] - mu) * inv
	}
	return broadcast(in.Mask, a)
}

// gpg is verl's compute_gpg_outcome_advantage (core_algos.py), Group Policy
// Gradient (Chu et al., 2025, arXiv:2504.02546): A_i = α·(r_i − mean_g)/F
// with α = B / max(1, #{i : r_i ≠ 0}) over the whole batch and F = 1 (verl's
// f_norm default). A group of one has mean 0.
func gpg(in Input, _ Config) (Output, error) {
	g, err := requireGroups(in)
	if err != nil {
		return Output{}, err
	}
	s := totalRewards(in)
	nonzero := 0
	for _, x := range s {
		if x != 0 {
			nonzero++
		}
	}
	alpha := float64(len(s)) / float64(max(nonzero, 1))
	const fNorm = 1.0
	mean := groupMean(s, g)
	adv := make([]float64, len(s))
	for i, x := range s {
		adv[i] = alpha * (x - mean[g.of[i]]) / fNorm
	}
	return broadcast(in.Mask, adv)
}

// opo is verl's compute_opo_outcome_advantage (core_algos.py), On-Policy RL
// with Optimal reward baseline (Hao et al., 2025, arXiv:2505.23585):
// A_i = r_i − b_g with the length-weighted baseline b_g = Σ_j l_j r_j / Σ_j l_j
// over the group, l_j the number of mask-1 tokens of trajectory j. A group
// of one has b = 0. A larger group whose trajectories have no mask-1 token at
// all has no baseline (ErrDegenerate).
func opo(in Input, _ Config) (Output, error) {
	g, err := requireGroups(in)
	if err != nil {
		return Output{}, err
	}
	s := totalRewards(in)
	lens := make([]float64, len(s))
	for i := range s {
		lens[i] = float64(countOnes(in.Mask[i]))
	}
	vals, weights := groupValues(s, g), groupValues(lens, g)
	base := make([]float64, len(g.size))
	for k, n := range g.size {
		if n == 1 {
			continue
		}
		if floats.Sum(weights[k]) == 0 {
			return Output{}, fieldErr("Mask", g.first[k], -1, ErrDegenerate,
				"group %q has no token with mask 1, so its length-weighted baseline is 0/0", g.ids[k])
		}
		base[k] = scaledMean(vals[k], weights[k])
	}
	adv := make([]float64, len(s))
	for i, x := range s {
		adv[i] = x - base[g.of[i]]
	}
	return broadcast(in.Mask, adv)
}

// grpoPassK is verl's compute_grpo_passk_outcome_advantage (core_algos.py),
// the pass@k objective of Chen et al. (2025, arXiv:2503.19595): in each group
// only the best trajectory gets a non-zero advantage, r_max − r_second, divided
// by (std_g + ε) when Config.NormByStd is set. Every group needs at least two
// trajectories. On ties for the maximum the advantage is 0 whichever tied
// trajectory is chosen; the first in batch order is.
func grpoPassK(in Input, cfg Config) (Output, error) {
	g, err := requireGroups(in)
	if err != nil {
		return Output{}, err
	}
	for k, n := range g.size {
		if n < 2 {
			return Output{}, fieldErr("Groups", g.first[k], -1, ErrDegenerate,
				"pass@k needs at least 2 trajectories per group; group %q has %d", g.ids[k], n)
		}
	}
	s := totalRewards(in)
	best := make([]int, len(g.size))
	for k := range best {
		best[k] = -1
	}
	for i, x := range s {
		k := g.of[i]
		if best[k] < 0 || x > s[best[k]] {
			best[k] = i
		}
	}
	second := make([]float64, len(g.size))
	for k := range second {
		second[k] = math.Inf(-1)
	}
	for i, x := range s {
		k := g.of[i]
		if i != best[k] && x > second[k] {
			second[k] = x
		}
	}
	var std []float64
	if cfg.normByStd() {
		std = groupStd(s, g)
	}
	adv := make([]float64, len(s))
	for k, i := range best {
		a := s[i] - second[k]
		if std != nil {
			a /= std[k] + cfg.epsilon()
		}
		adv[i] = a
	}
	return broadcast(in.Mask, adv)
}

// countOnes returns the number of mask-1 tokens in a row.
func countOnes(row []float32) int {
	n := 0
	for _, m := range row {
		if m != 0 {
			n++
		}
	}
	return n
}

// newOutput allocates Advantages and Returns in the shape of mask, each on
// one contiguous backing array, which it also returns (rows are capped so
// that appending to one row cannot overwrite the next).
func newOutput(mask [][]float32) (out Output, advBuf, retBuf []float32) {
	total := flatLen(mask)
	advBuf = make([]float32, total)
	retBuf = make([]float32, total)
	out = Output{Advantages: make([][]float32, len(mask)), Returns: make([][]float32, len(mask))}
	off := 0
	for i, row := range mask {
		end := off + len(row)
		out.Advantages[i] = advBuf[off:end:end]
		out.Returns[i] = retBuf[off:end:end]
		off = end
	}
	return out, advBuf, retBuf
}

// flatLen returns the number of tokens in the batch.
func flatLen(mask [][]float32) int {
	n := 0
	for _, row := range mask {
		n += len(row)
	}
	return n
}

// broadcast writes adv[i] on every mask-1 token of row i (verl's
// scores.unsqueeze(-1) * response_mask), and the same values as Returns, as
// verl's outcome estimators return (scores, scores); Returns is a copy, so
// that changing one never changes the other.
func broadcast(mask [][]float32, adv []float64) (Output, error) {
	out, advBuf, retBuf := newOutput(mask)
	for i, row := range mask {
		a, err := toFloat32("Advantages", i, -1, adv[i])
		if err != nil {
			return Output{}, err
		}
		dst := out.Advantages[i]
		for t, m := range row {
			// m is exactly 0 or 1 (validated). Adding +0 turns the −0
			// of a negative a times 0 into +0, branch-free.
			dst[t] = a*m + 0
		}
	}
	copy(retBuf, advBuf)
	return out, nil
}

// toFloat32 converts v, reporting a value that overflows float32. The
// check is split from the error path so that it inlines into hot loops.
func toFloat32(field string, row, col int, v float64) (float32, error) {
	if fitsFloat32(v) {
		return float32(v), nil
	}
	return 0, overflowErr(field, row, col, v)
}

// fitsFloat32 reports whether v is finite in float32 (false for NaN).
func fitsFloat32(v float64) bool { return math.Abs(v) <= math.MaxFloat32 }

func overflowErr(field string, row, col int, v float64) error {
	return fieldErr(field, row, col, ErrNonFinite, "%g does not fit in float32", v)
}
