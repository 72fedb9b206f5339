package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/examples/internal/setup/setuptest"
	"github.com/agentrl/agentrl/policy/tokenizer"
)

// qwen3Testdata holds the real Qwen3 tokenizer files, shared with package
// policy/tokenizer rather than copied (tokenizer.json is 11 MB).
const qwen3Testdata = "../../policy/tokenizer/qwen3"

func tinyCheckpoint(t *testing.T) string { return setuptest.TinyCheckpoint(t, qwen3Testdata) }

// runMain runs the program in-process and returns its exit code, stdout
// and stderr.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// report is the JSON line's shape.
type jsonReport struct {
	K       int `json:"k"`
	Sources []struct {
		DataSource string             `json:"data_source"`
		Prompts    int                `json:"prompts"`
		Metrics    map[string]float64 `json:"metrics"`
	} `json:"sources"`
	Verl    map[string]float64 `json:"verl"`
	Refused map[string]int     `json:"refused"`
	NoTruth int                `json:"no_ground_truth"`
}

// lastJSON parses the last line of stdout.
func lastJSON(t *testing.T, stdout string) jsonReport {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var r jsonReport
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &r), stdout)
	return r
}

// TestEvalRemoteWithTools evaluates the scripted agent of fakeVLLM, whose
// answers are right exactly when the sandbox computed them, on four
// prompts: three arithmetic questions (the third asks for the number of
// digits of 2**64 − 1, 20, which the scripted agent gets wrong: it
// answers every "What is …?" with the number itself) and one coding
// task. Every sample of a prompt is
// the same, so the expected values follow by hand:
//
//	aime_toy (3 prompts, 2 right): avg@4 = pass@k = maj@4 = best@4 = 2/3;
//	  reward = (1 + 1 + s)/3 with s the wrong answer's score after the
//	  tool bonus, min(−0.6, −1 + 0.1·(2 turns − 1)) = −0.9; 1 tool call each.
//	skywork_code (1 prompt, right): every accuracy metric 1, reward 1
//	  (2 of 2 tests pass), no tool calls.
func TestEvalRemoteWithTools(t *testing.T) {
	setuptest.NeedPython(t)
	model := tinyCheckpoint(t)
	tok, err := tokenizer.Load(model)
	require.NoError(t, err)
	srv := httptest.NewServer(&setuptest.FakeVLLM{Tok: tok})
	defer srv.Close()
	// Only the tokenizer is read with a remote sampler.
	require.NoError(t, os.Remove(filepath.Join(model, "model.safetensors")))
	samplesPath := filepath.Join(t.TempDir(), "samples.jsonl")
	code, stdout, stderr := runMain(t, "-model", model, "-data", "testdata/eval.jsonl", "-k", "4",
		"-sampler", srv.URL, "-max-response", "256", "-thinking=false", "-sandbox-workers", "2",
		"-samples", samplesPath)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "avg@4")
	assert.Contains(t, stderr, "eval: 4/4 prompts")

	r := lastJSON(t, stdout)
	assert.Equal(t, 4, r.K)
	require.Len(t, r.Sources, 2)
	math, code2 := r.Sources[0], r.Sources[1]
	assert.Equal(t, "aime_toy", math.DataSource)
	assert.Equal(t, 3, math.Prompts)
	for _, name := range []string{"avg@4", "pass@1", "pass@2", "pass@4", "maj@4", "best@4"} {
		assert.InDelta(t, 2.0/3, math.Metrics[name], 1e-12, name)
		assert.InDelta(t, 1, code2.Metrics[name], 1e-12, name)
	}
	assert.InDelta(t, (1+1-0.9)/3, math.Metrics["reward"], 1e-12)
	assert.InDelta(t, 1, math.Metrics["tool_calls"], 1e-12)
	assert.Equal(t, "skywork_code", code2.DataSource)
	assert.Equal(t, 1, code2.Prompts)
	assert.InDelta(t, 1, code2.Metrics["reward"], 1e-12)
	assert.InDelta(t, 0, code2.Metrics["tool_calls"], 1e-12)
	assert.InDelta(t, 2.0/3, r.Verl["val-core/aime_toy/acc/mean@4"], 1e-12)

	data, err := os.ReadFile(samplesPath)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 16)
	var first sampleLine
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	assert.Equal(t, "aime_toy", first.DataSource)
	assert.True(t, first.Acc)
	assert.Equal(t, "79792266297612001", first.Pred)
	assert.Equal(t, 1, first.ToolCalls)
	assert.Equal(t, 2, first.Turns)
	assert.Contains(t, first.Response, "<tool_response>\n79792266297612001\n\n</tool_response>", "the tool output is stdout as printed, newline included")
}

