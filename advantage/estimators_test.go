package advantage

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hand-derived cases, one or more per estimator. Every expected value is
// worked out in the comment above it from the formula in verl's
// core_algos.py, not from this package's code; the Go expressions merely
// repeat that arithmetic at full precision.

// handBatch: group "a" of four binary outcomes and a group "b" of one.
// Row 3 starts inside a tool output (mask 0); the Mask rows are ragged.
func handBatch() Input {
	return Input{
		Scores: []float64{1, 0, 0, 1, 3},
		Groups: []string{"a", "a", "a", "a", "b"},
		Mask:   [][]float32{{1, 1, 0}, {1}, {1, 1}, {0, 1}, {1, 1, 1}},
	}
}

// spread writes per-trajectory advantages over handBatch's mask.
func spread(a []float64) [][]float64 {
	mask := handBatch().Mask
	rows := make([][]float64, len(mask))
	for i, row := range mask {
		rows[i] = make([]float64, len(row))
		for t, m := range row {
			rows[i][t] = float64(m) * a[i]
		}
	}
	return rows
}

func TestEstimatorsHandDerived(t *testing.T) {
	// grpo, group a: mean = (1+0+0+1)/4 = 0.5; unbiased variance =
	// 4·0.5²/3 = 1/3, std = sqrt(1/3) ≈ 0.57735; A = ±0.5/(sqrt(1/3)+1e-6)
	// ≈ ±0.866024. Group b has one member: mean 0, std 1, so
	// A = 3/(1+1e-6).
	p := 0.5 / (math.Sqrt(1.0/3) + 1e-6)
	grpoWant := spread([]float64{p, -p, -p, p, 3 / (1 + 1e-6)})

	// Without std normalisation (grpo with NormByStd=false, and drgrpo
	// always): A = r − mean = ±0.5; the singleton keeps 3 − 0 = 3.
	drWant := spread([]float64{0.5, -0.5, -0.5, 0.5, 3})

	// rloo, group a (n = 4): A = r·4/3 − 0.5·4/3, i.e. 1 − (0+0+1)/3 = 2/3
	// for a 1 and 0 − (1+0+1)/3 = −2/3 for a 0; the singleton keeps 3.
	rlooWant := spread([]float64{2.0 / 3, -2.0 / 3, -2.0 / 3, 2.0 / 3, 3})

	// reinforce_plus_plus_baseline: a = r − mean_g = (.5, −.5, −.5, .5, 3)
	// (the singleton's mean is 0). Mask-1 tokens per row: 2, 1, 2, 1, 3,
	// N = 9. Token mean μ = (2·.5 − .5 − 2·.5 + .5 + 3·3)/9 = 9/9 = 1.
	// Deviations: −.5 on 3 tokens, −1.5 on 3, 2 on 3; Σd² = 3(.25+2.25+4)
	// = 19.5; Bessel variance = 19.5/8 = 2.4375; A = (a − 1)/sqrt(2.4375+1e-8).
	inv := 1 / math.Sqrt(19.5/8+1e-8)
	rppbWant := spread([]float64{-0.5 * inv, -1.5 * inv, -1.5 * inv, -0.5 * inv, 2 * inv})

	// gpg: 3 of the 5 scores are non-zero, α = 5/3. A = α(r − mean_g):
	// ±5/6 in group a, 5/3·3 = 5 for the singleton.
	gpgWant := spread([]float64{5.0 / 6, -5.0 / 6, -5.0 / 6, 5.0 / 6, 5})

	tests := []struct {
		name Estimator
		cfg  Config
		want [][]float64
	}{
		{GRPO, Config{}, grpoWant},
		{GRPO, Config{NormByStd: new(true)}, grpoWant},
		{GRPO, Config{NormByStd: new(false)}, drWant},
		{DrGRPO, Config{}, drWant},
		{DrGRPO, Config{NormByStd: new(true)}, drWant},
		{RLOO, Config{}, rlooWant},
		{ReinforcePlusPlusBaseline, Config{}, rppbWant},
		{GPG, Config{}, gpgWant},
	}
	for _, tc := range tests {
		t.Run(string(tc.name), func(t *testing.T) {
			cfg := tc.cfg
			cfg.Estimator = tc.name
			out, err := Compute(cfg, handBatch())
			require.NoError(t, err)
			assertRowsClose(t, "Advantages", tc.want, out.Advantages)
			// Outcome estimators return (scores, scores) in verl.
			assertRowsClose(t, "Returns", tc.want, out.Returns)
		})
	}
}

