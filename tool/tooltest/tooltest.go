package tooltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentrl/agentrl/tool"
)

// ErrExhausted is returned by a Scripted tool called more often than it
// has scripted responses.
var ErrExhausted = errors.New("tooltest: no scripted response left")

// Response is one scripted answer of a Scripted tool.
type Response struct {
	// Result is returned as is (Duration is filled in when zero).
	Result tool.Result
	// Err is returned with Result.
	Err error
	// Delay is waited before answering; a context that ends first makes
	// the call return the context's error.
	Delay time.Duration
}

// Text returns a Response whose Result has content s.
func Text(s string) Response { return Response{Result: tool.Result{Content: s}} }

// Failure returns a Response whose Result failed with content s.
func Failure(s string) Response { return Response{Result: tool.Result{Content: s, Failed: true}} }

// Call is a call a Scripted tool received.
type Call struct {
	Args json.RawMessage
	Time time.Time
}

// Scripted is a tool.Tool that answers with scripted responses, in order,
// or with a function, and records every call. It is safe for concurrent
// use.
type Scripted struct {
	name   string
	schema json.RawMessage
	fn     func(ctx context.Context, args json.RawMessage) (tool.Result, error)

	mu        sync.Mutex
	responses []Response
	calls     []Call
}

// New returns a tool named name answering with responses in order; its
// schema declares params (none by default, see tool.FunctionSchema).
func New(name string, responses []Response, params ...tool.Param) *Scripted {
	return &Scripted{
		name:      name,
		schema:    tool.FunctionSchema(name, "A scripted tool for tests.", params...),
		responses: slices.Clone(responses),
	}
}

// Func returns a tool named name that answers with fn.
func Func(name string, fn func(ctx context.Context, args json.RawMessage) (tool.Result, error), params ...tool.Param) *Scripted {
	return &Scripted{name: name, schema: tool.FunctionSchema(name, "A scripted tool for tests.", params...), fn: fn}
}

// Echo returns a tool named name whose result is its arguments, as JSON.
func Echo(name string) *Scripted {
	return Func(name, func(ctx context.Context, args json.RawMessage) (tool.Result, error) {
		return tool.Result{Content: string(args)}, nil
	})
}

// WithSchema replaces the tool's schema and returns the tool.
func (s *Scripted) WithSchema(schema json.RawMessage) *Scripted {
	s.schema = slices.Clone(schema)
	return s
}

// Name returns the tool's name.
func (s *Scripted) Name() string { return s.name }

// Schema returns the tool's schema.
func (s *Scripted) Schema() json.RawMessage { return s.schema }

// Call records the call and answers with the next scripted response (or
// the function). With none left it returns a failed Result and an error
// wrapping ErrExhausted.
func (s *Scripted) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	start := time.Now()
	s.mu.Lock()
	s.calls = append(s.calls, Call{Args: slices.Clone(args), Time: start})
	n := len(s.calls)
	fn := s.fn
	var r Response
	ok := len(s.responses) > 0
	if ok {
		r = s.responses[0]
		s.responses = s.responses[1:]
	}
	s.mu.Unlock()
	if fn != nil {
		res, err := fn(ctx, args)
		if res.Duration == 0 {
			res.Duration = time.Since(start)
		}
		return res, err
	}
	if !ok {
		return tool.Result{Content: "Error: no scripted response", Failed: true},
			fmt.Errorf("%w: tool %q, call %d", ErrExhausted, s.name, n)
	}
	if r.Delay > 0 {
		t := time.NewTimer(r.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return tool.Result{Content: "Error: cancelled", Failed: true}, ctx.Err()
		}
	}
	res := r.Result
	if res.Duration == 0 {
		res.Duration = time.Since(start)
	}
	return res, r.Err
}

// Calls returns the calls received so far, in order.
func (s *Scripted) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Remaining returns how many scripted responses are left.
func (s *Scripted) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.responses)
}

// CallJSON marshals args, calls t and fails tb on a marshalling error or
// a non-nil error from the tool.
func CallJSON(tb testing.TB, t tool.Tool, args any) tool.Result {
	tb.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		tb.Fatalf("tooltest: marshalling arguments for %s: %v", t.Name(), err)
	}
	res, err := t.Call(context.Background(), raw)
	if err != nil {
		tb.Fatalf("tooltest: %s(%s): %v", t.Name(), raw, err)
	}
	return res
}

// CheckTool checks what every tool.Tool must do and fails tb otherwise:
// its schema registers (a function schema naming the tool), and calls with
// malformed arguments return a failed Result rather than panicking.
func CheckTool(tb testing.TB, t tool.Tool) {
	tb.Helper()
	if _, err := tool.NewRegistry(t); err != nil {
		tb.Fatalf("tooltest: %v", err)
	}
	for _, bad := range []string{`[]`, `"x"`, `{`, `null`, `123`} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					tb.Errorf("tooltest: %s panicked on arguments %s: %v", t.Name(), bad, p)
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := t.Call(ctx, json.RawMessage(bad))
			if err == nil && !res.Failed {
				tb.Errorf("tooltest: %s accepted malformed arguments %s: %+v", t.Name(), bad, res)
			}
		}()
	}
}
