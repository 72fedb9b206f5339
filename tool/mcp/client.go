package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrl/agentrl/tool"
)

// Errors of a call that could not be made or finished. A Tool's Call
// returns them (wrapped) with a failed Result, as package tool's
// convention has it for a tool that cannot work.
var (
	// ErrTimeout: the server did not answer within Config.CallTimeout
	// (or the caller's deadline).
	ErrTimeout = errors.New("mcp: tool call timed out")
	// ErrConnectionLost: the connection ended during the call: the
	// server exited or crashed, or was found hung and killed.
	ErrConnectionLost = errors.New("mcp: connection to the server lost")
	// ErrUnavailable: no connection could be had: the server would not
	// start or answer the handshake, its restarts are spent, or the
	// Client or session is closed.
	ErrUnavailable = errors.New("mcp: server unavailable")
)

// Client is a connection to one MCP server and the server's tools as
// tool.Tools. It is safe for concurrent use.
//
// With Config.PerTrajectory the tools are tool.Stateful: the rollout
// engine opens a session of the Client for each trajectory
// (OpenSession). Otherwise, and for calls made outside any session, the
// tools share one session, which reconnects after a failure.
type Client struct {
	cfg    Config
	client *sdk.Client
	name   string
	tools  []tool.Tool
	byName map[string]*Tool
	shared *session
	stats  stats

	ctx    context.Context // parent of the sessions'; cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex
	open   map[*session]struct{} // sessions not yet closed
	closed bool
}

// Connect connects to the server, lists its tools (every page of
// tools/list) and returns the Client. ctx bounds the listing; the
// connection itself is bounded by Config.ConnectTimeout.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg: cfg,
		client: sdk.NewClient(&sdk.Implementation{Name: "agentrl", Version: "1"}, &sdk.ClientOptions{
			// Advertise no roots, sampling or elicitation: servers such
			// as server-filesystem would otherwise ask for roots and
			// replace the directories they were given.
			Capabilities: &sdk.ClientCapabilities{},
		}),
		byName: map[string]*Tool{},
		open:   map[*session]struct{}{},
		name:   cfg.Name,
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if c.name == "" {
		c.name = serverLabel(cfg)
	}
	probe := c.newSession("shared")
	if err := c.discover(ctx, probe); err != nil {
		probe.close()
		c.cancel()
		return nil, err
	}
	if cfg.PerTrajectory {
		// The probe's connection served the listing only; calls made
		// outside any session get a shared session of their own, which
		// connects when first needed.
		probe.close()
		probe = c.newSession("shared")
	}
	c.shared = probe
	return c, nil
}

// serverLabel names a server before it has told its name.
func serverLabel(cfg Config) string {
	if cfg.URL != "" {
		return cfg.URL
	}
	return cfg.Command[0]
}

// discover connects s, names the server and makes the Client's tools
// from its tools/list.
func (c *Client) discover(ctx context.Context, s *session) error {
	conn, err := s.get(ctx)
	if err != nil {
		return fmt.Errorf("mcp: connecting to %s: %w", c.name, err)
	}
	if c.cfg.Name == "" {
		if info := conn.cs.InitializeResult(); info != nil && info.ServerInfo != nil && info.ServerInfo.Name != "" {
			c.name = info.ServerInfo.Name
		}
	}
	lctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	listed, err := listTools(lctx, conn)
	if err != nil {
		return fmt.Errorf("mcp: %s: listing tools: %w", c.name, err)
	}
	chosen := listed
	if len(c.cfg.Tools) > 0 {
		chosen = chosen[:0:0]
		for _, name := range c.cfg.Tools {
			i := slices.IndexFunc(listed, func(t rawTool) bool { return t.Name == name })
			if i < 0 {
				return fmt.Errorf("%w: the server %s has no tool %q (it has %s)", ErrConfig, c.name, name, toolNames(listed))
			}
			chosen = append(chosen, listed[i])
		}
	}
	for _, rt := range chosen {
		t, err := c.newTool(rt)
		if err != nil {
			return fmt.Errorf("mcp: %s: tool %q: %w", c.name, rt.Name, err)
		}
		if c.cfg.PerTrajectory {
			c.tools = append(c.tools, StatefulTool{t})
		} else {
			c.tools = append(c.tools, t)
		}
		c.byName[t.name] = t
	}
	// The registry checks what the rollout engine will: unique names and
	// schemas of the right shape.
	if _, err := tool.NewRegistry(c.tools...); err != nil {
		return fmt.Errorf("mcp: %s: %w", c.name, err)
	}
	return nil
}

