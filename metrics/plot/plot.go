// Package plot draws training curves from a metrics log (package
// metrics) as one PNG image with a grid of panels, over gonum's plot
// library. It is the only package of the module that links
// gonum.org/v1/plot and its image backends, so that a program that
// trains without plotting does not carry them.
package plot

import (
	"cmp"
	"errors"
	"fmt"
	"image"
	"io"
	"math"
	"path"
	"slices"

	"github.com/agentrl/agentrl/internal/atomicfile"
	"github.com/agentrl/agentrl/metrics"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ErrNoData reports that no panel of a plot has a finite value to draw.
var ErrNoData = errors.New("plot: no metrics to plot")

// ErrDuplicateStep is wrapped by the error of Write and LogFile for rows
// that hold one step twice. A log that package metrics wrote holds each
// step once (a resumed run's log loses the rows after its checkpoint), so
// a step twice means the rows of two runs mixed in one file — or those of
// a run resumed by an older version, which kept both — and a curve
// through them would join two runs. Nothing is drawn: keep one run's rows.
var ErrDuplicateStep = errors.New("plot: a step logged twice")

// Panel is one panel of a training-curve plot: one line per metric key
// over the training step.
type Panel struct {
	// Title is drawn above the panel.
	Title string
	// Keys are metric keys, or path.Match patterns over keys (the "*" of a
	// pattern does not cross a "/"), for example "val-core/*/acc/mean@*".
	// Every matching key present in the log becomes one line.
	Keys []string
}

// DefaultPanels returns the panels a Config with nil Panels (the
// zero value's) draws: those of a GRPO run, under verl's metric
// names (verl/trainer/ppo/metric_utils.py: compute_data_metrics;
// verl/workers/actor/dp_actor.py: update_policy): reward mean, accuracy
// (training and validation), response length, entropy, clip fraction,
// KL, gradient norm and tool calls.
func DefaultPanels() []Panel {
	return []Panel{
		{Title: "Reward mean", Keys: []string{"critic/rewards/mean", "critic/score/mean"}},
		{Title: "Accuracy", Keys: []string{"critic/acc/mean", "acc/mean", "val-core/*/acc/mean@*"}},
		{Title: "Response length", Keys: []string{"response_length/mean"}},
		{Title: "Entropy", Keys: []string{"actor/entropy"}},
		{Title: "Clip fraction", Keys: []string{"actor/pg_clipfrac", "actor/pg_clipfrac_lower"}},
		{Title: "KL", Keys: []string{"actor/ppo_kl", "actor/kl_loss"}},
		{Title: "Gradient norm", Keys: []string{"actor/grad_norm"}},
		{Title: "Tool calls", Keys: []string{"tool_call_counts/mean"}},
	}
}

// Config configures Write. The zero value draws DefaultPanels
// in two columns, 1200 pixels wide, 300 pixels per row of panels.
type Config struct {
	// Panels to draw; nil means DefaultPanels, an empty non-nil slice
	// none (ErrNoData). Panels without data are left out.
	Panels []Panel
	// Columns of the panel grid; 0 means 2.
	Columns int
	// Width and Height of the image in pixels; 0 means 1200 and 300 per
	// row.
	Width, Height int
}

// dpi is the resolution the text sizes are set for.
const dpi = 96

// maxPixels bounds the image so that a bad configuration cannot
// allocate gigabytes.
const maxPixels = 64 << 20

// Write draws training curves from metrics log rows as one PNG image
// with a grid of panels and writes it to w. NaN values (null in the log)
// are left out of the lines. The step axis is marked at whole steps, and
// the value axes with labels that tell every mark apart; a series whose
// values are all equal is drawn flat in the middle of its panel. It
// returns ErrNoData when no panel has a finite value, and an error
// wrapping ErrDuplicateStep, naming the step and the rows, when rows hold
// one step twice.
func Write(w io.Writer, rows []metrics.Row, cfg Config) error {
	img, err := renderMetrics(rows, cfg)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("plot: write: %w", err)
	}
	return nil
}

// LogFile reads the metrics log at logPath and writes its plot to the
// PNG file pngPath atomically: a reader of pngPath sees the previous
// image or the new one, never a part.
func LogFile(logPath, pngPath string, cfg Config) error {
	rows, err := metrics.ReadFile(logPath)
	if err != nil {
		return err
	}
	img, err := renderMetrics(rows, cfg)
	if err != nil {
		return err
	}
	err = atomicfile.Write(pngPath, 0o644, func(w io.Writer) error {
		_, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w)
		return err
	})
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// plotSeries is one line: a key's finite values by step.
type plotSeries struct {
	key string
	xys plotter.XYs
}

