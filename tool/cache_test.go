package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/tool"
	"github.com/agentrl/agentrl/tool/tooltest"
)

// counting is a deterministic tool that counts its executions: its result
// is "ran: " and the arguments, failed when they hold "fail", an error
// when they hold "error", a panic when they hold "panic".
func counting(n *atomic.Int64) *tooltest.Scripted {
	return tooltest.Func("calc", func(ctx context.Context, args json.RawMessage) (tool.Result, error) {
		n.Add(1)
		s := string(args)
		switch {
		case strings.Contains(s, "panic"):
			panic("boom")
		case strings.Contains(s, "error"):
			return tool.Result{}, errors.New("tool down")
		}
		v := 0.5
		return tool.Result{Content: "ran: " + s, Failed: strings.Contains(s, "fail"), Reward: &v, Metadata: map[string]any{"exit_code": 0}}, nil
	}, tool.Param{Name: "code", Type: "string", Required: true})
}

func TestCacheSequences(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      tool.CacheConfig
		calls    []string
		executed int64 // runs of the wrapped tool
		hits     int64
	}{
		{"same arguments twice", tool.CacheConfig{}, []string{`{"code":"1+1"}`, `{"code":"1+1"}`}, 1, 1},
		{"white space and key order do not matter", tool.CacheConfig{},
			[]string{`{"code":"1+1","n":2}`, ` { "n" : 2 ,  "code" : "1+1" } `}, 1, 1},
		{"numbers compare as written", tool.CacheConfig{}, []string{`{"code":"x","n":1}`, `{"code":"x","n":1.0}`}, 2, 0},
		{"different arguments", tool.CacheConfig{}, []string{`{"code":"1+1"}`, `{"code":"1+2"}`}, 2, 0},
		{"failed results run again", tool.CacheConfig{}, []string{`{"code":"fail"}`, `{"code":"fail"}`}, 2, 0},
		{"failed results kept when asked", tool.CacheConfig{Failed: true}, []string{`{"code":"fail"}`, `{"code":"fail"}`}, 1, 1},
		{"not one JSON value goes to the tool", tool.CacheConfig{}, []string{`{"code":"a"} {}`, `{"code":"a"} {}`}, 2, 0},
		{"malformed goes to the tool", tool.CacheConfig{}, []string{`{"code":`, `{"code":`}, 2, 0},
		{"invalid UTF-8 goes to the tool", tool.CacheConfig{}, []string{"{\"code\":\"\xff\"}", "{\"code\":\"\xfe\"}"}, 2, 0},
		// Size 1: a, b evicts a, a runs again.
		{"least recently used evicted", tool.CacheConfig{Size: 1}, []string{`{"code":"a"}`, `{"code":"b"}`, `{"code":"a"}`}, 3, 0},
		// Size 2: a, b, a (hit, a most recent), c evicts b, a hits again.
		{"a hit refreshes", tool.CacheConfig{Size: 2}, []string{`{"code":"a"}`, `{"code":"b"}`, `{"code":"a"}`, `{"code":"c"}`, `{"code":"a"}`}, 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			c, err := tool.NewCache(counting(&n), tc.cfg)
			require.NoError(t, err)
			for _, args := range tc.calls {
				r, err := c.Call(context.Background(), json.RawMessage(args))
				require.NoError(t, err)
				assert.Equal(t, "ran: ", r.Content[:5])
			}
			assert.Equal(t, tc.executed, n.Load())
			st := c.Stats()
			assert.Equal(t, tool.CacheStats{Calls: int64(len(tc.calls)), Hits: tc.hits, Executed: tc.executed}, st)
		})
	}
}

