package dataset

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/agentrl/agentrl/internal/atomicfile"
)

const defaultMaxLineBytes = 64 << 20

// JSONLReader reads Examples from JSON Lines: one JSON object per line, in
// the same shape as a verl parquet row. Blank lines are skipped; a trailing
// "\r" is ignored.
//
// A line that is not a JSON object, or an object that does not fit the
// layout, gives a *RowError that names the line (and wraps ErrMalformed);
// the next call to Next goes on with the following line. Read errors of the
// underlying reader and lines over Options.MaxLineBytes stop the reader.
type JSONLReader struct {
	name   string
	r      *bufio.Reader
	closer io.Closer
	opts   Options
	line   int64 // lines consumed so far
	row    int64 // records decoded or rejected so far
	err    error // sticky
	buf    []byte
}

// NewJSONLReader reads JSON Lines from r; name labels errors and
// Example.Source.
func NewJSONLReader(r io.Reader, name string, opts Options) *JSONLReader {
	return &JSONLReader{name: name, r: bufio.NewReaderSize(r, 64<<10), opts: opts}
}

// OpenJSONL opens a JSON Lines file; Close closes it.
func OpenJSONL(path string, opts Options) (*JSONLReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	jr := NewJSONLReader(f, path, opts)
	jr.closer = f
	return jr, nil
}

// Next returns the next example, or io.EOF after the last one.
func (j *JSONLReader) Next(ctx context.Context) (Example, error) {
	if j.err != nil {
		return Example{}, j.err
	}
	if err := ctx.Err(); err != nil {
		return Example{}, err
	}
	maxLen := j.opts.MaxLineBytes
	if maxLen <= 0 {
		maxLen = defaultMaxLineBytes
	}
	for {
		line, err := j.readLine(maxLen)
		if err != nil {
			j.err = err
			return Example{}, err
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			continue
		}
		row := j.row
		j.row++
		v, perr := parseJSON(trimmed)
		if perr != nil {
			return Example{}, &RowError{File: j.name, Row: row, Line: j.line, Err: fmt.Errorf("%w: not JSON: %v", ErrMalformed, perr)}
		}
		rec, ok := v.(map[string]any)
		if !ok {
			return Example{}, &RowError{File: j.name, Row: row, Line: j.line, Err: fmt.Errorf("%w: want JSON object, got %s", ErrMalformed, typeName(v))}
		}
		ex, derr := decodeRecord(rec, j.opts)
		if derr != nil {
			return Example{}, rowError(j.name, row, j.line, derr)
		}
		ex.Source, ex.Row = j.name, row
		return ex, nil
	}
}

// readLine returns the next line without its "\n", io.EOF at the end of the
// input.
func (j *JSONLReader) readLine(maxLen int) ([]byte, error) {
	j.buf = j.buf[:0]
	for {
		chunk, err := j.r.ReadSlice('\n')
		if len(j.buf)+len(chunk) > maxLen+1 { // +1: the newline itself
			return nil, &RowError{File: j.name, Row: j.row, Line: j.line + 1,
				Err: fmt.Errorf("%w: line longer than %d bytes", ErrMalformed, maxLen)}
		}
		j.buf = append(j.buf, chunk...)
		switch {
		case err == nil:
			j.line++
			return trimEOL(j.buf), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(j.buf) == 0 {
				return nil, io.EOF
			}
			j.line++ // last line without a newline
			return trimEOL(j.buf), nil
		default:
			return nil, fmt.Errorf("dataset: %s: line %d: %w", j.name, j.line+1, err)
		}
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// Close closes the file opened by OpenJSONL; it does nothing for a reader
// made by NewJSONLReader.
func (j *JSONLReader) Close() error {
	if j.closer == nil {
		return nil
	}
	c := j.closer
	j.closer = nil
	return c.Close()
}

// Record returns the example as a verl-shaped record in the generic value
// model — the inverse of reading: reading Record's JSON gives back the same
// Example (but for Source and Row). Empty strings and nil maps are left out.
func (e Example) Record() map[string]any {
	rec := make(map[string]any, len(e.Extra)+6)
	for k, v := range e.Extra {
		rec[k] = v
	}
	prompt := make([]any, len(e.Prompt))
	for i, m := range e.Prompt {
		msg := make(map[string]any, len(m.Extra)+2)
		for k, v := range m.Extra {
			msg[k] = v
		}
		msg["role"] = m.Role
		msg["content"] = m.Content
		prompt[i] = msg
	}
	rec["prompt"] = prompt
	setString(rec, "data_source", e.DataSource)
	setString(rec, "ability", e.Ability)
	setString(rec, "agent_name", e.AgentName)
	rm := e.RewardModel
	if rm.Style != "" || rm.GroundTruth.Kind != GroundTruthNone || rm.Extra != nil {
		obj := make(map[string]any, len(rm.Extra)+2)
		for k, v := range rm.Extra {
			obj[k] = v
		}
		setString(obj, "style", rm.Style)
		if rm.GroundTruth.Kind != GroundTruthNone {
			obj["ground_truth"] = rm.GroundTruth.Value
		}
		rec["reward_model"] = obj
	}
	if e.ExtraInfo != nil {
		rec["extra_info"] = e.ExtraInfo
	}
	return rec
}

func setString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// WriteJSONL writes examples as JSON Lines in verl's shape (see
// Example.Record), one object per line, keys sorted. A value JSON cannot
// hold (NaN, ±Inf) is an error naming the example.
func WriteJSONL(w io.Writer, exs []Example) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i, ex := range exs {
		if err := enc.Encode(ex.Record()); err != nil {
			return fmt.Errorf("dataset: writing example %d (%s row %d): %w", i, ex.Source, ex.Row, err)
		}
	}
	return bw.Flush()
}

// WriteJSONLFile writes examples to a JSON Lines file at path,
// atomically and durably (internal/atomicfile): a reader sees the old file
// or the whole new one, never a part.
func WriteJSONLFile(path string, exs []Example) error {
	if err := atomicfile.Write(path, 0o644, func(w io.Writer) error { return WriteJSONL(w, exs) }); err != nil {
		return fmt.Errorf("dataset: %w", err)
	}
	return nil
}
