package advantage

import (
	"math"

	"gonum.org/v1/gonum/stat"
)

// This file holds the token-level estimators, which run a reverse scan over
// each trajectory's tokens: reinforce_plus_plus, remax and gae.
//
// Tokens with mask 0 inside a row are tool output that the policy did not
// produce. All three scans pass over them: the running quantity is carried
// through unchanged and their own reward is ignored, so that a reward at the
// end of the last turn reaches the tokens of every earlier turn. This is
// verl's mask handling in compute_gae_advantage_return ("skip values and
// TD-error on observation tokens").

// rewardRow gives the reward of trajectory i at token t: TokenRewards[i][t],
// plus Scores[i] on the last mask-1 token, plus each turn's reward on the
// turn's last mask-1 token.
type rewardRow struct {
	tokens []float32 // TokenRewards[i], or nil
	score  float64   // Scores[i], or 0
	last   int       // index of the last mask-1 token, or -1
	turns  []float64 // the turns' rewards by token, or nil when none is non-zero
}

func newRewardRow(in Input, i int) rewardRow {
	r := rewardRow{last: -1}
	if in.TokenRewards != nil {
		r.tokens = in.TokenRewards[i]
	}
	if in.Scores != nil {
		r.score = in.Scores[i]
	}
	mask := in.Mask[i]
	for t := len(mask) - 1; t >= 0; t-- {
		if mask[t] != 0 {
			r.last = t
			break
		}
	}
	if in.Turns != nil {
		for _, tu := range in.Turns[i] {
			if tu.Reward == 0 {
				continue
			}
			for t := tu.End - 1; t >= 0; t-- {
				if mask[t] != 0 {
					if r.turns == nil {
						r.turns = make([]float64, len(mask))
					}
					r.turns[t] += tu.Reward
					break
				}
			}
		}
	}
	return r
}

// at returns the reward at token t.
func (r rewardRow) at(t int) float64 {
	x := 0.0
	if r.tokens != nil {
		x = float64(r.tokens[t])
	}
	if t == r.last {
		x += r.score
	}
	if r.turns != nil {
		x += r.turns[t]
	}
	return x
}

// reinforcePlusPlus is REINFORCE++ (Hu, 2025, arXiv:2501.03262), verl's
// compute_reinforce_plus_plus_outcome_advantage (core_algos.py): the
// discounted return G_t = r_t + γ·G_{t+1} over the mask-1 tokens of each
// trajectory, whitened over all mask-1 tokens of the batch by verl's
// masked_whiten (mean, Bessel-corrected variance, 1/sqrt(var + 1e-8)).
// Returns are the G_t. Needs at least 2 mask-1 tokens in the batch.
//
// Older verl releases reset the running return at every mask-0 token, which
// on multi-turn trajectories cut the outcome reward off from all turns but
// the last (verl issue #7278); this follows the fix (verl PR #7300) and
// carries G through tool-output tokens undiscounted, as gae does. Returns
// on a mask-0 token hold the G carried through it; no loss reads them
// there.
func reinforcePlusPlus(in Input, cfg Config) (Output, error) {
	gamma := cfg.gamma()
	out, _, _ := newOutput(in.Mask)
	kept := make([]float64, 0, flatLen(in.Mask)) // the mask-1 returns, for whitening
	for i, mask := range in.Mask {
		rw := newRewardRow(in, i)
		ret := out.Returns[i]
		g := 0.0
		row := newKeptRow(&kept, mask)
		for t := len(mask) - 1; t >= 0; t-- {
			if mask[t] != 0 {
				g = rw.at(t) + gamma*g
				row.put(g)
			}
			if !fitsFloat32(g) {
				return Output{}, overflowErr("Returns", i, t, g)
			}
			ret[t] = float32(g)
		}
	}
	if err := whitenInto(out.Advantages, kept, in.Mask); err != nil {
		return Output{}, err
	}
	return out, nil
}

// remax is ReMax (Li et al., 2023, arXiv:2310.10505), verl's
// compute_remax_outcome_advantage (core_algos.py): the undiscounted
// reward-to-go G_t = Σ_{s≥t} mask_s·r_s, minus the score of the greedy
// response to the same prompt (Input.BaselineScores): A_t = G_t − b_i on
// mask-1 tokens. Returns are the G_t.
func remax(in Input, _ Config) (Output, error) {
	if in.BaselineScores == nil {
		return Output{}, fieldErr("BaselineScores", -1, -1, ErrMissingInput, "remax subtracts the greedy response's score")
	}
	out, _, _ := newOutput(in.Mask)
	for i, mask := range in.Mask {
		rw := newRewardRow(in, i)
		b := in.BaselineScores[i]
		adv, ret := out.Advantages[i], out.Returns[i]
		g := 0.0
		for t := len(mask) - 1; t >= 0; t-- {
			if mask[t] != 0 {
				g += rw.at(t)
				if !fitsFloat32(g - b) {
					return Output{}, overflowErr("Advantages", i, t, g-b)
				}
				adv[t] = float32(g - b)
			}
			if !fitsFloat32(g) {
				return Output{}, overflowErr("Returns", i, t, g)
			}
			ret[t] = float32(g)
		}
	}
	return out, nil
}

