package ablation

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Student's t quantiles in closed form, independent of gonum:
//
//   - ν = 2: F(t) = ½ + t/(2√(2+t²)), so with a = 2p−1,
//     t = a·√(2/(1−a²)); at p = 0.975, a = 0.95:
//     t = 0.95·√(2/0.0975) = 4.302652729749463 (scipy's t.ppf prints
//     4.302652729911275, an inversion error of 1.6e-10).
//   - ν = 4: t = 2√(q−1) with q = cos(⅓·arccos √α)/√α, α = 4p(1−p)
//     (Hill 1970; Wikipedia, "Student's t-distribution", quantiles for
//     ν = 4); at p = 0.975, α = 0.0975: t = 2.7764451051977934 (tables:
//     2.776445).
var (
	t975nu2 = 0.95 * math.Sqrt(2/0.0975)
	t975nu4 = func() float64 {
		sa := math.Sqrt(0.0975)
		return 2 * math.Sqrt(math.Cos(math.Acos(sa)/3)/sa-1)
	}()
)

func res(variant string, seed uint64, final map[string]float64) Result {
	return Result{Variant: variant, Seed: seed, Final: final}
}

func TestSummarize(t *testing.T) {
	results := []Result{
		res("b", 1, map[string]float64{"avg@8": 0.6}),
		res("a", 1, map[string]float64{"avg@8": 1}),
		res("b", 2, map[string]float64{"avg@8": 0.7}),
		res("c", 1, map[string]float64{"avg@8": 1}),
		res("b", 3, map[string]float64{"avg@8": 0.8}),
		res("c", 2, map[string]float64{"avg@8": 2}),
		res("c", 3, map[string]float64{"avg@8": 3}),
		res("c", 4, map[string]float64{"avg@8": 4}),
		res("c", 5, map[string]float64{"avg@8": 5}),
	}
	rows, err := Summarize(results, "avg@8")
	require.NoError(t, err)
	require.Len(t, rows, 3)

	// b: {0.6, 0.7, 0.8}: mean 0.7; deviations −0.1, 0, 0.1, so
	// s² = 0.02/2 = 0.01 and s = 0.1; half-width
	// t(0.975, 2)·s/√3 = 4.302652729749463·0.1/1.7320508 = 0.248413771175033.
	b := rows[0]
	assert.Equal(t, "b", b.Variant, "rows in order of first appearance")
	assert.Equal(t, 3, b.N)
	assert.Equal(t, []float64{0.6, 0.7, 0.8}, b.Values)
	assert.InDelta(t, 0.7, b.Mean, 1e-15)
	assert.InDelta(t, t975nu2*0.1/math.Sqrt(3), b.HalfWidth(), 1e-12)
	assert.InDelta(t, 0.248413771175033, b.HalfWidth(), 1e-12)
	assert.InDelta(t, 0.7-0.248413771175033, b.Lo, 1e-12)
	assert.InDelta(t, 0.7+0.248413771175033, b.Hi, 1e-12)

	// a: one run, the interval is the point.
	assert.Equal(t, Row{Variant: "a", N: 1, Mean: 1, Lo: 1, Hi: 1, Values: []float64{1}}, rows[1])

	// c: {1, …, 5}: mean 3; s² = (4+1+0+1+4)/4 = 2.5; half-width
	// t(0.975, 4)·√2.5/√5 = 2.7764451051977934·0.70710678 = 1.963243161477557.
	c := rows[2]
	assert.Equal(t, 5, c.N)
	assert.InDelta(t, 3, c.Mean, 1e-15)
	assert.InDelta(t, t975nu4*math.Sqrt(2.5)/math.Sqrt(5), c.HalfWidth(), 1e-12)
	assert.InDelta(t, 1.963243161477557, c.HalfWidth(), 1e-12)
}

func TestSummarizeRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		results []Result
		metric  string
		want    string
	}{
		{"no results", nil, "avg@8", "no results"},
		{"no metric name", []Result{res("a", 1, map[string]float64{"x": 1})}, "", "empty metric name"},
		{"missing metric", []Result{res("a", 1, map[string]float64{"x": 1}), res("a", 2, map[string]float64{"y": 1})},
			"x", `variant "a", seed 2 has no "x" (has [y])`},
		{"NaN", []Result{res("a", 3, map[string]float64{"x": math.NaN()})}, "x", `variant "a", seed 3: x = NaN`},
		{"Inf", []Result{res("a", 3, map[string]float64{"x": math.Inf(1)})}, "x", "+Inf, want a finite value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Summarize(tc.results, tc.metric)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestWriteTable(t *testing.T) {
	rows, err := Summarize([]Result{
		res("grpo-tcr", 1, map[string]float64{"avg@8": 0.6}),
		res("grpo-tcr", 2, map[string]float64{"avg@8": 0.7}),
		res("grpo-tcr", 3, map[string]float64{"avg@8": 0.8}),
		res("no-clip", 1, map[string]float64{"avg@8": 0.5}),
	}, "avg@8")
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, rows, "avg@8"))
	// 0.7 ± 0.248414 (above) to 4 decimals; columns two spaces apart.
	assert.Equal(t, ""+
		"variant   avg@8: mean ± 95% CI                      [lo, hi]          (n)\n"+
		"grpo-tcr  0.7000 ± 0.2484                           [0.4516, 0.9484]  (3)\n"+
		"no-clip   0.5000 (one seed: an interval needs two)  -                 (1)\n", b.String())

	assert.Error(t, WriteTable(&b, rows, ""))
	assert.ErrorIs(t, WriteTable(failWriter{}, rows, "avg@8"), errWrite)
}

var errWrite = errors.New("disk full")

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

// Two significant digits of the smallest non-zero mean or half-width,
// between 4 and 8 decimals: a value in [10^−k, 10^−k+1) needs k+1.
func TestDecimals(t *testing.T) {
	for _, tc := range []struct {
		mean, half float64
		want       int
	}{
		{0.7, 0.2, 4},
		{0, 0, 4},
		{0.0012, 0, 4},  // 10^−3 ≤ 0.0012 < 10^−2: 4 decimals, "0.0012"
		{0.00012, 0, 5}, // "0.00012"
		{0.5, 0.00003, 6},
		{1e-12, 0, 8}, // capped
		{250, 12, 4},
	} {
		rows := []Row{{Mean: tc.mean, Lo: tc.mean - tc.half, Hi: tc.mean + tc.half}}
		assert.Equal(t, tc.want, decimals(rows), "mean %v, half-width %v", tc.mean, tc.half)
	}
}
