package policy

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/internal/generate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// argmaxRow is the first maximal logit of row t of a [T, V] logits matrix.
func argmaxRow(data []float32, v, t int) int {
	row := data[t*v : (t+1)*v]
	best := 0
	for j, x := range row {
		if x > row[best] {
			best = j
		}
	}
	return best
}

// logSoftmaxAt is log softmax(row)[j] in float64.
func logSoftmaxAt(row []float32, j int) float64 {
	mx := math.Inf(-1)
	for _, x := range row {
		mx = math.Max(mx, float64(x))
	}
	var s float64
	for _, x := range row {
		s += math.Exp(float64(x) - mx)
	}
	return float64(row[j]) - mx - math.Log(s)
}

func u64(v uint64) *uint64 { return &v }

func TestGreedyMatchesArgmaxOfLogits(t *testing.T) {
	ctx := context.Background()
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			m := loadTiny(t, name)
			prompts := [][]int{{5, 17, 3}, {60, 2, 9, 40, 41, 42, 43}, {11}}
			var reqs []lm.GenerateRequest
			for _, p := range prompts {
				reqs = append(reqs, lm.GenerateRequest{Prompt: p, Params: lm.SampleParams{MaxNewTokens: 8, StopTokenIDs: []int{}, Logprobs: true}})
			}
			gens, err := m.Generate(ctx, reqs)
			require.NoError(t, err)
			require.Len(t, gens, len(prompts))
			v := m.Config().VocabSize
			for i, g := range gens {
				require.NotEmpty(t, g.Tokens)
				// Step by step: each token is the argmax of a full forward
				// over the prompt and the tokens before it.
				seq := append([]int(nil), prompts[i]...)
				for k, tok := range g.Tokens {
					logits, err := m.Logits(seq)
					require.NoError(t, err)
					data := logits.Data().([]float32)
					require.Equal(t, argmaxRow(data, v, len(seq)-1), tok, "prompt %d token %d", i, k)
					raw := logSoftmaxAt(data[(len(seq)-1)*v:len(seq)*v], tok)
					assert.InDelta(t, raw, float64(g.RawLogProbs[k]), 1e-4, "raw log-prob, prompt %d token %d", i, k)
					assert.Zero(t, g.LogProbs[k], "greedy log-probs are 0 (vLLM)")
					seq = append(seq, tok)
				}
				if g.FinishReason == lm.FinishStopToken {
					assert.Contains(t, m.EOSTokenIDs(), g.StopToken)
					assert.Equal(t, g.StopToken, g.Tokens[len(g.Tokens)-1])
				} else {
					assert.Equal(t, lm.FinishLength, g.FinishReason)
					assert.Len(t, g.Tokens, 8)
				}
				// Alone, the same request gives the same tokens as in the batch.
				alone, err := m.Generate(ctx, reqs[i:i+1])
				require.NoError(t, err)
				assert.Equal(t, g.Tokens, alone[0].Tokens)
			}
		})
	}
}

func TestSeededSamplingIsReproducible(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen3-tiny")
	req := func(seed uint64) lm.GenerateRequest {
		return lm.GenerateRequest{Prompt: []int{5, 17, 3}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 12, StopTokenIDs: nil, Seed: u64(seed), Logprobs: true}}
	}
	a, err := m.Generate(ctx, []lm.GenerateRequest{req(7), req(8)})
	require.NoError(t, err)
	b, err := m.Generate(ctx, []lm.GenerateRequest{req(8), req(7)})
	require.NoError(t, err)
	assert.Equal(t, a[0], b[1])
	assert.Equal(t, a[1], b[0])
	assert.NotEqual(t, a[0].Tokens, a[1].Tokens, "different seeds should give different samples")
	// At temperature 1 without truncation the sampling log-prob is the
	// raw log-softmax of the logits.
	for k := range a[0].Tokens {
		assert.InDelta(t, a[0].RawLogProbs[k], a[0].LogProbs[k], 1e-5)
	}
	// Without seeds, the sampler's own seeded source decides: two fresh
	// models with the same sampler seed agree call for call.
	m1, m2 := loadTiny(t, "qwen3-tiny", WithSamplerSeed(5)), loadTiny(t, "qwen3-tiny", WithSamplerSeed(5))
	unseeded := []lm.GenerateRequest{{Prompt: []int{5, 17, 3}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 12}}, {Prompt: []int{5, 17, 3}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 12}}}
	x, err := m1.Generate(ctx, unseeded)
	require.NoError(t, err)
	y, err := m2.Generate(ctx, unseeded)
	require.NoError(t, err)
	assert.Equal(t, x, y)
	assert.NotEqual(t, x[0].Tokens, x[1].Tokens, "unseeded requests draw different seeds")
}

