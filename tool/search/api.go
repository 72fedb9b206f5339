package search

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrMalformed is wrapped by the errors of ParseRequest, ParseResponse and
// ReadCorpus for input that does not have the retrieval API's or the
// corpus's shape.
var ErrMalformed = errors.New("search: malformed")

// Request is the body of POST /retrieve, as Search-R1's retrieval_server.py
// declares it (QueryRequest): the queries, how many documents to return
// for each, and whether to return their scores.
type Request struct {
	// Queries are searched independently; the response has one list of
	// hits per query, in order.
	Queries []string `json:"queries"`
	// TopK is how many documents to return per query; 0 asks for the
	// server's default (Search-R1's --topk, 3).
	TopK int `json:"topk"`
	// ReturnScores asks for {"document", "score"} items instead of bare
	// documents.
	ReturnScores bool `json:"return_scores"`
}

// Document is one passage of a corpus in Search-R1's format: a JSON object
// with an "id" and "contents", whose first line is the title in double
// quotes: {"id": "0", "contents": "\"Evan Morris\"\nEvan L. Morris was ..."}.
type Document struct {
	// ID is the "id" field, a string or an integer written in decimal;
	// empty when the row has none.
	ID string
	// Contents is the "contents" field: the title line, a newline, the
	// text.
	Contents string
	// Raw is the whole JSON object as the corpus or the server gave it,
	// every field kept in order (Search-R1's BM25 server adds "title" and
	// "text"; other corpora carry their own).
	Raw json.RawMessage
}

// Title returns the first line of Contents as it is, quotes included:
// the title verl and Search-R1 show the model.
func (d Document) Title() string {
	title, _, _ := strings.Cut(d.Contents, "\n")
	return title
}

// Text returns Contents after its first line ("" when it has one line).
func (d Document) Text() string {
	_, text, _ := strings.Cut(d.Contents, "\n")
	return text
}

// Hit is one retrieved document.
type Hit struct {
	Document Document
	// Score is the retriever's score (BM25, or an inner product for
	// dense retrievers); meaningful only when HasScore is set.
	Score    float64
	HasScore bool
}

// ParseDocument reads a document object: "contents" must be a string,
// "id" a string, an integer or absent; other fields are kept in Raw, which
// is data without white space around it (not copied). Errors wrap
// ErrMalformed.
func ParseDocument(data []byte) (Document, error) {
	var fields struct {
		ID       json.RawMessage `json:"id"`
		Contents *string         `json:"contents"`
	}
	d := bytes.TrimSpace(data)
	if len(d) == 0 || d[0] != '{' {
		return Document{}, fmt.Errorf("%w: a document must be a JSON object, got %s", ErrMalformed, snippet(d))
	}
	if err := json.Unmarshal(d, &fields); err != nil {
		return Document{}, fmt.Errorf("%w: document: %v", ErrMalformed, err)
	}
	if fields.Contents == nil {
		return Document{}, fmt.Errorf("%w: document has no string \"contents\": %s", ErrMalformed, snippet(d))
	}
	doc := Document{Contents: *fields.Contents, Raw: d}
	switch id := bytes.TrimSpace(fields.ID); {
	case len(id) == 0 || string(id) == "null":
	case id[0] == '"':
		if err := json.Unmarshal(id, &doc.ID); err != nil {
			return Document{}, fmt.Errorf("%w: document id: %v", ErrMalformed, err)
		}
	default:
		if _, err := strconv.ParseInt(string(id), 10, 64); err != nil {
			return Document{}, fmt.Errorf("%w: document id %s is neither a string nor an integer", ErrMalformed, snippet(id))
		}
		doc.ID = string(id)
	}
	return doc, nil
}

