package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrl/agentrl/tool"
)

// session is one MCP session as the model sees it: the connection of the
// moment, replaced after a failure, Config.MaxRestarts times at most.
type session struct {
	c    *Client
	kind string // "shared" or "trajectory", for results' metadata

	ctx    context.Context // cancelled by close: aborts a connect
	cancel context.CancelFunc

	mu        sync.Mutex
	cur       *conn    // the live connection, nil when there is none
	pending   *attempt // a connect under way
	attempts  int      // connects tried
	lastErr   error    // why the last connection failed or ended
	closed    bool
	workspace string
}

// attempt is one connect; done is closed when conn or err is set.
type attempt struct {
	done chan struct{}
	conn *conn
	err  error
}

var errSessionClosed = errors.New("the session is closed")

// get returns the live connection, connecting (again) when there is none.
// A connect runs on the session's own context, bounded by
// Config.ConnectTimeout, so that a caller giving up does not fail it for
// the others waiting.
func (s *session) get(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, errSessionClosed)
	}
	if s.cur != nil {
		c := s.cur
		s.mu.Unlock()
		return c, nil
	}
	a := s.pending
	if a == nil {
		if limit := s.c.cfg.MaxRestarts; s.attempts > limit {
			err := fmt.Errorf("%w: the server failed after %d restarts: %v", ErrUnavailable, limit, s.lastErr)
			s.mu.Unlock()
			return nil, err
		}
		s.attempts++
		a = &attempt{done: make(chan struct{})}
		s.pending = a
		go s.connect(a, s.attempts)
	}
	s.mu.Unlock()
	select {
	case <-a.done:
		return a.conn, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// connect makes the session's n-th connection.
func (s *session) connect(a *attempt, n int) {
	if n > 1 {
		s.c.stats.restarts.Add(1)
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.c.cfg.ConnectTimeout)
	defer cancel()
	c, err := s.dial(ctx, n)
	s.mu.Lock()
	s.pending = nil
	switch {
	case err != nil:
		s.lastErr = err
		a.err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	case s.closed:
		go c.shut(false)
		a.err = fmt.Errorf("%w: %w", ErrUnavailable, errSessionClosed)
	default:
		s.cur = c
		a.conn = c
		go s.watch(c)
	}
	s.mu.Unlock()
	close(a.done)
}

// dial starts the server (stdio) or opens an MCP session (HTTP) and
// initializes it.
func (s *session) dial(ctx context.Context, n int) (*conn, error) {
	cfg := s.c.cfg
	c := &conn{n: n, lists: &listCapture{}, ended: make(chan struct{}), grace: cfg.ShutdownGrace}
	var transport sdk.Transport
	if len(cfg.Command) > 0 {
		argv, dir := cfg.Command, cfg.Dir
		if cfg.Workspace {
			ws, err := s.ensureWorkspace()
			if err != nil {
				return nil, err
			}
			argv = make([]string, len(cfg.Command))
			for i, a := range cfg.Command {
				argv[i] = strings.ReplaceAll(a, WorkspaceArg, ws)
			}
			dir = strings.ReplaceAll(dir, WorkspaceArg, ws)
			if dir == "" {
				dir = ws
			}
		}
		p, err := startProcess(argv, cfg.Env, dir, cfg.Stderr)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", argv[0], err)
		}
		c.proc = p
		transport = captureTransport{&sdk.IOTransport{Reader: p, Writer: p}, c.lists}
	} else {
		transport = &sdk.StreamableClientTransport{
			Endpoint:   cfg.URL,
			HTTPClient: httpClient(cfg, c.lists),
			// Only answers to calls are needed: no standing GET stream.
			DisableStandaloneSSE: true,
		}
	}
	cs, err := s.c.client.Connect(ctx, transport, nil)
	if err != nil {
		if c.proc != nil {
			c.proc.kill()
			return nil, fmt.Errorf("%w; %s", err, c.proc.describe())
		}
		return nil, err
	}
	c.cs = cs
	s.c.stats.connects.Add(1)
	go func() {
		_ = cs.Wait()
		close(c.ended)
	}()
	return c, nil
}

