package advantage

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fullBatch sets every field, so each error case below breaks exactly one.
func fullBatch() Input {
	return Input{
		Scores:         []float64{1, 0, 1},
		Groups:         []string{"a", "a", "b"},
		Mask:           [][]float32{{1, 1}, {1, 0, 1}, {1}},
		TokenRewards:   [][]float32{{0, 0}, {0, 0, 0}, {0}},
		Values:         [][]float32{{0, 0}, {0, 0, 0}, {0}},
		BaselineScores: []float64{0, 0, 0},
	}
}

func TestInputErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name      string
		estimator Estimator
		edit      func(*Input)
		sentinel  error
		field     string
		row, col  int
	}{
		{"empty batch", GRPO, func(in *Input) { *in = Input{Scores: []float64{}} }, ErrEmptyBatch, "Mask", -1, -1},
		{"nil everything", GRPO, func(in *Input) { *in = Input{} }, ErrEmptyBatch, "Mask", -1, -1},
		{"no scores or rewards", GRPO, func(in *Input) { in.Scores, in.TokenRewards = nil, nil }, ErrMissingInput, "Scores", -1, -1},
		{"scores too short", GRPO, func(in *Input) { in.Scores = in.Scores[:2] }, ErrLengthMismatch, "Scores", -1, -1},
		{"groups too long", GRPO, func(in *Input) { in.Groups = append(in.Groups, "c") }, ErrLengthMismatch, "Groups", -1, -1},
		{"baselines too short", ReMax, func(in *Input) { in.BaselineScores = []float64{0} }, ErrLengthMismatch, "BaselineScores", -1, -1},
		{"token reward rows", GAE, func(in *Input) { in.TokenRewards = in.TokenRewards[:2] }, ErrLengthMismatch, "TokenRewards", -1, -1},
		{"token reward row length", GAE, func(in *Input) { in.TokenRewards[1] = []float32{0} }, ErrLengthMismatch, "TokenRewards", 1, -1},
		{"value rows", GAE, func(in *Input) { in.Values = append(in.Values, []float32{0}) }, ErrLengthMismatch, "Values", -1, -1},
		{"value row length", GAE, func(in *Input) { in.Values[2] = []float32{0, 0} }, ErrLengthMismatch, "Values", 2, -1},
		{"NaN score", GRPO, func(in *Input) { in.Scores[2] = nan }, ErrNonFinite, "Scores", 2, -1},
		{"Inf score", RLOO, func(in *Input) { in.Scores[0] = -inf }, ErrNonFinite, "Scores", 0, -1},
		{"NaN baseline", ReMax, func(in *Input) { in.BaselineScores[1] = nan }, ErrNonFinite, "BaselineScores", 1, -1},
		{"NaN mask", GRPO, func(in *Input) { in.Mask[1][2] = float32(nan) }, ErrNonFinite, "Mask", 1, 2},
		{"Inf mask", GRPO, func(in *Input) { in.Mask[0][1] = float32(inf) }, ErrNonFinite, "Mask", 0, 1},
		{"fractional mask", GRPO, func(in *Input) { in.Mask[1][1] = 0.5 }, ErrInvalidValue, "Mask", 1, 1},
		{"negative mask", GRPO, func(in *Input) { in.Mask[2][0] = -1 }, ErrInvalidValue, "Mask", 2, 0},
		{"NaN token reward", ReinforcePlusPlus, func(in *Input) { in.TokenRewards[1][0] = float32(nan) }, ErrNonFinite, "TokenRewards", 1, 0},
		{"Inf value", GAE, func(in *Input) { in.Values[0][1] = float32(-inf) }, ErrNonFinite, "Values", 0, 1},
		{"empty group id", GRPO, func(in *Input) { in.Groups[1] = "" }, ErrInvalidValue, "Groups", 1, -1},
		{"grpo without groups", GRPO, func(in *Input) { in.Groups = nil }, ErrMissingInput, "Groups", -1, -1},
		{"drgrpo without groups", DrGRPO, func(in *Input) { in.Groups = nil }, ErrMissingInput, "Groups", -1, -1},
		{"rloo without groups", RLOO, func(in *Input) { in.Groups = nil }, ErrMissingInput, "Groups", -1, -1},
		{"rpp baseline without groups", ReinforcePlusPlusBaseline, func(in *Input) { in.Groups = nil }, ErrMissingInput, "Groups", -1, -1},
		{"gpg without groups", GPG, func(in *Input) { in.Groups = nil }, ErrMissingInput, "Groups", -1, -1},
		{"opo without groups", OPO, func(in *Input) { in.Groups = nil }, ErrMissingInput, "Groups", -1, -1},
		{"passk without groups", GRPOPassK, func(in *Input) { in.Groups = nil }, ErrMissingInput, "Groups", -1, -1},
		{"gae without values", GAE, func(in *Input) { in.Values = nil }, ErrMissingInput, "Values", -1, -1},
		{"remax without baselines", ReMax, func(in *Input) { in.BaselineScores = nil }, ErrMissingInput, "BaselineScores", -1, -1},
		{"passk group of one", GRPOPassK, func(*Input) {}, ErrDegenerate, "Groups", 2, -1},
		{"opo group without tokens", OPO, func(in *Input) {
			in.Mask[0], in.Mask[1] = []float32{0, 0}, []float32{0, 0, 0}
		}, ErrDegenerate, "Mask", 0, -1},
		{"rpp whitening one token", ReinforcePlusPlus, func(in *Input) {
			in.Mask[0], in.Mask[1] = []float32{0, 0}, []float32{0, 0, 0}
		}, ErrDegenerate, "Mask", -1, -1},
		{"rpp baseline whitening one token", ReinforcePlusPlusBaseline, func(in *Input) {
			in.Mask[0], in.Mask[1] = []float32{0, 0}, []float32{0, 0, 0}
		}, ErrDegenerate, "Mask", -1, -1},
		{"gae whitening no token", GAE, func(in *Input) {
			*in = Input{Scores: []float64{1}, Mask: [][]float32{{}}, Values: [][]float32{{}}}
		}, ErrDegenerate, "Mask", -1, -1},
		{"advantage overflows float32", GRPO, func(in *Input) { in.Scores[2] = 1e39 }, ErrNonFinite, "Advantages", 2, -1},
		{"remax advantage overflows float32", ReMax, func(in *Input) { in.Scores[0] = 1e39 }, ErrNonFinite, "Advantages", 0, 1},
		{"return overflows float32", ReinforcePlusPlus, func(in *Input) { in.Scores[0] = 1e39 }, ErrNonFinite, "Returns", 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := fullBatch()
			tc.edit(&in)
			out, err := Compute(Config{Estimator: tc.estimator}, in)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.sentinel)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
			assert.Equal(t, tc.row, fe.Row, "row")
			assert.Equal(t, tc.col, fe.Col, "col")
			assert.Contains(t, err.Error(), "advantage: "+string(tc.estimator)+": "+tc.field)
			assert.Nil(t, out.Advantages)
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		sentinel error
		field    string
	}{
		{"gamma above 1", Config{Gamma: new(1.5)}, ErrInvalidValue, "Config.Gamma"},
		{"gamma negative", Config{Gamma: new(-0.1)}, ErrInvalidValue, "Config.Gamma"},
		{"gamma NaN", Config{Gamma: new(math.NaN())}, ErrNonFinite, "Config.Gamma"},
		{"lambda above 1", Config{Lambda: new(2.0)}, ErrInvalidValue, "Config.Lambda"},
		{"lambda Inf", Config{Lambda: new(math.Inf(-1))}, ErrNonFinite, "Config.Lambda"},
		{"epsilon negative", Config{Epsilon: -1e-6}, ErrInvalidValue, "Config.Epsilon"},
		{"epsilon NaN", Config{Epsilon: math.NaN()}, ErrNonFinite, "Config.Epsilon"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Estimator = GAE
			_, err := Compute(cfg, fullBatch())
			require.ErrorIs(t, err, tc.sentinel)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
		})
	}
}