// TestEvalParquetCode evaluates Open-AgentRL's LiveCodeBench layout (the
// problem in a string column, reward_model and extra_info as JSON
// strings) from package dataset's parquet fixture: a stdin task and a
// call-based one (twoSum), both answered right by fakeVLLM, so every
// accuracy is 1 — only if the tests really ran in the sandbox.
func TestEvalParquetCode(t *testing.T) {
	setuptest.NeedPython(t)
	model := tinyCheckpoint(t)
	tok, err := tokenizer.Load(model)
	require.NoError(t, err)
	srv := httptest.NewServer(&setuptest.FakeVLLM{Tok: tok})
	defer srv.Close()
	code, stdout, stderr := runMain(t, "-model", model, "-data", "../../dataset/testdata/openagentrl_lcb_hyparquet.parquet",
		"-prompt-key", "problem", "-k", "2", "-sampler", srv.URL, "-max-response", "256", "-sandbox-workers", "2")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	r := lastJSON(t, stdout)
	require.Len(t, r.Sources, 1)
	assert.Equal(t, "LiveCodeBench_v6", r.Sources[0].DataSource)
	assert.Equal(t, 2, r.Sources[0].Prompts)
	for _, name := range []string{"avg@2", "pass@1", "pass@2", "maj@2", "best@2", "reward"} {
		assert.InDelta(t, 1, r.Sources[0].Metrics[name], 1e-12, name)
	}
}

// TestEvalLocal evaluates the tiny random Qwen3 itself on the CPU: it
// never answers, so every accuracy is 0 and every math score −1.
func TestEvalLocal(t *testing.T) {
	setuptest.NeedPython(t)
	model := tinyCheckpoint(t)
	code, stdout, stderr := runMain(t, "-model", model, "-data", "testdata/eval.jsonl", "-k", "2", "-n", "3",
		"-max-response", "8", "-sandbox-workers", "1")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	r := lastJSON(t, stdout)
	require.Len(t, r.Sources, 1, "-n 3 keeps the three math prompts")
	assert.Equal(t, 3, r.Sources[0].Prompts)
	for _, name := range []string{"avg@2", "pass@1", "pass@2", "maj@2", "best@2"} {
		assert.Zero(t, r.Sources[0].Metrics[name], name)
	}
	assert.Equal(t, -1.0, r.Sources[0].Metrics["reward"])
	assert.Contains(t, stderr, "device: ")
	if setuptest.CUDAError(t) != nil {
		assert.Contains(t, stderr, "device: cpu: cpu(", "auto falls back to the CPU and says so")
		assert.Contains(t, stderr, "auto chose the CPU: ")
	}
}

// TestDeviceCUDAUnavailable: -device cuda where this binary or machine
// has no GPU fails with status 1 and says why, before any rollout.
func TestDeviceCUDAUnavailable(t *testing.T) {
	gerr := setuptest.CUDAError(t)
	if gerr == nil {
		t.Skip("a GPU opens here")
	}
	code, _, stderr := runMain(t, "-model", tinyCheckpoint(t), "-data", "testdata/eval.jsonl", "-device", "cuda")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "eval: model: device cuda:0: ")
	assert.Contains(t, stderr, gerr.Error())
}

