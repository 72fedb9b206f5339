package main

import (
	"context"
	"io"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// The task itself (problems, tokenizer, chat markup, SFT trajectories,
// RL configuration, engine, reward and evaluation) lives in package
// examples/internal/arith, which examples/ablation shares; these are the
// names this program and its tests use for it.

// Chat markup, as Qwen's templates write it.
const (
	imStart   = arith.ImStart
	imEnd     = arith.ImEnd
	callClose = arith.CallClose
)

// problem is one arithmetic word problem.
type problem = arith.Problem

// toolSpec is how trajectories call the active tool.
type toolSpec struct{ arith.ToolSpec }

// call is the assistant's tool-call turn for expr.
func (s toolSpec) call(expr string) string { return s.Call(expr) }

func specFor(t tool.Tool) toolSpec { return toolSpec{arith.SpecFor(t)} }

func newTokenizer() (*tokenizer.Bytes, error) { return arith.NewTokenizer() }

func generateProblems(seed uint64, n int, prefix string) []problem {
	return arith.GenerateProblems(seed, n, prefix)
}

func roughGuess(v int64) string { return arith.RoughGuess(v) }

func answer(v string) string { return arith.Answer(v) }

func buildSFT(ctx context.Context, probs []problem, tok *tokenizer.Bytes, s toolSpec, noToolFrac float64, seed uint64) ([]agentrl.SFTSample, error) {
	return arith.BuildSFT(ctx, probs, arith.SFTToolUse(len(probs), noToolFrac, seed), tok, s.ToolSpec)
}

// namedEval is an evaluation under the name the table and JSON line
// give it.
type namedEval = arith.Named

// evaluate samples k responses per problem and computes avg@k, pass@k and
// maj@k of the accuracy with the tool-use statistics (arith.Evaluate).
func evaluate(ctx context.Context, engine *rollout.Engine, rf reward.Func, probs []problem, s toolSpec,
	params lm.SampleParams, k int) (arith.Eval, error) {
	return arith.Evaluate(ctx, engine, rf, probs, s.ToolSpec, params, k)
}

// printTable writes the before/after table (arith.PrintTable).
func printTable(w io.Writer, k int, rows []namedEval) { arith.PrintTable(w, k, rows) }
