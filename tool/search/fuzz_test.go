package search

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// FuzzParseRequest: any body gives a request or an error wrapping
// ErrMalformed, never a panic; a request has a non-nil query list and a
// topk of 0 or more, and its JSON parses back to itself.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"queries": ["What is Python?"], "topk": 3, "return_scores": true}`,
		`{"query": "q", "topk": null}`, `{"queries": []}`, `{"queries": null}`, `{"queries": ["a"], "query": "b"}`,
		`{"queries": [1]}`, `{"queries": ["a"], "topk": -1}`, `{"queries": ["a"], "topk": 1e3}`, `[]`, `null`, ``, `{`,
		`{"queries": ["\u0000\ud800"], "return_scores": "yes"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseRequest(body)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		require.NotNil(t, req.Queries)
		require.GreaterOrEqual(t, req.TopK, 0)
		data, err := json.Marshal(req)
		require.NoError(t, err)
		back, err := ParseRequest(data)
		require.NoError(t, err)
		require.Equal(t, req, back)
	})
}

// FuzzParseResponse: any body gives hits or an error wrapping
// ErrMalformed; hits have one list per query, every document has its
// Raw object, and AppendResponse writes them back to the same hits.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		`{"result":[[{"document":{"id":"0","contents":"\"T\"\nx"},"score":0.5}]]}`,
		`{"result":[[{"id":1,"contents":"c","title":"T"}],[]]}`,
		`{"result":[[{"document":{"contents":"c"}}]]}`, `{"result":[]}`, `{"result":[[]]}`, `{"result":null}`,
		`{"result":[["x"]]}`, `{"result":[[{"document":1}]]}`, `{"detail":"x"}`, `<html>`, ``,
	} {
		f.Add([]byte(s), 1)
	}
	f.Fuzz(func(t *testing.T, body []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		hits, err := ParseResponse(body, n)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		require.Len(t, hits, n)
		for _, list := range hits {
			for _, h := range list {
				require.True(t, json.Valid(h.Document.Raw), "%q", h.Document.Raw)
				d, err := ParseDocument(h.Document.Raw)
				require.NoError(t, err)
				require.Equal(t, h.Document.Contents, d.Contents)
				require.Equal(t, h.Document.ID, d.ID)
			}
		}
		for _, withScores := range []bool{true, false} {
			back, err := ParseResponse(AppendResponse(nil, hits, withScores), n)
			require.NoError(t, err)
			for q := range hits {
				require.Len(t, back[q], len(hits[q]))
				for i, h := range hits[q] {
					require.Equal(t, h.Document.Contents, back[q][i].Document.Contents)
					require.Equal(t, withScores, back[q][i].HasScore)
					if withScores && h.HasScore {
						require.Equal(t, h.Score, back[q][i].Score)
					}
				}
			}
		}
	})
}

// FuzzReadCorpus: any input gives documents or an error wrapping
// ErrMalformed or ErrEmptyCorpus (or the reader's), never a panic; each
// document's Raw is compact JSON that parses back to it, and the line
// numbers increase.
func FuzzReadCorpus(f *testing.F) {
	for _, s := range []string{
		"{\"id\": \"0\", \"contents\": \"\\\"Evan Morris\\\"\\nEvan L. Morris was a lobbyist.\"}\n",
		"\xef\xbb\xbf{\"contents\": \"a\"}\r\n\n{\"id\": 3, \"contents\": \"b\", \"x\": [1]}",
		"{\"contents\": 1}\n", "[1]\n", "{\"id\": {}, \"contents\": \"a\"}", "\n\n", "", "{", "{\"contents\": \"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, corpus []byte) {
		last := 0
		err := ReadCorpus(bytes.NewReader(corpus), func(n int, d Document) error {
			require.Greater(t, n, last)
			last = n
			require.True(t, utf8.Valid(d.Raw))
			var compact bytes.Buffer
			require.NoError(t, json.Compact(&compact, d.Raw))
			require.Equal(t, compact.String(), string(d.Raw))
			back, err := ParseDocument(d.Raw)
			require.NoError(t, err)
			require.Equal(t, d, back)
			return nil
		})
		if err != nil {
			require.True(t, errors.Is(err, ErrMalformed) || errors.Is(err, ErrEmptyCorpus), "%v", err)
			return
		}
		require.Positive(t, last)
		require.LessOrEqual(t, last, strings.Count(string(corpus), "\n")+1)
	})
}
