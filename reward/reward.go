package reward

import (
	"context"
	"errors"
)

// Input is one finished trajectory as a reward function sees it.
type Input struct {
	// Prompt is the task the response answers, as text (the prompt's
	// text, or its messages' contents); a judge shows it to the judging
	// model. Rule-based scorers ignore it; empty when the caller does not
	// fill it in.
	Prompt string
	// Response is the text the policy produced for the prompt, tool results
	// included as the model saw them.
	Response string
	// GroundTruth is the reference: a math answer ("\frac{1}{2}"), or for
	// code a JSON test specification (see ParseTests).
	GroundTruth string
	// DataSource names the data set the prompt came from; Router picks a
	// scorer by it, as verl's default_compute_score does.
	DataSource string
	// Extra carries the data set's extra_info column.
	Extra map[string]any
	// Turns is the number of assistant turns in the trajectory.
	Turns int
	// ToolCalls is the number of tool calls the trajectory made.
	ToolCalls int
	// ToolRewards holds the Reward of each tool call that reported one
	// (tool.Result.Reward), in call order.
	ToolRewards []float64
	// ResponseTokens is the number of tokens the model generated.
	ResponseTokens int
	// ToolTokens is the number of tool-result tokens inside the response
	// span (the loss-masked part).
	ToolTokens int
}

// Output is a reward function's verdict on one trajectory.
type Output struct {
	// Score is the scalar reward.
	Score float64
	// Acc reports that the answer is correct (for code: every test passed),
	// independent of shaping; it feeds accuracy metrics.
	Acc bool
	// Pred is the extracted answer, for majority voting (maj@k).
	Pred string
	// Reason says in words why the score is what it is.
	Reason string
	// Parts holds named components of a combined or shaped score
	// ("math", "format", "overlong", "tool_bonus", ...); nil when the
	// score has a single source.
	Parts map[string]float64
}

// Func scores one trajectory. It returns an error only when it cannot
// score at all (a tool executor is unreachable, ctx ended); every verdict
// about the response itself, including "no answer", is an Output.
type Func func(ctx context.Context, in Input) (Output, error)

// Sentinel errors.
var (
	// ErrConfig reports an invalid configuration.
	ErrConfig = errors.New("reward: invalid configuration")
	// ErrUnknownSource reports a data_source that no route handles.
	ErrUnknownSource = errors.New("reward: no reward function for data source")
	// ErrTests reports a malformed code test specification.
	ErrTests = errors.New("reward: malformed test specification")
)

func (o *Output) addPart(name string, v float64) {
	if o.Parts == nil {
		o.Parts = map[string]float64{}
	}
	o.Parts[name] = v
}
