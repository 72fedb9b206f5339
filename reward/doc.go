// Package reward scores responses: a math verifier (answer extraction,
// LaTeX parsing, exact and numeric equivalence), code tests run through a
// tool, DAPO overlong shaping, format and tool-use shaping, and routing by
// data source with bounded parallelism and per-item deadlines.
//
// The contract is Func: func(ctx, Input) (Output, error). Input carries the
// response, the ground truth, data_source, extra info, the trajectory's
// turns, tool calls and tool rewards, and its token counts; Output carries
// Score, Acc, Pred (the extracted answer, for maj@k), a Reason and named
// Parts. A Func returns an error only when it cannot score at all; every
// verdict about the response is an Output.
//
// Math: MathVerify and MathFunc. Answers are extracted from the last
// \boxed{} (or answer phrases, a bold final line, and optional fallbacks),
// parsed by reward/internal/mathexpr into expression trees and compared by
// exact arithmetic over ℚ with radicals, i, π, e and symbols, then by
// numeric evaluation where transcendental functions leave exactness
// undecided, with structural rules for sets, tuples, intervals, matrices
// and relations. Rounded decimals never match exact irrational or repeating
// values. Every check is bounded in time, size and depth.
//
// Code: CodeFunc runs the last Python code block against stdin/stdout or
// call-based tests on a tool.Executor (the local sandbox or
// SandboxFusion); the executor contract (one ExecRequest per test case,
// the verdict read from ExecResult.Stdout, its Status saying how a process
// without one died) and the output caps it needs are documented in code.go.
//
// Question answering: QAFunc is Search-R1's exact-match reward
// (qa_em.py): the last <answer>…</answer>, normalized as SQuAD and
// Search-R1 normalize (NormalizeAnswer), against the targets of a
// {"target": [...]} ground truth (QATargets, ExactMatch).
//
// Shaping and composition: WithOverlong (DAPO), WithToolBonus
// (Open-AgentRL), WithToolRewards, FormatFunc, Router (verl's routing by
// data_source), Combine (weighted parts), Gate (a rule before a costly
// scorer) and Batch (errgroup with a limit and per-item deadlines).
//
// Group rewards: a GroupFunc scores the N responses to one prompt
// together (a judge ranking them, as in package reward/judge);
// BatchGroups scores a batch group by group, GroupGate, CombineGroup and
// ShapeGroup are Gate, Combine and the shapings for groups.
//
// reward may import tool; it must not import rollout, policy, advantage,
// loss or the root package.
package reward
