package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"
)

// ErrNoSession is wrapped by the error of a call to a Stateful tool whose
// session could not be opened for the conversation (see
// Registry.OpenSessions).
var ErrNoSession = errors.New("tool: no session")

// Stateful is implemented by a Tool whose calls within one conversation
// (one trajectory of a rollout) share state that other conversations must
// not see: a server process, a connection, a working directory. Whoever
// runs a conversation opens a session of the tool at its start, calls the
// session's instance of the tool instead of the tool itself, and closes
// the session at its end, however the conversation ended;
// Registry.OpenSessions does the first and the last, and the rollout
// engine uses it for every trajectory.
//
// Called directly, outside any session, a Stateful tool still works as an
// ordinary Tool; where its state then lives is the tool's to document.
type Stateful interface {
	Tool
	// SessionOpener returns what opens the tool's sessions. Tools that
	// share state with each other (the tools of one server) return the
	// same opener, which must then be comparable (a pointer, say): one
	// session of it serves all of them in a conversation.
	SessionOpener() SessionOpener
}

// SessionOpener opens sessions of a set of Stateful tools.
type SessionOpener interface {
	// OpenSession opens a session for one conversation. It should be
	// cheap, deferring costly work such as starting a process to the
	// first call that needs it, since many conversations never call the
	// tools.
	OpenSession(ctx context.Context) (Session, error)
}

// Session is one conversation's instance of a set of Stateful tools.
type Session interface {
	// Tool returns the session's instance of the tool named name, which
	// must have the tool's name and schema.
	Tool(name string) (Tool, bool)
	// Close ends the session and releases what it holds. It is called
	// once, after the conversation's last call has returned or been
	// abandoned.
	Close() error
}

// OpenSessions returns the registry one conversation should call: r itself
// when none of its tools is Stateful; otherwise a copy of r in which each
// Stateful tool is replaced by its instance in a session opened for the
// conversation, one session per SessionOpener. The returned function
// closes those sessions and returns their errors joined; call it once the
// conversation is over.
//
// A session that cannot be opened (OpenSession fails or panics, or the
// session lacks one of the tools) fails no conversation: each call to
// the tools concerned returns a failed Result that says why, with an error
// wrapping ErrNoSession, so that the model reads the failure and whoever
// counts tool errors counts it.
func (r *Registry) OpenSessions(ctx context.Context) (*Registry, func() error) {
	r.mu.RLock()
	tools := append([]Tool(nil), r.tools...)
	params := slices.Clone(r.params)
	byName := maps.Clone(r.byName)
	r.mu.RUnlock()

	type opened struct {
		session Session
		err     error
	}
	var (
		sessions []opened
		byOpener = map[any]int{} // comparable openers → index in sessions
		replaced = false
	)
	for i, t := range tools {
		st, ok := t.(Stateful)
		if !ok {
			continue
		}
		replaced = true
		op := st.SessionOpener()
		keyed := op != nil && reflect.TypeOf(op).Comparable()
		k, seen := -1, false
		if keyed {
			k, seen = byOpener[op]
		}
		if !seen {
			s, err := openSession(ctx, op)
			sessions = append(sessions, opened{s, err})
			k = len(sessions) - 1
			if keyed {
				byOpener[op] = k
			}
		}
		o := sessions[k]
		name := t.Name()
		switch {
		case o.err != nil:
			tools[i] = noSession{t, o.err}
		default:
			inst, ok := o.session.Tool(name)
			if !ok || inst == nil {
				tools[i] = noSession{t, fmt.Errorf("the session has no tool %q", name)}
				continue
			}
			tools[i] = inst
		}
	}
	if !replaced {
		return r, func() error { return nil }
	}
	out := &Registry{tools: tools, params: params, byName: byName}
	closeAll := func() error {
		var errs []error
		for _, o := range sessions {
			if o.session != nil {
				errs = append(errs, closeSession(o.session))
			}
		}
		return errors.Join(errs...)
	}
	return out, closeAll
}

// openSession opens a session of op, turning a nil opener, a nil session
// and a panic into errors.
func openSession(ctx context.Context, op SessionOpener) (s Session, err error) {
	if op == nil {
		return nil, errors.New("the tool has no session opener")
	}
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("%w: opening a session: %v", ErrToolPanic, p)
		}
	}()
	s, err = op.OpenSession(ctx)
	if err == nil && s == nil {
		err = errors.New("OpenSession returned no session")
	}
	return s, err
}

func closeSession(s Session) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: closing a session: %v", ErrToolPanic, p)
		}
	}()
	return s.Close()
}

// noSession stands in for a Stateful tool whose session could not be
// opened: every call fails, saying why.
type noSession struct {
	Tool
	err error
}

func (t noSession) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	start := time.Now()
	return failed(start, "no_session", "Error: tool %s is unavailable: %v", t.Name(), t.err),
		fmt.Errorf("%w for %s: %w", ErrNoSession, t.Name(), t.err)
}
