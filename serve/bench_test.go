package serve

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/openai"
)

// BenchmarkCompletion times one completion (a 16-token prompt, 16
// greedy tokens with log-probs, on a 64-wide two-layer model) through
// policy/openai's Sampler and the HTTP server, and the same generation by
// Model.Generate directly: the difference is the server's overhead per
// request (JSON both ways, a loopback round trip, admission).
func BenchmarkCompletion(b *testing.B) {
	dir := writeCheckpoint(b, 1, 64)
	prompt := make([]int, 16)
	for i := range prompt {
		prompt[i] = 3 * i
	}
	reqs := []lm.GenerateRequest{{Prompt: prompt, Params: lm.SampleParams{MaxNewTokens: 16, Logprobs: true}}}
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		m := loadModel(b, dir)
		for b.Loop() {
			if _, err := m.Generate(ctx, reqs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("http", func(b *testing.B) {
		_, ts := startServer(b, dir, Config{})
		sampler, err := openai.New(openai.Config{BaseURLs: []string{ts.URL}})
		require.NoError(b, err)
		for b.Loop() {
			if _, err := sampler.Generate(ctx, reqs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
