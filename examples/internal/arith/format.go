package arith

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/eval"
	"github.com/agentrl/agentrl/internal/atomicfile"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
	"gonum.org/v1/gonum/stat"
)

// Chat markup, as Qwen's templates write it.
const (
	ImStart    = "<|im_start|>"
	ImEnd      = "<|im_end|>"
	CallOpen   = "<tool_call>"
	CallClose  = "</tool_call>"
	BoxedOpen  = `\boxed{`
	CodePrefix = `{"name": "code_interpreter", "arguments": {"code": "`
	CalcPrefix = `{"name": "calculator", "arguments": {"expression": "`
	ArgsClose  = `"}}`
)

// specials are the byte tokenizer's named tokens: the chat and tool-call
// markup, and the fixed text around a call's argument, each one token, as
// a trained BPE vocabulary would merge them. Shorter sequences make the
// tiny model cheaper to train; the text is unchanged.
var specials = []string{
	"<|endoftext|>", ImStart, ImEnd, ImStart + "system\n", ImStart + "user\n", ImStart + "assistant\n",
	CallOpen, CallClose, "<tool_response>", "</tool_response>",
	CodePrefix, CalcPrefix, ArgsClose, BoxedOpen,
}

// ChatTemplate renders a conversation as the task's prompts are written
// (PromptText without a system turn): each message as a ChatML turn, then
// the assistant's header. The task's model calls its tool without a
// description, so the template takes no tools.
const ChatTemplate = "{%- for message in messages %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}" +
	"{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"

// control are the specials that are chat control tokens; the others are
// markup a server's detokenizer must keep in the text (see WriteTokenizerInfo).
var control = []string{"<|endoftext|>", ImStart, ImEnd, ImStart + "system\n", ImStart + "user\n", ImStart + "assistant\n"}

// NewTokenizer is the task's byte tokenizer: byte values, then the
// specials, each one token; responses end at <|im_end|> or
// <|endoftext|>; ChatTemplate renders chats.
func NewTokenizer() (*tokenizer.Bytes, error) {
	return tokenizer.NewBytes(tokenizer.BytesConfig{Specials: specials, EOS: []string{ImEnd, "<|endoftext|>"}, ChatTemplate: ChatTemplate})
}

// WriteTokenizerInfo writes the byte tokenizer next to a saved model in
// dir: its Hugging Face files (tokenizer.json, tokenizer_config.json with
// ChatTemplate, generation_config.json; tokenizer.Bytes.WriteHF, the chat
// control tokens special and the tool markup not, so that a server's
// detokenizer keeps it), which make the folder a checkpoint that
// tokenizer.Load, examples/eval, grpotcr and serve take, and
// byte_tokenizer.json, the specials and their ids.
func WriteTokenizerInfo(dir string, tok *tokenizer.Bytes) error {
	if err := tok.WriteHF(dir, tokenizer.HFOptions{Control: control}); err != nil {
		return err
	}
	ids := make(map[string]int, len(specials))
	for _, s := range specials {
		id, _ := tok.TokenID(s)
		ids[s] = id
	}
	b, err := json.MarshalIndent(map[string]any{
		"type": "bytes", "note": "ids 0-255 are the byte values; specials follow",
		"specials": specials, "special_ids": ids, "eos": []string{ImEnd, "<|endoftext|>"},
	}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "byte_tokenizer.json"), append(b, '\n'), 0o644)
}

// ToolSpec is how trajectories call the active tool: the code
// interpreter takes Python that prints the value, the calculator an
// expression.
type ToolSpec struct {
	Tool   tool.Tool
	Prefix string // the call's JSON up to the argument's value
	Code   bool   // wrap the expression in print(...)
	System bool   // describe the tool in a system turn (for served models)
}

