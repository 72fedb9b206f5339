package tool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// FuzzRegistryCall: whatever arguments the model writes, a call returns a
// Result (failed or not) and never panics or errors for argument reasons.
func FuzzRegistryCall(f *testing.F) {
	for _, s := range []string{`{"expression": "1+1"}`, `{}`, `"{\"expression\": \"2\"}"`, `[`, `{"expression": 1}`, `null`, ``, `"\"x\""`, `{"expression": "1", "x": [1, {"y": null}]}`} {
		f.Add(s)
	}
	r, err := NewRegistry(&Calculator{MaxBits: 1024})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, args string) {
		res, err := r.Call(context.Background(), "calculator", json.RawMessage(args))
		require.NoError(t, err)
		if res.Failed {
			require.True(t, strings.HasPrefix(res.Content, "Error: "), res.Content)
		}
	})
}

// FuzzUnwrapCodeFence: the unwrapped code is always part of the input.
func FuzzUnwrapCodeFence(f *testing.F) {
	for _, s := range []string{"print(1)", "```python\nprint(1)\n```", "```\n```", "```py\r\nx\r\n```", "a```b", "```bash\nls\n```\n```python\nx\n```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		got := UnwrapCodeFence(code)
		require.True(t, strings.Contains(code, got))
		if !strings.Contains(code, "```") {
			require.Equal(t, code, got)
		}
	})
}

// FuzzOutputBudget: truncated text keeps a prefix and a suffix of the
// input of exactly the budget's size, around the marker.
func FuzzOutputBudget(f *testing.F) {
	f.Add("hello world", 4)
	f.Add("αβγδεζηθ", 3)
	f.Add("", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n <= 0 || n > 1000 || !utf8.ValidString(s) {
			return
		}
		got, cut := OutputBudget{Chars: n}.Truncate(s)
		if !cut {
			require.Equal(t, s, got)
			require.LessOrEqual(t, utf8.RuneCountInString(s), n)
			return
		}
		i := strings.Index(got, "\n...[")
		j := strings.LastIndex(got, " characters truncated]...\n")
		require.True(t, i >= 0 && j > i, got)
		head, tail := got[:i], got[j+len(" characters truncated]...\n"):]
		require.True(t, strings.HasPrefix(s, head))
		require.True(t, strings.HasSuffix(s, tail))
		require.Equal(t, n, utf8.RuneCountInString(head)+utf8.RuneCountInString(tail))
	})
}

// FuzzSandboxFusionResponse: any response body either fails to parse with
// an error or maps onto a known status.
func FuzzSandboxFusionResponse(f *testing.F) {
	f.Add([]byte(fusionOK))
	f.Add([]byte(`{"status": "Failed", "run_result": {"status": "TimeLimitExceeded"}}`))
	f.Add([]byte(`{"status": "Failed", "compile_result": {"status": "Error", "return_code": 2}}`))
	f.Add([]byte(`{"status": "SandboxError"}`))
	f.Add([]byte(`{"status": 1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := parseRunCodeResponse(body)
		if err != nil {
			return
		}
		res := resp.execResult()
		switch res.Status {
		case StatusOK, StatusError, StatusTimeout, StatusSandboxError:
		default:
			t.Fatalf("status %q", res.Status)
		}
		if res.Status == StatusOK {
			require.Equal(t, 0, res.ExitCode)
		}
	})
}
