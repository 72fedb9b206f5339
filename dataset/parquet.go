package dataset

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// parquetBatchRows is how many rows are decoded per call into parquet-go:
// enough to amortise the call, small enough that a row group of long
// prompts is never held in memory whole.
const parquetBatchRows = 64

// ParquetReader reads Examples from a parquet file such as those verl's
// examples/data_preprocess scripts write (through Hugging Face datasets and
// pyarrow): prompt as LIST<STRUCT<content, role>>, reward_model and
// extra_info as structs (or JSON strings, as in Open-AgentRL's code sets).
//
// The file is read lazily, row group by row group and page by page, through
// io.ReaderAt: memory stays bounded by a few pages whatever the file size.
//
// Corrupt files give errors wrapping ErrCorruptFile, never a panic: the
// frame (magic, footer length) and the column chunk bounds are checked
// before parquet-go reads them — v0.32.0 allocates a corrupt footer length
// before checking it — and parquet-go is called behind recover (v0.32.0
// panics on some corrupt files; see the fuzz corpus). Page sizes inside a
// chunk are parquet-go's to check. A row that decodes but does not fit the layout gives
// a *RowError wrapping ErrMalformed, and the next call goes on with the next
// row; file-level errors stop the reader. Encrypted files are not supported.
type ParquetReader struct {
	name   string
	closer io.Closer
	file   *parquet.File
	opts   Options
	asm    *asmNode
	cols   [][]parquet.Value // scratch: one row's values per leaf column

	group    int          // index of the row group being read
	rows     parquet.Rows // rows of that group, nil between groups
	groupRow int64        // rows consumed in the current group
	buf      []parquet.Row
	bufLen   int
	bufPos   int
	row      int64 // next row number in the file
	err      error // sticky
}

// OpenParquet opens a parquet file; Close closes it.
func OpenParquet(path string, opts Options) (*ParquetReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dataset: %w", err)
	}
	pr, err := NewParquetReader(f, st.Size(), path, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	pr.closer = f
	return pr, nil
}

// NewParquetReader reads a parquet file of the given size through r; name
// labels errors and Example.Source.
func NewParquetReader(r io.ReaderAt, size int64, name string, opts Options) (*ParquetReader, error) {
	if err := checkFooter(r, size); err != nil {
		return nil, &RowError{File: name, Row: -1, Err: corrupt(err)}
	}
	var file *parquet.File
	err := safely(func() error {
		var err error
		file, err = parquet.OpenFile(r, size,
			parquet.SkipPageIndex(true),
			parquet.SkipBloomFilters(true),
		)
		return err
	})
	if err != nil {
		return nil, &RowError{File: name, Row: -1, Err: corrupt(err)}
	}
	if err := checkChunks(file, size); err != nil {
		return nil, &RowError{File: name, Row: -1, Err: corrupt(err)}
	}
	pr := &ParquetReader{name: name, file: file, opts: opts, buf: make([]parquet.Row, parquetBatchRows)}
	if err := pr.checkSchema(); err != nil {
		return nil, err
	}
	err = safely(func() error {
		var err error
		pr.asm, err = buildAssembler(file.Schema())
		return err
	})
	if err != nil {
		return nil, &RowError{File: name, Row: -1, Err: fmt.Errorf("%w: schema: %w", ErrMalformed, err)}
	}
	pr.cols = make([][]parquet.Value, pr.asm.nLeaves)
	return pr, nil
}

// checkFooter validates the file's frame — "PAR1" at both ends and a footer
// length that fits — before parquet-go sees it: parquet-go v0.32.0 allocates
// the footer's declared length before checking it against the file size, so a
// corrupt length of a few bytes made it allocate gigabytes (found by
// FuzzParquet; testdata/fuzz/FuzzParquet/280c6835d6996445).
func checkFooter(r io.ReaderAt, size int64) error {
	const frame = 4 + 4 + 4 // leading magic, footer length, trailing magic
	if size < frame {
		return fmt.Errorf("%d bytes is too short for a parquet file", size)
	}
	var head [4]byte
	var tail [8]byte
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return err
	}
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return err
	}
	if string(tail[4:]) == "PARE" {
		return errors.New("encrypted parquet files are not supported")
	}
	if string(head[:]) != "PAR1" || string(tail[4:]) != "PAR1" {
		return errors.New("missing PAR1 magic: not a parquet file, or truncated")
	}
	footer := int64(binary.LittleEndian.Uint32(tail[:4]))
	if footer == 0 || footer > size-frame {
		return fmt.Errorf("footer length %d does not fit in %d bytes", footer, size)
	}
	return nil
}

// checkChunks rejects column chunks that point outside the file, before any
// page is read: their sizes would otherwise drive allocations.
func checkChunks(file *parquet.File, size int64) error {
	md := file.Metadata()
	for g, rg := range md.RowGroups {
		if rg.NumRows < 0 {
			return fmt.Errorf("row group %d: %d rows", g, rg.NumRows)
		}
		for c, cc := range rg.Columns {
			m := cc.MetaData
			start := m.DataPageOffset
			if m.DictionaryPageOffset > 0 && m.DictionaryPageOffset < start {
				start = m.DictionaryPageOffset
			}
			if start < 4 || m.TotalCompressedSize < 0 || m.TotalUncompressedSize < 0 || m.NumValues < 0 ||
				m.TotalCompressedSize > size || start > size-m.TotalCompressedSize {
				return fmt.Errorf("row group %d column %d: chunk at %d of %d bytes lies outside the %d-byte file", g, c, start, m.TotalCompressedSize, size)
			}
		}
	}
	return nil
}

