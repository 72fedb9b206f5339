package agentrl

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
)

// ErrInvalidProgress reports a ProgressConfig that cannot describe a run.
var ErrInvalidProgress = errors.New("agentrl: invalid progress configuration")

// ProgressMode selects how Progress shows itself.
type ProgressMode int

const (
	// ProgressAuto draws a bar when Out is a terminal and writes plain
	// lines otherwise (CI logs, files, pipes).
	ProgressAuto ProgressMode = iota
	// ProgressBar always draws a progress bar.
	ProgressBar
	// ProgressLines always writes plain lines, at most one per Interval.
	ProgressLines
	// ProgressOff shows nothing.
	ProgressOff
)

// DefaultProgressInterval is the time between plain progress lines.
const DefaultProgressInterval = 30 * time.Second

// ProgressConfig configures NewProgress. Total is required (≥ 1); every
// other zero field means its default: a fresh run (StartStep 0) shown on
// os.Stderr, as a bar on a terminal and as lines every
// DefaultProgressInterval otherwise, without a label, on the wall clock.
type ProgressConfig struct {
	// Total is the step number of the last step of the run (≥ 1).
	Total int
	// StartStep is the number of steps done before this run started (a
	// resumed run); rates and the ETA count only this run's steps.
	StartStep int
	// Out receives the display; nil means os.Stderr.
	Out io.Writer
	// Mode picks bar or lines; the zero value decides by Out.
	Mode ProgressMode
	// Interval is the least time between two plain lines; the first and
	// the last step are always written. 0 means DefaultProgressInterval;
	// a negative Interval writes every step.
	Interval time.Duration
	// Description labels the display, for example "grpo".
	Description string
	// Clock returns the current time; nil means time.Now. Tests set it.
	Clock func() time.Time
}

// ProgressStats is what one training step reports to the display.
// StepMetrics.ProgressStats and SFTMetrics.ProgressStats make it from a
// trainer's step.
type ProgressStats struct {
	// Step is the step just finished.
	Step int
	// Values are the step's figures to show, in order: the mean reward
	// and accuracy of an RL step, the loss of an SFT step.
	Values []ProgressValue
	// Tokens is the number of tokens the step processed (generated and
	// trained on); the display shows their rate over the run.
	Tokens int64
}

// ProgressValue is one named figure of a progress line.
type ProgressValue struct {
	Name  string
	Value float64
}

// ProgressStats is the RL step's progress: mean reward and accuracy,
// and the tokens it generated and trained on.
func (m StepMetrics) ProgressStats() ProgressStats {
	return ProgressStats{
		Step:   m.Step,
		Values: []ProgressValue{{"reward", m.RewardMean}, {"acc", m.Acc}},
		Tokens: int64(m.generatedTokens + m.trainedTokens),
	}
}

// ProgressStats is the SFT step's progress: its loss per trained token,
// and the tokens of its forward passes.
func (m SFTMetrics) ProgressStats() ProgressStats {
	return ProgressStats{Step: m.Step, Values: []ProgressValue{{"loss", m.Loss}}, Tokens: int64(m.SeqTokens)}
}

// Progress shows the progress of a training run: step, the step's
// figures (ProgressStats.Values), tokens per second and the estimated
// time left. On a terminal
// it draws a bar (github.com/schollz/progressbar/v3); elsewhere it writes a
// plain line at most every Interval, so that CI logs stay short. It is safe
// for concurrent use.
type Progress struct {
	mu        sync.Mutex
	cfg       ProgressConfig
	out       io.Writer
	bar       *progressbar.ProgressBar
	mode      ProgressMode
	start     time.Time
	lastPrint time.Time
	printed   bool // the latest update has been written (lines mode)
	any       bool // an update has been seen
	last      ProgressStats
	tokens    int64
	finished  bool
}

