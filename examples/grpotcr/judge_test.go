package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/examples/internal/setup/setuptest"
	"github.com/agentrl/agentrl/metrics"
)

// rankingJudge is an OpenAI-compatible chat endpoint that ranks every
// group of two: the first response 1, the second 0. It keeps the user
// messages it was sent.
type rankingJudge struct {
	mu    sync.Mutex
	asked []string
}

func (j *rankingJudge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct{ Role, Content string }
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	j.mu.Lock()
	for _, m := range req.Messages {
		if m.Role == "user" {
			j.asked = append(j.asked, m.Content)
		}
	}
	j.mu.Unlock()
	verdict := `{"scores": [{"id": "1", "explanation": "better", "score": 1}, {"id": "2", "explanation": "worse", "score": 0}]}`
	reply := map[string]any{
		"id": "j", "object": "chat.completion", "created": 1, "model": "judge",
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": verdict}}},
		"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(reply)
}

// mcpServer serves one tool over streamable HTTP and counts the
// tools/list requests.
func mcpServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "capitals", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "capital", Description: "The capital of a country.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Paris"}}}, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts
}

// TestTrainJudgeAndMCP trains a step scored by an LLM judge's ranking,
// with an MCP server's tool beside the code interpreter: the judge sees
// each prompt's two responses together with the task, its scores train
// (1 and 0: advantages ±0.7071), its statistics join the step's row,
// a row without a ground truth is trained on (the judge needs none), and
// a prompt longer than the context leaves beside the budget is left out
// and counted in the metrics. With the rule reward the row without a
// ground truth is left out and counted.
func TestTrainJudgeAndMCP(t *testing.T) {
	setuptest.NeedPython(t)
	model := tinyCheckpoint(t)
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/train.jsonl")
	require.NoError(t, err)
	noTruth := `{"data_source": "chat", "prompt": [{"role": "user", "content": "Name the capital of France."}], "ability": "chat", "extra_info": {"index": 9}}` + "\n"
	long := `{"data_source": "math_dapo", "prompt": [{"role": "user", "content": "` + strings.Repeat("Think. ", 5000) + `What is 1+1?"}], "ability": "MATH", "reward_model": {"style": "rule", "ground_truth": "2"}}` + "\n"
	train := filepath.Join(dir, "train.jsonl")
	require.NoError(t, os.WriteFile(train, append(append(data, noTruth...), long...), 0o644))

	judge := &rankingJudge{}
	js := httptest.NewServer(judge)
	defer js.Close()
	tools := mcpServer(t)
	out := filepath.Join(dir, "run")
	args := []string{"-model", model, "-train", train, "-steps", "1", "-batch", "5", "-n", "2",
		"-max-response", "12", "-overlong-buffer", "0", "-micro-batch", "2", "-sandbox-workers", "1"}
	code, stdout, stderr := runMain(t, append(args, "-out", out, "-judge-url", js.URL+"/v1", "-judge-model", "judge", "-mcp", tools.URL)...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "train: 6 prompts\n")
	assert.Contains(t, stderr, "grpotcr: mcp: capitals: 1 tools")
	assert.Contains(t, stderr, "agentrl: 1 of 6 prompts left out: longer than the 4084 tokens that the model's context of 4096 leaves after the response budget of 12")

	rows, err := metrics.ReadFile(filepath.Join(out, metricsFile))
	require.NoError(t, err)
	require.Len(t, rows, 1)
	st := rows[0].Values
	// Five groups of two, one request each (Check's request is taken
	// out of the statistics with the first step's).
	assert.GreaterOrEqual(t, st["judge/requests"], 5.0)
	assert.Equal(t, 0.5, st["critic/score/mean"], "each group scores 1 and 0")
	assert.InDelta(t, 0.7071, st["critic/advantages/max"], 1e-3)
	assert.Equal(t, 1.0, st["data/prompts_left_out"], "the prompt the context cannot hold")
	judge.mu.Lock()
	asked := strings.Join(judge.asked, "\n")
	judge.mu.Unlock()
	assert.Contains(t, asked, "Name the capital of France.", "the judge reads the task")

	// The rule reward needs the ground truth: the row is left out.
	code, stdout, stderr = runMain(t, append(args, "-batch", "2", "-out", filepath.Join(dir, "rule"))...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "train: 5 prompts (1 without a ground truth left out)\n")
}
