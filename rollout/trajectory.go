package rollout

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/tool"
)

// Message is one message of a conversation to render into a prompt.
type Message struct {
	Role    string
	Content string
}

// Request is one prompt to roll out N times.
type Request struct {
	// ID names the prompt; the N trajectories of a request share it, so it
	// serves as the group id of group-relative advantages.
	ID string
	// The prompt, in exactly one of three forms: token ids as the model
	// will see them (a chat template already applied, generation prompt
	// included); text to encode with Config.Tokenizer; or messages to
	// render with Config.Render and the tools' schemas, then encode.
	Prompt     []int
	PromptText string
	Messages   []Message
	// Tools the model may call; nil means Config.Tools. They must form a
	// tool.Registry as Config.Tools must (Run fails otherwise).
	Tools []tool.Tool
	// Params are the sampling parameters of every turn. Params.MaxNewTokens
	// is the per-turn token budget (0: only the trajectory budgets bound
	// a turn). The parser's stop strings are added to Params.Stop, and
	// Logprobs is always asked for. With a Seed, sample s of the N uses
	// Seed+s, so that the samples differ yet are reproducible.
	Params lm.SampleParams
	// N is the number of trajectories to sample; 0 means 1.
	N int
	// Task is handed to Config.Env, which makes each trajectory's
	// environment from it: the dataset row behind the prompt.
	Task Task
}

// StopReason says why a trajectory ended.
type StopReason string

const (
	// StopNoToolCall: the last turn ended (end-of-turn token or stop
	// string) without a tool call — the model answered.
	StopNoToolCall StopReason = "no_tool_call"
	// StopTurnBudget: the last turn generated its MaxNewTokens.
	StopTurnBudget StopReason = "turn_budget"
	// StopResponseBudget: the trajectory's response span reached
	// Config.MaxResponseTokens, or the tool results of the last turn would
	// have exceeded it (they are then left out).
	StopResponseBudget StopReason = "response_budget"
	// StopTotalBudget: the whole sequence reached Config.MaxTotalTokens
	// (the model's context), or the last tool results would have.
	StopTotalBudget StopReason = "total_budget"
	// StopMaxTurns: the last turn called tools but was the MaxTurns-th;
	// its calls were not executed.
	StopMaxTurns StopReason = "max_turns"
	// StopMaxToolCalls: the last turn called tools after MaxToolCalls
	// calls; its calls were not executed.
	StopMaxToolCalls StopReason = "max_tool_calls"
)

// Errors a ToolCall's Err may wrap, besides ErrBadToolCall and
// tool.ErrBadArguments. Each becomes an error result that the model sees.
var (
	// ErrUnknownTool: the call names no tool of the request.
	ErrUnknownTool = errors.New("rollout: unknown tool")
	// ErrToolTimeout: the call ran past Config.ToolTimeout.
	ErrToolTimeout = errors.New("rollout: tool call timed out")
	// ErrTooManyCalls: the call was beyond MaxCallsPerTurn or the
	// trajectory's MaxToolCalls, and was not executed.
	ErrTooManyCalls = errors.New("rollout: too many tool calls")
	// ErrToolFailed: the tool returned an error (it could not work).
	ErrToolFailed = errors.New("rollout: tool failed")
)

