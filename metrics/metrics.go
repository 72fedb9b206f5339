// Package metrics is the training metrics log: one JSON object per step
// in a JSON Lines file ({"step":N, then the metric keys in byte order}),
// written by Logger as the trainers' metrics sink
// (agentrl.TrainerParts.Metrics, agentrl.SFTParts.Metrics) and read back
// by Read and ReadFile, for plots (package metrics/plot) and analysis.
// Keys follow verl's metric names.
package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
)

// Errors of the metrics log.
var (
	// ErrInvalidRow reports a metrics record that cannot be written: a
	// negative step, an empty key or the reserved key "step".
	ErrInvalidRow = errors.New("metrics: invalid record")
	// ErrSyntax reports a line of a metrics log that is not a JSON
	// object of a non-negative integer "step" and numbers or nulls.
	ErrSyntax = errors.New("metrics: malformed log")
	// ErrClosed reports a write to a closed Logger.
	ErrClosed = errors.New("metrics: log closed")
)

// StepKey is the key of the step number, the first key of every line
// of a metrics log.
const StepKey = "step"

// maxLine bounds the length of one line a reader accepts.
const maxLine = 16 << 20

// Options configures Open. The zero value writes each line without an
// fsync: it survives a crash of the process, not a power failure.
type Options struct {
	// Sync makes every Log call fsync the file after writing its line, so
	// that a line survives a power failure, not only a crash of the
	// process. It costs a disk flush per step.
	Sync bool
}

// Logger writes metrics as JSON Lines: one JSON object per training
// step, {"step":N, then the metric keys in byte order}. It is safe for
// concurrent use. Each line goes to the writer in one Write call; a file
// opened by Open is in append mode and unbuffered, so every
// completed Log is in the file (the OS page cache) when Log returns.
//
// JSON has no NaN or infinities: a non-finite value is written as null
// (Read reads null back as NaN), so a diverged run still logs
// its other metrics and the log stays valid JSON.
type Logger struct {
	mu     sync.Mutex
	w      io.Writer
	file   *os.File
	sync   bool
	buf    []byte
	keys   []string
	closed bool
}

// NewLogger returns a logger that writes lines to w. Close does not
// close w.
func NewLogger(w io.Writer) *Logger {
	return &Logger{w: w}
}

// Open opens (creating it when needed) the JSON Lines metrics log
// at path for appending, as a resumed run continues its log. A line cut
// short by a crash mid-write (a file not ending in a newline) is truncated
// away first, so the next line starts clean.
func Open(path string, opts Options) (*Logger, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics: open log: %w", err)
	}
	if err := truncateTornLine(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("metrics: open log %s: %w", path, err)
	}
	return &Logger{w: f, file: f, sync: opts.Sync}, nil
}

// truncateTornLine cuts f after its last newline when it does not end in
// one.
func truncateTornLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if size == 0 {
		return nil
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	// Scan backwards for the last newline, a chunk at a time.
	chunk := make([]byte, 64<<10)
	end := size
	for end > 0 {
		start := max(end-int64(len(chunk)), 0)
		b := chunk[:end-start]
		if _, err := f.ReadAt(b, start); err != nil {
			return err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return f.Truncate(start + int64(i) + 1)
		}
		end = start
	}
	return f.Truncate(0)
}

