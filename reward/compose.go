package reward

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// Kinds of data source.
const (
	KindMath = "math"
	KindCode = "code"
)

// SourceKind classifies a data_source name the way verl's
// default_compute_score (verl/utils/reward_score/__init__.py) routes it:
// GSM8K, MATH, DAPO-Math, AIME, AMC and Numina sets are math; CodeContests,
// APPS, Codeforces, TACO and LiveCodeBench are code. It returns "" for
// anything else.
func SourceKind(dataSource string) string {
	s := strings.ToLower(dataSource)
	switch s {
	case "openai/gsm8k", "lighteval/math", "digitallearninggmbh/math-lighteval", "huggingfaceh4/math-500",
		"math_dapo", "math", "math_dapo_reasoning", "deepscaler", "gsm8k":
		return KindMath
	case "codecontests", "apps", "codeforces", "taco":
		return KindCode
	}
	for _, p := range []string{"aime", "amc", "numina_", "math", "gsm8k", "olympiad", "deepscaler"} {
		if strings.HasPrefix(s, p) {
			return KindMath
		}
	}
	for _, p := range []string{"livecodebench", "lcb", "code", "apps", "taco", "leetcode", "humaneval", "mbpp", "primeintellect"} {
		if strings.HasPrefix(s, p) {
			return KindCode
		}
	}
	return ""
}

// Router picks a reward function by Input.DataSource: an exact entry in
// Sources first, then the kind from SourceKind, then Default.
type Router struct {
	// Sources maps exact data_source names to functions.
	Sources map[string]Func
	// Math and Code score the sources that SourceKind classifies.
	Math, Code Func
	// Default scores everything else; nil makes unknown sources an error.
	Default Func
}

// Func returns the routing reward function.
func (r Router) Func() Func {
	return func(ctx context.Context, in Input) (Output, error) {
		if f, ok := r.Sources[in.DataSource]; ok && f != nil {
			return f(ctx, in)
		}
		switch SourceKind(in.DataSource) {
		case KindMath:
			if r.Math != nil {
				return r.Math(ctx, in)
			}
		case KindCode:
			if r.Code != nil {
				return r.Code(ctx, in)
			}
		}
		if r.Default != nil {
			return r.Default(ctx, in)
		}
		return Output{}, fmt.Errorf("%w %q", ErrUnknownSource, in.DataSource)
	}
}

// Part is one weighted component of a combined reward.
type Part struct {
	// Name keys the component in Output.Parts.
	Name string
	// Weight multiplies the component's score.
	Weight float64
	// Func computes the component.
	Func Func
}

// Combine returns a Func whose score is Σ weight·score over parts. Acc and
// Pred come from the first part (the task reward); each part's weighted
// score is recorded in Parts under its name, and the reasons are joined.
func Combine(parts ...Part) (Func, error) {
	names := make([]string, len(parts))
	weights := make([]float64, len(parts))
	for i, p := range parts {
		if p.Func == nil {
			return nil, fmt.Errorf("%w: part %d (%q) has no Func", ErrConfig, i, p.Name)
		}
		names[i], weights[i] = p.Name, p.Weight
	}
	if err := checkParts(names, weights); err != nil {
		return nil, err
	}
	return func(ctx context.Context, in Input) (Output, error) {
		outs := make([]Output, len(parts))
		for i, p := range parts {
			o, err := p.Func(ctx, in)
			if err != nil {
				return Output{}, fmt.Errorf("reward: part %q: %w", p.Name, err)
			}
			outs[i] = o
		}
		return weightedSum(names, weights, outs), nil
	}, nil
}

// checkParts checks the names and weights of a combination's parts: at
// least one part, unique non-empty names, finite weights.
func checkParts(names []string, weights []float64) error {
	if len(names) == 0 {
		return fmt.Errorf("%w: a combination needs at least one part", ErrConfig)
	}
	seen := map[string]bool{}
	for i, name := range names {
		switch {
		case name == "" || seen[name]:
			return fmt.Errorf("%w: part %d needs a unique name, got %q", ErrConfig, i, name)
		case math.IsNaN(weights[i]) || math.IsInf(weights[i], 0):
			return fmt.Errorf("%w: part %q weight %g", ErrConfig, name, weights[i])
		}
		seen[name] = true
	}
	return nil
}

