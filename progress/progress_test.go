package progress

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a settable clock for the progress tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

func TestLines(t *testing.T) {
	clk := newClock()
	var buf bytes.Buffer
	p, err := started(Config{Out: &buf, Mode: Lines, Interval: 10 * time.Second,
		Description: "grpo", Clock: clk.now}, 0, 4)
	require.NoError(t, err)

	clk.advance(2 * time.Second)
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 1, Figures: rl(0.5, 0.25), Tokens: 1000}))
	clk.advance(2 * time.Second) // 2 s after the last line: held back
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 2, Figures: rl(0.6, 0.3), Tokens: 1000}))
	clk.advance(9 * time.Second) // 11 s after the last line
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 3, Figures: rl(0.7, 0.4), Tokens: 1000}))
	clk.advance(3 * time.Second) // last step: always written
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 4, Figures: rl(math.NaN(), 0.5), Tokens: 1000}))
	require.NoError(t, p.Finish())
	require.NoError(t, p.Finish())
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 5})) // ignored after Finish

	assert.Equal(t, []string{
		// 1000 tokens / 2 s = 500 tok/s; ETA = 2 s per step × 3 steps left.
		"[grpo] step 1/4 (25%) reward 0.500 acc 0.250 500 tok/s elapsed 2s eta 6s",
		// 3000 / 13 s = 230.8 tok/s; ETA = 13 s / 3 steps × 1 step = 4.33 s.
		"[grpo] step 3/4 (75%) reward 0.700 acc 0.400 231 tok/s elapsed 13s eta 4s",
		// 4000 / 16 s = 250 tok/s.
		"[grpo] step 4/4 (100%) reward nan acc 0.500 250 tok/s elapsed 16s eta 0s",
	}, lines(buf.String()))
}

func TestFinishWritesHeldBackLine(t *testing.T) {
	clk := newClock()
	var buf bytes.Buffer
	// A resumed run: 50 steps were done before it.
	p, err := started(Config{Out: &buf, Mode: Lines, Clock: clk.now}, 50, 100)
	require.NoError(t, err)
	clk.advance(10 * time.Second)
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 51, Figures: rl(1, 1), Tokens: 50}))
	clk.advance(10 * time.Second)
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 52, Figures: rl(0, 0), Tokens: 150}))
	require.NoError(t, p.Finish())
	assert.Equal(t, []string{
		// 50 tokens / 10 s; ETA = 10 s per step × 49 steps left = 8m10s.
		"step 51/100 (51%) reward 1.000 acc 1.000 5 tok/s elapsed 10s eta 8m10s",
		// Held back by the 30 s default interval, written by Finish:
		// 200 / 20 s; ETA = 10 s × 48.
		"step 52/100 (52%) reward 0.000 acc 0.000 10 tok/s elapsed 20s eta 8m0s",
	}, lines(buf.String()))
}

func TestEveryStepAndZeroElapsed(t *testing.T) {
	clk := newClock()
	var buf bytes.Buffer
	p, err := started(Config{Out: &buf, Mode: Lines, Interval: -1, Clock: clk.now}, 0, 3)
	require.NoError(t, err)
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 0, Tokens: 5})) // no time has passed, no step done
	clk.advance(time.Second)
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 1, Tokens: 5}))
	assert.Equal(t, []string{
		"step 0/3 (0%) - tok/s elapsed 0s eta ?",
		"step 1/3 (33%) 10 tok/s elapsed 1s eta 2s",
	}, lines(buf.String()))
}

func TestBar(t *testing.T) {
	var buf bytes.Buffer
	p, err := started(Config{Out: &buf, Mode: Bar, Description: "sft"}, 0, 4)
	require.NoError(t, err)
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 2, Figures: rl(0.25, 0.5), Tokens: 10}))
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 4, Figures: rl(0.75, 1), Tokens: 10}))
	require.NoError(t, p.Finish())
	out := buf.String()
	assert.Contains(t, out, "[sft] step 4/4 reward 0.750 acc 1.000")
	assert.Contains(t, out, "4/4")
	assert.True(t, strings.HasSuffix(out, "\n"), "the bar ends its line")
}

func TestBarFinishEarly(t *testing.T) {
	var buf bytes.Buffer
	p, err := started(Config{Out: &buf, Mode: Bar}, 0, 10)
	require.NoError(t, err)
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 3}))
	require.NoError(t, p.Finish())
	assert.True(t, strings.HasSuffix(buf.String(), "\n"))
}

func TestAutoIsLinesWithoutTerminal(t *testing.T) {
	var buf bytes.Buffer
	p, err := started(Config{Out: &buf}, 0, 2)
	require.NoError(t, err)
	assert.Equal(t, Lines, p.mode)

	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer f.Close()
	p, err = started(Config{Out: f}, 0, 2)
	require.NoError(t, err)
	assert.Equal(t, Lines, p.mode, "a regular file is no terminal")
}

