package judge_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/reward/judge"
)

// A judge that grades each response against a rubric and the reference,
// behind a format gate: a response without a boxed answer costs no
// request.
func Example() {
	// A stand-in for the judge's server (vLLM, SGLang, a hosted API).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
			"content": "Right, and the working is shown. <score>9</score>"}}], "usage": {"prompt_tokens": 120, "completion_tokens": 9}}`)
	}))
	defer srv.Close()

	j, err := judge.New(judge.Config{BaseURL: srv.URL + "/v1", Model: "Qwen/Qwen3-8B"})
	if err != nil {
		panic(err)
	}
	graded, err := j.Pointwise(judge.PointwiseConfig{Rubric: "Full marks for a right answer with its working."})
	if err != nil {
		panic(err)
	}
	boxed := reward.FormatFunc(reward.FormatConfig{RequireBoxed: true, Penalty: -1})
	f, err := reward.Gate(boxed, graded)
	if err != nil {
		panic(err)
	}
	for _, resp := range []string{`6·7 = \boxed{42}`, "42"} {
		out, err := f(context.Background(), reward.Input{Prompt: "What is 6·7?", GroundTruth: "42", Response: resp})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%.1f %s\n", out.Score, out.Reason)
	}
	fmt.Println(j.Stats().Requests, "request")
	// Output:
	// 0.9 judge: 9/10: Right, and the working is shown.
	// -1.0 gate: format: want exactly one \boxed answer, found 0
	// 1 request
}

// A judge that scores the responses to one prompt relative to each
// other, group by group, as ART's RULER does.
func ExampleJudge_Ranking() {
	// A stand-in for the judge's server (vLLM, SGLang, a hosted API).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content":
			"{\"scores\": [{\"id\": \"1\", \"explanation\": \"right\", \"score\": 0.9}, {\"id\": \"2\", \"explanation\": \"wrong\", \"score\": 0.2}]}"}}],
			"usage": {"prompt_tokens": 120, "completion_tokens": 40}}`)
	}))
	defer srv.Close()

	j, err := judge.New(judge.Config{BaseURL: srv.URL + "/v1", Model: "Qwen/Qwen3-8B"})
	if err != nil {
		panic(err)
	}
	ranked, err := j.Ranking(judge.RankingConfig{})
	if err != nil {
		panic(err)
	}
	inputs := []reward.Input{
		{Prompt: "What is 6·7?", Response: "42"},
		{Prompt: "What is 6·7?", Response: "41"},
		{Prompt: "What is 6·7?", Response: "42"}, // shown to the judge once
	}
	outs, err := reward.BatchGroups(context.Background(), ranked, inputs, []string{"g1", "g1", "g1"}, reward.BatchOptions{})
	if err != nil {
		panic(err)
	}
	for _, o := range outs {
		fmt.Println(o.Score)
	}
	fmt.Println(j.Stats().Metrics("judge/")["judge/prompt_tokens"], "prompt tokens")
	// Output:
	// 0.9
	// 0.2
	// 0.9
	// 120 prompt tokens
}
