package advantage

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handTurnBatch is a batch small enough to work through by hand.
//
// Group g holds trajectories 0 and 1, group h trajectory 2.
//
//	row 0: mask [1 1 0 1], turn 0 = [0,2) reward 0 state s0,
//	       turn 1 = [3,4) reward 0.5 state a, score 1
//	row 1: mask [1 0 1 1], turn 0 = [0,1) reward −1 state s0,
//	       turn 1 = [2,4) reward 0 state b, score 0
//	row 2: mask [1 1],     turn 0 = [0,2) reward 0.3 state s0, score 0.2
//
// Step rewards (the turn's reward, the score on the last turn):
// r0 = [0, 1.5], r1 = [−1, 0], r2 = [0.5]. With γ = 0.5 the returns
// G_k = r_k + γ·G_{k+1} are G0 = [0 + 0.5·1.5, 1.5] = [0.75, 1.5],
// G1 = [−1 + 0.5·0, 0] = [−1, 0], G2 = [0.5].
func handTurnBatch() Input {
	return Input{
		Scores: []float64{1, 0, 0.2},
		Groups: []string{"g", "g", "h"},
		Mask:   [][]float32{{1, 1, 0, 1}, {1, 0, 1, 1}, {1, 1}},
		Turns: [][]Turn{
			{{Start: 0, End: 2, State: "s0"}, {Start: 3, End: 4, Reward: 0.5, State: "a"}},
			{{Start: 0, End: 1, Reward: -1, State: "s0"}, {Start: 2, End: 4, State: "b"}},
			{{Start: 0, End: 2, Reward: 0.3, State: "s0"}},
		},
	}
}

func TestTurnEstimatorsByHand(t *testing.T) {
	const r2 = 0.7071067811865476 // 1/√2: (x − mean)/std for any two distinct values
	cases := []struct {
		name    string
		cfg     Config
		adv     [][]float64
		returns [][]float64
	}{
		{
			// turn_grpo, mean only: turn 0 of group g has mean
			// (0.75 − 1)/2 = −0.125, so A = ±0.875; turn 1 mean
			// (1.5 + 0)/2 = 0.75, A = ±0.75; row 2 is alone: 0.
			// Returns are G on every token of the turn.
			name:    "turn_grpo/mean",
			cfg:     Config{Estimator: TurnGRPO, Gamma: new(0.5), NormByStd: new(false)},
			adv:     [][]float64{{0.875, 0.875, 0, 0.75}, {-0.875, 0, -0.75, -0.75}, {0, 0}},
			returns: [][]float64{{0.75, 0.75, 0, 1.5}, {-1, 0, 0, 0}, {0.5, 0.5}},
		},
		{
			// With the std: two values x, y give ±(x−y)/2 over
			// |x−y|/√2, that is ±1/√2 (ε aside).
			name:    "turn_grpo/std",
			cfg:     Config{Estimator: TurnGRPO, Gamma: new(0.5)},
			adv:     [][]float64{{r2, r2, 0, r2}, {-r2, 0, -r2, -r2}, {0, 0}},
			returns: [][]float64{{0.75, 0.75, 0, 1.5}, {-1, 0, 0, 0}, {0.5, 0.5}},
		},
		{
			// turn_grpo with γ = 1: G0 = [1.5, 1.5], G1 = [−1, 0];
			// turn 0: mean 0.25, A = ±1.25; turn 1 as above.
			name:    "turn_grpo/gamma1",
			cfg:     Config{Estimator: TurnGRPO, Gamma: new(1.0), NormByStd: new(false)},
			adv:     [][]float64{{1.25, 1.25, 0, 0.75}, {-1.25, 0, -0.75, -0.75}, {0, 0}},
			returns: [][]float64{{1.5, 1.5, 0, 1.5}, {-1, 0, 0, 0}, {0.5, 0.5}},
		},
		{
			// gigpo, mean only, ω = 1. Episode: R0 = 1 + 0.5 = 1.5,
			// R1 = −1, mean 0.25, A^E = ±1.25; R2 = 0.2 + 0.3 = 0.5
			// alone: mean 0, A^E = 0.5. Steps: state s0 of group g
			// holds G 0.75 and −1: A^S = ±0.875; states a and b (and
			// s0 of group h) hold one turn each: A^S = 0.
			// Row 0: [1.25 + 0.875, 1.25], row 1: [−2.125, −1.25].
			// Returns are the advantages.
			name:    "gigpo/mean",
			cfg:     Config{Estimator: GiGPO, Gamma: new(0.5), NormByStd: new(false)},
			adv:     [][]float64{{2.125, 2.125, 0, 1.25}, {-2.125, 0, -1.25, -1.25}, {0.5, 0.5}},
			returns: [][]float64{{2.125, 2.125, 0, 1.25}, {-2.125, 0, -1.25, -1.25}, {0.5, 0.5}},
		},
		{
			// gigpo with the std, ω = 0.5: A^E = ±1/√2 in group g and
			// 0.5/(1 + ε) alone; A^S = ±1/√2 in state s0 of g.
			// Turn 0: ±(1/√2)(1 + 0.5) = ±1.0606602; turn 1: ±1/√2.
			name:    "gigpo/std/w0.5",
			cfg:     Config{Estimator: GiGPO, Gamma: new(0.5), StepWeight: new(0.5)},
			adv:     [][]float64{{1.5 * r2, 1.5 * r2, 0, r2}, {-1.5 * r2, 0, -r2, -r2}, {0.5, 0.5}},
			returns: [][]float64{{1.5 * r2, 1.5 * r2, 0, r2}, {-1.5 * r2, 0, -r2, -r2}, {0.5, 0.5}},
		},
		{
			// ω = 0 leaves GRPO's episode advantage on every turn.
			name:    "gigpo/w0",
			cfg:     Config{Estimator: GiGPO, Gamma: new(0.5), NormByStd: new(false), StepWeight: new(0.0)},
			adv:     [][]float64{{1.25, 1.25, 0, 1.25}, {-1.25, 0, -1.25, -1.25}, {0.5, 0.5}},
			returns: [][]float64{{1.25, 1.25, 0, 1.25}, {-1.25, 0, -1.25, -1.25}, {0.5, 0.5}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Compute(c.cfg, handTurnBatch())
			require.NoError(t, err)
			assertRowsClose(t, "advantages", c.adv, out.Advantages)
			assertRowsClose(t, "returns", c.returns, out.Returns)
		})
	}
}

