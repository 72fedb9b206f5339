// Package bm25 is an embedded retrieval server: a BM25 index of a corpus
// in Search-R1's format, built with bleve (github.com/blevesearch/bleve/v2,
// its scorch index and BM25 scoring model), served over the retrieval API
// of Search-R1 that package search speaks (POST /retrieve). It stands in
// for Search-R1's retrieval_server.py (e5 + FAISS, or pyserini's BM25) in
// tests, examples and small training runs, with nothing but Go installed.
//
// Build indexes a JSON Lines corpus — {"id", "contents"} rows, the title
// as the first line of contents in quotes — in memory or in a directory
// that Open reopens later; Index.Search and Index.Retrieve search it, the
// queries of a batch concurrently over a bounded number of workers that
// all callers share; Server answers /retrieve (and /health) as
// retrieval_server.py does, returning each hit's corpus row, every field
// kept. Malformed corpora fail with errors that name the line; requests
// that are not /retrieve requests, or are over the server's limits, get
// a 422 that says why.
//
// # Scoring
//
// The "contents" field (title line and text) is analyzed with bleve's
// English analyzer ("en": Unicode word segmentation, possessives and
// stop words removed, lower case, Snowball stemming); a query is a bleve
// match query over it, its analyzed terms OR-ed. bleve v2.6's BM25 is
// selected by the index mapping's ScoringModel ("bm25"); its score of
// document d for query q is (search/scorer/scorer_term.go,
// search/searcher/search_term.go, search/scorer/scorer_disjunction.go)
//
//	score(d, q) = coord · Σ_{t ∈ q ∩ d} w_t · idf_t · k1·√tf / (√tf + k1·(1 − b + b·dl/avgdl))
//	idf_t = ln(1 + (N − n_t + 0.5)/(n_t + 0.5)),  w_t = idf_t / √(Σ_{u ∈ q} idf_u²),
//	coord = |q ∩ d| / |q|,  k1 = 1.2,  b = 0.75,
//
// with N the documents, n_t those containing t, tf the term's count in d,
// dl the field's length in tokens (through a float32 norm, 1/√dl) and
// avgdl the number of distinct terms of the field over N, rounded up.
// It ranks as Lucene's BM25 (pyserini's, Search-R1's BM25 retriever)
// mostly does, but is not the same function: √tf for tf, k1 for k1 + 1
// in the numerator, avgdl from distinct terms rather than tokens, and
// Lucene's classic query norm and coord kept (a query term no document
// has still lowers the others' weights). TestScoresByHand checks it on a
// 3-document corpus computed by hand.
//
// bm25 imports package search for the API's types; search does not import
// bm25.
package bm25
