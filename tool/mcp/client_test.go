package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/tool"
)

func connect(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := Connect(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func find(t *testing.T, tools []tool.Tool, name string) tool.Tool {
	t.Helper()
	for _, x := range tools {
		if x.Name() == name {
			return x
		}
	}
	t.Fatalf("no tool %q", name)
	return nil
}

func call(t *testing.T, c *Client, name, args string) (tool.Result, error) {
	t.Helper()
	return find(t, c.Tools(), name).Call(context.Background(), json.RawMessage(args))
}

// pidOf reads the server's process id off the count tool's answer.
func pidOf(t *testing.T, res tool.Result) int {
	t.Helper()
	var n, pid int
	_, err := fmt.Sscanf(res.Content, "count %d pid %d", &n, &pid)
	require.NoError(t, err, res.Content)
	return pid
}

// gone reports whether process pid has exited (and been reaped).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// transports are the ways the tests reach the test server.
func transports(t *testing.T) map[string]Config {
	return map[string]Config{
		"stdio":     stdioConfig(),
		"http json": {URL: httpServer(t, true).URL},
		"http sse":  {URL: httpServer(t, false).URL},
	}
}

// TestSchemas: every page of tools/list is read, and each tool's schema
// is the server's inputSchema, byte for byte up to white space, in an
// OpenAI function schema whose keys are in tool.FunctionSchema's order.
func TestSchemas(t *testing.T) {
	// The Go SDK's server lists tools in name order.
	all := []string{"big", "count", "die", "echo", "empty", "mixed", "refuse", "reject", "sleep", "structured", "weather", "where"}
	for name, cfg := range transports(t) {
		t.Run(name, func(t *testing.T) {
			c := connect(t, cfg)
			want := all
			if cfg.URL != "" {
				want = []string{"big", "count", "echo", "empty", "mixed", "refuse", "reject", "sleep", "structured", "weather", "where"}
			}
			var names []string
			for _, x := range c.Tools() {
				names = append(names, x.Name())
				assert.IsType(t, &Tool{}, x)
			}
			assert.Equal(t, want, names)
			assert.Equal(t, "agentrl-test", c.Name())
			echo := find(t, c.Tools(), "echo")
			compact := `{"type":"object","properties":{"zeta":{"type":"string","description":"Said back."},"alpha":{"type":"integer"}},"required":["zeta"],"additionalProperties":false}`
			assert.Equal(t, `{"type": "function", "function": {"name": "echo", "description": "Says zeta back.", "parameters": `+compact+`}}`,
				string(echo.Schema()))
			// The schemas make a registry, which checks calls against them.
			reg, err := tool.NewRegistry(c.Tools()...)
			require.NoError(t, err)
			_, err = reg.Validate("echo", json.RawMessage(`{"alpha": 1}`))
			assert.ErrorIs(t, err, tool.ErrBadArguments)
			assert.Contains(t, err.Error(), `missing required field "zeta"`)
		})
	}
}

// TestChosenTools: Config.Tools picks tools and their order, Prefix
// renames them (the server still gets its own name), and a tool the
// server lacks fails Connect, naming those it has.
func TestChosenTools(t *testing.T) {
	cfg := stdioConfig()
	cfg.Tools, cfg.Prefix, cfg.Name = []string{"where", "echo"}, "t_", "test"
	c := connect(t, cfg)
	var names []string
	for _, x := range c.Tools() {
		names = append(names, x.Name())
	}
	assert.Equal(t, []string{"t_where", "t_echo"}, names)
	assert.Contains(t, string(find(t, c.Tools(), "t_echo").Schema()), `"name": "t_echo"`)
	res, err := call(t, c, "t_echo", `{"zeta": "hi"}`)
	require.NoError(t, err)
	assert.Equal(t, "echo: hi", res.Content)
	assert.Equal(t, "test", res.Metadata["server"])
	assert.Equal(t, "echo", res.Metadata["tool"])

	cfg.Tools = []string{"echo", "nope"}
	_, err = Connect(context.Background(), cfg)
	assert.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), `has no tool "nope" (it has "big", "count", "die", "echo"`)
}

