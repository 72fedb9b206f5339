package bm25

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	bsearch "github.com/blevesearch/bleve/v2/search"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/agentrl/agentrl/tool/search"
)

// Field names of the bleve documents.
const (
	contentsField = "contents" // the passage, analyzed and indexed, not stored
	rowField      = "row"      // the corpus row's JSON, stored, not indexed
)

// metaKey is the bleve internal key under which Build records the corpus
// (metadata), so that Open knows the index is one of this package's.
var metaKey = []byte("agentrl/bm25/corpus")

// metadata describes the corpus an index was built from.
type metadata struct {
	Format    int    `json:"format"`
	Documents int    `json:"documents"`
	SHA256    string `json:"sha256"`
}

// formatVersion is metadata.Format of indexes this package writes.
// Format 2 pads document ids to 12 digits (format 1 did not).
const formatVersion = 2

// Config configures Build and Open. Zero fields take the default named on
// them.
type Config struct {
	// Dir is the directory of an on-disk index: Build creates it (it must
	// not exist) and Open opens it. Empty: Build keeps the index in
	// memory.
	Dir string
	// Workers bounds the queries searched at the same time, across all
	// calls of Retrieve and Search; default GOMAXPROCS.
	Workers int
	// BatchSize is the number of documents Build indexes per bleve
	// batch; default 20,000. An in-memory index keeps one segment per
	// batch (only an on-disk index merges them).
	BatchSize int
}

// Index is a BM25 index of a Search-R1 corpus, built with bleve
// (github.com/blevesearch/bleve/v2, scorch, its BM25 scoring model). It
// is safe for concurrent use.
type Index struct {
	idx  bleve.Index
	meta metadata
	dir  string
	sem  chan struct{}
}

// indexMapping returns the mapping of every index: one static document
// type with "contents" analyzed by bleve's English analyzer (Unicode word
// segmentation, possessive and stop-word removal, lower case, Snowball
// stemming, as Lucene's English analyzer that pyserini uses) and "row"
// stored whole; scoring model BM25.
func indexMapping() mapping.IndexMapping {
	contents := bleve.NewTextFieldMapping()
	contents.Analyzer = en.AnalyzerName
	contents.Store = false
	contents.IncludeInAll = false
	contents.IncludeTermVectors = false
	contents.DocValues = false

	row := bleve.NewTextFieldMapping()
	row.Analyzer = keyword.Name
	row.Index = false
	row.Store = true
	row.IncludeInAll = false
	row.IncludeTermVectors = false
	row.DocValues = false

	doc := bleve.NewDocumentStaticMapping()
	doc.AddFieldMappingsAt(contentsField, contents)
	doc.AddFieldMappingsAt(rowField, row)

	im := bleve.NewIndexMapping()
	im.DefaultMapping = doc
	im.DefaultAnalyzer = en.AnalyzerName
	im.ScoringModel = index.BM25Scoring
	im.IndexDynamic = false
	im.StoreDynamic = false
	im.DocValuesDynamic = false
	return im
}

func (cfg *Config) defaults() error {
	switch {
	case cfg.Workers < 0:
		return fmt.Errorf("bm25: Config.Workers = %d, want > 0", cfg.Workers)
	case cfg.BatchSize < 0:
		return fmt.Errorf("bm25: Config.BatchSize = %d, want > 0", cfg.BatchSize)
	}
	if cfg.Workers == 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 20000
	}
	return nil
}

// BuildFile builds an index of the corpus file at path (see Build).
func BuildFile(ctx context.Context, path string, cfg Config) (*Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bm25: %w", err)
	}
	defer f.Close()
	ix, err := Build(ctx, f, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ix, nil
}

