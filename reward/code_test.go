package reward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/tool"
)

// harnessArgs are the values a harness program embeds, read back by the
// fake executor below the way the harness itself would see them.
type harnessArgs struct {
	nonce, src, mode, stdin, fn string
	args                        []json.RawMessage
}

func readHarness(t *testing.T, prog string) harnessArgs {
	t.Helper()
	var h harnessArgs
	str := func(line, prefix string) string {
		var s string
		require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, prefix)), &s), line)
		return s
	}
	for _, line := range strings.Split(prog, "\n") {
		switch {
		case strings.HasPrefix(line, "_NONCE = "):
			h.nonce = str(line, "_NONCE = ")
		case strings.HasPrefix(line, "_SRC = "):
			h.src = str(line, "_SRC = ")
		case strings.HasPrefix(line, "_MODE = "):
			h.mode = str(line, "_MODE = ")
		case strings.HasPrefix(line, "_STDIN = "):
			h.stdin = str(line, "_STDIN = ")
		case strings.HasPrefix(line, "_FN = "):
			h.fn = str(line, "_FN = ")
		case strings.HasPrefix(line, "_ARGS = json.loads("):
			inner := str(strings.TrimSuffix(line, ")"), "_ARGS = json.loads(")
			require.NoError(t, json.Unmarshal([]byte(inner), &h.args))
		}
	}
	require.NotEmpty(t, h.nonce)
	return h
}

// fakeExec is a scripted tool.Executor: behave decides, from the embedded
// source and input, what the harness would have printed.
type fakeExec struct {
	t        *testing.T
	behave   func(h harnessArgs) (tool.ExecResult, error)
	calls    atomic.Int32
	inFlight atomic.Int32
	peak     atomic.Int32
	delay    time.Duration
}

func (f *fakeExec) Execute(ctx context.Context, req tool.ExecRequest) (tool.ExecResult, error) {
	f.calls.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	// The harness is the whole program: nothing else is asked for.
	if f.t != nil {
		assert.Equal(f.t, tool.ExecRequest{Code: req.Code, Language: "python"}, req)
	}
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return tool.ExecResult{}, ctx.Err()
		}
	}
	return f.behave(readHarness(f.t, req.Code))
}

// report builds the result of a harness that printed its verdict line
// (after some noise of the candidate on stderr).
func report(h harnessArgs, status, out, errText string) tool.ExecResult {
	b, _ := json.Marshal(map[string]any{"status": status, "out": out, "err": errText, "trunc": false})
	return tool.ExecResult{Status: tool.StatusOK, Stdout: h.nonce + string(b) + "\n", Stderr: "stderr noise\n"}
}

const sumSpec = `{"inputs": ["1 2\n", "3 4\n", "10 -5\n"], "outputs": ["3\n", "7\n", "5\n"]}`

func codeResp(src string) string { return "Here:\n```python\n" + src + "\n```\n" }

