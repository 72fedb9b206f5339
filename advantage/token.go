package advantage

import "math"

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
// plus Scores[i] on the last mask-1 token.
type rewardRow struct {
	tokens []float32 // TokenRewards[i], or nil
	score  float64   // Scores[i], or 0
	last   int       // index of the last mask-1 token, or -1
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
	raw := make([]float64, 0, flatLen(in.Mask))
	var n, sum float64 // count and sum of the mask-1 returns, for whitening
	for i, mask := range in.Mask {
		rw := newRewardRow(in, i)
		ret := out.Returns[i]
		g := 0.0
		start := len(raw)
		raw = raw[:start+len(mask)]
		row := raw[start:]
		for t := len(mask) - 1; t >= 0; t-- {
			if mask[t] != 0 {
				g = rw.at(t) + gamma*g
				n++
				sum += g
			}
			row[t] = g
			if !fitsFloat32(g) {
				return Output{}, overflowErr("Returns", i, t, g)
			}
			ret[t] = float32(g)
		}
	}
	if err := whitenInto(out.Advantages, raw, in.Mask, n, sum); err != nil {
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
	raw := make([]float64, 0, flatLen(in.Mask))
	var n, sum float64 // count and sum of the mask-1 Â, for whitening
	for i, mask := range in.Mask {
		rw := newRewardRow(in, i)
		values, ret := in.Values[i], out.Returns[i]
		start := len(raw)
		raw = raw[:start+len(mask)]
		row := raw[start:]
		nextV, a := 0.0, 0.0
		for t := len(mask) - 1; t >= 0; t-- {
			v := float64(values[t])
			if mask[t] != 0 {
				a = rw.at(t) + gamma*nextV - v + gl*a
				nextV = v
				n++
				sum += a
			}
			row[t] = a
			if !fitsFloat32(a + v) {
				return Output{}, overflowErr("Returns", i, t, a+v)
			}
			ret[t] = float32(a + v)
		}
	}
	if err := whitenInto(out.Advantages, raw, in.Mask, n, sum); err != nil {
		return Output{}, err
	}
	return out, nil
}

// whitenInto writes raw (the rows of mask laid end to end) whitened over the
// mask-1 tokens into dst, as verl's masked_whiten (verl/utils/
// torch_functional.py): (x − μ)/sqrt(σ² + 1e-8), μ = Σ m·x / Σ m and σ² the
// Bessel-corrected Σ m·(x − μ)² / (Σ m − 1); mask-0 tokens get 0. n and sum
// are Σ m and Σ m·x, which the caller accumulates during its scan. The
// variance is taken about μ in a second pass, as verl does, rather than from
// a running sum of squares, which cancels badly when |μ| ≫ σ. verl raises on
// Σ m < 2 (division by zero in the correction); so does this
// (ErrDegenerate). The result cannot overflow float32: by Samuelson's
// inequality |x − μ|/σ ≤ (n − 1)/√n for every masked x, n = Σ m.
func whitenInto(dst [][]float32, raw []float64, mask [][]float32, n, sum float64) error {
	if n < 2 {
		return fieldErr("Mask", -1, -1, ErrDegenerate, "whitening needs at least 2 tokens with mask 1 in the batch, got %v", n)
	}
	mu := sum / n
	var ss float64
	off := 0
	for _, row := range mask {
		x := raw[off : off+len(row)]
		for t, m := range row {
			d := x[t] - mu
			ss += float64(m) * d * d
		}
		off += len(row)
	}
	inv := 1 / math.Sqrt(ss/(n-1)+whitenEps)
	off = 0
	for i, row := range mask {
		x, d := raw[off:off+len(row)], dst[i]
		for t, m := range row {
			// m is exactly 0 or 1; + 0 turns −0 into +0.
			d[t] = float32((x[t]-mu)*inv)*m + 0
		}
		off += len(row)
	}
	return nil
}
