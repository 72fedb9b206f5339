package openai_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/openai"
)

func ExampleSampler() {
	// A stand-in for `vllm serve`; point BaseURLs at real servers instead.
	srv := httptest.NewServer(&fakeVLLM{})
	defer srv.Close()

	s, err := openai.New(openai.Config{BaseURLs: []string{srv.URL}, Model: "Qwen/Qwen3-4B"})
	if err != nil {
		panic(err)
	}
	gens, err := s.Generate(context.Background(), []lm.GenerateRequest{{
		Prompt: []int{151644, 872, 198}, // token ids, e.g. from policy/tokenizer
		Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 64, Stop: []string{"</tool_call>"}, Logprobs: true},
	}})
	if err != nil {
		panic(err)
	}
	g := gens[0]
	fmt.Println(g.Tokens, g.LogProbs, g.FinishReason, g.StopString)
	// Output:
	// [152644 1872 1198] [-15.2644 -0.1872 -0.1198] stop </tool_call>
}

func ExampleSampler_sglang() {
	// A stand-in for `python -m sglang.launch_server`; point BaseURLs at
	// real servers instead.
	srv := httptest.NewServer(&fakeSGLang{answer: func(int64) string { return sglangOK("default") }})
	defer srv.Close()

	s, err := openai.New(openai.Config{BaseURLs: []string{srv.URL}, API: openai.APISGLangGenerate})
	if err != nil {
		panic(err)
	}
	gens, err := s.Generate(context.Background(), []lm.GenerateRequest{{
		Prompt: []int{151644, 872, 198},
		Params: lm.SampleParams{Temperature: 0.7, MaxNewTokens: 64, StopTokenIDs: []int{8}, Logprobs: true},
	}})
	if err != nil {
		panic(err)
	}
	g := gens[0]
	// SGLang's default log-probabilities are log softmax(logits / 0.7):
	// with nothing truncated, the sampling ones.
	fmt.Println(g.Tokens, g.LogProbs, g.RawLogProbs, g.FinishReason, g.StopToken, g.WeightVersion)
	// Output:
	// [7 8] [-0.5 -0.25] [] stop_token 8 default
}
