package search

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Request
		err  string
	}{
		{"Search-R1", `{"queries": ["What is Python?", "Tell me about neural networks."], "topk": 3, "return_scores": true}`,
			Request{Queries: []string{"What is Python?", "Tell me about neural networks."}, TopK: 3, ReturnScores: true}, ""},
		{"defaults: topk null, return_scores absent", `{"queries": ["q"], "topk": null}`, Request{Queries: []string{"q"}}, ""},
		{"topk absent", `{"queries": ["q"], "return_scores": false}`, Request{Queries: []string{"q"}}, ""},
		{"SkyRL's single query", `{"query": "What is Python?", "topk": 2, "return_scores": true}`,
			Request{Queries: []string{"What is Python?"}, TopK: 2, ReturnScores: true}, ""},
		{"no queries", `{"queries": []}`, Request{Queries: []string{}}, ""},
		{"unknown fields ignored", `{"queries": ["q"], "extra": {"a": 1}}`, Request{Queries: []string{"q"}}, ""},
		{"negative topk", `{"queries": ["q"], "topk": -1}`, Request{}, "negative"},
		{"both queries and query", `{"queries": ["a"], "query": "b"}`, Request{}, "both"},
		{"neither", `{"topk": 3}`, Request{}, "neither"},
		{"queries null", `{"queries": null}`, Request{}, "neither"},
		{"queries not strings", `{"queries": [1, 2]}`, Request{}, "request"},
		{"query not a string", `{"query": ["a"]}`, Request{}, "request"},
		{"topk a string", `{"queries": ["a"], "topk": "3"}`, Request{}, "request"},
		{"topk fractional", `{"queries": ["a"], "topk": 2.5}`, Request{}, "request"},
		{"not an object", `["a"]`, Request{}, "request"},
		{"not JSON", `{"queries": [`, Request{}, "request"},
		{"empty", ``, Request{}, "request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRequest([]byte(tt.body))
			if tt.err != "" {
				require.ErrorIs(t, err, ErrMalformed)
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// The bodies below are what Search-R1's retrieval_server.py answers:
// FastAPI writes {"result": resp} with json.dumps(..., separators=(",",
// ":"), ensure_ascii=False); each document is the corpus row (the dense
// retriever's datasets row: id and contents) or, from its BM25 retriever
// over an index that stores the rows, {"title", "text", "contents"}.
func TestParseResponse(t *testing.T) {
	evan := "\"Evan Morris\"\nEvan Morris Evan L. Morris (January 26, 1977 – July 9, 2015) was a lobbyist."
	tests := []struct {
		name     string
		body     string
		nQueries int
		want     [][]Hit
		err      string
	}{
		{"dense, scores", `{"result":[[{"document":{"id":"0","contents":"\"Evan Morris\"\nEvan Morris Evan L. Morris (January 26, 1977 – July 9, 2015) was a lobbyist."},"score":0.8123456835746765}],[]]}`, 2,
			[][]Hit{{{Document: Document{ID: "0", Contents: evan, Raw: []byte(`{"id":"0","contents":"\"Evan Morris\"\nEvan Morris Evan L. Morris (January 26, 1977 – July 9, 2015) was a lobbyist."}`)}, Score: 0.8123456835746765, HasScore: true}}, {}}, ""},
		{"bare documents (return_scores false)", `{"result":[[{"id":"12","contents":"\"T\"\nx"},{"id":"3","contents":"\"U\"\ny"}]]}`, 1,
			[][]Hit{{{Document: Document{ID: "12", Contents: "\"T\"\nx", Raw: []byte(`{"id":"12","contents":"\"T\"\nx"}`)}},
				{Document: Document{ID: "3", Contents: "\"U\"\ny", Raw: []byte(`{"id":"3","contents":"\"U\"\ny"}`)}}}}, ""},
		{"BM25 with stored rows", `{"result":[[{"document":{"title":"T","text":"x","contents":"\"T\"\nx"},"score":7.5}]]}`, 1,
			[][]Hit{{{Document: Document{Contents: "\"T\"\nx", Raw: []byte(`{"title":"T","text":"x","contents":"\"T\"\nx"}`)}, Score: 7.5, HasScore: true}}}, ""},
		{"integer id, spaces", `{"result": [[{"document": {"id": 42, "contents": "c"}, "score": 1}]]}`, 1,
			[][]Hit{{{Document: Document{ID: "42", Contents: "c", Raw: []byte(`{"id": 42, "contents": "c"}`)}, Score: 1, HasScore: true}}}, ""},
		{"no queries", `{"result":[]}`, 0, [][]Hit{}, ""},
		{"too few lists", `{"result":[[]]}`, 2, nil, "1 result lists for 2 queries"},
		{"no result", `{"detail":"Not Found"}`, 1, nil, `no "result"`},
		{"result null", `{"result":null}`, 1, nil, `no "result"`},
		{"document without contents", `{"result":[[{"document":{"id":"0"},"score":1}]]}`, 1, nil, `no string "contents"`},
		{"contents a number", `{"result":[[{"id":"0","contents":1}]]}`, 1, nil, "document"},
		{"item a string", `{"result":[["text"]]}`, 1, nil, "result item"},
		{"document a list", `{"result":[[{"document":[1],"score":1}]]}`, 1, nil, "JSON object"},
		{"score a string", `{"result":[[{"document":{"contents":"c"},"score":"1"}]]}`, 1, nil, "result item"},
		{"id a float", `{"result":[[{"id":1.5,"contents":"c"}]]}`, 1, nil, "neither a string nor an integer"},
		{"HTML", `<html>502 Bad Gateway</html>`, 1, nil, "response"},
		{"NaN", `{"result":[[{"document":{"contents":"c"},"score":NaN}]]}`, 1, nil, "response"},
		{"empty", ``, 1, nil, "response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResponse([]byte(tt.body), tt.nQueries)
			if tt.err != "" {
				require.ErrorIs(t, err, ErrMalformed)
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestAppendResponse(t *testing.T) {
	hits := [][]Hit{
		{{Document: Document{Raw: []byte(`{"id":"0","contents":"\"A\"\na"}`)}, Score: 1.5}, {Document: Document{Raw: []byte(`{"id":"1","contents":"b"}`)}, Score: 0.25}},
		{},
	}
	assert.Equal(t, `{"result":[[{"document":{"id":"0","contents":"\"A\"\na"},"score":1.5},{"document":{"id":"1","contents":"b"},"score":0.25}],[]]}`,
		string(AppendResponse(nil, hits, true)))
	assert.Equal(t, `{"result":[[{"id":"0","contents":"\"A\"\na"},{"id":"1","contents":"b"}],[]]}`,
		string(AppendResponse(nil, hits, false)))
	assert.Equal(t, `{"result":[]}`, string(AppendResponse(nil, [][]Hit{}, true)))

	// What it writes, ParseResponse reads back.
	back, err := ParseResponse(AppendResponse(nil, hits, true), 2)
	require.NoError(t, err)
	assert.Equal(t, 1.5, back[0][0].Score)
	assert.Equal(t, "1", back[0][1].Document.ID)
	assert.Empty(t, back[1])
}

func TestDocumentTitleAndText(t *testing.T) {
	tests := []struct{ contents, title, text string }{
		{"\"Evan Morris\"\nEvan L. Morris was\na lobbyist.", `"Evan Morris"`, "Evan L. Morris was\na lobbyist."},
		{"one line", "one line", ""},
		{"", "", ""},
		{"\nno title", "", "no title"},
	}
	for _, tt := range tests {
		d := Document{Contents: tt.contents}
		assert.Equal(t, tt.title, d.Title(), "%q", tt.contents)
		assert.Equal(t, tt.text, d.Text(), "%q", tt.contents)
	}
}
