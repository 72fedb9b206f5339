package search_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
	"github.com/agentrl/agentrl/tool/search"
	"github.com/agentrl/agentrl/tool/search/bm25"
	"github.com/agentrl/agentrl/tool/search/encyclopedia"
)

// chatML is a byte-level tokenizer with Qwen's chat markup as specials.
func chatML(t *testing.T) *tokenizer.Bytes {
	tok, err := tokenizer.NewBytes(tokenizer.BytesConfig{
		Specials: []string{"<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"},
		EOS:      []string{"<|im_end|>"},
	})
	require.NoError(t, err)
	return tok
}

func prompt(question string) string {
	return "<|im_start|>user\n" + question + "<|im_end|>\n<|im_start|>assistant\n"
}

// searchCall is a turn that calls the search tool with one query.
func searchCall(query string) policytest.Response {
	return policytest.Text(`<tool_call>` + "\n" + `{"name": "search", "arguments": {"query_list": ["` + query + `"]}}` + "\n" + `</tool_call><|im_end|>`)
}

// TestRolloutWithSearch rolls out scripted trajectories that search the
// shipped encyclopedia through the embedded BM25 server, each two hops of
// a two-hop question, and checks that the model read the passages holding
// the answer, as tokens it did not sample.
func TestRolloutWithSearch(t *testing.T) {
	ix, err := bm25.Build(context.Background(), encyclopedia.Corpus(), bm25.Config{})
	require.NoError(t, err)
	defer ix.Close()
	srv, err := bm25.NewServer(ix, bm25.ServerConfig{})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	client, err := search.NewClient(search.ClientConfig{URL: hs.URL + "/retrieve", BatchWait: 20 * time.Millisecond})
	require.NoError(t, err)
	st, err := search.NewTool(client, search.ToolConfig{})
	require.NoError(t, err)

	e, err := encyclopedia.Generate(encyclopedia.DefaultConfig())
	require.NoError(t, err)
	titles := map[string]string{}
	for _, p := range e.Passages {
		titles[p.ID] = p.Title
	}
	var twoHop []encyclopedia.Question
	for _, q := range e.Questions {
		if q.Hops == 2 && len(twoHop) < 3 && (len(twoHop) == 0 || q.Kind != twoHop[len(twoHop)-1].Kind) {
			twoHop = append(twoHop, q)
		}
	}
	require.Len(t, twoHop, 3)

	tok := chatML(t)
	sampler := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: tok.EOSIDs()})
	var reqs []rollout.Request
	for i, q := range twoHop {
		// Search the subject's passage, then the entity it names, then
		// answer.
		sampler.HandleText(prompt(q.Text),
			searchCall(titles[q.Evidence[0]]),
			searchCall(titles[q.Evidence[1]]),
			policytest.Text("<answer>"+q.Answer+"</answer><|im_end|>"))
		reqs = append(reqs, rollout.Request{ID: string(rune('a' + i)), PromptText: prompt(q.Text), N: 2,
			Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 200}})
	}
	eng, err := rollout.NewEngine(rollout.Config{Sampler: sampler, Tokenizer: tok, Tools: []tool.Tool{st}, MaxTurns: 4})
	require.NoError(t, err)
	trajs, err := eng.Run(context.Background(), reqs)
	require.NoError(t, err)
	require.Len(t, trajs, 6)
	for _, tr := range trajs {
		q := twoHop[tr.Request]
		require.Len(t, tr.ToolCalls, 2, tr.Response)
		assert.Equal(t, rollout.StopNoToolCall, tr.Stop)
		for hop, c := range tr.ToolCalls {
			require.NoError(t, c.Err)
			assert.False(t, c.Result.Failed)
			assert.Equal(t, "success", c.Result.Metadata["status"])
			assert.Contains(t, c.Result.Content, `(Title: \"`+titles[q.Evidence[hop]]+`\")`, "hop %d finds its passage", hop)
		}
		assert.Contains(t, tr.ToolCalls[1].Result.Content, q.Answer)
		assert.True(t, strings.HasSuffix(tr.Response, "<answer>"+q.Answer+"</answer><|im_end|>"))

		// The results are in the sequence, masked out.
		turn := tr.Turns[1]
		results := tok.Decode(tr.Tokens[turn.End:turn.ResultEnd])
		assert.Contains(t, results, "<tool_response>\n"+tr.ToolCalls[1].Result.Content+"\n</tool_response>")
		for i := turn.End; i < turn.ResultEnd; i++ {
			require.Zero(t, tr.Mask[i])
		}
	}
	stats := client.Stats()
	assert.Equal(t, int64(12), stats.Calls)
	assert.LessOrEqual(t, stats.Requests, stats.Calls)
	assert.Zero(t, stats.Failed)
	t.Logf("12 search calls in %d requests", stats.Requests)
}

// TestRolloutSearchServerFails checks that trajectories go on when the
// retrieval server fails or hangs: the call gets an error result the
// model reads, marked as the tool's failure, and the next turn runs.
func TestRolloutSearchServerFails(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error
		text    string
	}{
		{"500", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }, rollout.ErrToolFailed, "HTTP 500"},
		{"garbage", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>")) }, rollout.ErrToolFailed, "malformed"},
		{"hang", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		}, rollout.ErrToolTimeout, "timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(tt.handler)
			defer hs.Close()
			client, err := search.NewClient(search.ClientConfig{URL: hs.URL, MaxAttempts: 2, RetryDelay: time.Millisecond})
			require.NoError(t, err)
			st, err := search.NewTool(client, search.ToolConfig{})
			require.NoError(t, err)
			tok := chatML(t)
			sampler := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: tok.EOSIDs()})
			sampler.HandleDefault(searchCall("anything"), policytest.Text("<answer>unknown</answer><|im_end|>"))
			eng, err := rollout.NewEngine(rollout.Config{Sampler: sampler, Tokenizer: tok, Tools: []tool.Tool{st}, MaxTurns: 4,
				ToolTimeout: 300 * time.Millisecond})
			require.NoError(t, err)
			start := time.Now()
			trajs, err := eng.Run(context.Background(), []rollout.Request{{ID: "q", PromptText: prompt("Who?"), N: 2,
				Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 200}}})
			require.NoError(t, err)
			assert.Less(t, time.Since(start), 10*time.Second)
			for _, tr := range trajs {
				require.Len(t, tr.ToolCalls, 1)
				c := tr.ToolCalls[0]
				assert.True(t, errors.Is(c.Err, tt.want), "%v", c.Err)
				assert.True(t, c.Result.Failed)
				assert.Contains(t, c.Result.Content, tt.text)
				assert.Contains(t, tr.Response, "<tool_response>\n"+c.Result.Content+"\n</tool_response>")
				assert.Len(t, tr.Turns, 2)
				assert.Equal(t, rollout.StopNoToolCall, tr.Stop)
			}
		})
	}
}
