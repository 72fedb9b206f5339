package bm25

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/agentrl/agentrl/internal/pyjson"
	"github.com/agentrl/agentrl/tool/search"
)

// ServerConfig configures a Server. Zero fields take the default named on
// them.
type ServerConfig struct {
	// TopK is the number of documents of a request whose topk is null,
	// absent or 0; default 3 (Search-R1's --topk).
	TopK int
	// MaxTopK bounds a request's topk; default 100.
	MaxTopK int
	// MaxQueries bounds the queries of one request; default 4096.
	MaxQueries int
	// MaxQueryBytes bounds each query's length in bytes; default 16 KiB.
	MaxQueryBytes int
	// MaxBodyBytes bounds a request body; default 32 MiB.
	MaxBodyBytes int64
}

// Server serves an Index over Search-R1's retrieval API:
//
//	POST /retrieve  {"queries": [...], "topk": k, "return_scores": b}
//	                (or SkyRL's {"query": "...", ...})
//	GET  /health    {"status":"ok","documents":N}
//
// answering as Search-R1's retrieval_server.py does (see package search).
// A request's queries are searched concurrently over the index's workers,
// which all requests share. A body that is not such a request, or is over
// a limit, is answered 422 (413 for the body's size) with FastAPI's
// {"detail": "..."}; an unknown path 404, a wrong method 405. It
// implements http.Handler.
type Server struct {
	ix  *Index
	cfg ServerConfig
}

// NewServer returns a server of ix.
func NewServer(ix *Index, cfg ServerConfig) (*Server, error) {
	if ix == nil {
		return nil, errors.New("bm25: NewServer: nil Index")
	}
	if cfg.TopK < 0 || cfg.MaxTopK < 0 || cfg.MaxQueries < 0 || cfg.MaxQueryBytes < 0 || cfg.MaxBodyBytes < 0 {
		return nil, errors.New("bm25: ServerConfig limits must not be negative")
	}
	if cfg.TopK == 0 {
		cfg.TopK = 3
	}
	if cfg.MaxTopK == 0 {
		cfg.MaxTopK = 100
	}
	if cfg.MaxQueries == 0 {
		cfg.MaxQueries = 4096
	}
	if cfg.MaxQueryBytes == 0 {
		cfg.MaxQueryBytes = 16 << 10
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 32 << 20
	}
	if cfg.TopK > cfg.MaxTopK {
		return nil, fmt.Errorf("bm25: ServerConfig.TopK %d is above MaxTopK %d", cfg.TopK, cfg.MaxTopK)
	}
	return &Server{ix: ix, cfg: cfg}, nil
}

// ServeHTTP answers /retrieve and /health.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/retrieve":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
			return
		}
		s.retrieve(w, r)
	case "/health":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"ok","documents":%d}`, s.ix.Len())
	default:
		writeDetail(w, http.StatusNotFound, "Not Found")
	}
}

func (s *Server) retrieve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeDetail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", s.cfg.MaxBodyBytes))
			return
		}
		writeDetail(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	}
	req, err := s.Parse(body)
	if err != nil {
		writeDetail(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	hits, err := s.ix.Retrieve(r.Context(), req.Queries, req.TopK)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return // the client is gone
		}
		writeDetail(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(search.AppendResponse(nil, hits, req.ReturnScores))
}

// Parse reads a /retrieve body (search.ParseRequest) and checks it
// against the server's limits; a topk of 0 becomes the server's default.
func (s *Server) Parse(body []byte) (search.Request, error) {
	req, err := search.ParseRequest(body)
	if err != nil {
		return search.Request{}, err
	}
	switch {
	case len(req.Queries) > s.cfg.MaxQueries:
		return search.Request{}, fmt.Errorf("%w: %d queries, at most %d per request", search.ErrMalformed, len(req.Queries), s.cfg.MaxQueries)
	case req.TopK > s.cfg.MaxTopK:
		return search.Request{}, fmt.Errorf("%w: topk %d is above this server's limit, %d", search.ErrMalformed, req.TopK, s.cfg.MaxTopK)
	}
	for i, q := range req.Queries {
		if len(q) > s.cfg.MaxQueryBytes {
			return search.Request{}, fmt.Errorf("%w: query %d is %d bytes long, at most %d", search.ErrMalformed, i, len(q), s.cfg.MaxQueryBytes)
		}
	}
	if req.TopK == 0 {
		req.TopK = s.cfg.TopK
	}
	return req, nil
}

// writeDetail answers code with FastAPI's error body, {"detail": msg}.
func writeDetail(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(`{"detail":` + pyjson.Quote(msg) + `}`))
}
