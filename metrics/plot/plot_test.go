package plot

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentrl/agentrl/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleRun returns the metrics of a 60-step run shaped like a GRPO run:
// rising reward and accuracy, falling entropy, noisy clip fraction, KL and
// gradient norm, validation accuracy every 10 steps and a NaN KL at step
// 30.
func sampleRun() []metrics.Row {
	var rows []metrics.Row
	add := func(step int) {
		s := float64(step)
		v := map[string]float64{
			"critic/rewards/mean":     1 - math.Exp(-s/20) + 0.05*math.Sin(s),
			"critic/score/mean":       1 - math.Exp(-s/25),
			"critic/acc/mean":         0.9 * (1 - math.Exp(-s/18)),
			"response_length/mean":    300 + 100*math.Sin(s/10),
			"actor/entropy":           1.2*math.Exp(-s/40) + 0.1,
			"actor/pg_clipfrac":       0.02 + 0.01*math.Abs(math.Sin(s/3)),
			"actor/pg_clipfrac_lower": 0.001 * math.Abs(math.Cos(s/4)),
			"actor/ppo_kl":            0.001 * s,
			"actor/grad_norm":         0.5 + 0.3*math.Abs(math.Sin(s/5)),
			"tool_call_counts/mean":   1 + s/60,
		}
		if step == 30 {
			v["actor/ppo_kl"] = math.NaN()
		}
		if step%10 == 0 {
			v["val-core/arith/acc/mean@8"] = 0.85 * (1 - math.Exp(-s/20))
			v["val-core/gsm/acc/mean@4"] = 0.6 * (1 - math.Exp(-s/30))
		}
		rows = append(rows, metrics.Row{Step: step, Values: v})
	}
	for s := 1; s <= 60; s++ {
		add(s)
	}
	return rows
}

// inkFraction returns the share of pixels in r that are not near-white.
func inkFraction(img image.Image, r image.Rectangle) float64 {
	ink := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if cr < 0xe000 || cg < 0xe000 || cb < 0xe000 {
				ink++
			}
		}
	}
	return float64(ink) / float64(r.Dx()*r.Dy())
}

// colored reports whether r holds a saturated (line-colored, not gray)
// pixel.
func colored(img image.Image, r image.Rectangle) bool {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			hi, lo := max(cr, cg, cb), min(cr, cg, cb)
			if hi-lo > 0x6000 {
				return true
			}
		}
	}
	return false
}

func TestWriteDefaultPanels(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, sampleRun(), Config{}))
	img, err := png.Decode(&buf)
	require.NoError(t, err)
	// 8 default panels, all with data, in 2 columns: 4 rows of 300 px.
	assert.Equal(t, image.Rect(0, 0, 1200, 1200), img.Bounds())
	// Every tile of the 2×4 grid holds axes, text and a colored line.
	for r := range 4 {
		for c := range 2 {
			tile := image.Rect(c*600, r*300, (c+1)*600, (r+1)*300)
			f := inkFraction(img, tile)
			assert.Greater(t, f, 0.01, "tile %d,%d is blank", r, c)
			assert.Less(t, f, 0.5, "tile %d,%d is mostly ink", r, c)
			assert.True(t, colored(img, tile), "tile %d,%d has no colored line", r, c)
		}
	}
}

func TestWriteCustomPanels(t *testing.T) {
	var buf bytes.Buffer
	cfg := Config{
		Panels: []Panel{
			{Title: "Validation", Keys: []string{"val-core/*/acc/mean@*"}},
			{Title: "Missing", Keys: []string{"no/such/key"}}, // left out
			{Title: "Entropy", Keys: []string{"actor/entropy"}},
		},
		Columns: 3, Width: 900, Height: 400,
	}
	require.NoError(t, Write(&buf, sampleRun(), cfg))
	img, err := png.Decode(&buf)
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, 900, 400), img.Bounds())
	// Two panels with data: the columns shrink to 2.
	assert.True(t, colored(img, image.Rect(0, 0, 450, 400)))
	assert.True(t, colored(img, image.Rect(450, 0, 900, 400)))
}

