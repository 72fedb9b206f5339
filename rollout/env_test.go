package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// game is a guessing game over 1..9: each turn is a guess, answered
// "higher" (no reward) or "lower" (reward −0.5); the right guess ends the
// episode with reward 1. Its state is the interval the secret is known
// to lie in.
type game struct {
	secret, lo, hi int
	closed         *atomic.Int32
}

func (g *game) Open(context.Context) (rollout.Opening, error) {
	g.lo, g.hi = 1, 9
	return rollout.Opening{State: "1-9", Metadata: map[string]any{"secret": g.secret}}, nil
}

func (g *game) Step(_ context.Context, a rollout.Action) (rollout.Feedback, error) {
	n, err := strconv.Atoi(strings.TrimSuffix(a.Text, "<|im_end|>"))
	if err != nil {
		return rollout.Feedback{Observation: []rollout.Message{{Role: "user", Content: "a number, please"}}}, nil
	}
	meta := map[string]any{"guess": n}
	switch {
	case n < g.secret:
		g.lo = max(g.lo, n+1)
		return rollout.Feedback{Observation: []rollout.Message{{Role: "user", Content: "higher"}}, State: fmt.Sprintf("%d-%d", g.lo, g.hi), Metadata: meta}, nil
	case n > g.secret:
		g.hi = min(g.hi, n-1)
		return rollout.Feedback{Observation: []rollout.Message{{Role: "user", Content: "lower"}}, Reward: new(-0.5), State: fmt.Sprintf("%d-%d", g.lo, g.hi), Metadata: meta}, nil
	}
	return rollout.Feedback{Done: true, Reward: new(1.0), Metadata: meta}, nil
}

func (g *game) Close() error {
	if g.closed != nil {
		g.closed.Add(1)
	}
	return nil
}

// reply is the text ChatML renders after a turn that ended with
// <|im_end|>, for one user message: Qwen3's template's rendering of a user
// message and the generation prompt.
func reply(s string) string {
	return "\n<|im_start|>user\n" + s + "<|im_end|>\n<|im_start|>assistant\n"
}