// Log writes the metrics of one step as one line. Keys must be non-empty
// and must not be "step". It returns ErrInvalidRow for bad input, the
// writer's error for a failed write, and ErrClosed after Close.
func (l *Logger) Log(step int, metrics map[string]float64) error {
	if step < 0 {
		return fmt.Errorf("%w: step %d < 0", ErrInvalidRow, step)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.keys = l.keys[:0]
	for k := range metrics {
		if k == "" || k == StepKey {
			return fmt.Errorf("%w: step %d: key %q is empty or reserved", ErrInvalidRow, step, k)
		}
		l.keys = append(l.keys, k)
	}
	slices.Sort(l.keys)
	b := append(l.buf[:0], `{"step":`...)
	b = strconv.AppendInt(b, int64(step), 10)
	for _, k := range l.keys {
		b = append(b, ',')
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONNumber(b, metrics[k])
	}
	b = append(b, '}', '\n')
	l.buf = b
	if _, err := l.w.Write(b); err != nil {
		return fmt.Errorf("metrics: write metrics of step %d: %w", step, err)
	}
	if l.sync && l.file != nil {
		if err := l.file.Sync(); err != nil {
			return fmt.Errorf("metrics: sync metrics of step %d: %w", step, err)
		}
	}
	return nil
}

// Close closes the file opened by Open (after an fsync); for a
// logger from NewLogger it only stops further writes.
func (l *Logger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.file == nil {
		return nil
	}
	errSync := l.file.Sync()
	errClose := l.file.Close()
	return errors.Join(errSync, errClose)
}

// appendJSONNumber appends v as a JSON number, or null when v is NaN or
// infinite.
func appendJSONNumber(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	// 'g' with the shortest precision is valid JSON for every finite v
	// ("1e+21", "5e-324", "0.1") and round-trips exactly.
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			plain = false
			break
		}
	}
	if plain { // the common case: metric names are printable ASCII
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, err := json.Marshal(s) // escapes like encoding/json; a string always marshals
	if err != nil {
		return append(b, `""`...)
	}
	return append(b, q...)
}

// Row is one line of a metrics log.
type Row struct {
	// Step is the training step.
	Step int
	// Values holds the metrics of the step; null reads as NaN.
	Values map[string]float64
}

// Read reads a JSON Lines metrics log as written by
// Logger, in file order. Blank lines are skipped. A last line without
// its newline that does not parse is the trace of a crash mid-write and is
// ignored; every other malformed line is an error wrapping
// ErrSyntax that names the line number.
func Read(r io.Reader) ([]Row, error) {
	br := bufio.NewReader(r)
	var rows []Row
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return rows, fmt.Errorf("metrics: log line %d: %w", lineNo, err)
		}
		terminated := err == nil
		if len(bytes.TrimSpace(line)) > 0 {
			row, perr := parseLine(line)
			switch {
			case perr == nil:
				rows = append(rows, row)
			case !terminated:
				// torn final line: ignored
			default:
				return rows, fmt.Errorf("metrics: log line %d: %w", lineNo, perr)
			}
		}
		if !terminated {
			return rows, nil
		}
	}
}

// readLine reads one line without its newline; it returns io.EOF with the
// bytes of an unterminated last line, and an error for a line longer than
// maxLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrSyntax, maxLine)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}

// parseLine parses one JSON object line.
func parseLine(line []byte) (Row, error) {
	var raw map[string]*float64
	if err := json.Unmarshal(line, &raw); err != nil {
		return Row{}, fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	if raw == nil {
		return Row{}, fmt.Errorf("%w: not an object", ErrSyntax)
	}
	stepVal, ok := raw[StepKey]
	if !ok || stepVal == nil {
		return Row{}, fmt.Errorf("%w: no %q", ErrSyntax, StepKey)
	}
	s := *stepVal
	if s < 0 || s != math.Trunc(s) || s > 1<<53 {
		return Row{}, fmt.Errorf("%w: step %v is not a non-negative integer", ErrSyntax, s)
	}
	row := Row{Step: int(s), Values: make(map[string]float64, len(raw)-1)}
	for k, v := range raw {
		if k == StepKey {
			continue
		}
		if k == "" {
			return Row{}, fmt.Errorf("%w: empty key", ErrSyntax)
		}
		if v == nil {
			row.Values[k] = math.NaN()
		} else {
			row.Values[k] = *v
		}
	}
	return row, nil
}

// ReadFile reads the metrics log at path (see Read).
func ReadFile(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("metrics: read log: %w", err)
	}
	defer f.Close()
	rows, err := Read(f)
	if err != nil {
		return rows, fmt.Errorf("metrics: log %s: %w", path, err)
	}
	return rows, nil
}
