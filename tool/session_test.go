package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counterOpener opens sessions in which each of its tools answers with the
// session's number and how many calls the session has had.
type counterOpener struct {
	names   []string
	opened  atomic.Int32
	closed  atomic.Int32
	openErr error
	panics  bool
	missing string // a name the sessions lack
}

func (o *counterOpener) OpenSession(ctx context.Context) (Session, error) {
	if o.panics {
		panic("opener exploded")
	}
	if o.openErr != nil {
		return nil, o.openErr
	}
	return &counterSession{opener: o, id: int(o.opened.Add(1))}, nil
}

type counterSession struct {
	opener *counterOpener
	id     int
	mu     sync.Mutex
	calls  int
	closed bool
}

func (s *counterSession) Tool(name string) (Tool, bool) {
	if name == s.opener.missing {
		return nil, false
	}
	return &fakeTool{name: name, schema: FunctionSchema(name, "counter"), call: func(context.Context, json.RawMessage) (Result, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls++
		return Result{Content: fmt.Sprintf("session %d call %d", s.id, s.calls)}, nil
	}}, true
}

func (s *counterSession) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("closed twice")
	}
	s.closed = true
	s.opener.closed.Add(1)
	return nil
}

// statefulTool is a Stateful tool of an opener; called outside a session
// it says so.
type statefulTool struct {
	name   string
	opener SessionOpener
}

func (t *statefulTool) Name() string                 { return t.name }
func (t *statefulTool) Schema() json.RawMessage      { return FunctionSchema(t.name, "counter") }
func (t *statefulTool) SessionOpener() SessionOpener { return t.opener }
func (t *statefulTool) Call(context.Context, json.RawMessage) (Result, error) {
	return Result{Content: "no session"}, nil
}

func call(t *testing.T, r *Registry, name string) (Result, error) {
	t.Helper()
	return r.Call(context.Background(), name, json.RawMessage(`{}`))
}

func TestOpenSessionsWithoutStatefulTools(t *testing.T) {
	r, err := NewRegistry(echoTool("a", FunctionSchema("a", "A.")))
	require.NoError(t, err)
	got, closeAll := r.OpenSessions(context.Background())
	assert.Same(t, r, got)
	assert.NoError(t, closeAll())
}

// TestOpenSessionsPerConversation: the tools of one opener share one
// session per conversation, two conversations never share one, plain
// tools stay as they are, and closing closes each session once.
func TestOpenSessionsPerConversation(t *testing.T) {
	op := &counterOpener{}
	r, err := NewRegistry(&statefulTool{"x", op}, echoTool("plain", FunctionSchema("plain", "P.")), &statefulTool{"y", op})
	require.NoError(t, err)

	a, closeA := r.OpenSessions(context.Background())
	b, closeB := r.OpenSessions(context.Background())
	assert.Equal(t, int32(2), op.opened.Load(), "one session per conversation, shared by x and y")
	assert.Equal(t, r.Names(), a.Names())
	assert.Equal(t, r.Schemas(), a.Schemas())

	for _, step := range []struct {
		reg  *Registry
		name string
		want string
	}{
		{a, "x", "session 1 call 1"},
		{a, "y", "session 1 call 2"}, // y sees x's call: one session
		{b, "x", "session 2 call 1"}, // b does not
		{a, "x", "session 1 call 3"},
		{r, "x", "no session"}, // the registry itself is unchanged
	} {
		res, err := call(t, step.reg, step.name)
		require.NoError(t, err)
		assert.Equal(t, step.want, res.Content)
	}
	res, err := call(t, a, "plain")
	require.NoError(t, err)
	assert.Equal(t, `{}`, res.Content)

	// Registering on the copy leaves the original alone.
	require.NoError(t, a.Register(echoTool("extra", FunctionSchema("extra", "E."))))
	assert.Equal(t, []string{"x", "plain", "y"}, r.Names())

	require.NoError(t, closeA())
	assert.Equal(t, int32(1), op.closed.Load())
	require.NoError(t, closeB())
	assert.Equal(t, int32(2), op.closed.Load())
}

// TestOpenSessionsFailures: a session that cannot be had fails the calls
// of its tools with ErrNoSession and a result that says why, never the
// conversation.
func TestOpenSessionsFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opener  SessionOpener
		wantErr error
		want    string
	}{
		{"open error", &counterOpener{openErr: errors.New("server not found")}, nil, "server not found"},
		{"open panics", &counterOpener{panics: true}, ErrToolPanic, "opener exploded"},
		{"missing tool", &counterOpener{missing: "x"}, nil, `the session has no tool "x"`},
		{"nil opener", nil, nil, "no session opener"},
		{"nil session", nilSessionOpener{}, nil, "returned no session"},
		// A func type is not comparable: it must not be used as a map
		// key, yet still get a session.
		{"non-comparable opener", funcOpener(func(context.Context) (Session, error) {
			return nil, errors.New("func opener failed")
		}), nil, "func opener failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRegistry(&statefulTool{"x", tc.opener})
			require.NoError(t, err)
			s, closeAll := r.OpenSessions(context.Background())
			res, err := call(t, s, "x")
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrNoSession)
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
			}
			assert.True(t, res.Failed)
			assert.Equal(t, "no_session", res.Metadata["error"])
			assert.Contains(t, res.Content, "Error: tool x is unavailable: ")
			assert.Contains(t, res.Content, tc.want)
			assert.NoError(t, closeAll())
		})
	}
}

type nilSessionOpener struct{}

func (nilSessionOpener) OpenSession(context.Context) (Session, error) { return nil, nil }

type funcOpener func(context.Context) (Session, error)

func (f funcOpener) OpenSession(ctx context.Context) (Session, error) { return f(ctx) }

type badCloseSession struct {
	counterSession
	err    error
	panics bool
}

func (s *badCloseSession) Close() error {
	if s.panics {
		panic("close exploded")
	}
	return s.err
}

type badCloseOpener struct {
	err    error
	panics bool
}

func (o *badCloseOpener) OpenSession(context.Context) (Session, error) {
	return &badCloseSession{counterSession: counterSession{opener: &counterOpener{}}, err: o.err, panics: o.panics}, nil
}

func TestOpenSessionsCloseErrors(t *testing.T) {
	boom := errors.New("process would not exit")
	r, err := NewRegistry(&statefulTool{"x", &badCloseOpener{err: boom}}, &statefulTool{"y", &badCloseOpener{panics: true}})
	require.NoError(t, err)
	_, closeAll := r.OpenSessions(context.Background())
	err = closeAll()
	assert.ErrorIs(t, err, boom)
	assert.ErrorIs(t, err, ErrToolPanic)
	assert.Contains(t, err.Error(), "close exploded")
}
