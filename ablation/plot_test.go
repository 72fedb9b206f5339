package ablation

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// curveResults are two variants × two seeds with a training curve at
// every step and a held-out value at the first and last.
func curveResults() []Result {
	var out []Result
	for vi, v := range []string{"grpo-tcr", "clip-sym"} {
		for _, seed := range []uint64{1, 2} {
			r := Result{Variant: v, Seed: seed, Final: map[string]float64{
				"avg@8": 0.5 + 0.1*float64(vi) + 0.01*float64(seed), "tool_calls": 1 + 0.1*float64(seed),
			}}
			for step := range 6 {
				vals := map[string]float64{"acc": float64(step) * 0.1 * float64(seed)}
				if step == 0 || step == 5 {
					vals["avg@8"] = 0.4 + 0.05*float64(step)
				}
				if step == 3 {
					vals["acc"] = math.NaN() // left out
				}
				r.Curve = append(r.Curve, Point{Step: step, Values: vals})
			}
			out = append(out, r)
		}
	}
	return out
}

// decodePNG checks that path holds a PNG and returns its size.
func decodePNG(t *testing.T, path string) (w, h int) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	return img.Bounds().Dx(), img.Bounds().Dy()
}

func TestPlotCurves(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		curves []string
		w, h   int
	}{
		{"one panel", []string{"acc"}, plotWidth * 3 / 4, plotRowHeight},
		{"two panels a row", []string{"acc", "avg@8"}, plotWidth, plotRowHeight},
		{"three panels, two rows", []string{"acc", "avg@8", "acc"}, plotWidth, 2 * plotRowHeight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".png")
			require.NoError(t, PlotCurves(path, curveResults(), tc.curves...))
			w, h := decodePNG(t, path)
			assert.Equal(t, tc.w, w)
			assert.Equal(t, tc.h, h)
		})
	}
	// One seed of one variant is enough to draw.
	require.NoError(t, PlotCurves(filepath.Join(dir, "single.png"), curveResults()[:1], "acc"))
}

func TestPlotCurvesRejects(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		path    string
		results []Result
		curves  []string
		want    string
	}{
		{"empty path", "", curveResults(), []string{"acc"}, "empty path"},
		{"no results", filepath.Join(dir, "a.png"), nil, []string{"acc"}, "no results"},
		{"no curves", filepath.Join(dir, "a.png"), curveResults(), nil, "no curve names"},
		{"unknown curve", filepath.Join(dir, "a.png"), curveResults(), []string{"acc", "reward"}, `curve "reward": no result has a finite value of it`},
		{"missing folder", filepath.Join(dir, "missing", "a.png"), curveResults(), []string{"acc"}, "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := PlotCurves(tc.path, tc.results, tc.curves...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := os.Stat(filepath.Join(dir, "a.png"))
	assert.True(t, os.IsNotExist(err), "nothing written on error")
}

func TestPlotScatter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "scatter.png")
	require.NoError(t, PlotScatter(path, curveResults(), "tool_calls", "avg@8"))
	w, h := decodePNG(t, path)
	assert.Equal(t, plotWidth*3/4, w)
	assert.Equal(t, plotRowHeight, h)

	for _, tc := range []struct {
		name, path, x, y, want string
	}{
		{"empty path", "", "tool_calls", "avg@8", "empty path"},
		{"no x", path, "", "avg@8", "want both"},
		{"unknown metric", path, "tool_calls", "pass@8", `variant "grpo-tcr", seed 1: want finite "tool_calls" and "pass@8"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := PlotScatter(tc.path, curveResults(), tc.x, tc.y)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// The major ticks' labels tell them apart: over [1.092, 1.208] gonum's
// default ticks are 1.10, 1.15, 1.20 (labelled "1.1", "1.1", "1.2" by
// default), which need two decimals; over [0, 120], 0, 50, 100 need none.
func TestExactTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{1.092, 1.208, []string{"1.10", "1.15", "1.20"}},
		{0, 120, []string{"0", "50", "100"}},
	} {
		var labels []string
		for _, tk := range (exactTicks{}).Ticks(tc.lo, tc.hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		assert.Equal(t, tc.want, labels, "[%v, %v]", tc.lo, tc.hi)
	}
}

// A trailing mean over the last 3 finite values of each key: for
// 0, 1, 2, 3, NaN, 5 that is 0, ½, 1, 2, NaN, (2+3+5)/3 = 10/3; a key
// at two points only (0.4 at step 0, 0.8 at step 5) averages those two.
func TestSmooth(t *testing.T) {
	r := Result{Variant: "a", Seed: 1, Final: map[string]float64{"avg@8": 0.8}}
	for step, v := range []float64{0, 1, 2, 3, math.NaN(), 5} {
		vals := map[string]float64{"acc": v}
		switch step {
		case 0:
			vals["avg@8"] = 0.4
		case 5:
			vals["avg@8"] = 0.8
		}
		r.Curve = append(r.Curve, Point{Step: step, Values: vals})
	}
	out, err := Smooth([]Result{r}, 3)
	require.NoError(t, err)
	require.Len(t, out, 1)
	var acc []float64
	for _, pt := range out[0].Curve {
		acc = append(acc, pt.Values["acc"])
	}
	assert.Equal(t, []float64{0, 0.5, 1, 2}, acc[:4])
	assert.True(t, math.IsNaN(acc[4]))
	assert.InDelta(t, 10.0/3, acc[5], 1e-15)
	assert.Equal(t, 0.4, out[0].Curve[0].Values["avg@8"])
	assert.InDelta(t, 0.6, out[0].Curve[5].Values["avg@8"], 1e-15)
	assert.Equal(t, r.Final, out[0].Final)
	assert.Equal(t, 3.0, r.Curve[3].Values["acc"], "the input is not changed")

	same, err := Smooth([]Result{r}, 1)
	require.NoError(t, err)
	assert.Equal(t, 5.0, same[0].Curve[5].Values["acc"])

	_, err = Smooth([]Result{r}, 0)
	assert.EqualError(t, err, "ablation: Smooth: window 0, want ≥ 1")
}