// Build indexes a corpus in Search-R1's JSON Lines format (see
// search.ReadCorpus), in memory or, with cfg.Dir, on disk. Each document
// is searched by its whole "contents" (title line and text) and returned
// as its row, every field kept. A malformed or empty corpus is an error
// naming the line, wrapping search.ErrMalformed or search.ErrEmptyCorpus;
// then nothing is left on disk. ctx stops the build between batches.
func Build(ctx context.Context, corpus io.Reader, cfg Config) (ix *Index, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.Dir != "" {
		if _, err := os.Stat(cfg.Dir); err == nil {
			return nil, fmt.Errorf("bm25: index directory %s exists; Open it, or remove it to build anew", cfg.Dir)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("bm25: %w", err)
		}
	}
	var idx bleve.Index
	if cfg.Dir == "" {
		idx, err = bleve.NewUsing("", indexMapping(), scorch.Name, scorch.Name, nil)
	} else {
		idx, err = bleve.NewUsing(cfg.Dir, indexMapping(), scorch.Name, scorch.Name, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("bm25: creating the index: %w", err)
	}
	defer func() {
		if err != nil {
			_ = idx.Close()
			if cfg.Dir != "" {
				_ = os.RemoveAll(cfg.Dir)
			}
		}
	}()

	hash := newCorpusHash()
	n := 0
	b := idx.NewBatch()
	flush := func() error {
		if b.Size() == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := idx.Batch(b); err != nil {
			return fmt.Errorf("bm25: indexing: %w", err)
		}
		b.Reset()
		return nil
	}
	err = search.ReadCorpus(corpus, func(_ int, d search.Document) error {
		hash.add(d)
		if err := b.Index(docID(n), map[string]any{contentsField: d.Contents, rowField: string(d.Raw)}); err != nil {
			return fmt.Errorf("bm25: indexing document %d: %w", n, err)
		}
		n++
		if b.Size() >= cfg.BatchSize {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, err
	}
	meta := metadata{Format: formatVersion, Documents: n, SHA256: hash.sum()}
	data, _ := json.Marshal(meta)
	if err = idx.SetInternal(metaKey, data); err != nil {
		return nil, fmt.Errorf("bm25: recording the corpus: %w", err)
	}
	return &Index{idx: idx, meta: meta, dir: cfg.Dir, sem: make(chan struct{}, cfg.Workers)}, nil
}

// Open opens the on-disk index Build wrote in cfg.Dir.
func Open(cfg Config) (*Index, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		return nil, errors.New("bm25: Open needs Config.Dir")
	}
	if _, err := os.Stat(cfg.Dir); err != nil {
		return nil, fmt.Errorf("bm25: %w", err)
	}
	idx, err := bleve.Open(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("bm25: opening %s: %w", cfg.Dir, err)
	}
	data, err := idx.GetInternal(metaKey)
	var meta metadata
	if err == nil {
		if len(data) == 0 {
			err = errors.New("it was not built by this package (no corpus record)")
		} else if err = json.Unmarshal(data, &meta); err == nil && meta.Format != formatVersion {
			err = fmt.Errorf("its format is %d, this package reads %d", meta.Format, formatVersion)
		}
	}
	if err != nil {
		_ = idx.Close()
		return nil, fmt.Errorf("bm25: opening %s: %w", cfg.Dir, err)
	}
	return &Index{idx: idx, meta: meta, dir: cfg.Dir, sem: make(chan struct{}, cfg.Workers)}, nil
}

// docID is the bleve id of the n-th document of the corpus: n in
// decimal, zero-padded to 12 digits, so that ids sort as the rows do.
func docID(n int) string { return fmt.Sprintf("%012d", n) }

// Len returns the number of documents.
func (ix *Index) Len() int { return ix.meta.Documents }

// CorpusSHA256 returns the SHA-256, in hex, of the corpus rows as indexed
// (each compacted, followed by a newline): CorpusSHA256 of the corpus.
func (ix *Index) CorpusSHA256() string { return ix.meta.SHA256 }

// CorpusSHA256 reads a corpus (see search.ReadCorpus) and returns the
// hash an index built from it reports, so that a program can tell whether
// an index on disk was built from a given corpus.
func CorpusSHA256(corpus io.Reader) (string, error) {
	h := newCorpusHash()
	err := search.ReadCorpus(corpus, func(_ int, d search.Document) error {
		h.add(d)
		return nil
	})
	if err != nil {
		return "", err
	}
	return h.sum(), nil
}

// corpusHash hashes corpus rows, each compacted and followed by "\n".
type corpusHash struct{ h hash.Hash }

func newCorpusHash() corpusHash { return corpusHash{sha256.New()} }

func (c corpusHash) add(d search.Document) {
	c.h.Write(d.Raw)
	c.h.Write([]byte{'\n'})
}

func (c corpusHash) sum() string { return hex.EncodeToString(c.h.Sum(nil)) }

// DiskBytes returns the size of an on-disk index's files, 0 for an
// in-memory index.
func (ix *Index) DiskBytes() (int64, error) {
	if ix.dir == "" {
		return 0, nil
	}
	var total int64
	err := filepath.WalkDir(ix.dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// Close closes the index.
func (ix *Index) Close() error { return ix.idx.Close() }

// Search returns the topK documents that best match query by BM25 (see
// the package doc for bleve's formula), best first, equal scores in
// corpus order: the same hits in the same order from every build of the
// same corpus, in memory or on disk. A query with no indexed word (empty,
// or only stop words) matches nothing.
func (ix *Index) Search(ctx context.Context, query string, topK int) ([]search.Hit, error) {
	select {
	case ix.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-ix.sem }()
	return ix.search(ctx, query, topK)
}

func (ix *Index) search(ctx context.Context, query string, topK int) ([]search.Hit, error) {
	topK = min(topK, ix.Len()) // no more hits than documents (and topK+1 below cannot overflow)
	if topK <= 0 {
		return []search.Hit{}, nil
	}
	// One hit more than asked says whether the top topK are determined
	// by their scores: they are unless the next hit ties with the last.
	// Only then is the query run again with ties ranked by id, which
	// costs loading the id of every matching document (about 2× the
	// time of a whole question's search over 100k passages).
	res, err := ix.query(ctx, query, topK+1, false)
	if err == nil && len(res.Hits) > topK && res.Hits[topK].Score == res.Hits[topK-1].Score {
		res, err = ix.query(ctx, query, topK, true)
	}
	if err != nil {
		return nil, fmt.Errorf("bm25: searching %q: %w", query, err)
	}
	found := res.Hits[:min(topK, len(res.Hits))]
	// Equal scores in corpus order (docID's padded ids sort as rows do),
	// not in bleve's internal order: a batch numbers its documents in
	// the order their concurrent analysis finishes, so that order
	// differs from one build of the index to the next.
	slices.SortStableFunc(found, func(a, b *bsearch.DocumentMatch) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	hits := make([]search.Hit, 0, len(found))
	for _, h := range found {
		row, ok := h.Fields[rowField].(string)
		if !ok {
			return nil, fmt.Errorf("bm25: document %s has no stored row", h.ID)
		}
		doc, err := search.ParseDocument([]byte(row))
		if err != nil {
			return nil, fmt.Errorf("bm25: document %s: %w", h.ID, err)
		}
		hits = append(hits, search.Hit{Document: doc, Score: h.Score, HasScore: true})
	}
	return hits, nil
}

// query runs a BM25 match query for the best n documents, with their
// stored rows; byID ranks equal scores by document id (else bleve ranks
// them by its internal numbers).
func (ix *Index) query(ctx context.Context, query string, n int, byID bool) (*bleve.SearchResult, error) {
	q := bleve.NewMatchQuery(query)
	q.SetField(contentsField)
	req := bleve.NewSearchRequestOptions(q, n, 0, false)
	if byID {
		req.SortByCustom(bsearch.SortOrder{&bsearch.SortScore{Desc: true}, &bsearch.SortDocID{}})
	}
	req.Fields = []string{rowField}
	return ix.idx.SearchInContext(ctx, req)
}

// Retrieve returns the topK hits of every query (see Search), one list
// per query in order, searching the queries concurrently over the index's
// workers. It fails with the first failing query's error, or ctx's.
func (ix *Index) Retrieve(ctx context.Context, queries []string, topK int) ([][]search.Hit, error) {
	out := make([][]search.Hit, len(queries))
	if len(queries) == 0 {
		return out, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(queries))
	for i, q := range queries {
		select {
		case ix.sem <- struct{}{}:
		case <-ctx.Done():
			// Collect the searches already started.
			for range i {
				<-errs
			}
			return nil, ctx.Err()
		}
		go func() {
			defer func() { <-ix.sem }()
			hits, err := ix.search(ctx, q, topK)
			out[i] = hits
			errs <- err
		}()
	}
	var first error
	for range queries {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	if first != nil {
		return nil, first
	}
	return out, nil
}