// SpecFor is the ToolSpec of t: the code interpreter's when t is one,
// the calculator's otherwise.
func SpecFor(t tool.Tool) ToolSpec {
	if t.Name() == tool.CodeInterpreterName {
		return ToolSpec{Tool: t, Prefix: CodePrefix, Code: true}
	}
	return ToolSpec{Tool: t, Prefix: CalcPrefix}
}

// Call is the assistant's tool-call turn for expr.
func (s ToolSpec) Call(expr string) string {
	if s.Code {
		expr = "print(" + expr + ")"
	}
	return CallOpen + s.Prefix + expr + ArgsClose + CallClose
}

// ExpectedResult is the text the tool returns for a correct call: Python
// prints the integer and a newline, the calculator gives the integer.
func (s ToolSpec) ExpectedResult(v int64) string {
	if s.Code {
		return strconv.FormatInt(v, 10) + "\n"
	}
	return strconv.FormatInt(v, 10)
}

// PromptText is the chat prompt of a problem, generation prompt included.
func PromptText(p Problem, s ToolSpec) string {
	var b strings.Builder
	if s.System {
		b.WriteString(ImStart + "system\nSolve the problem by calling the tool, then give the final answer as \\boxed{N}.\n\n# Tools\n\n<tools>\n")
		b.Write(s.Tool.Schema())
		b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags." + ImEnd + "\n")
	}
	b.WriteString(ImStart + "user\n" + p.Text + ImEnd + "\n" + ImStart + "assistant\n")
	return b.String()
}

// Answer is the final assistant turn that answers v.
func Answer(v string) string { return BoxedOpen + v + "}" + ImEnd }

// BuildSFT turns problems into SFT sequences laid out exactly as the
// rollout engine will produce them: prompt (mask 0), the tool call
// (mask 1), the tool result in ChatML glue (mask 0), the boxed answer and
// end of turn (mask 1), for the problems tool marks true (SFTToolUse or
// PairSFT). The others instead write the expression and compute it "in
// their head": a rough guess (two significant digits), as a model without
// a tool would, so the SFT policy often skips the tool and is wrong — the
// habit RL has to unlearn. Both kinds copy the problem's numbers into the
// expression, so every trajectory teaches the copying that tool use
// relies on.
//
// The result text is what the tool prints; the first calls are run on the
// real tool and compared, so a change in the tool's output format fails
// here rather than teaching the model the wrong text.
func BuildSFT(ctx context.Context, probs []Problem, tool []bool, tok *tokenizer.Bytes, s ToolSpec) ([]agentrl.SFTSample, error) {
	if len(tool) != len(probs) {
		return nil, fmt.Errorf("SFT: %d tool marks for %d problems", len(tool), len(probs))
	}
	const verify = 8
	for i := range min(verify, len(probs)) {
		p := probs[i]
		args, err := callArgs(s, p.Expr)
		if err != nil {
			return nil, err
		}
		res, err := s.Tool.Call(ctx, args)
		if err != nil {
			return nil, fmt.Errorf("running %s on SFT problem %d: %w", s.Tool.Name(), i, err)
		}
		if want := s.ExpectedResult(p.Answer); res.Failed || res.Content != want {
			return nil, fmt.Errorf("SFT problem %d: %s printed %q for %s, want %q", i, s.Tool.Name(), res.Content, p.Expr, want)
		}
	}
	out := make([]agentrl.SFTSample, len(probs))
	for i, p := range probs {
		var smp agentrl.SFTSample
		add := func(text string, mask float32) { AppendText(&smp, tok, text, mask) }
		add(PromptText(p, s), 0)
		if !tool[i] {
			add(p.Expr+" = "+Answer(RoughGuess(p.Answer)), 1)
		} else {
			call := s.Call(p.Expr)
			add(call, 1)
			add(rollout.ChatML{}.Render(call, []string{s.ExpectedResult(p.Answer)}), 0)
			add(Answer(strconv.FormatInt(p.Answer, 10)), 1)
		}
		out[i] = smp
	}
	return out, nil
}

