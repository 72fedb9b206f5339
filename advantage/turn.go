package advantage

// This file holds the turn-level estimators, which give each turn of a
// multi-turn trajectory its own advantage: turn_grpo and gigpo.

// Turn is one turn of a multi-turn trajectory, as Input.Turns lists them:
// the tokens Mask[i][Start:End] that the policy generated in it (what the
// environment answered lies between one turn's End and the next's Start,
// with mask 0), the reward the environment gave for the turn, and the
// state the turn was taken in.
type Turn struct {
	// Start and End delimit the turn's tokens in its row:
	// 0 ≤ Start ≤ End ≤ len(Mask[i]), and a turn starts at or after the
	// End of the one before.
	Start, End int
	// Reward is the environment's reward for the turn. Every estimator
	// counts it: outcome estimators add it to the trajectory's total
	// reward, token-level ones (reinforce_plus_plus, remax, gae) place
	// it on the turn's last mask-1 token (the last before End; it is
	// dropped there when no mask-1 token precedes End, as a score is on a
	// row without one).
	Reward float64
	// State names the state the turn was taken in (for gigpo, which
	// groups the turns of a group's trajectories by it: GiGPO's anchor
	// states). Turns with equal names within a group are taken to be in
	// the same state; the first turn of every trajectory of a group is in
	// the prompt's state.
	State string
}

// turnsOf returns the turns of row i: Input.Turns[i], or one turn
// spanning the row, in the group's initial state, when Turns is nil.
func turnsOf(in Input, i int) []Turn {
	if in.Turns != nil {
		return in.Turns[i]
	}
	return []Turn{{Start: 0, End: len(in.Mask[i])}}
}

// stepRewards returns r_{i,k}, the reward of each turn of row i: its
// Reward, plus the TokenRewards of its mask-1 tokens, plus Scores[i] on
// the last turn. It fails when a mask-1 token lies outside every turn, as
// no turn's advantage would reach it.
func stepRewards(in Input, i int, turns []Turn) ([]float64, error) {
	mask := in.Mask[i]
	r := make([]float64, len(turns))
	covered := 0 // tokens before this index are checked
	for k, tu := range turns {
		for t := covered; t < tu.Start; t++ {
			if mask[t] != 0 {
				return nil, fieldErr("Mask", i, t, ErrInvalidValue, "a token with mask 1 lies outside every turn of Turns[%d]", i)
			}
		}
		r[k] = tu.Reward
		if in.TokenRewards != nil {
			for t := tu.Start; t < tu.End; t++ {
				if mask[t] != 0 {
					r[k] += float64(in.TokenRewards[i][t])
				}
			}
		}
		covered = tu.End
	}
	for t := covered; t < len(mask); t++ {
		if mask[t] != 0 {
			return nil, fieldErr("Mask", i, t, ErrInvalidValue, "a token with mask 1 lies outside every turn of Turns[%d]", i)
		}
	}
	if len(r) > 0 && in.Scores != nil {
		r[len(r)-1] += in.Scores[i]
	}
	return r, nil
}

// discountedReturns returns G_k = Σ_{j≥k} γ^{j−k} r_j, by G_k = r_k +
// γ·G_{k+1} from the last turn back (GiGPO's Eq. 5).
func discountedReturns(r []float64, gamma float64) []float64 {
	g := make([]float64, len(r))
	run := 0.0
	for k := len(r) - 1; k >= 0; k-- {
		run = r[k] + gamma*run
		g[k] = run
	}
	return g
}

// turnReturns returns the turns and their discounted returns for every
// row.
func turnReturns(in Input, gamma float64) ([][]Turn, [][]float64, error) {
	turns := make([][]Turn, len(in.Mask))
	rets := make([][]float64, len(in.Mask))
	for i := range in.Mask {
		turns[i] = turnsOf(in, i)
		r, err := stepRewards(in, i, turns[i])
		if err != nil {
			return nil, nil, err
		}
		rets[i] = discountedReturns(r, gamma)
	}
	return turns, rets, nil
}

