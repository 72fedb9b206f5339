package bm25_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cputime"
	"github.com/agentrl/agentrl/tool/search"
	"github.com/agentrl/agentrl/tool/search/bm25"
	"github.com/agentrl/agentrl/tool/search/encyclopedia"
)

// benchCorpus returns the shipped corpus (n = 0) or a generated
// encyclopedia of about n passages, and two sets of queries: its
// questions as they are, and the names their subjects' passages are
// titled with (what a search agent learns to query).
func benchCorpus(b *testing.B, n int) (corpus []byte, questions, names []string) {
	cfg := encyclopedia.DefaultConfig()
	if n > 0 {
		cfg = encyclopedia.Scaled(n, 7)
	}
	e, err := encyclopedia.Generate(cfg)
	require.NoError(b, err)
	var buf bytes.Buffer
	require.NoError(b, e.WriteCorpus(&buf))
	title := map[string]string{}
	for _, p := range e.Passages {
		title[p.ID] = p.Title
	}
	for _, q := range e.Questions {
		questions = append(questions, q.Text)
		names = append(names, title[q.Evidence[0]])
	}
	return buf.Bytes(), questions, names
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkRetrieve measures /retrieve over HTTP (the client's Do, one
// request at a time) against the embedded server, for the shipped corpus
// and a generated one of 100k passages, its index in memory and on disk,
// the questions or the subjects' names as queries, 1 and 64 queries per
// request: queries/s, the process's CPU time (client and server) per
// query, and the index's size (bytes on disk; the Go heap it holds, in
// memory).
//
//	go test -run '^$' -bench Retrieve -benchtime 3s ./tool/search/bm25/
func BenchmarkRetrieve(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"shipped", 0}, {"100k", 100_000}} {
		b.Run(size.name, func(b *testing.B) {
			corpus, questions, names := benchCorpus(b, size.n)
			for _, store := range []string{"memory", "disk"} {
				cfg := bm25.Config{}
				if store == "disk" {
					cfg.Dir = filepath.Join(b.TempDir(), "idx")
				}
				before := heapInUse()
				ix, err := bm25.Build(context.Background(), bytes.NewReader(corpus), cfg)
				require.NoError(b, err)
				heap := heapInUse() - before
				disk, err := ix.DiskBytes()
				require.NoError(b, err)
				srv, err := bm25.NewServer(ix, bm25.ServerConfig{})
				require.NoError(b, err)
				hs := httptest.NewServer(srv)
				c, err := search.NewClient(search.ClientConfig{URL: hs.URL, BatchWait: -1, MaxAttempts: 1})
				require.NoError(b, err)
				for _, batch := range []int{1, 64} {
					for _, qs := range []struct {
						name    string
						queries []string
					}{{"question", questions}, {"name", names}} {
						queries := qs.queries
						b.Run(fmt.Sprintf("%s/%s/batch%d", store, qs.name, batch), func(b *testing.B) {
							next := 0
							cpu0 := cputime.Self()
							for b.Loop() {
								q := make([]string, batch)
								for i := range q {
									q[i] = queries[next%len(queries)]
									next++
								}
								if _, err := c.Do(context.Background(), search.Request{Queries: q, TopK: 3, ReturnScores: true}); err != nil {
									b.Fatal(err)
								}
							}
							b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "queries/s")
							b.ReportMetric(float64((cputime.Self()-cpu0).Microseconds())/float64(b.N*batch), "cpu-µs/query")
							b.ReportMetric(float64(disk), "disk-bytes")
							b.ReportMetric(float64(heap), "heap-bytes")
							b.ReportMetric(float64(len(corpus)), "corpus-bytes")
						})
					}
				}
				hs.Close()
				require.NoError(b, ix.Close())
			}
		})
	}
}

// BenchmarkBuild measures indexing the shipped corpus and 100k passages,
// in memory.
//
//	go test -run '^$' -bench Build -benchtime 1x ./tool/search/bm25/
func BenchmarkBuild(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"shipped", 0}, {"100k", 100_000}} {
		b.Run(size.name, func(b *testing.B) {
			corpus, _, _ := benchCorpus(b, size.n)
			cpu0 := cputime.Self()
			for b.Loop() {
				ix, err := bm25.Build(context.Background(), bytes.NewReader(corpus), bm25.Config{})
				require.NoError(b, err)
				require.NoError(b, ix.Close())
			}
			docs := float64(bytes.Count(corpus, []byte("\n"))) * float64(b.N)
			b.ReportMetric(docs/b.Elapsed().Seconds(), "docs/s")
			b.ReportMetric(float64((cputime.Self()-cpu0).Microseconds())/docs, "cpu-µs/doc")
		})
	}
}