// NewProgress starts the display; the run's clock starts now. It returns
// ErrInvalidProgress when Total < 1 or StartStep is outside [0, Total].
func NewProgress(cfg ProgressConfig) (*Progress, error) {
	if cfg.Total < 1 || cfg.StartStep < 0 || cfg.StartStep > cfg.Total {
		return nil, fmt.Errorf("%w: Total %d, StartStep %d (need Total ≥ 1, 0 ≤ StartStep ≤ Total)",
			ErrInvalidProgress, cfg.Total, cfg.StartStep)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultProgressInterval
	}
	out := cfg.Out
	if out == nil {
		out = os.Stderr
	}
	p := &Progress{cfg: cfg, out: out, mode: cfg.Mode, start: cfg.Clock()}
	if p.mode == ProgressAuto {
		p.mode = ProgressLines
		if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			p.mode = ProgressBar
		}
	}
	if p.mode == ProgressBar {
		p.bar = progressbar.NewOptions(cfg.Total-cfg.StartStep,
			progressbar.OptionSetWriter(out),
			progressbar.OptionSetDescription(p.label()),
			progressbar.OptionSetWidth(24),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(out) }),
		)
	}
	return p, nil
}

// label is the description prefix.
func (p *Progress) label() string {
	if p.cfg.Description == "" {
		return ""
	}
	return "[" + p.cfg.Description + "] "
}

// Update reports a finished step. It returns the writer's error, if any.
func (p *Progress) Update(s ProgressStats) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished || p.mode == ProgressOff {
		return nil
	}
	now := p.cfg.Clock()
	p.tokens += s.Tokens
	first := !p.any
	p.any = true
	p.last = s
	p.printed = false
	switch p.mode {
	case ProgressBar:
		p.bar.Describe(p.label() + p.summary(now, false))
		return p.bar.Set(s.Step - p.cfg.StartStep)
	default:
		if first || s.Step >= p.cfg.Total || p.cfg.Interval < 0 || now.Sub(p.lastPrint) >= p.cfg.Interval {
			return p.printLine(now)
		}
		return nil
	}
}

// printLine writes the latest stats as one plain line.
func (p *Progress) printLine(now time.Time) error {
	p.lastPrint = now
	p.printed = true
	_, err := fmt.Fprintln(p.out, p.label()+p.summary(now, true))
	return err
}

// summary formats the latest stats; withTime adds elapsed time and ETA,
// which the bar draws itself.
func (p *Progress) summary(now time.Time, withTime bool) string {
	s := p.last
	elapsed := now.Sub(p.start)
	done := s.Step - p.cfg.StartStep
	line := "step " + strconv.Itoa(s.Step) + "/" + strconv.Itoa(p.cfg.Total)
	if withTime {
		line += fmt.Sprintf(" (%.0f%%)", 100*float64(s.Step)/float64(p.cfg.Total))
	}
	for _, v := range s.Values {
		line += " " + v.Name + " " + formatStat(v.Value)
	}
	if secs := elapsed.Seconds(); secs > 0 {
		line += fmt.Sprintf(" %.0f tok/s", float64(p.tokens)/secs)
	} else {
		line += " - tok/s"
	}
	if withTime {
		line += " elapsed " + elapsed.Round(time.Second).String()
		if done > 0 {
			eta := time.Duration(float64(elapsed) / float64(done) * float64(max(p.cfg.Total-s.Step, 0)))
			line += " eta " + eta.Round(time.Second).String()
		} else {
			line += " eta ?"
		}
	}
	return line
}

// formatStat prints a metric with three decimals, "nan" for NaN.
func formatStat(v float64) string {
	if math.IsNaN(v) {
		return "nan"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// Finish ends the display: the bar is completed, or the latest step is
// written when its line was held back by Interval. Later Updates are
// ignored.
func (p *Progress) Finish() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return nil
	}
	p.finished = true
	switch p.mode {
	case ProgressBar:
		if p.last.Step >= p.cfg.Total {
			return nil // the bar completed itself at the last step
		}
		_, err := fmt.Fprintln(p.out)
		return err
	case ProgressLines:
		if p.any && !p.printed {
			return p.printLine(p.cfg.Clock())
		}
	}
	return nil
}
