package record

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// Rewrite says what Trajectories does with a call whose prompt does not
// extend the tokens of any trajectory so far (a call's prompt and
// sampled tokens): the agent rewrote its history (summarised it,
// dropped or edited a turn, branched from an earlier point), or went on
// from another of a request's n choices.
type Rewrite int

const (
	// Split starts a new trajectory at such a call: a session becomes
	// one trajectory per chain of calls that extend each other, each
	// token-faithful. The session's end comes last — of the chains that
	// end in one of the last request's choices, the one that holds the
	// most calls — and ends as its last answer says; every other ends
	// with StopRewritten. len(trajectories)-1 is the number of calls
	// that extended no trajectory.
	Split Rewrite = iota
	// Reject makes Trajectories fail with an error wrapping
	// ErrRewritten that names the call.
	Reject
)

// Reasons a recorded trajectory ends, beside rollout's StopNoToolCall
// (the last answer called no tool) and StopTurnBudget (the last answer
// reached its max_tokens or the context).
const (
	// StopRewritten: the session's end is another trajectory (Split).
	StopRewritten rollout.StopReason = "history_rewritten"
	// StopAgentEnded: the last answer called tools, and the agent ended
	// the episode without sending their results back.
	StopAgentEnded rollout.StopReason = "agent_ended"
)

var (
	// ErrRewritten is wrapped by Trajectories' error, with Reject, for a
	// session whose history was rewritten.
	ErrRewritten = errors.New("record: history rewritten")
	// ErrNoCalls is returned by Trajectories for a session without calls.
	ErrNoCalls = errors.New("record: session has no calls")
	// ErrUnanswered is the Err of a recorded tool call that no later
	// call of the trajectory answered with a tool message.
	ErrUnanswered = errors.New("record: the agent sent no result for the tool call")
)

// Trajectories turns a session's calls into token-faithful
// trajectories. Calls are taken in order; a call whose prompt begins
// with the tokens of a trajectory so far (its last call's prompt and
// sampled tokens) continues it — the latest such trajectory when
// several do —: the tokens between (the end of the previous answer the
// template writes, tool results, user turns, the generation prompt) are
// appended with loss mask 0, then the call's sampled tokens with mask 1
// and their log-probabilities. A call that continues none is handled as
// rw says; with Split it starts a trajectory of its own, so that the
// unchosen choices of a request with n > 1 end trajectories of their
// own, as does the history before an agent rewrote it. Each
// trajectory's ID is the session's; its Turns are the calls, its
// ToolCalls the tool calls the answers made, each with the content of
// the tool message that answered it (or Err ErrUnanswered).
func (r *Recorder) Trajectories(s Session, rw Rewrite) ([]rollout.Trajectory, error) {
	chains, err := chainCalls(s, rw)
	if err != nil {
		return nil, err
	}
	out := make([]rollout.Trajectory, len(chains))
	for i, idx := range chains {
		stop := StopRewritten
		if i == len(chains)-1 {
			last := s.Calls[idx[len(idx)-1]]
			stop = rollout.StopNoToolCall
			switch {
			case last.Reply.FinishReason == "length":
				stop = rollout.StopTurnBudget
			case len(last.Reply.ToolCalls) > 0:
				stop = StopAgentEnded
			}
		}
		out[i] = r.trajectory(s, idx, stop)
	}
	return out, nil
}

// chainCalls groups the session's calls into chains, each call
// continuing the latest chain whose tokens its prompt extends; the
// chains are ordered by their first call, except that the session's end
// comes last: of the chains that end in one of the last request's
// choices, the one that holds the most calls.
func chainCalls(s Session, rw Rewrite) ([][]int, error) {
	if len(s.Calls) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrNoCalls, s.ID)
	}
	type chain struct {
		idx []int
		cur []int // its tokens so far
	}
	var chains []*chain
	for i, c := range s.Calls {
		var into *chain
		for j := len(chains) - 1; j >= 0 && into == nil; j-- {
			if cur := chains[j].cur; len(c.Prompt) >= len(cur) && slices.Equal(c.Prompt[:len(cur)], cur) {
				into = chains[j]
			}
		}
		if into == nil {
			if i > 0 && rw == Reject {
				return nil, fmt.Errorf("%w: session %q, call %d: its prompt does not extend the prompt and answer of any earlier call", ErrRewritten, s.ID, i)
			}
			into = &chain{}
			chains = append(chains, into)
		}
		into.idx = append(into.idx, i)
		into.cur = slices.Concat(c.Prompt, c.Tokens)
	}
	// The last request's calls are its n choices; of the chains that
	// end in one, the one that holds the most calls (the earliest on a
	// tie) is the episode's end.
	final := len(s.Calls) - 1 - s.Calls[len(s.Calls)-1].Choice
	end := -1
	for j, c := range chains {
		if c.idx[len(c.idx)-1] >= final && (end < 0 || len(c.idx) > len(chains[end].idx)) {
			end = j
		}
	}
	out := make([][]int, 0, len(chains))
	for j, c := range chains {
		if j != end {
			out = append(out, c.idx)
		}
	}
	return append(out, chains[end].idx), nil
}

