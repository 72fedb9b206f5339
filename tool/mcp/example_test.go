package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool/mcp"
)

// A server's tools as tool.Tools: here a server written with the Go SDK
// and served over streamable HTTP in this process; any MCP server's URL,
// or a Command starting a stdio server, does the same.
func Example() {
	srv := sdk.NewServer(&sdk.Implementation{Name: "greeter", Version: "1"}, nil)
	type args struct {
		Name string `json:"name" jsonschema:"who to greet"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, req *sdk.CallToolRequest, a args) (*sdk.CallToolResult, any, error) {
			if a.Name == "" {
				return nil, nil, fmt.Errorf("greet whom?")
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Hello, " + a.Name + "!"}}}, nil, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	defer ts.Close()

	ctx := context.Background()
	c, err := mcp.Connect(ctx, mcp.Config{URL: ts.URL})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	greet := c.Tools()[0]
	fmt.Println(string(greet.Schema()))
	res, err := greet.Call(ctx, json.RawMessage(`{"name": "Ada"}`))
	fmt.Println(res.Content, res.Failed, err)
	// A tool error is a result the model reads.
	res, err = greet.Call(ctx, json.RawMessage(`{"name": ""}`))
	fmt.Println(res.Content, res.Failed, res.Metadata["error"], err)
	// Output:
	// {"type": "function", "function": {"name": "greet", "description": "Greets someone.", "parameters": {"type":"object","properties":{"name":{"type":"string","description":"who to greet"}},"required":["name"],"additionalProperties":false}}}
	// Hello, Ada! false <nil>
	// greet whom? true tool_error <nil>
}

// A training run's tools from server-filesystem, each trajectory with a
// server and a directory of its own.
func ExampleConfig_perTrajectory() {
	var (
		sampler lm.Sampler        // the policy: a policy.Model, or a vLLM server through policy/openai
		tok     rollout.Tokenizer // its tokenizer (policy/tokenizer)
	)
	ctx := context.Background()
	fs, err := mcp.Connect(ctx, mcp.Config{
		Command:       []string{"npx", "-y", "@modelcontextprotocol/server-filesystem@2026.8.31", mcp.WorkspaceArg},
		PerTrajectory: true,
		Workspace:     true,
		Tools:         []string{"read_text_file", "write_file", "list_directory"},
	})
	if err != nil {
		panic(err)
	}
	defer fs.Close()
	eng, err := rollout.NewEngine(rollout.Config{
		Sampler: sampler, Tokenizer: tok, Tools: fs.Tools(), MaxTurns: 8,
	})
	if err != nil {
		panic(err)
	}
	_ = eng // eng.Run(ctx, requests): a session per trajectory; fs.Stats() for metrics
}
