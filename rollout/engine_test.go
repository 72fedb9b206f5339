package rollout_test

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

const prompt = "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"

// glue is the text Qwen3's chat template renders after an assistant turn
// that stopped at </tool_call> and one tool message with content r (see
// testdata/chat_template_cases.json, case arguments_as_string).
func glue(r string) string {
	return "<|im_end|>\n<|im_start|>user\n<tool_response>\n" + r + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
}

func newEngine(t testing.TB, s lm.Sampler, mod func(*rollout.Config)) *rollout.Engine {
	t.Helper()
	cfg := rollout.Config{Sampler: s, Tokenizer: byteTok{}, Tools: []tool.Tool{echoTool()}, MaxTurns: 8}
	if mod != nil {
		mod(&cfg)
	}
	e, err := rollout.NewEngine(cfg)
	require.NoError(t, err)
	return e
}

// TestTokenFaithful runs three turns with two tool calls and checks, token
// by token, that every sampler request saw exactly the trajectory so far
// and that the trajectory is the last prompt followed by the last
// generation.
func TestTokenFaithful(t *testing.T) {
	s := newScripted()
	t1 := "Let me check.<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"x\": 1}}\n</tool_call>"
	t2 := "<tool_call>\n{\"name\": \"echo\", \"arguments\": \"{\\\"y\\\": 2}\"}\n</tool_call>"
	t3 := "The answer is 3.<|im_end|>"
	// Each scripted turn runs on past the close tag; the stop string must
	// cut it right after </tool_call>, as vLLM does.
	s.HandleText(prompt, policytest.Text(t1+"<|im_end|>junk"), policytest.Text(t2+"\nmore"), policytest.Text(t3))
	e := newEngine(t, s, nil)

	trajs, err := e.Run(context.Background(), []rollout.Request{{ID: "q", PromptText: prompt}})
	require.NoError(t, err)
	require.Len(t, trajs, 1)
	tr := trajs[0]

	// Hand-derived expected sequence.
	g1, g2 := glue(`echo:{"x":1}`), glue(`echo:{"y":2}`)
	want := enc(prompt + t1 + g1 + t2 + g2 + t3)
	assert.Equal(t, want, tr.Tokens)
	assert.Equal(t, len(enc(prompt)), tr.PromptLen)
	assert.Equal(t, rollout.StopNoToolCall, tr.Stop)
	assert.Equal(t, t1+g1+t2+g2+t3, tr.Response)

	// Turn spans.
	p := len(enc(prompt))
	spans := [][3]int{
		{p, p + len(enc(t1)), p + len(enc(t1+g1))},
		{p + len(enc(t1+g1)), p + len(enc(t1+g1+t2)), p + len(enc(t1+g1+t2+g2))},
		{p + len(enc(t1+g1+t2+g2)), len(want), len(want)},
	}
	require.Len(t, tr.Turns, 3)
	for i, sp := range spans {
		assert.Equal(t, sp, [3]int{tr.Turns[i].Start, tr.Turns[i].End, tr.Turns[i].ResultEnd}, "turn %d", i)
	}
	assert.Equal(t, lm.FinishStop, tr.Turns[0].Finish)
	assert.Equal(t, "</tool_call>", tr.Turns[0].StopString)
	assert.Equal(t, lm.FinishStopToken, tr.Turns[2].Finish)
	assert.Equal(t, imEnd, tr.Turns[2].StopToken)

	// Mask and log-probs: 1 and -id/1000 exactly inside turn spans.
	require.Len(t, tr.Mask, len(want))
	require.Len(t, tr.LogProbs, len(want))
	for i, id := range want {
		sampled := false
		for _, sp := range spans {
			sampled = sampled || (i >= sp[0] && i < sp[1])
		}
		if sampled {
			assert.Equal(t, float32(1), tr.Mask[i], "mask at %d", i)
			assert.Equal(t, policytest.DefaultLogProb(id), tr.LogProbs[i], "logprob at %d", i)
		} else {
			assert.Equal(t, float32(0), tr.Mask[i], "mask at %d", i)
			assert.Equal(t, float32(0), tr.LogProbs[i], "logprob at %d", i)
		}
	}
	assert.Nil(t, tr.RawLogProbs, "the scripted sampler gives no raw log-probs")
	assert.Equal(t, len(enc(t1+t2+t3)), tr.SampledTokens())
	assert.Equal(t, len(enc(g1+g2)), tr.ResultTokens())
	assert.Nil(t, tr.ToolRewards())

	// Every request's prompt is the trajectory so far; the trajectory is
	// the last prompt plus the last generation.
	reqs := s.Requests()
	require.Len(t, reqs, 3)
	for i, r := range reqs {
		assert.Equal(t, tr.Tokens[:tr.Turns[i].Start], r.Prompt, "prompt of turn %d", i)
		assert.Equal(t, reqs[0].Session, r.Session)
		assert.Contains(t, r.Params.Stop, "</tool_call>")
		assert.True(t, r.Params.Logprobs)
	}
	last := append(slices.Clone(reqs[2].Prompt), enc(t3)...)
	assert.Equal(t, last, tr.Tokens)
	assert.Equal(t, []string{reqs[0].Session}, s.Closed())

	// Tool calls.
	require.Len(t, tr.ToolCalls, 2)
	assert.Equal(t, "echo", tr.ToolCalls[0].Name)
	assert.JSONEq(t, `{"x":1}`, string(tr.ToolCalls[0].Arguments))
	assert.Equal(t, `echo:{"x":1}`, tr.ToolCalls[0].Result.Content)
	assert.NoError(t, tr.ToolCalls[0].Err)
	assert.Equal(t, 1, tr.ToolCalls[1].Turn)
	assert.Equal(t, `{"y":2}`, string(tr.ToolCalls[1].Arguments))
	assert.Equal(t, []int{0}, tr.Turns[0].Calls)
	assert.Equal(t, []int{1}, tr.Turns[1].Calls)
}

