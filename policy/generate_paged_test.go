package policy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/policy/internal/generate"
)

// mixedRequests is a batch of greedy and sampled requests of various
// prompt lengths over a vocabulary of vocab tokens (tiny models: context
// 64).
func mixedRequests(n, vocab int, seed uint64) []lm.GenerateRequest {
	r := rand.New(rand.NewPCG(seed, 1))
	reqs := make([]lm.GenerateRequest, n)
	for i := range reqs {
		p := make([]int, 2+r.IntN(20))
		for j := range p {
			p[j] = 2 + r.IntN(vocab-2)
		}
		params := lm.SampleParams{MaxNewTokens: 4 + r.IntN(16), Logprobs: true, Seed: u64(r.Uint64())}
		if i%3 != 0 {
			params.Temperature, params.TopK, params.TopP = 0.9, 20, 0.95
		}
		reqs[i] = lm.GenerateRequest{Prompt: p, Params: params}
	}
	return reqs
}

// requireSameGenerations compares token for token, and log-probs within
// float32 rounding of differently shaped batches.
func requireSameGenerations(t *testing.T, want, got []lm.Generation) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].Tokens, got[i].Tokens, "request %d", i)
		require.Equal(t, want[i].FinishReason, got[i].FinishReason, "request %d", i)
		require.InDeltaSlice(t, toF64(want[i].LogProbs), toF64(got[i].LogProbs), 1e-5, "request %d", i)
		require.InDeltaSlice(t, toF64(want[i].RawLogProbs), toF64(got[i].RawLogProbs), 1e-5, "request %d", i)
	}
}

// A backend without backend.Decoder generates through backend.HostDecoder and
// gets what the CPU backend's own decoder gives.
func TestHostDecoderMatchesBackendDecoder(t *testing.T) {
	ctx := context.Background()
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			dev := loadTiny(t, name)
			reqs := mixedRequests(12, dev.Config().VocabSize, 5)
			want, err := dev.Generate(ctx, reqs)
			require.NoError(t, err)
			assert.Equal(t, "backend", dev.GenerateStats().Decoder)
			host := loadTiny(t, name, WithBackend(&allocFailer{Backend: cpu.New()}))
			tuneGen(host, func(c *generate.Config) { c.BlockSize = 3 }) // runs of rows that cross blocks
			got, err := host.Generate(ctx, reqs)
			require.NoError(t, err)
			assert.Equal(t, "host", host.GenerateStats().Decoder)
			requireSameGenerations(t, want, got)
		})
	}
}

// kvBlockBytes is the bytes of one block of the tiny model's cache on the
// CPU: 2 (keys, values) · layers · block rows · KV width · 4.
func kvBlockBytes(m *Model) int64 {
	c := m.Config()
	return int64(2 * c.NumHiddenLayers * m.gen.Config().BlockSize * c.NumKeyValueHeads * c.HeadDim * 4)
}

// A cache too small for the whole batch preempts and queues but fails no
// request, and every request gets what it gets with room to spare; the
// cache never holds more blocks than its budget allows.
func TestFullCachePreemptsAndQueues(t *testing.T) {
	ctx := context.Background()
	reqs := mixedRequests(16, 100, 7)
	for i := range reqs {
		reqs[i].Params.MaxNewTokens = 20 + i%5 // long enough to outgrow the cache
	}
	ref := loadTiny(t, "qwen3-tiny")
	ref.eos = nil
	want, err := ref.Generate(ctx, reqs)
	require.NoError(t, err)
	assert.Zero(t, ref.GenerateStats().Preemptions)

	m := loadTiny(t, "qwen3-tiny")
	m.eos = nil
	tuneGen(m, func(c *generate.Config) { c.BlockSize = 4 })
	// 24 blocks of 4 rows = 96 positions: the 16 sequences need up to
	// 21 + 24 = 45 positions each, so at most a few run at once.
	budget := 24 * kvBlockBytes(m)
	tuneGen(m, func(c *generate.Config) { c.KVCacheBytes = budget + kvBlockBytes(m)/2 }) // a partial block does not count
	got, err := m.Generate(ctx, reqs)
	require.NoError(t, err)
	requireSameGenerations(t, want, got)
	st := m.GenerateStats()
	t.Logf("%+v", st)
	assert.Positive(t, st.Preemptions, "the cache was too small for every sequence to keep its blocks")
	assert.Equal(t, 0, st.KVBlocks, "the cache is freed once idle with no sessions")
	assert.LessOrEqual(t, st.KVBlocksPeak, 24)
}

