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

	// Reopen and append, as a resumed run does.
	l, err = Open(path, Options{})
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
	for name, tc := range map[string]struct{ content, want string }{
		"torn tail":    {`{"step":1,"a":1}` + "\n" + `{"step":2,"a":`, `{"step":1,"a":1}` + "\n"},
		"only torn":    {`{"step":1,"a`, ""},
		"clean":        {`{"step":1,"a":1}` + "\n", `{"step":1,"a":1}` + "\n"},
		"long torn":    {`{"step":1}` + "\n" + strings.Repeat("x", 200<<10), `{"step":1}` + "\n"},
		"empty":        {"", ""},
		"no newline 2": {strings.Repeat("y", 70<<10), ""},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o644))
			l, err := Open(path, Options{})
			require.NoError(t, err)
			require.NoError(t, l.Close())
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
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
