package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/tool"
)

// TestRemoteEvaluation points -remote at a server that answers
// /v1/completions as vLLM does (token ids in, "token_id:N" tokens out)
// with a perfect policy: it calls the tool with the held-out problem's
// expression, then boxes what the tool printed. The evaluation must find
// every answer right, with one tool call each, which checks the prompt,
// the tool loop and the scoring over a remote sampler.
func TestRemoteEvaluation(t *testing.T) {
	tok, err := newTokenizer()
	require.NoError(t, err)
	spec := specFor(&tool.Calculator{})
	exprs := map[string]string{}
	for _, p := range generateProblems(arith.DefaultEvalSeed, 3, "eval") {
		exprs[p.Text] = p.Expr
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Prompt []int `json:"prompt"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		text := tok.Decode(body.Prompt)
		var reply, stop string
		if i := strings.LastIndex(text, "<tool_response>\n"); i >= 0 {
			res := text[i+len("<tool_response>\n"):]
			res = res[:strings.Index(res, "\n</tool_response>")]
			reply, stop = answer(strings.TrimSpace(res)), "null"
		} else {
			u := text[strings.Index(text, imStart+"user\n")+len(imStart+"user\n"):]
			expr, ok := exprs[u[:strings.Index(u, imEnd)]]
			if !ok {
				http.Error(w, "unknown problem", http.StatusBadRequest)
				return
			}
			reply, stop = spec.call(expr), `"`+callClose+`"`
		}
		ids := tok.Encode(reply)
		toks, lps := make([]string, len(ids)), make([]string, len(ids))
		for i, id := range ids {
			toks[i], lps[i] = fmt.Sprintf(`"token_id:%d"`, id), "-0.1"
		}
		fmt.Fprintf(w, `{"choices":[{"index":0,"text":"","logprobs":{"tokens":[%s],"token_logprobs":[%s]},"finish_reason":"stop","stop_reason":%s}]}`,
			strings.Join(toks, ","), strings.Join(lps, ","), stop)
	}))
	defer srv.Close()

	var stdout, stderr bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-remote", srv.URL, "-tool", "calculator", "-eval", "3", "-n", "2"},
		&stdout, &stderr), stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var got struct {
		Remote map[string]float64 `json:"remote"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &got))
	assert.Equal(t, map[string]float64{"avg@2": 1, "pass@2": 1, "maj@2": 1}, got.Remote)
	assert.Contains(t, stdout.String(), "1.00", "one tool call per answer")
}