// A prompt the whole cache cannot hold fails alone; a sequence that fills
// the cache by itself ends with FinishLength; the others are unaffected.
func TestCacheTooSmall(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen3-tiny")
	m.eos = nil
	tuneGen(m, func(c *generate.Config) { c.BlockSize = 4 })
	tuneGen(m, func(c *generate.Config) { c.KVCacheBytes = 5 * kvBlockBytes(m) }) // 20 positions
	_, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: make([]int, 25)}})
	require.ErrorIs(t, err, ErrInput)
	assert.Contains(t, err.Error(), "KV-cache blocks")
	g, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: []int{5, 6, 7}, Params: lm.SampleParams{MaxNewTokens: 40}}})
	require.NoError(t, err)
	assert.Equal(t, lm.FinishLength, g[0].FinishReason)
	// 20 positions hold the 3 prompt tokens and 17 generated ones; the
	// 18th is sampled from the logits of the 20th position.
	assert.Len(t, g[0].Tokens, 18)
}

// Prompts longer than a step's prefill budget are prefilled over several
// steps, beside running decodes, with the same results.
func TestChunkedPrefill(t *testing.T) {
	ctx := context.Background()
	ref := loadTiny(t, "qwen2-tiny")
	reqs := mixedRequests(6, ref.Config().VocabSize, 9)
	want, err := ref.Generate(ctx, reqs)
	require.NoError(t, err)
	m := loadTiny(t, "qwen2-tiny")
	var steps []int
	tuneGen(m, func(c *generate.Config) {
		c.PrefillTokens = 5
		c.OnStep = func(s generate.StepInfo) { steps = append(steps, s.Sequences) }
	})
	got, err := m.Generate(ctx, reqs)
	require.NoError(t, err)
	requireSameGenerations(t, want, got)
	// At most 5 prompt tokens per step: the first step takes the first
	// prompt's first 5 tokens only.
	assert.Equal(t, 1, steps[0])
	prompt := 0
	for _, r := range reqs {
		prompt += len(r.Prompt)
	}
	assert.GreaterOrEqual(t, len(steps), (prompt+4)/5)
}

// Sessions share their blocks with the next turn (no copies), the
// partly filled last block copied when the next turn writes into it; with
// prefix caching, requests whose prompts share full blocks share them.
func TestBlockSharing(t *testing.T) {
	ctx := context.Background()
	params := lm.SampleParams{Temperature: 0.8, MaxNewTokens: 9, Seed: u64(11), Logprobs: true}
	prompt := []int{5, 17, 3, 30, 31, 32, 33, 34, 35, 36, 37}

	t.Run("session", func(t *testing.T) {
		m := loadTiny(t, "qwen3-tiny")
		m.eos = nil
		var used []int // blocks in use after each step
		tuneGen(m, func(c *generate.Config) {
			c.BlockSize = 4
			c.OnStep = func(s generate.StepInfo) { used = append(used, s.KVBlocksUsed) }
		})
		g1, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: prompt, Params: params, Session: "s"}})
		require.NoError(t, err)
		// The session holds prompt + 8 of the 9 tokens = 19 positions: 5 blocks.
		st := m.GenerateStats()
		assert.Equal(t, 5, st.KVBlocksUsed)
		turn2 := append(append(append([]int(nil), prompt...), g1[0].Tokens...), 44, 45)
		turn1Steps := len(used)
		g2, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: turn2, Params: params, Session: "s"}})
		require.NoError(t, err)
		assert.Equal(t, 19, g2[0].CachedTokens)
		// Turn 2 feeds positions 19–21 in its first step: it shares the
		// session's 4 full blocks, copies the fifth (positions 16–18)
		// before writing position 19, and takes a sixth for 20–21. The
		// pool then holds the session's 5 and 2 new blocks: 7, not the
		// 5 + 6 a copy of the session would take.
		assert.Equal(t, 7, used[turn1Steps])
		fresh := loadTiny(t, "qwen3-tiny")
		fresh.eos = nil
		want, err := fresh.Generate(ctx, []lm.GenerateRequest{{Prompt: turn2, Params: params}})
		require.NoError(t, err)
		requireSameGenerations(t, want, g2)
		m.CloseSession("s")
		assert.Zero(t, m.GenerateStats().KVBlocks, "the last session closed: the cache is freed")
	})

	t.Run("prefix caching", func(t *testing.T) {
		m := loadTiny(t, "qwen3-tiny", WithGenerateOptions(GenerateOptions{PrefixCaching: true}))
		m.eos = nil
		tuneGen(m, func(c *generate.Config) { c.BlockSize = 4 })
		ref := loadTiny(t, "qwen3-tiny")
		ref.eos = nil
		// While a first request decodes (its prompt's first 8 positions
		// are two full, registered blocks), three more arrive: two share
		// its first 8 tokens and one shares nothing.
		var steps []int
		paused, resume := pauseAt(m, 2, &steps)
		defer resume()
		firstDone := make(chan error, 1)
		go func() {
			_, err := m.Generate(ctx, []lm.GenerateRequest{{Prompt: prompt, Params: params}})
			firstDone <- err
		}()
		<-paused
		other := append([]int{9}, prompt[1:]...)
		later := []lm.GenerateRequest{
			{Prompt: append(append([]int(nil), prompt[:9]...), 50, 51), Params: params},
			{Prompt: other, Params: params},
			{Prompt: prompt[:8], Params: params},
		}
		laterDone := make(chan []lm.Generation, 1)
		go func() {
			g, err := m.Generate(ctx, later)
			assert.NoError(t, err)
			laterDone <- g
		}()
		waitPending(t, m, 3)
		resume()
		got := <-laterDone
		require.NoError(t, <-firstDone)
		// The first prompt's third block (positions 8–11) holds its
		// position 8 and differs from later[0]'s: two blocks shared.
		// later[2] has exactly 8 tokens: its last must be fed, so it
		// reuses one block.
		assert.Equal(t, []int{8, 0, 4}, []int{got[0].CachedTokens, got[1].CachedTokens, got[2].CachedTokens})
		want, err := ref.Generate(ctx, later)
		require.NoError(t, err)
		requireSameGenerations(t, want, got)
	})
}