func gameEngine(t *testing.T, s lm.Sampler, closed *atomic.Int32, mod func(*rollout.Config)) *rollout.Engine {
	t.Helper()
	cfg := rollout.Config{
		Sampler: s, Tokenizer: byteTok{}, MaxTurns: 8,
		Env: func(_ context.Context, task rollout.Task) (rollout.Env, error) {
			secret, err := strconv.Atoi(task.GroundTruth)
			if err != nil {
				return nil, err
			}
			return &game{secret: secret, closed: closed}, nil
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := rollout.NewEngine(cfg)
	require.NoError(t, err)
	return e
}

// TestEnvTrajectory plays the game through a scripted sampler and checks
// the trajectory token by token: the prompt, each guess as sampled (mask
// 1, the sampler's log-probs), each answer as Qwen3's template renders a
// user message (mask 0), the turn spans, rewards, states and metadata.
func TestEnvTrajectory(t *testing.T) {
	s := newScripted()
	s.HandleText(prompt, policytest.Text("5<|im_end|>"), policytest.Text("7<|im_end|>"), policytest.Text("6<|im_end|>"))
	var closed atomic.Int32
	e := gameEngine(t, s, &closed, nil)
	trajs, err := e.Run(context.Background(), []rollout.Request{{ID: "g", PromptText: prompt, Task: rollout.Task{GroundTruth: "6"}}})
	require.NoError(t, err)
	require.Len(t, trajs, 1)
	tr := trajs[0]
	assert.EqualValues(t, 1, closed.Load(), "Close once")

	// Hand-derived: guess 5 → "higher", 7 → "lower", 6 → done.
	t1, t2, t3 := "5<|im_end|>", "7<|im_end|>", "6<|im_end|>"
	g1, g2 := reply("higher"), reply("lower")
	want := enc(prompt + t1 + g1 + t2 + g2 + t3)
	assert.Equal(t, want, tr.Tokens)
	assert.Equal(t, rollout.StopEnvDone, tr.Stop)
	assert.NoError(t, tr.EnvErr)
	assert.Equal(t, t1+g1+t2+g2+t3, tr.Response)
	assert.Equal(t, map[string]any{"secret": 6}, tr.Metadata)

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
	for i, id := range want {
		in := false
		for _, sp := range spans {
			in = in || i >= sp[0] && i < sp[1]
		}
		if in {
			assert.Equal(t, float32(1), tr.Mask[i], "mask at %d", i)
			assert.Equal(t, policytest.DefaultLogProb(id), tr.LogProbs[i], "log-prob at %d", i)
		} else {
			assert.Equal(t, float32(0), tr.Mask[i], "mask at %d", i)
			assert.Equal(t, float32(0), tr.LogProbs[i], "log-prob at %d", i)
		}
	}
	assert.Nil(t, tr.Turns[0].Reward)
	assert.Equal(t, -0.5, *tr.Turns[1].Reward)
	assert.Equal(t, 1.0, *tr.Turns[2].Reward)
	assert.Equal(t, []float64{0, -0.5, 1}, tr.TurnRewards())
	assert.Equal(t, []string{"1-9", "6-9", "6-6"}, []string{tr.Turns[0].State, tr.Turns[1].State, tr.Turns[2].State})
	assert.Equal(t, "6-9", tr.TurnState(1))
	assert.Equal(t, map[string]any{"guess": 7}, tr.Turns[1].Metadata)
	assert.Empty(t, tr.ToolCalls)

	// Every sampler request's prompt is the trajectory so far.
	reqs := s.Requests()
	require.Len(t, reqs, 3)
	for i, r := range reqs {
		assert.Equal(t, tr.Tokens[:tr.Turns[i].Start], r.Prompt, "prompt of turn %d", i)
	}
}

// TestTurnStateFromTokens checks the state name derived from the tokens:
// equal for equal contexts, different otherwise, and the environment's
// name when it gave one.
func TestTurnStateFromTokens(t *testing.T) {
	a := rollout.Trajectory{Tokens: []int{1, 2, 3, 4, 5}, Turns: []rollout.Turn{{Start: 2, End: 3}, {Start: 4, End: 5}}}
	b := rollout.Trajectory{Tokens: []int{1, 2, 9, 4, 5}, Turns: []rollout.Turn{{Start: 2, End: 3}, {Start: 4, End: 5, State: "s"}}}
	assert.Equal(t, a.TurnState(0), b.TurnState(0), "same two tokens before turn 0")
	assert.True(t, strings.HasPrefix(a.TurnState(0), "tokens:"))
	assert.NotEqual(t, a.TurnState(0), a.TurnState(1))
	assert.Equal(t, "s", b.TurnState(1))
	c := rollout.Trajectory{Tokens: []int{258, 2}, Turns: []rollout.Turn{{Start: 1, End: 2}}}
	d := rollout.Trajectory{Tokens: []int{2, 1, 2}, Turns: []rollout.Turn{{Start: 2, End: 3}}}
	assert.NotEqual(t, c.TurnState(0), d.TurnState(0), "ids are hashed whole, not byte by byte")
}

// badEnv misbehaves as its task's DataSource says, at the step its Extra
// "at" names (0: the first turn).
type badEnv struct {
	how    string
	at     int
	closed *sync.Map
	id     string
	block  chan struct{}
}

func (b *badEnv) Open(ctx context.Context) (rollout.Opening, error) {
	switch b.how {
	case "open-error":
		return rollout.Opening{}, errors.New("no database")
	case "open-panic":
		panic("open boom")
	case "open-garbage":
		return rollout.Opening{Messages: []rollout.Message{{Role: "narrator", Content: "x"}}}, nil
	}
	return rollout.Opening{}, nil
}

func (b *badEnv) Step(ctx context.Context, a rollout.Action) (rollout.Feedback, error) {
	if a.Turn < b.at {
		return rollout.Feedback{Observation: []rollout.Message{{Role: "user", Content: "go on"}}}, nil
	}
	switch b.how {
	case "step-error":
		return rollout.Feedback{}, errors.New("simulator crashed")
	case "step-panic":
		panic("step boom")
	case "step-hang":
		<-b.block // ignores ctx
	case "nan-reward":
		return rollout.Feedback{Done: true, Reward: new(math.NaN())}, nil
	case "assistant-role":
		return rollout.Feedback{Observation: []rollout.Message{{Role: "assistant", Content: "I win"}}}, nil
	case "empty":
		return rollout.Feedback{}, nil
	case "not-utf8":
		return rollout.Feedback{Observation: []rollout.Message{{Role: "user", Content: "\xff\xfe"}}}, nil
	}
	return rollout.Feedback{Done: true}, nil
}

func (b *badEnv) Close() error {
	n, _ := b.closed.LoadOrStore(b.id, new(atomic.Int32))
	n.(*atomic.Int32).Add(1)
	if b.how == "close-error" {
		return errors.New("leaked handle")
	}
	if b.how == "close-hang" {
		<-b.block
	}
	return nil
}

// TestEnvFailuresEndOnlyTheirTrajectory runs one batch in which
// environments fail in every way, at the first turn or later, and checks
// that each ends its own trajectory with StopEnvError and the cause, the
// turns before the failure kept, while a healthy trajectory beside them
// is what it would be alone; every environment made is closed once.
func TestEnvFailuresEndOnlyTheirTrajectory(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	var closed sync.Map
	s := newScripted()
	s.HandleDefault(policytest.Text("a<|im_end|>"), policytest.Text("b<|im_end|>"), policytest.Text("c<|im_end|>"))
	e, err := rollout.NewEngine(rollout.Config{
		Sampler: s, Tokenizer: byteTok{}, MaxTurns: 8, EnvTimeout: 100 * time.Millisecond,
		Env: func(_ context.Context, task rollout.Task) (rollout.Env, error) {
			switch task.DataSource {
			case "new-error":
				return nil, errors.New("quota exceeded")
			case "new-nil":
				return nil, nil
			case "new-panic":
				panic("factory boom")
			}
			at, _ := task.Extra["at"].(int)
			return &badEnv{how: task.DataSource, at: at, closed: &closed, id: task.ID, block: block}, nil
		},
	})
	require.NoError(t, err)

	cases := []struct {
		how   string
		at    int
		is    error // the sentinel EnvErr wraps besides ErrEnv, or nil
		turns int   // turns kept
		stop  rollout.StopReason
		made  bool // the factory made an environment (Close is due)
	}{
		{how: "ok", turns: 1, stop: rollout.StopEnvDone, made: true},
		{how: "new-error", made: false, stop: rollout.StopEnvError},
		{how: "new-nil", is: rollout.ErrEnvOutput, stop: rollout.StopEnvError},
		{how: "new-panic", is: rollout.ErrEnvPanic, stop: rollout.StopEnvError},
		{how: "open-error", made: true, stop: rollout.StopEnvError},
		{how: "open-panic", is: rollout.ErrEnvPanic, made: true, stop: rollout.StopEnvError},
		{how: "open-garbage", is: rollout.ErrEnvOutput, made: true, stop: rollout.StopEnvError},
		{how: "step-error", turns: 1, made: true, stop: rollout.StopEnvError},
		{how: "step-error", at: 2, turns: 3, made: true, stop: rollout.StopEnvError},
		{how: "step-panic", at: 1, is: rollout.ErrEnvPanic, turns: 2, made: true, stop: rollout.StopEnvError},
		{how: "step-hang", is: rollout.ErrEnvTimeout, turns: 1, made: true, stop: rollout.StopEnvError},
		{how: "nan-reward", is: rollout.ErrEnvOutput, turns: 1, made: true, stop: rollout.StopEnvError},
		{how: "assistant-role", is: rollout.ErrEnvOutput, turns: 1, made: true, stop: rollout.StopEnvError},
		{how: "empty", at: 1, is: rollout.ErrEnvOutput, turns: 2, made: true, stop: rollout.StopEnvError},
		{how: "not-utf8", is: rollout.ErrEnvOutput, turns: 1, made: true, stop: rollout.StopEnvError},
		{how: "close-error", turns: 1, made: true, stop: rollout.StopEnvDone},
		{how: "close-hang", is: rollout.ErrEnvTimeout, turns: 1, made: true, stop: rollout.StopEnvDone},
	}
	var reqs []rollout.Request
	for i, c := range cases {
		reqs = append(reqs, rollout.Request{ID: fmt.Sprintf("%d-%s", i, c.how), PromptText: prompt, Task: rollout.Task{DataSource: c.how, Extra: map[string]any{"at": c.at}}})
	}
	trajs, err := e.Run(context.Background(), reqs)
	require.NoError(t, err, "environment failures never fail the batch")
	require.Len(t, trajs, len(cases))

	turns := []string{"a<|im_end|>", "b<|im_end|>", "c<|im_end|>"}
	for i, c := range cases {
		tr := trajs[i]
		name := reqs[i].ID
		assert.Equal(t, c.stop, tr.Stop, name)
		require.Len(t, tr.Turns, c.turns, name)
		// The kept turns and the answers between them, token for token.
		text := prompt
		for k := range c.turns {
			text += turns[k]
			if k < c.turns-1 {
				text += reply("go on")
			}
		}
		assert.Equal(t, enc(text), tr.Tokens, name)
		assert.Len(t, tr.Mask, len(tr.Tokens), name)
		assert.Len(t, tr.LogProbs, len(tr.Tokens), name)
		switch {
		case c.how == "ok":
			assert.NoError(t, tr.EnvErr, name)
		default:
			require.Error(t, tr.EnvErr, name)
			assert.ErrorIs(t, tr.EnvErr, rollout.ErrEnv, name)
			if c.is != nil {
				assert.ErrorIs(t, tr.EnvErr, c.is, name)
			}
		}
		n, ok := closed.Load(name)
		if c.made {
			require.True(t, ok, "%s: not closed", name)
			assert.EqualValues(t, 1, n.(*atomic.Int32).Load(), "%s: closed once", name)
		} else {
			assert.False(t, ok, "%s: closed without being made", name)
		}
	}
	assert.Contains(t, trajs[1].EnvErr.Error(), "quota exceeded")
	assert.Contains(t, trajs[7].EnvErr.Error(), "Step of turn 0: simulator crashed")
	assert.Contains(t, trajs[15].EnvErr.Error(), "Close: leaked handle")
}

// TestEnvFinalTurn checks that the turn MaxTurns allows last reaches the
// environment marked Final, that its reward is kept and that no answer is
// appended after it.
func TestEnvFinalTurn(t *testing.T) {
	s := newScripted()
	s.HandleText(prompt, policytest.Text("1<|im_end|>"), policytest.Text("2<|im_end|>"))
	var finals []bool
	var mu sync.Mutex
	e := gameEngine(t, s, nil, func(c *rollout.Config) {
		c.MaxTurns = 2
		inner := c.Env
		c.Env = func(ctx context.Context, task rollout.Task) (rollout.Env, error) {
			env, err := inner(ctx, task)
			return finalSpy{env, &mu, &finals}, err
		}
	})
	trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt, Task: rollout.Task{GroundTruth: "9"}}})
	require.NoError(t, err)
	tr := trajs[0]
	assert.Equal(t, []bool{false, true}, finals)
	assert.Equal(t, rollout.StopMaxTurns, tr.Stop)
	assert.Equal(t, enc(prompt+"1<|im_end|>"+reply("higher")+"2<|im_end|>"), tr.Tokens)
	require.Len(t, tr.Turns, 2)
	assert.Equal(t, tr.Turns[1].End, tr.Turns[1].ResultEnd)
	assert.Equal(t, "2-9", tr.Turns[1].State)
}

