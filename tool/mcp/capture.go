package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK decodes a tool's inputSchema into a map[string]any, which loses
// the order of its keys, and a chat template renders a schema in the order
// it is given. So each connection keeps the raw result of its last
// tools/list request, read off the wire: from the JSON-RPC stream over
// stdio, from the HTTP response (JSON or server-sent events) over HTTP.
// Only tools/list is looked at; every other message passes untouched.

const methodListTools = "tools/list"

// listCapture holds the raw result of the last tools/list request.
type listCapture struct {
	mu     sync.Mutex
	id     string          // the request's id, as JSON
	result json.RawMessage // its result, once seen
	body   *lockedBuffer   // over HTTP: the response body as read so far
}

// expect notes a tools/list request with id (JSON), forgetting the last.
func (c *listCapture) expect(id string, body *lockedBuffer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.id, c.result, c.body = id, nil, body
}

// received records the result of a response to id.
func (c *listCapture) received(id string, result json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == c.id && c.id != "" {
		c.result = bytes.Clone(result)
	}
}

// take returns the raw result of the last tools/list request.
func (c *listCapture) take() (json.RawMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.result == nil && c.body != nil {
		c.result = findResult(c.body.Bytes(), c.id)
	}
	return c.result, c.result != nil
}

// idJSON is a JSON-RPC id as JSON text.
func idJSON(id jsonrpc.ID) string {
	b, err := json.Marshal(id.Raw())
	if err != nil {
		return ""
	}
	return string(b)
}

// captureTransport wraps a stream transport's connection (stdio), whose
// concrete type the SDK asks nothing more of than sdk.Connection.
type captureTransport struct {
	sdk.Transport
	lists *listCapture
}

func (t captureTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return captureConn{c, t.lists}, nil
}

type captureConn struct {
	sdk.Connection
	lists *listCapture
}

func (c captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == methodListTools && req.ID.IsValid() {
		c.lists.expect(idJSON(req.ID), nil)
	}
	return c.Connection.Write(ctx, msg)
}

func (c captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
		c.lists.received(idJSON(resp.ID), resp.Result)
	}
	return msg, err
}

// captureRoundTripper keeps the body of the response to a tools/list POST.
type captureRoundTripper struct {
	next  http.RoundTripper
	lists *listCapture
}

func (t captureRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.Body == nil || req.Body == http.NoBody {
		return t.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	// A RoundTripper must not change the request it is given.
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var buf *lockedBuffer
	if json.Unmarshal(body, &msg) == nil && msg.Method == methodListTools && len(msg.ID) > 0 {
		buf = &lockedBuffer{}
		t.lists.expect(compactID(msg.ID), buf)
	}
	resp, err := t.next.RoundTrip(out)
	if err != nil || buf == nil {
		return resp, err
	}
	resp.Body = teeBody{resp.Body, buf}
	return resp, nil
}

// compactID writes an id as idJSON does: 7, "abc".
func compactID(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return ""
	}
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		v = int64(f)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// maxCapture bounds the bytes of an HTTP response kept (the SDK's own
// bound on one message is 16 MiB).
const maxCapture = 32 << 20

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len()+len(p) <= maxCapture {
		b.buf.Write(p)
	}
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

type teeBody struct {
	io.ReadCloser
	buf *lockedBuffer
}

func (t teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		t.buf.Write(p[:n])
	}
	return n, err
}

// findResult finds the result of the response to id in an HTTP response
// body: one JSON-RPC message, or server-sent events whose data are
// messages.
func findResult(body []byte, id string) json.RawMessage {
	match := func(data []byte) json.RawMessage {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(data, &m) != nil || len(m.Result) == 0 || compactID(m.ID) != id {
			return nil
		}
		return m.Result
	}
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '{' {
		return match(t)
	}
	var data []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, maxCapture)
	flush := func() json.RawMessage {
		defer func() { data = data[:0] }()
		if len(data) == 0 {
			return nil
		}
		return match([]byte(strings.Join(data, "\n")))
	}
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case line == "":
			if r := flush(); r != nil {
				return r
			}
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return flush()
}
