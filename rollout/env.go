package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// DefaultEnvTimeout bounds each call to an environment of Config.Env when
// Config.EnvTimeout is 0.
const DefaultEnvTimeout = time.Minute

// Errors a Trajectory's EnvErr wraps: ErrEnv always, and with it
// ErrEnvTimeout, ErrEnvPanic or ErrEnvOutput when the environment hung,
// panicked or answered something the engine cannot use; otherwise the
// environment's own error.
var (
	// ErrEnv: the environment of the trajectory failed.
	ErrEnv = errors.New("rollout: environment failed")
	// ErrEnvTimeout: a call to the environment ran past Config.EnvTimeout.
	ErrEnvTimeout = errors.New("rollout: environment timed out")
	// ErrEnvPanic: the environment panicked.
	ErrEnvPanic = errors.New("rollout: environment panicked")
	// ErrEnvOutput: the environment answered something the engine cannot
	// append or record (a role no chat template writes there, text that is
	// not UTF-8, a reward that is not finite, neither an answer nor the
	// end of the episode).
	ErrEnvOutput = errors.New("rollout: invalid environment output")
)

// Stop reasons of trajectories whose environment ended them.
const (
	// StopEnvDone: the environment ended the episode (Feedback.Done)
	// without a reason of its own.
	StopEnvDone StopReason = "env_done"
	// StopEnvError: the environment failed (Trajectory.EnvErr says how);
	// the trajectory holds the turns before the failure.
	StopEnvError StopReason = "env_error"
)

// Env is the other side of one trajectory's conversation: a game, a user
// simulator, a database or repository session, a judge that replies, or
// tools (ToolEnv, what the engine runs when Config.Env is nil). The
// engine makes one per trajectory with Config.Env, calls Open once, then
// Step after every model turn until the episode is done or a limit ends
// it, and Close once at the end, however the trajectory ended. The calls
// of one Env never overlap, except that Close may come while a call that
// ran past its deadline is still running.
//
// Whatever Step answers is appended to the trajectory token-faithfully:
// the observation messages are rendered in the model's chat format
// (Config.Format) after the turn, encoded and appended with loss mask 0,
// exactly as tool results are; earlier tokens are never re-rendered.
//
// An Env that returns an error, panics, runs past Config.EnvTimeout or
// answers garbage (ErrEnvOutput) ends its own trajectory, with Stop
// StopEnvError and the cause in Trajectory.EnvErr; the other trajectories
// of the batch go on.
type Env interface {
	// Open begins the episode.
	Open(ctx context.Context) (Opening, error)
	// Step answers the model's turn.
	Step(ctx context.Context, a Action) (Feedback, error)
	// Close releases what the episode holds.
	Close() error
}

// EnvFactory makes the Env of one trajectory from its task. It is called
// from the trajectory's goroutine, concurrently for the trajectories of a
// batch.
type EnvFactory func(ctx context.Context, task Task) (Env, error)

// Task is what an environment is made from: the dataset row of a request
// (Request.Task) and the trajectory the environment serves.
type Task struct {
	// GroundTruth, DataSource and Extra are the dataset row's, as
	// agentrl.Prompt holds them: a game's secret, a repository's commit,
	// a simulated user's persona.
	GroundTruth string
	DataSource  string
	Extra       map[string]any
	// ID, Request and Sample name the trajectory as its Trajectory
	// does; the engine sets them (leave them zero in Request.Task).
	ID      string
	Request int
	Sample  int
}

// Opening is how an episode begins.
type Opening struct {
	// Messages open the conversation when the environment writes its
	// beginning (a game's rules and first board): the engine renders the
	// request's Messages followed by these with Config.Render and Tools,
	// and the result is the prompt. The request must then give its prompt
	// as Messages, or none at all. Empty: the prompt is the request's.
	Messages []Message
	// Tools are the OpenAI function schemas of the tools the model may
	// call: rendered into a prompt made of messages, and handed to a
	// SchemaParser to read calls.
	Tools []json.RawMessage
	// State names the state the episode starts in (see Feedback.State).
	State string
	// Metadata is recorded as Trajectory.Metadata.
	Metadata map[string]any
}