// TestStopReasons drives each way a trajectory ends.
func TestStopReasons(t *testing.T) {
	call := "<tool_call>\n{\"name\": \"echo\", \"arguments\": {}}\n</tool_call>"
	g := glue("echo:{}")
	p := len(enc(prompt))
	cases := []struct {
		name   string
		script []policytest.Response
		mod    func(*rollout.Config)
		params lm.SampleParams
		stop   rollout.StopReason
		turns  int
		calls  int
		length int // expected len(Tokens)
	}{
		{
			name: "answer", script: []policytest.Response{policytest.Text("42<|im_end|>")},
			stop: rollout.StopNoToolCall, turns: 1, length: p + 3,
		},
		{
			name: "max turns: calls of the last turn are not run", mod: func(c *rollout.Config) { c.MaxTurns = 2 },
			script: []policytest.Response{policytest.Text(call), policytest.Text(call)},
			stop:   rollout.StopMaxTurns, turns: 2, calls: 1, length: p + 2*len(enc(call)) + len(enc(g)),
		},
		{
			name:   "turn budget",
			script: []policytest.Response{policytest.Text("abcdefghij")}, params: lm.SampleParams{MaxNewTokens: 4},
			stop: rollout.StopTurnBudget, turns: 1, length: p + 4,
		},
		{
			// 10 response tokens: the call (len(call)) leaves room for
			// nothing else, so the glue does not fit.
			name: "response budget leaves tool results out", mod: func(c *rollout.Config) { c.MaxResponseTokens = len(enc(call)) + 3 },
			script: []policytest.Response{policytest.Text(call)},
			stop:   rollout.StopResponseBudget, turns: 1, calls: 1, length: p + len(enc(call)),
		},
		{
			name: "response budget cuts a turn", mod: func(c *rollout.Config) { c.MaxResponseTokens = 5 },
			script: []policytest.Response{policytest.Text("abcdefghij")}, params: lm.SampleParams{MaxNewTokens: 8},
			stop: rollout.StopResponseBudget, turns: 1, length: p + 5,
		},
		{
			name: "total budget", mod: func(c *rollout.Config) { c.MaxTotalTokens = p + 6 },
			script: []policytest.Response{policytest.Text("abcdefghij")},
			stop:   rollout.StopTotalBudget, turns: 1, length: p + 6,
		},
		{
			name: "prompt fills the context", mod: func(c *rollout.Config) { c.MaxTotalTokens = p },
			stop: rollout.StopTotalBudget, turns: 0, length: p,
		},
		{
			name: "max tool calls", mod: func(c *rollout.Config) { c.MaxToolCalls = 1 },
			script: []policytest.Response{policytest.Text(call), policytest.Text(call)},
			stop:   rollout.StopMaxToolCalls, turns: 2, calls: 1, length: p + 2*len(enc(call)) + len(enc(g)),
		},
		{
			name:   "sampler out of context before the turn budget",
			script: []policytest.Response{policytest.Text("abc")}, params: lm.SampleParams{MaxNewTokens: 10},
			stop: rollout.StopTotalBudget, turns: 1, length: p + 3,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted()
			s.HandleDefault(tc.script...)
			e := newEngine(t, s, tc.mod)
			trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt, Params: tc.params}})
			require.NoError(t, err)
			tr := trajs[0]
			assert.Equal(t, tc.stop, tr.Stop)
			assert.Len(t, tr.Turns, tc.turns)
			assert.Len(t, tr.ToolCalls, tc.calls)
			assert.Len(t, tr.Tokens, tc.length)
			assert.Len(t, tr.Mask, tc.length)
		})
	}
}