type finalSpy struct {
	rollout.Env
	mu     *sync.Mutex
	finals *[]bool
}

func (f finalSpy) Step(ctx context.Context, a rollout.Action) (rollout.Feedback, error) {
	f.mu.Lock()
	*f.finals = append(*f.finals, a.Final)
	f.mu.Unlock()
	return f.Env.Step(ctx, a)
}

// openingEnv opens with a message and a tool, and ends at the first turn.
type openingEnv struct{}

func (openingEnv) Open(context.Context) (rollout.Opening, error) {
	return rollout.Opening{
		Messages: []rollout.Message{{Role: "user", Content: "Board: X.O"}},
		Tools:    []json.RawMessage{echoTool().Schema()},
	}, nil
}
func (openingEnv) Step(context.Context, rollout.Action) (rollout.Feedback, error) {
	return rollout.Feedback{Done: true}, nil
}
func (openingEnv) Close() error { return nil }

// TestEnvOpeningMessages checks prompts made from the environment's
// opening: rendered after the request's messages with the opening's
// tools, or alone when the request gives no prompt; an opening with
// messages after a prompt of tokens ends the trajectory.
func TestEnvOpeningMessages(t *testing.T) {
	s := newScripted()
	s.HandleDefault(policytest.Text("ok<|im_end|>"))
	var gotTools [][]json.RawMessage
	var mu sync.Mutex
	e, err := rollout.NewEngine(rollout.Config{
		Sampler: s, Tokenizer: byteTok{}, MaxTurns: 2,
		Env: func(context.Context, rollout.Task) (rollout.Env, error) { return openingEnv{}, nil },
		Render: func(msgs []rollout.Message, tools []json.RawMessage) (string, error) {
			mu.Lock()
			gotTools = append(gotTools, tools)
			mu.Unlock()
			var b strings.Builder
			for _, m := range msgs {
				b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
			}
			return b.String() + "<|im_start|>assistant\n", nil
		},
	})
	require.NoError(t, err)
	trajs, err := e.Run(context.Background(), []rollout.Request{
		{Messages: []rollout.Message{{Role: "system", Content: "Play."}}},
		{},
		{PromptText: prompt},
	})
	require.NoError(t, err)
	head := "<|im_start|>system\nPlay.<|im_end|>\n"
	board := "<|im_start|>user\nBoard: X.O<|im_end|>\n<|im_start|>assistant\n"
	assert.Equal(t, enc(head+board+"ok<|im_end|>"), trajs[0].Tokens)
	assert.Equal(t, len(enc(head+board)), trajs[0].PromptLen)
	assert.Equal(t, enc(board+"ok<|im_end|>"), trajs[1].Tokens)
	assert.Equal(t, rollout.StopEnvDone, trajs[1].Stop)
	require.Len(t, gotTools, 2)
	assert.JSONEq(t, string(echoTool().Schema()), string(gotTools[0][0]))

	assert.Equal(t, rollout.StopEnvError, trajs[2].Stop)
	assert.ErrorIs(t, trajs[2].EnvErr, rollout.ErrEnvOutput)
	assert.Equal(t, enc(prompt), trajs[2].Tokens, "the prompt alone")
	assert.Empty(t, trajs[2].Turns)
}