// TestUsage checks that bad flags and paths exit with status 2, their
// cause on the first line of stderr and a pointer to -h on the second
// (nothing more), and bad content with status 1, each with a message
// that names the problem.
func TestUsage(t *testing.T) {
	model := tinyCheckpoint(t)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{\"prompt\": 3}\n"), 0o644))
	data := "testdata/eval.jsonl"
	with := func(extra ...string) []string { return append([]string{"-model", model, "-data", data}, extra...) }
	cases := []struct {
		name string
		args []string
		code int
		msg  string // the whole first line for status 2, after "eval: "; a part of stderr otherwise
	}{
		{"help", []string{"-h"}, 0, "usage: " + synopsis + "\n"},
		{"no flags", nil, 2, "-model is required"},
		{"no data", []string{"-model", model}, 2, "-data is required"},
		{"unknown flag", with("-x"), 2, "flag provided but not defined: -x"},
		{"missing model", []string{"-model", "no/such/dir", "-data", data}, 2, "-model: stat no/such/dir: no such file or directory"},
		{"missing data", []string{"-model", model, "-data", "testdata/none.jsonl"}, 2, "-data: open testdata/none.jsonl: no such file or directory"},
		{"bad k", with("-k", "0"), 2, "-k 0: want at least 1"},
		{"bad top-p", with("-top-p", "1.5"), 2, "-top-p 1.5: want a number in [0, 1]"},
		{"NaN temperature", with("-temperature", "NaN"), 2, "-temperature NaN: want a finite, non-negative number"},
		{"no turns", with("-max-turns", "0"), 2, "-max-turns 0: want at least 1"},
		{"no concurrency", with("-concurrency", "0"), 2, "-concurrency 0: want at least 1"},
		{"bad sampler", with("-sampler", "ftp://x"), 2, `-sampler: "ftp://x" is neither "local" nor an http(s) URL`},
		{"two sandboxes", with("-sandbox", "http://a,http://b"), 2, `-sandbox: want one SandboxFusion URL, got "http://a,http://b"`},
		{"extra args", with("more"), 2, `unexpected arguments ["more"]`},
		{"bad device", with("-device", "gpu"), 2, `invalid value "gpu" for flag -device: device: invalid choice: device "gpu": want auto, cpu, cuda or cuda:N`},
		{"bad precision", with("-precision", "fp16"), 2, `invalid value "fp16" for flag -precision: device: invalid choice: precision "fp16": want auto, fp32, tf32 or bf16`},
		{"bf16 on the cpu", with("-device", "cpu", "-precision", "bf16"), 2, "device: invalid choice: -precision bf16 with -device cpu: the CPU backend computes in fp32 only (use auto or fp32, or a CUDA device)"},
		{"malformed data", []string{"-model", model, "-data", bad, "-sandbox-workers", "1"}, 1, "bad.jsonl:1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.code == 1 {
				setuptest.NeedPython(t)
			}
			code, _, stderr := runMain(t, c.args...)
			assert.Equal(t, c.code, code, stderr)
			if c.code == 2 {
				assert.Equal(t, "eval: "+c.msg+"\n"+setup.HelpPointer("eval")+"\n", stderr)
				return
			}
			assert.Contains(t, stderr, c.msg)
		})
	}
}

// TestInterrupted: SIGINT cancels the context run gets (here cancelled up
// front); the program stops with status 1 and says so.
func TestInterrupted(t *testing.T) {
	setuptest.NeedPython(t)
	model := tinyCheckpoint(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"-model", model, "-data", "testdata/eval.jsonl", "-sandbox-workers", "1"}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "interrupted")
	assert.Contains(t, stderr.String(), "context canceled")
}

