package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests talk to MCP servers built with the Go SDK: in this process
// over streamable HTTP (httptest), and over stdio as a child process —
// this test binary started again with serverEnv set, so that a server can
// really exit in the middle of a call, or be frozen (SIGSTOP).
const serverEnv = "AGENTRL_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	switch os.Getenv(serverEnv) {
	case "":
		os.Exit(m.Run())
	case "stdio":
		err := newTestServer(true).Run(context.Background(), &sdk.StdioTransport{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "fail-start":
		fmt.Fprintln(os.Stderr, "fatal: unknown flag --nope")
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "unknown", serverEnv)
		os.Exit(2)
	}
}

// echoSchema is written with its keys out of alphabetical order, to show
// that the order reaches the tool's Schema.
const echoSchema = `{"type": "object", "properties": {"zeta": {"type": "string", "description": "Said back."}, ` +
	`"alpha": {"type": "integer"}}, "required": ["zeta"], "additionalProperties": false}`

// newTestServer returns a server with a tool for each kind of answer;
// stdio adds one that ends the process.
func newTestServer(stdio bool) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "agentrl-test", Version: "1"}, &sdk.ServerOptions{
		PageSize: 3, // tools/list takes several pages
	})
	var mu sync.Mutex
	counts := map[string]int{} // per MCP session
	add := func(name, desc, schema string, h func(args map[string]any, req *sdk.CallToolRequest) (*sdk.CallToolResult, error)) {
		s.AddTool(&sdk.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(schema)},
			func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				var args map[string]any
				if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
					return nil, err
				}
				return h(args, req)
			})
	}
	text := func(s ...string) *sdk.CallToolResult {
		r := &sdk.CallToolResult{}
		for _, t := range s {
			r.Content = append(r.Content, &sdk.TextContent{Text: t})
		}
		return r
	}
	none := `{"type": "object", "properties": {}}`
	add("echo", "Says zeta back.", echoSchema, func(a map[string]any, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return text(fmt.Sprintf("echo: %v", a["zeta"])), nil
	})
	add("weather", "Weather, as text and structured.", none, func(map[string]any, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		r := text(`{"temperature": 36, "conditions": "drizzle"}`)
		r.StructuredContent = map[string]any{"temperature": 36, "conditions": "drizzle"}
		return r, nil
	})
	add("structured", "Structured content only.", none, func(map[string]any, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]any{"b": 1, "a": []any{true, nil}, "c": "<&>"}}, nil
	})
	add("refuse", "Fails as a tool does.", none, func(map[string]any, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		r := text("no such city: Atlantis")
		r.IsError = true
		return r, nil
	})
	add("reject", "Answers with a JSON-RPC error.", none, func(map[string]any, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad input"}
	})
	add("mixed", "Every kind of content.", none, func(map[string]any, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		size := int64(9)
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "Here:"},
			&sdk.ImageContent{Data: []byte{1, 2, 3}, MIMEType: "image/png"},
			&sdk.AudioContent{Data: []byte{1, 2, 3, 4}, MIMEType: "audio/wav"},
			&sdk.ResourceLink{URI: "file:///a.txt", Name: "a.txt", MIMEType: "text/plain", Description: "The first file.", Size: &size},
			&sdk.ResourceLink{URI: "file:///b"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///c.txt", MIMEType: "text/plain", Text: "line 1\nline 2"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///d.bin", MIMEType: "application/octet-stream", Blob: []byte{0, 1}}},
		}}, nil
	})
	add("empty", "Answers nothing.", none, func(map[string]any, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{}}, nil
	})
	add("big", "Answers n x's.", `{"type": "object", "properties": {"n": {"type": "integer"}}}`,
		func(a map[string]any, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			n, _ := a["n"].(float64)
			return text(strings.Repeat("x", int(n))), nil
		})
	s.AddTool(&sdk.Tool{Name: "sleep", Description: "Sleeps ms milliseconds.", InputSchema: json.RawMessage(`{"type": "object", "properties": {"ms": {"type": "integer"}}}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var a struct{ MS int }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			select {
			case <-time.After(time.Duration(a.MS) * time.Millisecond):
				return text("slept"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	add("count", "Counts its calls in this session.", none, func(_ map[string]any, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		id := req.Session.ID()
		counts[id]++
		return text(fmt.Sprintf("count %d pid %d", counts[id], os.Getpid())), nil
	})
	add("where", "Says the working directory.", none, func(map[string]any, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		return text(wd), nil
	})
	if stdio {
		add("die", "Exits in the middle of the call.", none, func(map[string]any, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "dying on purpose")
			os.Exit(3)
			return nil, nil
		})
	}
	return s
}

// stdioConfig runs this test binary as a stdio server.
func stdioConfig() Config {
	return Config{Command: []string{testBinary()}, Env: []string{serverEnv + "=stdio"}}
}

// testBinary is this test binary's absolute path, which a server started
// in another directory (a workspace) can still be run from.
func testBinary() string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return exe
}

// httpServer serves newTestServer over streamable HTTP, answering in
// JSON or in server-sent events.
func httpServer(t *testing.T, jsonResponse bool) *httptest.Server {
	t.Helper()
	srv := newTestServer(false)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: jsonResponse})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}
