// Package metrics is the training metrics log: one JSON object per step
// in a JSON Lines file ({"step":N, then the metric keys in byte order}),
// written by Logger as the trainers' metrics sink
// (agentrl.TrainerParts.Metrics, agentrl.SFTParts.Metrics) and read back
// by Read and ReadFile, for plots (package metrics/plot) and analysis.
// Keys follow verl's metric names.
//
// A log file is one run's: Open refuses a log that another Logger is
// writing, or that holds the rows of an earlier run, unless the caller
// resumes that run (Options.Resume), whose log then loses the rows
// logged after the checkpoint it resumes from, so that every step has
// one row.
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

	"github.com/agentrl/agentrl/internal/filelock"
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
	// ErrOwned is wrapped by Open's error for a log that belongs to
	// another run: one another Logger holds open, or, for a new run, one
	// that holds rows. Resume that run (Options.Resume) to continue its
	// log, or log to another file.
	ErrOwned = errors.New("metrics: log belongs to another run")
)

// StepKey is the key of the step number, the first key of every line
// of a metrics log.
const StepKey = "step"

// maxLine bounds the length of one line a reader accepts.
const maxLine = 16 << 20

// Options configures Open. The zero value opens the log of a new run
// and writes each line without an fsync: it survives a crash of the
// process, not a power failure.
type Options struct {
	// Sync makes every Log call fsync the file after writing its line, so
	// that a line survives a power failure, not only a crash of the
	// process. It costs a disk flush per step.
	Sync bool
	// Resume opens the log of a run being resumed from a checkpoint,
	// which holds that run's rows, instead of the log of a new run, which
	// must hold none. The rows of steps after ResumeStep — logged by the
	// interrupted run after its checkpoint, and logged again by the
	// resumed run — are cut away first, so that every step has one row,
	// the resumed run's.
	Resume bool
	// ResumeStep is, with Resume, the step of the checkpoint the run
	// resumes from (agentrl.RunConfig.OnResume's step;
	// checkpoint.Root.Latest's), or −1 for a run that found no
	// checkpoint and starts again from step 0, whose rows all go.
	ResumeStep int
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
	// removed is the number of rows Open cut away.
	removed int
}

// NewLogger returns a logger that writes lines to w. Close does not
// close w.
func NewLogger(w io.Writer) *Logger {
	return &Logger{w: w}
}

// Open opens the JSON Lines metrics log at path, creating it when
// missing, for the run Options describes, and locks it until Close
// (package internal/filelock: flock(2) on Unix, LockFileEx on Windows;
// the kernel drops the lock of a process that ends), so that no other
// Logger, of this process or another, writes it meanwhile.
//
// The rows of two runs never mix: a log that another Logger holds open
// is refused with an error wrapping ErrOwned, and so, for a new run (no
// Options.Resume), is a log that holds rows, which belong to another
// run; a refused log is left as it is. A resumed run's log loses the rows
// after Options.ResumeStep. In both cases a line cut short by a crash
// mid-write (a file not ending in a newline) is truncated away first, so
// that the next line starts clean. The file is then written in append
// mode. Logger.Removed tells how many rows Open cut away.
//
// Where the file system takes no locks, Open goes on without one; the
// rows then stay apart only as long as no two runs open the log at
// once, which package runlock's lock on the run folder makes sure of.
func Open(path string, opts Options) (*Logger, error) {
	if opts.Resume && opts.ResumeStep < -1 {
		return nil, fmt.Errorf("metrics: open log %s: Options.ResumeStep %d, want a step ≥ 0 or −1 (no checkpoint)", path, opts.ResumeStep)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics: open log: %w", err)
	}
	fail := func(err error) (*Logger, error) {
		f.Close() // drops the lock too
		return nil, err
	}
	switch err := filelock.TryLock(f); {
	case errors.Is(err, filelock.ErrLocked):
		return fail(fmt.Errorf("%w: %s is open in another Logger (of this process or another) that is writing it", ErrOwned, path))
	case err != nil && !errors.Is(err, filelock.ErrUnsupported):
		return fail(fmt.Errorf("metrics: open log %s: %w", path, err))
	}
	lines, clean, err := scanLog(f)
	if err != nil {
		return fail(fmt.Errorf("metrics: open log %s: %w", path, err))
	}
	cut := clean
	removed := 0
	if opts.Resume {
		for i, ln := range lines {
			if ln.step > opts.ResumeStep {
				cut, removed = ln.start, len(lines)-i
				break
			}
		}
	} else if len(lines) > 0 {
		return fail(fmt.Errorf("%w: %s already holds %s", ErrOwned, path, describeRows(len(lines), lines[0].step, lines[len(lines)-1].step)))
	}
	st, err := f.Stat()
	if err != nil {
		return fail(fmt.Errorf("metrics: open log %s: %w", path, err))
	}
	if cut < st.Size() {
		if err := f.Truncate(cut); err != nil {
			return fail(fmt.Errorf("metrics: open log %s: %w", path, err))
		}
		if err := f.Sync(); err != nil {
			return fail(fmt.Errorf("metrics: open log %s: %w", path, err))
		}
	}
	return &Logger{w: f, file: f, sync: opts.Sync, removed: removed}, nil
}

// logLine is a row of a log file: its step and where its line starts.
type logLine struct {
	step  int
	start int64
}

// scanLog reads the rows of the log file f with their offsets, and the
// length of its clean part: the file up to its last newline, without a
// last line that a crash cut short. A malformed complete line is an
// error wrapping ErrSyntax that names its line number.
func scanLog(f *os.File) ([]logLine, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	br := bufio.NewReader(io.NewSectionReader(f, 0, st.Size()))
	var lines []logLine
	var off int64
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("line %d: %w", lineNo, err)
		}
		if errors.Is(err, io.EOF) {
			// An unterminated last line is torn, whatever it holds.
			return lines, off, nil
		}
		if len(bytes.TrimSpace(line)) > 0 {
			row, perr := parseLine(line)
			if perr != nil {
				return nil, 0, fmt.Errorf("line %d: %w", lineNo, perr)
			}
			lines = append(lines, logLine{step: row.Step, start: off})
		}
		off += int64(len(line)) + 1
	}
}

// describeRows describes n rows of steps first to last: "1 row (step 4)",
// "3 rows (steps 0…2)".
func describeRows(n, first, last int) string {
	if n == 1 {
		return fmt.Sprintf("1 row (step %d)", first)
	}
	return fmt.Sprintf("%d rows (steps %d…%d)", n, first, last)
}

// Removed is the number of rows Open cut from a resumed run's log: those
// after Options.ResumeStep.
func (l *Logger) Removed() int { return l.removed }

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