func TestCacheHitIsTheToolsResult(t *testing.T) {
	var n atomic.Int64
	c, err := tool.NewCache(counting(&n), tool.CacheConfig{})
	require.NoError(t, err)
	assert.Equal(t, "calc", c.Name())

	args := json.RawMessage(`{"code":"print(6*7)"}`)
	first, err := c.Call(context.Background(), args)
	require.NoError(t, err)
	assert.NotContains(t, first.Metadata, "cache", "the call that ran the tool")

	// The caller may change what it got; the cache keeps its own copy.
	*first.Reward = 9
	first.Metadata["exit_code"] = 1

	second, err := c.Call(context.Background(), args)
	require.NoError(t, err)
	assert.Equal(t, `ran: {"code":"print(6*7)"}`, second.Content)
	assert.False(t, second.Failed)
	require.NotNil(t, second.Reward)
	assert.Equal(t, 0.5, *second.Reward)
	assert.Equal(t, map[string]any{"exit_code": 0, "cache": "hit"}, second.Metadata)
	assert.Less(t, second.Duration, time.Second)

	// Two hits get two copies.
	second.Metadata["x"] = 1
	third, err := c.Call(context.Background(), args)
	require.NoError(t, err)
	assert.NotContains(t, third.Metadata, "x")
	assert.Equal(t, int64(1), n.Load())
}

// TestCacheOverCalculator: the cache is a tool like the one it wraps: it
// registers, refuses malformed arguments as the calculator does, and
// answers what the calculator answers.
func TestCacheOverCalculator(t *testing.T) {
	calc := &tool.Calculator{}
	c, err := tool.NewCache(calc, tool.CacheConfig{})
	require.NoError(t, err)
	tooltest.CheckTool(t, c)
	assert.JSONEq(t, string(calc.Schema()), string(c.Schema()))
	for _, expr := range []string{"6*7", "2**10 - 1", "6*7", "1/0", "1/0"} {
		want := tooltest.CallJSON(t, calc, map[string]string{"expression": expr})
		got := tooltest.CallJSON(t, c, map[string]string{"expression": expr})
		assert.Equal(t, want.Content, got.Content, expr)
		assert.Equal(t, want.Failed, got.Failed, expr)
	}
	st := c.Stats()
	assert.Equal(t, int64(1), st.Hits, "the second 6*7; 1/0 fails, so it is not kept")
}

func TestCacheErrorsAndPanics(t *testing.T) {
	var n atomic.Int64
	c, err := tool.NewCache(counting(&n), tool.CacheConfig{})
	require.NoError(t, err)
	for range 2 {
		_, err := c.Call(context.Background(), json.RawMessage(`{"code":"error"}`))
		require.EqualError(t, err, "tool down")
	}
	assert.Equal(t, int64(2), n.Load(), "errors are not kept")

	// The tool runs on singleflight's goroutine, where a panic would end
	// the process: it comes back as an error.
	_, err = c.Call(context.Background(), json.RawMessage(`{"code":"panic"}`))
	require.ErrorIs(t, err, tool.ErrToolPanic)

	_, err = tool.NewCache(nil, tool.CacheConfig{})
	require.Error(t, err)
	_, err = tool.NewCache(stateful{tooltest.Echo("shell")}, tool.CacheConfig{})
	require.ErrorContains(t, err, "Stateful", "a session's state is not in the arguments")
	_, err = tool.NewCache(counting(&n), tool.CacheConfig{Size: -1})
	require.Error(t, err)
}

// stateful is a tool that keeps state per conversation.
type stateful struct{ *tooltest.Scripted }

func (stateful) SessionOpener() tool.SessionOpener { return nil }

