package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// counters is a tool.SessionOpener whose sessions count their calls: the
// tool "count" answers "session S call C".
type counters struct {
	mu      sync.Mutex
	opened  int
	closed  []int
	openErr error
}

func (o *counters) OpenSession(context.Context) (tool.Session, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.openErr != nil {
		return nil, o.openErr
	}
	o.opened++
	return &counterSession{o: o, id: o.opened}, nil
}

func (o *counters) closedIDs() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.closed...)
}

type counterSession struct {
	o     *counters
	id    int
	mu    sync.Mutex
	calls int
}

func (s *counterSession) Tool(name string) (tool.Tool, bool) {
	return funcTool{name: name, fn: func(context.Context, json.RawMessage) (tool.Result, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls++
		return tool.Result{Content: fmt.Sprintf("session %d call %d", s.id, s.calls)}, nil
	}}, name == "count"
}

func (s *counterSession) Close() error {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	s.o.closed = append(s.o.closed, s.id)
	return nil
}

// countTool is the Stateful tool the engine is given.
type countTool struct {
	funcTool
	o *counters
}

func (t countTool) SessionOpener() tool.SessionOpener { return t.o }

func newCountTool(o *counters) countTool {
	return countTool{funcTool{name: "count", fn: func(context.Context, json.RawMessage) (tool.Result, error) {
		return tool.Result{Content: "shared"}, nil
	}}, o}
}

const countCall = "<tool_call>\n{\"name\": \"count\", \"arguments\": {}}\n</tool_call>"

// TestStatefulToolsGetASessionPerTrajectory: each of the N trajectories
// calls the stateful tool twice and sees only its own calls; every
// session is closed by the time Run returns.
func TestStatefulToolsGetASessionPerTrajectory(t *testing.T) {
	o := &counters{}
	s := newScripted()
	s.HandleText(prompt, policytest.Text(countCall), policytest.Text(countCall), policytest.Text("done<|im_end|>"))
	e := newEngine(t, s, func(c *rollout.Config) { c.Tools = []tool.Tool{newCountTool(o), echoTool()} })

	trajs, err := e.Run(context.Background(), []rollout.Request{{ID: "q", PromptText: prompt, N: 3}})
	require.NoError(t, err)
	require.Len(t, trajs, 3)
	seen := map[string]bool{}
	for _, tr := range trajs {
		require.Len(t, tr.ToolCalls, 2)
		var id int
		_, err := fmt.Sscanf(tr.ToolCalls[0].Result.Content, "session %d call 1", &id)
		require.NoError(t, err, tr.ToolCalls[0].Result.Content)
		assert.Equal(t, fmt.Sprintf("session %d call 2", id), tr.ToolCalls[1].Result.Content)
		assert.False(t, seen[tr.ToolCalls[0].Result.Content], "two trajectories shared a session")
		seen[tr.ToolCalls[0].Result.Content] = true
		// The result reached the model's context as the session gave it.
		assert.Contains(t, tr.Response, glue(tr.ToolCalls[1].Result.Content))
	}
	assert.Equal(t, 3, o.opened)
	assert.ElementsMatch(t, []int{1, 2, 3}, o.closedIDs())
}

// TestStatefulSessionClosedWhenTrajectoryFails: a sampler error fails
// Run, and the trajectory's session is closed all the same.
func TestStatefulSessionClosedWhenTrajectoryFails(t *testing.T) {
	o := &counters{}
	s := newScripted()
	s.HandleText(prompt, policytest.Text(countCall), policytest.Error(errBroken))
	e := newEngine(t, s, func(c *rollout.Config) { c.Tools = []tool.Tool{newCountTool(o)} })
	_, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt}})
	require.ErrorIs(t, err, errBroken)
	assert.Equal(t, []int{1}, o.closedIDs())
}

// TestStatefulSessionOpenFailure: a session that cannot be opened fails
// the calls to its tools, which the model reads; the trajectory goes on.
func TestStatefulSessionOpenFailure(t *testing.T) {
	o := &counters{openErr: errors.New("server would not start")}
	s := newScripted()
	s.HandleText(prompt, policytest.Text(countCall), policytest.Text("done<|im_end|>"))
	e := newEngine(t, s, func(c *rollout.Config) { c.Tools = []tool.Tool{newCountTool(o)} })
	trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt}})
	require.NoError(t, err)
	tr := trajs[0]
	require.Len(t, tr.ToolCalls, 1)
	c := tr.ToolCalls[0]
	assert.ErrorIs(t, c.Err, rollout.ErrToolFailed)
	assert.ErrorIs(t, c.Err, tool.ErrNoSession)
	assert.True(t, c.Result.Failed)
	want := `Error: tool "count" failed: tool: no session for count: server would not start`
	assert.Equal(t, want, c.Result.Content)
	assert.Contains(t, tr.Response, glue(want))
	assert.Equal(t, rollout.StopNoToolCall, tr.Stop)
}
