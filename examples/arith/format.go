package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
	"gonum.org/v1/gonum/stat"
)

// Chat markup, as Qwen's templates write it.
const (
	imStart    = "<|im_start|>"
	imEnd      = "<|im_end|>"
	callOpen   = "<tool_call>"
	callClose  = "</tool_call>"
	boxedOpen  = `\boxed{`
	codePrefix = `{"name": "code_interpreter", "arguments": {"code": "`
	calcPrefix = `{"name": "calculator", "arguments": {"expression": "`
	argsClose  = `"}}`
)

// specials are the byte tokenizer's named tokens: the chat and tool-call
// markup, and the fixed text around a call's argument, each one token, as
// a trained BPE vocabulary would merge them. Shorter sequences make the
// tiny model cheaper to train; the text is unchanged.
var specials = []string{
	"<|endoftext|>", imStart, imEnd, imStart + "system\n", imStart + "user\n", imStart + "assistant\n",
	callOpen, callClose, "<tool_response>", "</tool_response>",
	codePrefix, calcPrefix, argsClose, boxedOpen,
}

func newTokenizer() (*tokenizer.Bytes, error) {
	return tokenizer.NewBytes(tokenizer.BytesConfig{Specials: specials, EOS: []string{imEnd, "<|endoftext|>"}})
}

// writeTokenizerInfo records the byte tokenizer's specials next to the
// saved model, so that the checkpoint can be used again.
func writeTokenizerInfo(dir string, tok *tokenizer.Bytes) error {
	ids := make(map[string]int, len(specials))
	for _, s := range specials {
		id, _ := tok.TokenID(s)
		ids[s] = id
	}
	b, err := json.MarshalIndent(map[string]any{
		"type": "bytes", "note": "ids 0-255 are the byte values; specials follow",
		"specials": specials, "special_ids": ids, "eos": []string{imEnd, "<|endoftext|>"},
	}, "", "  ")
	if err != nil {
		return err
	}
	return agentrl.WriteFileAtomic(filepath.Join(dir, "byte_tokenizer.json"), append(b, '\n'), 0o644)
}

// toolSpec is how trajectories call the active tool: the code
// interpreter takes Python that prints the value, the calculator an
// expression.
type toolSpec struct {
	tool   tool.Tool
	prefix string // the call's JSON up to the argument's value
	code   bool   // wrap the expression in print(...)
	system bool   // describe the tool in a system turn (for served models)
}

func specFor(t tool.Tool) toolSpec {
	if t.Name() == tool.CodeInterpreterName {
		return toolSpec{tool: t, prefix: codePrefix, code: true}
	}
	return toolSpec{tool: t, prefix: calcPrefix}
}

// call is the assistant's tool-call turn for expr.
func (s toolSpec) call(expr string) string {
	if s.code {
		expr = "print(" + expr + ")"
	}
	return callOpen + s.prefix + expr + argsClose + callClose
}

// expectedResult is the text the tool returns for a correct call: Python
// prints the integer and a newline, the calculator gives the integer.
func (s toolSpec) expectedResult(v int64) string {
	if s.code {
		return strconv.FormatInt(v, 10) + "\n"
	}
	return strconv.FormatInt(v, 10)
}

// promptText is the chat prompt of a problem, generation prompt included.
func promptText(p problem, s toolSpec) string {
	var b strings.Builder
	if s.system {
		b.WriteString(imStart + "system\nSolve the problem by calling the tool, then give the final answer as \\boxed{N}.\n\n# Tools\n\n<tools>\n")
		b.Write(s.tool.Schema())
		b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags." + imEnd + "\n")
	}
	b.WriteString(imStart + "user\n" + p.Text + imEnd + "\n" + imStart + "assistant\n")
	return b.String()
}

// answer is the final assistant turn.
func answer(v string) string { return boxedOpen + v + "}" + imEnd }

// buildSFT turns problems into SFT sequences laid out exactly as the
// rollout engine will produce them: prompt (mask 0), the tool call
// (mask 1), the tool result in ChatML glue (mask 0), the boxed answer and
// end of turn (mask 1). A fraction noToolFrac of them instead write the
// expression and compute it "in their head": a rough guess (two
// significant digits), as a model without a tool would, so the SFT policy
// often skips the tool and is wrong — the habit RL has to unlearn. Both
// kinds copy the problem's numbers into the expression, so every
// trajectory teaches the copying that tool use relies on.
//
// The result text is what the tool prints; the first calls are run on the
// real tool and compared, so a change in the tool's output format fails
// here rather than teaching the model the wrong text.
func buildSFT(ctx context.Context, probs []problem, tok *tokenizer.Bytes, s toolSpec, noToolFrac float64, seed uint64) ([]agentrl.SFTSample, error) {
	const verify = 8
	for i := range min(verify, len(probs)) {
		p := probs[i]
		args, err := callArgs(s, p.Expr)
		if err != nil {
			return nil, err
		}
		res, err := s.tool.Call(ctx, args)
		if err != nil {
			return nil, fmt.Errorf("running %s on SFT problem %d: %w", s.tool.Name(), i, err)
		}
		if want := s.expectedResult(p.Answer); res.Failed || res.Content != want {
			return nil, fmt.Errorf("SFT problem %d: %s printed %q for %s, want %q", i, s.tool.Name(), res.Content, p.Expr, want)
		}
	}
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]agentrl.SFTSample, len(probs))
	for i, p := range probs {
		var smp agentrl.SFTSample
		add := func(text string, mask float32) {
			ids := tok.Encode(text)
			smp.IDs = append(smp.IDs, ids...)
			for range ids {
				smp.Mask = append(smp.Mask, mask)
			}
		}
		add(promptText(p, s), 0)
		if r.Float64() < noToolFrac {
			add(p.Expr+" = "+answer(roughGuess(p.Answer)), 1)
		} else {
			call := s.call(p.Expr)
			add(call, 1)
			add(rollout.ChatML{}.Render(call, []string{s.expectedResult(p.Answer)}), 0)
			add(answer(strconv.FormatInt(p.Answer, 10)), 1)
		}
		out[i] = smp
	}
	return out, nil
}