// countingCPU is the CPU backend with its Decoder, counting the calls
// that move data to the host or between buffers.
type countingCPU struct {
	*cpu.Backend
	mu                sync.Mutex
	downloads, copies int
	downloaded        int
}

func (c *countingCPU) Download(dst []float32, src backend.Buffer, off int) error {
	c.mu.Lock()
	c.downloads++
	c.downloaded += len(dst)
	c.mu.Unlock()
	return c.Backend.Download(dst, src, off)
}

func (c *countingCPU) Copy(dst backend.Buffer, dstOff int, src backend.Buffer, srcOff, n int) error {
	c.mu.Lock()
	c.copies++
	c.mu.Unlock()
	return c.Backend.Copy(dst, dstOff, src, srcOff, n)
}

// With a backend.Decoder, generation downloads no logits and copies no
// key or value rows: appends, attention and sampling run in the backend.
func TestDecoderPathMovesNoRows(t *testing.T) {
	be := &countingCPU{Backend: cpu.New()}
	m := loadTiny(t, "llama-tiny", WithBackend(be))
	reqs := mixedRequests(8, m.Config().VocabSize, 3)
	reqs[0].Session = "s"
	got, err := m.Generate(context.Background(), reqs)
	require.NoError(t, err)
	next := reqs[0]
	next.Prompt = append(append(append([]int(nil), next.Prompt...), got[0].Tokens...), 7)
	_, err = m.Generate(context.Background(), []lm.GenerateRequest{next})
	require.NoError(t, err)
	assert.Zero(t, be.downloads, "no logits downloaded")
	assert.Zero(t, be.copies, "no rows copied")
	assert.Equal(t, "backend", m.GenerateStats().Decoder)
}

// The counters follow the work: prompt, cached and generated tokens.
func TestGenerateStats(t *testing.T) {
	m := loadTiny(t, "qwen3-tiny")
	m.eos = nil
	reqs := []lm.GenerateRequest{
		{Prompt: []int{4, 5, 6}, Params: lm.SampleParams{MaxNewTokens: 5}, Session: "a"},
		{Prompt: []int{7, 8}, Params: lm.SampleParams{MaxNewTokens: 3}},
	}
	g, err := m.Generate(context.Background(), reqs)
	require.NoError(t, err)
	st := m.GenerateStats()
	// One step prefills both prompts and samples their first tokens; 4
	// more steps finish the first request (the second is done after 2).
	assert.Equal(t, GenerateStats{Steps: 5, PromptTokens: 5, GeneratedTokens: 8, KVBlocks: st.KVBlocks, KVBlockSize: 16,
		KVBlocksUsed: 1, KVBlocksPeak: 2, KVBytes: st.KVBytes, Decoder: "backend"}, st)
	assert.Positive(t, st.KVBlocks)
	next := append(append([]int{4, 5, 6}, g[0].Tokens...), 9)
	_, err = m.Generate(context.Background(), []lm.GenerateRequest{{Prompt: next, Params: lm.SampleParams{MaxNewTokens: 1}, Session: "a"}})
	require.NoError(t, err)
	st = m.GenerateStats()
	assert.Equal(t, int64(5+len(next)), st.PromptTokens)
	assert.Equal(t, int64(7), st.CachedTokens, "3 prompt tokens and 4 of the 5 generated")
	m.CloseSession("a")
	assert.Equal(t, fmt.Sprint(0), fmt.Sprint(m.GenerateStats().KVBlocks))
}
