package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/serve"
)

// Serve a checkpoint, generate through the policy/openai client as from
// a vLLM or SGLang server, and reload the weights as a trainer does after
// an update.
func Example() {
	dir, err := os.MkdirTemp("", "serve-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	// A tiny random checkpoint stands in for a trained one.
	cfg := policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 64, HiddenSize: 8, IntermediateSize: 16,
		NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 4,
		MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 1e4,
	}
	m, err := policy.New(cfg, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := m.Save(dir, lm.SaveOptions{}); err != nil {
		fmt.Println(err)
		return
	}

	srv, err := serve.New(serve.Config{Model: m, ModelPath: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()

	sampler, err := openai.New(openai.Config{BaseURLs: []string{ts.URL}})
	if err != nil {
		fmt.Println(err)
		return
	}
	gens, err := sampler.Generate(context.Background(), []lm.GenerateRequest{
		{Prompt: []int{1, 2, 3}, Params: lm.SampleParams{MaxNewTokens: 4, Logprobs: true}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(gens[0].Tokens), "tokens,", gens[0].FinishReason)

	body, _ := json.Marshal(map[string]string{"model_path": dir, "weight_version": "step-1"})
	resp, err := http.Post(ts.URL+"/update_weights_from_disk", "application/json", strings.NewReader(string(body)))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "now serving", srv.WeightVersion())
	// Output:
	// 4 tokens, length
	// 200 OK now serving step-1
}