// ensureWorkspace returns the session's workspace, creating it first.
func (s *session) ensureWorkspace() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.workspace == "" {
		dir, err := os.MkdirTemp(s.c.cfg.WorkspaceRoot, "agentrl-mcp-")
		if err != nil {
			return "", fmt.Errorf("making the workspace: %w", err)
		}
		s.workspace = dir
	}
	return s.workspace, nil
}

// watch forgets c once it ends on its own (a stdio server that exits), so
// that the next call connects again instead of failing on it.
func (s *session) watch(c *conn) {
	<-c.ended
	s.drop(c, false)
}

// drop forgets c as the live connection and shuts it down: killed at once
// when hard (a hung server), stopped gently otherwise.
func (s *session) drop(c *conn, hard bool) {
	s.mu.Lock()
	if s.cur == c {
		s.cur = nil
		s.lastErr = errors.New(c.describe(nil))
	}
	s.mu.Unlock()
	c.shut(hard)
}

// close ends the session: its connection is stopped and its workspace
// removed. Calls in flight fail.
func (s *session) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	c := s.cur
	s.cur = nil
	s.mu.Unlock()
	s.cancel()
	if c != nil {
		c.shut(false)
	}
	s.mu.Lock()
	ws := s.workspace
	s.mu.Unlock()
	removeAll(ws)
	s.c.forget(s)
}

func (s *session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// call calls t with args on the session.
func (s *session) call(ctx context.Context, t *Tool, args json.RawMessage) (tool.Result, error) {
	start := time.Now()
	cfg, st := s.c.cfg, &s.c.stats
	md := map[string]any{"server": s.c.name, "tool": t.remote, "session": s.kind}
	fail := func(kind, content string, err error) (tool.Result, error) {
		md["error"] = kind
		return tool.Result{Content: content, Failed: true, Duration: time.Since(start), Metadata: md}, err
	}
	obj, err := objectArgs(args)
	if err != nil {
		return fail("bad_arguments", fmt.Sprintf("Error: invalid arguments for %s: %v", t.name, err), nil)
	}
	st.calls.Add(1)
	c, err := s.get(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return fail("cancelled", fmt.Sprintf("Error: the call to %s was cancelled", t.name), ctx.Err())
		}
		st.unavailable.Add(1)
		return fail("unavailable", fmt.Sprintf("Error: tool %s is unavailable: %v", t.name, modelText(err)),
			fmt.Errorf("%s: %w", s.c.name, err))
	}
	md["connection"] = c.n

	cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
	res, err := c.cs.CallTool(cctx, &sdk.CallToolParams{Name: t.remote, Arguments: obj})
	timedOut := errors.Is(cctx.Err(), context.DeadlineExceeded)
	cancel()
	var wire *jsonrpc.Error
	switch {
	case err == nil:
		text := renderResult(res)
		if res.StructuredContent != nil {
			md["structured_content"] = res.StructuredContent
		}
		content, truncated := cfg.Budget.Truncate(text)
		md["truncated"] = truncated
		if res.IsError {
			st.toolErrors.Add(1)
			md["error"] = "tool_error"
		}
		return tool.Result{Content: content, Failed: res.IsError, Duration: time.Since(start), Metadata: md}, nil
	case errors.As(err, &wire) && !sdkCode(wire.Code):
		// The server answered, refusing the call: the model reads why.
		st.protocolErrors.Add(1)
		md["rpc_code"] = wire.Code
		return fail("protocol_error", "Error: "+wire.Message, nil)
	case timedOut:
		st.timeouts.Add(1)
		waited := cfg.CallTimeout
		if ctx.Err() != nil { // the caller's deadline came first
			waited = time.Since(start).Round(time.Millisecond)
		}
		hung := !s.isClosed() && !c.answers(cfg.PingTimeout)
		md["hung"] = hung
		if hung {
			st.killed.Add(1)
			s.drop(c, true)
		}
		return fail("timeout", fmt.Sprintf("Error: tool %s did not answer within %v", t.name, waited),
			fmt.Errorf("%w: %s: %s after %v", ErrTimeout, s.c.name, t.remote, waited))
	case ctx.Err() != nil:
		return fail("cancelled", fmt.Sprintf("Error: the call to %s was cancelled", t.name), context.Cause(ctx))
	case s.isClosed():
		return fail("cancelled", fmt.Sprintf("Error: the call to %s was cancelled", t.name),
			fmt.Errorf("%w: %s: %w", ErrUnavailable, s.c.name, errSessionClosed))
	case !errors.Is(err, sdk.ErrConnectionClosed) && c.answers(cfg.PingTimeout):
		// Alive, yet the answer could not be used (it did not decode,
		// say): the model reads what went wrong.
		st.protocolErrors.Add(1)
		return fail("protocol_error", "Error: "+err.Error(), nil)
	default:
		st.lost.Add(1)
		s.drop(c, true)
		why := c.describe(err)
		return fail("connection_lost", fmt.Sprintf("Error: tool %s failed: %s", t.name, why),
			fmt.Errorf("%w: %s: %s: %s", ErrConnectionLost, s.c.name, t.remote, why))
	}
}

