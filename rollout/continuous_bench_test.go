package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/rollout"
)

// BenchmarkAgentLoop compares, on the local transformer, the two ways
// concurrent trajectories can share it: the model's own continuous
// batching (each turn joins the running decode and leaves it when done)
// and a Batcher in front of it (a batch runs until its longest turn
// ends; turns arriving meanwhile wait for the next batch). 32 agents run
// 3 turns each; turn lengths are drawn from 8–96 tokens and every tool
// call takes 5 ms, as a sandbox would. Reported per run of all agents,
// with generated tokens/s.
func BenchmarkAgentLoop(b *testing.B) {
	for _, mode := range []string{"continuous", "batcher"} {
		b.Run(mode, func(b *testing.B) {
			m := benchModel(b)
			var s lm.Sampler = m
			if mode == "batcher" {
				s = rollout.NewBatcher(m, rollout.BatchConfig{MaxSize: 512})
			}
			var tokens atomic.Int64
			start := time.Now()
			for b.Loop() {
				tokens.Add(agentLoop(b, s, 32, 3, 5*time.Millisecond))
			}
			b.ReportMetric(float64(tokens.Load())/time.Since(start).Seconds(), "tokens/s")
		})
	}
}

// benchModel is a randomly initialised Qwen3-style model of the size of
// examples/arith's (hidden 128, 2 layers, 270-token vocabulary).
func benchModel(b *testing.B) *policy.Model {
	b.Helper()
	raw, err := json.Marshal(map[string]any{
		"model_type": "qwen3", "vocab_size": 270, "hidden_size": 128, "intermediate_size": 384,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
		"max_position_embeddings": 512, "tie_word_embeddings": true, "eos_token_id": 269,
	})
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := policy.ParseConfig(raw)
	if err != nil {
		b.Fatal(err)
	}
	m, err := policy.New(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	return m
}

// agentLoop runs agents trajectories of turns turns against s: generate,
// wait for the tool, append its 6-token result, continue in the same
// session. It returns the tokens generated.
func agentLoop(b *testing.B, s lm.Sampler, agents, turns int, toolLatency time.Duration) int64 {
	var wg sync.WaitGroup
	var generated atomic.Int64
	for a := range agents {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(a), 1))
			prompt := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, a % 250}
			session := fmt.Sprint("agent", a)
			for range turns {
				seed := r.Uint64()
				req := lm.GenerateRequest{Prompt: prompt, Session: session, Params: lm.SampleParams{
					Temperature: 1, MaxNewTokens: 8 + r.IntN(89), StopTokenIDs: []int{}, Seed: &seed}}
				gens, err := s.Generate(context.Background(), []lm.GenerateRequest{req})
				if err != nil {
					b.Error(err)
					return
				}
				generated.Add(int64(len(gens[0].Tokens)))
				time.Sleep(toolLatency)
				prompt = append(append(prompt, gens[0].Tokens...), 20, 21, 22, 23, 24, 25)
			}
			if c, ok := s.(lm.SessionCloser); ok {
				c.CloseSession(session)
			}
		})
	}
	wg.Wait()
	return generated.Load()
}
