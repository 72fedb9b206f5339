package policytest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/policytest"
)

// bytes is a byte-level codec: id = byte value.
func encode(s string) []int {
	ids := make([]int, len(s))
	for i := range len(s) {
		ids[i] = int(s[i])
	}
	return ids
}

func decode(ids []int) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}

func newSampler() *policytest.Sampler {
	return policytest.New(policytest.Config{Encode: encode, Decode: decode, EOS: []int{0}})
}

func gen1(t *testing.T, s *policytest.Sampler, r lm.GenerateRequest) lm.Generation {
	t.Helper()
	g, err := s.Generate(context.Background(), []lm.GenerateRequest{r})
	require.NoError(t, err)
	require.Len(t, g, 1)
	return g[0]
}

func TestStopConditions(t *testing.T) {
	cases := []struct {
		name   string
		resp   policytest.Response
		params lm.SampleParams
		want   lm.Generation
	}{
		{"runs out: length", policytest.Text("abc"), lm.SampleParams{},
			lm.Generation{Tokens: encode("abc"), FinishReason: lm.FinishLength}},
		{"scripted finish", policytest.Response{Text: "abc", Finish: lm.FinishStopToken}, lm.SampleParams{},
			lm.Generation{Tokens: encode("abc"), FinishReason: lm.FinishStopToken, StopToken: 'c'}},
		{"eos kept as last token", policytest.Tokens('a', 0, 'b'), lm.SampleParams{},
			lm.Generation{Tokens: []int{'a', 0}, FinishReason: lm.FinishStopToken, StopToken: 0}},
		{"stop token id", policytest.Text("abcd"), lm.SampleParams{StopTokenIDs: []int{'c'}},
			lm.Generation{Tokens: encode("abc"), FinishReason: lm.FinishStopToken, StopToken: 'c'}},
		{"stop string: the completing token kept", policytest.Text("x</end>tail"), lm.SampleParams{Stop: []string{"</end>"}},
			lm.Generation{Tokens: encode("x</end>"), FinishReason: lm.FinishStop, StopString: "</end>"}},
		{"max new tokens", policytest.Text("abcdef"), lm.SampleParams{MaxNewTokens: 2},
			lm.Generation{Tokens: encode("ab"), FinishReason: lm.FinishLength}},
		{"default log-probs", policytest.Tokens(10, 20), lm.SampleParams{Logprobs: true},
			lm.Generation{Tokens: []int{10, 20}, LogProbs: []float32{-0.01, -0.02}, FinishReason: lm.FinishLength}},
		{"scripted log-probs, cut", policytest.Response{Tokens: []int{1, 2, 3}, LogProbs: []float32{-1, -2, -3}}, lm.SampleParams{Logprobs: true, MaxNewTokens: 2},
			lm.Generation{Tokens: []int{1, 2}, LogProbs: []float32{-1, -2}, FinishReason: lm.FinishLength}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSampler()
			s.HandleDefault(tc.resp)
			assert.Equal(t, tc.want, gen1(t, s, lm.GenerateRequest{Prompt: []int{1}, Params: tc.params}))
		})
	}
}