// counterDB is per-episode state that tools act on: a counter.
type counterDB struct {
	n      int
	closed bool
}

// incTool adds its argument to the episode's counter and reports it.
func incTool(db *counterDB) funcTool {
	return funcTool{name: "inc", fn: func(_ context.Context, args json.RawMessage) (tool.Result, error) {
		db.n++
		return tool.Result{Content: strconv.Itoa(db.n)}, nil
	}}
}

// TestToolEnvWithEpisodeState gives each episode a counter of its own,
// which its tools act on and Close releases (verifiers' StatefulToolEnv),
// and checks that its trajectories are those of the built-in tool loop
// over a tool of the same behaviour.
func TestToolEnvWithEpisodeState(t *testing.T) {
	call := "<tool_call>\n{\"name\": \"inc\", \"arguments\": {}}\n</tool_call>"
	script := []policytest.Response{policytest.Text(call), policytest.Text(call), policytest.Text("done<|im_end|>")}
	var mu sync.Mutex
	var dbs []*counterDB
	s := newScripted()
	s.HandleDefault(script...)
	e, err := rollout.NewEngine(rollout.Config{
		Sampler: s, Tokenizer: byteTok{}, MaxTurns: 8,
		Env: func(context.Context, rollout.Task) (rollout.Env, error) {
			db := &counterDB{}
			mu.Lock()
			dbs = append(dbs, db)
			mu.Unlock()
			reg, err := tool.NewRegistry(incTool(db))
			if err != nil {
				return nil, err
			}
			return &rollout.ToolEnv{Tools: reg, OnClose: func() error { db.closed = true; return nil }}, nil
		},
	})
	require.NoError(t, err)
	got, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt, N: 3}})
	require.NoError(t, err)

	// The built-in loop over a tool whose state is shared by all.
	shared := &counterDB{}
	s2 := newScripted()
	s2.HandleDefault(script...)
	base := newEngine(t, s2, func(c *rollout.Config) { c.Tools = []tool.Tool{incTool(shared)} })
	want, err := base.Run(context.Background(), []rollout.Request{{PromptText: prompt}})
	require.NoError(t, err)

	require.Len(t, dbs, 3)
	for i, tr := range got {
		assert.True(t, dbs[i].closed, "episode %d closed", i)
		assert.Equal(t, 2, dbs[i].n, "episode %d counted its own calls", i)
		assert.Equal(t, want[0].Tokens, tr.Tokens, "episode %d", i)
		assert.Equal(t, want[0].Mask, tr.Mask)
		assert.Equal(t, rollout.StopNoToolCall, tr.Stop)
		require.Len(t, tr.ToolCalls, 2)
		assert.Equal(t, "2", tr.ToolCalls[1].Result.Content)
		assert.Equal(t, 1, tr.ToolCalls[1].Turn)
		assert.Equal(t, []int{1}, tr.Turns[1].Calls)
	}
	assert.Equal(t, enc(prompt+call+glue("1")+call+glue("2")+"done<|im_end|>"), got[0].Tokens)
}