// TestTurnRewardsInOtherEstimators checks that turn rewards count in the
// estimators that know nothing of turns. grpo sums them with the score:
// R = [1.5, −1, 0.5], so group g gets ±1.25 (mean only) and row 2, alone,
// 0.5. reinforce_plus_plus places each turn's reward on the turn's last
// mask-1 token and carries the return through mask-0 tokens; with γ = 1
// its returns G_t = r_t + G_{t+1} are, from the end: row 0, 0.5 + 1 on
// token 3, so 1.5 everywhere; row 1, the score 0 on token 3 and −1 on
// token 0, so [−1, 0, 0, 0]; row 2, 0.3 + 0.2 on token 1, so [0.5, 0.5].
func TestTurnRewardsInOtherEstimators(t *testing.T) {
	out, err := Compute(Config{Estimator: GRPO, NormByStd: new(false)}, handTurnBatch())
	require.NoError(t, err)
	assertRowsClose(t, "grpo", [][]float64{{1.25, 1.25, 0, 1.25}, {-1.25, 0, -1.25, -1.25}, {0.5, 0.5}}, out.Advantages)

	out, err = Compute(Config{Estimator: ReinforcePlusPlus, Gamma: new(1.0)}, handTurnBatch())
	require.NoError(t, err)
	assertRowsClose(t, "reinforce_plus_plus returns", [][]float64{{1.5, 1.5, 1.5, 1.5}, {-1, 0, 0, 0}, {0.5, 0.5}}, out.Returns)
}

func TestTurnEstimatorErrors(t *testing.T) {
	cases := []struct {
		name string
		est  Estimator
		mod  func(*Input)
		is   error
	}{
		{"turns rows", TurnGRPO, func(in *Input) { in.Turns = in.Turns[:2] }, ErrLengthMismatch},
		{"span past the row", TurnGRPO, func(in *Input) { in.Turns[2][0].End = 3 }, ErrInvalidValue},
		{"overlapping turns", TurnGRPO, func(in *Input) { in.Turns[0][1].Start = 1 }, ErrInvalidValue},
		{"reversed span", GiGPO, func(in *Input) { in.Turns[0][0].Start, in.Turns[0][0].End = 2, 1 }, ErrInvalidValue},
		{"NaN reward", GRPO, func(in *Input) { in.Turns[1][0].Reward = math.NaN() }, ErrNonFinite},
		{"token outside every turn", TurnGRPO, func(in *Input) { in.Turns[1] = in.Turns[1][:1] }, ErrInvalidValue},
		{"no state for gigpo", GiGPO, func(in *Input) { in.Turns[0][1].State = "" }, ErrMissingInput},
		{"no groups", TurnGRPO, func(in *Input) { in.Groups = nil }, ErrMissingInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := handTurnBatch()
			c.mod(&in)
			_, err := Compute(Config{Estimator: c.est}, in)
			assert.ErrorIs(t, err, c.is)
		})
	}
	_, err := Compute(Config{Estimator: GiGPO, StepWeight: new(-1.0)}, handTurnBatch())
	assert.ErrorIs(t, err, ErrInvalidValue)
	_, err = Compute(Config{Estimator: GiGPO, StepWeight: new(math.Inf(1))}, handTurnBatch())
	assert.ErrorIs(t, err, ErrNonFinite)
}