func TestScriptsPerSessionAndPrefix(t *testing.T) {
	s := newSampler()
	s.HandleText("math", policytest.Text("m1"), policytest.Text("m2"))
	s.HandleText("math: hard", policytest.Text("h1"))
	s.HandleDefault(policytest.Text("d1"))
	s.Enqueue(policytest.Text("q1"))

	assert.Equal(t, "q1", decode(gen1(t, s, lm.GenerateRequest{Prompt: encode("math"), Session: "x"}).Tokens), "queue first")
	// Session x was answered from the queue, so it has no script yet.
	assert.Equal(t, "m1", decode(gen1(t, s, lm.GenerateRequest{Prompt: encode("math 1"), Session: "a"}).Tokens))
	assert.Equal(t, "m1", decode(gen1(t, s, lm.GenerateRequest{Prompt: encode("math 2"), Session: "b"}).Tokens), "each session replays")
	assert.Equal(t, "m2", decode(gen1(t, s, lm.GenerateRequest{Prompt: encode("anything"), Session: "a"}).Tokens), "turn 2 of a")
	assert.Equal(t, "h1", decode(gen1(t, s, lm.GenerateRequest{Prompt: encode("math: hard one"), Session: "c"}).Tokens), "longest prefix")
	assert.Equal(t, "d1", decode(gen1(t, s, lm.GenerateRequest{Prompt: encode("other")}).Tokens))
	assert.Equal(t, "m1", decode(gen1(t, s, lm.GenerateRequest{Prompt: encode("math")}).Tokens), "no session: first turn")

	_, err := s.Generate(context.Background(), []lm.GenerateRequest{{Prompt: encode("x"), Session: "a"}})
	assert.ErrorIs(t, err, policytest.ErrNoScript, "a's script is spent")
	s.CloseSession("a")
	assert.Equal(t, "m1", decode(gen1(t, s, lm.GenerateRequest{Prompt: encode("math"), Session: "a"}).Tokens), "closed session starts over")
	assert.Equal(t, []string{"a"}, s.Closed())

	reqs := s.Requests()
	require.Len(t, reqs, 9)
	assert.Equal(t, encode("math 1"), reqs[1].Prompt)
	reqs[1].Prompt[0] = 'X'
	assert.Equal(t, encode("math 1"), s.Requests()[1].Prompt, "Requests returns copies")
	assert.Equal(t, []int{1, 1, 1, 1, 1, 1, 1, 1, 1}, s.Batches())
}

func TestErrorsAndDelays(t *testing.T) {
	boom := errors.New("boom")
	s := newSampler()
	_, err := s.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1}}})
	assert.ErrorIs(t, err, policytest.ErrNoScript)

	s.Enqueue(policytest.Error(boom))
	_, err = s.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1}}})
	assert.ErrorIs(t, err, boom)

	s.Enqueue(policytest.Response{Tokens: []int{1}, LogProbs: []float32{-1, -2}})
	_, err = s.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1}}})
	assert.ErrorContains(t, err, "2 values for 1 tokens")

	noCodec := policytest.New(policytest.Config{})
	noCodec.Enqueue(policytest.Text("hi"), policytest.Tokens(1))
	_, err = noCodec.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1}}})
	assert.ErrorContains(t, err, "Config.Encode is nil")
	_, err = noCodec.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1}, Params: lm.SampleParams{Stop: []string{"x"}}}})
	assert.ErrorContains(t, err, "Config.Decode is nil")

	// A script lists no alternatives: asking for them is an error.
	s.Enqueue(policytest.Tokens(1))
	_, err = s.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1}, Params: lm.SampleParams{Logprobs: true, TopLogprobs: 2}}})
	assert.ErrorIs(t, err, lm.ErrSampling)

	s.Enqueue(policytest.Response{Tokens: []int{5}, Delay: 10 * time.Millisecond})
	assert.Equal(t, []int{5}, gen1(t, s, lm.GenerateRequest{Prompt: []int{1}}).Tokens)

	for _, r := range []policytest.Response{{Delay: time.Hour}, {Block: true}} {
		s.Enqueue(r)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err = s.Generate(ctx, []lm.GenerateRequest{{Prompt: []int{1}}})
		cancel()
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	}
}

func TestConcurrentUse(t *testing.T) {
	s := newSampler()
	s.HandleDefault(policytest.Text("a"), policytest.Text("b"))
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess := string(rune('A' + i))
			for _, want := range []string{"a", "b"} {
				g, err := s.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1}, Session: sess}})
				if assert.NoError(t, err) {
					assert.Equal(t, want, decode(g[0].Tokens))
				}
			}
			s.CloseSession(sess)
		}()
	}
	wg.Wait()
	assert.Len(t, s.Requests(), 64)
	assert.Len(t, s.Closed(), 32)
}