// TestToolErrorsReachTheModel checks that each failure becomes an error
// result in the next prompt and is recorded with its sentinel.
func TestToolErrorsReachTheModel(t *testing.T) {
	cases := []struct {
		name    string
		call    string
		tools   []tool.Tool
		content string
		err     error
	}{
		{"bad json", "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"x\": }\n</tool_call>", nil,
			"Error: malformed tool call: body is not a JSON object: invalid character '}' looking for beginning of value", rollout.ErrBadToolCall},
		{"unknown tool", "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>", nil,
			"Error: unknown tool \"nope\"; available tools: echo", rollout.ErrUnknownTool},
		{"tool error", "<tool_call>\n{\"name\": \"broken\", \"arguments\": {}}\n</tool_call>", []tool.Tool{errTool(errBroken)},
			"Error: tool \"broken\" failed: backend unreachable", rollout.ErrToolFailed},
		{"panic", "<tool_call>\n{\"name\": \"panics\", \"arguments\": {}}\n</tool_call>", []tool.Tool{panicTool()},
			// tool.Registry recovers the panic and returns an error wrapping
			// tool.ErrToolPanic ("tool: tool panicked: <name>: <value>").
			"Error: tool \"panics\" failed: tool: tool panicked: panics: boom", rollout.ErrToolFailed},
		{"timeout", "<tool_call>\n{\"name\": \"hang\", \"arguments\": {}}\n</tool_call>", []tool.Tool{hangTool(nil)},
			"Error: tool \"hang\" timed out after 20ms", rollout.ErrToolTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted()
			s.HandleDefault(policytest.Text(tc.call), policytest.Text("ok<|im_end|>"))
			e := newEngine(t, s, func(c *rollout.Config) {
				c.ToolTimeout = 20 * time.Millisecond
				if tc.tools != nil {
					c.Tools = tc.tools
				}
			})
			trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt}})
			require.NoError(t, err)
			tr := trajs[0]
			require.Len(t, tr.ToolCalls, 1)
			c := tr.ToolCalls[0]
			assert.ErrorIs(t, c.Err, tc.err)
			assert.True(t, c.Result.Failed)
			assert.Equal(t, tc.content, c.Result.Content)
			reqs := s.Requests()
			require.Len(t, reqs, 2)
			assert.Equal(t, enc(prompt+tc.call+glue(tc.content)), reqs[1].Prompt)
			assert.Equal(t, rollout.StopNoToolCall, tr.Stop)
		})
	}
}