// TestResults: what the model reads of each kind of answer, on each
// transport.
func TestResults(t *testing.T) {
	cases := []struct {
		tool, args string
		budget     tool.OutputBudget
		want       string
		failed     bool
		kind       string // Metadata["error"]
		truncated  bool
	}{
		{tool: "echo", args: `{"zeta": "hi <&>"}`, want: "echo: hi <&>"},
		// The content blocks, not the structured content, when both come.
		{tool: "weather", want: `{"temperature": 36, "conditions": "drizzle"}`},
		// Structured content alone: as JSON, keys sorted (the SDK decodes
		// it into a map), <, > and & as they are.
		{tool: "structured", want: `{"a":[true,null],"b":1,"c":"<&>"}`},
		{tool: "mixed", want: "Here:\n[image: image/png, 3 bytes]\n[audio: audio/wav, 4 bytes]\n" +
			"[resource link: file:///a.txt (a.txt, text/plain)] The first file.\n[resource link: file:///b]\n" +
			"[resource: file:///c.txt]\nline 1\nline 2\n[resource: file:///d.bin, application/octet-stream, 2 bytes]"},
		{tool: "empty", want: ""},
		// A tool error is a result the model reads; so is a JSON-RPC error.
		{tool: "refuse", want: "no such city: Atlantis", failed: true, kind: "tool_error"},
		{tool: "reject", want: "Error: bad input", failed: true, kind: "protocol_error"},
		// 100 x's in a budget of 20 characters: 10 kept at each end.
		{tool: "big", args: `{"n": 100}`, budget: tool.OutputBudget{Chars: 20},
			want: strings.Repeat("x", 10) + "\n...[80 characters truncated]...\n" + strings.Repeat("x", 10), truncated: true},
		// Arguments that are not an object never reach the server.
		{tool: "echo", args: `["hi"]`, want: "Error: invalid arguments for echo: arguments must be a JSON object", failed: true, kind: "bad_arguments"},
		{tool: "echo", args: `{"zeta": `, want: "Error: invalid arguments for echo: arguments must be a JSON object", failed: true, kind: "bad_arguments"},
	}
	for name, cfg := range transports(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range cases {
				cfg := cfg
				cfg.Budget = tc.budget
				c := connect(t, cfg)
				res, err := call(t, c, tc.tool, tc.args)
				require.NoError(t, err, tc.tool)
				assert.Equal(t, tc.want, res.Content, tc.tool)
				assert.Equal(t, tc.failed, res.Failed, tc.tool)
				if tc.kind != "" {
					assert.Equal(t, tc.kind, res.Metadata["error"], tc.tool)
				} else {
					assert.NotContains(t, res.Metadata, "error", tc.tool)
				}
				if tc.kind == "" || tc.kind == "tool_error" {
					assert.Equal(t, tc.truncated, res.Metadata["truncated"], tc.tool)
				}
				if tc.kind != "bad_arguments" {
					assert.Equal(t, 1, res.Metadata["connection"], tc.tool)
				}
				assert.Positive(t, res.Duration, tc.tool)
			}
		})
	}
}

// TestResultMetadata: structured content and the JSON-RPC code are kept
// for reward functions, and the counts add up.
func TestResultMetadata(t *testing.T) {
	c := connect(t, stdioConfig())
	res, err := call(t, c, "weather", `{}`)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"temperature": 36.0, "conditions": "drizzle"}, res.Metadata["structured_content"])
	assert.Equal(t, "shared", res.Metadata["session"])
	res, err = call(t, c, "reject", `{}`)
	require.NoError(t, err)
	assert.Equal(t, int64(-32602), res.Metadata["rpc_code"])
	_, err = call(t, c, "refuse", `{}`)
	require.NoError(t, err)
	_, err = call(t, c, "echo", `[]`)
	require.NoError(t, err)
	assert.Equal(t, Stats{Calls: 3, ToolErrors: 1, ProtocolErrors: 1, Connects: 1}, c.Stats())
}

// TestTimeoutServerAlive: a call past CallTimeout fails with ErrTimeout;
// the server still answers pings, so it is kept and the next call uses
// the same connection.
func TestTimeoutServerAlive(t *testing.T) {
	for name, cfg := range transports(t) {
		t.Run(name, func(t *testing.T) {
			cfg.CallTimeout = 300 * time.Millisecond
			c := connect(t, cfg)
			res, err := call(t, c, "sleep", `{"ms": 5000}`)
			require.ErrorIs(t, err, ErrTimeout)
			assert.True(t, res.Failed)
			assert.Equal(t, "Error: tool sleep did not answer within 300ms", res.Content)
			assert.Equal(t, "timeout", res.Metadata["error"])
			assert.Equal(t, false, res.Metadata["hung"])
			res, err = call(t, c, "echo", `{"zeta": "still here"}`)
			require.NoError(t, err)
			assert.Equal(t, "echo: still here", res.Content)
			assert.Equal(t, 1, res.Metadata["connection"])
			st := c.Stats()
			assert.Equal(t, int64(1), st.Timeouts)
			assert.Zero(t, st.Killed)
			assert.Zero(t, st.Restarts)
		})
	}
}

