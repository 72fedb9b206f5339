// Package ablation runs a grid of training configurations × seeds and
// summarises it: the machinery of an ablation study such as the paper's
// (Yu et al. 2025, "Demystifying Reinforcement Learning in Agentic
// Reasoning", §4: clip-higher, token-level aggregation, overlong shaping,
// entropy, tool-call frequency).
//
// A Variant is a named edit of a base agentrl.TrainerConfig, with the
// loss and advantage registries that resolve its names, so that a loss
// of one's own runs beside the built-in ones. A Grid runs every variant
// with every seed through a Run function the program supplies (which
// builds the policy, engine, reward and trainer, trains and evaluates),
// several at a time, and returns one Result per run in grid order.
// Summarize turns the results into a mean and a 95% Student-t interval
// per variant, WriteTable prints them, and PlotCurves and PlotScatter draw
// the runs.
//
// Reproducibility is the Run function's: Execute hands every run its
// seed and nothing else random, so a Run that derives all of its
// randomness from that seed (model sampling, prompt order, rollout seeds,
// mini-batch shuffles) gives the same result for the same variant and
// seed whichever runs share the machine with it.
package ablation

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/advantage"
	"github.com/agentrl/agentrl/loss"
)

// ErrGrid is wrapped by the errors of Grid.Validate, and so of
// Grid.Execute before anything runs.
var ErrGrid = errors.New("ablation: invalid grid")

// Variant is a named change to a base trainer configuration.
type Variant struct {
	// Name identifies the variant in results, tables and plots; required
	// and unique within a grid.
	Name string
	// Description says in a few words what the variant changes
	// (optional; programs print it).
	Description string
	// Edit changes the base configuration; nil leaves it as it is (the
	// baseline).
	Edit func(*agentrl.TrainerConfig)
	// Losses resolves the edited Loss.Mode: a loss.Registry with the
	// user's own objective registered (loss.NewRegistry, then Register).
	// nil means the built-in modes. Pass it on as
	// agentrl.TrainerParts.Losses.
	Losses *loss.Registry
	// Estimators resolves the edited Advantage.Estimator the same way; nil means
	// the built-in estimators. Pass it on as
	// agentrl.TrainerParts.Estimators.
	Estimators *advantage.Registry
}

// Apply returns base with the variant's Edit applied, validated as
// agentrl.NewTrainer would with the variant's registries. Edit works on a
// copy whose pointers and slices are its own, so it never changes base
// (or the configuration of another variant made from it).
func (v Variant) Apply(base agentrl.TrainerConfig) (agentrl.TrainerConfig, error) {
	c := cloneConfig(base)
	if v.Edit != nil {
		v.Edit(&c)
	}
	if err := c.ValidateWith(v.Losses, v.Estimators); err != nil {
		return c, fmt.Errorf("ablation: variant %q: %w", v.Name, err)
	}
	return c, nil
}