func TestCallsPerTurnLimit(t *testing.T) {
	// Without the stop string, one turn holds three calls; only two run.
	c := func(v int) string {
		return "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"v\": " + string(rune('0'+v)) + "}}\n</tool_call>"
	}
	s := newScripted()
	s.HandleDefault(policytest.Text(c(1)+c(2)+c(3)+"<|im_end|>"), policytest.Text("done<|im_end|>"))
	e := newEngine(t, s, func(cfg *rollout.Config) {
		cfg.Parser = rollout.Hermes{NoStop: true}
		cfg.MaxCallsPerTurn = 2
	})
	trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt}})
	require.NoError(t, err)
	tr := trajs[0]
	require.Len(t, tr.ToolCalls, 3)
	assert.NoError(t, tr.ToolCalls[0].Err)
	assert.NoError(t, tr.ToolCalls[1].Err)
	assert.ErrorIs(t, tr.ToolCalls[2].Err, rollout.ErrTooManyCalls)
	// The turn ended with <|im_end|>, so the glue does not repeat it; the
	// three results are grouped in one user turn.
	wantGlue := "\n<|im_start|>user\n<tool_response>\necho:{\"v\":1}\n</tool_response>\n<tool_response>\necho:{\"v\":2}\n</tool_response>" +
		"\n<tool_response>\nError: not executed: at most 2 tool calls per turn\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
	assert.Equal(t, enc(prompt+c(1)+c(2)+c(3)+"<|im_end|>"+wantGlue), s.Requests()[1].Prompt)
	assert.Empty(t, s.Requests()[0].Params.Stop)
}

// TestToolWaitDoesNotBlockDecoding: trajectory A's tool waits until
// trajectory B has finished generating; a serial engine would deadlock.
func TestToolWaitDoesNotBlockDecoding(t *testing.T) {
	bDone := make(chan struct{})
	waiter := funcTool{name: "wait", fn: func(ctx context.Context, _ json.RawMessage) (tool.Result, error) {
		select {
		case <-bDone:
			return tool.Result{Content: "B finished first"}, nil
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		}
	}}
	s := newScripted()
	s.HandleText("A", policytest.Text("<tool_call>\n{\"name\": \"wait\", \"arguments\": {}}\n</tool_call>"), policytest.Text("a<|im_end|>"))
	s.HandleText("B", policytest.Text("b1<|im_end|>"))
	notify := samplerFunc(func(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
		gens, err := s.Generate(ctx, reqs)
		if err == nil && reqs[0].Prompt[0] == 'B' {
			close(bDone)
		}
		return gens, err
	})
	e := newEngine(t, notify, func(c *rollout.Config) { c.Tools = []tool.Tool{waiter} })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	trajs, err := e.Run(ctx, []rollout.Request{{ID: "A", PromptText: "A"}, {ID: "B", PromptText: "B"}})
	require.NoError(t, err)
	assert.Equal(t, "B finished first", trajs[0].ToolCalls[0].Result.Content)
	assert.Equal(t, "B", trajs[1].ID)
}

type samplerFunc func(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error)

func (f samplerFunc) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	return f(ctx, reqs)
}