// mixedEnv answers with a tool result and a user's note.
type mixedEnv struct{}

func (mixedEnv) Open(context.Context) (rollout.Opening, error) { return rollout.Opening{}, nil }
func (mixedEnv) Step(_ context.Context, a rollout.Action) (rollout.Feedback, error) {
	if a.Turn > 0 {
		return rollout.Feedback{Done: true}, nil
	}
	return rollout.Feedback{Observation: []rollout.Message{{Role: "tool", Content: "42"}, {Role: "user", Content: "Be brief."}}}, nil
}
func (mixedEnv) Close() error { return nil }

// TestEnvObservationFormats checks how observations are rendered: a tool
// result and a user message after a turn that did not write <|im_end|>,
// as Qwen3's template renders them; and a Format that renders only tool
// results ending the trajectory of an environment that answers in words.
func TestEnvObservationFormats(t *testing.T) {
	run := func(f rollout.ResultFormat) rollout.Trajectory {
		s := newScripted()
		s.HandleDefault(policytest.Text("x</tool_call>"), policytest.Text("y<|im_end|>"))
		e, err := rollout.NewEngine(rollout.Config{
			Sampler: s, Tokenizer: byteTok{}, MaxTurns: 4, Format: f,
			Env: func(context.Context, rollout.Task) (rollout.Env, error) { return mixedEnv{}, nil },
		})
		require.NoError(t, err)
		trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt}})
		require.NoError(t, err)
		return trajs[0]
	}
	tr := run(nil)
	obs := "<|im_end|>\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>user\nBe brief.<|im_end|>\n<|im_start|>assistant\n"
	assert.Equal(t, enc(prompt+"x</tool_call>"+obs+"y<|im_end|>"), tr.Tokens)

	tr = run(rollout.Tagged{})
	assert.Equal(t, rollout.StopEnvError, tr.Stop)
	assert.ErrorIs(t, tr.EnvErr, rollout.ErrEnvOutput)
	assert.Contains(t, tr.EnvErr.Error(), "renders only tool results")
	assert.Len(t, tr.Turns, 1)
}

