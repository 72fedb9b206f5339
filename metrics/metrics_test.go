package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoggerFormat(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf)
	require.NoError(t, l.Log(3, map[string]float64{
		"critic/rewards/mean": 0.5,
		"actor/entropy":       1.25,
		"actor/kl":            math.NaN(),
		"actor/grad_norm":     math.Inf(1),
		"big":                 1e21,
		"tiny":                5e-324,
		`quote"key`:           -2,
	}))
	require.NoError(t, l.Log(4, nil))
	require.NoError(t, l.Close())
	// Keys after "step" in byte order; NaN and +Inf as null; shortest
	// round-tripping numbers; the quote in the key escaped.
	want := `{"step":3,"actor/entropy":1.25,"actor/grad_norm":null,"actor/kl":null,"big":1e+21,"critic/rewards/mean":0.5,"quote\"key":-2,"tiny":5e-324}` + "\n" +
		`{"step":4}` + "\n"
	assert.Equal(t, want, buf.String())
	require.ErrorIs(t, l.Log(5, nil), ErrClosed)
}

func TestLoggerErrors(t *testing.T) {
	l := NewLogger(&bytes.Buffer{})
	require.ErrorIs(t, l.Log(-1, nil), ErrInvalidRow)
	require.ErrorIs(t, l.Log(1, map[string]float64{"step": 1}), ErrInvalidRow)
	require.ErrorIs(t, l.Log(1, map[string]float64{"": 1}), ErrInvalidRow)
	failing := NewLogger(errWriter{})
	err := failing.Log(7, map[string]float64{"a": 1})
	require.ErrorIs(t, err, errDiskFull)
	assert.Contains(t, err.Error(), "step 7")
}

var errDiskFull = errors.New("disk full")

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	l, err := Open(path, Options{Sync: true})
	require.NoError(t, err)
	require.NoError(t, l.Log(1, map[string]float64{"a": 0.1, "b": math.NaN()}))
	require.NoError(t, l.Log(2, map[string]float64{"a": 0.2}))
	require.NoError(t, l.Close())
	require.NoError(t, l.Close()) // idempotent

	// Reopen and append, as a run resumed from the checkpoint of step 2
	// does.
	l, err = Open(path, Options{Resume: true, ResumeStep: 2})
	require.NoError(t, err)
	require.NoError(t, l.Log(3, map[string]float64{"a": 0.3}))
	require.NoError(t, l.Close())

	rows, err := ReadFile(path)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	assert.Equal(t, 1, rows[0].Step)
	assert.Equal(t, 0.1, rows[0].Values["a"])
	assert.True(t, math.IsNaN(rows[0].Values["b"]))
	assert.Equal(t, map[string]float64{"a": 0.3}, rows[2].Values)
}

func TestOpenTruncatesTornLine(t *testing.T) {
	dir := t.TempDir()
	// A log whose only line is torn holds no row, so a new run takes it;
	// one with rows is opened as the log of a resumed run.
	resume := Options{Resume: true, ResumeStep: 9}
	for name, tc := range map[string]struct {
		content, want string
		opts          Options
	}{
		"torn tail":    {`{"step":1,"a":1}` + "\n" + `{"step":2,"a":`, `{"step":1,"a":1}` + "\n", resume},
		"only torn":    {`{"step":1,"a`, "", Options{}},
		"clean":        {`{"step":1,"a":1}` + "\n", `{"step":1,"a":1}` + "\n", resume},
		"long torn":    {`{"step":1}` + "\n" + strings.Repeat("x", 200<<10), `{"step":1}` + "\n", resume},
		"empty":        {"", "", Options{}},
		"no newline 2": {strings.Repeat("y", 70<<10), "", Options{}},
		"blank lines":  {"\n\n", "\n\n", Options{}},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o644))
			l, err := Open(path, tc.opts)
			require.NoError(t, err)
			assert.Zero(t, l.Removed())
			require.NoError(t, l.Close())
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}