// stepKey identifies a set of turns normalised together: a group and a
// turn index (turn_grpo) or a state name (gigpo).
type stepKey struct {
	group int
	index int
	state string
}

// stepNormalize returns, for every turn, its return minus the mean of the
// returns of its set (the turns with the same key), divided by the set's
// Bessel-corrected standard deviation + eps when normByStd. A set of one
// gives 0: its own return is its baseline (GiGPO's step_norm_reward).
func stepNormalize(rets [][]float64, key func(i, k int) stepKey, normByStd bool, eps float64) [][]float64 {
	sets := map[stepKey][]float64{}
	for i, row := range rets {
		for k, g := range row {
			sets[key(i, k)] = append(sets[key(i, k)], g)
		}
	}
	type stats struct{ mean, std float64 }
	st := make(map[stepKey]stats, len(sets))
	for k, xs := range sets {
		if len(xs) == 1 {
			st[k] = stats{xs[0], 1}
		} else {
			m, s := scaledMeanStd(xs, nil)
			st[k] = stats{m, s}
		}
	}
	adv := make([][]float64, len(rets))
	for i, row := range rets {
		adv[i] = make([]float64, len(row))
		for k, g := range row {
			s := st[key(i, k)]
			adv[i][k] = g - s.mean
			if normByStd {
				adv[i][k] /= s.std + eps
			}
		}
	}
	return adv
}

// writeTurns writes adv[i][k] on the mask-1 tokens of turn k of row i,
// and ret[i][k] on all its tokens as the return; nil ret writes the
// advantages as returns on the mask-1 tokens.
func writeTurns(in Input, turns [][]Turn, adv, ret [][]float64) (Output, error) {
	out, _, _ := newOutput(in.Mask)
	for i, row := range turns {
		mask := in.Mask[i]
		for k, tu := range row {
			a, err := toFloat32("Advantages", i, tu.Start, adv[i][k])
			if err != nil {
				return Output{}, err
			}
			var r float32
			if ret != nil {
				if r, err = toFloat32("Returns", i, tu.Start, ret[i][k]); err != nil {
					return Output{}, err
				}
			}
			for t := tu.Start; t < tu.End; t++ {
				out.Advantages[i][t] = a*mask[t] + 0
				if ret != nil {
					out.Returns[i][t] = r
				} else {
					out.Returns[i][t] = a*mask[t] + 0
				}
			}
		}
	}
	return out, nil
}

// turnGRPO gives each turn its discounted return's advantage over the
// turns at the same position in the other trajectories of its group.
//
// The return of turn k of trajectory i is G_{i,k} = Σ_{j≥k} γ^{j−k} r_{i,j}
// (GiGPO, Feng et al., 2025, arXiv:2505.10978, Eq. 5; the Monte-Carlo
// return of Sutton & Barto, Eq. 3.8, over turns), where r_{i,j} is turn j's
// reward (Turn.Reward plus the TokenRewards of its mask-1 tokens) and the
// last turn's also holds Scores[i]. Its baseline is the group's mean
// return at the same turn index, over the trajectories that reached it —
// the steps rLLM's stepwise advantage normalises together in its per-step
// mode (rllm/engine/agent_workflow_engine.py: step ids
// "<task>_<agent>_step<k>", shared by a task's rollouts), as MT-GRPO
// (Zeng et al., 2025, arXiv:2505.11821) normalises the first turn's
// reward over the group:
//
//	A_{i,k} = (G_{i,k} − mean{G_{j,k}}) / (std{G_{j,k}} + ε)
//
// with the Bessel-corrected std (without it when Config.NormByStd is
// false), over the trajectories j of i's group that have a turn k. A turn
// no other trajectory of its group reached has itself as baseline:
// advantage 0. Every mask-1 token of turn k gets A_{i,k}; Returns hold
// G_{i,k} on the turn's tokens. Needs Groups; without Turns, each
// trajectory is one turn (its advantage is then its total reward's,
// GRPO's, except that a group of one gets 0).
func turnGRPO(in Input, cfg Config) (Output, error) {
	g, err := requireGroups(in)
	if err != nil {
		return Output{}, err
	}
	turns, rets, err := turnReturns(in, cfg.gamma())
	if err != nil {
		return Output{}, err
	}
	adv := stepNormalize(rets, func(i, k int) stepKey { return stepKey{group: g.of[i], index: k} }, cfg.normByStd(), cfg.epsilon())
	return writeTurns(in, turns, adv, rets)
}

