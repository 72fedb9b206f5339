package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer the program writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var urlRe = regexp.MustCompile(`on (http://\S+/retrieve)`)

// serveArgs runs the program with args plus -addr 127.0.0.1:0, waits for
// its address and returns it, the output and a function that stops it
// and returns the exit status.
func serveArgs(t *testing.T, args ...string) (string, *syncBuffer, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	code := make(chan int, 1)
	go func() { code <- run(ctx, append(args, "-addr", "127.0.0.1:0"), stdout, stderr) }()
	t.Cleanup(cancel)
	var url string
	require.Eventually(t, func() bool {
		if m := urlRe.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
			return true
		}
		select {
		case c := <-code:
			code <- c
			return true
		default:
			return false
		}
	}, 60*time.Second, 5*time.Millisecond)
	require.NotEmpty(t, url, "stderr: %s", stderr)
	return url, stdout, func() int {
		cancel()
		return <-code
	}
}

func post(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	return string(data)
}

func TestServeEncyclopedia(t *testing.T) {
	url, stdout, stop := serveArgs(t, "-encyclopedia", "-topk", "1")
	assert.Contains(t, stdout.String(), "indexed the shipped encyclopedia: 300 documents")
	body := post(t, url, `{"queries": ["Mebrem Naegrubis"], "return_scores": false}`)
	assert.Equal(t, `{"result":[[{"id":"0","contents":"\"Mebrem Naegrubis\"\nMebrem Naegrubis was born in 1678 in Grebrist and became a poet. His epic The Hollow Weir was completed in 1723."}]]}`, body)
	assert.Equal(t, 0, stop())
}

// TestGenerateBuildOpen writes a generated corpus, builds an index of it
// on disk, opens it again, and refuses it for another corpus.
func TestGenerateBuildOpen(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"-generate", "600", "-out", dir}, &out, io.Discard))
	assert.Contains(t, out.String(), "wrote 600 passages")
	corpus := filepath.Join(dir, "corpus.jsonl")
	for _, name := range []string{"corpus.jsonl", "train.jsonl", "test.jsonl"} {
		info, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Positive(t, info.Size())
	}
	index := filepath.Join(dir, "idx")

	url, stdout, stop := serveArgs(t, "-corpus", corpus, "-index", index)
	assert.Contains(t, stdout.String(), "indexed into "+index+": 600 documents")
	assert.Contains(t, stdout.String(), "MiB on disk")
	first := post(t, url, `{"queries": ["In which town was the maker of The Amber Key born?"], "topk": 3, "return_scores": true}`)
	assert.Equal(t, 0, stop())

	url, stdout, stop = serveArgs(t, "-index", index)
	assert.Contains(t, stdout.String(), "opened "+index+": 600 documents")
	assert.Equal(t, first, post(t, url, `{"queries": ["In which town was the maker of The Amber Key born?"], "topk": 3, "return_scores": true}`))
	assert.Equal(t, 0, stop())

	// The same corpus with the index: opened; another corpus: refused.
	_, _, stop = serveArgs(t, "-corpus", corpus, "-index", index)
	assert.Equal(t, 0, stop())
	other := filepath.Join(dir, "other.jsonl")
	require.NoError(t, os.WriteFile(other, []byte(`{"id": "0", "contents": "\"A\"\na"}`+"\n"), 0o644))
	var errOut bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), []string{"-corpus", other, "-index", index, "-addr", "127.0.0.1:0"}, io.Discard, &errOut))
	assert.Contains(t, errOut.String(), "built from another corpus")
}

func TestBadCorpus(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"id": "0", "contents": "\"A\"\na"}`+"\n"+`{"id": "1", "text": "b"}`+"\n"), 0o644))
	var errOut bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), []string{"-corpus", path, "-addr", "127.0.0.1:0"}, io.Discard, &errOut))
	assert.Contains(t, errOut.String(), `corpus line 2: search: malformed: document has no string "contents"`)
}

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "c.jsonl")
	require.NoError(t, os.WriteFile(corpus, []byte(`{"contents": "a"}`), 0o644))
	tests := []struct {
		args []string
		err  string
	}{
		{[]string{}, "give -corpus"},
		{[]string{"-corpus", corpus, "-encyclopedia"}, "exclude each other"},
		{[]string{"-generate", "10"}, "needs -out"},
		{[]string{"-encyclopedia", "-out", dir}, "-out goes with -generate"},
		{[]string{"-generate", "-5", "-out", dir}, "want a number"},
		{[]string{"-encyclopedia", "-topk", "0"}, "-topk 0"},
		{[]string{"-encyclopedia", "-topk", "5", "-max-topk", "4"}, "-topk 5"},
		{[]string{"-encyclopedia", "-workers", "-1"}, "-workers"},
		{[]string{"-encyclopedia", "-addr", "nowhere"}, "-addr"},
		{[]string{"-encyclopedia", "-shutdown-timeout", "0s"}, "-shutdown-timeout"},
		{[]string{"-corpus", filepath.Join(dir, "missing.jsonl")}, "-corpus"},
		{[]string{"-index", filepath.Join(dir, "missing")}, "does not exist"},
		{[]string{"-encyclopedia", "extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		_, err := parseFlags(tt.args, io.Discard)
		assert.ErrorContains(t, err, tt.err, "%q", tt.args)
	}
	var errOut bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), []string{"-bogus"}, io.Discard, &errOut))
	assert.Contains(t, errOut.String(), "retrieval -h")
	o, err := parseFlags([]string{"-corpus", corpus}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8000", o.addr)
	assert.Equal(t, 3, o.topK)
}

// FuzzParseFlags: whatever the command line, the parser never panics, and
// what it accepts names exactly one source and sane limits.
func FuzzParseFlags(f *testing.F) {
	f.Add("-encyclopedia", "-topk", "4", "")
	f.Add("-generate", "5", "-out", "x")
	f.Add("-corpus", "main.go", "-index", "x")
	f.Add("-topk", "-1", "-max-topk", "0")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		o, err := parseFlags([]string{a, b, c, d}, io.Discard)
		if err != nil {
			return
		}
		sources := 0
		for _, set := range []bool{o.corpus != "" || o.index != "", o.encyclopedia, o.generate > 0} {
			if set {
				sources++
			}
		}
		if sources != 1 || o.topK < 1 || o.maxTopK < o.topK || o.workers < 0 || o.shutdownTimeout <= 0 || (o.generate > 0) != (o.out != "") {
			t.Fatalf("accepted %+v from %q", o, []string{a, b, c, d})
		}
	})
}