func TestOPOLengthWeightedBaseline(t *testing.T) {
	in := handBatch()
	in.Mask[0] = []float32{1, 1, 1} // row 0 now has 3 mask-1 tokens
	// Group a lengths l = (3, 1, 2, 1), scores (1, 0, 0, 1):
	// b = Σ l·r / Σ l = (3 + 1)/(3+1+2+1) = 4/7, not the plain mean 0.5.
	// A = r − 4/7: 3/7 for a 1, −4/7 for a 0. The singleton's baseline is 0.
	want := [][]float64{
		{3.0 / 7, 3.0 / 7, 3.0 / 7}, {-4.0 / 7}, {-4.0 / 7, -4.0 / 7}, {0, 3.0 / 7}, {3, 3, 3},
	}
	out, err := Compute(Config{Estimator: OPO}, in)
	require.NoError(t, err)
	assertRowsClose(t, "Advantages", want, out.Advantages)
	assertRowsClose(t, "Returns", want, out.Returns)
}

func TestGRPOPassK(t *testing.T) {
	in := Input{
		Scores: []float64{0.2, 0.9, 0.5, 1, 1},
		Groups: []string{"a", "a", "a", "b", "b"},
		Mask:   [][]float32{{1}, {1, 0, 1}, {1}, {1, 1}, {1}},
	}
	// Group a: the best is row 1 (0.9), the runner-up 0.5: r_max − r_2 = 0.4.
	// Mean m = 1.6/3; unbiased std s = sqrt(Σ(r−m)²/2). With NormByStd the
	// advantage is 0.4/(s+1e-6) ≈ 1.13899, without it 0.4. Group b is a
	// tie (1, 1): r_max − r_2 = 0, so nobody in it gets an advantage.
	m := 1.6 / 3
	s := math.Sqrt((sq(0.2-m) + sq(0.9-m) + sq(0.5-m)) / 2)
	for _, tc := range []struct {
		cfg Config
		a   float64
	}{
		{Config{}, 0.4 / (s + 1e-6)},
		{Config{NormByStd: new(false)}, 0.4},
	} {
		cfg := tc.cfg
		cfg.Estimator = GRPOPassK
		out, err := Compute(cfg, in)
		require.NoError(t, err)
		want := [][]float64{{0}, {tc.a, 0, tc.a}, {0}, {0, 0}, {0}}
		assertRowsClose(t, "Advantages", want, out.Advantages)
		assertRowsClose(t, "Returns", want, out.Returns)
	}
}

func sq(x float64) float64 { return x * x }

func TestReinforcePlusPlusMultiTurn(t *testing.T) {
	// Row 0 is two turns with a tool output (t = 2, 3) between them; its
	// score 1 sits on the last mask-1 token (t = 5). γ = 0.5. The 5 in
	// TokenRewards lies on a tool-output token and is ignored.
	// Reverse scan of row 0: G5 = 1; G4 = 0 + .5·1 = .5; t = 3, 2 carry .5;
	// G1 = .5·.5 = .25; G0 = .125. Row 1 (score 0): G = 0, 0.
	// Masked returns: .125, .25, .5, 1, 0, 0 → N = 6, μ = 1.875/6 = .3125.
	// Deviations −.1875, −.0625, .1875, .6875, −.3125, −.3125; Σd² = .7421875;
	// variance .7421875/5 = .1484375.
	in := Input{
		Scores:       []float64{1, 0},
		Mask:         [][]float32{{1, 1, 0, 0, 1, 1}, {1, 1}},
		TokenRewards: [][]float32{{0, 0, 5, 0, 0, 0}, {0, 0}},
	}
	inv := 1 / math.Sqrt(0.1484375+1e-8)
	z := func(g float64) float64 { return (g - 0.3125) * inv }
	out, err := Compute(Config{Estimator: ReinforcePlusPlus, Gamma: new(0.5)}, in)
	require.NoError(t, err)
	assertRowsClose(t, "Advantages", [][]float64{
		{z(.125), z(.25), 0, 0, z(.5), z(1)}, {z(0), z(0)},
	}, out.Advantages)
	assertRowsClose(t, "Returns", [][]float64{{.125, .25, .5, .5, .5, 1}, {0, 0}}, out.Returns)

	// γ = 1 (the default): every token of row 0 has return 1, row 1 has 0;
	// μ = 4/6, deviations 1/3 (×4) and −2/3 (×2): Σd² = 4/9 + 8/9 = 4/3,
	// variance (4/3)/5 = 4/15.
	out, err = Compute(Config{Estimator: ReinforcePlusPlus}, in)
	require.NoError(t, err)
	inv1 := 1 / math.Sqrt(4.0/15+1e-8)
	hi, lo := (1.0/3)*inv1, (-2.0/3)*inv1
	assertRowsClose(t, "Advantages", [][]float64{{hi, hi, 0, 0, hi, hi}, {lo, lo}}, out.Advantages)
}

