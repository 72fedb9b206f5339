package policy

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/internal/generate"
)

// A call cancelled with cause lm.ErrInterrupted after k steps returns,
// without an error, each unfinished request's tokens so far with
// lm.FinishAbort — exactly the first tokens, and log-probabilities, that
// the request gets when it runs to the end alone — and a short request
// that finished before the cut whole. Continuing the interrupted request
// from its prefix (Prompt plus the partial tokens, the rest of the
// budget) then ends it normally. The KV blocks of the cut sequences are
// freed.
func TestInterruptedCallReturnsPartialOutput(t *testing.T) {
	long := lm.GenerateRequest{Prompt: []int{5, 17, 3}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 40, Seed: u64(1), Logprobs: true, TopLogprobs: 2}}
	short := lm.GenerateRequest{Prompt: []int{9, 8, 7, 6}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 3, Seed: u64(2), Logprobs: true, TopLogprobs: 2}}
	late := lm.GenerateRequest{Prompt: []int{4, 4, 4}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 10, Seed: u64(3), Logprobs: true, TopLogprobs: 2}}
	wantLong := alone(t, "qwen3-tiny", long)
	wantShort := alone(t, "qwen3-tiny", short)
	require.Len(t, wantLong.Tokens, 40)

	for _, cut := range []int{1, 6, 20} {
		t.Run(fmt.Sprint("after step ", cut), func(t *testing.T) {
			m := loadTiny(t, "qwen3-tiny")
			m.eos = nil
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			steps := 0
			tuneGen(m, func(c *generate.Config) {
				c.OnStep = func(generate.StepInfo) {
					if steps++; steps == cut {
						cancel(fmt.Errorf("weight update: %w", lm.ErrInterrupted))
					}
				}
			})
			gens, err := m.Generate(ctx, []lm.GenerateRequest{long, short})
			require.NoError(t, err)
			require.Len(t, gens, 2)
			g := gens[0]
			assert.Equal(t, lm.FinishAbort, g.FinishReason)
			// Step 1 prefills both prompts and samples their first
			// tokens; each later step samples one more.
			require.Len(t, g.Tokens, cut)
			assert.Equal(t, wantLong.Tokens[:cut], g.Tokens)
			assert.Equal(t, wantLong.LogProbs[:cut], g.LogProbs)
			assert.Equal(t, wantLong.RawLogProbs[:cut], g.RawLogProbs)
			assert.Equal(t, wantLong.TopLogProbs[:cut], g.TopLogProbs)
			if cut >= 3 {
				assert.Equal(t, wantShort, gens[1], "the short request finished before the cut")
			} else {
				assert.Equal(t, lm.FinishAbort, gens[1].FinishReason)
				assert.Equal(t, wantShort.Tokens[:cut], gens[1].Tokens)
			}
			waitIdle(t, m)
			assert.Zero(t, m.GenerateStats().KVBlocksUsed, "the interrupted sequences' blocks are freed")

			// The rest of the turn, from the prefix.
			rest := long
			rest.Prompt = append(append([]int{}, long.Prompt...), g.Tokens...)
			rest.Params.MaxNewTokens = long.Params.MaxNewTokens - cut
			more, err := m.Generate(context.Background(), []lm.GenerateRequest{rest})
			require.NoError(t, err)
			assert.Equal(t, lm.FinishLength, more[0].FinishReason)
			assert.Len(t, more[0].Tokens, 40-cut)
		})
	}

	t.Run("interrupted before it starts", func(t *testing.T) {
		m := loadTiny(t, "qwen3-tiny")
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(lm.ErrInterrupted)
		gens, err := m.Generate(ctx, []lm.GenerateRequest{late})
		require.NoError(t, err)
		assert.Equal(t, []lm.Generation{{FinishReason: lm.FinishAbort}}, gens)
	})

	t.Run("another cause is an error", func(t *testing.T) {
		m := loadTiny(t, "qwen3-tiny")
		m.eos = nil
		ctx, cancel := context.WithCancelCause(context.Background())
		steps := 0
		tuneGen(m, func(c *generate.Config) {
			c.OnStep = func(generate.StepInfo) {
				if steps++; steps == 2 {
					cancel(fmt.Errorf("caller gave up"))
				}
			}
		})
		_, err := m.Generate(ctx, []lm.GenerateRequest{long})
		require.ErrorIs(t, err, context.Canceled)
	})
}
