package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/examples/internal/setup/setuptest"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/tool"
	"github.com/agentrl/agentrl/tool/search/bm25"
	"github.com/agentrl/agentrl/tool/search/encyclopedia"
)

// retrievalServer serves the shipped encyclopedia with package bm25's
// server (Search-R1's /retrieve API) and counts the requests.
func retrievalServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	ix, err := bm25.Build(context.Background(), encyclopedia.Corpus(), bm25.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { ix.Close() })
	srv, err := bm25.NewServer(ix, bm25.ServerConfig{})
	require.NoError(t, err)
	var requests atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs, &requests
}

// TestSearchTool checks the tool -search makes: it asks the server one
// query first, then searches with -search-topk passages per query,
// written as -search-format says; the first passage of the shipped corpus
// is found by its title ("Mebrem Naegrubis", package encyclopedia's
// data/corpus.jsonl, id 0). A server that is down, or that does not speak
// the API, stops the run before training with the flag and the cause.
func TestSearchTool(t *testing.T) {
	hs, requests := retrievalServer(t)
	ctx := context.Background()
	args := json.RawMessage(`{"query_list": ["Mebrem Naegrubis born"]}`)
	for _, c := range []struct {
		url, format string
		topK        int
		prefix      string // the start of the result's text
		docs        int    // "Doc i" headers in it
	}{
		{hs.URL + "/retrieve", "verl", 3, `{"result": "Doc 1 (Title: \"Mebrem Naegrubis\")\n`, 3},
		{hs.URL, "search-r1", 2, `Doc 1(Title: "Mebrem Naegrubis") Mebrem Naegrubis was born in 1678`, 2},
	} {
		before := requests.Load()
		var stderr bytes.Buffer
		st, err := searchTool(ctx, options{search: c.url, searchTopK: c.topK, searchFormat: c.format, toolTimeout: 5 * time.Second}, &stderr)
		require.NoError(t, err)
		assert.Equal(t, before+1, requests.Load(), "one probe query before training")
		assert.Equal(t, "grpotcr: search: "+hs.URL+"/retrieve, top "+strconv.Itoa(c.topK)+", "+c.format+" text\n", stderr.String())
		assert.Equal(t, "search", st.Name())
		res, err := st.Call(ctx, args)
		require.NoError(t, err)
		assert.False(t, res.Failed)
		assert.True(t, strings.HasPrefix(res.Content, c.prefix), res.Content)
		for i := 1; i <= 3; i++ {
			header := "Doc " + strconv.Itoa(i)
			assert.Equal(t, i <= c.docs, strings.Contains(res.Content, header), "%s in %s", header, res.Content)
		}
	}

	// Down: the port of a closed server. Not the API: a server that
	// answers every request with 404.
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	notAPI := httptest.NewServer(http.NotFoundHandler())
	defer notAPI.Close()
	for _, c := range []struct{ url, msg string }{
		{downURL, "the retrieval server did not answer a query: search: "},
		{notAPI.URL, "the retrieval server did not answer a query: search: "},
	} {
		start := time.Now()
		_, err := searchTool(ctx, options{search: c.url, searchTopK: 3, searchFormat: "verl", toolTimeout: 5 * time.Second}, &bytes.Buffer{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), c.msg)
		assert.Less(t, time.Since(start), 5*time.Second, "no retries before training")
	}
	_, err := searchTool(ctx, options{search: notAPI.URL, searchTopK: 3, searchFormat: "verl", toolTimeout: 5 * time.Second}, &bytes.Buffer{})
	assert.ErrorContains(t, err, "404")
}

// TestSearchPrompts: the prompts are rendered with the search tool's
// schema beside the code interpreter's, so the model is told it may
// search (Qwen3's template lists the tools in the system turn).
func TestSearchPrompts(t *testing.T) {
	hs, _ := retrievalServer(t)
	model := tinyCheckpoint(t)
	tok, err := tokenizer.Load(model)
	require.NoError(t, err)
	st, err := searchTool(context.Background(), options{search: hs.URL, searchTopK: 3, searchFormat: "verl", toolTimeout: 5 * time.Second}, &bytes.Buffer{})
	require.NoError(t, err)
	prompts, _, err := setup.LoadPrompts(context.Background(), "testdata/train.jsonl", "prompt", tok, []tool.Tool{st}, true, 0, 0)
	require.NoError(t, err)
	require.NotEmpty(t, prompts)
	text := tok.Decode(prompts[0].Tokens)
	assert.Contains(t, text, `{"type": "function", "function": {"name": "search", "description": "Searches the web for relevant information based on the given query."`)
	assert.Contains(t, text, `"query_list": {"type": "array", "items": {"type": "string"}`)
}

// TestTrainSearch trains a step with -search beside the code
// interpreter, against the embedded BM25 server, and checks that a
// -search server that is down stops the run with status 1 before
// anything trains.
func TestTrainSearch(t *testing.T) {
	setuptest.NeedPython(t)
	hs, requests := retrievalServer(t)
	model := tinyCheckpoint(t)
	dir := t.TempDir()
	args := []string{"-model", model, "-train", "testdata/train.jsonl", "-steps", "1", "-batch", "2", "-n", "2",
		"-max-response", "12", "-overlong-buffer", "0", "-micro-batch", "2", "-sandbox-workers", "1"}
	code, stdout, stderr := runMain(t, append(args, "-out", filepath.Join(dir, "run"), "-search", hs.URL+"/retrieve", "-search-topk", "2")...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr, "grpotcr: search: "+hs.URL+"/retrieve, top 2, verl text\n")
	assert.GreaterOrEqual(t, requests.Load(), int64(1))

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	code, _, stderr = runMain(t, append(args, "-out", filepath.Join(dir, "down"), "-search", down.URL)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "grpotcr: -search "+down.URL+": the retrieval server did not answer a query: ")
	rows, _ := metrics.ReadFile(filepath.Join(dir, "down", metricsFile))
	assert.Empty(t, rows, "nothing trained")
}