// Trajectory is one rollout of a Request, token-faithful: Tokens are the
// prompt, then every turn's tokens exactly as the sampler returned them,
// with the tokens of the tool results between turns; nothing is ever
// re-rendered or re-tokenised.
type Trajectory struct {
	// ID is the Request's ID, Request its index in Run's argument and
	// Sample which of its N samples this is.
	ID      string
	Request int
	Sample  int
	// Tokens is the whole sequence; Tokens[:PromptLen] is the prompt.
	Tokens    []int
	PromptLen int
	// Mask is aligned with Tokens: 1 for tokens sampled by the policy, 0
	// for the prompt, tool results and template glue.
	Mask []float32
	// LogProbs is aligned with Tokens: the sampler's log-probability of
	// each sampled token (lm.Generation.LogProbs), 0 elsewhere. Nil
	// when the sampler gave none for some turn. RawLogProbs likewise holds
	// lm.Generation.RawLogProbs.
	LogProbs    []float32
	RawLogProbs []float32
	// Turns are the generation turns, in order: their token spans, and
	// the environment's reward and state for each.
	Turns []Turn
	// ToolCalls are every call of every turn, in order.
	ToolCalls []ToolCall
	// Response is the decoded text of Tokens[PromptLen:], tool results
	// included as the model saw them: what reward functions score.
	Response string
	// Stop says why the trajectory ended.
	Stop StopReason
	// EnvErr, when not nil, wraps ErrEnv: with Stop StopEnvError, the
	// failure of the environment that ended the trajectory (after the
	// turns it holds); otherwise the error of the environment's Close,
	// after the episode had ended.
	EnvErr error
	// Metadata is the environment's about the episode
	// (Opening.Metadata).
	Metadata map[string]any
	// Duration is the wall-clock time from the first request to the end.
	Duration time.Duration
}

// ResponseLen returns the number of tokens after the prompt.
func (t *Trajectory) ResponseLen() int { return len(t.Tokens) - t.PromptLen }

// SampledTokens returns the number of tokens the policy generated (mask 1).
func (t *Trajectory) SampledTokens() int {
	n := 0
	for _, tr := range t.Turns {
		n += tr.End - tr.Start
	}
	return n
}

// ResultTokens returns the number of tool-result and glue tokens after
// the prompt (mask 0).
func (t *Trajectory) ResultTokens() int { return t.ResponseLen() - t.SampledTokens() }

// OldestWeightVersion returns the oldest weight version among the
// turns, read as the trainer's integer policy versions (package fleet's
// WeightVersion), and whether every turn had one: the version the
// trajectory's staleness counts from. A trajectory without turns has
// none.
func (t *Trajectory) OldestWeightVersion() (int, bool) {
	vs, ok := t.TokenVersions()
	if !ok || len(t.Turns) == 0 {
		return 0, false
	}
	oldest, found := 0, false
	for _, v := range vs {
		if v >= 0 && (!found || v < oldest) {
			oldest, found = v, true
		}
	}
	if !found { // only empty turns: their own versions
		for i, tr := range t.Turns {
			v, _ := strconv.Atoi(tr.WeightVersion) // checked by TokenVersions
			if i == 0 || v < oldest {
				oldest = v
			}
		}
	}
	return oldest, true
}

// TokenVersions returns, for each token of Tokens, the weight version
// that sampled it, read as the trainer's integer policy versions
// (package fleet's WeightVersion) — a turn's WeightVersion, or for an
// interrupted turn its Segment's — and −1 for the tokens no policy
// sampled (prompt, tool results); and whether every turn (and segment)
// had a version. This is what the trainer bounds the staleness of, token
// by token.
func (t *Trajectory) TokenVersions() ([]int, bool) {
	vs := make([]int, len(t.Tokens))
	for i := range vs {
		vs[i] = -1
	}
	set := func(start, end int, version string) bool {
		v, err := strconv.Atoi(version)
		if err != nil || v < 0 || start < 0 || end > len(vs) || start > end {
			return false
		}
		for i := start; i < end; i++ {
			vs[i] = v
		}
		return true
	}
	for _, tr := range t.Turns {
		if !set(tr.Start, tr.End, tr.WeightVersion) {
			return nil, false
		}
		for _, sg := range tr.Segments {
			if !set(sg.Start, sg.End, sg.WeightVersion) {
				return nil, false
			}
		}
	}
	return vs, true
}

// ToolRewards returns the Reward of each tool call that reported one, in
// call order.
func (t *Trajectory) ToolRewards() []float64 {
	var r []float64
	for _, c := range t.ToolCalls {
		if c.Result.Reward != nil {
			r = append(r, *c.Result.Reward)
		}
	}
	return r
}

