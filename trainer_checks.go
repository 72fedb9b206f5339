package agentrl

import (
	"fmt"
	"io"
	"strings"

	"github.com/agentrl/agentrl/advantage"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// checkPrompts checks that each prompt is given in exactly one form and,
// unless groundTruthOptional, has a ground truth; field names the list
// in errors.
func checkPrompts(prompts []Prompt, field string, groundTruthOptional bool) error {
	var noTruth []string
	for i, p := range prompts {
		forms := 0
		if p.Tokens != nil {
			forms++
		}
		if p.Text != "" {
			forms++
		}
		if p.Messages != nil {
			forms++
		}
		if forms != 1 {
			return fmt.Errorf("%w: %s[%d] (%q) has %d prompt forms; want exactly one of Tokens, Text, Messages", ErrTrainer, field, i, p.ID, forms)
		}
		if p.GroundTruth == "" && !groundTruthOptional {
			noTruth = append(noTruth, fmt.Sprintf("%d (%q)", i, p.ID))
		}
	}
	if len(noTruth) == 0 {
		return nil
	}
	shown := noTruth[:min(len(noTruth), 3)]
	more := ""
	if len(noTruth) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(noTruth)-len(shown))
	}
	return fmt.Errorf("%w: %d of %d %s have no GroundTruth: %s%s; a reward that needs one scores every response to them alike, and nothing is learned: leave them out, or set TrainerParts.GroundTruthOptional if the reward needs none",
		ErrTrainer, len(noTruth), len(prompts), field, strings.Join(shown, ", "), more)
}

// contextLength is the model's context: TrainerParts.ContextLength, or
// the Policy's max_position_embeddings when it is a *policy.Model; 0
// when unknown.
func contextLength(parts TrainerParts) int {
	if parts.ContextLength != 0 {
		return parts.ContextLength
	}
	if m, ok := parts.Policy.(*policy.Model); ok {
		return m.Config().MaxPositionEmbeddings
	}
	return 0
}

// responseBudget is the engine's response budget in tokens; 0 without
// an engine (TrainerParts.Source).
func responseBudget(parts TrainerParts) int {
	if parts.Engine == nil {
		return 0
	}
	return parts.Engine.MaxResponseTokens()
}

// fitted is the outcome of fitPrompts.
type fitted struct {
	kept    []Prompt
	leftOut int
	reason  string // why the prompts were left out
}

// leftOutNote is ", N left out: why" when prompts were left out.
func (f fitted) leftOutNote() string {
	if f.leftOut == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d more left out: %s)", f.leftOut, f.reason)
}

// fitPrompts checks the response budget against the context (both in
// tokens; 0 means none) and leaves out the prompts given as Tokens that
// leave less than the budget for their responses (with no budget: that
// fill the context). prompts itself is not modified.
func fitPrompts(prompts []Prompt, context, budget int) (fitted, error) {
	if context < 0 {
		return fitted{}, fmt.Errorf("%w: TrainerParts.ContextLength is %d, want ≥ 0", ErrTrainer, context)
	}
	if context == 0 {
		return fitted{kept: prompts}, nil
	}
	if budget >= context {
		return fitted{}, fmt.Errorf("%w: the engine's response budget of %d tokens (rollout.Config.MaxResponseTokens) leaves no room for a prompt in the model's context of %d tokens (TrainerParts.ContextLength)", ErrTrainer, budget, context)
	}
	limit := context - max(budget, 1)
	f := fitted{kept: make([]Prompt, 0, len(prompts))}
	longest := 0
	for _, p := range prompts {
		if len(p.Tokens) > limit {
			f.leftOut++
			longest = max(longest, len(p.Tokens))
			continue
		}
		f.kept = append(f.kept, p)
	}
	if f.leftOut > 0 {
		f.reason = fmt.Sprintf("longer than the %d tokens that the model's context of %d leaves after the response budget of %d (the longest has %d); a response the context cuts before its budget ends early, and the overlong penalty never fires",
			limit, context, budget, longest)
	}
	return f, nil
}

// greedyGroups reports greedy sampling of several samples per prompt
// with a built-in group-relative estimator, which then gives every
// trajectory advantage 0, and returns the estimator.
func (c TrainerConfig) greedyGroups() (advantage.Estimator, bool) {
	est := c.Advantage.Estimator
	if est == "" {
		est = advantage.GRPO
	}
	switch est {
	case advantage.GRPO, advantage.DrGRPO, advantage.RLOO, advantage.GRPOPassK, advantage.OPO, advantage.GPG, advantage.ReinforcePlusPlusBaseline:
	default:
		return est, false
	}
	return est, c.Sampling.Temperature < lm.GreedyTemperature && c.SamplesPerPrompt > 1
}

// notes writes the trainer's notes (TrainerParts.Notes), each kind once.
type notes struct {
	w      io.Writer
	said   map[string]bool
	leader bool
}

// say writes the note of kind, unless one of that kind was said.
func (n *notes) say(kind, format string, args ...any) {
	if n.w == nil || !n.leader || n.said[kind] {
		return
	}
	n.said[kind] = true
	fmt.Fprintf(n.w, format+"\n", args...)
}