// callArgs are the arguments the trajectory's call passes, parsed as the
// rollout engine parses them.
func callArgs(s toolSpec, expr string) (json.RawMessage, error) {
	calls := rollout.Hermes{}.Parse(s.call(expr))
	if len(calls) != 1 || calls[0].Err != nil {
		return nil, fmt.Errorf("the call text for %q does not parse as one tool call: %v", expr, calls)
	}
	return calls[0].Arguments, nil
}

// evalSummary is the outcome of one evaluation.
type evalSummary struct {
	avg, pass, maj float64
	toolCalls      float64 // mean tool calls per response
	noTool         float64 // fraction of responses that answered without a call
	metrics        map[string]float64
}

type namedEval struct {
	name string
	e    evalSummary
}

// evaluate samples k responses per problem and computes avg@k, pass@k and
// maj@k of the accuracy (agentrl.Evaluate, verl's definitions) with the
// tool-use statistics.
func evaluate(ctx context.Context, engine *rollout.Engine, rf reward.Func, probs []problem, s toolSpec,
	params policy.SampleParams, k int) (evalSummary, error) {
	reqs := make([]rollout.Request, len(probs))
	for i, p := range probs {
		seed := uint64(1_000_003 * (i + 1))
		pp := params
		pp.Seed = &seed
		reqs[i] = rollout.Request{ID: p.ID, PromptText: promptText(p, s), Params: pp, N: k}
	}
	trajs, err := engine.Run(ctx, reqs)
	if err != nil {
		return evalSummary{}, err
	}
	recs := make([]agentrl.EvalRecord, len(trajs))
	calls := make([]float64, len(trajs))
	noTools := make([]float64, len(trajs))
	var e evalSummary
	for i, t := range trajs {
		p := probs[t.Request]
		prompt := agentrl.Prompt{GroundTruth: strconv.FormatInt(p.Answer, 10), DataSource: "arith"}
		out, err := rf(ctx, prompt.RewardInput(&t))
		if err != nil {
			return evalSummary{}, fmt.Errorf("scoring trajectory %d: %w", i, err)
		}
		noTool := 0.0
		if len(t.ToolCalls) == 0 && t.Stop == rollout.StopNoToolCall {
			noTool = 1
		}
		calls[i] = float64(len(t.ToolCalls))
		noTools[i] = noTool
		recs[i] = agentrl.EvalRecord{DataSource: "arith", PromptID: t.ID, Score: out.Score, Acc: out.Acc, Pred: out.Pred,
			Extra: map[string]float64{"tool_calls": float64(len(t.ToolCalls)), "no_tool_answer": noTool}}
	}
	e.toolCalls = stat.Mean(calls, nil)
	e.noTool = stat.Mean(noTools, nil)
	res, err := agentrl.Evaluate(ctx, recs, agentrl.DefaultEvalConfig())
	if err != nil {
		return evalSummary{}, err
	}
	e.metrics = res.Map()
	e.avg, _ = res.Value("arith", agentrl.EvalVarAcc, fmt.Sprintf("mean@%d", k))
	var ok bool
	if e.pass, ok = res.Value("arith", agentrl.EvalVarAcc, fmt.Sprintf("pass@%d", k)); !ok {
		e.pass = e.avg // k = 1
	}
	if e.maj, ok = res.Value("arith", agentrl.EvalVarAcc, fmt.Sprintf("maj@%d/mean", k)); !ok {
		e.maj = e.avg
	}
	return e, nil
}

// printTable writes the before/after table.
func printTable(w io.Writer, k int, rows []namedEval) {
	fmt.Fprintf(w, "\n%-14s %8s %8s %8s %14s %18s\n", "policy", fmt.Sprintf("avg@%d", k), fmt.Sprintf("pass@%d", k),
		fmt.Sprintf("maj@%d", k), "tool calls/ans", "answers w/o tool")
	for _, r := range rows {
		fmt.Fprintf(w, "%-14s %7.1f%% %7.1f%% %7.1f%% %14.2f %17.1f%%\n", r.name, 100*r.e.avg, 100*r.e.pass, 100*r.e.maj,
			r.e.toolCalls, 100*r.e.noTool)
	}
	fmt.Fprintln(w)
}
