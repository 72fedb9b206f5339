package policy

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
)

// TestGenerateTopLogprobs: with TopLogprobs, each generated token comes
// with the most likely tokens of its step, found here from a full
// forward pass over the prompt and the tokens before it: the ids of the
// largest logits (ties by id), their raw log-softmax, and their processed
// log-probabilities (at temperature 1 without truncation the same;
// greedy: 0 for the drawn token, −Inf for the others; outside top-k
// −Inf). The tokens drawn are those of the same request without it, and
// a request without it gets no lists.
func TestGenerateTopLogprobs(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen3-tiny")
	v := m.Config().VocabSize
	prompt := []int{5, 17, 3}
	cases := []struct {
		name string
		p    lm.SampleParams
	}{
		{"greedy", lm.SampleParams{MaxNewTokens: 6, Logprobs: true, TopLogprobs: 3}},
		{"temperature 1", lm.SampleParams{Temperature: 1, MaxNewTokens: 6, Seed: u64(3), Logprobs: true, TopLogprobs: 4}},
		{"top-k 2 of 5", lm.SampleParams{Temperature: 0.8, TopK: 2, MaxNewTokens: 6, Seed: u64(4), Logprobs: true, TopLogprobs: 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plain := c.p
			plain.TopLogprobs = 0
			gens, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: prompt, Params: c.p}, {Prompt: prompt, Params: plain}})
			require.NoError(t, err)
			g, without := gens[0], gens[1]
			assert.Equal(t, without.Tokens, g.Tokens, "asking for the top changes the draw")
			assert.Nil(t, without.TopLogProbs)
			require.Len(t, g.TopLogProbs, len(g.Tokens))
			seq := slices.Clone(prompt)
			for k, tok := range g.Tokens {
				logits, err := m.Logits(seq)
				require.NoError(t, err)
				row := logits.Data().([]float32)[(len(seq)-1)*v : len(seq)*v]
				order := make([]int, v)
				for i := range order {
					order[i] = i
				}
				slices.SortStableFunc(order, func(a, b int) int {
					switch {
					case row[a] > row[b]:
						return -1
					case row[a] < row[b]:
						return 1
					}
					return a - b
				})
				top := g.TopLogProbs[k]
				require.Len(t, top, c.p.TopLogprobs, "token %d", k)
				for j, e := range top {
					require.Equal(t, order[j], e.Token, "token %d, place %d", k, j)
					raw := logSoftmaxAt(row, e.Token)
					assert.InDelta(t, raw, float64(e.RawLogProb), 1e-4, "token %d, place %d raw", k, j)
					switch {
					case c.p.Temperature == 0:
						want := math.Inf(-1)
						if e.Token == tok {
							want = 0
						}
						assert.Equal(t, want, float64(e.LogProb), "token %d, place %d", k, j)
					case c.p.TopK > 0 && j >= c.p.TopK:
						assert.True(t, math.IsInf(float64(e.LogProb), -1), "token %d, place %d outside top-k: %v", k, j, e.LogProb)
					case c.p.TopK == 0:
						assert.InDelta(t, raw, float64(e.LogProb), 1e-4, "token %d, place %d", k, j)
					}
					if e.Token == tok {
						assert.Equal(t, g.LogProbs[k], e.LogProb, "token %d: the drawn token's log-prob", k)
						assert.Equal(t, g.RawLogProbs[k], e.RawLogProb, "token %d: the drawn token's raw log-prob", k)
					}
				}
				seq = append(seq, tok)
			}
		})
	}
	_, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: prompt, Params: lm.SampleParams{MaxNewTokens: 2, TopLogprobs: 2}}})
	assert.ErrorIs(t, err, lm.ErrSampling, "top log-probabilities without logprobs")
}