// gigpo is GiGPO, group-in-group policy optimisation (Feng et al., 2025,
// arXiv:2505.10978; verl-agent's gigpo/core_gigpo.py,
// compute_gigpo_outcome_advantage): an episode-level advantage, GRPO's
// over the group's total rewards, plus a step-level one over the turns of
// the group's trajectories taken in the same state (anchor states), each
// relative to its group:
//
//	A^E_i     = (R_i − mean_g R) / F_g                       (Eq. 3)
//	G_{i,k}   = Σ_{j≥k} γ^{j−k} r_{i,j}                      (Eq. 5)
//	A^S_{i,k} = (G_{i,k} − mean_S G) / F_S                   (Eqs. 6, 7)
//	A_{i,k}   = A^E_i + ω·A^S_{i,k}                          (Eq. 8)
//
// R_i is trajectory i's total reward (as every outcome estimator sums
// it); r_{i,j} the reward of turn j as turn_grpo takes it; S the turns of
// i's group with turn k's State (Turn.State, which must be set when Turns
// is given); F = std + ε with the Bessel-corrected std when
// Config.NormByStd (the reference's mode "mean_std_norm"), F = 1 when not
// ("mean_norm"); ω is Config.StepWeight (step_advantage_w, default 1). As
// in the reference, an episode group of one has mean 0 and F = 1, and a
// step group of one gets A^S = 0. Every mask-1 token of turn k gets
// A_{i,k}, and Returns are the advantages, as the reference returns
// (scores, scores).
//
// The episode statistics are taken over the group's trajectories, as Eq.
// 3 writes them (episode_norm_reward with
// compute_mean_std_cross_steps=False); the reference's default takes them
// over its per-step rows, which counts a trajectory once per turn. Needs
// Groups. Without Turns each trajectory is one turn in its group's
// initial state; for groups of two or more without rewards on mask-0
// tokens A^S is then A^E, and gigpo is grpo scaled by 1 + ω.
func gigpo(in Input, cfg Config) (Output, error) {
	g, err := requireGroups(in)
	if err != nil {
		return Output{}, err
	}
	if in.Turns != nil {
		for i, row := range in.Turns {
			for k, tu := range row {
				if tu.State == "" {
					return Output{}, fieldErr("Turns", i, k, ErrMissingInput, "the turn's State is empty: gigpo groups turns by the state they were taken in")
				}
			}
		}
	}
	turns, rets, err := turnReturns(in, cfg.gamma())
	if err != nil {
		return Output{}, err
	}
	norm, eps, w := cfg.normByStd(), cfg.epsilon(), cfg.stepWeight()
	s := totalRewards(in)
	mean := groupMean(s, g)
	std := groupStd(s, g)
	step := stepNormalize(rets, func(i, k int) stepKey { return stepKey{group: g.of[i], state: turns[i][k].State} }, norm, eps)
	adv := make([][]float64, len(rets))
	for i := range rets {
		ep := s[i] - mean[g.of[i]]
		if norm {
			ep /= std[g.of[i]] + eps
		}
		adv[i] = make([]float64, len(rets[i]))
		for k := range rets[i] {
			adv[i][k] = ep + w*step[i][k]
		}
	}
	return writeTurns(in, turns, adv, nil)
}
