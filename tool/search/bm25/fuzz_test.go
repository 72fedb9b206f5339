package bm25_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/tool/search"
	"github.com/agentrl/agentrl/tool/search/bm25"
)

// FuzzServerParse: any body gives a request within the server's limits,
// with topk filled in, or an error wrapping search.ErrMalformed.
func FuzzServerParse(f *testing.F) {
	for _, s := range []string{
		`{"queries": ["fox"], "topk": 2, "return_scores": true}`, `{"query": "fox"}`, `{"queries": ["a", "b", "c", "d"]}`,
		`{"queries": ["0123456789x"]}`, `{"queries": ["a"], "topk": 6}`, `{"queries": ["a"], "topk": 0}`, `{}`, `[`,
	} {
		f.Add([]byte(s))
	}
	ix, err := bm25.Build(context.Background(), bytes.NewReader([]byte(threeDocs)), bm25.Config{})
	require.NoError(f, err)
	defer ix.Close()
	srv, err := bm25.NewServer(ix, bm25.ServerConfig{TopK: 2, MaxTopK: 5, MaxQueries: 3, MaxQueryBytes: 10})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := srv.Parse(body)
		if err != nil {
			require.ErrorIs(t, err, search.ErrMalformed)
			return
		}
		require.LessOrEqual(t, len(req.Queries), 3)
		require.True(t, req.TopK >= 1 && req.TopK <= 5, "topk %d", req.TopK)
		for _, q := range req.Queries {
			require.LessOrEqual(t, len(q), 10)
		}
		hits, err := ix.Retrieve(context.Background(), req.Queries, req.TopK)
		require.NoError(t, err)
		require.Len(t, hits, len(req.Queries))
	})
}

// FuzzBuild: any corpus builds an index of as many documents as
// ReadCorpus reads, or fails with search.ErrMalformed or
// search.ErrEmptyCorpus; the index answers any query.
func FuzzBuild(f *testing.F) {
	for _, s := range []string{threeDocs, "{\"contents\": \"\"}\n", "{\"contents\": 1}", "", "\xef\xbb\xbf{\"id\": 1, \"contents\": \"\\\"T\\\"\\nthe of and\"}"} {
		f.Add([]byte(s), "fox")
	}
	f.Fuzz(func(t *testing.T, corpus []byte, query string) {
		docs := 0
		rerr := search.ReadCorpus(bytes.NewReader(corpus), func(int, search.Document) error { docs++; return nil })
		ix, err := bm25.Build(context.Background(), bytes.NewReader(corpus), bm25.Config{})
		if rerr != nil {
			require.Error(t, err)
			require.True(t, errors.Is(err, search.ErrMalformed) || errors.Is(err, search.ErrEmptyCorpus), "%v", err)
			return
		}
		require.NoError(t, err)
		defer ix.Close()
		require.Equal(t, docs, ix.Len())
		hits, err := ix.Search(context.Background(), query, 3)
		require.NoError(t, err)
		require.LessOrEqual(t, len(hits), min(3, docs))
		for i := 1; i < len(hits); i++ {
			require.GreaterOrEqual(t, hits[i-1].Score, hits[i].Score)
		}
	})
}
