package bm25_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/agentrl/agentrl/tool/search/bm25"
	"github.com/agentrl/agentrl/tool/search/encyclopedia"
)

// ExampleBuild indexes the shipped encyclopedia in memory and searches it.
func ExampleBuild() {
	ix, err := bm25.Build(context.Background(), encyclopedia.Corpus(), bm25.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()
	hits, err := ix.Search(context.Background(), "Mebrem Naegrubis", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ix.Len(), "documents")
	fmt.Println(hits[0].Document.Title())
	fmt.Println(hits[0].Document.Text())
	// Output:
	// 300 documents
	// "Mebrem Naegrubis"
	// Mebrem Naegrubis was born in 1678 in Grebrist and became a poet. His epic The Hollow Weir was completed in 1723.
}

// ExampleServer serves an index over Search-R1's /retrieve API; for a
// corpus file on disk, BuildFile (or Build with Config.Dir, then Open)
// does the same.
func ExampleServer() {
	corpus := `{"id": "0", "contents": "\"Tolmarin\"\nTolmarin is a town on the Orvane River."}
{"id": "1", "contents": "\"Orvane River\"\nThe Orvane River flows into the Pallid Sea."}
`
	ix, err := bm25.Build(context.Background(), strings.NewReader(corpus), bm25.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()
	srv, err := bm25.NewServer(ix, bm25.ServerConfig{TopK: 3})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv) // or http.ListenAndServe("127.0.0.1:8000", srv)
	defer hs.Close()

	resp, err := http.Post(hs.URL+"/retrieve", "application/json",
		strings.NewReader(`{"queries": ["Pallid Sea"], "topk": 1, "return_scores": false}`))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output:
	// {"result":[[{"id":"1","contents":"\"Orvane River\"\nThe Orvane River flows into the Pallid Sea."}]]}
}