func TestBatchingGathersConcurrentTrajectories(t *testing.T) {
	s := newScripted()
	s.HandleDefault(policytest.Text("<tool_call>\n{\"name\": \"echo\", \"arguments\": {}}\n</tool_call>"), policytest.Text("x<|im_end|>"))
	e := newEngine(t, s, func(c *rollout.Config) {
		c.Batch = &rollout.BatchConfig{MaxSize: 16, Window: 50 * time.Millisecond}
	})
	trajs, err := e.Run(context.Background(), []rollout.Request{{ID: "g", PromptText: prompt, N: 12}})
	require.NoError(t, err)
	require.Len(t, trajs, 12)
	sessions := map[string]bool{}
	for i, tr := range trajs {
		assert.Equal(t, i, tr.Sample)
		assert.Equal(t, "g", tr.ID)
		assert.Equal(t, rollout.StopNoToolCall, tr.Stop)
		assert.Len(t, tr.Turns, 2)
	}
	for _, r := range s.Requests() {
		sessions[r.Session] = true
	}
	assert.Len(t, sessions, 12, "one session per trajectory")
	assert.Len(t, s.Closed(), 12)
	batches := s.Batches()
	total := 0
	for _, b := range batches {
		total += b
		assert.LessOrEqual(t, b, 16)
	}
	assert.Equal(t, 24, total)
	assert.Greater(t, slices.Max(batches), 1, "concurrent requests share batches: %v", batches)
}

// TestCancelStopsEverything: with one trajectory in a hanging tool and one
// in a hanging sampler call, cancelling returns ctx's error promptly and
// leaves no goroutine behind.
func TestCancelStopsEverything(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "batched"}[batched], func(t *testing.T) {
			before := runtime.NumGoroutine()
			started := make(chan struct{})
			s := newScripted()
			s.HandleText("A", policytest.Text("<tool_call>\n{\"name\": \"hang\", \"arguments\": {}}\n</tool_call>"))
			s.HandleText("B", policytest.Response{Block: true})
			e := newEngine(t, s, func(c *rollout.Config) {
				c.Tools = []tool.Tool{hangTool(started)}
				if batched {
					c.Batch = &rollout.BatchConfig{}
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := e.Run(ctx, []rollout.Request{{PromptText: "A"}, {PromptText: "B"}})
				errc <- err
			}()
			// Directly, A reaches its tool while B hangs in the sampler.
			// Batched, A's and B's first turns share one sampler call,
			// which hangs on B: a Generate call returns whole batches.
			for len(s.Requests()) < 2 {
				time.Sleep(time.Millisecond)
			}
			if !batched {
				<-started
			}
			cancel()
			select {
			case err := <-errc:
				assert.ErrorIs(t, err, context.Canceled)
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
			waitGoroutines(t, before)
		})
	}
}

func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, want %d:\n%s", runtime.NumGoroutine(), want, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSamplerErrorFailsRun(t *testing.T) {
	s := newScripted()
	s.HandleText("A", policytest.Text("a<|im_end|>"))
	s.HandleText("B", policytest.Error(errBroken))
	e := newEngine(t, s, nil)
	_, err := e.Run(context.Background(), []rollout.Request{{ID: "a", PromptText: "A"}, {ID: "b", PromptText: "B"}})
	require.ErrorIs(t, err, errBroken)
	assert.Contains(t, err.Error(), `request 1 ("b") sample 0: turn 0: generate`)
}

