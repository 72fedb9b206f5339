package policy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/policy/internal/generate"
)

// tuneGen gives m a fresh generation engine, its configuration m's with
// the changes f makes (before m generates: the old engine's sessions and
// KV cache would be lost).
func tuneGen(m *Model, f func(*generate.Config)) {
	c := m.gen.Config()
	f(&c)
	m.gen = generate.New(newGenModel(m), decoderOf(m.be), c)
}

// pauseAt makes the scheduler of m stop after step n until the returned
// resume function is called; paused is closed when it stops. Every
// step's sequence count is appended to *steps.
func pauseAt(m *Model, n int, steps *[]int) (paused chan struct{}, resume func()) {
	paused, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	tuneGen(m, func(c *generate.Config) {
		c.OnStep = func(s generate.StepInfo) {
			*steps = append(*steps, s.Sequences)
			if len(*steps) == n {
				close(paused)
				<-release
			}
		}
	})
	return paused, func() { once.Do(func() { close(release) }) }
}

// waitPending polls until n requests are queued for admission.
func waitPending(t *testing.T, m *Model, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return m.gen.Pending() == n }, 5*time.Second, time.Millisecond)
}

// waitIdle polls until the scheduler goroutine has exited.
func waitIdle(t *testing.T, m *Model) {
	t.Helper()
	require.Eventually(t, func() bool { return !m.gen.Busy() }, 5*time.Second, time.Millisecond)
}

// alone generates req by itself on a fresh copy of the tiny model.
func alone(t *testing.T, name string, req lm.GenerateRequest) lm.Generation {
	t.Helper()
	m := loadTiny(t, name)
	m.eos = nil
	g, err := m.Generate(context.Background(), []lm.GenerateRequest{req})
	require.NoError(t, err)
	return g[0]
}

// A short request that arrives while a long one decodes joins the
// running batch (its prompt is prefilled in the same forward pass as the
// long sequence's next token), returns while the long one still decodes,
// and gets the same tokens and log-probs as when generated alone.
func TestShortRequestJoinsRunningDecode(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen3-tiny")
	m.eos = nil // no end-of-sequence: the long request runs its 50 tokens
	long := lm.GenerateRequest{Prompt: []int{5, 17, 3}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 50, Seed: u64(1), Logprobs: true}}
	short := lm.GenerateRequest{Prompt: []int{9, 8, 7, 6}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 5, Seed: u64(2), Logprobs: true}}

	var steps []int
	paused, resume := pauseAt(m, 3, &steps)
	defer resume()
	// Step 9 is the first after the short sequence's last token (step 8,
	// below): the scheduler waits there until the test has received the
	// short result, which proves the result was handed back while the
	// long sequence still decodes, on any number of threads (with one,
	// the test goroutine might otherwise run only once the scheduler's
	// goroutine had finished the long sequence). Were the short result
	// held until the long one ended, the wait would time out.
	shortReceived := make(chan struct{})
	var waitedInVain atomic.Bool
	paused3 := m.gen.Config().OnStep
	tuneGen(m, func(c *generate.Config) {
		c.OnStep = func(s generate.StepInfo) {
			paused3(s)
			if len(steps) == 9 {
				select {
				case <-shortReceived:
				case <-time.After(5 * time.Second):
					waitedInVain.Store(true)
				}
			}
		}
	})
	type result struct {
		g   []lm.Generation
		err error
	}
	longDone := make(chan result, 1)
	go func() {
		g, err := m.Generate(ctx, []lm.GenerateRequest{long})
		longDone <- result{g, err}
	}()
	<-paused // the long request has made 3 steps: prefill and 2 decodes
	shortDone := make(chan result, 1)
	go func() {
		g, err := m.Generate(ctx, []lm.GenerateRequest{short})
		shortDone <- result{g, err}
	}()
	waitPending(t, m, 1)
	resume()

	s := <-shortDone
	close(shortReceived)
	require.NoError(t, s.err)
	l := <-longDone
	require.NoError(t, l.err)
	assert.False(t, waitedInVain.Load(), "the short generation was returned only after the long one finished")

	// Step 4 advanced both sequences: the short prompt's prefill and the
	// long sequence's decode in one pass; the short one then decoded 4
	// more tokens beside it (5 in all), and the long one went on alone to
	// its 50th token (50 steps in all: one prefill, 49 decodes).
	want := []int{1, 1, 1, 2, 2, 2, 2, 2}
	for len(want) < 50 {
		want = append(want, 1)
	}
	assert.Equal(t, want, steps)
	require.Len(t, l.g[0].Tokens, 50)
	require.Len(t, s.g[0].Tokens, 5)

	for _, tc := range []struct {
		req lm.GenerateRequest
		got lm.Generation
	}{{long, l.g[0]}, {short, s.g[0]}} {
		want := alone(t, "qwen3-tiny", tc.req)
		assert.Equal(t, want.Tokens, tc.got.Tokens)
		assert.InDeltaSlice(t, toF64(want.LogProbs), toF64(tc.got.LogProbs), 1e-5)
	}
	waitIdle(t, m)
}

