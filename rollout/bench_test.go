package rollout_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// BenchmarkEngineRun measures the engine's own overhead: 256 concurrent
// trajectories of 4 turns (3 tool calls of a no-op tool, then an answer)
// against a sampler that answers at once. Reported per Run (256
// trajectories) with trajectories/s and turns/s.
func BenchmarkEngineRun(b *testing.B) {
	for _, batched := range []bool{false, true} {
		b.Run(map[bool]string{false: "direct", true: "batched"}[batched], func(b *testing.B) {
			benchmarkRun(b, batched)
		})
	}
}

func benchmarkRun(b *testing.B, batched bool) {
	const n, turns = 256, 4
	noop := funcTool{name: "noop", fn: func(context.Context, json.RawMessage) (tool.Result, error) {
		return tool.Result{Content: "ok"}, nil
	}}
	call := enc("<tool_call>\n{\"name\": \"noop\", \"arguments\": {\"code\": \"print(1)\"}}\n</tool_call>")
	answer := enc("done<|im_end|>")
	lp := func(n int) []float32 { return make([]float32, n) }
	// A sampler that answers at once, from the number of tool results in
	// the prompt, and records nothing: what is measured is the engine.
	s := samplerFunc(func(_ context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
		gens := make([]lm.Generation, len(reqs))
		for i, r := range reqs {
			turn := 0
			for _, id := range r.Prompt {
				if id == toolRespOpen {
					turn++
				}
			}
			if turn < turns-1 {
				gens[i] = lm.Generation{Tokens: call, LogProbs: lp(len(call)), FinishReason: lm.FinishStop, StopString: "</tool_call>"}
			} else {
				gens[i] = lm.Generation{Tokens: answer, LogProbs: lp(len(answer)), FinishReason: lm.FinishStopToken, StopToken: imEnd}
			}
		}
		return gens, nil
	})
	cfg := func(c *rollout.Config) {
		c.Tools = []tool.Tool{noop}
		c.MaxConcurrent = n
		c.MaxConcurrentTools = n
		if batched {
			c.Batch = &rollout.BatchConfig{MaxSize: n, Window: 100_000} // 100µs
		}
	}
	e := newEngine(b, s, cfg)
	reqs := []rollout.Request{{ID: "b", PromptText: prompt, N: n}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		trajs, err := e.Run(context.Background(), reqs)
		if err != nil || len(trajs) != n || len(trajs[n-1].Turns) != turns {
			b.Fatalf("run: %v", err)
		}
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N*n)/sec, "traj/s")
	b.ReportMetric(float64(b.N*n*turns)/sec, "turns/s")
}