// cloneConfig copies c, with fresh copies of what it points to.
func cloneConfig(c agentrl.TrainerConfig) agentrl.TrainerConfig {
	c.Overlong = clonePtr(c.Overlong)
	c.DynamicSampling = clonePtr(c.DynamicSampling)
	if c.LoRA != nil {
		l := *c.LoRA
		l.TargetModules = slices.Clone(l.TargetModules)
		c.LoRA = &l
	}
	c.Advantage.NormByStd = clonePtr(c.Advantage.NormByStd)
	c.Advantage.Gamma = clonePtr(c.Advantage.Gamma)
	c.Advantage.Lambda = clonePtr(c.Advantage.Lambda)
	c.Sampling.Seed = clonePtr(c.Sampling.Seed)
	c.Sampling.StopTokenIDs = slices.Clone(c.Sampling.StopTokenIDs)
	c.Sampling.Stop = slices.Clone(c.Sampling.Stop)
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Point is one step of a run's curve: metric values by name (for
// example the training accuracy "critic/acc/mean" of agentrl.StepMetrics
// or a held-out avg@k).
type Point struct {
	Step   int                `json:"step"`
	Values map[string]float64 `json:"values"`
}

// Result is the outcome of one run of a grid.
type Result struct {
	// Variant and Seed name the run; Execute sets them.
	Variant string `json:"variant"`
	Seed    uint64 `json:"seed"`
	// Curve holds the run's metrics by step, in step order.
	Curve []Point `json:"curve,omitempty"`
	// Final holds the run's end-of-run metrics by name, for example
	// "avg@8", "tool_calls", "pg_clipfrac".
	Final map[string]float64 `json:"final"`
	// Seconds is the run's wall-clock time; Execute sets it.
	Seconds float64 `json:"seconds"`
}

// Grid is every variant run with every seed.
type Grid struct {
	// Variants to run; at least one, with unique, non-empty names.
	Variants []Variant
	// Seeds to run each variant with; at least one, no repeats.
	Seeds []uint64
	// Parallel is the number of runs at once; 0 means
	// runtime.GOMAXPROCS(0). A Run that keeps every core busy itself
	// (local training does) wants 1: more runs at once only share the
	// cores and the memory.
	Parallel int
	// Run trains and evaluates one variant with one seed; required. It
	// must derive all of its randomness from seed (see the package doc)
	// and return when ctx ends. Several calls run at once when Parallel
	// allows.
	Run func(ctx context.Context, v Variant, seed uint64) (Result, error)
	// Done, when set, is called with each finished run's Result (for
	// progress and partial output), one call at a time.
	Done func(Result)
}

// Validate reports the first unusable field, wrapping ErrGrid.
func (g Grid) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrGrid, fmt.Sprintf(format, args...))
	}
	switch {
	case len(g.Variants) == 0:
		return bad("no variants")
	case len(g.Seeds) == 0:
		return bad("no seeds")
	case g.Run == nil:
		return bad("Run is nil")
	case g.Parallel < 0:
		return bad("Parallel %d, want ≥ 0", g.Parallel)
	}
	names := make(map[string]bool, len(g.Variants))
	for i, v := range g.Variants {
		switch {
		case v.Name == "":
			return bad("variant %d has no name", i)
		case names[v.Name]:
			return bad("variant %q appears twice", v.Name)
		}
		names[v.Name] = true
	}
	seeds := make(map[uint64]bool, len(g.Seeds))
	for _, s := range g.Seeds {
		if seeds[s] {
			return bad("seed %d appears twice", s)
		}
		seeds[s] = true
	}
	return nil
}

// Execute runs the grid, at most Parallel runs at once, and returns the
// results in grid order: variant by variant, each with its seeds in the
// order of Seeds. The first run to fail cancels the others; its error
// names the variant and the seed, and Execute then returns no results.
func (g Grid) Execute(ctx context.Context) ([]Result, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	n := len(g.Variants) * len(g.Seeds)
	limit := g.Parallel
	if limit == 0 {
		limit = runtime.GOMAXPROCS(0)
	}
	results := make([]Result, n)
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(min(limit, n))
	var doneMu sync.Mutex
	for i, v := range g.Variants {
		for j, seed := range g.Seeds {
			eg.Go(func() error {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("ablation: variant %q, seed %d: not started: %w", v.Name, seed, err)
				}
				start := time.Now()
				r, err := g.Run(ctx, v, seed)
				if err != nil {
					return fmt.Errorf("ablation: variant %q, seed %d: %w", v.Name, seed, err)
				}
				r.Variant, r.Seed, r.Seconds = v.Name, seed, time.Since(start).Seconds()
				results[i*len(g.Seeds)+j] = r
				if g.Done != nil {
					doneMu.Lock()
					defer doneMu.Unlock()
					g.Done(r)
				}
				return nil
			})
		}
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	return results, nil
}