// SFTToolUse draws, for each of n problems, whether its SFT trajectory
// calls the tool (true) or answers with a guess (false, each with
// probability noToolFrac), from seed: BuildSFT's marks for problems that
// each appear once.
func SFTToolUse(n int, noToolFrac float64, seed uint64) []bool {
	r := rand.New(rand.NewPCG(seed, 7))
	tool := make([]bool, n)
	for i := range tool {
		tool[i] = r.Float64() >= noToolFrac
	}
	return tool
}

// PairSFT returns each of probs twice in a row, and BuildSFT's marks for
// them: the first of each pair calls the tool, the second answers with a
// guess. Trained with SFTOptions.Pairs, each update trains half of its
// problems one way and half the other, so whether a trajectory calls the
// tool says nothing about its problem and every batch holds as many of
// each kind. With independent draws (SFTToolUse) the share of calls in
// the last few dozen batches wanders by several points, and the SFT
// policy's rate of calling the tool follows it.
func PairSFT(probs []Problem) ([]Problem, []bool) {
	out := make([]Problem, 0, 2*len(probs))
	tool := make([]bool, 0, 2*len(probs))
	for _, p := range probs {
		out = append(out, p, p)
		tool = append(tool, true, false)
	}
	return out, tool
}

// callArgs are the arguments the trajectory's call passes, parsed as the
// rollout engine parses them.
func callArgs(s ToolSpec, expr string) (json.RawMessage, error) {
	calls := rollout.Hermes{}.Parse(s.Call(expr))
	if len(calls) != 1 || calls[0].Err != nil {
		return nil, fmt.Errorf("the call text for %q does not parse as one tool call: %v", expr, calls)
	}
	return calls[0].Arguments, nil
}

// Eval is the outcome of one evaluation.
type Eval struct {
	Avg, Pass, Maj float64            // avg@k, pass@k and maj@k of the accuracy
	ToolCalls      float64            // mean tool calls per response
	NoTool         float64            // fraction of responses that answered without a call
	ToolAcc        float64            // accuracy of the responses with at least one call (0 if none had one)
	Metrics        map[string]float64 // eval.Result.Map: verl's val-core/val-aux keys
	Generations    []Generation       // every response, by prompt then sample
}

// Generation is one evaluated response, as verl's trainer writes its
// validation generations (trainer.validation_data_dir: one JSON object per
// line, with keys input, output, gts, score and step, and the reward's
// extra values, here acc and pred). Step is set by WriteGenerations.
type Generation struct {
	Input  string  `json:"input"`  // the prompt text
	Output string  `json:"output"` // the response, tool results included as the model saw them
	GTS    string  `json:"gts"`    // the ground truth
	Score  float64 `json:"score"`
	Step   int     `json:"step"`
	Acc    bool    `json:"acc"`
	Pred   string  `json:"pred"` // the answer the reward read
}

// WriteGenerations writes gens to dir/<step>.jsonl (the folder made if
// needed; the file written atomically), one JSON object per line with
// step set, HTML characters unescaped (the tags of tool calls stay
// readable, as Python's json.dumps leaves them).
func WriteGenerations(dir string, step int, gens []Generation) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, strconv.Itoa(step)+".jsonl"), 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, g := range gens {
			g.Step = step
			if err := enc.Encode(g); err != nil {
				return err
			}
		}
		return nil
	})
}

// Evaluate samples k responses per problem and computes avg@k, pass@k and
// maj@k of the accuracy (eval.Evaluate, verl's definitions) with the
// tool-use statistics (EvaluatePrompts over the problems' Prompts).
func Evaluate(ctx context.Context, engine *rollout.Engine, rf reward.Func, probs []Problem, s ToolSpec,
	params lm.SampleParams, k int) (Eval, error) {
	return EvaluatePrompts(ctx, engine, rf, Prompts(probs, s), params, k)
}

