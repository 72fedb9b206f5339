package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
	"github.com/agentrl/agentrl/tool/mcp"
)

// These tests run the official reference servers from npm,
// @modelcontextprotocol/server-everything and server-filesystem (the
// versions .ci/mcp/package.json pins). Set AGENTRL_MCP_NODE_MODULES to the
// node_modules folder they are installed in; .ci/mcp.sh does.

func nodeModules(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AGENTRL_MCP_NODE_MODULES")
	if dir == "" {
		t.Skip("set AGENTRL_MCP_NODE_MODULES to a node_modules folder with @modelcontextprotocol/server-everything and server-filesystem (.ci/mcp.sh)")
	}
	return dir
}

func everything(t *testing.T) string {
	return filepath.Join(nodeModules(t), ".bin", "mcp-server-everything")
}

func filesystem(t *testing.T) string {
	return filepath.Join(nodeModules(t), ".bin", "mcp-server-filesystem")
}

func connectNPM(t *testing.T, cfg mcp.Config) *mcp.Client {
	t.Helper()
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = time.Minute // node starts slowly on a busy machine
	}
	c, err := mcp.Connect(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func byName(t *testing.T, tools []tool.Tool, name string) tool.Tool {
	t.Helper()
	for _, x := range tools {
		if x.Name() == name {
			return x
		}
	}
	t.Fatalf("no tool %q", name)
	return nil
}

func callNPM(t *testing.T, x tool.Tool, args string) (tool.Result, error) {
	t.Helper()
	return x.Call(context.Background(), json.RawMessage(args))
}

// rawToolsList asks a stdio server for tools/list by hand, without the
// SDK, and returns each tool's inputSchema as the server wrote it.
func rawToolsList(t *testing.T, argv ...string) map[string]json.RawMessage {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		in.Close()
		_ = cmd.Wait()
	}()
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	} {
		_, err := io.WriteString(in, line+"\n")
		require.NoError(t, err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				Tools []struct {
					Name        string          `json:"name"`
					InputSchema json.RawMessage `json:"inputSchema"`
				} `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.ID != 2 {
			continue
		}
		schemas := map[string]json.RawMessage{}
		for _, x := range msg.Result.Tools {
			schemas[x.Name] = x.InputSchema
		}
		return schemas
	}
	t.Fatalf("no tools/list answer: %v", sc.Err())
	return nil
}

// parameters returns a function schema's parameters, compacted.
func parameters(t *testing.T, schema json.RawMessage) string {
	t.Helper()
	var s struct {
		Function struct {
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	require.NoError(t, json.Unmarshal(schema, &s))
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, s.Function.Parameters))
	return b.String()
}

// TestNPMSchemas: each tool's parameters are the server's inputSchema as
// it writes it on the wire (read here without the SDK), keys in its order.
func TestNPMSchemas(t *testing.T) {
	for _, argv := range [][]string{{everything(t)}, {filesystem(t), t.TempDir()}} {
		t.Run(filepath.Base(argv[0]), func(t *testing.T) {
			want := rawToolsList(t, argv...)
			c := connectNPM(t, mcp.Config{Command: argv})
			require.Len(t, c.Tools(), len(want))
			for _, x := range c.Tools() {
				raw, ok := want[x.Name()]
				require.True(t, ok, x.Name())
				var b bytes.Buffer
				require.NoError(t, json.Compact(&b, raw))
				assert.Equal(t, b.String(), parameters(t, x.Schema()), x.Name())
			}
		})
	}
}

// tinyImageBytes decodes the PNG that server-everything's get-tiny-image
// returns, from the server's own source.
func tinyImageBytes(t *testing.T) int {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(nodeModules(t), "@modelcontextprotocol", "server-everything", "dist", "tools", "get-tiny-image.js"))
	require.NoError(t, err)
	m := regexp.MustCompile(`MCP_TINY_IMAGE = "([A-Za-z0-9+/=]+)"`).FindSubmatch(src)
	require.NotNil(t, m)
	png, err := base64.StdEncoding.DecodeString(string(m[1]))
	require.NoError(t, err)
	return len(png)
}

// TestNPMEverything: what the model reads of server-everything's answers;
// the expected texts are those its tools' sources write.
func TestNPMEverything(t *testing.T) {
	c := connectNPM(t, mcp.Config{Command: []string{everything(t)}, CallTimeout: 2 * time.Second})
	assert.Equal(t, "mcp-servers/everything", c.Name())
	tools := c.Tools()
	for _, tc := range []struct {
		tool, args string
		want       string // exact, or a prefix when prefix is set
		prefix     bool
		failed     bool
	}{
		{tool: "echo", args: `{"message": "hi <&>"}`, want: "Echo: hi <&>"},
		{tool: "get-sum", args: `{"a": 2, "b": 3.5}`, want: "The sum of 2 and 3.5 is 5.5."},
		{tool: "get-structured-content", args: `{"location": "Chicago"}`,
			want: `{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}`},
		{tool: "get-tiny-image", want: fmt.Sprintf("Here's the image you requested:\n[image: image/png, %d bytes]\nThe image above is the MCP logo.", tinyImageBytes(t))},
		{tool: "get-resource-links", args: `{"count": 2}`, want: "Here are 2 resource links to resources available in this server:\n" +
			"[resource link: demo://resource/dynamic/blob/1 (Blob Resource 1, text/plain)] Resource 1: plaintext resource\n" +
			"[resource link: demo://resource/dynamic/text/2 (Text Resource 2, text/plain)] Resource 2: plaintext resource"},
		{tool: "get-resource-reference", args: `{"resourceType": "Text", "resourceId": 3}`,
			want: "Returning resource reference for Resource 3:\n[resource: demo://resource/dynamic/text/3]\nResource 3: This is a plaintext resource created at ", prefix: true},
		// Arguments the server's validation rejects: a tool error.
		{tool: "echo", args: `{"msg": 1}`, want: "MCP error -32602: Input validation error: Invalid arguments for tool echo:", prefix: true, failed: true},
	} {
		res, err := callNPM(t, byName(t, tools, tc.tool), tc.args)
		require.NoError(t, err, tc.tool)
		if tc.prefix {
			assert.True(t, strings.HasPrefix(res.Content, tc.want), "%s: %q", tc.tool, res.Content)
		} else {
			assert.Equal(t, tc.want, res.Content, tc.tool)
		}
		assert.Equal(t, tc.failed, res.Failed, tc.tool)
	}
	res, err := callNPM(t, byName(t, tools, "get-structured-content"), `{"location": "New York"}`)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"temperature": 33.0, "conditions": "Cloudy", "humidity": 82.0}, res.Metadata["structured_content"])

	// A long operation past CallTimeout: the server still answers pings,
	// so it is kept.
	res, err = callNPM(t, byName(t, tools, "trigger-long-running-operation"), `{"duration": 30, "steps": 2}`)
	require.ErrorIs(t, err, mcp.ErrTimeout)
	assert.Equal(t, false, res.Metadata["hung"])
	res, err = callNPM(t, byName(t, tools, "echo"), `{"message": "after"}`)
	require.NoError(t, err)
	assert.Equal(t, "Echo: after", res.Content)
	assert.Equal(t, 1, res.Metadata["connection"])
	st := c.Stats()
	assert.Equal(t, int64(1), st.ToolErrors)
	assert.Equal(t, int64(1), st.Timeouts)
	assert.Zero(t, st.Restarts)
}

// childrenRunning returns the processes of this one's children whose
// command line contains s.
func childrenRunning(t *testing.T, s string) []int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	require.NoError(t, err)
	var pids []int
	for _, d := range dirs {
		stat, err1 := os.ReadFile(filepath.Join(d, "stat"))
		cmdline, err2 := os.ReadFile(filepath.Join(d, "cmdline"))
		if err1 != nil || err2 != nil {
			continue
		}
		// pid (comm) state ppid ...
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) && bytes.Contains(cmdline, []byte(s)) {
			pid, _ := strconv.Atoi(filepath.Base(d))
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestNPMServerKilledMidCall: server-everything killed during a call ends
// that call with ErrConnectionLost, saying so; the next call restarts it.
func TestNPMServerKilledMidCall(t *testing.T) {
	c := connectNPM(t, mcp.Config{Command: []string{everything(t)}, CallTimeout: time.Minute})
	tools := c.Tools()
	pids := childrenRunning(t, "mcp-server-everything")
	require.Len(t, pids, 1)

	type outcome struct {
		res tool.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := callNPM(t, byName(t, tools, "trigger-long-running-operation"), `{"duration": 30, "steps": 3}`)
		done <- outcome{res, err}
	}()
	time.Sleep(time.Second) // the call is under way
	require.NoError(t, syscall.Kill(pids[0], syscall.SIGKILL))
	var o outcome
	select {
	case o = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the call did not end when its server died")
	}
	require.ErrorIs(t, o.err, mcp.ErrConnectionLost)
	// The server's last words on standard error follow.
	assert.True(t, strings.HasPrefix(o.res.Content, "Error: tool trigger-long-running-operation failed: the server exited (signal: killed); its standard error ends: "), o.res.Content)

	res, err := callNPM(t, byName(t, tools, "echo"), `{"message": "back"}`)
	require.NoError(t, err)
	assert.Equal(t, "Echo: back", res.Content)
	assert.Equal(t, 2, res.Metadata["connection"])
	assert.Equal(t, int64(1), c.Stats().Restarts)
}

// TestNPMStatePerTrajectory: server-everything's toggle-simulated-logging
// keeps its state in the server; two sessions each start it, where one
// shared session would start it and then stop it.
func TestNPMStatePerTrajectory(t *testing.T) {
	const started, stopped = "Started simulated, random-leveled logging", "Stopped simulated logging"
	toggle := func(x tool.Tool) string {
		res, err := callNPM(t, x, `{}`)
		require.NoError(t, err)
		return res.Content
	}
	shared := connectNPM(t, mcp.Config{Command: []string{everything(t)}, Tools: []string{"toggle-simulated-logging"}})
	x := shared.Tools()[0]
	assert.True(t, strings.HasPrefix(toggle(x), started))
	assert.True(t, strings.HasPrefix(toggle(x), stopped))

	c := connectNPM(t, mcp.Config{Command: []string{everything(t)}, PerTrajectory: true, Tools: []string{"toggle-simulated-logging"}})
	reg, err := tool.NewRegistry(c.Tools()...)
	require.NoError(t, err)
	a, closeA := reg.OpenSessions(context.Background())
	b, closeB := reg.OpenSessions(context.Background())
	ta, _ := a.Get("toggle-simulated-logging")
	tb, _ := b.Get("toggle-simulated-logging")
	assert.True(t, strings.HasPrefix(toggle(ta), started))
	assert.True(t, strings.HasPrefix(toggle(tb), started), "session b saw session a's state")
	assert.True(t, strings.HasPrefix(toggle(ta), stopped))
	require.NoError(t, closeA())
	require.NoError(t, closeB())
	// The shared client's server is left; the sessions' are gone.
	assert.Len(t, childrenRunning(t, "mcp-server-everything"), 1, "a closed session left its server running")
}

// freePort returns a TCP port nothing listens on (as of now).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestNPMEverythingHTTP: server-everything over streamable HTTP; each
// session is an MCP session of its own (the server names it in its
// answer), and a server that goes away fails calls as lost, then
// unavailable.
func TestNPMEverythingHTTP(t *testing.T) {
	port := freePort(t)
	cmd := exec.Command(everything(t), "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	logs, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	require.NoError(t, err)
	defer logs.Close()
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })

	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	cfg := mcp.Config{URL: url, PerTrajectory: true, Tools: []string{"echo", "toggle-simulated-logging"},
		ConnectTimeout: 5 * time.Second, MaxRestarts: 1, PingTimeout: time.Second}
	var c *mcp.Client
	deadline := time.Now().Add(time.Minute)
	for {
		if c, err = mcp.Connect(context.Background(), cfg); err == nil {
			break
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logs.Name())
			t.Fatalf("the server did not come up: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer c.Close()

	sessionOf := regexp.MustCompile(`for session (\S+) `)
	toggle := func(s tool.Session) string {
		x, ok := s.Tool("toggle-simulated-logging")
		require.True(t, ok)
		res, err := callNPM(t, x, `{}`)
		require.NoError(t, err)
		m := sessionOf.FindStringSubmatch(res.Content)
		require.NotNil(t, m, res.Content)
		return m[1]
	}
	a, err := c.OpenSession(context.Background())
	require.NoError(t, err)
	b, err := c.OpenSession(context.Background())
	require.NoError(t, err)
	idA, idB := toggle(a), toggle(b)
	assert.NotEqual(t, idA, idB)
	assert.NotEqual(t, "undefined", idA)
	require.NoError(t, a.Close())

	require.NoError(t, cmd.Process.Kill())
	<-exited
	x, _ := b.Tool("echo")
	_, err = callNPM(t, x, `{"message": "anyone?"}`)
	require.ErrorIs(t, err, mcp.ErrConnectionLost)
	_, err = callNPM(t, x, `{"message": "anyone?"}`)
	require.ErrorIs(t, err, mcp.ErrUnavailable)
	require.NoError(t, b.Close())
}

// TestNPMFilesystemWorkspaces: server-filesystem in a workspace per
// session: what one session writes, another does not see.
func TestNPMFilesystemWorkspaces(t *testing.T) {
	c := connectNPM(t, mcp.Config{Command: []string{filesystem(t), mcp.WorkspaceArg}, PerTrajectory: true, Workspace: true,
		WorkspaceRoot: t.TempDir()})
	a, err := c.OpenSession(context.Background())
	require.NoError(t, err)
	defer a.Close()
	b, err := c.OpenSession(context.Background())
	require.NoError(t, err)
	defer b.Close()
	do := func(s tool.Session, name, args string) tool.Result {
		x, ok := s.Tool(name)
		require.True(t, ok, name)
		res, err := callNPM(t, x, args)
		require.NoError(t, err, name)
		return res
	}
	assert.Equal(t, "Successfully wrote to notes.txt", do(a, "write_file", `{"path": "notes.txt", "content": "from a"}`).Content)
	assert.Equal(t, "from a", do(a, "read_text_file", `{"path": "notes.txt"}`).Content)
	assert.Equal(t, "[FILE] notes.txt", do(a, "list_directory", `{"path": "."}`).Content)
	assert.Equal(t, "", do(b, "list_directory", `{"path": "."}`).Content)
	res := do(b, "read_text_file", `{"path": "notes.txt"}`)
	assert.True(t, res.Failed)
	assert.Contains(t, res.Content, "ENOENT")
	// Outside the workspace: the server refuses.
	res = do(a, "read_text_file", `{"path": "/etc/hostname"}`)
	assert.True(t, res.Failed)
	assert.Contains(t, res.Content, "Access denied - path outside allowed directories")
}

// TestNPMRollout: a rollout whose scripted model uses server-filesystem's
// tools, rendered into the prompt by Qwen3's chat template, with a
// workspace per trajectory. The model reads each result exactly as the
// server wrote it, as its own token span after the turn that called it.
func TestNPMRollout(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "..", "policy", "tokenizer", "qwen3"))
	require.NoError(t, err)
	c := connectNPM(t, mcp.Config{Command: []string{filesystem(t), mcp.WorkspaceArg}, PerTrajectory: true, Workspace: true,
		WorkspaceRoot: t.TempDir(), Tools: []string{"list_directory", "write_file", "read_text_file"}})

	turns := []string{
		"<tool_call>\n{\"name\": \"list_directory\", \"arguments\": {\"path\": \".\"}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"answer.txt\", \"content\": \"42\"}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"read_text_file\", \"arguments\": {\"path\": \"answer.txt\"}}\n</tool_call>",
		"The file says 42.<|im_end|>",
	}
	// What server-filesystem answers (its index.js): an empty listing of
	// the new workspace, "Successfully wrote to <path>", the file's text.
	results := []string{"", "Successfully wrote to answer.txt", "42"}

	sampler := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: []int{qwen3.IMEndID, qwen3.EndOfTextID}})
	var script []policytest.Response
	for _, s := range turns {
		script = append(script, policytest.Text(s))
	}
	sampler.HandleDefault(script...)
	render := func(msgs []rollout.Message, tools []json.RawMessage) (string, error) {
		m := make([]tokenizer.Message, len(msgs))
		for i, x := range msgs {
			m[i] = tokenizer.Message{Role: x.Role, Content: x.Content}
		}
		return tok.ApplyChatTemplate(m, tools, tokenizer.ChatOptions{AddGenerationPrompt: true})
	}
	eng, err := rollout.NewEngine(rollout.Config{Sampler: sampler, Tokenizer: tok, Tools: c.Tools(), Render: render,
		MaxTurns: 8, ToolTimeout: time.Minute})
	require.NoError(t, err)
	req := rollout.Request{ID: "q", N: 2, Messages: []rollout.Message{{Role: "user", Content: "Write 42 to answer.txt and read it back."}}}

	for run := range 2 { // the second run's trajectories see none of the first's files
		trajs, err := eng.Run(context.Background(), []rollout.Request{req})
		require.NoError(t, err)
		require.Len(t, trajs, 2)
		for _, tr := range trajs {
			prompt := tok.Decode(tr.Tokens[:tr.PromptLen])
			assert.Contains(t, prompt, `{"type": "function", "function": {"name": "list_directory", "description": "Get a detailed listing`)
			require.Len(t, tr.ToolCalls, 3, "run %d", run)
			want := slices.Clone(tr.Tokens[:tr.PromptLen])
			for i, turn := range turns {
				want = append(want, tok.Encode(turn)...)
				if i < len(results) {
					c := tr.ToolCalls[i]
					require.NoError(t, c.Err, "run %d call %d", run, i)
					assert.Equal(t, results[i], c.Result.Content, "run %d call %d", run, i)
					assert.Equal(t, "trajectory", c.Result.Metadata["session"])
					want = append(want, tok.Encode(rollout.ChatML{}.Render(turn, []string{results[i]}))...)
				}
			}
			// Token-faithful: the prompt, each turn as sampled, each
			// result's span encoded on its own.
			assert.Equal(t, want, tr.Tokens, "run %d", run)
			assert.Equal(t, rollout.StopNoToolCall, tr.Stop)
			assert.Contains(t, tr.Response, "<tool_response>\nSuccessfully wrote to answer.txt\n</tool_response>")
		}
	}
	st := c.Stats()
	assert.Equal(t, int64(4), st.Sessions)
	assert.Equal(t, int64(12), st.Calls)
	assert.Zero(t, st.ToolErrors+st.Lost+st.Timeouts+st.Unavailable)
}