// trajectory builds the trajectory of the calls idx of s, each of
// which extends the one before.
func (r *Recorder) trajectory(s Session, idx []int, stop rollout.StopReason) rollout.Trajectory {
	first := &s.Calls[idx[0]]
	t := rollout.Trajectory{ID: s.ID, PromptLen: len(first.Prompt), Stop: stop}
	n := len(first.Prompt)
	for _, i := range idx {
		c := &s.Calls[i]
		n = max(n, len(c.Prompt)+len(c.Tokens))
	}
	t.Tokens = make([]int, 0, n)
	t.Mask = make([]float32, 0, n)
	withLP, withRaw := true, true
	for _, i := range idx {
		withLP = withLP && s.Calls[i].LogProbs != nil
		withRaw = withRaw && s.Calls[i].RawLogProbs != nil
	}
	if withLP {
		t.LogProbs = make([]float32, 0, n)
	}
	if withRaw {
		t.RawLogProbs = make([]float32, 0, n)
	}
	zeros := func(k int) {
		t.Mask = append(t.Mask, make([]float32, k)...)
		if withLP {
			t.LogProbs = append(t.LogProbs, make([]float32, k)...)
		}
		if withRaw {
			t.RawLogProbs = append(t.RawLogProbs, make([]float32, k)...)
		}
	}
	byID := map[string]int{} // unanswered tool calls by id
	for k, i := range idx {
		c := &s.Calls[i]
		between := c.Prompt[len(t.Tokens):]
		t.Tokens = append(t.Tokens, between...)
		zeros(len(between))
		if k > 0 {
			t.Turns[k-1].ResultEnd = len(t.Tokens)
		}
		for _, m := range c.Messages {
			if j, ok := byID[m.ToolCallID]; ok && m.Role == "tool" {
				t.ToolCalls[j].Result = tool.Result{Content: m.Content}
				t.ToolCalls[j].Err = nil
				delete(byID, m.ToolCallID)
			}
		}
		turn := rollout.Turn{
			Start: len(t.Tokens), Text: r.decodeAfter(c.Prompt, c.Tokens),
			Finish: c.Finish, StopToken: c.StopToken, StopString: c.StopString,
			CachedTokens: c.CachedTokens, WeightVersion: c.WeightVersion, Latency: c.Latency,
		}
		t.Tokens = append(t.Tokens, c.Tokens...)
		for range c.Tokens {
			t.Mask = append(t.Mask, 1)
		}
		if withLP {
			t.LogProbs = append(t.LogProbs, c.LogProbs...)
		}
		if withRaw {
			t.RawLogProbs = append(t.RawLogProbs, c.RawLogProbs...)
		}
		turn.End, turn.ResultEnd = len(t.Tokens), len(t.Tokens)
		for _, tc := range c.Reply.ToolCalls {
			byID[tc.ID] = len(t.ToolCalls)
			turn.Calls = append(turn.Calls, len(t.ToolCalls))
			t.ToolCalls = append(t.ToolCalls, rollout.ToolCall{Turn: k, Name: tc.Name, Arguments: tc.Arguments, Raw: tc.Raw, Err: ErrUnanswered})
		}
		t.Turns = append(t.Turns, turn)
	}
	t.Response = r.decodeAfter(t.Tokens[:t.PromptLen], t.Tokens[t.PromptLen:])
	lastCall := &s.Calls[idx[len(idx)-1]]
	t.Duration = lastCall.Start.Add(lastCall.Latency).Sub(first.Start)
	if t.Duration < 0 {
		t.Duration = time.Duration(0)
	}
	return t
}
