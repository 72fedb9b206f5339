package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// CodeInterpreterName is the function name of the code interpreter tool,
// as in Open-AgentRL and verl's sandbox tool.
const CodeInterpreterName = "code_interpreter"

// codeInterpreterSchema is the tool's schema: one required string "code".
var codeInterpreterSchema = FunctionSchema(CodeInterpreterName,
	"A tool for executing Python code. It returns what the code prints to stdout and stderr; use print() to see results.",
	Param{Name: "code", Type: "string", Description: "The Python code to execute.", Required: true})

// CodeInterpreter is the code_interpreter tool of Open-AgentRL: the model
// passes Python source in "code" (a ```python fence around it is
// unwrapped), the code runs on an Executor, and the model reads its stdout
// followed by its stderr, cut to an OutputBudget keeping head and tail.
type CodeInterpreter struct {
	exec   Executor
	budget OutputBudget
	close  func() error
}

// NewCodeInterpreter starts a local Sandbox with cfg and returns the tool
// running code in it; cfg.Budget bounds what the model reads. Close the
// tool to stop the sandbox. It fails with ErrNoPython (wrapped) when no
// python3 exists; callers can fall back to the Calculator then.
func NewCodeInterpreter(cfg SandboxConfig) (*CodeInterpreter, error) {
	if err := cfg.Budget.Validate(); err != nil {
		return nil, err
	}
	sb, err := NewSandbox(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	return &CodeInterpreter{exec: sb, budget: cfg.Budget, close: sb.Close}, nil
}

// NewCodeInterpreterOn returns the tool running code on e, such as a
// SandboxFusion client. Closing the tool does not close e.
func NewCodeInterpreterOn(e Executor, budget OutputBudget) (*CodeInterpreter, error) {
	if e == nil {
		return nil, fmt.Errorf("tool: NewCodeInterpreterOn: nil Executor")
	}
	if err := budget.Validate(); err != nil {
		return nil, err
	}
	return &CodeInterpreter{exec: e, budget: budget}, nil
}

// Name returns "code_interpreter".
func (c *CodeInterpreter) Name() string { return CodeInterpreterName }

// Schema returns the tool's function schema.
func (c *CodeInterpreter) Schema() json.RawMessage { return codeInterpreterSchema }

// Executor returns the executor the tool runs code on.
func (c *CodeInterpreter) Executor() Executor { return c.exec }

// Close stops the sandbox the tool started, if it started one.
func (c *CodeInterpreter) Close() error {
	if c.close == nil {
		return nil
	}
	return c.close()
}

// Call runs the model's code. Arguments that are not {"code": string} and
// code that fails in any way come back as a failed Result; the error is
// non-nil only when the executor cannot run code at all (see Tool).
//
// A call that a limit stopped (timeout, output cap, memory, CPU or
// process budget) ends with "Error: " and the executor's message, such as
// "Error: memory limit exceeded: the program's processes together used
// more than their budget of 256 MiB and were killed".
//
// Metadata keys: "status" (an ExecStatus), "exit_code", "signal" (when a
// signal ended the code), "truncated" (the budget cut the text),
// "output_limited" (the executor's output cap killed the code),
// "isolation" (Isolation.Level), "isolation_reason" (when weaker than
// namespaces), "exec_duration" (as the executor measured it); where the
// executor has a per-call budget, "budget" (CallBudget.Mechanism),
// "peak_memory_bytes" and "cpu_time" (CallUsage), and, when true,
// "killed_for_memory", "killed_for_cpu", "killed_for_processes" and
// "process_limit".
func (c *CodeInterpreter) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	start := time.Now()
	args, err := normalizeArgs(args)
	var a struct {
		Code *string `json:"code"`
	}
	if err == nil {
		if e := json.Unmarshal(args, &a); e != nil {
			err = fmt.Errorf(`field "code" must be a string`)
		} else if a.Code == nil {
			err = fmt.Errorf(`missing required field "code"`)
		}
	}
	if err != nil {
		return failed(start, "bad_arguments", "Error: invalid arguments for %s: %v", CodeInterpreterName, err), nil
	}
	code := UnwrapCodeFence(*a.Code)
	res, err := c.exec.Execute(ctx, ExecRequest{Code: code, Language: "python"})
	if err != nil {
		return Result{Content: "Error: the code interpreter is unavailable", Failed: true, Duration: time.Since(start),
			Metadata: map[string]any{"error": "executor"}}, fmt.Errorf("tool: code_interpreter: %w", err)
	}
	text := res.Stdout + res.Stderr
	switch {
	case res.Status == StatusOK:
	case res.Status == StatusError && !res.Usage.ProcessLimit:
	default:
		// A limit stopped the code, or (a refused fork) likely caused
		// its error: say which.
		if res.Message != "" {
			if text != "" && !strings.HasSuffix(text, "\n") {
				text += "\n"
			}
			text += "Error: " + res.Message
		}
	}
	content, truncated := c.budget.Truncate(text)
	md := map[string]any{
		"status":         string(res.Status),
		"exit_code":      res.ExitCode,
		"truncated":      truncated,
		"output_limited": res.OutputTruncated,
		"isolation":      res.Isolation.Level,
		"exec_duration":  res.Duration,
	}
	if res.Signal != "" {
		md["signal"] = res.Signal
	}
	if res.Isolation.Reason != "" {
		md["isolation_reason"] = res.Isolation.Reason
	}
	if b := res.Isolation.Budget.Mechanism; b != "" {
		md["budget"] = b
		md["peak_memory_bytes"] = res.Usage.PeakMemoryBytes
		md["cpu_time"] = res.Usage.CPUTime
	}
	for key, on := range map[string]bool{
		"killed_for_memory":    res.Usage.KilledForMemory,
		"killed_for_cpu":       res.Usage.KilledForCPU,
		"killed_for_processes": res.Usage.KilledForProcesses,
		"process_limit":        res.Usage.ProcessLimit,
	} {
		if on {
			md[key] = true
		}
	}
	return Result{Content: content, Failed: res.Status != StatusOK, Duration: time.Since(start), Metadata: md}, nil
}

// fenceRE matches a Markdown code fence: an opening ``` line with an
// optional language tag, the body, and a closing ``` line or the end.
var fenceRE = regexp.MustCompile("(?s)```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)(?:\r?\n[ \t]*```|$)")

// UnwrapCodeFence returns the body of the first Markdown code fence in
// code whose language tag is empty or Python (python, python3, py), or code
// itself when it has no such fence. Models often wrap the "code" argument
// in ```python ... ```, which Python would reject as a syntax error.
func UnwrapCodeFence(code string) string {
	if !strings.Contains(code, "```") {
		return code
	}
	for _, m := range fenceRE.FindAllStringSubmatch(code, -1) {
		switch strings.ToLower(m[1]) {
		case "", "python", "python3", "py":
			return m[2]
		}
	}
	return code
}
