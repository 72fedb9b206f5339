package search_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/agentrl/agentrl/tool/search"
	"github.com/agentrl/agentrl/tool/search/bm25"
)

const corpus = `{"id": "0", "contents": "\"Tolmarin\"\nTolmarin is a town on the Orvane River, founded in 1265."}
{"id": "1", "contents": "\"Orvane River\"\nThe Orvane River flows into the Pallid Sea."}
{"id": "2", "contents": "\"Velda Quorn\"\nVelda Quorn was a clockmaker, born in Tolmarin in 1742."}
`

// ExampleTool searches a retrieval server as verl's search tool does. Any
// server of Search-R1's API works: retrieval_server.py (e5 + FAISS), or
// the embedded BM25 server of package bm25, used here.
func ExampleTool() {
	ix, err := bm25.Build(context.Background(), strings.NewReader(corpus), bm25.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()
	srv, err := bm25.NewServer(ix, bm25.ServerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv) // or: go run ./examples/retrieval -corpus corpus.jsonl
	defer hs.Close()

	client, err := search.NewClient(search.ClientConfig{URL: hs.URL + "/retrieve", TopK: 1})
	if err != nil {
		log.Fatal(err)
	}
	st, err := search.NewTool(client, search.ToolConfig{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := st.Call(context.Background(), json.RawMessage(`{"query_list": ["Where was Velda Quorn born?", "Orvane River"]}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content)
	fmt.Println(res.Metadata["status"], res.Metadata["total_results"])
	// Output:
	// {"result": "Doc 1 (Title: \"Velda Quorn\")\nVelda Quorn was a clockmaker, born in Tolmarin in 1742.\n---\nDoc 1 (Title: \"Orvane River\")\nThe Orvane River flows into the Pallid Sea."}
	// success 2
}

// ExampleClient_Search retrieves with scores; concurrent Search calls
// share requests.
func ExampleClient_Search() {
	ix, err := bm25.Build(context.Background(), strings.NewReader(corpus), bm25.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()
	srv, err := bm25.NewServer(ix, bm25.ServerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()

	client, err := search.NewClient(search.ClientConfig{URL: hs.URL, TopK: 2})
	if err != nil {
		log.Fatal(err)
	}
	hits, err := client.Search(context.Background(), []string{"Tolmarin"})
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range hits[0] {
		fmt.Printf("%s %s %.3f\n", h.Document.ID, h.Document.Title(), h.Score)
	}
	// Output:
	// 0 "Tolmarin" 0.268
	// 2 "Velda Quorn" 0.206
}