// weightedSum combines the parts' outputs for one response: the score
// is Σ weight·score, Acc and Pred are the first part's, Parts holds each
// part's weighted score under its name (and its own parts under
// name/part), and the reasons are joined.
func weightedSum(names []string, weights []float64, outs []Output) Output {
	var out Output
	reasons := make([]string, len(outs))
	for i, o := range outs {
		v := weights[i] * o.Score
		out.Score += v
		out.addPart(names[i], v)
		for k, sub := range o.Parts {
			out.addPart(names[i]+"/"+k, weights[i]*sub)
		}
		reasons[i] = names[i] + ": " + o.Reason
	}
	out.Acc, out.Pred = outs[0].Acc, outs[0].Pred
	out.Reason = strings.Join(reasons, "; ")
	return out
}

// BatchOptions configures Batch. The zero value scores 8 items at a time,
// each within 60 s, and an item that runs out of time scores 0.
type BatchOptions struct {
	// Limit bounds the items scored at once; zero means 8.
	Limit int
	// ItemTimeout bounds one item; zero means 60 s. An item that runs out
	// of time gets TimeoutScore and a Reason, and the batch goes on.
	ItemTimeout time.Duration
	// TimeoutScore is the score of an item that ran out of time; its zero
	// is meaningful (a timed-out item scores 0).
	TimeoutScore float64
}

// withDefaults fills the zero fields with their defaults.
func (o BatchOptions) withDefaults() BatchOptions {
	if o.Limit == 0 {
		o.Limit = 8
	}
	if o.ItemTimeout == 0 {
		o.ItemTimeout = 60 * time.Second
	}
	return o
}

// Batch scores inputs with f, at most opts.Limit at a time, each under its
// own deadline. The outputs are in input order. An item that exceeds its
// deadline is scored opts.TimeoutScore with a Reason, even if f ignores its
// context (its goroutine is then left to finish on its own). Any other error
// from f stops the batch and is returned with the item's index.
func Batch(ctx context.Context, f Func, inputs []Input, opts BatchOptions) ([]Output, error) {
	if f == nil {
		return nil, fmt.Errorf("%w: Batch needs a Func", ErrConfig)
	}
	if opts.Limit < 0 || opts.ItemTimeout < 0 {
		return nil, fmt.Errorf("%w: BatchOptions has a negative limit", ErrConfig)
	}
	opts = opts.withDefaults()
	outs := make([]Output, len(inputs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Limit)
	for i := range inputs {
		g.Go(func() error {
			o, err := scoreOne(gctx, f, inputs[i], opts)
			if err != nil {
				return fmt.Errorf("reward: item %d: %w", i, err)
			}
			outs[i] = o
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return outs, nil
}

// scoreOne scores in with f under opts.ItemTimeout; running out of time
// is a verdict (opts.TimeoutScore), not an error.
func scoreOne(ctx context.Context, f Func, in Input, opts BatchOptions) (Output, error) {
	o, timedOut, err := withDeadline(ctx, opts.ItemTimeout, func(ictx context.Context) (Output, error) {
		return safely(func() (Output, error) { return f(ictx, in) })
	})
	if timedOut {
		return Output{Score: opts.TimeoutScore, Reason: fmt.Sprintf("reward timed out after %v", opts.ItemTimeout)}, nil
	}
	return o, err
}

// result is what a call run by withDeadline returned.
type result[T any] struct {
	v   T
	err error
}

// withDeadline runs call under a deadline of timeout from now, in a
// goroutine of its own, so that a call that ignores its context cannot
// hold the caller past the deadline (the goroutine is then left to finish
// on its own). It reports timedOut when the deadline ended the call; when
// ctx itself ended, it returns ctx's error instead.
func withDeadline[T any](ctx context.Context, timeout time.Duration, call func(context.Context) (T, error)) (v T, timedOut bool, err error) {
	if err := ctx.Err(); err != nil {
		return v, false, err
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan result[T], 1)
	go func() {
		v, err := call(ictx)
		done <- result[T]{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil && errors.Is(r.err, context.DeadlineExceeded) && ictx.Err() != nil {
			break
		}
		return r.v, false, r.err
	case <-ictx.Done():
	}
	if err := ctx.Err(); err != nil {
		return v, false, err // the caller's context ended, not the deadline
	}
	return v, true, nil
}

// safely turns a panic in a user-supplied function into an error, so
// that one bad scorer cannot take the trainer down.
func safely[T any](call func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reward function panicked: %v", r)
		}
	}()
	return call()
}