// Temperature 0.7 log-probs of sampled tokens equal the trainer's
// Forward at 0.7 (verl recomputes them this way), and a session's KV-cache
// continuation after appended tool tokens gives the same log-probs as a
// fresh full forward.
func TestSessionContinuationMatchesFullForward(t *testing.T) {
	ctx := context.Background()
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			m := loadTiny(t, name)
			tuneGen(m, func(c *generate.Config) { c.BlockSize = 2 }) // make the KV cache grow during decode
			params := lm.SampleParams{Temperature: 0.7, MaxNewTokens: 6, Seed: u64(3), Logprobs: true}
			prompt := []int{5, 17, 3, 30}
			g1, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: prompt, Params: params, Session: "s"}})
			require.NoError(t, err)
			assert.Zero(t, g1[0].CachedTokens)
			assert.Equal(t, 1, m.Sessions())

			turn2 := append(append(append([]int(nil), prompt...), g1[0].Tokens...), 44, 45, 46) // tool result
			params.Seed = u64(4)
			g2, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: turn2, Params: params, Session: "s"}})
			require.NoError(t, err)
			assert.Equal(t, len(prompt)+len(g1[0].Tokens)-1, g2[0].CachedTokens, "the session's cache covers all but the last generated token")
			fresh, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: turn2, Params: params}})
			require.NoError(t, err)
			assert.Zero(t, fresh[0].CachedTokens)
			assert.Equal(t, fresh[0].Tokens, g2[0].Tokens)
			assert.InDeltaSlice(t, toF64(fresh[0].LogProbs), toF64(g2[0].LogProbs), 1e-5)

			full := append(append([]int(nil), turn2...), g2[0].Tokens...)
			stats, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: [][]int{full}, Temperature: 0.7}, false)
			require.NoError(t, err)
			for k := range g2[0].Tokens {
				assert.InDelta(t, stats.LogProbs[0][len(turn2)+k], g2[0].LogProbs[k], 1e-4, "token %d", k)
			}
			// A prompt that does not extend the session's sequence reuses nothing.
			g3, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: []int{9, 9, 9}, Params: params, Session: "s"}})
			require.NoError(t, err)
			assert.Zero(t, g3[0].CachedTokens)
			m.CloseSession("s")
			m.CloseSession("unknown")
			assert.Zero(t, m.Sessions())
		})
	}
}

func toF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func TestSessionsAreBoundedLRU(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen3-tiny", WithMaxSessions(2))
	params := lm.SampleParams{MaxNewTokens: 2, StopTokenIDs: nil}
	prompts := map[string][]int{"a": {5, 6, 7}, "b": {8, 9, 10}, "c": {11, 12, 13}}
	last := map[string][]int{}
	for _, s := range []string{"a", "b", "c"} {
		g, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: prompts[s], Params: params, Session: s}})
		require.NoError(t, err)
		last[s] = append(append([]int(nil), prompts[s]...), g[0].Tokens...)
	}
	assert.Equal(t, 2, m.Sessions())
	for s, wantCached := range map[string]bool{"a": false, "c": true} {
		g, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: append(last[s], 20), Params: params}})
		require.NoError(t, err)
		assert.Zero(t, g[0].CachedTokens, "no Session, no reuse")
		g, err = m.Generate(ctx, []lm.GenerateRequest{{Prompt: append(last[s], 20), Params: params, Session: s}})
		require.NoError(t, err)
		assert.Equal(t, wantCached, g[0].CachedTokens > 0, "session %s", s)
	}
}

