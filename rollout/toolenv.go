package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/agentrl/agentrl/tool"
)

// ToolEnv is the environment of the tool loop: each turn's tool calls run
// through a tool.Registry, concurrently, and their results are the
// observation (tool messages, rendered by Config.Format); a turn without a
// call ends the episode (StopNoToolCall). The engine runs one over the
// request's tools when Config.Env is nil; build your own in an
// EnvFactory to give each episode tools over state of its own (a
// database, a sandbox session: close it in OnClose), or embed one in an
// environment that also answers in words.
//
// A ToolEnv serves one episode. Tools that are tool.Stateful get a
// session of their own for it (tool.Registry.OpenSessions), opened by
// Open and closed by Close.
type ToolEnv struct {
	// Tools are the tools the model may call; nil means none (every call
	// gets an unknown-tool error result).
	Tools *tool.Registry
	// MaxToolCalls bounds the calls of the episode and MaxCallsPerTurn
	// those of one turn; 0 means no bound. Calls beyond either are not
	// executed and get an error result (ErrTooManyCalls); a turn that
	// calls tools once MaxToolCalls are spent ends the episode
	// (StopMaxToolCalls).
	MaxToolCalls    int
	MaxCallsPerTurn int
	// Timeout bounds each call; 0 leaves it to the tool.
	Timeout time.Duration
	// Slots, when not nil, bounds the calls running at once: share one
	// among the episodes to bound them all (a sandbox's capacity).
	Slots *semaphore.Weighted
	// OnClose, when set, is called by Close after the sessions are
	// closed: release the episode's own state there.
	OnClose func() error

	reg           *tool.Registry // Tools, with the episode's sessions
	closeSessions func() error
	calls         int // calls counted against MaxToolCalls
}

// Open opens the episode's sessions of stateful tools and offers the
// tools' schemas.
func (e *ToolEnv) Open(ctx context.Context) (Opening, error) {
	if e.Tools == nil {
		reg, err := tool.NewRegistry()
		if err != nil {
			return Opening{}, err
		}
		e.Tools = reg
	}
	e.reg, e.closeSessions = e.Tools.OpenSessions(ctx)
	return Opening{Tools: e.reg.Schemas()}, nil
}

// Step runs the turn's calls and answers with their results, in call
// order. A turn without calls, the Final turn and a turn past
// MaxToolCalls end the episode, their calls unexecuted. Step fails only
// when ctx ends; every failure of a call is an error result the model
// reads.
func (e *ToolEnv) Step(ctx context.Context, a Action) (Feedback, error) {
	switch {
	case len(a.Calls) == 0:
		return Feedback{Done: true, Stop: StopNoToolCall}, nil
	case a.Final:
		return Feedback{Done: true, Stop: StopMaxTurns}, nil
	}
	if e.reg == nil {
		return Feedback{}, errors.New("rollout: ToolEnv.Step before Open")
	}
	quota := -1
	if e.MaxToolCalls > 0 {
		quota = e.MaxToolCalls - e.calls
		if quota <= 0 {
			return Feedback{Done: true, Stop: StopMaxToolCalls}, nil
		}
	}
	calls, counted, err := e.execute(ctx, a.Turn, a.Calls, quota)
	if err != nil {
		return Feedback{}, err
	}
	e.calls += counted
	obs := make([]Message, len(calls))
	for i := range calls {
		obs[i] = Message{Role: "tool", Content: calls[i].Result.Content}
	}
	return Feedback{Observation: obs, Calls: calls}, nil
}

// Close closes the episode's sessions, then calls OnClose; it returns
// their errors joined.
func (e *ToolEnv) Close() error {
	var errs []error
	if e.closeSessions != nil {
		errs = append(errs, e.closeSessions())
		e.closeSessions = nil
	}
	if e.OnClose != nil {
		errs = append(errs, e.OnClose())
	}
	return errors.Join(errs...)
}