// TestCallerCancels: a call whose context ends returns the context's
// error, and the connection stays.
func TestCallerCancels(t *testing.T) {
	c := connect(t, stdioConfig())
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	res, err := find(t, c.Tools(), "sleep").Call(ctx, json.RawMessage(`{"ms": 5000}`))
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, res.Failed)
	assert.Equal(t, "cancelled", res.Metadata["error"])
	res, err = call(t, c, "echo", `{"zeta": "x"}`)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Metadata["connection"])
}

// TestHungServerKilled: a server that answers neither the call nor a
// ping (here, stopped by SIGSTOP) is killed; the next call starts a new
// one.
func TestHungServerKilled(t *testing.T) {
	cfg := stdioConfig()
	cfg.CallTimeout, cfg.PingTimeout = 500*time.Millisecond, 200*time.Millisecond
	c := connect(t, cfg)
	first, err := call(t, c, "count", `{}`)
	require.NoError(t, err)
	pid := pidOf(t, first)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))

	start := time.Now()
	res, err := call(t, c, "echo", `{"zeta": "anyone?"}`)
	require.ErrorIs(t, err, ErrTimeout, "%+v", res)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, true, res.Metadata["hung"])
	assert.Equal(t, "Error: tool echo did not answer within 500ms", res.Content)
	assert.True(t, gone(pid), "the frozen server was not killed")

	res, err = call(t, c, "count", `{}`)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Metadata["connection"])
	assert.True(t, strings.HasPrefix(res.Content, "count 1 "), "a new server counts from 1: %s", res.Content)
	assert.NotEqual(t, pid, pidOf(t, res))
	assert.Equal(t, Stats{Calls: 3, Timeouts: 1, Killed: 1, Connects: 2, Restarts: 1}, c.Stats())
}

// TestServerDiesMidCall: the call fails with ErrConnectionLost, saying how
// the server ended and what it last wrote to standard error; the next
// call restarts it.
func TestServerDiesMidCall(t *testing.T) {
	c := connect(t, stdioConfig())
	_, err := call(t, c, "count", `{}`)
	require.NoError(t, err)
	res, err := call(t, c, "die", `{}`)
	require.ErrorIs(t, err, ErrConnectionLost)
	assert.True(t, res.Failed)
	assert.Equal(t, "connection_lost", res.Metadata["error"])
	assert.Equal(t, "Error: tool die failed: the server exited (exit status 3); its standard error ends: dying on purpose", res.Content)
	assert.Contains(t, err.Error(), "exit status 3")

	res, err = call(t, c, "count", `{}`)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Metadata["connection"])
	assert.True(t, strings.HasPrefix(res.Content, "count 1 "), res.Content)
	assert.Equal(t, Stats{Calls: 3, Lost: 1, Connects: 2, Restarts: 1}, c.Stats())
}

// TestServerDiesIdle: a server that exits between calls is noticed, and
// the next call starts a new one instead of failing.
func TestServerDiesIdle(t *testing.T) {
	c := connect(t, stdioConfig())
	res, err := call(t, c, "count", `{}`)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pidOf(t, res), syscall.SIGKILL))
	eventually(t, "the session forgets the dead connection", func() bool {
		c.shared.mu.Lock()
		defer c.shared.mu.Unlock()
		return c.shared.cur == nil
	})
	res, err = call(t, c, "count", `{}`)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Metadata["connection"])
	assert.Zero(t, c.Stats().Lost)
}

// TestRestartBound: past MaxRestarts a session's calls fail at once with
// ErrUnavailable, saying why.
func TestRestartBound(t *testing.T) {
	for _, tc := range []struct {
		maxRestarts int
		deaths      int
	}{{1, 2}, {-1, 1}} {
		t.Run(fmt.Sprint(tc.maxRestarts), func(t *testing.T) {
			cfg := stdioConfig()
			cfg.MaxRestarts = tc.maxRestarts
			c := connect(t, cfg)
			for range tc.deaths {
				_, err := call(t, c, "die", `{}`)
				require.ErrorIs(t, err, ErrConnectionLost)
			}
			res, err := call(t, c, "count", `{}`)
			require.ErrorIs(t, err, ErrUnavailable)
			assert.Equal(t, "unavailable", res.Metadata["error"])
			restarts := max(tc.maxRestarts, 0)
			assert.Equal(t, fmt.Sprintf("Error: tool count is unavailable: server unavailable: the server failed after %d restarts: "+
				"the server exited (exit status 3); its standard error ends: dying on purpose", restarts), res.Content)
			st := c.Stats()
			assert.Equal(t, int64(1), st.Unavailable)
			assert.Equal(t, int64(restarts), st.Restarts)
		})
	}
}