// A call whose context ends leaves the batch: Generate returns the
// context's error at once, the other call's sequence decodes on unchanged,
// and the scheduler goes idle when that one is done.
func TestCancelledCallLeavesTheBatch(t *testing.T) {
	m := loadTiny(t, "qwen3-tiny")
	m.eos = nil
	keep := lm.GenerateRequest{Prompt: []int{4, 4, 4}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 30, Seed: u64(3), Logprobs: true}}
	drop := lm.GenerateRequest{Prompt: []int{1, 2}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 60}}

	var steps []int
	paused, resume := pauseAt(m, 2, &steps)
	defer resume()
	ctx, cancel := context.WithCancel(context.Background())
	dropErr := make(chan error, 1)
	go func() {
		_, err := m.Generate(ctx, []lm.GenerateRequest{drop})
		dropErr <- err
	}()
	// The dropped call is queued (the scheduler starts with it) before
	// the kept one is made: waiting for no pending request alone would
	// pass before the goroutine above has run.
	require.Eventually(t, m.gen.Busy, 5*time.Second, time.Millisecond)
	waitPending(t, m, 0)
	keepDone := make(chan []lm.Generation, 1)
	go func() {
		g, err := m.Generate(context.Background(), []lm.GenerateRequest{keep})
		assert.NoError(t, err)
		keepDone <- g
	}()
	<-paused
	cancel()
	require.ErrorIs(t, <-dropErr, context.Canceled)
	resume()
	got := <-keepDone
	require.Len(t, got, 1)
	want := alone(t, "qwen3-tiny", keep)
	assert.Equal(t, want.Tokens, got[0].Tokens)
	waitIdle(t, m)
	// Once cancelled, the dropped sequence was never advanced again: at
	// most the 2 steps before the pause carried it.
	for i, n := range steps[2:] {
		assert.LessOrEqual(t, n, 1, "step %d of %v", i+3, steps)
	}
}

// A burst of generation holds the model: a training step asked for while
// it decodes — a forward with gradients, its backward and a DeviceAdamW
// update, which changes the weights on the backend — waits for the burst
// to end, so that every token of the burst comes from the weights it
// started with and the update lands after its last step.
func TestTrainingWaitsForGeneration(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen3-tiny")
	m.eos = nil
	opt, err := m.NewDeviceAdamW(AdamWConfig{LR: 0.05})
	require.NoError(t, err)
	req := lm.GenerateRequest{Prompt: []int{5, 17, 3}, Params: lm.SampleParams{Temperature: 1, MaxNewTokens: 12, Seed: u64(1), Logprobs: true}}

	var mu sync.Mutex
	var events []string
	note := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	var steps []int
	paused, resume := pauseAt(m, 3, &steps)
	defer resume()
	pause := m.gen.Config().OnStep
	tuneGen(m, func(c *generate.Config) {
		c.OnStep = func(s generate.StepInfo) {
			note("step")
			pause(s)
		}
	})
	type result struct {
		g   []lm.Generation
		err error
	}
	genDone := make(chan result, 1)
	go func() {
		g, err := m.Generate(ctx, []lm.GenerateRequest{req})
		genDone <- result{g, err}
	}()
	<-paused // 3 of the 12 steps made; the scheduler holds the model
	trained := make(chan error, 1)
	go func() {
		batch := lm.TokenBatch{Tokens: [][]int{{5, 17, 3, 30, 31, 32}}}
		st, backward, err := m.Forward(ctx, batch, true)
		if err == nil {
			grad := [][]float32{make([]float32, len(st.LogProbs[0]))}
			for i := range grad[0] {
				grad[0][i] = -1 // raise every log-prob
			}
			err = backward(ctx, grad, nil)
		}
		if err == nil {
			_, err = opt.Step()
		}
		note("trained")
		trained <- err
	}()
	// The training step has every chance to run while the burst waits.
	select {
	case err := <-trained:
		t.Fatalf("a training step ran in the middle of a burst of generation (error %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	resume()
	g := <-genDone
	require.NoError(t, g.err)
	require.NoError(t, <-trained)
	want := make([]string, 12)
	for i := range want {
		want[i] = "step"
	}
	assert.Equal(t, append(want, "trained"), events)

	// The burst's tokens and log-probs are those of the weights it
	// started with; the update did change the weights.
	before := alone(t, "qwen3-tiny", req)
	assert.Equal(t, before.Tokens, g.g[0].Tokens)
	assert.InDeltaSlice(t, toF64(before.LogProbs), toF64(g.g[0].LogProbs), 1e-5)
	after, err := m.Generate(ctx, []lm.GenerateRequest{req})
	require.NoError(t, err)
	assert.NotEqual(t, before.LogProbs, after[0].LogProbs, "the training step changed the weights")
	waitIdle(t, m)
}

// Many concurrent calls — single and multi-request, multi-turn sessions,
// stop tokens, caches that must grow (blocks of 2 rows) — give exactly what
// each request gives when generated alone.
func TestConcurrentCallsMatchGenerationAlone(t *testing.T) {
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			m := loadTiny(t, name)
			tuneGen(m, func(c *generate.Config) { c.BlockSize = 2 })
			vocab := m.Config().VocabSize
			r := rand.New(rand.NewPCG(9, 9))
			type call struct {
				reqs  []lm.GenerateRequest
				turn2 bool // continue request 0 with appended tool tokens in its session
			}
			var calls []call
			for c := range 24 {
				var reqs []lm.GenerateRequest
				for range 1 + r.IntN(3) {
					p := make([]int, 1+r.IntN(12))
					for i := range p {
						p[i] = r.IntN(vocab)
					}
					reqs = append(reqs, lm.GenerateRequest{Prompt: p, Params: lm.SampleParams{
						Temperature: 0.9, MaxNewTokens: 1 + r.IntN(20), Seed: u64(r.Uint64()), Logprobs: true,
						StopTokenIDs: []int{r.IntN(vocab)},
					}})
				}
				turn2 := c%3 == 0
				if turn2 {
					reqs[0].Session = fmt.Sprintf("s%d", c)
				}
				calls = append(calls, call{reqs, turn2})
			}
			results := make([][]lm.Generation, len(calls))
			second := make([]lm.Generation, len(calls))
			var wg sync.WaitGroup
			for i, c := range calls {
				wg.Go(func() {
					g, err := m.Generate(context.Background(), c.reqs)
					if !assert.NoError(t, err) {
						return
					}
					results[i] = g
					if c.turn2 {
						next := c.reqs[0]
						next.Prompt = append(append(append([]int(nil), next.Prompt...), g[0].Tokens...), 1, 2)
						g2, err := m.Generate(context.Background(), []lm.GenerateRequest{next})
						if assert.NoError(t, err) {
							second[i] = g2[0]
							assert.Equal(t, len(c.reqs[0].Prompt)+len(g[0].Tokens)-1, g2[0].CachedTokens, "call %d reuses its session", i)
						}
					}
				})
			}
			wg.Wait()
			ref := loadTiny(t, name)
			for i, c := range calls {
				for j, req := range c.reqs {
					req.Session = ""
					g, err := ref.Generate(context.Background(), []lm.GenerateRequest{req})
					require.NoError(t, err)
					assert.Equal(t, g[0].Tokens, results[i][j].Tokens, "call %d request %d", i, j)
					assert.Equal(t, g[0].FinishReason, results[i][j].FinishReason, "call %d request %d", i, j)
					assert.InDeltaSlice(t, toF64(g[0].LogProbs), toF64(results[i][j].LogProbs), 1e-5)
				}
				if c.turn2 {
					next := c.reqs[0]
					next.Session = ""
					next.Prompt = append(append(append([]int(nil), next.Prompt...), results[i][0].Tokens...), 1, 2)
					g, err := ref.Generate(context.Background(), []lm.GenerateRequest{next})
					require.NoError(t, err)
					assert.Equal(t, g[0].Tokens, second[i].Tokens, "call %d turn 2", i)
				}
			}
			waitIdle(t, m)
			assert.Equal(t, len(calls)/3, m.Sessions())
		})
	}
}

