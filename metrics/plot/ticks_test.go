package plot

import (
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gplot "gonum.org/v1/plot"

	"github.com/agentrl/agentrl/metrics"
)

// labels returns the labelled marks of ticks, value and label.
func labels(ticks []gplot.Tick) ([]float64, []string) {
	var vs []float64
	var ls []string
	for _, t := range ticks {
		if t.Label != "" {
			vs = append(vs, t.Value)
			ls = append(ls, t.Label)
		}
	}
	return vs, ls
}

// requireFaithful checks that the labels of ticks differ and each reads
// as its mark's value to within a millionth of the marks' spacing.
func requireFaithful(t *testing.T, ticks []gplot.Tick) {
	t.Helper()
	vs, ls := labels(ticks)
	require.GreaterOrEqual(t, len(ls), 2, "%v", ticks)
	spacing := vs[1] - vs[0]
	seen := map[string]bool{}
	for i, l := range ls {
		assert.False(t, seen[l], "label %q twice in %q", l, ls)
		seen[l] = true
		v, err := strconv.ParseFloat(l, 64)
		require.NoError(t, err)
		assert.InDelta(t, vs[i], v, 1e-6*spacing, "label %q of %v", l, vs[i])
	}
}

// TestStepTicks: the step axis is marked at whole steps only; gonum's own
// marks for steps 1 to 2 include 1.5.
func TestStepTicks(t *testing.T) {
	_, def := labels(gplot.DefaultTicks{}.Ticks(1, 2))
	assert.Contains(t, def, "1.5", "gonum's marks, which this ticker replaces")

	for _, c := range []struct {
		lo, hi float64
		want   []string // the labels; nil: only check that every mark is whole
	}{
		{1, 2, []string{"1", "2"}},
		{0, 2, []string{"0", "1", "2"}},
		{0, 1, []string{"0", "1"}},
		{2, 5, []string{"2", "3", "4", "5"}},
		{0, 60, nil},
		{1, 3000, nil},
	} {
		ticks := stepTicks{}.Ticks(c.lo, c.hi)
		for _, tk := range ticks {
			assert.Equal(t, math.Trunc(tk.Value), tk.Value, "%v–%v: mark %v", c.lo, c.hi, tk.Value)
			if tk.Label != "" {
				assert.Equal(t, strconv.Itoa(int(tk.Value)), tk.Label)
			}
		}
		_, ls := labels(ticks)
		if c.want != nil {
			assert.Equal(t, c.want, ls, "%v–%v", c.lo, c.hi)
		} else {
			assert.GreaterOrEqual(t, len(ls), 2, "%v–%v", c.lo, c.hi)
		}
	}
	assert.Nil(t, stepTicks{}.Ticks(1, 1), "no range, no marks (gonum's panics)")
}

// TestValueTicks: marks 1e-6 apart around 11.9184 — an entropy that
// barely moves — get labels that tell them apart, where gonum's all read
// "11.9184"; so do marks of billions 10 million apart, which gonum
// writes with one significant digit ("2e+09" thrice); ordinary ranges
// keep gonum's labels.
func TestValueTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		broken bool // gonum's labels repeat
	}{
		{11.9184121, 11.9184163, true},
		{1.5e9, 1.56e9, true},
		{1.2e7, 2.9e7, false},
		{0, 1, false},
		{-0.35, 0.8, false},
		{300, 410, false},
		{1e-9, 3e-9, false},
	} {
		def := gplot.DefaultTicks{}.Ticks(c.lo, c.hi)
		_, dl := labels(def)
		distinct := map[string]bool{}
		for _, l := range dl {
			distinct[l] = true
		}
		assert.Equal(t, c.broken, len(distinct) < len(dl), "%v–%v: gonum's labels %q", c.lo, c.hi, dl)

		ticks := valueTicks{}.Ticks(c.lo, c.hi)
		requireFaithful(t, ticks)
		if !c.broken {
			assert.Equal(t, def, ticks, "%v–%v: gonum's marks kept", c.lo, c.hi)
		}
	}
	_, ls := labels(valueTicks{}.Ticks(11.9184121, 11.9184163))
	assert.Equal(t, []string{"11.918413", "11.918414", "11.918415", "11.918416"}, ls)
	assert.Nil(t, valueTicks{}.Ticks(2, 2))
}

// TestPanelAxes: the entropy panel — two steps of an entropy
// that moves in the seventh digit — and flat series get whole steps and
// distinct, faithful value labels; a flat series lies in the middle of
// its panel, ±10 % around it.
func TestPanelAxes(t *testing.T) {
	for _, c := range []struct {
		name   string
		values []float64
		flat   bool
	}{
		{"entropy in the seventh digit", []float64{11.9184123, 11.9184161}, false},
		{"flat", []float64{11.9184, 11.9184, 11.9184}, true},
		{"flat but for rounding", []float64{11.9184, 11.9184 + 1e-14, 11.9184}, true},
		{"flat and tiny", []float64{1e-9, 1e-9}, true},
		{"flat at zero", []float64{0, 0}, true},
		{"flat and negative", []float64{-2.5, -2.5}, true},
		{"one step", []float64{0.25}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rows []metrics.Row
			for i, v := range c.values {
				rows = append(rows, metrics.Row{Step: i + 1, Values: map[string]float64{"actor/entropy": v}})
			}
			panel := Panel{Title: "Entropy", Keys: []string{"actor/entropy"}}
			series, err := panelSeries(rows, panel)
			require.NoError(t, err)
			p, err := panelPlot(panel.Title, series)
			require.NoError(t, err)
			require.Less(t, p.Y.Min, p.Y.Max)
			requireFaithful(t, p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max))
			if c.flat {
				v := c.values[0]
				pad := 0.1 * math.Abs(v)
				if v == 0 {
					pad = 1
				}
				assert.InDelta(t, v-pad, p.Y.Min, 1e-12*math.Max(1, math.Abs(v)))
				assert.InDelta(t, v+pad, p.Y.Max, 1e-12*math.Max(1, math.Abs(v)))
			}
			xlo, xhi := p.X.Min, p.X.Max
			if xlo == xhi { // gonum widens a single step by ±1 when it draws
				xlo, xhi = xlo-1, xhi+1
			}
			for _, tk := range p.X.Tick.Marker.Ticks(xlo, xhi) {
				assert.Equal(t, math.Trunc(tk.Value), tk.Value, "step mark %v", tk.Value)
			}
		})
	}
}
