package reward

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentrl/agentrl/tool"
)

// Code rewards run a candidate Python program against test cases on a
// tool.Executor: the local tool.Sandbox or a tool.SandboxFusion client.
//
// The executor contract. CodeFunc calls Executor.Execute once per test case
// with ExecRequest{Code: harness, Language: "python"}, where the harness is
// a self-contained Python 3 script that embeds the candidate source and
// the test input (Stdin, Timeout and MemoryBytes are left to the
// executor's defaults). It reads ExecResult.Stdout for the verdict, and
// Status, ExitCode, Signal, Stderr and Message to say why a process that
// left none died. An Execute error means the executor cannot run code at
// all (closed, unreachable) and fails the Func.
//
// The harness compiles the candidate (a SyntaxError is reported as such),
// runs it with the test input on sys.stdin and sys.stdout captured (both
// text streams over bytes, so sys.stdin.buffer and sys.stdout.buffer work
// as in a real process), or for
// call-based tests calls Solution().fn_name(*args) or fn_name(*args), and
// prints one line to the real stdout: a per-call random sentinel followed
// by a JSON object {"status", "out", "err", "trunc"}. CodeFunc reads the
// last such line, so output printed by the candidate cannot be mistaken
// for the verdict; when the line is missing the process died (timeout,
// memory, os._exit) and the ExecResult says how.
//
// Output caps. The candidate's stdout is captured inside the process, and
// the verdict carries at most 2×len(expected output)+4096 characters of
// it (more is a wrong answer), JSON-escaped, plus the last 2000
// characters of a traceback. The executor's output cap (stdout and stderr
// together; tool.SandboxConfig.MaxOutputBytes, default 1 MiB) must hold
// that line and whatever the candidate writes to stderr. The default holds
// the verdict on a correct output of a few hundred KB of ordinary text; a
// process killed at the cap before its verdict counts as crashed, so raise
// the cap for test sets with larger expected outputs.

// TestSpec is a set of test cases in the verl / PRIME / TACO / LiveCodeBench
// format: {"inputs": [...], "outputs": [...], "fn_name": "..."}.
type TestSpec struct {
	// Inputs are stdin texts, or for call-based tests the argument lists.
	Inputs []json.RawMessage `json:"inputs"`
	// Outputs are expected stdout texts or return values.
	Outputs []json.RawMessage `json:"outputs"`
	// FnName, when set, makes the tests call-based.
	FnName string `json:"fn_name,omitempty"`
}

// testCase is one normalised case.
type testCase struct {
	stdin    string
	args     []json.RawMessage
	expected string          // stdin mode
	value    json.RawMessage // call mode
}

// ParseTests reads a TestSpec from JSON text, checking that inputs and
// outputs pair up. Stdin inputs may be strings or lists of lines;
// call-based inputs may be argument lists or LiveCodeBench's
// newline-separated JSON arguments.
func ParseTests(spec string) (TestSpec, error) {
	var ts TestSpec
	if err := json.Unmarshal([]byte(spec), &ts); err != nil {
		return TestSpec{}, fmt.Errorf("%w: %w", ErrTests, err)
	}
	if len(ts.Inputs) == 0 {
		return TestSpec{}, fmt.Errorf("%w: no test inputs", ErrTests)
	}
	if len(ts.Inputs) != len(ts.Outputs) {
		return TestSpec{}, fmt.Errorf("%w: %d inputs but %d outputs", ErrTests, len(ts.Inputs), len(ts.Outputs))
	}
	if _, err := ts.cases(); err != nil {
		return TestSpec{}, err
	}
	return ts, nil
}

func (ts TestSpec) cases() ([]testCase, error) {
	out := make([]testCase, len(ts.Inputs))
	for i := range ts.Inputs {
		in, exp := ts.Inputs[i], ts.Outputs[i]
		var tc testCase
		if ts.FnName == "" {
			s, err := textOrLines(in)
			if err != nil {
				return nil, fmt.Errorf("%w: inputs[%d]: %w", ErrTests, i, err)
			}
			e, err := textOrLines(exp)
			if err != nil {
				return nil, fmt.Errorf("%w: outputs[%d]: %w", ErrTests, i, err)
			}
			tc.stdin, tc.expected = s, e
		} else {
			args, err := callArgs(in)
			if err != nil {
				return nil, fmt.Errorf("%w: inputs[%d]: %w", ErrTests, i, err)
			}
			tc.args = args
			tc.value = exp
			var s string
			if json.Unmarshal(exp, &s) == nil && json.Valid([]byte(s)) {
				tc.value = json.RawMessage(s) // LiveCodeBench stores the value as JSON text
			}
		}
		out[i] = tc
	}
	return out, nil
}