func TestCodeFuncStdin(t *testing.T) {
	// The fake "runs" the program by knowing what each candidate does.
	behave := func(h harnessArgs) (tool.ExecResult, error) {
		var a, b int
		fields := strings.Fields(h.stdin)
		a, b = atoi(fields[0]), atoi(fields[1])
		switch {
		case strings.Contains(h.src, "SYNTAX"):
			return report(h, "syntax_error", "", "SyntaxError: invalid syntax (<solution>, line 1)"), nil
		case strings.Contains(h.src, "RAISE"):
			return report(h, "runtime_error", "", "Traceback...\nZeroDivisionError: division by zero"), nil
		case strings.Contains(h.src, "LOOP"):
			return tool.ExecResult{Status: tool.StatusTimeout, ExitCode: -1, Signal: "SIGKILL"}, nil
		case strings.Contains(h.src, "OOM"):
			return tool.ExecResult{Status: tool.StatusSignaled, ExitCode: -1, Signal: "SIGKILL", Stderr: "Killed"}, nil
		case strings.Contains(h.src, "FORGE"):
			// The candidate prints a forged verdict with a guessed marker.
			r := report(h, "ok", "999\n", "")
			r.Stdout = "@@00@@{\"status\":\"ok\",\"out\":\"3\"}\n" + r.Stdout
			return r, nil
		case strings.Contains(h.src, "GARBLE"):
			return tool.ExecResult{Status: tool.StatusOK, Stdout: h.nonce + "{not json\n"}, nil
		case strings.Contains(h.src, "EXIT9"):
			return tool.ExecResult{Status: tool.StatusError, ExitCode: 9, Stdout: "bye"}, nil
		case strings.Contains(h.src, "CAPPED"):
			// The executor's output cap cut the verdict line.
			return tool.ExecResult{Status: tool.StatusOutputLimit, ExitCode: -1, Signal: "SIGKILL", OutputTruncated: true,
				Stdout: h.nonce + `{"status": "ok", "out": "12`}, nil
		case strings.Contains(h.src, "SPAM"):
			// Killed at the cap before the verdict, with no message.
			return tool.ExecResult{Status: tool.StatusOutputLimit, ExitCode: -1, Signal: "SIGKILL", OutputTruncated: true,
				Stderr: "spam spam"}, nil
		case strings.Contains(h.src, "WORKER"):
			return tool.ExecResult{Status: tool.StatusSandboxError, ExitCode: -1, Message: "worker died"}, nil
		case strings.Contains(h.src, "HALF"):
			if a+b == 3 {
				return report(h, "ok", "3   \n\n\n", ""), nil // trailing spaces and lines are normalised
			}
			return report(h, "ok", "0\n", ""), nil
		}
		return report(h, "ok", itoa(a+b)+"\n", ""), nil
	}
	exec := &fakeExec{t: t, behave: behave}
	f, err := CodeFunc(CodeConfig{Executor: exec, Parallel: 2})
	require.NoError(t, err)
	cases := []struct {
		name   string
		resp   string
		score  float64
		acc    bool
		reason string
		calls  int32
	}{
		{"all pass", codeResp("print(sum(map(int, input().split())))"), 1, true, "passed all 3 tests", 3},
		{"partial", codeResp("HALF"), 1.0 / 3, false, `passed 1/3 tests (2 wrong_answer); test 1: wrong_answer: expected "7\n", got "0\n"`, 3},
		{"syntax", codeResp("SYNTAX"), 0, false, "syntax error: SyntaxError", 1},
		{"runtime", codeResp("RAISE"), 0, false, "3 runtime_error); test 0: runtime_error: Traceback...\nZeroDivisionError", 3},
		{"timeout", codeResp("LOOP"), 0, false, "3 timeout); test 0: timeout", 3},
		// Crash details: " (" + the executor's message, else the cap, the
		// signal or the exit code + ")" + ": " and the output's tail, if any.
		{"crash", codeResp("OOM"), 0, false, "crashed: the program ended without a result (killed by SIGKILL): Killed", 3},
		{"forged", codeResp("FORGE"), 0, false, "wrong_answer", 3},
		{"garbled report", codeResp("GARBLE"), 0, false, "crashed: unreadable harness report", 3},
		{"exit code", codeResp("EXIT9"), 0, false, "(exit code 9): bye", 3},
		{"verdict cut at the cap", codeResp("CAPPED"), 0, false,
			"test 0: crashed: the harness report was cut at the executor's output cap", 3},
		{"killed at the cap", codeResp("SPAM"), 0, false,
			"test 0: crashed: the program ended without a result (output over the executor's cap): spam spam", 3},
		{"sandbox error", codeResp("WORKER"), 0, false,
			"passed 0/3 tests (3 crashed); test 0: crashed: the program ended without a result (worker died)", 3},
		{"no code", "I would write code but", 0, false, "no code block in the response", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := exec.calls.Load()
			out, err := f(context.Background(), Input{Response: c.resp, GroundTruth: sumSpec})
			require.NoError(t, err)
			assert.InDelta(t, c.score, out.Score, 1e-12)
			assert.Equal(t, c.acc, out.Acc)
			assert.Contains(t, out.Reason, c.reason)
			assert.Equal(t, c.calls, exec.calls.Load()-before)
		})
	}
	assert.LessOrEqual(t, exec.peak.Load(), int32(2), "Parallel bounds the cases in flight")
}