func TestStopConditions(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen3-tiny")
	// A prompt whose greedy continuation does not reach EOS in 6 tokens.
	var prompt, toks []int
	for _, p := range [][]int{{5, 17, 3}, {64, 2, 9}, {11, 12}, {20, 21, 22}, {30, 31}} {
		greedy, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: p, Params: lm.SampleParams{MaxNewTokens: 6}}})
		require.NoError(t, err)
		if greedy[0].FinishReason == lm.FinishLength {
			prompt, toks = p, greedy[0].Tokens
			break
		}
	}
	require.Len(t, toks, 6)

	t.Run("stop token", func(t *testing.T) {
		g, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: prompt, Params: lm.SampleParams{MaxNewTokens: 6, StopTokenIDs: []int{toks[2]}}}})
		require.NoError(t, err)
		first := 0
		for toks[first] != toks[2] {
			first++
		}
		assert.Equal(t, toks[:first+1], g[0].Tokens)
		assert.Equal(t, lm.FinishStopToken, g[0].FinishReason)
		assert.Equal(t, toks[2], g[0].StopToken)
	})
	t.Run("stop string needs a decoder", func(t *testing.T) {
		_, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: []int{5}, Params: lm.SampleParams{Stop: []string{"x"}}}})
		require.ErrorIs(t, err, ErrInput)
	})
	t.Run("stop string", func(t *testing.T) {
		// Token id i decodes to "<i>"; the stop string spans the second
		// and third generated tokens.
		decode := func(ids []int) string {
			var b strings.Builder
			for _, id := range ids {
				fmt.Fprintf(&b, "<%d>", id)
			}
			return b.String()
		}
		md := loadTiny(t, "qwen3-tiny", WithDecoder(decode))
		stop := fmt.Sprintf("%d><%d", toks[1], toks[2])
		g, err := md.Generate(ctx, []lm.GenerateRequest{{Prompt: prompt, Params: lm.SampleParams{MaxNewTokens: 6, Stop: []string{stop}}}})
		require.NoError(t, err)
		assert.Equal(t, lm.FinishStop, g[0].FinishReason)
		assert.Equal(t, stop, g[0].StopString)
		assert.Equal(t, toks[:3], g[0].Tokens)
	})
	t.Run("context limit", func(t *testing.T) {
		maxPos := m.Config().MaxPositionEmbeddings
		prompt := make([]int, maxPos-2)
		for i := range prompt {
			prompt[i] = 2 + i%50
		}
		g, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: prompt, Params: lm.SampleParams{}}})
		require.NoError(t, err)
		if g[0].FinishReason == lm.FinishLength {
			assert.Len(t, g[0].Tokens, 2)
		} else {
			assert.LessOrEqual(t, len(g[0].Tokens), 2)
		}
	})
}

func TestGenerateRejectsBadRequests(t *testing.T) {
	m := loadTiny(t, "qwen3-tiny")
	maxPos := m.Config().MaxPositionEmbeddings
	for _, tc := range []struct {
		name string
		req  lm.GenerateRequest
	}{
		{"empty prompt", lm.GenerateRequest{}},
		{"token out of range", lm.GenerateRequest{Prompt: []int{1, 100}}},
		{"negative token", lm.GenerateRequest{Prompt: []int{-1}}},
		{"prompt fills the context", lm.GenerateRequest{Prompt: make([]int, maxPos)}},
		{"negative max tokens", lm.GenerateRequest{Prompt: []int{1}, Params: lm.SampleParams{MaxNewTokens: -1}}},
		{"bad top-p", lm.GenerateRequest{Prompt: []int{1}, Params: lm.SampleParams{Temperature: 1, TopP: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{3}}, tc.req})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "request 1")
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: []int{3}}})
	require.ErrorIs(t, err, context.Canceled)
	gens, err := m.Generate(context.Background(), nil)
	require.NoError(t, err)
	assert.Empty(t, gens)
}