// gae is Generalized Advantage Estimation (Schulman et al., 2015,
// arXiv:1506.02438), verl's compute_gae_advantage_return (core_algos.py): on
// mask-1 tokens, δ_t = r_t + γ·V_next − V_t and Â_t = δ_t + γλ·Â_next, where
// V_next and Â_next are those of the next mask-1 token (0 past the end);
// mask-0 tokens carry Â and V_next through unchanged. Returns are Â_t + V_t
// (on every token, as verl); advantages are Â whitened over the mask-1
// tokens of the batch by masked_whiten, and 0 on mask-0 tokens. Needs
// Input.Values and at least 2 mask-1 tokens in the batch.
func gae(in Input, cfg Config) (Output, error) {
	if in.Values == nil {
		return Output{}, fieldErr("Values", -1, -1, ErrMissingInput, "gae needs the critic's values")
	}
	gamma, lambda := cfg.gamma(), cfg.lambda()
	gl := gamma * lambda
	out, _, _ := newOutput(in.Mask)
	kept := make([]float64, 0, flatLen(in.Mask)) // the mask-1 Â, for whitening
	for i, mask := range in.Mask {
		rw := newRewardRow(in, i)
		values, ret := in.Values[i], out.Returns[i]
		row := newKeptRow(&kept, mask)
		nextV, a := 0.0, 0.0
		for t := len(mask) - 1; t >= 0; t-- {
			v := float64(values[t])
			if mask[t] != 0 {
				a = rw.at(t) + gamma*nextV - v + gl*a
				nextV = v
				row.put(a)
			}
			if !fitsFloat32(a + v) {
				return Output{}, overflowErr("Returns", i, t, a+v)
			}
			ret[t] = float32(a + v)
		}
	}
	if err := whitenInto(out.Advantages, kept, in.Mask); err != nil {
		return Output{}, err
	}
	return out, nil
}

// keptRow fills, back to front, the values of one row's mask-1 tokens at
// the end of a slice that holds those of the rows before it, so that the
// slice lists the batch's mask-1 values in row-major order.
type keptRow struct {
	vals []float64 // the row's part of the slice
	next int       // the index the next put writes, counting down
}

// newKeptRow extends *kept by the number of mask-1 tokens of mask and
// returns the row that fills the new part.
func newKeptRow(kept *[]float64, mask []float32) keptRow {
	start := len(*kept)
	*kept = (*kept)[:start+countOnes(mask)]
	vals := (*kept)[start:]
	return keptRow{vals: vals, next: len(vals) - 1}
}

// put records the value of the row's mask-1 token before the one put last.
func (r *keptRow) put(x float64) {
	r.vals[r.next] = x
	r.next--
}

// whitenInto writes the batch's mask-1 values kept (in row-major order)
// whitened into the mask-1 tokens of dst, as verl's masked_whiten (verl/
// utils/torch_functional.py): (x − μ)/sqrt(σ² + 1e-8), μ the mean and σ²
// the Bessel-corrected variance Σ (x − μ)² / (n − 1) of the n values
// (stat.MeanVariance); mask-0 tokens keep their 0. The variance is taken
// about μ in a second pass, as verl does, rather than from a running sum
// of squares, which cancels badly when |μ| ≫ σ. verl raises on n < 2
// (division by zero in the correction); so does this (ErrDegenerate). The
// values fit in float32, so their squares cannot overflow float64, and the
// result cannot overflow float32: by Samuelson's inequality
// |x − μ|/σ ≤ (n − 1)/√n for every value.
func whitenInto(dst [][]float32, kept []float64, mask [][]float32) error {
	if len(kept) < 2 {
		return fieldErr("Mask", -1, -1, ErrDegenerate, "whitening needs at least 2 tokens with mask 1 in the batch, got %d", len(kept))
	}
	mu, variance := stat.MeanVariance(kept, nil)
	inv := 1 / math.Sqrt(variance+whitenEps)
	j := 0
	for i, row := range mask {
		d := dst[i]
		for t, m := range row {
			if m != 0 {
				// + 0 turns −0 into +0.
				d[t] = float32((kept[j]-mu)*inv) + 0
				j++
			}
		}
	}
	return nil
}