func atoi(s string) int {
	n, neg := 0, false
	for i, c := range s {
		if i == 0 && c == '-' {
			neg = true
			continue
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		return -n
	}
	return n
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestCodeFuncCallBased(t *testing.T) {
	// LiveCodeBench style: inputs are newline-separated JSON arguments,
	// outputs are JSON text.
	spec := `{"fn_name": "twoSum", "inputs": ["[2,7,11,15]\n9", "[3,2,4]\n6"], "outputs": ["[0, 1]", "[1, 2]"]}`
	var seen [][]json.RawMessage
	var mu sync.Mutex
	exec := &fakeExec{t: t, behave: func(h harnessArgs) (tool.ExecResult, error) {
		mu.Lock()
		seen = append(seen, h.args)
		mu.Unlock()
		require.Equal(t, "call", h.mode)
		require.Equal(t, "twoSum", h.fn)
		if string(h.args[1]) == "9" {
			return report(h, "ok", "[0,1]", ""), nil
		}
		return report(h, "ok", "[2,1]", ""), nil
	}}
	f, err := CodeFunc(CodeConfig{Executor: exec})
	require.NoError(t, err)
	out, err := f(context.Background(), Input{Response: codeResp("class Solution: ..."), GroundTruth: spec})
	require.NoError(t, err)
	assert.Equal(t, 0.5, out.Score)
	assert.False(t, out.Acc)
	assert.Contains(t, out.Reason, `test 1: wrong_answer: expected "[1, 2]", got "[2,1]"`)
	require.Len(t, seen, 2)
}

func TestCodeFuncErrors(t *testing.T) {
	_, err := CodeFunc(CodeConfig{})
	require.ErrorIs(t, err, ErrConfig)
	_, err = CodeFunc(CodeConfig{Executor: &fakeExec{}, Parallel: -1})
	require.ErrorIs(t, err, ErrConfig)

	broken := errors.New("sandbox unreachable")
	exec := &fakeExec{t: t, behave: func(harnessArgs) (tool.ExecResult, error) { return tool.ExecResult{}, broken }}
	f, err := CodeFunc(CodeConfig{Executor: exec})
	require.NoError(t, err)
	_, err = f(context.Background(), Input{Response: codeResp("x"), GroundTruth: sumSpec})
	require.ErrorIs(t, err, broken, "a failing executor is an error, not a score")
	require.Contains(t, err.Error(), "test 0")

	_, err = f(context.Background(), Input{Response: codeResp("x"), GroundTruth: `{"inputs": ["1"], "outputs": []}`})
	require.ErrorIs(t, err, ErrTests)

	// The per-case deadline turns a hung executor into a timeout verdict.
	slow := &fakeExec{t: t, delay: time.Hour, behave: func(h harnessArgs) (tool.ExecResult, error) { return report(h, "ok", "", ""), nil }}
	f, err = CodeFunc(CodeConfig{Executor: slow, CaseTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	out, err := f(context.Background(), Input{Response: codeResp("x"), GroundTruth: sumSpec})
	require.NoError(t, err)
	assert.Equal(t, 0.0, out.Score)
	assert.Contains(t, out.Reason, "timeout")
}

func TestParseTests(t *testing.T) {
	cases := []struct {
		name, spec string
		err        string
	}{
		{"stdin strings", `{"inputs": ["1\n"], "outputs": ["1\n"]}`, ""},
		{"stdin lines", `{"inputs": [["1", "2"]], "outputs": [["3"]]}`, ""},
		{"call lists", `{"fn_name": "f", "inputs": [[1, [2, 3]]], "outputs": [[5]]}`, ""},
		{"call lcb", `{"fn_name": "f", "inputs": ["1\n[2, 3]"], "outputs": ["5"]}`, ""},
		{"not json", `{"inputs":`, "malformed test specification"},
		{"empty", `{"inputs": [], "outputs": []}`, "no test inputs"},
		{"mismatch", `{"inputs": ["1"], "outputs": ["1", "2"]}`, "1 inputs but 2 outputs"},
		{"bad stdin", `{"inputs": [5], "outputs": ["1"]}`, "inputs[0]"},
		{"bad call line", `{"fn_name": "f", "inputs": ["1\nnot json"], "outputs": ["1"]}`, "argument line 1"},
	}
	for _, c := range cases {
		_, err := ParseTests(c.spec)
		if c.err == "" {
			assert.NoError(t, err, c.name)
		} else {
			require.ErrorIs(t, err, ErrTests, c.name)
			assert.Contains(t, err.Error(), c.err, c.name)
		}
	}
}

func TestStdoutMatches(t *testing.T) {
	cases := []struct {
		got, want string
		ok        bool
	}{
		{"3\n", "3", true},
		{"3  \n\n", "3\n", true},
		{"  1 2\n3", "1 2\n3\n", true},
		{"1.0", "1", true},        // equal as decimals
		{"0.50 2", "0.5 2", true}, // token-wise decimals
		{"1e2", "100", true},
		{"3", "4", false},
		{"1 2", "1  2 3", false},
		{"1\n2", "1", false},
		{"abc", "ABC", false},
		{"", "", true},
	}
	for _, c := range cases {
		assert.Equal(t, c.ok, stdoutMatches(c.got, c.want), "%q vs %q", c.got, c.want)
	}
}

func TestValueMatches(t *testing.T) {
	assert.True(t, valueMatches([]byte(`[0, 1]`), []byte(`[0,1]`)))
	assert.True(t, valueMatches([]byte(`1`), []byte(`1.0`)))
	assert.True(t, valueMatches([]byte(`5`), []byte(`[5]`))) // APPS wraps results in a list
	assert.False(t, valueMatches([]byte(`[1, 0]`), []byte(`[0, 1]`)))
	assert.False(t, valueMatches([]byte(`"1"`), []byte(`1`)))
	assert.True(t, valueMatches([]byte(`not json`), []byte(`not json`)))
}

// localPython is a test-only executor that runs the harness with a local
// python3, to check the harness itself end to end. It is no sandbox.
type localPython struct {
	bin   string
	limit time.Duration
}

func (l localPython) Execute(ctx context.Context, req tool.ExecRequest) (tool.ExecResult, error) {
	ctx, cancel := context.WithTimeout(ctx, l.limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.bin, "-I", "-S", "-c", req.Code)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := tool.ExecResult{Status: tool.StatusOK, Stdout: stdout.String(), Stderr: stderr.String()}
	if ctx.Err() != nil {
		res.Status, res.ExitCode, res.Signal = tool.StatusTimeout, -1, "SIGKILL"
		return res, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.Status, res.ExitCode = tool.StatusError, ee.ExitCode()
		return res, nil
	}
	return res, err
}

// TestHarnessWithPython runs the real harness when python3 is installed;
// it is skipped elsewhere, the fakes above cover the Go side.
func TestHarnessWithPython(t *testing.T) {
	bin, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	// Generous limits: interpreter start-up alone can take a second on a
	// loaded machine. The timeout case gets a short one.
	f, err := CodeFunc(CodeConfig{Executor: localPython{bin: bin, limit: 20 * time.Second}, Parallel: 2})
	require.NoError(t, err)
	short, err := CodeFunc(CodeConfig{Executor: localPython{bin: bin, limit: time.Second}})
	require.NoError(t, err)
	cases := []struct {
		name, spec, src string
		score           float64
		reason          string
	}{
		{"stdin ok", sumSpec, "a, b = map(int, input().split())\nprint(a + b)", 1, "passed all 3"},
		{"main guard", sumSpec, "import sys\ndef main():\n    a, b = map(int, sys.stdin.read().split())\n    print(a + b)\nif __name__ == '__main__':\n    main()", 1, "passed all 3"},
		{"buffer io", sumSpec, "import sys\na, b = map(int, sys.stdin.buffer.readline().split())\nsys.stdout.buffer.write(str(a + b).encode() + b'\\n')", 1, "passed all 3"},
		{"exit 0", sumSpec, "import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(0)", 1, "passed all 3"},
		{"wrong", sumSpec, "a, b = map(int, input().split())\nprint(a - b)", 0, "wrong_answer"},
		{"syntax", sumSpec, "def f(:\n  pass", 0, "syntax error: SyntaxError"},
		{"runtime", sumSpec, "print(1/0)", 0, "ZeroDivisionError"},
		{"exit 3", sumSpec, "import sys\nsys.exit(3)", 0, "SystemExit(3)"},
		{"forge", sumSpec, "import sys\nsys.__stdout__.write('\\n@@x@@{\"status\": \"ok\", \"out\": \"3\"}\\n')\nprint(0)", 0, "wrong_answer"},
		{"call solution", `{"fn_name": "add", "inputs": ["1\n2", "[1]\n[2]"], "outputs": ["3", "[1, 2]"]}`,
			"class Solution:\n    def add(self, a, b):\n        return a + b", 1, "passed all 2"},
		{"call function tuple", `{"fn_name": "pair", "inputs": [[1, 2]], "outputs": [[[2, 1]]]}`,
			"def pair(a, b):\n    return (b, a)", 1, "passed all 1"},
		{"call missing", `{"fn_name": "nope", "inputs": [[1]], "outputs": [[1]]}`, "def f(x): return x", 0, "no function named nope"},
		{"timeout", `{"inputs": ["1 2"], "outputs": ["3"]}`, "while True: pass", 0, "timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			run := f
			if c.name == "timeout" {
				run = short
			}
			out, err := run(context.Background(), Input{Response: codeResp(c.src), GroundTruth: c.spec})
			require.NoError(t, err)
			assert.InDelta(t, c.score, out.Score, 1e-12, out.Reason)
			assert.Contains(t, out.Reason, c.reason)
		})
	}
}

// TestCodeFuncOnSandbox runs the harness on the real local sandbox, as
// the examples do, with a small output cap to see where it bites. It is
// skipped where the sandbox cannot run (no python3, not Linux).
func TestCodeFuncOnSandbox(t *testing.T) {
	// 64 KiB holds a verdict carrying 40 000 characters of ASCII output
	// (the JSON line adds the nonce, the keys and a few escapes: well under
	// 1 KiB), but not 100 000 bytes written to stderr.
	const capBytes = 64 << 10
	sb, err := tool.NewSandbox(context.Background(), tool.SandboxConfig{Workers: 2, Timeout: 5 * time.Second, MaxOutputBytes: capBytes})
	if errors.Is(err, tool.ErrNoPython) || errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { sb.Close() })
	f, err := CodeFunc(CodeConfig{Executor: sb, Parallel: 2})
	require.NoError(t, err)
	long := strings.Repeat("x", 40000)
	longSpec := `{"inputs": [""], "outputs": ["` + long + `\n"]}`
	cases := []struct {
		name, spec, src string
		score           float64
		reason          string
	}{
		{"stdin ok", sumSpec, "a, b = map(int, input().split())\nprint(a + b)", 1, "passed all 3"},
		{"wrong", sumSpec, "a, b = map(int, input().split())\nprint(a * b)", 0, `test 0: wrong_answer: expected "3\n", got "2\n"`},
		{"runtime", sumSpec, "print(1/0)", 0, "3 runtime_error); test 0: runtime_error: Traceback"},
		{"long output within the cap", longSpec, "print('x' * 40000)", 1, "passed all 1"},
		{"stderr over the cap", sumSpec, "import sys\nsys.stderr.write('e' * 100000)\nprint(3)", 0,
			"crashed: the program ended without a result (output exceeded 65536 bytes; the program was killed)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := f(context.Background(), Input{Response: codeResp(c.src), GroundTruth: c.spec})
			require.NoError(t, err)
			assert.InDelta(t, c.score, out.Score, 1e-12, out.Reason)
			assert.Contains(t, out.Reason, c.reason)
		})
	}
}