// TestOpenRefusesAnotherRunsLog: a new run's Open of a log that holds
// rows fails naming the rows, and leaves the file as it was (torn tail
// included): the second run of a folder never appends to the first
// run's log.
func TestOpenRefusesAnotherRunsLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	content := `{"step":0,"v":1}` + "\n" + `{"step":1,"v":2}` + "\n" + `{"step":2,"v":3}` + "\n" + `{"step":3,"v"`
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	_, err := Open(path, Options{})
	require.ErrorIs(t, err, ErrOwned)
	assert.EqualError(t, err, "metrics: log belongs to another run: "+path+" already holds 3 rows (steps 0…2)")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, content, string(got), "left as it was")

	// A malformed complete line: the line, not a refusal by rows.
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"step":0}`+"\n"+`{"step":"x"}`+"\n"), 0o644))
	for _, opts := range []Options{{}, {Resume: true, ResumeStep: 5}} {
		_, err = Open(bad, opts)
		require.ErrorIs(t, err, ErrSyntax)
		assert.ErrorContains(t, err, "line 2")
	}
	_, err = Open(path, Options{Resume: true, ResumeStep: -2})
	assert.ErrorContains(t, err, "Options.ResumeStep -2")
}

// TestOpenHeldLog: while one Logger holds a log, a second Open of it
// through another open file — a second run, here in one process — fails,
// whatever its options; once the first is closed, the log opens.
func TestOpenHeldLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	first, err := Open(path, Options{})
	require.NoError(t, err)
	for _, opts := range []Options{{}, {Resume: true, ResumeStep: -1}} {
		_, err = Open(path, opts)
		require.ErrorIs(t, err, ErrOwned)
		assert.EqualError(t, err, "metrics: log belongs to another run: "+path+" is open in another Logger (of this process or another) that is writing it")
	}
	require.NoError(t, first.Log(0, map[string]float64{"v": 1}))
	require.NoError(t, first.Close())
	again, err := Open(path, Options{Resume: true, ResumeStep: 0})
	require.NoError(t, err)
	require.NoError(t, again.Close())
}

// TestOpenResumeCutsLaterRows: a run resumed from the checkpoint of step
// s keeps the rows up to s and loses the later ones, which it logs
// again; −1 (no checkpoint) empties the log. The rows are the lines of
// an interrupted run that logged steps 0–5 and crashed writing step 6.
func TestOpenResumeCutsLaterRows(t *testing.T) {
	var lines []string
	for s := range 6 {
		lines = append(lines, `{"step":`+strconv.Itoa(s)+`,"v":`+strconv.Itoa(10*s)+`}`+"\n")
	}
	full := strings.Join(lines, "")
	for _, c := range []struct {
		step    int
		want    string
		removed int
	}{
		{3, strings.Join(lines[:4], ""), 2},
		{0, lines[0], 5},
		{-1, "", 6},
		{5, full, 0},
		{99, full, 0},
	} {
		path := filepath.Join(t.TempDir(), "metrics.jsonl")
		require.NoError(t, os.WriteFile(path, []byte(full+`{"step":6,"v"`), 0o644))
		l, err := Open(path, Options{Resume: true, ResumeStep: c.step})
		require.NoError(t, err)
		assert.Equal(t, c.removed, l.Removed(), "resume at %d", c.step)
		require.NoError(t, l.Log(c.step+1, map[string]float64{"v": -1}))
		require.NoError(t, l.Close())
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, c.want+`{"step":`+strconv.Itoa(c.step+1)+`,"v":-1}`+"\n", string(got), "resume at %d", c.step)
	}
}

func TestOpenError(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "missing", "m.jsonl"), Options{})
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestLoggerConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	l, err := Open(path, Options{})
	require.NoError(t, err)
	const writers, perWriter = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				step := w*perWriter + i
				assert.NoError(t, l.Log(step, map[string]float64{
					"writer": float64(w), "i": float64(i), "pad/" + strings.Repeat("k", 100): 1,
				}))
			}
		})
	}
	wg.Wait()
	require.NoError(t, l.Close())
	rows, err := ReadFile(path)
	require.NoError(t, err)
	require.Len(t, rows, writers*perWriter)
	seen := map[int]bool{}
	for _, r := range rows {
		// Each line intact: its step agrees with its own fields.
		assert.Equal(t, r.Step, int(r.Values["writer"])*perWriter+int(r.Values["i"]))
		seen[r.Step] = true
	}
	assert.Len(t, seen, writers*perWriter)
}

func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Row
		wantErr string
	}{
		{"empty", "", nil, ""},
		{"blank lines", "\n\n" + `{"step":2,"x":1}` + "\n\n", []Row{{2, map[string]float64{"x": 1}}}, ""},
		{"unterminated ok", `{"step":2,"x":1}`, []Row{{2, map[string]float64{"x": 1}}}, ""},
		{"torn last line ignored", `{"step":2}` + "\n" + `{"step":3,"x":`, []Row{{2, map[string]float64{}}}, ""},
		{"bad middle line", `{"step":1}` + "\n" + `{"step":2,` + "\n" + `{"step":3}` + "\n", nil, "line 2"},
		{"string value", `{"step":1,"x":"a"}` + "\n", nil, "line 1"},
		{"missing step", `{"x":1}` + "\n", nil, `no "step"`},
		{"null step", `{"step":null}` + "\n", nil, `no "step"`},
		{"fractional step", `{"step":1.5}` + "\n", nil, "not a non-negative integer"},
		{"negative step", `{"step":-1}` + "\n", nil, "not a non-negative integer"},
		{"array", `[1,2]` + "\n", nil, "line 1"},
		{"null line", "null\n", nil, "not an object"},
		{"empty key", `{"step":1,"":2}` + "\n", nil, "empty key"},
		{"overflow", `{"step":1,"x":1e999}` + "\n", nil, "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := Read(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrSyntax)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, rows)
		})
	}
}

func TestReadLongLine(t *testing.T) {
	in := `{"step":1,"k":"` + strings.Repeat("a", maxLine) + `"}` + "\n"
	_, err := Read(strings.NewReader(in))
	require.ErrorIs(t, err, ErrSyntax)
	assert.Contains(t, err.Error(), "longer than")
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"step":1,"a":0.5,"b":null}` + "\n"))
	f.Add([]byte(`{"step":2}` + "\n" + `{"step":3,"x":`))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte(`{"step":1e3,"a":-1e-300}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := Read(bytes.NewReader(data))
		if err != nil {
			require.ErrorIs(t, err, ErrSyntax)
			return
		}
		// What parses writes back and reads back the same (NaN for null).
		var buf bytes.Buffer
		l := NewLogger(&buf)
		for _, r := range rows {
			require.NoError(t, l.Log(r.Step, r.Values))
		}
		again, err := Read(&buf)
		require.NoError(t, err)
		require.Len(t, again, len(rows))
		for i := range rows {
			require.Equal(t, rows[i].Step, again[i].Step)
			require.Len(t, again[i].Values, len(rows[i].Values))
			for k, v := range rows[i].Values {
				w, ok := again[i].Values[k]
				require.True(t, ok, k)
				if math.IsNaN(v) {
					require.True(t, math.IsNaN(w), k)
				} else {
					require.Equal(t, v, w, k)
				}
			}
		}
	})
}

func BenchmarkLoggerLog(b *testing.B) {
	l := NewLogger(discard{})
	m := map[string]float64{}
	for i := range 40 {
		m["actor/metric_"+strconv.Itoa(i)] = float64(i) * 0.37
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Log(1, m); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"actor/entropy", `a"b`, "tab\t", "<&>", "é", "\xff", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendJSONString(nil, s)))
	})
}
