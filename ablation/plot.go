package ablation

import (
	"cmp"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/agentrl/agentrl/internal/atomicfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Image geometry of the plots: the width, the height of one row of
// panels, and the resolution the text sizes are set for.
const (
	plotWidth     = 1200
	plotRowHeight = 380
	plotDPI       = 96
	plotColumns   = 2
)

// PlotCurves draws the results' curves as a PNG at path (written
// atomically), one panel per curve name (a key of the Points' Values),
// two panels a row. In each panel every variant has one colour: a bold
// line through the mean over its seeds at each step (over the seeds that
// have a value there), and each seed's own curve faintly behind it.
// Non-finite values are left out. It is an error when no result has a
// value of one of the curves.
func PlotCurves(path string, results []Result, curves ...string) error {
	if err := checkPlot(path, results); err != nil {
		return fmt.Errorf("ablation: PlotCurves: %w", err)
	}
	if len(curves) == 0 {
		return errors.New("ablation: PlotCurves: no curve names")
	}
	plots := make([]*plot.Plot, len(curves))
	for i, c := range curves {
		p, err := curvePanel(results, c)
		if err != nil {
			return fmt.Errorf("ablation: PlotCurves: curve %q: %w", c, err)
		}
		plots[i] = p
	}
	if err := writePNG(path, plots); err != nil {
		return fmt.Errorf("ablation: PlotCurves: %w", err)
	}
	return nil
}

// PlotScatter draws one point per result at (Final[x], Final[y]) as a
// PNG at path (written atomically), coloured by variant: for example
// tool calls per answer against held-out accuracy. Every result must hold
// finite values of both.
func PlotScatter(path string, results []Result, x, y string) error {
	if err := checkPlot(path, results); err != nil {
		return fmt.Errorf("ablation: PlotScatter: %w", err)
	}
	if x == "" || y == "" {
		return fmt.Errorf("ablation: PlotScatter: metric names %q and %q: want both", x, y)
	}
	p := newPanel(y + " against " + x)
	p.X.Label.Text, p.Y.Label.Text = x, y
	names := variantOrder(results)
	for i, name := range names {
		var xys plotter.XYs
		for _, r := range results {
			if r.Variant != name {
				continue
			}
			xv, okx := r.Final[x]
			yv, oky := r.Final[y]
			if !okx || !oky || !finite(xv) || !finite(yv) {
				return fmt.Errorf("ablation: PlotScatter: variant %q, seed %d: want finite %q and %q, have %v", r.Variant, r.Seed, x, y, finalKeys(r))
			}
			xys = append(xys, plotter.XY{X: xv, Y: yv})
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return fmt.Errorf("ablation: PlotScatter: variant %q: %w", name, err)
		}
		s.Color = plotutil.Color(i)
		s.Shape = plotutil.Shape(i)
		s.Radius = vg.Points(4)
		p.Add(s)
		p.Legend.Add(name, s)
	}
	// Room around the points, so that none sits on a border, and above
	// them for the legend.
	pad := func(a *plot.Axis, top float64) {
		span := a.Max - a.Min
		if span == 0 {
			span = math.Max(math.Abs(a.Max), 1)
		}
		a.Min, a.Max = a.Min-0.08*span, a.Max+(0.08+top)*span
	}
	pad(&p.X, 0)
	pad(&p.Y, 0.07*float64(len(names)))
	if err := writePNG(path, []*plot.Plot{p}); err != nil {
		return fmt.Errorf("ablation: PlotScatter: %w", err)
	}
	return nil
}

func checkPlot(path string, results []Result) error {
	switch {
	case path == "":
		return errors.New("empty path")
	case len(results) == 0:
		return errors.New("no results")
	}
	return nil
}

// curvePanel draws one curve of every variant.
func curvePanel(results []Result, curve string) (*plot.Plot, error) {
	p := newPanel(curve)
	p.X.Label.Text = "step"
	drawn := 0
	for i, name := range variantOrder(results) {
		var seeds []plotter.XYs
		for _, r := range results {
			if r.Variant != name {
				continue
			}
			if xys := series(r, curve); len(xys) > 0 {
				seeds = append(seeds, xys)
			}
		}
		if len(seeds) == 0 {
			continue
		}
		col := plotutil.Color(i)
		if len(seeds) > 1 {
			faint := color.NRGBAModel.Convert(col).(color.NRGBA)
			faint.A = 70
			for _, xys := range seeds {
				l, err := plotter.NewLine(xys)
				if err != nil {
					return nil, err
				}
				l.Color, l.Width = faint, vg.Points(0.7)
				p.Add(l)
			}
		}
		mean := meanSeries(seeds)
		l, pts, err := plotter.NewLinePoints(mean)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = col, vg.Points(2)
		p.Add(l)
		if len(mean) <= 60 { // a sparse curve (a few evaluations) shows its points
			pts.Color, pts.Shape, pts.Radius = col, draw.CircleGlyph{}, vg.Points(2)
			p.Add(pts)
		}
		p.Legend.Add(fmt.Sprintf("%s (%d)", name, len(seeds)), l)
		drawn++
	}
	if drawn == 0 {
		return nil, errors.New("no result has a finite value of it")
	}
	// Headroom above the data for the legend, which sits top left.
	span := p.Y.Max - p.Y.Min
	if span == 0 {
		span = math.Max(math.Abs(p.Y.Max), 1)
	}
	p.Y.Max += 0.07 * span * float64(drawn)
	return p, nil
}

// newPanel is an empty panel in the project's style.
func newPanel(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.X.Tick.Marker, p.Y.Tick.Marker = exactTicks{}, exactTicks{}
	return p
}

// exactTicks are gonum's default ticks, labelled with as many decimals
// as tell the major ticks apart (the default labels of a narrow range
// can repeat, "1.1 1.1 1.2").
type exactTicks struct{}

// Ticks implements plot.Ticker.
func (exactTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	var majors []int
	for i, t := range ticks {
		if t.Label != "" {
			majors = append(majors, i)
		}
	}
	if len(majors) < 2 {
		return ticks
	}
	step := ticks[majors[1]].Value - ticks[majors[0]].Value
	d := 0
	for ; d < 10; d++ {
		q := math.Pow(10, float64(d))
		exact := true
		for _, i := range majors {
			if v := ticks[i].Value; math.Abs(math.Round(v*q)/q-v) > 1e-6*step {
				exact = false
				break
			}
		}
		if exact {
			break
		}
	}
	for _, i := range majors {
		ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', d, 64)
	}
	return ticks
}

// variantOrder lists the variants in the order they first appear.
func variantOrder(results []Result) []string {
	var names []string
	for _, r := range results {
		if !slices.Contains(names, r.Variant) {
			names = append(names, r.Variant)
		}
	}
	return names
}

// series is r's finite values of curve, by step.
func series(r Result, curve string) plotter.XYs {
	var xys plotter.XYs
	for _, pt := range r.Curve {
		if v, ok := pt.Values[curve]; ok && finite(v) {
			xys = append(xys, plotter.XY{X: float64(pt.Step), Y: v})
		}
	}
	slices.SortStableFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	return xys
}

// meanSeries is the mean over the seeds that have a value at each step.
func meanSeries(seeds []plotter.XYs) plotter.XYs {
	sum, count := map[float64]float64{}, map[float64]int{}
	for _, xys := range seeds {
		for _, xy := range xys {
			sum[xy.X] += xy.Y
			count[xy.X]++
		}
	}
	out := make(plotter.XYs, 0, len(sum))
	for x, s := range sum {
		out = append(out, plotter.XY{X: x, Y: s / float64(count[x])})
	}
	slices.SortFunc(out, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// writePNG lays plots out in a grid and writes the image to path.
func writePNG(path string, plots []*plot.Plot) error {
	cols := min(plotColumns, len(plots))
	rows := (len(plots) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols)
		for c := range grid[r] {
			if i := r*cols + c; i < len(plots) {
				grid[r][c] = plots[i]
			}
		}
	}
	width := plotWidth
	if cols == 1 {
		width = plotWidth * 3 / 4
	}
	img := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, width, plotRowHeight*rows))), vgimg.UseDPI(plotDPI))
	tiles := draw.Tiles{
		Rows: rows, Cols: cols,
		PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2,
	}
	canvases := plot.Align(grid, tiles, draw.New(img))
	for r := range grid {
		for c, p := range grid[r] {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w)
		return err
	})
}

// Smooth returns a copy of results whose curves are trailing moving
// averages: each key's value at a point becomes the mean of its finite
// values at that point and at the window−1 points before it that have
// one (fewer at the start). Noisy per-step training metrics read better
// through PlotCurves smoothed; window 1 copies them unchanged. Final
// values are copied as they are.
func Smooth(results []Result, window int) ([]Result, error) {
	if window < 1 {
		return nil, fmt.Errorf("ablation: Smooth: window %d, want ≥ 1", window)
	}
	out := make([]Result, len(results))
	for i, r := range results {
		r.Final = maps.Clone(r.Final)
		recent := map[string][]float64{} // each key's last finite values, at most window
		curve := make([]Point, len(r.Curve))
		for j, pt := range r.Curve {
			vals := make(map[string]float64, len(pt.Values))
			for k, v := range pt.Values {
				if !finite(v) {
					vals[k] = v
					continue
				}
				w := append(recent[k], v)
				if len(w) > window {
					w = w[1:]
				}
				recent[k] = w
				vals[k] = mean(w)
			}
			curve[j] = Point{Step: pt.Step, Values: vals}
		}
		if r.Curve != nil {
			r.Curve = curve
		}
		out[i] = r
	}
	return out, nil
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