func textOrLines(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err == nil {
		return strings.Join(lines, "\n"), nil
	}
	return "", errors.New("want a string or a list of strings")
}

func callArgs(raw json.RawMessage) ([]json.RawMessage, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, errors.New("want an argument list or newline-separated JSON arguments")
	}
	for j, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if !json.Valid([]byte(line)) {
			return nil, fmt.Errorf("argument line %d is not JSON: %q", j, line)
		}
		list = append(list, json.RawMessage(line))
	}
	return list, nil
}

// CodeConfig configures CodeFunc.
type CodeConfig struct {
	// Executor runs the harness; see the executor contract above. The
	// local tool.Sandbox and tool.SandboxFusion implement it.
	Executor tool.Executor
	// Parallel bounds the test cases running at once; zero means 4.
	Parallel int
	// CaseTimeout bounds one test case on top of the executor's own limit;
	// zero means 30 s.
	CaseTimeout time.Duration
	// MaxCases caps the number of test cases run; zero means all.
	MaxCases int
}

// Case outcomes.
const (
	CasePass         = "pass"
	CaseWrong        = "wrong_answer"
	CaseSyntaxError  = "syntax_error"
	CaseRuntimeError = "runtime_error"
	CaseTimeout      = "timeout"
	CaseCrashed      = "crashed"
)

var codeBlockRe = regexp.MustCompile("(?s)```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```")

// ExtractCode returns the last fenced code block of the response, preferring
// blocks marked python (or py, python3) over unmarked ones.
func ExtractCode(response string) (string, bool) {
	if i := strings.LastIndex(response, "</think>"); i >= 0 {
		if c, ok := ExtractCode(response[i+len("</think>"):]); ok {
			return c, true
		}
	}
	blocks := codeBlockRe.FindAllStringSubmatch(response, -1)
	for i := len(blocks) - 1; i >= 0; i-- {
		switch strings.ToLower(blocks[i][1]) {
		case "python", "py", "python3":
			return blocks[i][2], true
		}
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i][1] == "" {
			return blocks[i][2], true
		}
	}
	return "", false
}

// CodeFunc returns a Func that extracts the last Python code block of the
// response and runs it against the test cases in in.GroundTruth (a
// TestSpec as JSON). Score is passed/total; Acc is all passed; Reason tells
// a missing code block, a syntax error, runtime errors, timeouts and wrong
// answers apart. Stdin cases compare as LiveCodeBench does: lines with
// surrounding whitespace stripped, trailing blank lines ignored, and
// lines that differ as text may still match as decimal numbers. Call-based
// cases compare the JSON values of result and expectation (tuples as
// lists). The Func returns an error only when the executor cannot run code
// (tool.Executor.Execute's error) or ctx ends.
func CodeFunc(cfg CodeConfig) (Func, error) {
	if cfg.Executor == nil {
		return nil, fmt.Errorf("%w: CodeConfig.Executor is nil", ErrConfig)
	}
	if cfg.Parallel < 0 || cfg.CaseTimeout < 0 || cfg.MaxCases < 0 {
		return nil, fmt.Errorf("%w: CodeConfig has a negative limit", ErrConfig)
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 4
	}
	if cfg.CaseTimeout == 0 {
		cfg.CaseTimeout = 30 * time.Second
	}
	return func(ctx context.Context, in Input) (Output, error) {
		return runCode(ctx, cfg, in)
	}, nil
}

type caseResult struct {
	status string
	detail string
}