func TestSeriesSelection(t *testing.T) {
	run := sampleRun()
	slices.Reverse(run)
	rows, err := sortedRows(run)
	require.NoError(t, err)
	require.Len(t, rows, 60)
	for i, r := range rows {
		require.Equal(t, i+1, r.Step)
	}
	// Step 41: 1 − e^(−41/20) + 0.05 sin 41.
	assert.InDelta(t, 1-math.Exp(-41.0/20)+0.05*math.Sin(41), rows[40].Values["critic/rewards/mean"], 1e-12)

	series, err := panelSeries(rows, Panel{Keys: []string{"actor/ppo_kl", "val-core/*/acc/mean@*"}})
	require.NoError(t, err)
	require.Len(t, series, 3)
	assert.Equal(t, "actor/ppo_kl", series[0].key)
	assert.Len(t, series[0].xys, 59, "the NaN at step 30 is left out")
	assert.Equal(t, "val-core/arith/acc/mean@8", series[1].key)
	assert.Equal(t, "val-core/gsm/acc/mean@4", series[2].key)
	assert.Len(t, series[1].xys, 6)

	_, err = panelSeries(rows, Panel{Keys: []string{"["}})
	require.Error(t, err)
}

// TestDuplicateSteps: rows that hold a step twice — two runs appended to
// one log, the second from step 0; or a resumed run's rows kept twice —
// are refused, naming the step and the rows, rather than drawn as one
// curve.
func TestDuplicateSteps(t *testing.T) {
	rows := sampleRun()[:5]
	rows = append(rows, sampleRun()[:3]...)
	var buf bytes.Buffer
	err := Write(&buf, rows, Config{})
	require.ErrorIs(t, err, ErrDuplicateStep)
	assert.EqualError(t, err, "plot: a step logged twice: step 1 in rows 1 and 6 (counting from 1): the log mixes two runs' rows, or holds a resumed run's rows twice; keep one run's rows")
	assert.Zero(t, buf.Len(), "nothing drawn")

	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"step":1,"actor/entropy":1}`+"\n"+`{"step":2,"actor/entropy":1}`+"\n"+`{"step":2,"actor/entropy":2}`+"\n"), 0o644))
	png := filepath.Join(t.TempDir(), "curves.png")
	require.ErrorIs(t, LogFile(path, png, Config{}), ErrDuplicateStep)
	assert.NoFileExists(t, png)
}

func TestWriteErrors(t *testing.T) {
	var buf bytes.Buffer
	require.ErrorIs(t, Write(&buf, nil, Config{}), ErrNoData)
	onlyNaN := []metrics.Row{{Step: 1, Values: map[string]float64{"actor/entropy": math.NaN()}}}
	require.ErrorIs(t, Write(&buf, onlyNaN, Config{}), ErrNoData)
	rows := sampleRun()
	require.Error(t, Write(&buf, rows, Config{Width: -1}))
	require.Error(t, Write(&buf, rows, Config{Columns: -2}))
	require.Error(t, Write(&buf, rows, Config{Width: 20}))
	require.Error(t, Write(&buf, rows, Config{Width: 100000, Height: 100000}))
	require.Error(t, Write(&buf, rows, Config{Panels: []Panel{{Title: "bad", Keys: []string{"[x"}}}}))
	// nil Panels are DefaultPanels; an empty list is no panel at all.
	require.ErrorIs(t, Write(&buf, rows, Config{Panels: []Panel{}}), ErrNoData)
	require.ErrorIs(t, Write(errWriter{}, rows, Config{}), errDiskFull)
}

func TestLogFile(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "metrics.jsonl")
	l, err := metrics.Open(logPath, metrics.Options{})
	require.NoError(t, err)
	for _, r := range sampleRun() {
		require.NoError(t, l.Log(r.Step, r.Values))
	}
	require.NoError(t, l.Close())
	pngPath := filepath.Join(dir, "curves.png")
	require.NoError(t, LogFile(logPath, pngPath, Config{}))
	f, err := os.Open(pngPath)
	require.NoError(t, err)
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	require.NoError(t, err)
	assert.Equal(t, 1200, cfg.Width)
	assert.Equal(t, 1200, cfg.Height)

	require.Error(t, LogFile(filepath.Join(dir, "missing.jsonl"), pngPath, Config{}))
	empty := filepath.Join(dir, "empty.jsonl")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	require.ErrorIs(t, LogFile(empty, pngPath, Config{}), ErrNoData)
}

func BenchmarkWrite(b *testing.B) {
	rows := sampleRun()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := Write(&buf, rows, Config{}); err != nil {
			b.Fatal(err)
		}
	}
}

// errWriter fails every write with errDiskFull.
var errDiskFull = errors.New("disk full")

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errDiskFull }