// TestCacheConcurrentIdenticalCalls: a GRPO group's samples make the same
// call at once; the tool runs once and every caller gets its result.
func TestCacheConcurrentIdenticalCalls(t *testing.T) {
	const callers = 8
	var n atomic.Int64
	entered := make(chan struct{})
	release := make(chan struct{})
	slow := tooltest.Func("calc", func(ctx context.Context, args json.RawMessage) (tool.Result, error) {
		if n.Add(1) == 1 {
			close(entered)
		}
		<-release
		return tool.Result{Content: "42\n"}, nil
	})
	c, err := tool.NewCache(slow, tool.CacheConfig{})
	require.NoError(t, err)

	var wg sync.WaitGroup
	results := make([]tool.Result, callers)
	errs := make([]error, callers)
	call := func(i int) {
		defer wg.Done()
		results[i], errs[i] = c.Call(context.Background(), json.RawMessage(`{"code":"print(6*7)"}`))
	}
	wg.Add(callers)
	go call(0)
	<-entered
	for i := 1; i < callers; i++ {
		go call(i)
	}
	// The others join the call in flight, or, if they arrive after it
	// ended, find its result kept: either way the tool runs once.
	require.Eventually(t, func() bool { return c.Stats().Calls == callers }, 10*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	for i := range callers {
		require.NoError(t, errs[i])
		assert.Equal(t, "42\n", results[i].Content)
	}
	st := c.Stats()
	assert.Equal(t, int64(1), n.Load())
	assert.Equal(t, int64(1), st.Executed)
	assert.Equal(t, int64(callers-1), st.Hits+st.Shared)
}

// TestCacheLeaderLeaves: when the caller whose call is running gives up
// (its rollout was cancelled), a caller that joined it runs the call
// itself instead of failing with the other's cancellation.
func TestCacheLeaderLeaves(t *testing.T) {
	var n atomic.Int64
	entered := make(chan struct{}, 2)
	tl := tooltest.Func("calc", func(ctx context.Context, args json.RawMessage) (tool.Result, error) {
		first := n.Add(1) == 1
		entered <- struct{}{}
		if first {
			<-ctx.Done() // the first run waits for its caller to leave
			return tool.Result{}, ctx.Err()
		}
		return tool.Result{Content: "7\n"}, nil
	})
	c, err := tool.NewCache(tl, tool.CacheConfig{})
	require.NoError(t, err)

	leaderCtx, cancel := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := c.Call(leaderCtx, json.RawMessage(`{"code":"x"}`))
		leaderErr <- err
	}()
	<-entered
	follower := make(chan tool.Result, 1)
	go func() {
		r, err := c.Call(context.Background(), json.RawMessage(`{"code":"x"}`))
		assert.NoError(t, err)
		follower <- r
	}()
	require.Eventually(t, func() bool { return c.Stats().Calls == 2 }, 10*time.Second, time.Millisecond)
	time.Sleep(10 * time.Millisecond) // let the follower join the flight
	cancel()
	require.ErrorIs(t, <-leaderErr, context.Canceled)
	select {
	case r := <-follower:
		assert.Equal(t, "7\n", r.Content)
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not get an answer")
	}
	assert.Equal(t, int64(2), n.Load())
}

// TestCacheCallerContext: a caller whose context ends while waiting for an
// identical call gets its own context's error at once.
func TestCacheCallerContext(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{})
	var once sync.Once
	tl := tooltest.Func("calc", func(ctx context.Context, args json.RawMessage) (tool.Result, error) {
		once.Do(func() { close(entered) })
		<-release
		return tool.Result{Content: "1"}, nil
	})
	c, err := tool.NewCache(tl, tool.CacheConfig{})
	require.NoError(t, err)
	go func() { _, _ = c.Call(context.Background(), json.RawMessage(`{"code":"x"}`)) }()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = c.Call(ctx, json.RawMessage(`{"code":"x"}`))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// FuzzCacheKey: whatever the arguments, the cache answers as the tool
// would (the echo tool's result is its arguments, so a wrong key would
// return another call's text), without panicking.
func FuzzCacheKey(f *testing.F) {
	for _, s := range []string{`{"code":"1"}`, `{"a":1,"b":[1,2]}`, ` {"b":[1,2],"a":1} `, `{"a":1.0}`, `{`, `[]`, `"x"`, "{\"a\":\"\xff\"}", `{"a":"\u00e9"}`, `{"a":"é"}`} {
		f.Add(s, `{"code":"1"}`)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		c, err := tool.NewCache(tooltest.Echo("echo"), tool.CacheConfig{})
		require.NoError(t, err)
		ra, err := c.Call(context.Background(), json.RawMessage(a))
		require.NoError(t, err)
		require.Equal(t, a, ra.Content)
		rb, err := c.Call(context.Background(), json.RawMessage(b))
		require.NoError(t, err)
		if rb.Metadata["cache"] == "hit" {
			// Served a's result: a and b must be the same JSON value.
			var va, vb any
			require.NoError(t, json.Unmarshal([]byte(a), &va))
			require.NoError(t, json.Unmarshal([]byte(b), &vb))
			require.Equal(t, fmt.Sprint(va), fmt.Sprint(vb), "%q served for %q", a, b)
		} else {
			require.Equal(t, b, rb.Content)
		}
	})
}