// TestInterruptedMidRollout cancels the context while the sampler is
// busy: the rollout must give up at once rather than wait for it.
func TestInterruptedMidRollout(t *testing.T) {
	setuptest.NeedPython(t)
	model := tinyCheckpoint(t)
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the server sees the client go away
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-r.Context().Done() // a generation that never finishes
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"-model", model, "-data", "testdata/eval.jsonl", "-sampler", srv.URL, "-max-response", "256", "-sandbox-workers", "1"}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "interrupted")
	assert.Less(t, time.Since(start), 20*time.Second)
}

// TestSamplerFailure: a server that refuses every completion fails the
// evaluation with status 1 and one line that names the stage once
// ("rollout: request …"), the request and the server's answer.
func TestSamplerFailure(t *testing.T) {
	setuptest.NeedPython(t)
	model := tinyCheckpoint(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error": {"message": "model not loaded"}}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	code, _, stderr := runMain(t, "-model", model, "-data", "testdata/eval.jsonl", "-sampler", srv.URL, "-max-response", "256", "-sandbox-workers", "1", "-concurrency", "1")
	assert.Equal(t, 1, code)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	assert.True(t, strings.HasPrefix(last, `eval: rollout: request 0 ("0") sample 0: turn 0: generate: `), last)
	assert.Equal(t, 1, strings.Count(last, "rollout:"), last)
	assert.Contains(t, last, "model not loaded")
}

// TestEvalRefusesOverlong: a prompt that leaves less than -max-response
// in the model's context (4096 tokens) is refused, counted per data
// source, and not scored; before, it was rolled out, cut by the context
// and scored as a wrong answer. A budget that fills the context is an
// error before any rollout. A row without a ground truth is skipped and
// counted.
func TestEvalRefusesOverlong(t *testing.T) {
	setuptest.NeedPython(t)
	model := tinyCheckpoint(t)
	tok, err := tokenizer.Load(model)
	require.NoError(t, err)
	fake := &setuptest.FakeVLLM{Tok: tok}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	rows, err := os.ReadFile("testdata/eval.jsonl")
	require.NoError(t, err)
	first := strings.SplitAfter(string(rows), "\n")[0]
	long := `{"data_source": "long_toy", "prompt": [{"role": "user", "content": "` + strings.Repeat("Think carefully. ", 2000) + `What is 1+1?"}], "ability": "MATH", "reward_model": {"style": "rule", "ground_truth": "2"}}` + "\n"
	data := filepath.Join(t.TempDir(), "data.jsonl")
	noTruth := `{"data_source": "aime_toy", "prompt": [{"role": "user", "content": "What is 3**3?"}], "ability": "MATH"}` + "\n"
	require.NoError(t, os.WriteFile(data, []byte(first+long+noTruth), 0o644))

	code, stdout, stderr := runMain(t, "-model", model, "-data", data, "-k", "2", "-sampler", srv.URL,
		"-max-response", "256", "-thinking=false", "-sandbox-workers", "1")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "refused: 1 prompts longer than the 3840 tokens that the model's context of 4096 leaves beside -max-response 256; not rolled out or scored")
	r := lastJSON(t, stdout)
	require.Len(t, r.Sources, 1, "the refused prompt's source has nothing scored")
	assert.Equal(t, "aime_toy", r.Sources[0].DataSource)
	assert.Equal(t, map[string]int{"long_toy": 1}, r.Refused)
	// A row without a ground truth is skipped, not scored as wrong.
	assert.Contains(t, stdout, "skipped: 1 prompts without a ground truth, which the rule reward needs; not rolled out or scored")
	assert.Equal(t, 1, r.NoTruth)
	assert.Equal(t, 1, r.Sources[0].Prompts)
	calls, _ := fake.Counts()
	assert.Equal(t, 4, calls, "the one prompt that fits: 2 samples × 2 turns")

	code, _, stderr = runMain(t, "-model", model, "-data", data, "-sampler", srv.URL, "-sandbox-workers", "1")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "eval: -max-response 20480: the model's context is 4096 tokens (max_position_embeddings), prompt and response together: want less")
}