func TestOff(t *testing.T) {
	var buf bytes.Buffer
	p, err := started(Config{Out: &buf, Mode: Off}, 0, 2)
	require.NoError(t, err)
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 1}))
	require.NoError(t, p.Finish())
	assert.Empty(t, buf.String())
}

func TestInitErrors(t *testing.T) {
	for _, run := range []struct{ start, total int }{{0, 0}, {-1, 5}, {6, 5}} {
		require.ErrorIs(t, New(Config{}).Init(run.start, run.total), ErrInvalidRun, "from %d to %d", run.start, run.total)
	}
	d := New(Config{Out: &bytes.Buffer{}, Mode: Lines})
	require.ErrorIs(t, d.Record(agentrl.StepRecord{Step: 1}), ErrInvalidRun, "Record before Init")
	require.NoError(t, d.Finish(), "Finish before Init does nothing")
}

// TestInitStartsAnotherRun: one display shows two runs in turn (SFT,
// then RL), each with its own clock, token count and bar.
func TestInitStartsAnotherRun(t *testing.T) {
	clk := newClock()
	var buf bytes.Buffer
	d, err := started(Config{Out: &buf, Mode: Lines, Clock: clk.now}, 0, 1)
	require.NoError(t, err)
	clk.advance(2 * time.Second)
	require.NoError(t, d.Record(agentrl.StepRecord{Step: 1, Tokens: 100}))
	require.NoError(t, d.Init(0, 2))
	clk.advance(time.Second)
	require.NoError(t, d.Record(agentrl.StepRecord{Step: 1, Tokens: 10}))
	assert.Equal(t, []string{
		"step 1/1 (100%) 50 tok/s elapsed 2s eta 0s",
		// 10 tokens in the second run's 1 s; 1 s per step × 1 step left.
		"step 1/2 (50%) 10 tok/s elapsed 1s eta 1s",
	}, lines(buf.String()))
}

func TestWriteError(t *testing.T) {
	p, err := started(Config{Out: errWriter{}, Mode: Lines}, 0, 2)
	require.NoError(t, err)
	require.ErrorIs(t, p.Record(agentrl.StepRecord{Step: 1}), errDiskFull)
}

func TestConcurrent(t *testing.T) {
	var buf lockedBuffer
	p, err := started(Config{Out: &buf, Mode: Lines, Interval: -1}, 0, 400)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				assert.NoError(t, p.Record(agentrl.StepRecord{Step: w*100 + i + 1, Tokens: 1}))
			}
		})
	}
	wg.Wait()
	require.NoError(t, p.Finish())
	got := lines(buf.String())
	assert.Len(t, got, 400)
	for _, l := range got {
		assert.True(t, strings.HasPrefix(l, "step "), l)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// rl is the Figures of an RL step.
func rl(reward, acc float64) []agentrl.Figure {
	return []agentrl.Figure{{Name: "reward", Value: reward}, {Name: "acc", Value: acc}}
}

// started returns a display of cfg with a run from step start to total
// begun.
func started(cfg Config, start, total int) (*Display, error) {
	d := New(cfg)
	return d, d.Init(start, total)
}

// TestRecordsOfTrainers: an SFT step shows its loss, an RL step its
// reward and accuracy (the Figures the trainers' Run gives, as
// agentrl's TestHeadline checks); both count their tokens. By hand: 300
// tokens in 3 s = 100 tok/s; the RL step generated 40 and trained on 160
// tokens, 200 in 2 s more = 500 tokens in 5 s = 100 tok/s.
func TestRecordsOfTrainers(t *testing.T) {
	clk := newClock()
	var buf bytes.Buffer
	p, err := started(Config{Out: &buf, Mode: Lines, Interval: -1, Clock: clk.now}, 0, 2)
	require.NoError(t, err)
	clk.advance(3 * time.Second)
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 1, Figures: []agentrl.Figure{{Name: "loss", Value: 1.25}}, Tokens: 300}))
	clk.advance(2 * time.Second)
	require.NoError(t, p.Record(agentrl.StepRecord{Step: 2, Figures: rl(-0.5, 0.25), Tokens: 40 + 160}))
	assert.Equal(t, []string{
		"step 1/2 (50%) loss 1.250 100 tok/s elapsed 3s eta 3s",
		"step 2/2 (100%) reward -0.500 acc 0.250 100 tok/s elapsed 5s eta 0s",
	}, lines(buf.String()))
}

// errWriter fails every write with errDiskFull.
var errDiskFull = errors.New("disk full")

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errDiskFull }
