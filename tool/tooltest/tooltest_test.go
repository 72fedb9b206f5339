package tooltest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/tool"
	"github.com/agentrl/agentrl/tool/tooltest"
)

func TestScriptedAnswersInOrder(t *testing.T) {
	s := tooltest.New("search", []tooltest.Response{
		tooltest.Text("first"),
		tooltest.Failure("second failed"),
		{Result: tool.Result{Content: "third"}, Err: errors.New("backend down")},
	}, tool.Param{Name: "q", Type: "string", Required: true})
	ctx := context.Background()

	r, err := s.Call(ctx, json.RawMessage(`{"q": "a"}`))
	require.NoError(t, err)
	assert.Equal(t, "first", r.Content)
	assert.False(t, r.Failed)
	assert.Greater(t, r.Duration, time.Duration(0))

	r, err = s.Call(ctx, json.RawMessage(`{"q": "b"}`))
	require.NoError(t, err)
	assert.Equal(t, tool.Result{Content: "second failed", Failed: true, Duration: r.Duration}, r)

	r, err = s.Call(ctx, json.RawMessage(`{"q": "c"}`))
	require.EqualError(t, err, "backend down")
	assert.Equal(t, "third", r.Content)
	assert.Equal(t, 0, s.Remaining())

	_, err = s.Call(ctx, json.RawMessage(`{"q": "d"}`))
	require.ErrorIs(t, err, tooltest.ErrExhausted)
	require.ErrorContains(t, err, `tool "search", call 4`)

	calls := s.Calls()
	require.Len(t, calls, 4)
	for i, q := range []string{"a", "b", "c", "d"} {
		assert.JSONEq(t, `{"q": "`+q+`"}`, string(calls[i].Args))
	}
}

func TestScriptedInRegistry(t *testing.T) {
	s := tooltest.New("search", []tooltest.Response{tooltest.Text("ok")}, tool.Param{Name: "q", Type: "string", Required: true})
	r, err := tool.NewRegistry(s)
	require.NoError(t, err)
	// The registry checks arguments against the scripted schema first.
	res, err := r.Call(context.Background(), "search", json.RawMessage(`{}`))
	require.NoError(t, err)
	assert.True(t, res.Failed)
	assert.Empty(t, s.Calls(), "invalid calls never reach the tool")
	res, err = r.Call(context.Background(), "search", json.RawMessage(`{"q": "x"}`))
	require.NoError(t, err)
	assert.Equal(t, "ok", res.Content)
}

func TestScriptedDelayHonoursContext(t *testing.T) {
	s := tooltest.New("slow", []tooltest.Response{{Result: tool.Result{Content: "late"}, Delay: time.Hour}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res, err := s.Call(ctx, json.RawMessage(`{}`))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, res.Failed)
}

func TestFuncAndEcho(t *testing.T) {
	f := tooltest.Func("double", func(ctx context.Context, args json.RawMessage) (tool.Result, error) {
		var a struct{ N int }
		if err := json.Unmarshal(args, &a); err != nil {
			return tool.Result{Content: err.Error(), Failed: true}, nil
		}
		return tool.Result{Content: fmt.Sprint(2 * a.N)}, nil
	}, tool.Param{Name: "n", Type: "integer", Required: true})
	assert.Equal(t, "42", tooltest.CallJSON(t, f, map[string]int{"n": 21}).Content)
	assert.Len(t, f.Calls(), 1)

	e := tooltest.Echo("echo")
	assert.Equal(t, `{"a":[1,2]}`, tooltest.CallJSON(t, e, map[string]any{"a": []int{1, 2}}).Content)
	e.WithSchema(tool.FunctionSchema("echo", "Echoes."))
	assert.Contains(t, string(e.Schema()), `"Echoes."`)
}

func TestCheckTool(t *testing.T) {
	tooltest.CheckTool(t, &tool.Calculator{})
}

func ExampleScripted() {
	search := tooltest.New("search", []tooltest.Response{tooltest.Text("Paris")},
		tool.Param{Name: "query", Type: "string", Required: true})
	r, _ := tool.NewRegistry(search)
	res, _ := r.Call(context.Background(), "search", json.RawMessage(`{"query": "capital of France"}`))
	fmt.Println(res.Content, len(search.Calls()))
	// Output: Paris 1
}
