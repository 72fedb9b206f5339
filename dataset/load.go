package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// Reader yields Examples one at a time; Next returns io.EOF after the last.
// *ParquetReader and *JSONLReader implement it.
type Reader interface {
	Next(ctx context.Context) (Example, error)
	Close() error
}

// Open opens a data file by its extension: ".parquet" for parquet,
// ".jsonl" or ".ndjson" for JSON Lines.
func Open(path string, opts Options) (Reader, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet":
		return OpenParquet(path, opts)
	case ".jsonl", ".ndjson":
		return OpenJSONL(path, opts)
	}
	return nil, fmt.Errorf("dataset: %s: unknown extension (want .parquet, .jsonl or .ndjson)", path)
}

// ReadAll reads every example of r, stopping at the first error.
func ReadAll(ctx context.Context, r Reader) ([]Example, error) {
	var out []Example
	if c, ok := r.(interface{ NumRows() int64 }); ok {
		// The footer's count is only a hint: a corrupt file may claim
		// anything, so it is capped.
		out = make([]Example, 0, min(max(c.NumRows(), 0), 1<<20))
	}
	for {
		ex, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ex)
	}
}

// Load reads every example of the given files, in order, as verl's
// RLHFDataset concatenates data.train_files. The first malformed row stops
// it with an error naming the file, row and field.
func Load(ctx context.Context, opts Options, paths ...string) ([]Example, error) {
	var all []Example
	for _, p := range paths {
		r, err := Open(p, opts)
		if err != nil {
			return nil, err
		}
		exs, err := ReadAll(ctx, r)
		cerr := r.Close()
		if err != nil {
			return nil, err
		}
		if cerr != nil {
			return nil, fmt.Errorf("dataset: %s: %w", p, cerr)
		}
		all = append(all, exs...)
	}
	return all, nil
}
