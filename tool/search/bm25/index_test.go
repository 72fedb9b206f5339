package bm25_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/tool/search"
	"github.com/agentrl/agentrl/tool/search/bm25"
)

// threeDocs is the corpus of the hand computation. After bleve's English
// analyzer (the title's quotes dropped, nothing stemmed or stopped here):
//
//	d0 "Fox": fox fox fox den            length 4, tf(fox) = 3
//	d1 "Hen": hen hen fox                length 3, tf(hen) = 2, tf(fox) = 1
//	d2 "Owl": owl owl barn owl tree night length 6, tf(owl) = 3
const threeDocs = `{"id": "d0", "contents": "\"Fox\"\nfox fox den"}
{"id": "d1", "contents": "\"Hen\"\nhen fox"}
{"id": "d2", "contents": "\"Owl\"\nowl barn owl tree night"}
`

func build(t *testing.T, corpus string, cfg bm25.Config) *bm25.Index {
	t.Helper()
	ix, err := bm25.Build(context.Background(), strings.NewReader(corpus), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ix.Close() })
	return ix
}

// TestScoresByHand checks bleve's BM25 scores against a computation by
// hand of bleve v2.6.3's formula (search/scorer/scorer_term.go,
// search/searcher/search_term.go, search/scorer/scorer_disjunction.go),
// done in Python (float64, as below) for this 3-document corpus:
//
//	score(d, q) = coord · Σ_{t ∈ q, t ∈ d} w_t · idf_t · k1·√tf / (√tf + k1·(1 − b + b·dl/avgdl))
//	idf_t   = ln(1 + (N − n_t + 0.5) / (n_t + 0.5))           N documents, n_t containing t
//	w_t     = idf_t / √(Σ_{u ∈ q} idf_u²)                      the query weight × query norm
//	coord   = (terms of q in d) / (terms of q)
//	dl      = 1 / float32(1/√length)²                          the length, through a float32 norm
//	avgdl   = ⌈distinct terms of the field / N⌉                 bleve's "field cardinality"
//	k1 = 1.2, b = 0.75                                          search.BM25_k1, search.BM25_b
//
// It differs from Lucene's BM25 (pyserini's, which Search-R1's BM25
// retriever uses): tf enters as √tf, the numerator has k1 where Lucene
// has k1 + 1, avgdl counts distinct terms rather than tokens, and the
// query norm and coord factors of Lucene's classic similarity remain. The
// corpus has 7 distinct terms and 13 tokens, so avgdl is ⌈7/3⌉ = 3, not
// ⌈13/3⌉ = 5. Worked through for q = "fox", d0: n = 2, idf = ln 1.6 =
// 0.47000; w = 1; √tf = √3; dl = 4; 1 − b + b·4/3 = 1.25;
// score = 0.47000 · 1.2·1.73205 / (1.73205 + 1.5) = 0.30225.
func TestScoresByHand(t *testing.T) {
	ix := build(t, threeDocs, bm25.Config{})
	type hit struct {
		id    string
		score float64
	}
	tests := []struct {
		query string
		want  []hit
	}{
		{"fox", []hit{{"d0", 0.30224902295062}, {"d1", 0.2563656121875117}}},
		// Two terms, one in each of d0/d1 and d2: coord 1/2 each.
		{"fox owl", []hit{{"d2", 0.23987668307201293}, {"d0", 0.06530654407440892}, {"d1", 0.055392576584844214}}},
		// A term in no document still weighs in the query norm (n = 0,
		// idf = ln 8) and the coord.
		{"fox zebra", []hit{{"d0", 0.033317323641684216}, {"d1", 0.02825953244932503}}},
		{"hen fox", []hit{{"d1", 0.684984343830957}, {"d0", 0.06530654407440892}}},
		{"the of", nil}, // stop words only: nothing to match
		{"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			hits, err := ix.Search(context.Background(), tt.query, 10)
			require.NoError(t, err)
			require.Len(t, hits, len(tt.want))
			for i, w := range tt.want {
				assert.Equal(t, w.id, hits[i].Document.ID, "rank %d", i)
				assert.True(t, hits[i].HasScore)
				assert.InEpsilon(t, w.score, hits[i].Score, 1e-12, "rank %d (%s)", i, w.id)
			}
		})
	}
}