// A closed model answers every request with an error instead of hanging.
func TestGenerateOnClosedModel(t *testing.T) {
	m := loadTiny(t, "qwen3-tiny")
	require.NoError(t, m.Close())
	_, err := m.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1}}, {Prompt: []int{2}}})
	require.ErrorIs(t, err, ErrInput)
	assert.Contains(t, err.Error(), "closed")
	waitIdle(t, m)
}

// allocFailer is a backend whose Alloc fails once, at the failAt-th call
// after arming (1-based); everything else goes to the wrapped backend.
type allocFailer struct {
	backend.Backend
	mu     sync.Mutex
	calls  int
	failAt int // 0: never
}

func (f *allocFailer) Alloc(n int) (backend.Buffer, error) {
	f.mu.Lock()
	f.calls++
	fail := f.calls == f.failAt
	f.mu.Unlock()
	if fail {
		return nil, errors.New("out of device memory")
	}
	return f.Backend.Alloc(n)
}

func (f *allocFailer) arm(failAt int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.failAt = 0, failAt
}

// A KV-cache allocation that fails half-way (the first layer's keys
// allocated, its values not) fails the call with the backend's error,
// frees what was allocated, and leaves the model usable.
func TestKVAllocationFailureIsAnError(t *testing.T) {
	ref := loadTiny(t, "qwen3-tiny")
	fb := &allocFailer{Backend: ref.Backend()}
	m := loadTiny(t, "qwen3-tiny", WithBackend(fb))
	req := lm.GenerateRequest{Prompt: []int{5, 17, 3}, Params: lm.SampleParams{MaxNewTokens: 4}}
	// The first allocations of a generation are the KV pool's: layer 0's
	// keys, then layer 0's values.
	fb.arm(2)
	_, err := m.Generate(context.Background(), []lm.GenerateRequest{req})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "out of device memory")
	waitIdle(t, m)

	fb.arm(0)
	got, err := m.Generate(context.Background(), []lm.GenerateRequest{req})
	require.NoError(t, err)
	want, err := ref.Generate(context.Background(), []lm.GenerateRequest{req})
	require.NoError(t, err)
	assert.Equal(t, want[0].Tokens, got[0].Tokens)
}