func TestBadGenerationIsAnError(t *testing.T) {
	cases := []struct {
		name string
		gen  lm.Generation
		msg  string
	}{
		{"logprob count", lm.Generation{Tokens: []int{1, 2}, LogProbs: []float32{-1}}, "1 log-probs for 2 tokens"},
		{"positive logprob", lm.Generation{Tokens: []int{1}, LogProbs: []float32{0.5}}, "log-prob 0.5 at token 0"},
		{"too long", lm.Generation{Tokens: []int{1, 2, 3}}, "3 tokens, more than MaxNewTokens 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := samplerFunc(func(context.Context, []lm.GenerateRequest) ([]lm.Generation, error) {
				return []lm.Generation{tc.gen}, nil
			})
			e := newEngine(t, s, nil)
			_, err := e.Run(context.Background(), []rollout.Request{{PromptText: "A", Params: lm.SampleParams{MaxNewTokens: 2}}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestInvalidConfigAndRequests(t *testing.T) {
	s := newScripted()
	_, err := rollout.NewEngine(rollout.Config{Tokenizer: byteTok{}, MaxTurns: 1})
	assert.ErrorIs(t, err, rollout.ErrConfig)
	_, err = rollout.NewEngine(rollout.Config{Sampler: s, MaxTurns: 1})
	assert.ErrorIs(t, err, rollout.ErrConfig)
	_, err = rollout.NewEngine(rollout.Config{Sampler: s, Tokenizer: byteTok{}})
	assert.ErrorIs(t, err, rollout.ErrConfig, "unbounded trajectories")
	_, err = rollout.NewEngine(rollout.Config{Sampler: s, Tokenizer: byteTok{}, MaxTurns: 1, Tools: []tool.Tool{echoTool(), echoTool()}})
	assert.ErrorIs(t, err, rollout.ErrConfig, "duplicate tool")

	e := newEngine(t, s, nil)
	bad := []rollout.Request{
		{},
		{Prompt: []int{1}, PromptText: "x"},
		{PromptText: "x", N: -1},
		{PromptText: "x", Params: lm.SampleParams{TopP: 2}},
		{Messages: []rollout.Message{{Role: "user", Content: "hi"}}}, // no Render
		{PromptText: "x", Tools: []tool.Tool{nil}},
	}
	for i, r := range bad {
		_, err := e.Run(context.Background(), []rollout.Request{{PromptText: "ok"}, r})
		assert.ErrorIs(t, err, rollout.ErrConfig, "case %d", i)
		if err != nil {
			assert.Contains(t, err.Error(), "request 1", "case %d", i)
		}
	}
	assert.Empty(t, s.Requests(), "nothing is generated for an invalid batch")
}

func TestMessagesAreRendered(t *testing.T) {
	s := newScripted()
	s.HandleDefault(policytest.Text("hi<|im_end|>"))
	var gotTools []json.RawMessage
	e := newEngine(t, s, func(c *rollout.Config) {
		c.Render = func(msgs []rollout.Message, tools []json.RawMessage) (string, error) {
			gotTools = tools
			var b strings.Builder
			for _, m := range msgs {
				b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
			}
			return b.String() + "<|im_start|>assistant\n", nil
		}
	})
	trajs, err := e.Run(context.Background(), []rollout.Request{{Messages: []rollout.Message{{Role: "user", Content: "Q"}}}})
	require.NoError(t, err)
	assert.Equal(t, enc(prompt+"hi<|im_end|>"), trajs[0].Tokens)
	require.Len(t, gotTools, 1)
	assert.Contains(t, string(gotTools[0]), `"name": "echo"`)
}

func TestToolCallsRunConcurrently(t *testing.T) {
	// Each call waits until all three have started, so a serial engine
	// would time out the calls: every call must start before any ends.
	var mu sync.Mutex
	var events []string
	gate := make(chan struct{})
	started := 0
	slow := funcTool{name: "slow", fn: func(ctx context.Context, _ json.RawMessage) (tool.Result, error) {
		mu.Lock()
		events = append(events, "start")
		started++
		if started == 3 {
			close(gate)
		}
		mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		}
		mu.Lock()
		events = append(events, "end")
		mu.Unlock()
		return tool.Result{Content: "ok"}, nil
	}}
	c := "<tool_call>\n{\"name\": \"slow\", \"arguments\": {}}\n</tool_call>"
	s := newScripted()
	s.HandleDefault(policytest.Text(c+c+c+"<|im_end|>"), policytest.Text("x<|im_end|>"))
	e := newEngine(t, s, func(cfg *rollout.Config) {
		cfg.Tools = []tool.Tool{slow}
		cfg.Parser = rollout.Hermes{NoStop: true}
		cfg.ToolTimeout = 5 * time.Second
	})
	trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt}})
	require.NoError(t, err)
	for _, call := range trajs[0].ToolCalls {
		assert.NoError(t, call.Err)
	}
	assert.Equal(t, []string{"start", "start", "start", "end", "end", "end"}, events)
}