// TurnRewards returns each turn's reward (Turn.Reward), 0 for a turn
// without one, in turn order; nil when no turn has one.
func (t *Trajectory) TurnRewards() []float64 {
	var r []float64
	for i, tr := range t.Turns {
		if tr.Reward == nil {
			continue
		}
		if r == nil {
			r = make([]float64, len(t.Turns))
		}
		r[i] = *tr.Reward
	}
	return r
}

// TurnState names the state turn k was taken in: the environment's name
// for it (Turn.State) when it gave one, else a name derived from the
// tokens before the turn — a hash of Tokens[:Turns[k].Start], so that two
// trajectories of a group name a state the same exactly when the model
// saw the same context there. Equal names across a group's trajectories
// are the anchor states of GiGPO's step-level groups (see package
// advantage). It panics if k is out of range, as indexing Turns does.
func (t *Trajectory) TurnState(k int) string {
	tr := t.Turns[k]
	if tr.State != "" {
		return tr.State
	}
	h := sha256.New()
	var b [8]byte
	for _, id := range t.Tokens[:tr.Start] {
		binary.LittleEndian.PutUint64(b[:], uint64(id))
		h.Write(b[:])
	}
	return "tokens:" + hex.EncodeToString(h.Sum(nil)[:16])
}

// Turn is one Generate call — an assistant turn, or with a Tagged result
// format a segment of one — and the environment's answer that followed
// it (the tool results of the tool loop).
type Turn struct {
	// Tokens[Start:End] were generated in this turn; Tokens[End:ResultEnd]
	// are the tool results and glue appended after it (ResultEnd == End
	// when none were).
	Start, End, ResultEnd int
	// Text is the decoded text of the generated tokens.
	Text string
	// Finish, StopToken and StopString are the sampler's.
	Finish     lm.FinishReason
	StopToken  int
	StopString string
	// CachedTokens is the sampler's count of prompt tokens reused.
	CachedTokens int
	// WeightVersion names the weights that generated the turn, when the
	// sampler knows (lm.Generation.WeightVersion); "" otherwise. For a
	// turn a weight update interrupted, those of its first piece (the
	// oldest); Segments then names each piece's.
	WeightVersion string
	// Segments, for a turn that its sampler interrupted and the engine
	// continued (a partial rollout), are its pieces in order: the tokens
	// each holds (Tokens[Start:End], together Tokens[Turn.Start:Turn.End])
	// and the weights that sampled them, each token's log-probabilities
	// (Trajectory.LogProbs, RawLogProbs) those of its piece's weights.
	// Nil for a turn sampled in one piece, whose tokens WeightVersion
	// names.
	Segments []Segment
	// Calls indexes this turn's calls in Trajectory.ToolCalls.
	Calls []int
	// Reward is the environment's reward for the turn (Feedback.Reward);
	// nil when it gave none.
	Reward *float64
	// State names the state the turn was taken in, as the environment
	// named it: Opening.State for the first turn, the previous turn's
	// Feedback.State after it; "" when it named none (see TurnState).
	State string
	// Metadata is the environment's about the turn (Feedback.Metadata).
	Metadata map[string]any
	// Latency is the wall-clock time of the Generate call, queueing
	// included.
	Latency time.Duration
}

// Segment is the piece of a turn one weight version sampled.
type Segment struct {
	// Tokens[Start:End] were sampled by the weights WeightVersion names.
	Start, End    int
	WeightVersion string
}

// ToolCall is one tool call of a turn.
type ToolCall struct {
	// Turn is the index of the turn in Trajectory.Turns.
	Turn int
	// Name and Arguments are as parsed; Raw is the call's text.
	Name      string
	Arguments json.RawMessage
	Raw       string
	// Result is what the tool returned, or the error result the engine
	// made; Result.Content is what the model saw.
	Result tool.Result
	// Err is nil when the tool ran and returned a result (which may still
	// have Failed set); otherwise it wraps ErrBadToolCall,
	// tool.ErrBadArguments (the arguments do not fit the tool's schema;
	// the tool did not run), ErrUnknownTool, ErrToolTimeout,
	// ErrTooManyCalls or ErrToolFailed.
	Err error
	// Latency is the wall-clock time of the call, waiting for a slot
	// excluded.
	Latency time.Duration
}
