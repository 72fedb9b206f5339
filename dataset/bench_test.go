package dataset

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkReadParquet10k reads a 10,000-row verl-layout file (written by
// parquet-go, snappy, row groups of 1,000) into Examples.
//
//	go test ./dataset -run '^$' -bench ReadParquet10k -benchtime 20x
//
// The reference is hyparquet (JS) reading the same file:
// DATASET_BENCH_FILE=/some/dir/bench10k.parquet go test ./dataset -run TestWriteBenchFile
// writes it; testdata/bench_hyparquet.mjs reads it.
func BenchmarkReadParquet10k(b *testing.B) {
	const rows = 10_000
	path := filepath.Join(b.TempDir(), "bench10k.parquet")
	writeParquetGoFile(b, path, rows, 1_000)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		pr, err := OpenParquet(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		exs, err := ReadAll(ctx, pr)
		if err != nil || len(exs) != rows {
			b.Fatalf("read %d rows: %v", len(exs), err)
		}
		pr.Close()
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkReadJSONL10k reads the same 10,000 rows as JSON Lines.
func BenchmarkReadJSONL10k(b *testing.B) {
	const rows = 10_000
	pq := filepath.Join(b.TempDir(), "bench10k.parquet")
	writeParquetGoFile(b, pq, rows, 1_000)
	exs, err := Load(context.Background(), Options{}, pq)
	require.NoError(b, err)
	path := filepath.Join(b.TempDir(), "bench10k.jsonl")
	require.NoError(b, WriteJSONLFile(path, exs))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		got, err := Load(ctx, Options{}, path)
		if err != nil || len(got) != rows {
			b.Fatalf("read %d rows: %v", len(got), err)
		}
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// TestWriteBenchFile writes the benchmark's parquet file where
// DATASET_BENCH_FILE says, for the comparison with hyparquet.
func TestWriteBenchFile(t *testing.T) {
	path := os.Getenv("DATASET_BENCH_FILE")
	if path == "" {
		t.Skip("set DATASET_BENCH_FILE to write the benchmark file")
	}
	writeParquetGoFile(t, path, 10_000, 1_000)
}
