package advantage

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/stat"
)

// Scaling by a power of two is exact, so where nothing overflows or
// underflows the scaled helpers return stat's results bit for bit.
func TestScaledMatchesStat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, mag := range []float64{1e-100, 1e-3, 1, 7, 1e6, 1e100} {
		for range 50 {
			n := 2 + rng.IntN(40)
			xs, ws := make([]float64, n), make([]float64, n)
			for i := range xs {
				xs[i] = mag * (rng.NormFloat64() + 2)
				ws[i] = float64(rng.IntN(5)) // token counts, some 0
			}
			ws[0] = 1
			ws[1] = 1
			for _, w := range [][]float64{nil, ws} {
				wantMean, wantStd := stat.MeanStdDev(xs, w)
				gotMean, gotStd := scaledMeanStd(xs, w)
				require.Equal(t, wantMean, gotMean, "mean, magnitude %g", mag)
				require.Equal(t, wantStd, gotStd, "std, magnitude %g", mag)
				require.Equal(t, stat.Mean(xs, w), scaledMean(xs, w))
			}
		}
	}
}

// Where stat's sums overflow or underflow, the scaled helpers do not. Values
// worked by hand: (a, −a) has mean 0 and Bessel std sqrt(2a²/1) = √2·a;
// (a, a) has mean a and std 0; (M, M/2) has mean 3M/4 and std
// sqrt(2·(M/4)²) = √2·M/4.
func TestScaledExtremes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		xs, ws        []float64
		mean, std     float64
		statOverflows bool // stat.MeanStdDev alone gives ±Inf or NaN
	}{
		{"squares overflow", []float64{1e200, -1e200}, nil, 0, math.Sqrt2 * 1e200, true},
		{"sum overflows", []float64{1.5e308, 1.5e308}, nil, 1.5e308, 0, true},
		{"largest finite", []float64{math.MaxFloat64, math.MaxFloat64 / 2}, nil, 0.75 * math.MaxFloat64, math.Sqrt2 / 4 * math.MaxFloat64, true},
		{"squares underflow", []float64{1e-200, -1e-200}, nil, 0, math.Sqrt2 * 1e-200, false},
		{"zero-weight outlier ignored", []float64{3, 1e300, 5}, []float64{1, 0, 1}, 4, math.Sqrt2, false},
		{"all zero", []float64{0, 0, 0}, nil, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mean, std := scaledMeanStd(tc.xs, tc.ws)
			assert.InEpsilon(t, 1+tc.mean, 1+mean, 1e-15, "mean")
			if math.IsInf(tc.std, 0) {
				assert.True(t, math.IsInf(std, 1), "std %g", std)
			} else if tc.std == 0 {
				assert.Zero(t, std)
			} else {
				assert.InEpsilon(t, tc.std, std, 1e-15, "std")
			}
			_, statStd := stat.MeanStdDev(tc.xs, tc.ws)
			statMean := stat.Mean(tc.xs, tc.ws)
			bad := math.IsInf(statStd, 0) || math.IsNaN(statStd) || math.IsInf(statMean, 0)
			assert.Equal(t, tc.statOverflows, bad, "stat alone: mean %g std %g", statMean, statStd)
		})
	}
}

// std of √2·MaxFloat64 does not fit in float64: the scaled std is +Inf, as
// the true value is beyond the range, rather than NaN.
func TestScaledStdBeyondRange(t *testing.T) {
	_, std := scaledMeanStd([]float64{math.MaxFloat64, -math.MaxFloat64, math.MaxFloat64, -math.MaxFloat64}, nil)
	assert.True(t, math.IsInf(std, 1), "%g", std)
}

// The group mean of scores near the top of the float64 range is finite:
// (1.5e308 + 1.5e308)/2 without the sum overflowing, so both advantages
// are 0 instead of −Inf (an overflow error). RLOO is left out: its
// formula, r·n/(n−1) − mean·n/(n−1), overflows in the products.
func TestGroupMeanNoOverflow(t *testing.T) {
	in := Input{Scores: []float64{1.5e308, 1.5e308}, Groups: []string{"a", "a"}, Mask: [][]float32{{1}, {1}}}
	for _, name := range []Estimator{GRPO, DrGRPO, GPG, OPO} {
		out, err := Compute(Config{Estimator: name}, in)
		require.NoError(t, err, name)
		assert.Equal(t, [][]float32{{0}, {0}}, out.Advantages, name)
	}
}