// Action is one model turn, as the environment sees it.
type Action struct {
	// Turn is the turn's index in Trajectory.Turns.
	Turn int
	// Text is the turn decoded; Tokens are its ids exactly as sampled.
	Text   string
	Tokens []int
	// Calls are the tool calls Config.Parser found in Text, in order.
	Calls []ParsedCall
	// Final reports that this is the last turn Config.MaxTurns allows: no
	// observation will follow it, whatever Step answers (a tool
	// environment leaves such a turn's calls unexecuted).
	Final bool
}

// Feedback is an environment's answer to a turn.
type Feedback struct {
	// Observation is what the model reads next: messages of role "user",
	// "tool" or "system", rendered after the turn in the model's chat
	// format. A run of "tool" messages alone is rendered by
	// Config.Format's Render, as tool results are; other roles need a
	// Format that is a MessageFormat. It must not be empty unless Done.
	Observation []Message
	// Reward is the turn's reward (Turn.Reward); nil for none.
	Reward *float64
	// Done ends the episode; Observation is then not appended.
	Done bool
	// Stop is the trajectory's stop reason when Done; empty means
	// StopEnvDone.
	Stop StopReason
	// State names the state the episode is in after the turn: equal
	// names across the trajectories of a group mark the same state
	// (GiGPO's anchor states; see Trajectory.TurnState). Empty: no name.
	State string
	// Calls are the tool calls the environment ran for the turn, with
	// their results, recorded in Trajectory.ToolCalls (their Turn is set
	// by the engine).
	Calls []ToolCall
	// Metadata is recorded as the turn's Metadata.
	Metadata map[string]any
}

// checkOpening reports what makes o unusable.
func checkOpening(o Opening) error {
	for i, m := range o.Messages {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return fmt.Errorf("%w: opening message %d has role %q", ErrEnvOutput, i, m.Role)
		}
		if !utf8.ValidString(m.Content) {
			return fmt.Errorf("%w: opening message %d is not UTF-8", ErrEnvOutput, i)
		}
	}
	for i, s := range o.Tools {
		if !json.Valid(s) {
			return fmt.Errorf("%w: tool schema %d is not JSON", ErrEnvOutput, i)
		}
	}
	return nil
}

// checkFeedback reports what makes f unusable.
func checkFeedback(f Feedback) error {
	if f.Reward != nil && (math.IsNaN(*f.Reward) || math.IsInf(*f.Reward, 0)) {
		return fmt.Errorf("%w: reward %v", ErrEnvOutput, *f.Reward)
	}
	if f.Done {
		return nil
	}
	if len(f.Observation) == 0 {
		return fmt.Errorf("%w: neither an observation nor the end of the episode", ErrEnvOutput)
	}
	for i, m := range f.Observation {
		switch m.Role {
		case "user", "tool", "system":
		default:
			return fmt.Errorf("%w: observation message %d has role %q (want user, tool or system)", ErrEnvOutput, i, m.Role)
		}
		if !utf8.ValidString(m.Content) {
			return fmt.Errorf("%w: observation message %d is not UTF-8", ErrEnvOutput, i)
		}
	}
	return nil
}

// guarded runs f under a deadline of d (none for 0), recovering a panic.
// It returns as soon as the deadline passes, even if f ignores its
// context, leaving f to finish on its own. Its errors wrap ErrEnvTimeout,
// ErrEnvPanic or f's error; when ctx itself ends, ctx's error.
func guarded[T any](ctx context.Context, d time.Duration, f func(context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	run := func(ctx context.Context) (r result) {
		defer func() {
			if p := recover(); p != nil {
				r = result{err: fmt.Errorf("%w: %v", ErrEnvPanic, p)}
			}
		}()
		v, err := f(ctx)
		return result{v, err}
	}
	if d <= 0 {
		r := run(ctx)
		return r.v, r.err
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- run(cctx) }()
	var zero T
	select {
	case r := <-done:
		if r.err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
			return zero, fmt.Errorf("%w after %v: %w", ErrEnvTimeout, d, r.err)
		}
		return r.v, r.err
	case <-cctx.Done():
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		return zero, fmt.Errorf("%w after %v", ErrEnvTimeout, d)
	}
}

// envFailure is the error recorded for a failed call to an environment.
func envFailure(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrEnv, what, err)
}
