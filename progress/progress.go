// Package progress shows the progress of a training run: the step, the
// step's headline figures (the mean reward and accuracy of an RL step,
// the loss of an SFT step), tokens per second and the time left. On a
// terminal it draws a bar (github.com/schollz/progressbar/v3); elsewhere
// it writes a plain line at most every Interval, so that CI logs stay
// short.
//
// A Display is an agentrl.Recorder: pass it as RunConfig.Recorder and
// either trainer's Run drives it. It lives apart from the trainers so
// that a program without a display does not link the terminal and
// progress-bar libraries.
package progress

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/agentrl/agentrl"
)

// ErrInvalidRun reports a run that a Display cannot show: Init with a
// total below 1 or a start outside [0, total].
var ErrInvalidRun = errors.New("progress: invalid run")

// Mode selects how a Display shows itself.
type Mode int

const (
	// Auto draws a bar when Out is a terminal and writes plain lines
	// otherwise (CI logs, files, pipes).
	Auto Mode = iota
	// Bar always draws a progress bar.
	Bar
	// Lines always writes plain lines, at most one per Interval.
	Lines
	// Off shows nothing.
	Off
)

// DefaultInterval is the time between plain progress lines.
const DefaultInterval = 30 * time.Second

// Config configures New. Every zero field means its default: the display
// on os.Stderr, as a bar on a terminal and as lines every DefaultInterval
// otherwise, without a label, on the wall clock.
type Config struct {
	// Out receives the display; nil means os.Stderr.
	Out io.Writer
	// Mode picks bar or lines; the zero value decides by Out.
	Mode Mode
	// Interval is the least time between two plain lines; the first and
	// the last step are always written. 0 means DefaultInterval; a
	// negative Interval writes every step.
	Interval time.Duration
	// Description labels the display, for example "grpo".
	Description string
	// Clock returns the current time; nil means time.Now. Tests set it.
	Clock func() time.Time
}

// Display shows the progress of one training run at a time: Init starts
// a run, Record reports each of its steps, and the display completes
// itself at the run's last step (Finish ends it before). It is safe for
// concurrent use.
type Display struct {
	mu        sync.Mutex
	cfg       Config
	out       io.Writer
	mode      Mode
	started   bool // Init has been called
	bar       *progressbar.ProgressBar
	start     int // steps done before the run
	total     int // the run's last step
	begin     time.Time
	lastPrint time.Time
	printed   bool // the latest record has been written (lines mode)
	any       bool // a record has been seen
	last      agentrl.StepRecord
	tokens    int64
	finished  bool
}

// New returns a display configured by cfg; Init starts its first run.
func New(cfg Config) *Display {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	out := cfg.Out
	if out == nil {
		out = os.Stderr
	}
	mode := cfg.Mode
	if mode == Auto {
		mode = Lines
		if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			mode = Bar
		}
	}
	return &Display{cfg: cfg, out: out, mode: mode}
}

// Init starts showing a run whose steps go from start (the steps done
// before it, for a resumed run: rates and the time left count only this
// run's steps) to total, its last step; the run's clock starts now. It
// returns ErrInvalidRun unless total ≥ 1 and 0 ≤ start ≤ total.
func (d *Display) Init(start, total int) error {
	if total < 1 || start < 0 || start > total {
		return fmt.Errorf("%w: from step %d to %d (need a last step ≥ 1 and a start between 0 and it)", ErrInvalidRun, start, total)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.started, d.start, d.total, d.begin = true, start, total, d.cfg.Clock()
	d.lastPrint, d.printed, d.any, d.last, d.tokens, d.finished = time.Time{}, false, false, agentrl.StepRecord{}, 0, false
	d.bar = nil
	if d.mode == Bar {
		d.bar = progressbar.NewOptions(total-start,
			progressbar.OptionSetWriter(d.out),
			progressbar.OptionSetDescription(d.label()),
			progressbar.OptionSetWidth(24),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(d.out) }),
		)
	}
	return nil
}

// label is the description prefix.
func (d *Display) label() string {
	if d.cfg.Description == "" {
		return ""
	}
	return "[" + d.cfg.Description + "] "
}

// Record reports a finished step: r.Step, r.Figures and r.Tokens (the
// row is not shown). It returns the writer's error, if any, and
// ErrInvalidRun before Init.
func (d *Display) Record(r agentrl.StepRecord) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.started {
		return fmt.Errorf("%w: Record before Init", ErrInvalidRun)
	}
	if d.finished || d.mode == Off {
		return nil
	}
	now := d.cfg.Clock()
	d.tokens += r.Tokens
	first := !d.any
	d.any = true
	d.last = r
	d.printed = false
	switch d.mode {
	case Bar:
		d.bar.Describe(d.label() + d.summary(now, false))
		return d.bar.Set(r.Step - d.start)
	default:
		if first || r.Step >= d.total || d.cfg.Interval < 0 || now.Sub(d.lastPrint) >= d.cfg.Interval {
			return d.printLine(now)
		}
		return nil
	}
}

// printLine writes the latest record as one plain line.
func (d *Display) printLine(now time.Time) error {
	d.lastPrint = now
	d.printed = true
	_, err := fmt.Fprintln(d.out, d.label()+d.summary(now, true))
	return err
}

// summary formats the latest record; withTime adds elapsed time and
// ETA, which the bar draws itself.
func (d *Display) summary(now time.Time, withTime bool) string {
	r := d.last
	elapsed := now.Sub(d.begin)
	made := r.Step - d.start
	line := "step " + strconv.Itoa(r.Step) + "/" + strconv.Itoa(d.total)
	if withTime {
		line += fmt.Sprintf(" (%.0f%%)", 100*float64(r.Step)/float64(d.total))
	}
	for _, f := range r.Figures {
		line += " " + f.Name + " " + formatFigure(f.Value)
	}
	if secs := elapsed.Seconds(); secs > 0 {
		line += fmt.Sprintf(" %.0f tok/s", float64(d.tokens)/secs)
	} else {
		line += " - tok/s"
	}
	if withTime {
		line += " elapsed " + elapsed.Round(time.Second).String()
		if made > 0 {
			eta := time.Duration(float64(elapsed) / float64(made) * float64(max(d.total-r.Step, 0)))
			line += " eta " + eta.Round(time.Second).String()
		} else {
			line += " eta ?"
		}
	}
	return line
}

// formatFigure prints a figure with three decimals, "nan" for NaN.
func formatFigure(v float64) string {
	if math.IsNaN(v) {
		return "nan"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// Finish ends the run's display before its last step (a run stopped
// early): the bar's line is ended, or the latest step is written when
// its line was held back by Interval. After the last step it does
// nothing more; later Records are ignored until the next Init.
func (d *Display) Finish() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.finished || !d.started {
		return nil
	}
	d.finished = true
	switch d.mode {
	case Bar:
		if d.last.Step >= d.total {
			return nil // the bar completed itself at the last step
		}
		_, err := fmt.Fprintln(d.out)
		return err
	case Lines:
		if d.any && !d.printed {
			return d.printLine(d.cfg.Clock())
		}
	}
	return nil
}
