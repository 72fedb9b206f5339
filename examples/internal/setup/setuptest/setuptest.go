// Package setuptest holds the test helpers that the example programs'
// tests share, in the manner of net/http/httptest: a tiny Hugging Face
// checkpoint folder with the real Qwen3 tokenizer, and a scripted
// OpenAI-compatible server that plays a tool-using agent.
package setuptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/policy/toymodel"
)

// maxPosition is the context of TinyCheckpoint's model.
const maxPosition = 4096

// TinyCheckpoint writes a random Qwen3 with Qwen3's vocabulary and a tiny
// body, plus links to the real tokenizer files found in tokenizerDir (the
// caller passes the path to policy/tokenizer/qwen3, shared rather than
// copied: tokenizer.json is 11 MB). The result is a checkpoint folder as
// Hugging Face lays it out, small enough to train on a CPU in seconds.
func TinyCheckpoint(t testing.TB, tokenizerDir string) string {
	t.Helper()
	dir := t.TempDir()
	m, err := policy.New(toymodel.Shape{
		Hidden: 8, FFN: 16, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 4, MaxPosition: maxPosition,
	}.Config(), 7)
	require.NoError(t, err)
	require.NoError(t, m.Save(dir, lm.SaveOptions{}))
	require.NoError(t, m.Close())
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		src, err := filepath.Abs(filepath.Join(tokenizerDir, f))
		require.NoError(t, err)
		require.NoError(t, os.Symlink(src, filepath.Join(dir, f)))
	}
	return dir
}

// NeedPython skips the test when the machine has no python3 for the local
// sandbox.
func NeedPython(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the local sandbox")
	}
}

// FakeVLLM is an OpenAI-compatible /v1/completions server that plays a
// competent agent: for an arithmetic question it first calls the code
// interpreter with the expression, and once it sees the tool's output it
// answers with that output boxed; for a coding task it answers with a
// program. The answers are only right if the sandbox really ran the code.
type FakeVLLM struct {
	// Tok renders prompts and encodes answers; required.
	Tok *tokenizer.BPE
	mu  sync.Mutex
	// calls counts the requests, afterTool those that continued a tool
	// result.
	calls, afterTool int
}

var (
	questionRe = regexp.MustCompile(`What is ([0-9*+\- ]+)\?`)
	responseRe = regexp.MustCompile(`(?s)<tool_response>\n(.*?)\n</tool_response>`)
)

// ServeHTTP answers one /v1/completions request.
func (f *FakeVLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Prompt []int    `json:"prompt"`
		Stop   []string `json:"stop"`
	}
	if r.URL.Path != "/v1/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	prompt := f.Tok.Decode(req.Prompt)
	// The turn being continued starts after the last user message.
	last := prompt[strings.LastIndex(prompt, "<|im_start|>user"):]
	var text string
	var stop any // vLLM's stop_reason: null for end of sequence
	switch {
	case strings.Contains(last, "<tool_response>"):
		m := responseRe.FindStringSubmatch(last)
		if m == nil {
			http.Error(w, "no tool response in: "+last, http.StatusBadRequest)
			return
		}
		result := strings.TrimSpace(m[1])
		text = fmt.Sprintf("The tool printed %s, so the answer is \\boxed{%s}.<|im_end|>", result, result)
		f.mu.Lock()
		f.afterTool++
		f.mu.Unlock()
	case questionRe.MatchString(last):
		expr := questionRe.FindStringSubmatch(last)[1]
		text = fmt.Sprintf("<tool_call>\n{\"name\": \"code_interpreter\", \"arguments\": {\"code\": \"print(%s)\"}}\n</tool_call>", expr)
		stop = "</tool_call>"
	case strings.Contains(last, "print their sum"):
		text = "```python\na, b = map(int, input().split())\nprint(a + b)\n```<|im_end|>"
	case strings.Contains(last, "twoSum"):
		text = "```python\nclass Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n            seen[x] = i\n```<|im_end|>"
	case strings.Contains(last, "print their product"):
		text = "```python\na, b = map(int, input().split())\nprint(a * b)\n```<|im_end|>"
	default:
		http.Error(w, "unexpected prompt: "+last, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	ids := f.Tok.Encode(text)
	toks := make([]string, len(ids))
	lps := make([]float64, len(ids))
	for i, id := range ids {
		toks[i], lps[i] = fmt.Sprintf("token_id:%d", id), -0.5
	}
	resp := map[string]any{
		"choices": []any{map[string]any{
			"index": 0, "text": text, "token_ids": ids,
			"logprobs":      map[string]any{"tokens": toks, "token_logprobs": lps},
			"finish_reason": "stop", "stop_reason": stop,
		}},
		"usage": map[string]any{"prompt_tokens": len(req.Prompt)},
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

// Counts returns how many requests were answered, and how many of those
// continued a tool result.
func (f *FakeVLLM) Counts() (calls, afterTool int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.afterTool
}

// CUDAError is the error a -device cuda run gets in this test binary on
// this machine — gpu.ErrNotCompiled without the agentrl_cuda tag,
// gpu.ErrNoDriver or gpu.ErrNoDevice without a GPU — or nil where a GPU
// opens (the tests of that error then skip).
func CUDAError(t testing.TB) error {
	t.Helper()
	g, err := gpu.New(context.Background())
	if err != nil {
		return err
	}
	require.NoError(t, g.Close())
	return nil
}