// EvaluatePrompts samples k responses per prompt (its Text, the chat
// template applied) and computes avg@k, pass@k and maj@k of the accuracy
// (eval.Evaluate, verl's definitions) with the tool-use statistics,
// under the data source of the first prompt. Prompt i's requests are
// seeded with 1000003·(i+1), whatever the policy, so two policies are
// compared on the same random draws.
func EvaluatePrompts(ctx context.Context, engine *rollout.Engine, rf reward.Func, prompts []agentrl.Prompt,
	params lm.SampleParams, k int) (Eval, error) {
	if len(prompts) == 0 {
		return Eval{}, errors.New("evaluate: no prompts")
	}
	source := prompts[0].DataSource
	reqs := make([]rollout.Request, len(prompts))
	for i, p := range prompts {
		seed := uint64(1_000_003 * (i + 1))
		pp := params
		pp.Seed = &seed
		reqs[i] = rollout.Request{ID: p.ID, PromptText: p.Text, Params: pp, N: k}
	}
	trajs, err := engine.Run(ctx, reqs)
	if err != nil {
		return Eval{}, err
	}
	recs := make([]eval.Record, len(trajs))
	calls := make([]float64, len(trajs))
	noTools := make([]float64, len(trajs))
	var e Eval
	var withTool, rightWithTool int
	for i, t := range trajs {
		p := prompts[t.Request]
		out, err := rf(ctx, p.RewardInput(&t))
		if err != nil {
			return Eval{}, fmt.Errorf("scoring trajectory %d: %w", i, err)
		}
		noTool := 0.0
		if len(t.ToolCalls) == 0 && t.Stop == rollout.StopNoToolCall {
			noTool = 1
		}
		calls[i] = float64(len(t.ToolCalls))
		noTools[i] = noTool
		if len(t.ToolCalls) > 0 {
			withTool++
			if out.Acc {
				rightWithTool++
			}
		}
		recs[i] = eval.Record{DataSource: source, PromptID: t.ID, Score: out.Score, Acc: out.Acc, Pred: out.Pred,
			Extra: map[string]float64{"tool_calls": float64(len(t.ToolCalls)), "no_tool_answer": noTool}}
		e.Generations = append(e.Generations, Generation{Input: p.Text, Output: t.Response, GTS: p.GroundTruth,
			Score: out.Score, Acc: out.Acc, Pred: out.Pred})
	}
	e.ToolCalls = stat.Mean(calls, nil)
	e.NoTool = stat.Mean(noTools, nil)
	if withTool > 0 {
		e.ToolAcc = float64(rightWithTool) / float64(withTool)
	}
	res, err := eval.Evaluate(ctx, recs, eval.DefaultConfig())
	if err != nil {
		return Eval{}, err
	}
	e.Metrics = res.Map()
	e.Avg, _ = res.Value(source, eval.VarAcc, fmt.Sprintf("mean@%d", k))
	var ok bool
	if e.Pass, ok = res.Value(source, eval.VarAcc, fmt.Sprintf("pass@%d", k)); !ok {
		e.Pass = e.Avg // k = 1
	}
	if e.Maj, ok = res.Value(source, eval.VarAcc, fmt.Sprintf("maj@%d/mean", k)); !ok {
		e.Maj = e.Avg
	}
	return e, nil
}

// Named is an evaluation under the name the table and the JSON line give
// it.
type Named struct {
	Name string
	Eval Eval
}

