// Command retrieval serves a corpus over the retrieval-server API of
// Search-R1 (POST /retrieve), with BM25 from package tool/search/bm25: the
// search engine a search-agent training run points its search tool at,
// with nothing but Go installed, in place of Search-R1's
// retrieval_server.py (e5 + FAISS, or pyserini's BM25).
//
// Usage:
//
//	retrieval -corpus FILE [-index DIR] [-addr 127.0.0.1:8000] [-topk 3] [flags]
//	retrieval -index DIR [flags]
//	retrieval -encyclopedia [flags]
//	retrieval -generate N -out DIR
//
// -corpus is a JSON Lines corpus in Search-R1's format: one
// {"id": "0", "contents": "\"Title\"\ntext"} object per line, other fields
// kept and returned. Without -index the index is built in memory at
// start; with -index it is built into DIR once (a directory that must not
// exist) and opened from there afterwards — given -corpus too, the
// corpus must be the one the index was built from. -encyclopedia serves
// the small corpus shipped in package tool/search/encyclopedia (300
// passages about fictional entities, with questions for training).
// -generate writes a larger encyclopedia of about N passages into DIR
// (corpus.jsonl, train.jsonl, test.jsonl) and exits.
//
// The server answers as retrieval_server.py does:
//
//	curl -s localhost:8000/retrieve -d '{"queries": ["Mebrem Naegrubis"], "topk": 1, "return_scores": true}'
//	{"result":[[{"document":{"id":"0","contents":"\"Mebrem Naegrubis\"\n..."},"score":...}]]}
//
// and GET /health reports {"status":"ok","documents":N}. A training run
// points its search tool at http://ADDR/retrieve (package tool/search's
// Client and Tool, or verl's search_tool_config.yaml
// retrieval_service_url). The server runs until SIGINT or SIGTERM, then
// waits up to -shutdown-timeout for the requests in flight.
//
// Exit status: 0 after a signal, 2 for a usage error, 1 for any other
// failure (a malformed corpus, with the line; an index built from another
// corpus; an address in use).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/tool/search/bm25"
	"github.com/agentrl/agentrl/tool/search/encyclopedia"
)

func main() { setup.Main(run) }

// options are the parsed flags.
type options struct {
	corpus, index, addr string
	encyclopedia        bool
	generate            int
	out                 string
	seed                uint64
	topK, maxTopK       int
	workers             int
	shutdownTimeout     time.Duration
}

const synopsis = "retrieval (-corpus FILE [-index DIR] | -index DIR | -encyclopedia | -generate N -out DIR) [-addr 127.0.0.1:8000] [flags]"

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := setup.NewFlagSet("retrieval", synopsis, stderr)
	fs.StringVar(&o.corpus, "corpus", "", "corpus in Search-R1's JSON Lines format: {\"id\", \"contents\"} per line")
	fs.StringVar(&o.index, "index", "", "on-disk index directory: built from -corpus when missing, opened when present; empty: in memory")
	fs.BoolVar(&o.encyclopedia, "encyclopedia", false, "serve the shipped 300-passage encyclopedia of fictional entities")
	fs.IntVar(&o.generate, "generate", 0, "write an encyclopedia of about N passages (corpus.jsonl, train.jsonl, test.jsonl) into -out and exit")
	fs.StringVar(&o.out, "out", "", "directory -generate writes into")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of -generate")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8000", "address to listen on, host:port (port 0: any free port)")
	fs.IntVar(&o.topK, "topk", 3, "documents per query when a request's topk is null or 0 (Search-R1's --topk)")
	fs.IntVar(&o.maxTopK, "max-topk", 100, "the largest topk a request may ask for")
	fs.IntVar(&o.workers, "workers", 0, "queries searched at once; 0: GOMAXPROCS")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long shutdown waits for the requests in flight")
	if err := setup.Parse(fs, args); err != nil {
		return o, err
	}
	bad := func(format string, a ...any) (options, error) { return o, fmt.Errorf(format, a...) }
	sources := 0
	for _, set := range []bool{o.corpus != "" || o.index != "", o.encyclopedia, o.generate != 0} {
		if set {
			sources++
		}
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected arguments %q", fs.Args())
	case sources == 0:
		return bad("give -corpus, -index, -encyclopedia or -generate")
	case sources > 1:
		return bad("-corpus/-index, -encyclopedia and -generate exclude each other")
	case o.generate < 0:
		return bad("-generate %d: want a number of passages", o.generate)
	case o.generate > 0 && o.out == "":
		return bad("-generate needs -out")
	case o.generate == 0 && o.out != "":
		return bad("-out goes with -generate")
	case o.topK < 1 || o.maxTopK < o.topK:
		return bad("-topk %d, -max-topk %d: want 1 ≤ topk ≤ max-topk", o.topK, o.maxTopK)
	case o.workers < 0:
		return bad("-workers %d: want 0 (GOMAXPROCS) or more", o.workers)
	case o.shutdownTimeout <= 0:
		return bad("-shutdown-timeout %v: want a positive duration", o.shutdownTimeout)
	}
	if o.generate == 0 {
		if _, _, err := net.SplitHostPort(o.addr); err != nil {
			return bad("-addr: %w", err)
		}
	}
	if o.corpus != "" {
		if err := setup.CheckFile(o.corpus); err != nil {
			return bad("-corpus: %v", err)
		}
	}
	if o.corpus == "" && o.index != "" {
		if _, err := os.Stat(o.index); err != nil {
			return bad("-index %s does not exist; give -corpus to build it", o.index)
		}
	}
	return o, nil
}

