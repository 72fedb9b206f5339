package reward

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// GroupFunc scores the responses to one prompt together: group holds the
// trajectories sampled for the prompt (the same Prompt, GroundTruth,
// DataSource and Extra, different responses), and it returns one Output
// per input, in the same order. It is the shape of a reward that compares
// responses with each other, as a judge ranking a GRPO group does (ART's
// RULER). As with Func, it returns an error only when it cannot score at
// all; a verdict it could not reach (a judge that kept failing) is a
// defined Output.
type GroupFunc func(ctx context.Context, group []Input) ([]Output, error)

// BatchGroups scores inputs with g one group at a time: groups[i] names
// the group of inputs[i] (the trainer's rollout group: one prompt of one
// generation batch), and the members of a group are passed to g together,
// in input order. At most opts.Limit groups are scored at once, each
// under a deadline of opts.ItemTimeout (for the whole group); a group
// that runs out of time has every member scored opts.TimeoutScore with a
// Reason, even if g ignores its context. The outputs are in input order.
// A panic in g, an error from it, or a number of outputs other than the
// group's size stops the batch and is returned with the group's name.
func BatchGroups(ctx context.Context, g GroupFunc, inputs []Input, groups []string, opts BatchOptions) ([]Output, error) {
	switch {
	case g == nil:
		return nil, fmt.Errorf("%w: BatchGroups needs a GroupFunc", ErrConfig)
	case len(groups) != len(inputs):
		return nil, fmt.Errorf("%w: BatchGroups has %d group names for %d inputs", ErrConfig, len(groups), len(inputs))
	case opts.Limit < 0 || opts.ItemTimeout < 0:
		return nil, fmt.Errorf("%w: BatchOptions has a negative limit", ErrConfig)
	}
	opts = opts.withDefaults()
	var order []string
	members := map[string][]int{}
	for i, key := range groups {
		if _, ok := members[key]; !ok {
			order = append(order, key)
		}
		members[key] = append(members[key], i)
	}
	outs := make([]Output, len(inputs))
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(opts.Limit)
	for _, key := range order {
		idx := members[key]
		eg.Go(func() error {
			group := make([]Input, len(idx))
			for k, i := range idx {
				group[k] = inputs[i]
			}
			o, err := scoreGroup(gctx, g, group, opts)
			if err != nil {
				return fmt.Errorf("reward: group %q: %w", key, err)
			}
			for k, i := range idx {
				outs[i] = o[k]
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	return outs, nil
}

// scoreGroup scores one group with g under opts.ItemTimeout.
func scoreGroup(ctx context.Context, g GroupFunc, group []Input, opts BatchOptions) ([]Output, error) {
	outs, timedOut, err := withDeadline(ctx, opts.ItemTimeout, func(gctx context.Context) ([]Output, error) {
		return callGroup(gctx, g, group)
	})
	if timedOut {
		outs = make([]Output, len(group))
		for i := range outs {
			outs[i] = Output{Score: opts.TimeoutScore, Reason: fmt.Sprintf("group reward timed out after %v", opts.ItemTimeout)}
		}
		return outs, nil
	}
	return outs, err
}

// callGroup calls g, turning a panic into an error and checking that it
// kept its contract of one output per input.
func callGroup(ctx context.Context, g GroupFunc, group []Input) ([]Output, error) {
	outs, err := safely(func() ([]Output, error) { return g(ctx, group) })
	if err == nil && len(outs) != len(group) {
		return nil, fmt.Errorf("group reward returned %d outputs for %d inputs", len(outs), len(group))
	}
	return outs, err
}

// Gate scores with f only the responses that pass rule: a response whose
// rule Output has Acc false gets rule's Output (its Reason prefixed with
// "gate: "), and f never sees it; one that passes gets f's Output. It
// puts a cheap check (a format, a length, a parse) before an expensive
// or gameable scorer such as an LLM judge, so that an ill-formed response
// costs no judge call and cannot be scored up by one. To also reward the
// format itself, Combine the rule with the gated scorer.
func Gate(rule, f Func) (Func, error) {
	if rule == nil || f == nil {
		return nil, fmt.Errorf("%w: Gate needs a rule and a Func", ErrConfig)
	}
	return func(ctx context.Context, in Input) (Output, error) {
		r, err := rule(ctx, in)
		if err != nil {
			return Output{}, fmt.Errorf("reward: gate: %w", err)
		}
		if !r.Acc {
			r.Reason = "gate: " + r.Reason
			return r, nil
		}
		return f(ctx, in)
	}, nil
}

// GroupGate is Gate for a group: each member is checked by rule; those
// that fail get rule's Output (Reason prefixed with "gate: "), and the
// ones that pass are scored by g together, as a group of their own (g is
// not called when none passes).
func GroupGate(rule Func, g GroupFunc) (GroupFunc, error) {
	if rule == nil || g == nil {
		return nil, fmt.Errorf("%w: GroupGate needs a rule and a GroupFunc", ErrConfig)
	}
	return func(ctx context.Context, group []Input) ([]Output, error) {
		outs := make([]Output, len(group))
		var pass []int
		for i, in := range group {
			r, err := rule(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("reward: gate: member %d: %w", i, err)
			}
			if r.Acc {
				pass = append(pass, i)
				continue
			}
			r.Reason = "gate: " + r.Reason
			outs[i] = r
		}
		if len(pass) == 0 {
			return outs, nil
		}
		sub := make([]Input, len(pass))
		for k, i := range pass {
			sub[k] = group[i]
		}
		judged, err := callGroup(ctx, g, sub)
		if err != nil {
			return nil, err
		}
		for k, i := range pass {
			outs[i] = judged[k]
		}
		return outs, nil
	}, nil
}

// GroupPart is one weighted component of CombineGroup: a Func that scores
// each response on its own (a rule: a verifier, a format check) or a
// GroupFunc that scores the group together (a ranking judge); exactly one
// is set.
type GroupPart struct {
	// Name keys the component in Output.Parts.
	Name string
	// Weight multiplies the component's score.
	Weight float64
	// Func scores each member on its own, one after the other.
	Func Func
	// Group scores the members together.
	Group GroupFunc
}

// CombineGroup is Combine for groups: each member's score is Σ
// weight·score over parts, Acc and Pred come from the first part, each
// part's weighted score is recorded in Parts under its name, and the
// reasons are joined.
func CombineGroup(parts ...GroupPart) (GroupFunc, error) {
	names := make([]string, len(parts))
	weights := make([]float64, len(parts))
	for i, p := range parts {
		if (p.Func == nil) == (p.Group == nil) {
			return nil, fmt.Errorf("%w: part %d (%q) needs exactly one of Func and Group", ErrConfig, i, p.Name)
		}
		names[i], weights[i] = p.Name, p.Weight
	}
	if err := checkParts(names, weights); err != nil {
		return nil, err
	}
	return func(ctx context.Context, group []Input) ([]Output, error) {
		byPart := make([][]Output, len(parts))
		for j, p := range parts {
			var err error
			if byPart[j], err = p.scores(ctx, group); err != nil {
				return nil, fmt.Errorf("reward: part %q: %w", p.Name, err)
			}
		}
		outs := make([]Output, len(group))
		member := make([]Output, len(parts))
		for i := range group {
			for j := range parts {
				member[j] = byPart[j][i]
			}
			outs[i] = weightedSum(names, weights, member)
		}
		return outs, nil
	}, nil
}

// scores scores every member of group with the part.
func (p GroupPart) scores(ctx context.Context, group []Input) ([]Output, error) {
	if p.Group != nil {
		return callGroup(ctx, p.Group, group)
	}
	outs := make([]Output, len(group))
	for i, in := range group {
		o, err := p.Func(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("member %d: %w", i, err)
		}
		outs[i] = o
	}
	return outs, nil
}

// ShapeGroup applies a shaping of single responses to each member's
// Output from g: shape is a wrapper such as
//
//	func(f reward.Func) (reward.Func, error) { return reward.WithOverlong(f, cfg) }
//
// (or WithToolBonus, WithToolRewards), and each member's score is what the
// wrapped Func makes of the Output g gave it. shape is tried once here,
// so that an invalid configuration is an error now rather than at the
// first group.
func ShapeGroup(g GroupFunc, shape func(Func) (Func, error)) (GroupFunc, error) {
	if g == nil || shape == nil {
		return nil, fmt.Errorf("%w: ShapeGroup needs a GroupFunc and a shaping", ErrConfig)
	}
	if _, err := shape(fixedOutput(Output{})); err != nil {
		return nil, err
	}
	return func(ctx context.Context, group []Input) ([]Output, error) {
		outs, err := callGroup(ctx, g, group)
		if err != nil {
			return nil, err
		}
		for i, in := range group {
			f, err := shape(fixedOutput(outs[i]))
			if err != nil {
				return nil, err
			}
			if outs[i], err = f(ctx, in); err != nil {
				return nil, fmt.Errorf("reward: shaping member %d: %w", i, err)
			}
		}
		return outs, nil
	}, nil
}

// fixedOutput is a Func that answers o whatever it is asked.
func fixedOutput(o Output) Func {
	return func(context.Context, Input) (Output, error) { return o, nil }
}
