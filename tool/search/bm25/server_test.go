package bm25_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/tool/search"
	"github.com/agentrl/agentrl/tool/search/bm25"
	"github.com/agentrl/agentrl/tool/search/encyclopedia"
)

func serve(t *testing.T, ix *bm25.Index, cfg bm25.ServerConfig) *httptest.Server {
	t.Helper()
	srv, err := bm25.NewServer(ix, cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(data)
}

// TestServerAnswers checks the bodies the server writes: Search-R1's
// shapes, byte for byte (FastAPI's compact JSON), with and without
// scores, and SkyRL's single query.
func TestServerAnswers(t *testing.T) {
	ix := build(t, threeDocs, bm25.Config{})
	hs := serve(t, ix, bm25.ServerConfig{TopK: 1})

	code, body := post(t, hs.URL+"/retrieve", `{"queries": ["fox", "owl zebra", ""], "topk": 2, "return_scores": true}`)
	require.Equal(t, http.StatusOK, code, body)
	hits, err := search.ParseResponse([]byte(body), 3)
	require.NoError(t, err)
	fox, owl := hits[0][0].Score, hits[1][0].Score
	assert.Equal(t, `{"result":[[{"document":{"id":"d0","contents":"\"Fox\"\nfox fox den"},"score":`+ftoa(fox)+`},`+
		`{"document":{"id":"d1","contents":"\"Hen\"\nhen fox"},"score":`+ftoa(hits[0][1].Score)+`}],`+
		`[{"document":{"id":"d2","contents":"\"Owl\"\nowl barn owl tree night"},"score":`+ftoa(owl)+`}],[]]}`, body)
	assert.InEpsilon(t, 0.30224902295062, fox, 1e-12)

	// return_scores false: bare rows; topk absent: the server's default.
	code, body = post(t, hs.URL+"/retrieve", `{"queries": ["fox"]}`)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, `{"result":[[{"id":"d0","contents":"\"Fox\"\nfox fox den"}]]}`, body)

	// SkyRL's {"query": ...}, topk 0 meaning the default.
	code, body = post(t, hs.URL+"/retrieve", `{"query": "hen", "topk": 0, "return_scores": false}`)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, `{"result":[[{"id":"d1","contents":"\"Hen\"\nhen fox"}]]}`, body)

	code, body = post(t, hs.URL+"/retrieve", `{"queries": []}`)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, `{"result":[]}`, body)

	resp, err := http.Get(hs.URL + "/health")
	require.NoError(t, err)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, `{"status":"ok","documents":3}`, string(data))
}

func ftoa(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

func TestServerRejects(t *testing.T) {
	ix := build(t, threeDocs, bm25.Config{})
	hs := serve(t, ix, bm25.ServerConfig{MaxTopK: 5, MaxQueries: 3, MaxQueryBytes: 10, MaxBodyBytes: 200})
	tests := []struct {
		name, body string
		code       int
		detail     string
	}{
		{"not JSON", `{"queries": [`, 422, "request"},
		{"no queries", `{"topk": 3}`, 422, "neither"},
		{"queries not strings", `{"queries": [1]}`, 422, "request"},
		{"negative topk", `{"queries": ["a"], "topk": -2}`, 422, "negative"},
		{"topk over the limit", `{"queries": ["a"], "topk": 6}`, 422, "above this server's limit, 5"},
		{"too many queries", `{"queries": ["a", "b", "c", "d"]}`, 422, "4 queries, at most 3"},
		{"query too long", `{"queries": ["a", "0123456789x"]}`, 422, "query 1 is 11 bytes long, at most 10"},
		{"body too large", `{"queries": ["` + strings.Repeat("a", 300) + `"]}`, 413, "larger than 200 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(t, hs.URL+"/retrieve", tt.body)
			assert.Equal(t, tt.code, code)
			var d struct{ Detail string }
			require.NoError(t, json.Unmarshal([]byte(body), &d), body)
			assert.Contains(t, d.Detail, tt.detail)
		})
	}

	resp, err := http.Get(hs.URL + "/retrieve")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "POST", resp.Header.Get("Allow"))
	code, _ := post(t, hs.URL+"/search", `{"queries": ["a"]}`)
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = post(t, hs.URL+"/health", ``)
	assert.Equal(t, http.StatusMethodNotAllowed, code)

	_, err = bm25.NewServer(nil, bm25.ServerConfig{})
	assert.Error(t, err)
	_, err = bm25.NewServer(ix, bm25.ServerConfig{TopK: 10, MaxTopK: 5})
	assert.ErrorContains(t, err, "above MaxTopK")
	_, err = bm25.NewServer(ix, bm25.ServerConfig{MaxQueries: -1})
	assert.Error(t, err)
}

// TestClientAgainstServer runs package search's client and tool against
// the server over the shipped corpus: every one-hop question's evidence
// passage must be among the top 3 when the question itself is the query,
// and the tool's text must hold the answer.
func TestClientAgainstServer(t *testing.T) {
	ix, err := bm25.Build(context.Background(), encyclopedia.Corpus(), bm25.Config{})
	require.NoError(t, err)
	defer ix.Close()
	assert.Equal(t, 300, ix.Len())
	hs := serve(t, ix, bm25.ServerConfig{})
	c, err := search.NewClient(search.ClientConfig{URL: hs.URL + "/retrieve", BatchWait: 5 * time.Millisecond})
	require.NoError(t, err)

	e, err := encyclopedia.Generate(encyclopedia.DefaultConfig())
	require.NoError(t, err)
	var oneHop []encyclopedia.Question
	var queries []string
	for _, q := range e.Questions {
		if q.Hops == 1 {
			oneHop = append(oneHop, q)
			queries = append(queries, q.Text)
		}
	}
	hits, err := c.Search(context.Background(), queries)
	require.NoError(t, err)
	found := 0
	for i, q := range oneHop {
		for _, h := range hits[i] {
			if h.Document.ID == q.Evidence[0] {
				found++
				assert.Contains(t, h.Document.Contents, q.Answer)
				break
			}
		}
	}
	recall := float64(found) / float64(len(oneHop))
	t.Logf("recall@3 of %d one-hop questions, the question as the query: %.3f", len(oneHop), recall)
	assert.GreaterOrEqual(t, recall, 0.95)

	tl, err := search.NewTool(c, search.ToolConfig{})
	require.NoError(t, err)
	q := oneHop[0]
	res, err := tl.Call(context.Background(), json.RawMessage(`{"query_list": [`+string(mustJSON(q.Text))+`]}`))
	require.NoError(t, err)
	assert.False(t, res.Failed)
	assert.Contains(t, res.Content, q.Answer)
	assert.Equal(t, "success", res.Metadata["status"])
	assert.Equal(t, 3, res.Metadata["total_results"])
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestServerClientGone checks that a request whose client leaves ends
// without an answer and leaves the server working.
func TestServerClientGone(t *testing.T) {
	ix := build(t, threeDocs, bm25.Config{Workers: 1})
	hs := serve(t, ix, bm25.ServerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/retrieve", bytes.NewReader([]byte(`{"queries": ["fox"]}`)))
	require.NoError(t, err)
	_, err = http.DefaultClient.Do(req)
	assert.ErrorIs(t, err, context.Canceled)
	code, body := post(t, hs.URL+"/retrieve", `{"queries": ["fox", "hen", "owl"], "topk": 1}`)
	assert.Equal(t, http.StatusOK, code, body)

	hits, err := ix.Retrieve(ctx, []string{"fox"}, 1)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, hits)
}