func TestReMax(t *testing.T) {
	// Row 0: score 2 on its last mask-1 token (t = 3), token rewards .1 at
	// t = 0 and 7 on the tool-output token t = 2 (ignored: verl multiplies
	// the rewards by the mask). Reward-to-go G = (2.1, 2, 2, 2); baseline
	// 0.5, so A = G − .5 on mask-1 tokens: (1.6, 1.5, 0, 1.5).
	// Row 1: score 0, no token rewards: G = (0, 0), A = −.5 (baseline .5).
	in := Input{
		Scores:         []float64{2, 0},
		Mask:           [][]float32{{1, 1, 0, 1}, {1, 1}},
		TokenRewards:   [][]float32{{0.1, 0, 7, 0}, {0, 0}},
		BaselineScores: []float64{0.5, 0.5},
	}
	out, err := Compute(Config{Estimator: ReMax}, in)
	require.NoError(t, err)
	assertRowsClose(t, "Advantages", [][]float64{{1.6, 1.5, 0, 1.5}, {-0.5, -0.5}}, out.Advantages)
	assertRowsClose(t, "Returns", [][]float64{{2.1, 2, 2, 2}, {0, 0}}, out.Returns)
}

func TestGAE(t *testing.T) {
	// γ = .9, λ = .8, γλ = .72. Row 0: mask (1, 0, 1), values (.5, 9, .25),
	// score 1 on t = 2. Reverse scan:
	//   t=2: δ = 1 + .9·0 − .25 = .75; Â = .75; V_next = .25; return 1.
	//   t=1: mask 0, carries Â = .75 (its value 9 is skipped); return
	//        .75 + 9 = 9.75.
	//   t=0: δ = 0 + .9·.25 − .5 = −.275; Â = −.275 + .72·.75 = .265;
	//        return .265 + .5 = .765.
	// Row 1: mask (1, 1), values 0, score 0: Â = 0, 0; returns 0, 0.
	// Whitening over the mask-1 Â (.265, .75, 0, 0): μ = 1.015/4 = .25375;
	// Σd² = .01125² + .49625² + 2·.25375² = .37516875; variance /3.
	in := Input{
		Scores: []float64{1, 0},
		Mask:   [][]float32{{1, 0, 1}, {1, 1}},
		Values: [][]float32{{0.5, 9, 0.25}, {0, 0}},
	}
	inv := 1 / math.Sqrt(0.37516875/3+1e-8)
	z := func(a float64) float64 { return (a - 0.25375) * inv }
	out, err := Compute(Config{Estimator: GAE, Gamma: new(0.9), Lambda: new(0.8)}, in)
	require.NoError(t, err)
	assertRowsClose(t, "Advantages", [][]float64{{z(.265), 0, z(.75)}, {z(0), z(0)}}, out.Advantages)
	assertRowsClose(t, "Returns", [][]float64{{.765, 9.75, 1}, {0, 0}}, out.Returns)
}

func TestGAEMonteCarloLimit(t *testing.T) {
	// With γ = λ = 1 and no mask-0 token, Â_t = Σ_{s≥t} r_s − V_t (the
	// value terms telescope), so returns = Â + V are the plain reward-to-go:
	// rewards (.5, 0, 2 + 1) → returns (3.5, 3, 3), whatever the values.
	in := Input{
		Scores:       []float64{1},
		Mask:         [][]float32{{1, 1, 1}},
		TokenRewards: [][]float32{{0.5, 0, 2}},
		Values:       [][]float32{{0.3, -1.25, 4}},
	}
	out, err := Compute(Config{Estimator: GAE}, in)
	require.NoError(t, err)
	assertRowsClose(t, "Returns", [][]float64{{3.5, 3, 3}}, out.Returns)
}

