package judge_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/reward/judge"
)

// A judge whose replies never parse: it is asked once and again Reasks
// times (two requests here), then the response scores Fallback, and the
// step's metrics say so. A trainer
// calls TakeStats once per step, which starts the counts anew.
func ExampleJudge_TakeStats() {
	// A stand-in for a judge's server that answers without a <score> tag.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
			"content": "Looks fine to me."}}], "usage": {"prompt_tokens": 100, "completion_tokens": 5}}`)
	}))
	defer srv.Close()

	j, err := judge.New(judge.Config{BaseURL: srv.URL + "/v1", Model: "Qwen/Qwen3-8B"})
	if err != nil {
		log.Fatal(err)
	}
	graded, err := j.Pointwise(judge.PointwiseConfig{Rubric: "Full marks for a right answer.", Reasks: 1, Fallback: -0.5})
	if err != nil {
		log.Fatal(err)
	}
	out, err := graded(context.Background(), reward.Input{Prompt: "What is 6·7?", GroundTruth: "42", Response: "42"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("score", out.Score)
	m := j.TakeStats().Metrics("judge/")
	for _, k := range []string{"judge/requests", "judge/malformed", "judge/fallbacks", "judge/prompt_tokens"} {
		fmt.Println(k, m[k])
	}
	fmt.Println("after TakeStats:", j.TakeStats().Requests, "requests")
	// Output:
	// score -0.5
	// judge/requests 2
	// judge/malformed 2
	// judge/fallbacks 1
	// judge/prompt_tokens 200
	// after TakeStats: 0 requests
}