func runCode(ctx context.Context, cfg CodeConfig, in Input) (Output, error) {
	spec, err := ParseTests(in.GroundTruth)
	if err != nil {
		return Output{}, fmt.Errorf("reward: code ground truth: %w", err)
	}
	cases, _ := spec.cases()
	if cfg.MaxCases > 0 && len(cases) > cfg.MaxCases {
		cases = cases[:cfg.MaxCases]
	}
	src, ok := ExtractCode(in.Response)
	if !ok {
		return Output{Reason: "no code block in the response"}, nil
	}
	results := make([]caseResult, len(cases))
	// The first case runs alone: a syntax error fails every case the same way.
	r0, err := runCase(ctx, cfg, src, spec.FnName, cases[0])
	if err != nil {
		return Output{}, fmt.Errorf("reward: test 0: %w", err)
	}
	results[0] = r0
	if r0.status == CaseSyntaxError {
		return Output{Pred: src, Reason: "syntax error: " + r0.detail}, nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Parallel)
	for i := 1; i < len(cases); i++ {
		g.Go(func() error {
			r, err := runCase(gctx, cfg, src, spec.FnName, cases[i])
			if err != nil {
				return fmt.Errorf("reward: test %d: %w", i, err)
			}
			results[i] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Output{}, err
	}
	passed := 0
	counts := map[string]int{}
	firstFail := -1
	for i, r := range results {
		counts[r.status]++
		if r.status == CasePass {
			passed++
		} else if firstFail < 0 {
			firstFail = i
		}
	}
	out := Output{Score: float64(passed) / float64(len(cases)), Acc: passed == len(cases), Pred: src}
	if out.Acc {
		out.Reason = fmt.Sprintf("passed all %d tests", len(cases))
		return out, nil
	}
	var parts []string
	for _, s := range []string{CaseWrong, CaseRuntimeError, CaseTimeout, CaseCrashed} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	f := results[firstFail]
	out.Reason = fmt.Sprintf("passed %d/%d tests (%s); test %d: %s: %s",
		passed, len(cases), strings.Join(parts, ", "), firstFail, f.status, f.detail)
	return out, nil
}

func newNonce() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms; a fixed
		// marker still works, it is only easier to forge.
		return "@@AGENTRL-RESULT@@"
	}
	return "@@" + hex.EncodeToString(b[:]) + "@@"
}

func runCase(ctx context.Context, cfg CodeConfig, src, fnName string, tc testCase) (caseResult, error) {
	nonce := newNonce()
	prog, err := harness(src, fnName, tc, nonce)
	if err != nil {
		return caseResult{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.CaseTimeout)
	defer cancel()
	res, err := cfg.Executor.Execute(cctx, tool.ExecRequest{Code: prog, Language: "python"})
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return caseResult{status: CaseTimeout, detail: fmt.Sprintf("no result within %v", cfg.CaseTimeout)}, nil
		}
		return caseResult{}, err
	}
	return judge(res, fnName, tc, nonce), nil
}

type harnessReport struct {
	Status string `json:"status"`
	Out    string `json:"out"`
	Err    string `json:"err"`
	Trunc  bool   `json:"trunc"`
}

func judge(res tool.ExecResult, fnName string, tc testCase, nonce string) caseResult {
	i := strings.LastIndex(res.Stdout, nonce)
	if i < 0 {
		if res.Status == tool.StatusTimeout {
			return caseResult{status: CaseTimeout, detail: "the program exceeded the time limit"}
		}
		detail := "the program ended without a result" + exitInfo(res)
		if out := tail(res.Stdout+res.Stderr, 200); out != "" {
			detail += ": " + out
		}
		return caseResult{status: CaseCrashed, detail: detail}
	}
	line := res.Stdout[i+len(nonce):]
	if j := strings.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	var rep harnessReport
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		if res.OutputTruncated {
			detail := "the harness report was cut at the executor's output cap"
			if res.Message != "" {
				detail += " (" + res.Message + ")"
			}
			return caseResult{status: CaseCrashed, detail: detail}
		}
		return caseResult{status: CaseCrashed, detail: "unreadable harness report: " + err.Error()}
	}
	switch rep.Status {
	case "syntax_error":
		return caseResult{status: CaseSyntaxError, detail: tail(rep.Err, 300)}
	case "runtime_error":
		return caseResult{status: CaseRuntimeError, detail: tail(rep.Err, 300)}
	case "ok":
	default:
		return caseResult{status: CaseCrashed, detail: "harness status " + rep.Status}
	}
	if rep.Trunc {
		return caseResult{status: CaseWrong, detail: "output much longer than expected"}
	}
	if fnName == "" {
		if stdoutMatches(rep.Out, tc.expected) {
			return caseResult{status: CasePass}
		}
		return caseResult{status: CaseWrong, detail: fmt.Sprintf("expected %s, got %s", quote(tc.expected), quote(rep.Out))}
	}
	if valueMatches([]byte(rep.Out), tc.value) {
		return caseResult{status: CasePass}
	}
	return caseResult{status: CaseWrong, detail: fmt.Sprintf("expected %s, got %s", quote(string(tc.value)), quote(rep.Out))}
}