func TestAdvantagesZeroWhereMaskZero(t *testing.T) {
	in := Input{
		Scores:         []float64{1, 0, 2, 0.5, 1, 0},
		Groups:         []string{"p", "p", "p", "q", "q", "q"},
		Mask:           [][]float32{{1, 0, 0, 1}, {0, 1, 1}, {1, 1, 0}, {1, 0, 1, 0}, {0, 1}, {1, 1, 1, 0}},
		TokenRewards:   [][]float32{{.1, .2, .3, .4}, {.5, .6, .7}, {.8, .9, 1}, {1, 1, 1, 1}, {2, 2}, {3, 3, 3, 3}},
		Values:         [][]float32{{1, 2, 3, 4}, {5, 6, 7}, {8, 9, 1}, {2, 3, 4, 5}, {6, 7}, {8, 9, 1, 2}},
		BaselineScores: []float64{.5, .5, .5, 1, 1, 1},
	}
	for _, name := range NewRegistry().Names() {
		out, err := Compute(Config{Estimator: name, Gamma: new(0.95), Lambda: new(0.9)}, in)
		require.NoError(t, err, name)
		for i, row := range in.Mask {
			for tok, m := range row {
				if m == 0 {
					assert.Zero(t, out.Advantages[i][tok], "%s: Advantages[%d][%d]", name, i, tok)
				}
			}
		}
	}
}

func TestZeroLengthRows(t *testing.T) {
	// A trajectory with an empty response still counts in its group:
	// scores (1, 0) → mean .5, std sqrt(.5); the empty row gets an empty
	// output row, the other A = −.5/(sqrt(.5)+1e-6) on its one token.
	in := Input{Scores: []float64{1, 0}, Groups: []string{"g", "g"}, Mask: [][]float32{{}, {1}}}
	out, err := Compute(Config{Estimator: GRPO}, in)
	require.NoError(t, err)
	assertRowsClose(t, "Advantages", [][]float64{{}, {-0.5 / (math.Sqrt(0.5) + 1e-6)}}, out.Advantages)
}

func TestOutputRowsDoNotAlias(t *testing.T) {
	out, err := Compute(Config{Estimator: GRPO}, handBatch())
	require.NoError(t, err)
	// Appending to one row must not overwrite the next (capped capacity),
	// and Advantages and Returns must not share memory.
	_ = append(out.Advantages[0], 42)
	assert.NotEqual(t, float32(42), out.Advantages[1][0])
	out.Returns[4][0] = 7
	assert.NotEqual(t, float32(7), out.Advantages[4][0])
}

func TestComputeLeavesInputUnchanged(t *testing.T) {
	in := fullBatch()
	in.Scores = []float64{1, 0.25, -2}
	in.TokenRewards[1][2] = 0.5
	in.Values[0] = []float32{0.3, -0.7}
	before := fullBatch()
	before.Scores = []float64{1, 0.25, -2}
	before.TokenRewards[1][2] = 0.5
	before.Values[0] = []float32{0.3, -0.7}
	for _, name := range NewRegistry().Names() {
		if name == GRPOPassK {
			in.Groups[2], before.Groups[2] = "a", "a" // pass@k needs groups of two or more
		}
		_, err := Compute(Config{Estimator: name}, in)
		require.NoError(t, err, name)
		require.Equal(t, before, in, name)
	}
}

// Scores far beyond any real reward must not be silently whitened to 0:
// with deviations of 1e200 the sum of squares (1e400) overflows float64,
// but the std is still sqrt(2)·1e200. Group "a" = (1e200, −1e200): mean 0,
// unbiased std sqrt((1e400 + 1e400)/1) = sqrt(2)·1e200, so grpo gives
// ±1e200/(sqrt(2)·1e200 + 1e-6) = ±1/sqrt(2); grpo_passk gives the best
// trajectory (r_max − r_2)/std = 2e200/(sqrt(2)·1e200) = sqrt(2).
// reinforce_plus_plus_baseline: a = ±1e200 on one token each, μ = 0,
// Bessel variance 2e400/1, A = ±1e200/(sqrt(2)·1e200) = ±1/sqrt(2).
func TestHugeScoresKeepTheirStd(t *testing.T) {
	in := Input{Scores: []float64{1e200, -1e200}, Groups: []string{"a", "a"}, Mask: [][]float32{{1}, {1}}}
	h := 1 / math.Sqrt2
	for name, want := range map[Estimator][][]float64{
		GRPO:                      {{h}, {-h}},
		GRPOPassK:                 {{math.Sqrt2}, {0}},
		ReinforcePlusPlusBaseline: {{h}, {-h}},
	} {
		out, err := Compute(Config{Estimator: name}, in)
		require.NoError(t, err, name)
		assertRowsClose(t, string(name), want, out.Advantages)
	}
}
