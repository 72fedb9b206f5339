package rollout_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
	"github.com/agentrl/agentrl/tool/tooltest"
)

// TestArgumentsCheckedAgainstSchema: the engine dispatches through a
// tool.Registry, so a call whose arguments do not fit the tool's schema
// gets the registry's error result and never reaches the tool, while
// fitting arguments (an object, or OpenAI's JSON string holding one) do.
func TestArgumentsCheckedAgainstSchema(t *testing.T) {
	call := func(args string) string {
		return "<tool_call>\n{\"name\": \"lookup\", \"arguments\": " + args + "}\n</tool_call>"
	}
	cases := []struct {
		name    string
		args    string
		ran     bool
		content string // what the model reads next turn
	}{
		// The texts are the registry's: "Error: invalid arguments for " +
		// tool name + ": " + the path in the arguments and what is wrong
		// (tool.Registry.Call, see tool/registry_test.go).
		{"missing required", `{}`, false,
			`Error: invalid arguments for lookup: arguments: missing required field "key"`},
		{"wrong type", `{"key": 7}`, false,
			"Error: invalid arguments for lookup: arguments.key: want string, got number"},
		{"not in enum", `{"key": "a", "mode": "loud"}`, false,
			`Error: invalid arguments for lookup: arguments.mode: "loud" is not one of ["fast","exact"]`},
		// Hermes hands the arguments over compacted (as in
		// TestCallsPerTurnLimit), and the tool echoes them.
		{"fits", `{"key": "a", "mode": "fast"}`, true, `found:{"key":"a","mode":"fast"}`},
		// A JSON string holding the object is unwrapped before the tool
		// sees it.
		{"fits as a string", `"{\"key\": \"b\"}"`, true, `found:{"key":"b"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			lookup := tooltest.Func("lookup", func(_ context.Context, args json.RawMessage) (tool.Result, error) {
				calls.Add(1)
				return tool.Result{Content: "found:" + string(args)}, nil
			},
				tool.Param{Name: "key", Type: "string", Required: true},
				tool.Param{Name: "mode", Type: "string", Enum: []string{"fast", "exact"}})
			s := newScripted()
			s.HandleDefault(policytest.Text(call(tc.args)), policytest.Text("ok<|im_end|>"))
			e := newEngine(t, s, func(c *rollout.Config) { c.Tools = []tool.Tool{lookup} })
			trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt}})
			require.NoError(t, err)
			tr := trajs[0]
			require.Len(t, tr.ToolCalls, 1)
			c := tr.ToolCalls[0]
			assert.Equal(t, tc.content, c.Result.Content)
			assert.Equal(t, !tc.ran, c.Result.Failed)
			if tc.ran {
				assert.Equal(t, int32(1), calls.Load())
				assert.NoError(t, c.Err)
			} else {
				assert.Zero(t, calls.Load(), "the tool must not run")
				assert.ErrorIs(t, c.Err, tool.ErrBadArguments)
			}
			reqs := s.Requests()
			require.Len(t, reqs, 2)
			assert.Equal(t, enc(prompt+call(tc.args)+glue(tc.content)), reqs[1].Prompt)
		})
	}
}

// TestToolSetMustFormARegistry: tools with a duplicate name, a nil tool
// or a schema that does not name the tool are configuration errors, for
// the engine's tools and a request's alike.
func TestToolSetMustFormARegistry(t *testing.T) {
	renamed := tooltest.Echo("echo").WithSchema(tool.FunctionSchema("other", "names another function"))
	cases := []struct {
		name  string
		tools []tool.Tool
		msg   string
	}{
		{"duplicate name", []tool.Tool{echoTool(), tooltest.Echo("echo")}, `tool 1: tool: Register: a tool named "echo" is already registered`},
		{"nil", []tool.Tool{echoTool(), nil}, "tool 1 is nil"},
		{"schema names another function", []tool.Tool{renamed}, `tool 0: tool: Register "echo": schema names the function "other"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted()
			_, err := rollout.NewEngine(rollout.Config{Sampler: s, Tokenizer: byteTok{}, MaxTurns: 1, Tools: tc.tools})
			require.ErrorIs(t, err, rollout.ErrConfig)
			assert.Contains(t, err.Error(), tc.msg)

			e := newEngine(t, s, nil)
			_, err = e.Run(context.Background(), []rollout.Request{{PromptText: "x", Tools: tc.tools}})
			require.ErrorIs(t, err, rollout.ErrConfig)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Empty(t, s.Requests())
		})
	}
}

// TestRequestToolsReplaceEngineTools: a request's own tools are the only
// ones its calls reach, and an empty non-nil list means none.
func TestRequestToolsReplaceEngineTools(t *testing.T) {
	s := newScripted()
	s.HandleDefault(policytest.Text("<tool_call>\n{\"name\": \"echo\", \"arguments\": {}}\n</tool_call>"), policytest.Text("ok<|im_end|>"))
	e := newEngine(t, s, nil)
	trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: prompt, Tools: []tool.Tool{}}})
	require.NoError(t, err)
	c := trajs[0].ToolCalls[0]
	assert.ErrorIs(t, c.Err, rollout.ErrUnknownTool)
	// No tools: the registry lists none after "available tools: ".
	assert.Equal(t, `Error: unknown tool "echo"; available tools: `, c.Result.Content)
}