// ParseRequest reads a /retrieve request body: Search-R1's
// {"queries": [...], "topk": k, "return_scores": b}, or SkyRL's
// single-query {"query": "...", ...} (skyrl-gym's search tool and its
// retrieval_server.py), which becomes one query. "topk" may be null or
// absent (0: the server's default) and must not be negative;
// "return_scores" may be absent (false). Unknown fields are ignored, as
// pydantic does.
func ParseRequest(body []byte) (Request, error) {
	var raw struct {
		Queries      *[]string `json:"queries"`
		Query        *string   `json:"query"`
		TopK         *int      `json:"topk"`
		ReturnScores *bool     `json:"return_scores"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return Request{}, fmt.Errorf("%w: request: %v", ErrMalformed, err)
	}
	var req Request
	switch {
	case raw.Queries != nil && raw.Query != nil:
		return Request{}, fmt.Errorf("%w: request has both \"queries\" and \"query\"", ErrMalformed)
	case raw.Queries != nil:
		req.Queries = *raw.Queries
	case raw.Query != nil:
		req.Queries = []string{*raw.Query}
	default:
		return Request{}, fmt.Errorf("%w: request has neither \"queries\" (a list of strings) nor \"query\" (a string)", ErrMalformed)
	}
	if req.Queries == nil {
		req.Queries = []string{}
	}
	if raw.TopK != nil {
		if *raw.TopK < 0 {
			return Request{}, fmt.Errorf("%w: request topk %d is negative", ErrMalformed, *raw.TopK)
		}
		req.TopK = *raw.TopK
	}
	if raw.ReturnScores != nil {
		req.ReturnScores = *raw.ReturnScores
	}
	return req, nil
}

// ParseResponse reads a /retrieve response body for a request of
// nQueries queries: {"result": [[item, ...], ...]} with one list per
// query, each item either {"document": {...}, "score": x} (return_scores
// true) or the document itself (false). Every document must have string
// "contents". A different number of lists than queries is an error: the
// hits could not be told apart.
func ParseResponse(body []byte, nQueries int) ([][]Hit, error) {
	var resp struct {
		Result *[][]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("%w: response: %v (body %s)", ErrMalformed, err, snippet(body))
	}
	if resp.Result == nil {
		return nil, fmt.Errorf("%w: response has no \"result\" list (body %s)", ErrMalformed, snippet(body))
	}
	if len(*resp.Result) != nQueries {
		return nil, fmt.Errorf("%w: response has %d result lists for %d queries", ErrMalformed, len(*resp.Result), nQueries)
	}
	out := make([][]Hit, nQueries)
	for q, items := range *resp.Result {
		out[q] = make([]Hit, 0, len(items))
		for i, item := range items {
			h, err := parseHit(item)
			if err != nil {
				return nil, fmt.Errorf("query %d, item %d: %w", q, i, err)
			}
			out[q] = append(out[q], h)
		}
	}
	return out, nil
}

// parseHit reads one result item: {"document": {...}, "score": x} or a
// bare document.
func parseHit(item json.RawMessage) (Hit, error) {
	var scored struct {
		Document json.RawMessage `json:"document"`
		Score    *float64        `json:"score"`
	}
	if err := json.Unmarshal(item, &scored); err != nil {
		return Hit{}, fmt.Errorf("%w: result item: %v", ErrMalformed, err)
	}
	if scored.Document == nil {
		doc, err := ParseDocument(item)
		return Hit{Document: doc}, err
	}
	doc, err := ParseDocument(scored.Document)
	if err != nil {
		return Hit{}, err
	}
	h := Hit{Document: doc}
	if scored.Score != nil {
		h.Score, h.HasScore = *scored.Score, true
	}
	return h, nil
}

// AppendResponse appends the /retrieve response body for hits to dst, in
// the shape Search-R1's server answers (FastAPI writes it with
// json.dumps(..., separators=(",", ":"))): with scores,
// {"result":[[{"document":{...},"score":x},...],...]}; without,
// {"result":[[{...},...],...]}. Documents are written as their Raw JSON;
// scores that are not finite as 0.
func AppendResponse(dst []byte, hits [][]Hit, withScores bool) []byte {
	dst = append(dst, `{"result":[`...)
	for q, list := range hits {
		if q > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		for i, h := range list {
			if i > 0 {
				dst = append(dst, ',')
			}
			if withScores {
				dst = append(dst, `{"document":`...)
			}
			dst = append(dst, h.Document.Raw...)
			if withScores {
				dst = append(dst, `,"score":`...)
				dst = appendScore(dst, h.Score)
				dst = append(dst, '}')
			}
		}
		dst = append(dst, ']')
	}
	return append(dst, "]}"...)
}

func appendScore(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, '0')
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}

// snippet returns the start of b for an error message.
func snippet(b []byte) string {
	const max = 120
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "..."
	}
	return strconv.Quote(string(b))
}