func renderMetrics(rows []metrics.Row, cfg Config) (*vgimg.Canvas, error) {
	panels := cfg.Panels
	if panels == nil {
		panels = DefaultPanels()
	}
	cols := cfg.Columns
	if cols == 0 {
		cols = 2
	}
	if cols < 0 || cfg.Width < 0 || cfg.Height < 0 {
		return nil, fmt.Errorf("plot: plot: negative Columns %d, Width %d or Height %d", cols, cfg.Width, cfg.Height)
	}
	rows, err := sortedRows(rows)
	if err != nil {
		return nil, err
	}
	var plots []*gplot.Plot
	for i, panel := range panels {
		series, err := panelSeries(rows, panel)
		if err != nil {
			return nil, fmt.Errorf("plot: plot panel %d (%q): %w", i, panel.Title, err)
		}
		if len(series) == 0 {
			continue
		}
		p, err := panelPlot(panel.Title, series)
		if err != nil {
			return nil, fmt.Errorf("plot: plot panel %q: %w", panel.Title, err)
		}
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		return nil, ErrNoData
	}
	cols = min(cols, len(plots))
	nrows := (len(plots) + cols - 1) / cols
	width, height := cfg.Width, cfg.Height
	if width == 0 {
		width = 1200
	}
	if height == 0 {
		height = 300 * nrows
	}
	if width < 50 || height < 50 || width*height > maxPixels {
		return nil, fmt.Errorf("plot: plot: %d×%d pixels is outside 50×50 … %d pixels", width, height, maxPixels)
	}
	grid := make([][]*gplot.Plot, nrows)
	for r := range grid {
		grid[r] = make([]*gplot.Plot, cols)
		for c := range grid[r] {
			if i := r*cols + c; i < len(plots) {
				grid[r][c] = plots[i]
			}
		}
	}
	img := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, width, height))), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	tiles := draw.Tiles{
		Rows: nrows, Cols: cols,
		PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2,
	}
	canvases := gplot.Align(grid, tiles, dc)
	for r := range grid {
		for c, p := range grid[r] {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	return img, nil
}

// sortedRows returns rows sorted by step; a step held twice is an error
// wrapping ErrDuplicateStep.
func sortedRows(rows []metrics.Row) ([]metrics.Row, error) {
	first := make(map[int]int, len(rows))
	for i, r := range rows {
		if j, ok := first[r.Step]; ok {
			return nil, fmt.Errorf("%w: step %d in rows %d and %d (counting from 1): the log mixes two runs' rows, or holds a resumed run's rows twice; keep one run's rows", ErrDuplicateStep, r.Step, j+1, i+1)
		}
		first[r.Step] = i
	}
	out := slices.Clone(rows)
	slices.SortStableFunc(out, func(a, b metrics.Row) int { return cmp.Compare(a.Step, b.Step) })
	return out, nil
}

// panelSeries collects the finite values of the panel's keys, in the order
// of the panel's keys and, within a pattern, of the matched keys.
func panelSeries(rows []metrics.Row, panel Panel) ([]plotSeries, error) {
	var keys []string
	for _, pattern := range panel.Keys {
		if _, err := path.Match(pattern, ""); err != nil {
			return nil, fmt.Errorf("key pattern %q: %w", pattern, err)
		}
		var matched []string
		seen := map[string]bool{}
		for _, r := range rows {
			for k := range r.Values {
				if ok, _ := path.Match(pattern, k); ok && !seen[k] && !slices.Contains(keys, k) {
					seen[k] = true
					matched = append(matched, k)
				}
			}
		}
		slices.Sort(matched)
		keys = append(keys, matched...)
	}
	var out []plotSeries
	for _, k := range keys {
		var xys plotter.XYs
		for _, r := range rows {
			if v, ok := r.Values[k]; ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
				xys = append(xys, plotter.XY{X: float64(r.Step), Y: v})
			}
		}
		if len(xys) > 0 {
			out = append(out, plotSeries{key: k, xys: xys})
		}
	}
	return out, nil
}

// panelPlot draws one panel.
func panelPlot(title string, series []plotSeries) (*gplot.Plot, error) {
	p := gplot.New()
	p.Title.Text = title
	p.X.Label.Text = "step"
	p.X.Tick.Marker, p.Y.Tick.Marker = stepTicks{}, valueTicks{}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	for i, s := range series {
		line, points, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", s.key, err)
		}
		col := plotutil.Color(i)
		line.Color = col
		line.Width = vg.Points(1.2)
		points.Color = col
		points.Shape = draw.CircleGlyph{}
		points.Radius = vg.Points(1.5)
		p.Add(line)
		// Points mark sparse series (validation every few steps, or a run
		// of a few steps), where a line alone could be invisible.
		if len(s.xys) <= 60 {
			p.Add(points)
		}
		if len(series) > 1 {
			p.Legend.Add(s.key, line)
		}
	}
	padFlat(&p.Y)
	if len(series) == 1 {
		p.Y.Label.Text = series[0].key
	} else {
		// Headroom above the data for the legend, which sits top left.
		p.Y.Max += 0.08 * (p.Y.Max - p.Y.Min) * float64(len(series))
	}
	return p, nil
}
