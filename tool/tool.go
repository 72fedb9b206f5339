package tool

import (
	"context"
	"encoding/json"
	"time"
)

// Tool is something the policy can call during a rollout.
//
// Call reports failures caused by the model — malformed arguments, code that
// raises, times out or exceeds a limit — inside the Result, with Failed set,
// so that the model sees them and the rollout goes on. Call returns a non-nil
// error only when the tool itself cannot work (the context was cancelled, a
// sandbox could not be started, a remote service is unreachable after its
// retries); the rollout engine turns that into an error result as well, but
// counts it separately.
type Tool interface {
	// Name is the function name the model uses to call the tool.
	Name() string
	// Schema is the tool's OpenAI function schema, as JSON whose key order
	// is kept when it is rendered into a chat template:
	// {"type": "function", "function": {"name", "description", "parameters"}}.
	Schema() json.RawMessage
	// Call runs the tool with the model's arguments, a JSON object.
	Call(ctx context.Context, args json.RawMessage) (Result, error)
}

// Result is what a tool call returns to the model and to the trainer.
type Result struct {
	// Content is the text the model sees as the tool's response.
	Content string
	// Failed reports that the call did not succeed: bad arguments, a
	// non-zero exit, a timeout or a resource limit. Content says why.
	Failed bool
	// Reward is an optional score the tool assigns to the call; reward
	// functions receive it with the trajectory. Nil when the tool gives none.
	Reward *float64
	// Duration is the wall-clock time the call took.
	Duration time.Duration
	// Metadata holds tool-specific facts about the call, such as the exit
	// code, whether output was truncated, or which isolation a sandbox had.
	Metadata map[string]any
}