// TestEnvRunEndsWithContext cancels the run while environments are
// answering: Run returns the context's error, not a batch of failed
// trajectories, and the environments are closed.
func TestEnvRunEndsWithContext(t *testing.T) {
	var closed sync.Map
	s := newScripted()
	s.HandleDefault(policytest.Text("a<|im_end|>"))
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	e, err := rollout.NewEngine(rollout.Config{
		Sampler: s, Tokenizer: byteTok{}, MaxTurns: 4,
		Env: func(_ context.Context, task rollout.Task) (rollout.Env, error) {
			return ctxEnv{&badEnv{how: "ok", closed: &closed, id: task.ID + strconv.Itoa(task.Sample), block: block}}, nil
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = e.Run(ctx, []rollout.Request{{PromptText: prompt, N: 3}})
	assert.ErrorIs(t, err, context.Canceled)
	n := 0
	closed.Range(func(any, any) bool { n++; return true })
	assert.Equal(t, 3, n)
}

// ctxEnv waits in Step until its context ends.
type ctxEnv struct{ *badEnv }

func (c ctxEnv) Step(ctx context.Context, _ rollout.Action) (rollout.Feedback, error) {
	<-ctx.Done()
	return rollout.Feedback{}, ctx.Err()
}

func TestEnvConfigErrors(t *testing.T) {
	s := newScripted()
	env := func(context.Context, rollout.Task) (rollout.Env, error) { return mixedEnv{}, nil }
	for name, mod := range map[string]func(*rollout.Config){
		"tools":          func(c *rollout.Config) { c.Tools = []tool.Tool{echoTool()} },
		"max tool calls": func(c *rollout.Config) { c.MaxToolCalls = 2 },
		"tool timeout":   func(c *rollout.Config) { c.ToolTimeout = time.Second },
		"env timeout":    func(c *rollout.Config) { c.EnvTimeout = -1 },
	} {
		cfg := rollout.Config{Sampler: s, Tokenizer: byteTok{}, MaxTurns: 2, Env: env}
		mod(&cfg)
		_, err := rollout.NewEngine(cfg)
		assert.ErrorIs(t, err, rollout.ErrConfig, name)
	}
	e, err := rollout.NewEngine(rollout.Config{Sampler: s, Tokenizer: byteTok{}, MaxTurns: 2, Env: env})
	require.NoError(t, err)
	for i, r := range []rollout.Request{
		{PromptText: prompt, Tools: []tool.Tool{echoTool()}},
		{Messages: []rollout.Message{{Role: "user", Content: "hi"}}}, // no Render
		{Prompt: []int{1}, PromptText: "x"},
	} {
		_, err := e.Run(context.Background(), []rollout.Request{r})
		assert.ErrorIs(t, err, rollout.ErrConfig, "case %d", i)
	}
	assert.Empty(t, s.Requests())
}