// rawTool is a tool of tools/list as the server sent it.
type rawTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

func toolNames(ts []rawTool) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = fmt.Sprintf("%q", t.Name)
	}
	return strings.Join(names, ", ")
}

// maxListPages bounds the pages of tools/list read, against a server
// whose cursors never end.
const maxListPages = 1000

// listTools reads every page of tools/list, each tool as the server wrote
// it (the SDK's decoded form of the page gives the tools it accepts).
func listTools(ctx context.Context, conn *conn) ([]rawTool, error) {
	var out []rawTool
	cursor := ""
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, fmt.Errorf("more than %d pages", maxListPages)
		}
		res, err := conn.cs.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		raw, ok := conn.lists.take()
		if !ok {
			return nil, errors.New("the raw tools/list answer was not seen")
		}
		var page struct {
			Tools []rawTool `json:"tools"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("decoding tools/list: %w", err)
		}
		for _, t := range res.Tools {
			i := slices.IndexFunc(page.Tools, func(r rawTool) bool { return r.Name == t.Name })
			if i < 0 {
				return nil, fmt.Errorf("tool %q is missing from the raw tools/list answer", t.Name)
			}
			out = append(out, page.Tools[i])
		}
		if res.NextCursor == "" {
			return out, nil
		}
		if seen[res.NextCursor] {
			return nil, fmt.Errorf("the server repeated cursor %q", res.NextCursor)
		}
		seen[res.NextCursor] = true
		cursor = res.NextCursor
	}
}

// newTool makes the Tool for a server's tool.
func (c *Client) newTool(rt rawTool) (*Tool, error) {
	params := rt.InputSchema
	if len(params) == 0 || string(params) == "null" {
		return nil, errors.New("it has no inputSchema")
	}
	var shape map[string]any
	if err := json.Unmarshal(params, &shape); err != nil {
		return nil, fmt.Errorf("its inputSchema is not a JSON object: %w", err)
	}
	name := c.cfg.Prefix + rt.Name
	schema, err := functionSchema(name, rt.Description, params)
	if err != nil {
		return nil, err
	}
	return &Tool{client: c, name: name, remote: rt.Name, schema: schema}, nil
}

// Name returns the server's name: Config.Name, or the name the server
// gave when it was initialized.
func (c *Client) Name() string { return c.name }

// Tools returns the server's tools as tool.Tools, in the order of
// Config.Tools or else the server's: *Tool values, or StatefulTool values
// with Config.PerTrajectory.
func (c *Client) Tools() []tool.Tool { return slices.Clone(c.tools) }

// OpenSession opens a session of the server for one trajectory: its tools
// share it, and no other session sees its state. The session connects
// (starts a stdio server) when one of its tools is first called, and
// Close ends it. It implements tool.SessionOpener.
func (c *Client) OpenSession(ctx context.Context) (tool.Session, error) {
	s := c.newSession("trajectory")
	if s == nil {
		return nil, fmt.Errorf("%w: %s: the client is closed", ErrUnavailable, c.name)
	}
	c.stats.sessions.Add(1)
	return &Session{client: c, s: s}, nil
}

// newSession returns a new session registered with c, or nil once c is
// closed.
func (c *Client) newSession(kind string) *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	s := &session{c: c, kind: kind}
	s.ctx, s.cancel = context.WithCancel(c.ctx)
	c.open[s] = struct{}{}
	return s
}

func (c *Client) forget(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.open, s)
}

// Close ends every session of the Client (stopping their servers) and
// makes further calls fail with ErrUnavailable.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	open := make([]*session, 0, len(c.open))
	for s := range c.open {
		open = append(open, s)
	}
	c.mu.Unlock()
	c.cancel()
	var wg sync.WaitGroup
	for _, s := range open {
		wg.Go(s.close)
	}
	wg.Wait()
	return nil
}

// Stats counts what a Client's sessions did, for metrics: how calls
// ended and how often connections were made, lost and restarted.
type Stats struct {
	// Calls counts the calls made to the server's tools (arguments that
	// are not a JSON object excepted); the other call counts say how
	// some of them ended.
	Calls int64
	// ToolErrors counts results the server marked as errors (isError),
	// ProtocolErrors calls it answered with a JSON-RPC error or a
	// malformed answer, Timeouts calls that ran past their time, Lost
	// calls whose connection ended under them, and Unavailable calls
	// made when no connection could be had.
	ToolErrors, ProtocolErrors, Timeouts, Lost, Unavailable int64
	// Connects counts the connections made (servers started, over
	// stdio), Restarts the connections tried again after one died, hung
	// or failed, and Killed the connections found hung after a timeout
	// and killed.
	Connects, Restarts, Killed int64
	// Sessions counts the sessions opened for trajectories.
	Sessions int64
}

type stats struct {
	calls, toolErrors, protocolErrors, timeouts, lost, unavailable atomic.Int64
	connects, restarts, killed, sessions                           atomic.Int64
}

// Stats returns the counts so far.
func (c *Client) Stats() Stats {
	s := &c.stats
	return Stats{
		Calls: s.calls.Load(), ToolErrors: s.toolErrors.Load(), ProtocolErrors: s.protocolErrors.Load(),
		Timeouts: s.timeouts.Load(), Lost: s.lost.Load(), Unavailable: s.unavailable.Load(),
		Connects: s.connects.Load(), Restarts: s.restarts.Load(), Killed: s.killed.Load(),
		Sessions: s.sessions.Load(),
	}
}

// Tool is one of the server's tools. Its Call goes through the Client's
// shared session.
type Tool struct {
	client *Client
	name   string // as the model calls it: Config.Prefix and the server's name
	remote string // as the server names it
	schema json.RawMessage
}

// Name returns the tool's name: Config.Prefix followed by the server's
// name for it.
func (t *Tool) Name() string { return t.name }

// Schema returns the tool's OpenAI function schema: its name, the
// server's description, and the server's inputSchema as parameters, keys
// in the server's order.
func (t *Tool) Schema() json.RawMessage { return slices.Clone(t.schema) }

// Call calls the tool on the Client's shared session; see Session for
// what the model reads and what fails how.
func (t *Tool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	return t.client.shared.call(ctx, t, args)
}

// StatefulTool is a Tool whose trajectories get sessions of their own
// (Config.PerTrajectory): it implements tool.Stateful, and the rollout
// engine calls it through a Session opened for each trajectory.
type StatefulTool struct{ *Tool }

// SessionOpener returns the tool's Client, which opens the sessions of
// all its tools.
func (t StatefulTool) SessionOpener() tool.SessionOpener { return t.client }

// Session is one trajectory's session of a Client (Config.PerTrajectory):
// a server process of its own over stdio, an MCP session of its own over
// HTTP, and a workspace of its own with Config.Workspace.
//
// A call's result is the text the model reads (see the package
// documentation): a result the server marks as an error (isError) is a
// failed Result with a nil error, as is a JSON-RPC error answer; a call
// that times out, loses its connection or finds none is a failed Result
// with an error wrapping ErrTimeout, ErrConnectionLost or
// ErrUnavailable. A lost or hung connection is replaced on the next call,
// Config.MaxRestarts times at most.
type Session struct {
	client *Client
	s      *session
}

// Tool returns the session's instance of the tool named name.
func (s *Session) Tool(name string) (tool.Tool, bool) {
	t, ok := s.client.byName[name]
	if !ok {
		return nil, false
	}
	return sessionTool{t, s.s}, true
}

// Close ends the session: its server is stopped (input closed, then
// SIGTERM and SIGKILL after Config.ShutdownGrace each) and its workspace
// removed.
func (s *Session) Close() error {
	s.s.close()
	return nil
}

// sessionTool is a tool called through one session.
type sessionTool struct {
	*Tool
	s *session
}

func (t sessionTool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	return t.s.call(ctx, t.Tool, args)
}

// removeAll removes a workspace, logging nothing: it is a temporary
// directory, and a failure leaves it for the system to clean.
func removeAll(dir string) {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// httpClient is cfg's HTTP client with its transport wrapped to capture
// tools/list answers.
func httpClient(cfg Config, lists *listCapture) *http.Client {
	hc := *cfg.HTTPClient
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = captureRoundTripper{next: next, lists: lists}
	return &hc
}