// TestPerTrajectorySessions: each session has its own server process and
// workspace; closing one stops its server and removes its workspace, and
// calls outside any session share one more.
func TestPerTrajectorySessions(t *testing.T) {
	cfg := stdioConfig()
	cfg.PerTrajectory, cfg.Workspace, cfg.WorkspaceRoot = true, true, t.TempDir()
	c := connect(t, cfg)
	for _, x := range c.Tools() {
		_, ok := x.(tool.Stateful)
		assert.True(t, ok, "%s is not Stateful", x.Name())
	}
	reg, err := tool.NewRegistry(c.Tools()...)
	require.NoError(t, err)
	a, closeA := reg.OpenSessions(context.Background())
	b, closeB := reg.OpenSessions(context.Background())
	do := func(r *tool.Registry, name string) tool.Result {
		res, err := r.Call(context.Background(), name, json.RawMessage(`{}`))
		require.NoError(t, err)
		return res
	}
	a1, a2, b1 := do(a, "count"), do(a, "count"), do(b, "count")
	assert.True(t, strings.HasPrefix(a1.Content, "count 1 "), a1.Content)
	assert.True(t, strings.HasPrefix(a2.Content, "count 2 "), a2.Content)
	assert.True(t, strings.HasPrefix(b1.Content, "count 1 "), b1.Content)
	assert.Equal(t, "trajectory", a1.Metadata["session"])
	pidA, pidB := pidOf(t, a1), pidOf(t, b1)
	assert.NotEqual(t, pidA, pidB)

	wsA, wsB := do(a, "where").Content, do(b, "where").Content
	assert.NotEqual(t, wsA, wsB)
	for _, ws := range []string{wsA, wsB} {
		assert.Equal(t, cfg.WorkspaceRoot, filepath.Dir(ws))
		assert.DirExists(t, ws)
	}

	require.NoError(t, closeA())
	assert.True(t, gone(pidA), "closing the session left its server running")
	assert.NoDirExists(t, wsA)
	assert.DirExists(t, wsB)

	// Outside any session: the Client's shared session, a third process.
	res, err := call(t, c, "count", `{}`)
	require.NoError(t, err)
	assert.Equal(t, "shared", res.Metadata["session"])
	assert.NotContains(t, []int{pidA, pidB}, pidOf(t, res))

	require.NoError(t, c.Close())
	assert.True(t, gone(pidB), "closing the client left a session's server running")
	assert.NoDirExists(t, wsB)
	require.NoError(t, closeB())
	st := c.Stats()
	assert.Equal(t, int64(2), st.Sessions)
	// The probe that listed the tools, two sessions, the shared session.
	assert.Equal(t, int64(4), st.Connects)
}

// TestPerTrajectoryHTTP: over HTTP each session is an MCP session of its
// own on the same server.
func TestPerTrajectoryHTTP(t *testing.T) {
	c := connect(t, Config{URL: httpServer(t, false).URL, PerTrajectory: true})
	sa, err := c.OpenSession(context.Background())
	require.NoError(t, err)
	sb, err := c.OpenSession(context.Background())
	require.NoError(t, err)
	do := func(s tool.Session) string {
		x, ok := s.Tool("count")
		require.True(t, ok)
		res, err := x.Call(context.Background(), json.RawMessage(`{}`))
		require.NoError(t, err)
		return res.Content[:len("count N")]
	}
	assert.Equal(t, []string{"count 1", "count 2", "count 1"}, []string{do(sa), do(sa), do(sb)})
	require.NoError(t, sa.Close())
	require.NoError(t, sb.Close())
	_, ok := sa.Tool("nope")
	assert.False(t, ok)
}