func TestUnknownEstimator(t *testing.T) {
	_, err := Compute(Config{Estimator: "ppo"}, fullBatch())
	require.ErrorIs(t, err, ErrUnknownName)
	assert.Contains(t, err.Error(), `"ppo"`)
	assert.Contains(t, err.Error(), "grpo") // lists the known names

	_, err = NewRegistry().Compute(Config{Estimator: "ppo"}, fullBatch())
	require.ErrorIs(t, err, ErrUnknownName)
	assert.Contains(t, err.Error(), "grpo") // lists the registered names
}

func TestFieldErrorMessage(t *testing.T) {
	err := &FieldError{Field: "Mask", Row: 3, Col: 17, Err: ErrNonFinite, Msg: "NaN"}
	assert.Equal(t, "Mask[3][17]: value is NaN or infinite: NaN", err.Error())
	err = &FieldError{Field: "Groups", Row: -1, Col: -1, Err: ErrMissingInput}
	assert.Equal(t, "Groups: missing input", err.Error())
	assert.True(t, errors.Is(err, ErrMissingInput))

	// Validate, called directly, names the package.
	verr := Input{}.Validate()
	assert.EqualError(t, verr, "advantage: Mask: empty batch: no trajectories (Mask has no rows)")
	cerr := Config{Gamma: new(2.0)}.Validate()
	assert.EqualError(t, cerr, "advantage: Config.Gamma: invalid value: 2 is outside [0, 1]")
	assert.NoError(t, fullBatch().Validate())
	assert.NoError(t, Config{}.Validate())
}