// exitInfo says how a process ended, for a crash's detail: the executor's
// message when it gave one (timeouts, limits, signals, its own failures),
// else the output cap, the signal or the exit code.
func exitInfo(res tool.ExecResult) string {
	var s string
	switch {
	case res.Message != "":
		s = res.Message
	case res.Status == tool.StatusOutputLimit:
		s = "output over the executor's cap"
	case res.Signal != "":
		s = "killed by " + res.Signal
	case res.ExitCode > 0: // -1 stands for "no exit code"
		s = fmt.Sprintf("exit code %d", res.ExitCode)
	default:
		return ""
	}
	return " (" + s + ")"
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// stdoutMatches compares program output with the expected output as
// LiveCodeBench's grade_stdio does: both are stripped and split into
// lines, each line stripped; lines equal as text pass, otherwise lines
// whose whitespace-separated tokens are all decimal numbers pass when the
// numbers are equal.
func stdoutMatches(got, want string) bool {
	g := strings.Split(strings.TrimSpace(got), "\n")
	w := strings.Split(strings.TrimSpace(want), "\n")
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		a, b := strings.TrimSpace(g[i]), strings.TrimSpace(w[i])
		if a == b {
			continue
		}
		ta, tb := strings.Fields(a), strings.Fields(b)
		if len(ta) != len(tb) || len(ta) == 0 {
			return false
		}
		for j := range ta {
			x, ok1 := new(big.Rat).SetString(ta[j])
			y, ok2 := new(big.Rat).SetString(tb[j])
			if !ok1 || !ok2 || x.Cmp(y) != 0 || len(ta[j]) > 64 || len(tb[j]) > 64 {
				return false
			}
		}
	}
	return true
}

// valueMatches compares JSON values; an expectation wrapped in a one-element
// list also matches the bare value (the APPS/TACO convention).
func valueMatches(got, want []byte) bool {
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil {
		return strings.TrimSpace(string(got)) == strings.TrimSpace(string(want))
	}
	if reflect.DeepEqual(g, w) {
		return true
	}
	if l, ok := w.([]any); ok && len(l) == 1 {
		return reflect.DeepEqual(g, l[0])
	}
	return false
}

// harnessTemplate is the Python program that runs one case. %s slots, in
// order: nonce, source, mode, stdin, function name, arguments, output cap.
// Every slot is a JSON string literal, which is also a valid Python one.
const harnessTemplate = `import sys, io, json, traceback
_NONCE = %s
_SRC = %s
_MODE = %s
_STDIN = %s
_FN = %s
_ARGS = json.loads(%s)
_CAP = %d
def _emit(status, out="", err=""):
    trunc = len(out) > _CAP
    sys.stdout = sys.__stdout__
    sys.__stdout__.write("\n" + _NONCE + json.dumps({"status": status, "out": out[:_CAP], "err": err[-2000:], "trunc": trunc}) + "\n")
    sys.__stdout__.flush()
try:
    _code = compile(_SRC, "<solution>", "exec")
except (SyntaxError, ValueError) as _e:
    _emit("syntax_error", err="%%s: %%s" %% (type(_e).__name__, _e))
    raise SystemExit(0)
_raw = io.BytesIO()
_buf = io.TextIOWrapper(_raw, encoding="utf-8", write_through=True)
sys.stdin = io.TextIOWrapper(io.BytesIO(_STDIN.encode("utf-8")), encoding="utf-8")
sys.stdout = _buf
def _captured():
    try:
        _buf.flush()
    except Exception:
        pass
    return _raw.getvalue().decode("utf-8", "replace")
_g = {"__name__": "__main__" if _MODE == "stdin" else "solution"}
try:
    exec(_code, _g)
    if _MODE == "call":
        _f = None
        if "Solution" in _g:
            _f = getattr(_g["Solution"](), _FN, None)
        if _f is None:
            _f = _g.get(_FN)
        if _f is None:
            raise NameError("no function named %%s" %% _FN)
        _r = _f(*_ARGS)
        if isinstance(_r, tuple):
            _r = list(_r)
        _emit("ok", json.dumps(_r))
    else:
        _emit("ok", _captured())
except SystemExit as _e:
    if _e.code in (None, 0) and _MODE == "stdin":
        _emit("ok", _captured())
    else:
        _emit("runtime_error", "", "SystemExit(%%r)" %% (_e.code,))
except BaseException:
    _emit("runtime_error", "", traceback.format_exc(limit=5))
`

func harness(src, fnName string, tc testCase, nonce string) (string, error) {
	lit := func(s string) string {
		b, _ := json.Marshal(s) // strings always marshal
		return string(b)
	}
	mode := "stdin"
	argsJSON := "[]"
	capLen := 2*len(tc.expected) + 4096
	if fnName != "" {
		mode = "call"
		a, err := json.Marshal(tc.args)
		if err != nil {
			return "", fmt.Errorf("%w: arguments: %w", ErrTests, err)
		}
		argsJSON = string(a)
		capLen = 2*len(tc.value) + 4096
	}
	return fmt.Sprintf(harnessTemplate, lit(nonce), lit(src), lit(mode), lit(tc.stdin), lit(fnName), lit(argsJSON), capLen), nil
}
