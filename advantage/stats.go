package advantage

import (
	"math"

	"gonum.org/v1/gonum/stat"
)

// Means and standard deviations are gonum's (gonum.org/v1/gonum/stat):
// stat.Mean, and stat.MeanStdDev / stat.MeanVariance, whose variance is the
// Bessel-corrected Σ w·(x − μ)² / (Σ w − 1), the estimator of torch.std
// and of verl's masked_whiten. Scores are float64 and may be as large as
// the float64 range allows, so the outcome estimators hand stat the
// values divided by a power of two near their largest magnitude (scaled)
// and multiply the results back: a sum of squares of deviations beyond
// about 1e154 would otherwise overflow to +Inf and silently turn every
// advantage of a group into 0. Dividing by a power of two is exact, and
// every operation of stat commutes with it, so for values that do not
// overflow the results are bit for bit those of calling stat directly.

// scaled returns xs divided by a power of two, and that power: the one
// that brings the largest |x| of weight ≠ 0 into [1, 2) (weights nil: all
// count), or 1 when that largest |x| is 0 or not finite. Values far below
// the largest may lose bits or become 0; they are below its rounding error
// in any sum with it.
func scaled(xs, weights []float64) (ys []float64, scale float64) {
	var m float64
	for i, x := range xs {
		if weights == nil || weights[i] != 0 {
			m = max(m, math.Abs(x))
		}
	}
	scale = 1
	if m != 0 && !math.IsInf(m, 0) && !math.IsNaN(m) {
		_, exp := math.Frexp(m) // m = f·2^exp, f in [0.5, 1)
		scale = math.Ldexp(1, exp-1)
	}
	ys = make([]float64, len(xs))
	for i, x := range xs {
		ys[i] = x / scale
	}
	return ys, scale
}

// scaledMean returns stat.Mean(xs, weights) computed on scaled values, so that
// the sum cannot overflow.
func scaledMean(xs, weights []float64) float64 {
	ys, scale := scaled(xs, weights)
	return stat.Mean(ys, weights) * scale
}

// scaledMeanStd returns stat.MeanStdDev(xs, weights), the mean and the
// Bessel-corrected standard deviation (torch.std; with weights, Σ w − 1 in
// the denominator), computed on scaled values so that the sum of squares
// cannot overflow. One value of weight 1 has std NaN (0/0), as torch.std.
func scaledMeanStd(xs, weights []float64) (mu, std float64) {
	ys, scale := scaled(xs, weights)
	mu, std = stat.MeanStdDev(ys, weights)
	return mu * scale, std * scale
}

// groupValues returns the values of s group by group, each in batch order.
func groupValues(s []float64, g grouping) [][]float64 {
	vals := make([][]float64, len(g.size))
	for k, n := range g.size {
		vals[k] = make([]float64, 0, n)
	}
	for i, x := range s {
		vals[g.of[i]] = append(vals[g.of[i]], x)
	}
	return vals
}