// TestSearchReturnsRows checks that hits are the corpus rows, every field
// kept, compacted, and that topK cuts the list.
func TestSearchReturnsRows(t *testing.T) {
	corpus := `{"id": 7, "contents": "\"Alpha\"\nalpha beta", "extra": {"k": [1, 2]}}
{"contents": "\"Beta\"\nbeta gamma"}
`
	ix := build(t, corpus, bm25.Config{})
	hits, err := ix.Search(context.Background(), "alpha", 5)
	require.NoError(t, err)
	require.Len(t, hits, 1)
	assert.Equal(t, "7", hits[0].Document.ID)
	assert.Equal(t, `"Alpha"`, hits[0].Document.Title())
	assert.Equal(t, "alpha beta", hits[0].Document.Text())
	assert.JSONEq(t, `{"id": 7, "contents": "\"Alpha\"\nalpha beta", "extra": {"k": [1, 2]}}`, string(hits[0].Document.Raw))
	assert.Equal(t, `{"id":7,"contents":"\"Alpha\"\nalpha beta","extra":{"k":[1,2]}}`, string(hits[0].Document.Raw))

	// "beta": tf 2 in the second row (title and text), 1 in the first.
	hits, err = ix.Search(context.Background(), "beta", 1)
	require.NoError(t, err)
	require.Len(t, hits, 1)
	assert.Equal(t, "", hits[0].Document.ID)
	assert.Equal(t, `"Beta"`, hits[0].Document.Title())

	hits, err = ix.Search(context.Background(), "beta", 0)
	require.NoError(t, err)
	assert.Empty(t, hits)
}

// TestTiesInCorpusOrder checks the order of equal scores in memory: rows
// 2, 5 and 11 are the same text, in three segments, and must come back in
// row order.
func TestTiesInCorpusOrder(t *testing.T) {
	var b strings.Builder
	for i := range 12 {
		text := "filler words here"
		if i == 2 || i == 5 || i == 11 {
			text = "lantern harbour"
		}
		b.WriteString(`{"id": "` + strconv.Itoa(i) + `", "contents": "\"T\"\n` + text + `"}` + "\n")
	}
	ix := build(t, b.String(), bm25.Config{BatchSize: 5})
	hits, err := ix.Search(context.Background(), "lantern", 10)
	require.NoError(t, err)
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.Document.ID)
	}
	assert.Equal(t, []string{"2", "5", "11"}, ids)
	assert.Equal(t, hits[0].Score, hits[2].Score)
}

// TestTiesInOneBatch: 20 rows of the same text among 60, indexed in one
// batch (whose documents bleve numbers in the order its concurrent
// analysis finishes), come back in row order from every build, in
// memory and on disk: all of them (the ties end before the cut), and the
// first 5 (the cut falls among the ties, so the next row ties with the
// last one returned).
func TestTiesInOneBatch(t *testing.T) {
	var b strings.Builder
	var tied []string
	for i := range 60 {
		text := "filler words number " + strconv.Itoa(i)
		if i%3 == 1 {
			text = "lantern harbour"
			tied = append(tied, strconv.Itoa(i))
		}
		b.WriteString(`{"id": "` + strconv.Itoa(i) + `", "contents": "\"T\"\n` + text + `"}` + "\n")
	}
	for n := range 4 {
		cfg := bm25.Config{}
		if n == 3 {
			cfg.Dir = filepath.Join(t.TempDir(), "idx")
		}
		ix := build(t, b.String(), cfg)
		for _, k := range []int{5, 30} {
			hits, err := ix.Search(context.Background(), "lantern", k)
			require.NoError(t, err)
			var ids []string
			for _, h := range hits {
				ids = append(ids, h.Document.ID)
			}
			assert.Equal(t, tied[:min(k, len(tied))], ids, "build %d, top %d", n, k)
		}
	}
}