// run is the program after main, with its exit status (setup.Run); the
// tests call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return setup.Run(ctx, "retrieval", args, stdout, stderr, parseFlags, serveCorpus)
}

// serveCorpus builds or opens the index and serves it until ctx ends.
func serveCorpus(ctx context.Context, o options, stdout, stderr io.Writer) error {
	if o.generate > 0 {
		return generate(o, stdout)
	}
	start := time.Now()
	ix, how, err := openIndex(ctx, o)
	if err != nil {
		return err
	}
	defer ix.Close()
	size := "in memory"
	if o.index != "" {
		n, err := ix.DiskBytes()
		if err != nil {
			return err
		}
		size = fmt.Sprintf("%.1f MiB on disk", float64(n)/(1<<20))
	}
	fmt.Fprintf(stdout, "%s %d documents in %.1fs (%s)\n", how, ix.Len(), time.Since(start).Seconds(), size)

	srv, err := bm25.NewServer(ix, bm25.ServerConfig{TopK: o.topK, MaxTopK: o.maxTopK})
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "serving POST /retrieve, top %d by default, on http://%s/retrieve\n", o.topK, ln.Addr())

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stderr, "retrieval: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return errors.Join(fmt.Errorf("requests still in flight after %v: %w", o.shutdownTimeout, err), hs.Close())
	}
	return nil
}

// openIndex builds the index in memory or on disk, or opens the one on
// disk, and says which it did.
func openIndex(ctx context.Context, o options) (*bm25.Index, string, error) {
	cfg := bm25.Config{Dir: o.index, Workers: o.workers}
	switch {
	case o.encyclopedia:
		ix, err := bm25.Build(ctx, encyclopedia.Corpus(), cfg)
		return ix, "indexed the shipped encyclopedia:", err
	case o.index == "":
		ix, err := bm25.BuildFile(ctx, o.corpus, cfg)
		return ix, "indexed", err
	}
	if _, err := os.Stat(o.index); errors.Is(err, os.ErrNotExist) {
		ix, err := bm25.BuildFile(ctx, o.corpus, cfg)
		return ix, "indexed into " + o.index + ":", err
	}
	ix, err := bm25.Open(cfg)
	if err != nil {
		return nil, "", err
	}
	if o.corpus != "" {
		sum, err := corpusSHA256(o.corpus)
		if err == nil && sum != ix.CorpusSHA256() {
			err = fmt.Errorf("the index in %s was built from another corpus than %s; remove it to rebuild", o.index, o.corpus)
		}
		if err != nil {
			_ = ix.Close()
			return nil, "", err
		}
	}
	return ix, "opened " + o.index + ":", nil
}

// corpusSHA256 hashes a corpus file as bm25.Index.CorpusSHA256 reports.
func corpusSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum, err := bm25.CorpusSHA256(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return sum, nil
}

// generate writes an encyclopedia of about o.generate passages.
func generate(o options, stdout io.Writer) error {
	e, err := encyclopedia.Generate(encyclopedia.Scaled(o.generate, o.seed))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer) error{
		"corpus.jsonl": e.WriteCorpus,
		"train.jsonl":  func(w io.Writer) error { return e.WriteQuestions(w, "train") },
		"test.jsonl":   func(w io.Writer) error { return e.WriteQuestions(w, "test") },
	} {
		f, err := os.Create(filepath.Join(o.out, name))
		if err != nil {
			return err
		}
		if err := write(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "wrote %d passages and %d questions (%d train, %d test) into %s\n",
		len(e.Passages), len(e.Questions), len(e.Split("train")), len(e.Split("test")), o.out)
	return nil
}