// PrintTable writes the before/after table: avg@k, pass@k, maj@k, tool
// calls per answer, answers without a tool call and the accuracy of the
// answers with one, a row per evaluation. avg@k is about (1 − answers
// w/o tool) × right w/ tool when answers without the tool are guesses,
// so the last two columns say whether a policy loses by not calling the
// tool or by miscopying what it returned.
func PrintTable(w io.Writer, k int, rows []Named) {
	fmt.Fprintf(w, "\n%-14s %8s %8s %8s %14s %18s %16s\n", "policy", fmt.Sprintf("avg@%d", k), fmt.Sprintf("pass@%d", k),
		fmt.Sprintf("maj@%d", k), "tool calls/ans", "answers w/o tool", "right w/ tool")
	for _, r := range rows {
		fmt.Fprintf(w, "%-14s %7.1f%% %7.1f%% %7.1f%% %14.2f %17.1f%% %15.1f%%\n", r.Name, 100*r.Eval.Avg, 100*r.Eval.Pass, 100*r.Eval.Maj,
			r.Eval.ToolCalls, 100*r.Eval.NoTool, 100*r.Eval.ToolAcc)
	}
	fmt.Fprintln(w)
}

// WriteJSONLine prints the summary line, {"sft": {"avg@k": …, "pass@k":
// …, "maj@k": …}, "rl": {…}, "seconds": s}, with the evaluations in the
// order given, fractions to 4 decimals and seconds to 1.
func WriteJSONLine(w io.Writer, k int, evals []Named, d time.Duration) error {
	var b strings.Builder
	b.WriteByte('{')
	for _, e := range evals {
		name, err := json.Marshal(e.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, `%s: {"avg@%d": %s, "pass@%d": %s, "maj@%d": %s}, `, name,
			k, jsonNumber(e.Eval.Avg, 4), k, jsonNumber(e.Eval.Pass, 4), k, jsonNumber(e.Eval.Maj, 4))
	}
	fmt.Fprintf(&b, `"seconds": %s}`, jsonNumber(d.Seconds(), 1))
	_, err := fmt.Fprintln(w, b.String())
	return err
}

// jsonNumber formats v with at most prec decimals, trailing zeros dropped.
func jsonNumber(v float64, prec int) string {
	p := math.Pow(10, float64(prec))
	return strconv.FormatFloat(math.Round(v*p)/p, 'f', -1, 64)
}

// AppendText appends the tokens of text to smp, each with loss mask mask
// (1: the model's own text, trained; 0: prompt and tool results).
func AppendText(smp *agentrl.SFTSample, tok *tokenizer.Bytes, text string, mask float32) {
	ids := tok.Encode(text)
	smp.IDs = append(smp.IDs, ids...)
	for range ids {
		smp.Mask = append(smp.Mask, mask)
	}
}

// UntrainGuesses takes the guessed digits of the trajectories that answer
// without the tool (those tool marks false: SFTToolUse with BuildSFT's
// fraction and seed) out of the loss: the tokens between the last
// BoxedOpen (one token) and the last "}" of each such trajectory get
// mask 0. The trajectory
// still teaches answering without the tool, and its format; only the
// digits, which the model cannot compute and which compete with copying
// a tool's result at the same place (after \boxed{), are not trained.
func UntrainGuesses(sft []agentrl.SFTSample, tool []bool, tok *tokenizer.Bytes) error {
	if len(tool) != len(sft) {
		return fmt.Errorf("untrain guesses: %d tool marks for %d trajectories", len(tool), len(sft))
	}
	open, close := tok.Encode(BoxedOpen), tok.Encode("}")
	if len(open) != 1 || len(close) != 1 {
		return fmt.Errorf("untrain guesses: %s or } is not one token", BoxedOpen)
	}
	for i := range sft {
		if tool[i] {
			continue
		}
		ids := sft[i].IDs
		end := -1
		for j := len(ids) - 1; j >= 0; j-- {
			if ids[j] == close[0] {
				end = j
				break
			}
		}
		start := -1
		for j := end - 1; j >= 0; j-- {
			if ids[j] == open[0] {
				start = j
				break
			}
		}
		if end < 0 || start < 0 {
			return fmt.Errorf("untrain guesses: trajectory %d has no %s…} answer", i, BoxedOpen)
		}
		for j := start + 1; j < end; j++ {
			sft[i].Mask[j] = 0
		}
	}
	return nil
}
