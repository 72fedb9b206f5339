package plot

import (
	"math"
	"strconv"

	gplot "gonum.org/v1/plot"
)

// flatSpan is the relative span under which a value axis counts as flat:
// its values agree to about 9 significant digits (float32 arithmetic
// rounds at 7), and marks that close would need labels of more digits
// than a float64 holds to tell them apart.
const flatSpan = 1e-9

// padFlat widens a flat axis (see flatSpan), whose series is constant, to
// ±10 % of its value (±1 around 0), so that the line lies in the middle
// of the panel under marks of a few digits: gonum would widen it by ±1
// whatever the scale, which hides a value of 1e-9 at 0.
func padFlat(a *gplot.Axis) {
	lo, hi := a.Min, a.Max
	scale := math.Max(math.Abs(lo), math.Abs(hi))
	if hi-lo > flatSpan*scale {
		return
	}
	mid := lo + (hi-lo)/2
	pad := 0.1 * math.Abs(mid)
	if pad == 0 {
		pad = 1
	}
	a.Min, a.Max = mid-pad, mid+pad
}

// stepTicks marks the step axis at whole steps only, labelled as
// integers: gonum's marks for steps 1 to 2 are 1, 1.5 and 2.
type stepTicks struct{}

// Ticks implements gonum's plot.Ticker.
func (stepTicks) Ticks(lo, hi float64) []gplot.Tick {
	if !(hi > lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil
	}
	var ticks []gplot.Tick
	labelled := 0
	for _, t := range (gplot.DefaultTicks{}).Ticks(lo, hi) {
		if t.Value != math.Trunc(t.Value) {
			continue
		}
		if t.Label != "" {
			t.Label = strconv.FormatFloat(t.Value, 'f', 0, 64)
			labelled++
		}
		ticks = append(ticks, t)
	}
	first, last := math.Ceil(lo), math.Floor(hi)
	if labelled >= 2 || last-first > 10 {
		return ticks
	}
	// A range of a few steps, where gonum's marks fall between them:
	// every step.
	ticks = ticks[:0]
	for v := first; v <= last; v++ {
		ticks = append(ticks, gplot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
	}
	return ticks
}

// valueTicks are gonum's marks for a value axis, relabelled where
// gonum's labels fail to tell them apart: gonum writes at most 6
// significant digits for marks less than 0.1 apart, so marks 1e-7 apart
// around 11.9184 all read "11.9184". The relabelled marks carry the
// fewest significant digits that tell them apart and each stand for its
// mark's value to within a millionth of the marks' spacing.
type valueTicks struct{}

// Ticks implements gonum's plot.Ticker.
func (valueTicks) Ticks(lo, hi float64) []gplot.Tick {
	if !(hi > lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil
	}
	ticks := (gplot.DefaultTicks{}).Ticks(lo, hi)
	var major []int
	for i, t := range ticks {
		if t.Label != "" {
			major = append(major, i)
		}
	}
	if len(major) < 2 {
		return ticks
	}
	spacing := ticks[major[1]].Value - ticks[major[0]].Value
	for _, i := range major {
		if math.Abs(ticks[i].Value) < 1e-9*spacing {
			ticks[i].Value = 0 // a zero that the arithmetic of the marks missed
		}
	}
	labels := make([]string, len(major))
	for i, m := range major {
		labels[i] = ticks[m].Label
	}
	if faithful(ticks, major, labels, spacing) {
		return ticks
	}
	for prec := 1; prec <= 17; prec++ {
		for i, m := range major {
			labels[i] = strconv.FormatFloat(ticks[m].Value, 'g', prec, 64)
		}
		if faithful(ticks, major, labels, spacing) {
			break
		}
	}
	for i, m := range major {
		ticks[m].Label = labels[i]
	}
	return ticks
}

// faithful reports whether labels, those of the marks ticks[major],
// differ from each other and each read as its mark's value to within a
// millionth of spacing.
func faithful(ticks []gplot.Tick, major []int, labels []string, spacing float64) bool {
	seen := make(map[string]bool, len(labels))
	for i, m := range major {
		if seen[labels[i]] {
			return false
		}
		seen[labels[i]] = true
		v, err := strconv.ParseFloat(labels[i], 64)
		if err != nil || math.Abs(v-ticks[m].Value) > 1e-6*spacing {
			return false
		}
	}
	return true
}
