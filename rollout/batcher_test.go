package rollout_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/rollout"
)

// TestBatcherSizeAndOrder: 12 concurrent callers with MaxSize 4 and an
// hour-long window are served in three batches of 4 (a full batch does
// not wait for the window), each caller getting its own generation.
func TestBatcherSizeAndOrder(t *testing.T) {
	s := policytest.New(policytest.Config{})
	for i := range 12 {
		s.Handle([]int{i}, policytest.Tokens(100+i))
	}
	b := rollout.NewBatcher(s, rollout.BatchConfig{MaxSize: 4, Window: time.Hour})
	var wg sync.WaitGroup
	got := make([]int, 12)
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gens, err := b.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{i}}})
			if assert.NoError(t, err) && assert.Len(t, gens, 1) {
				got[i] = gens[0].Tokens[0]
			}
		}()
	}
	wg.Wait()
	for i := range 12 {
		assert.Equal(t, 100+i, got[i])
	}
	for _, n := range s.Batches() {
		assert.Equal(t, 4, n)
	}
}

func TestBatcherCallerCancel(t *testing.T) {
	s := policytest.New(policytest.Config{})
	s.Handle([]int{1}, policytest.Response{Tokens: []int{7}, Delay: 100 * time.Millisecond})
	s.Handle([]int{2}, policytest.Response{Block: true})
	b := rollout.NewBatcher(s, rollout.BatchConfig{Window: 10 * time.Millisecond, MaxInFlight: 2})

	// A caller that leaves returns at once with its context's error.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Generate(ctx, []lm.GenerateRequest{{Prompt: []int{2}}})
		errc <- err
	}()
	time.Sleep(30 * time.Millisecond)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)

	// Others are served.
	gens, err := b.Generate(context.Background(), []lm.GenerateRequest{{Prompt: []int{1}}, {Prompt: []int{1}}})
	require.NoError(t, err)
	assert.Equal(t, []int{7}, gens[1].Tokens)
	gens, err = b.Generate(context.Background(), nil)
	assert.NoError(t, err)
	assert.Empty(t, gens)
}