// execute runs a turn's calls concurrently and returns them with their
// results in call order, and how many count against MaxToolCalls. It
// fails only when ctx ends.
func (e *ToolEnv) execute(ctx context.Context, turn int, parsed []ParsedCall, quota int) ([]ToolCall, int, error) {
	calls := make([]ToolCall, len(parsed))
	counted := 0
	var wg sync.WaitGroup
	for i, pc := range parsed {
		c := &calls[i]
		*c = ToolCall{Turn: turn, Name: pc.Name, Arguments: pc.Arguments, Raw: pc.Raw}
		switch {
		case pc.Err != nil:
			counted++
			c.Err = pc.Err
			c.Result = errorResult(modelText(pc.Err))
		case e.MaxCallsPerTurn > 0 && i >= e.MaxCallsPerTurn:
			c.Err = fmt.Errorf("%w: call %d of a turn, at most %d are executed", ErrTooManyCalls, i+1, e.MaxCallsPerTurn)
			c.Result = errorResult(fmt.Sprintf("not executed: at most %d tool calls per turn", e.MaxCallsPerTurn))
		case quota >= 0 && counted >= quota:
			c.Err = fmt.Errorf("%w: the trajectory's %d calls are spent", ErrTooManyCalls, e.MaxToolCalls)
			c.Result = errorResult(fmt.Sprintf("not executed: at most %d tool calls in all", e.MaxToolCalls))
		default:
			counted++
			// The registry checks the call before it takes a tool slot;
			// its error, without the package prefix, is what the model
			// reads, as tool.Registry.Call would show it.
			if _, err := e.reg.Validate(pc.Name, pc.Arguments); err != nil {
				c.Err = err
				if errors.Is(err, tool.ErrUnknownTool) {
					c.Err = fmt.Errorf("%w %q", ErrUnknownTool, pc.Name)
				}
				c.Result = errorResult(strings.TrimPrefix(err.Error(), "tool: "))
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.call(ctx, c)
			}()
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	return calls, counted, nil
}

func errorResult(msg string) tool.Result {
	return tool.Result{Content: "Error: " + msg, Failed: true}
}

// modelText is err's text without the package prefix, for the model.
func modelText(err error) string {
	return strings.TrimPrefix(err.Error(), "rollout: ")
}

type callResult struct {
	res tool.Result
	err error
}

// call runs one tool call into c. It waits for a slot, bounds the call
// by Timeout and returns as soon as the call's context ends, even when
// the tool ignores it, and turns a panicking tool into an error result.
func (e *ToolEnv) call(ctx context.Context, c *ToolCall) {
	if e.Slots != nil {
		if err := e.Slots.Acquire(ctx, 1); err != nil {
			return
		}
		defer e.Slots.Release(1)
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if e.Timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, e.Timeout)
	}
	defer cancel()
	start := time.Now()
	done := make(chan callResult, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- callResult{err: fmt.Errorf("tool panicked: %v", p)}
			}
		}()
		r, err := e.reg.Call(cctx, c.Name, c.Arguments)
		done <- callResult{r, err}
	}()
	var r callResult
	returned := false
	select {
	case r = <-done:
		returned = true
	case <-cctx.Done():
		r.err = cctx.Err()
	}
	c.Latency = time.Since(start)
	switch {
	case ctx.Err() != nil:
		// The episode is ending; execute reports ctx's error.
	case errors.Is(cctx.Err(), context.DeadlineExceeded) && (!returned || r.err != nil):
		c.Err = fmt.Errorf("%w after %v", ErrToolTimeout, e.Timeout)
		c.Result = errorResult(fmt.Sprintf("tool %q timed out after %v", c.Name, e.Timeout))
		c.Result.Duration = c.Latency
	case r.err != nil:
		c.Err = fmt.Errorf("%w: %q: %w", ErrToolFailed, c.Name, r.err)
		c.Result = errorResult(fmt.Sprintf("tool %q failed: %v", c.Name, r.err))
		c.Result.Duration = c.Latency
	default:
		c.Result = r.res
		if c.Result.Duration == 0 {
			c.Result.Duration = c.Latency
		}
	}
}