func TestCodeBlocksWithTaggedResults(t *testing.T) {
	py := funcTool{name: "code_interpreter", fn: func(_ context.Context, args json.RawMessage) (tool.Result, error) {
		var a struct{ Code string }
		if err := json.Unmarshal(args, &a); err != nil {
			return tool.Result{}, err
		}
		return tool.Result{Content: "ran " + strings.TrimSpace(a.Code)}, nil
	}}
	s := newScripted()
	turn1 := "<code>\n```python\nprint(2)\n```\n</code>"
	s.HandleDefault(policytest.Text(turn1+"ignored"), policytest.Text("so 2<|im_end|>"))
	e := newEngine(t, s, func(c *rollout.Config) {
		c.Tools = []tool.Tool{py}
		c.Parser = rollout.CodeBlocks{}
		c.Format = rollout.Tagged{}
	})
	trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt}})
	require.NoError(t, err)
	assert.Equal(t, enc(prompt+turn1+"<interpreter>\nran print(2)\n</interpreter>\nso 2<|im_end|>"), trajs[0].Tokens)
}

func TestToolRewardsAndDuration(t *testing.T) {
	half := 0.5
	scored := funcTool{name: "scored", fn: func(context.Context, json.RawMessage) (tool.Result, error) {
		return tool.Result{Content: "ok", Reward: &half, Duration: time.Second}, nil
	}}
	s := newScripted()
	c := "<tool_call>\n{\"name\": \"scored\", \"arguments\": {}}\n</tool_call>"
	s.HandleDefault(policytest.Text(c), policytest.Text(c), policytest.Text("x<|im_end|>"))
	e := newEngine(t, s, func(cfg *rollout.Config) { cfg.Tools = []tool.Tool{scored} })
	trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt}})
	require.NoError(t, err)
	assert.Equal(t, []float64{0.5, 0.5}, trajs[0].ToolRewards())
	assert.Equal(t, time.Second, trajs[0].ToolCalls[0].Result.Duration, "the tool's own duration is kept")
	assert.Positive(t, trajs[0].Duration)
}

func TestSeedsDifferPerSample(t *testing.T) {
	s := newScripted()
	s.HandleDefault(policytest.Text("x<|im_end|>"))
	e := newEngine(t, s, nil)
	seed := uint64(1<<64 - 2)
	trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: "A", N: 3, Params: lm.SampleParams{Seed: &seed}}, {PromptText: "B"}})
	require.NoError(t, err)
	require.Len(t, trajs, 4)
	got := map[string]uint64{}
	for _, r := range s.Requests() {
		if r.Params.Seed != nil {
			got[r.Session] = *r.Params.Seed
		} else {
			assert.Equal(t, int('B'), r.Prompt[0], "only B has no seed")
		}
	}
	var seeds []uint64
	for _, v := range got {
		seeds = append(seeds, v)
	}
	slices.Sort(seeds)
	// 2^64-2, 2^64-1, then wrapping to 0.
	assert.Equal(t, []uint64{0, 1<<64 - 2, 1<<64 - 1}, seeds)
	assert.Equal(t, uint64(1<<64-2), seed, "the caller's seed is not modified")

	empty, err := e.Run(context.Background(), nil)
	require.NoError(t, err)
	assert.Empty(t, empty)
}

func TestCancelledBeforeRun(t *testing.T) {
	s := newScripted()
	s.HandleDefault(policytest.Text("x<|im_end|>"))
	e := newEngine(t, s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	trajs, err := e.Run(ctx, []rollout.Request{{PromptText: "A", N: 4}})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, trajs)
}
