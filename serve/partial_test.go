package serve

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
)

// cutAfter makes the server's first generation stop after k tokens and
// wait for its abort, then answer those k tokens as the model answers a
// generation interrupted there (lm.FinishAbort; package policy's
// TestInterruptedCallReturnsPartialOutput checks the model's side);
// later generations run as usual. started is sent to when the k tokens
// are generated.
func cutAfter(s *Server, k int) (started chan struct{}) {
	started = make(chan struct{}, 1)
	first := true
	s.gen = func(ctx context.Context, m *policy.Model, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
		if !first {
			return m.Generate(ctx, reqs)
		}
		first = false // one request at a time in these tests
		head := slices.Clone(reqs)
		for i := range head {
			head[i].Params.MaxNewTokens = k
		}
		gens, err := m.Generate(context.Background(), head)
		if err != nil {
			return nil, err
		}
		started <- struct{}{}
		<-ctx.Done()
		for i := range gens {
			gens[i].FinishReason = lm.FinishAbort
		}
		return gens, nil
	}
	return started
}

// TestPartialRolloutAcrossReload: a reload in abort mode that lands in
// the middle of a generation answers what it generated so far — the
// tokens and log-probabilities the old weights sample, as a generation
// alone on them gives them, with the old version and finish_reason
// "abort" — and the client's continuation from that prefix runs on the
// new weights: exactly the tokens and log-probabilities they sample
// after that prefix, with the new version. Through vLLM's completions
// and SGLang's /generate, with either engine's reload.
func TestPartialRolloutAcrossReload(t *testing.T) {
	a, b, _, _ := twoCheckpoints(t, testPrompt)
	const k, budget = 3, 8
	req := lm.GenerateRequest{Prompt: testPrompt, Params: lm.SampleParams{Temperature: 1, Seed: new(uint64(7)), MaxNewTokens: budget, Logprobs: true}}
	before := reference(t, a, req)[0]
	require.Len(t, before.Tokens, budget)
	rest := req
	rest.Prompt = append(slices.Clone(testPrompt), before.Tokens[:k]...)
	rest.Params.MaxNewTokens = budget - k
	after := reference(t, b, rest)[0]

	reloads := map[string]func(t *testing.T, url string){
		"sglang reload": func(t *testing.T, url string) {
			status, out := post(t, url+"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q, "abort_all_requests": true}`, b))
			require.Equal(t, 200, status, "%s", out)
		},
		"vllm pause, reload, resume": func(t *testing.T, url string) {
			for _, step := range [][2]string{{"/pause?mode=abort", ""}, {"/collective_rpc", fmt.Sprintf(`{"method": "reload_weights", "kwargs": {"weights_path": %q}}`, b)}, {"/resume", ""}} {
				status, out := post(t, url+step[0], step[1])
				require.Equal(t, 200, status, "%s: %s", step[0], out)
			}
		},
	}
	for _, api := range []openai.API{openai.APICompletions, openai.APISGLangGenerate} {
		for name, reload := range reloads {
			t.Run(fmt.Sprintf("%s/%s", api, name), func(t *testing.T) {
				s, ts := startServer(t, a, Config{})
				started := cutAfter(s, k)
				sampler, err := openai.New(openai.Config{BaseURLs: []string{ts.URL}, API: api, LogprobsMode: openai.RawLogprobs, Partial: true})
				require.NoError(t, err)
				got := make(chan []lm.Generation, 1)
				go func() {
					gens, err := sampler.Generate(context.Background(), []lm.GenerateRequest{req})
					assert.NoError(t, err)
					got <- gens
				}()
				<-started
				reload(t, ts.URL)
				cut := (<-got)[0]
				assert.Equal(t, lm.FinishAbort, cut.FinishReason)
				assert.Equal(t, before.Tokens[:k], cut.Tokens)
				assert.Equal(t, before.RawLogProbs[:k], cut.RawLogProbs)
				assert.Equal(t, "0", cut.WeightVersion, "sampled by the weights before the reload")

				gens, err := sampler.Generate(context.Background(), []lm.GenerateRequest{rest})
				require.NoError(t, err)
				assert.Equal(t, after.Tokens, gens[0].Tokens)
				assert.Equal(t, after.RawLogProbs, gens[0].RawLogProbs)
				assert.Equal(t, after.FinishReason, gens[0].FinishReason)
				assert.Equal(t, "1", gens[0].WeightVersion)
			})
		}
	}
}
