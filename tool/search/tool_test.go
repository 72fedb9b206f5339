package search

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/tool"
)

func newTool(t *testing.T, h http.Handler, ccfg ClientConfig, tcfg ToolConfig) *Tool {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	tl, err := NewTool(newClient(t, hs.URL+"/retrieve", ccfg), tcfg)
	require.NoError(t, err)
	return tl
}

func TestToolSchema(t *testing.T) {
	tl := newTool(t, &searchR1Server{}, ClientConfig{}, ToolConfig{})
	assert.Equal(t, "search", tl.Name())
	// verl's search_tool_config.yaml, in its key order ("items" for its
	// "item").
	assert.Equal(t, `{"type": "function", "function": {"name": "search", "description": "Searches the web for relevant information based on the given query.", `+
		`"parameters": {"type": "object", "properties": {"query_list": {"type": "array", "items": {"type": "string"}, `+
		`"description": "A list of fully-formed semantic queries. The tool will return search results for each query."}}, "required": ["query_list"]}}}`,
		string(tl.Schema()))
	reg, err := tool.NewRegistry(tl)
	require.NoError(t, err)
	assert.Equal(t, []string{"search"}, reg.Names())

	tl2, err := NewTool(tl.client, ToolConfig{Name: "wiki", Description: `Search "wiki" <local>`})
	require.NoError(t, err)
	assert.Contains(t, string(tl2.Schema()), `"name": "wiki", "description": "Search \"wiki\" <local>"`)
	_, err = NewTool(tl.client, ToolConfig{Format: "markdown"})
	assert.ErrorContains(t, err, "Format")
	_, err = NewTool(nil, ToolConfig{})
	assert.Error(t, err)
}

// TestToolText checks the text the model reads against the wants derived
// by hand from verl's _passages2string and perform_single_search_batch
// (verl/tools/utils/search_r1_like_utils.py) and Search-R1's
// _passages2string (search_r1/llm_agent/generation.py), for the hits
// searchR1Server gives: "fox" finds docs 0 and 1, "owl" doc 2, "port" the
// last.
func TestToolText(t *testing.T) {
	docs := append(zooDocs[:3:3], `{"id":"3","contents":"\"Ålesund\"\nA port\tcity — <b>tags</b>\nsecond line"}`)
	srv := &searchR1Server{docs: docs}
	tests := []struct {
		name   string
		format Format
		args   string
		want   string
	}{
		{"verl, two queries", FormatVerl, `{"query_list": ["fox", "owl"]}`,
			`{"result": "Doc 1 (Title: \"Fox\")\nThe fox lives in a den.\n\nDoc 2 (Title: \"Hen\")\nThe hen fears the fox.\n---\nDoc 1 (Title: \"Owl\")\nThe owl hunts at night."}`},
		// json.dumps(..., ensure_ascii=False): non-ASCII, <, > kept, the tab escaped.
		{"verl, non-ASCII", FormatVerl, `{"query_list": ["port"]}`,
			`{"result": "Doc 1 (Title: \"Ålesund\")\nA port\tcity — <b>tags</b>\nsecond line"}`},
		{"verl, a query without hits", FormatVerl, `{"query_list": ["zebra", "owl"]}`,
			`{"result": "\n---\nDoc 1 (Title: \"Owl\")\nThe owl hunts at night."}`},
		{"Search-R1, two queries", FormatSearchR1, `{"query_list": ["fox", "owl"]}`,
			"Doc 1(Title: \"Fox\") The fox lives in a den.\nDoc 2(Title: \"Hen\") The hen fears the fox.\n\n---\nDoc 1(Title: \"Owl\") The owl hunts at night.\n"},
		{"Search-R1, non-ASCII", FormatSearchR1, `{"query_list": ["port"]}`,
			"Doc 1(Title: \"Ålesund\") A port\tcity — <b>tags</b>\nsecond line\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTool(t, srv, ClientConfig{}, ToolConfig{Format: tt.format})
			res, err := tl.Call(context.Background(), json.RawMessage(tt.args))
			require.NoError(t, err)
			assert.False(t, res.Failed)
			assert.Equal(t, tt.want, res.Content)
			assert.Equal(t, "success", res.Metadata["status"])
			assert.Positive(t, res.Duration)
		})
	}
}