// TestHTTPServerGone: a server that stops answering HTTP fails the call in
// flight as lost, then every call as unavailable once reconnecting fails.
func TestHTTPServerGone(t *testing.T) {
	ts := httpServer(t, true)
	cfg := Config{URL: ts.URL, MaxRestarts: 1, ConnectTimeout: 2 * time.Second, PingTimeout: 500 * time.Millisecond}
	c := connect(t, cfg)
	_, err := call(t, c, "count", `{}`)
	require.NoError(t, err)
	ts.CloseClientConnections()
	ts.Close()
	res, err := call(t, c, "count", `{}`)
	require.ErrorIs(t, err, ErrConnectionLost, "%+v", res)
	assert.Equal(t, "connection_lost", res.Metadata["error"])
	for range 2 {
		res, err = call(t, c, "count", `{}`)
		require.ErrorIs(t, err, ErrUnavailable)
		assert.Equal(t, "unavailable", res.Metadata["error"])
	}
	assert.Contains(t, res.Content, "failed after 1 restarts")
}

// TestConnectFailures: a server that cannot be started or reached fails
// Connect with ErrUnavailable and the reason.
func TestConnectFailures(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedURL := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"no such program", Config{Command: []string{filepath.Join(t.TempDir(), "nope")}}, []string{"starting", "no such file"}},
		{"exits at start", Config{Command: []string{testBinary()}, Env: []string{serverEnv + "=fail-start"}},
			[]string{"the server exited (exit status 2); its standard error ends: fatal: unknown flag --nope"}},
		{"nothing listening", Config{URL: closedURL}, []string{"connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.ConnectTimeout = 5 * time.Second
			_, err := Connect(context.Background(), tc.cfg)
			require.ErrorIs(t, err, ErrUnavailable)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"nothing", Config{}, "set Command"},
		{"both", Config{Command: []string{"x"}, URL: "http://h/mcp"}, "only one"},
		{"empty program", Config{Command: []string{""}}, "empty program"},
		{"workspace over http", Config{URL: "http://h/mcp", Workspace: true}, "Workspace needs a stdio server"},
		{"placeholder without workspace", Config{Command: []string{"x", WorkspaceArg}}, "Workspace is not set"},
		{"bad url", Config{URL: "ftp://h/mcp"}, "not an http(s) URL"},
		{"duplicate tools", Config{Command: []string{"x"}, Tools: []string{"a", "a"}}, `lists "a" twice`},
		{"negative timeout", Config{Command: []string{"x"}, CallTimeout: -1}, "negative timeout"},
		{"bad budget", Config{Command: []string{"x"}, Budget: tool.OutputBudget{Tokens: 10}}, "needs a Tokenizer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Connect(context.Background(), tc.cfg)
			require.ErrorIs(t, err, ErrConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestClosedClient: after Close, calls and new sessions fail with
// ErrUnavailable, and the server is gone.
func TestClosedClient(t *testing.T) {
	cfg := stdioConfig()
	cfg.PerTrajectory = true
	c := connect(t, cfg)
	res, err := call(t, c, "count", `{}`)
	require.NoError(t, err)
	pid := pidOf(t, res)
	require.NoError(t, c.Close())
	assert.True(t, gone(pid))
	res, err = call(t, c, "count", `{}`)
	require.ErrorIs(t, err, ErrUnavailable)
	assert.True(t, res.Failed)
	_, err = c.OpenSession(context.Background())
	require.ErrorIs(t, err, ErrUnavailable)
	require.NoError(t, c.Close())
}

// TestSessionClosedMidCall: closing a session fails its call in flight at
// once, with ErrUnavailable, and stops its server.
func TestSessionClosedMidCall(t *testing.T) {
	cfg := stdioConfig()
	cfg.PerTrajectory = true
	c := connect(t, cfg)
	s, err := c.OpenSession(context.Background())
	require.NoError(t, err)
	count, _ := s.Tool("count")
	res, err := count.Call(context.Background(), json.RawMessage(`{}`))
	require.NoError(t, err)
	pid := pidOf(t, res)
	sleep, _ := s.Tool("sleep")
	type outcome struct {
		res tool.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := sleep.Call(context.Background(), json.RawMessage(`{"ms": 30000}`))
		done <- outcome{res, err}
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	require.NoError(t, s.Close())
	o := <-done
	assert.Less(t, time.Since(start), 10*time.Second)
	require.ErrorIs(t, o.err, ErrUnavailable)
	assert.Equal(t, "cancelled", o.res.Metadata["error"])
	assert.True(t, gone(pid))
	// Calls after Close fail the same way.
	_, err = count.Call(context.Background(), json.RawMessage(`{}`))
	require.ErrorIs(t, err, ErrUnavailable)
}
