package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// The test models: a random tiny Qwen3 over 258 ids (256 bytes and two
// specials) with a 96-token context.
const (
	testVocab  = 258
	testMaxLen = 96
)

// testConfig is the tiny model's configuration; hidden widens it for the
// benchmark.
func testConfig(hidden int) policy.Config {
	return policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: testVocab, HiddenSize: hidden, IntermediateSize: 2 * hidden,
		NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
		MaxPositionEmbeddings: testMaxLen, RMSNormEps: 1e-6, RopeTheta: 1e4,
		Extra: map[string]json.RawMessage{"initializer_range": json.RawMessage("0.2")},
	}
}

// writeCheckpoint saves a random tiny model drawn with seed into a new
// folder, with generation_config.json's eos_token_id when eos is given,
// and returns the folder.
func writeCheckpoint(t testing.TB, seed uint64, hidden int, eos ...int) string {
	t.Helper()
	dir := t.TempDir()
	m, err := policy.New(testConfig(hidden), seed)
	require.NoError(t, err)
	require.NoError(t, m.Save(dir, lm.SaveOptions{}))
	require.NoError(t, m.Close())
	if len(eos) > 0 {
		data, err := json.Marshal(map[string]any{"eos_token_id": eos})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, policy.GenerationConfigFileName), data, 0o644))
	}
	return dir
}

// idDecode is the test detokeniser: every id reads "<id>", so texts,
// stop strings and text offsets follow by hand.
func idDecode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "<%d>", id)
	}
	return b.String()
}

// byteEncode is the test tokeniser: every byte of the text is its id.
func byteEncode(text string) []int {
	ids := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = int(text[i])
	}
	return ids
}

// loadModel loads a checkpoint with the test detokeniser, closed when the
// test ends.
func loadModel(t testing.TB, dir string, opts ...policy.ModelOption) *policy.Model {
	t.Helper()
	m, err := policy.Load(dir, append([]policy.ModelOption{policy.WithDecoder(idDecode)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// startServer serves cfg (its Model loaded from dir when nil) on an
// httptest server; both are closed when the test ends, the Server first
// so that requests it holds back return.
func startServer(t testing.TB, dir string, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Model == nil {
		m, err := policy.Load(dir, policy.WithDecoder(idDecode))
		require.NoError(t, err)
		cfg.Model = m
	}
	if cfg.ModelPath == "" {
		cfg.ModelPath = dir
	}
	if cfg.Decode == nil {
		cfg.Decode = idDecode
	}
	s, err := New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, ts
}

// reference generates reqs on a fresh copy of the checkpoint in dir: what
// the server's answers must decode to.
func reference(t testing.TB, dir string, reqs ...lm.GenerateRequest) []lm.Generation {
	t.Helper()
	m := loadModel(t, dir)
	gens, err := m.Generate(context.Background(), reqs)
	require.NoError(t, err)
	return gens
}

// greedy is the reference greedy continuation of prompt, at most max
// tokens.
func greedy(t testing.TB, dir string, prompt []int, max int) []int {
	t.Helper()
	return reference(t, dir, lm.GenerateRequest{Prompt: prompt, Params: lm.SampleParams{MaxNewTokens: max}})[0].Tokens
}

// post sends a JSON body and returns the status and the body.
func post(t testing.TB, url, body string) (int, []byte) {
	t.Helper()
	return do(t, http.MethodPost, url, body)
}

// get fetches url and returns the status and the body.
func get(t testing.TB, url string) (int, []byte) {
	t.Helper()
	return do(t, http.MethodGet, url, "")
}

func do(t testing.TB, method, url, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}

// response is a completion answer as a client reads it.
type response struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index    int    `json:"index"`
		Text     string `json:"text"`
		Logprobs *struct {
			TextOffset    []int                `json:"text_offset"`
			TokenLogprobs []float64            `json:"token_logprobs"`
			Tokens        []string             `json:"tokens"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		} `json:"logprobs"`
		FinishReason   string          `json:"finish_reason"`
		StopReason     json.RawMessage `json:"stop_reason"`
		TokenIDs       []int           `json:"token_ids"`
		PromptTokenIDs []int           `json:"prompt_token_ids"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Metadata struct {
		WeightVersion string `json:"weight_version"`
	} `json:"metadata"`
}

// complete posts a completion request that must succeed.
func complete(t testing.TB, base string, body any) response {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	status, out := post(t, base+"/v1/completions", string(data))
	require.Equal(t, http.StatusOK, status, "%s", out)
	var r response
	require.NoError(t, json.NewDecoder(bytes.NewReader(out)).Decode(&r))
	return r
}

// greedyBody is a completion request for the greedy continuation of
// prompt with its token ids returned.
func greedyBody(prompt []int, max int) map[string]any {
	return map[string]any{"prompt": prompt, "max_tokens": max, "temperature": 0, "return_token_ids": true}
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, what)
}

// waiting reports how many completions wait for admission.
func (s *Server) waitingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}