// checkSchema rejects, before any row is read, a file with no prompt column.
func (p *ParquetReader) checkSchema() error {
	key := p.opts.promptKey()
	var names []string
	for _, f := range p.file.Schema().Fields() {
		if f.Name() == key {
			return nil
		}
		names = append(names, f.Name())
	}
	slices.Sort(names)
	return &RowError{File: p.name, Row: -1, Field: key, Err: fmt.Errorf("%w: no such column (the file has %s)", ErrMalformed, strings.Join(names, ", "))}
}

// NumRows is the row count the file's footer declares.
func (p *ParquetReader) NumRows() int64 { return p.file.NumRows() }

// NumRowGroups is the number of row groups in the file.
func (p *ParquetReader) NumRowGroups() int { return len(p.file.RowGroups()) }

// Next returns the next example, or io.EOF after the last one.
func (p *ParquetReader) Next(ctx context.Context) (Example, error) {
	rec, row, err := p.nextRecord(ctx)
	if err != nil {
		return Example{}, err
	}
	ex, err := decodeRecord(rec, p.opts)
	if err != nil {
		return Example{}, rowError(p.name, row, 0, err)
	}
	ex.Source, ex.Row = p.name, row
	return ex, nil
}

// nextRecord returns the next row in the generic value model, and its number.
func (p *ParquetReader) nextRecord(ctx context.Context) (map[string]any, int64, error) {
	if p.err != nil {
		return nil, 0, p.err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if p.bufPos == p.bufLen {
		if err := p.fill(); err != nil {
			p.err = err
			return nil, 0, err
		}
	}
	raw := p.buf[p.bufPos]
	p.bufPos++
	row := p.row
	p.row++

	var rec map[string]any
	err := safely(func() error {
		var err error
		rec, err = assembleRow(p.asm, raw, p.cols)
		return err
	})
	if err != nil {
		p.err = &RowError{File: p.name, Row: row, Err: corrupt(err)}
		return nil, 0, p.err
	}
	return rec, row, nil
}

// fill reads the next rows into p.buf, moving to the next row group when the
// current one is done.
func (p *ParquetReader) fill() error {
	groups := p.file.RowGroups()
	for {
		if p.rows == nil {
			if p.group >= len(groups) {
				if p.row != p.file.NumRows() {
					return &RowError{File: p.name, Row: p.row, Err: corrupt(fmt.Errorf("footer declares %d rows, row groups hold %d", p.file.NumRows(), p.row))}
				}
				return io.EOF
			}
			g := groups[p.group]
			if err := safely(func() error { p.rows = g.Rows(); return nil }); err != nil {
				return &RowError{File: p.name, Row: p.row, Err: corrupt(fmt.Errorf("row group %d: %w", p.group, err))}
			}
			p.groupRow = 0
		}
		for i := range p.buf {
			p.buf[i] = p.buf[i][:0]
		}
		var n int
		err := safely(func() error {
			var err error
			n, err = p.rows.ReadRows(p.buf)
			return err
		})
		p.groupRow += int64(n)
		want := groups[p.group].NumRows()
		if err != nil && !errors.Is(err, io.EOF) {
			return &RowError{File: p.name, Row: p.row + int64(n), Err: corrupt(fmt.Errorf("row group %d: %w", p.group, err))}
		}
		if p.groupRow > want {
			return &RowError{File: p.name, Row: p.row, Err: corrupt(fmt.Errorf("row group %d yields more than its %d rows", p.group, want))}
		}
		if n > 0 {
			p.bufLen, p.bufPos = n, 0
			if err == nil || p.groupRow < want {
				return nil
			}
		}
		// io.EOF (possibly with the group's last rows): close the group.
		if p.groupRow < want {
			return &RowError{File: p.name, Row: p.row + int64(n), Err: corrupt(fmt.Errorf("row group %d ends after %d of its %d rows", p.group, p.groupRow, want))}
		}
		rows := p.rows
		p.rows = nil
		p.group++
		if cerr := safely(rows.Close); cerr != nil {
			return &RowError{File: p.name, Row: p.row + int64(n), Err: corrupt(cerr)}
		}
		if n > 0 {
			return nil
		}
	}
}

// Close releases the row group being read and closes the file opened by
// OpenParquet.
func (p *ParquetReader) Close() error {
	var err error
	if p.rows != nil {
		err = safely(p.rows.Close)
		p.rows = nil
	}
	if p.closer != nil {
		if cerr := p.closer.Close(); err == nil {
			err = cerr
		}
		p.closer = nil
	}
	if p.err == nil {
		p.err = errors.New("dataset: reader closed")
	}
	return err
}

// safely runs f and turns a panic into an error: parquet-go panics on some
// corrupt inputs (see the fuzz tests), and no panic may leave this package.
func safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parquet-go panicked: %v", r)
		}
	}()
	return f()
}

func corrupt(err error) error {
	return fmt.Errorf("%w: %w", ErrCorruptFile, err)
}