// objectArgs returns args if they are a JSON object; empty means {}.
func objectArgs(args json.RawMessage) (json.RawMessage, error) {
	a := bytes.TrimSpace(args)
	if len(a) == 0 {
		return json.RawMessage("{}"), nil
	}
	if a[0] != '{' || !json.Valid(a) {
		return nil, errors.New("arguments must be a JSON object")
	}
	return a, nil
}

// modelText is err's text without this package's prefix.
func modelText(err error) string {
	return strings.ReplaceAll(err.Error(), "mcp: ", "")
}

// conn is one connection of a session: an initialized MCP session and,
// over stdio, the server's process.
type conn struct {
	n     int // which connection of its session: 1, then one per restart
	cs    *sdk.ClientSession
	proc  *process // nil over HTTP
	lists *listCapture
	ended chan struct{} // closed when the MCP connection has ended
	grace time.Duration
	once  sync.Once
}

// answers reports whether the server answers a ping within d.
func (c *conn) answers(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.cs.Ping(ctx, nil) == nil
}

// describe says what became of the connection, for the model and errors:
// how a stdio server ended, or the HTTP error (err, when not nil).
func (c *conn) describe(err error) string {
	if c.proc != nil {
		// The connection may end a moment before the process is reaped.
		c.proc.waitExit(200 * time.Millisecond)
		return c.proc.describe()
	}
	if err != nil {
		return "the server stopped answering: " + modelText(err)
	}
	return "the connection to the server ended"
}

// sdkCode reports whether a JSON-RPC error code is one the SDK gives
// errors of its own (a request it could not deliver, a connection
// closing), rather than a server's answer.
func sdkCode(code int64) bool {
	switch code {
	case -32001, -32003, -32004, -32005: // unknown, client closing, server closing, rejected by transport
		return true
	}
	return false
}

// shut ends the connection once: a hung server is killed at once, any
// other stopped as the MCP specification asks (see process.stop). Closing
// the MCP session waits for calls in flight, which the process's end
// fails; over HTTP it is bounded by the grace period.
func (c *conn) shut(hard bool) {
	c.once.Do(func() {
		closed := make(chan struct{})
		go func() {
			_ = c.cs.Close()
			close(closed)
		}()
		if c.proc != nil {
			if hard {
				c.proc.kill()
			} else {
				c.proc.stop(c.grace)
			}
		}
		t := time.NewTimer(2 * c.grace)
		defer t.Stop()
		select {
		case <-closed:
		case <-t.C:
		}
	})
}