func TestToolNoResults(t *testing.T) {
	tl := newTool(t, &searchR1Server{docs: zooDocs}, ClientConfig{}, ToolConfig{})
	res, err := tl.Call(context.Background(), json.RawMessage(`{"query_list": ["zebra", "unicorn"]}`))
	require.NoError(t, err)
	assert.False(t, res.Failed)
	assert.Equal(t, `{"result": "No search results found."}`, res.Content)
	assert.Equal(t, map[string]any{"status": "no_results", "query_count": 2, "total_results": 0}, res.Metadata)
}

func TestToolBadArguments(t *testing.T) {
	tl := newTool(t, &searchR1Server{docs: zooDocs}, ClientConfig{}, ToolConfig{MaxQueries: 2})
	verlMsg := `{"result": "Error: 'query_list' is missing, empty, or not a list in parameters."}`
	for _, args := range []string{`{"query_list": []}`, `{"query": "fox"}`, `{"query_list": "fox"}`, `{"query_list": [1]}`, `[]`, ``} {
		res, err := tl.Call(context.Background(), json.RawMessage(args))
		require.NoError(t, err, args)
		assert.True(t, res.Failed, args)
		assert.Equal(t, verlMsg, res.Content, args)
		assert.Equal(t, "bad_arguments", res.Metadata["status"])
	}
	res, err := tl.Call(context.Background(), json.RawMessage(`{"query_list": ["a", "b", "c"]}`))
	require.NoError(t, err)
	assert.True(t, res.Failed)
	assert.Equal(t, `{"result": "Error: 'query_list' has 3 queries; at most 2 are allowed per call."}`, res.Content)
	assert.Equal(t, 3, res.Metadata["query_count"])

	// Through a registry, arguments that do not fit the schema never
	// reach the tool.
	reg, err := tool.NewRegistry(tl)
	require.NoError(t, err)
	res, err = reg.Call(context.Background(), "search", json.RawMessage(`{"query_list": [1]}`))
	require.NoError(t, err)
	assert.True(t, res.Failed)
	assert.Equal(t, "Error: invalid arguments for search: arguments.query_list[0]: want string, got number", res.Content)
}

// TestToolServerFailures checks that every failure of the server gives a
// failed result the model reads (verl's text), verl's metrics and an
// error wrapping *Error, within the client's attempts.
func TestToolServerFailures(t *testing.T) {
	fast := ClientConfig{BatchWait: -1, RetryDelay: time.Millisecond, AttemptTimeout: 100 * time.Millisecond, MaxAttempts: 2}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		kind    string
		text    string
	}{
		{"500", status(500), KindHTTPStatus, "failed after 2 attempt(s): HTTP 500: status 500"},
		{"400", status(400), KindHTTPStatus, "failed after 1 attempt(s): HTTP 400: status 400"},
		{"garbage", garbage, KindMalformed, `failed after 1 attempt(s): search: malformed: response: invalid character '<'`},
		{"hang", hang, KindTimeout, "failed after 2 attempt(s): the attempt timed out after 100ms"},
		{"wrong shape", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"result":[]}`)) }, KindMalformed, "0 result lists for 1 queries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTool(t, tt.handler, fast, ToolConfig{})
			start := time.Now()
			res, err := tl.Call(context.Background(), json.RawMessage(`{"query_list": ["fox"]}`))
			assert.Less(t, time.Since(start), 10*time.Second)
			var se *Error
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.kind, se.Kind)
			assert.True(t, strings.HasPrefix(err.Error(), "tool: search: search: POST "), err.Error())
			assert.True(t, res.Failed)
			assert.True(t, strings.HasPrefix(res.Content, `{"result": "Search error: search: POST http://`), res.Content)
			assert.Contains(t, res.Content, tt.text)
			assert.Equal(t, "api_error", res.Metadata["status"])
			assert.Equal(t, tt.kind, res.Metadata["error"])
			assert.Equal(t, 1, res.Metadata["query_count"])
			assert.Equal(t, 0, res.Metadata["total_results"])
			assert.Equal(t, se.Error(), res.Metadata["api_request_error"])
		})
	}

	tl := newTool(t, http.HandlerFunc(hang), ClientConfig{}, ToolConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := tl.Call(ctx, json.RawMessage(`{"query_list": ["fox"]}`))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, res.Failed)
	assert.Equal(t, "cancelled", res.Metadata["error"])
}

func TestPyStrip(t *testing.T) {
	// Python's str.strip() removes what str.isspace() names.
	assert.Equal(t, "a \u200b b", pyStrip("\u3000\u2028\x1c\u0085\u00a0 a \u200b b\u2009\t\n\v\f\r"))
	assert.Equal(t, "", pyStrip(" \u205f\u202f\u1680"))
}