// TestOnDisk builds an index on disk, reopens it and gets the same hits;
// a second Build into the same directory, and Open of a directory that
// is not an index, fail clearly.
func TestOnDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx")
	ix, err := bm25.Build(context.Background(), strings.NewReader(threeDocs), bm25.Config{Dir: dir})
	require.NoError(t, err)
	want, err := ix.Search(context.Background(), "fox owl", 3)
	require.NoError(t, err)
	size, err := ix.DiskBytes()
	require.NoError(t, err)
	assert.Positive(t, size)
	sum := ix.CorpusSHA256()
	require.NoError(t, ix.Close())
	// The same rows written with other white space hash the same.
	again, err := bm25.CorpusSHA256(strings.NewReader(strings.ReplaceAll(threeDocs, `": "`, `":"`)))
	require.NoError(t, err)
	assert.Equal(t, sum, again)
	other, err := bm25.CorpusSHA256(strings.NewReader(strings.Replace(threeDocs, "den", "lair", 1)))
	require.NoError(t, err)
	assert.NotEqual(t, sum, other)
	_, err = bm25.CorpusSHA256(strings.NewReader("{"))
	assert.ErrorIs(t, err, search.ErrMalformed)

	_, err = bm25.Build(context.Background(), strings.NewReader(threeDocs), bm25.Config{Dir: dir})
	assert.ErrorContains(t, err, "exists")

	ix, err = bm25.Open(bm25.Config{Dir: dir})
	require.NoError(t, err)
	defer ix.Close()
	assert.Equal(t, 3, ix.Len())
	assert.Equal(t, sum, ix.CorpusSHA256())
	got, err := ix.Search(context.Background(), "fox owl", 3)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	_, err = bm25.Open(bm25.Config{Dir: filepath.Join(t.TempDir(), "missing")})
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = bm25.Open(bm25.Config{Dir: t.TempDir()})
	assert.Error(t, err)
	_, err = bm25.Open(bm25.Config{})
	assert.ErrorContains(t, err, "Config.Dir")
}

// TestBuildErrors checks that bad corpora give errors naming the line,
// and leave no directory behind.
func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name, corpus string
		want         error
		text         string
	}{
		{"empty", "", search.ErrEmptyCorpus, "no documents"},
		{"blank lines only", "\n\n  \n", search.ErrEmptyCorpus, "no documents"},
		{"not JSON", threeDocs + "{oops\n", search.ErrMalformed, "corpus line 4"},
		{"no contents", `{"id": "1", "text": "x"}`, search.ErrMalformed, `no string "contents"`},
		{"contents not a string", `{"id": "1", "contents": 5}`, search.ErrMalformed, "corpus line 1"},
		{"id an object", `{"id": {}, "contents": "x"}`, search.ErrMalformed, "neither a string nor an integer"},
		{"an array", `["x"]`, search.ErrMalformed, "JSON object"},
		{"invalid UTF-8", "{\"contents\": \"\xff\"}", search.ErrMalformed, "UTF-8"},
		{"two objects on a line", `{"contents": "a"} {"contents": "b"}`, search.ErrMalformed, "corpus line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "idx")
			_, err := bm25.Build(context.Background(), strings.NewReader(tt.corpus), bm25.Config{Dir: dir})
			require.Error(t, err)
			assert.True(t, errors.Is(err, tt.want), "%v", err)
			assert.ErrorContains(t, err, tt.text)
			_, serr := os.Stat(dir)
			assert.ErrorIs(t, serr, os.ErrNotExist, "the half-built index is removed")
		})
	}
	_, err := bm25.BuildFile(context.Background(), filepath.Join(t.TempDir(), "none.jsonl"), bm25.Config{})
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = bm25.Build(context.Background(), strings.NewReader(threeDocs), bm25.Config{Workers: -1})
	assert.ErrorContains(t, err, "Workers")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = bm25.Build(ctx, strings.NewReader(threeDocs), bm25.Config{})
	assert.ErrorIs(t, err, context.Canceled)
}

// TestHugeTopK: a top k beyond the corpus (up to the largest int) gives
// every matching document, not an overflow or a huge allocation.
func TestHugeTopK(t *testing.T) {
	ix := build(t, threeDocs, bm25.Config{})
	for _, k := range []int{4, math.MaxInt} {
		hits, err := ix.Search(context.Background(), "fox owl", k)
		require.NoError(t, err)
		assert.NotEmpty(t, hits)
		assert.LessOrEqual(t, len(hits), 3)
	}
}
