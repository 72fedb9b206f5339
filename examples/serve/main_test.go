package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/examples/internal/setup/setuptest"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/policy/tokenizer"
)

// qwen3Testdata holds the real Qwen3 tokenizer files, shared with package
// policy/tokenizer rather than copied (tokenizer.json is 11 MB).
const qwen3Testdata = "../../policy/tokenizer/qwen3"

// syncBuffer is a bytes.Buffer the program writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var urlRe = regexp.MustCompile(`on (http://\S+)`)

// program is the server running in-process.
type program struct {
	url            string
	stdout, stderr *syncBuffer
	stop           context.CancelFunc
	code           chan int
}

// start runs the program with args plus -addr 127.0.0.1:0 and waits for
// its address; the test ends it if it has not.
func start(t *testing.T, args ...string) *program {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &program{stdout: &syncBuffer{}, stderr: &syncBuffer{}, stop: cancel, code: make(chan int, 1)}
	go func() { p.code <- run(ctx, append(args, "-addr", "127.0.0.1:0"), p.stdout, p.stderr) }()
	t.Cleanup(cancel)
	require.Eventually(t, func() bool {
		m := urlRe.FindStringSubmatch(p.stdout.String())
		if m != nil {
			p.url = m[1]
		}
		return m != nil
	}, 30*time.Second, 5*time.Millisecond, "no address printed; stderr: %s", p.stderr)
	return p
}

// wait ends the program with a signal's cancellation and returns its exit
// code.
func (p *program) wait(t *testing.T) int {
	t.Helper()
	p.stop()
	select {
	case code := <-p.code:
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("the program did not stop")
		return -1
	}
}

func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}

// TestServe runs the program on a tiny checkpoint with the Qwen3
// tokenizer: health, generation through the policy/openai client, a text
// prompt, a reload, and a clean stop on the signal.
func TestServe(t *testing.T) {
	dir := setuptest.TinyCheckpoint(t, qwen3Testdata)
	p := start(t, "-model", dir, "-name", "tiny", "-weight-version", "3")
	assert.Contains(t, p.stdout.String(), "serving tiny, weights 3, token ids and text")

	resp, err := http.Get(p.url + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	sampler, err := openai.New(openai.Config{BaseURLs: []string{p.url}, Model: "tiny"})
	require.NoError(t, err)
	req := lm.GenerateRequest{Prompt: []int{9707, 11, 1879}, Params: lm.SampleParams{MaxNewTokens: 4, Logprobs: true}}
	gens, err := sampler.Generate(context.Background(), []lm.GenerateRequest{req})
	require.NoError(t, err)
	// The same greedy generation on the checkpoint loaded here.
	m, err := policy.Load(dir)
	require.NoError(t, err)
	defer m.Close()
	want, err := m.Generate(context.Background(), []lm.GenerateRequest{req})
	require.NoError(t, err)
	assert.Equal(t, want[0].Tokens, gens[0].Tokens)
	assert.Equal(t, want[0].RawLogProbs, gens[0].RawLogProbs)

	// A text prompt goes through the tokenizer in the folder.
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	status, body := post(t, p.url+"/v1/completions", `{"model": "tiny", "prompt": "Hello, world", "max_tokens": 2, "temperature": 0, "return_token_ids": true}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var r struct {
		Choices []struct {
			Text           string `json:"text"`
			TokenIDs       []int  `json:"token_ids"`
			PromptTokenIDs []int  `json:"prompt_token_ids"`
		} `json:"choices"`
		Metadata struct {
			WeightVersion string `json:"weight_version"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(body, &r))
	assert.Equal(t, tok.Encode("Hello, world"), r.Choices[0].PromptTokenIDs)
	assert.Equal(t, "3", r.Metadata.WeightVersion)

	status, body = post(t, p.url+"/update_weights_from_disk", fmt.Sprintf(`{"model_path": %q}`, dir))
	require.Equal(t, http.StatusOK, status, "%s", body)
	resp, err = http.Get(p.url + "/get_weight_version")
	require.NoError(t, err)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.JSONEq(t, `{"weight_version": "4"}`, string(data))

	assert.Equal(t, 0, p.wait(t), "stderr: %s", p.stderr)
	assert.Contains(t, p.stderr.String(), "serve: shutting down")
}

// TestServeChat: with the Qwen3 tokenizer's chat template the program
// serves chat completions to OpenAI's Go client, in the template's
// Hermes format, and records a session's call: its prompt is the
// template's rendering of the messages, tokenised, and its sampled
// tokens are what the client was told.
func TestServeChat(t *testing.T) {
	dir := setuptest.TinyCheckpoint(t, qwen3Testdata)
	p := start(t, "-model", dir, "-name", "tiny")
	assert.Contains(t, p.stdout.String(), "chat completions with hermes tool calls")
	client := oa.NewClient(option.WithBaseURL(p.url+"/sessions/s1/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	resp, err := client.Chat.Completions.New(context.Background(), oa.ChatCompletionNewParams{Model: "tiny",
		Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("Hello.")}, MaxCompletionTokens: oa.Int(4), Seed: oa.Int(1)})
	require.NoError(t, err)
	require.Len(t, resp.Choices, 1)
	assert.Equal(t, "assistant", string(resp.Choices[0].Message.Role))

	resp2, err := http.Get(p.url + "/v1/sessions/s1")
	require.NoError(t, err)
	defer resp2.Body.Close()
	var s struct {
		Calls []struct {
			PromptTokenIDs []int  `json:"prompt_token_ids"`
			TokenIDs       []int  `json:"token_ids"`
			Content        string `json:"content"`
		} `json:"calls"`
	}
	require.NoError(t, json.NewDecoder(resp2.Body).Decode(&s))
	require.Len(t, s.Calls, 1)
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	assert.Equal(t, tok.Encode("<|im_start|>user\nHello.<|im_end|>\n<|im_start|>assistant\n"), s.Calls[0].PromptTokenIDs)
	assert.Len(t, s.Calls[0].TokenIDs, int(resp.Usage.CompletionTokens))
	assert.Equal(t, resp.Choices[0].Message.Content, s.Calls[0].Content)
	assert.Equal(t, 0, p.wait(t), "stderr: %s", p.stderr)
}

// TestServeTokenIDsOnly: without tokenizer.json the server takes token
// ids and refuses text; the served name defaults to -model.
func TestServeTokenIDsOnly(t *testing.T) {
	dir := t.TempDir()
	m, err := policy.New(policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 64, HiddenSize: 8, IntermediateSize: 16,
		NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 4,
		MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 1e4,
	}, 1)
	require.NoError(t, err)
	require.NoError(t, m.Save(dir, lm.SaveOptions{}))
	require.NoError(t, m.Close())
	p := start(t, "-model", dir, "-max-sessions", "0", "-logprobs-mode", "processed_logprobs")
	assert.Contains(t, p.stdout.String(), "token ids only")
	status, body := post(t, p.url+"/v1/completions", fmt.Sprintf(`{"model": %q, "prompt": [1, 2], "max_tokens": 3}`, dir))
	assert.Equal(t, http.StatusOK, status, "%s", body)
	status, body = post(t, p.url+"/v1/completions", `{"prompt": "hi"}`)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, string(body), "need a tokenizer")
	assert.Equal(t, 0, p.wait(t))
}

// tinyAdapter writes an adapter for the checkpoint in dir, its B drawn
// so that it changes what the model computes, and returns its folder.
func tinyAdapter(t *testing.T, dir string, seed uint64) string {
	t.Helper()
	m, err := policy.Load(dir)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.AddLoRA(policy.LoRAConfig{Rank: 2, TargetModules: []string{policy.LoRAAllLinear}}, seed))
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, p := range m.Params() {
		if strings.Contains(p.Name, "lora_B") {
			for i := range p.Data {
				p.Data[i] = float32(rng.NormFloat64())
			}
		}
	}
	out := t.TempDir()
	require.NoError(t, m.SaveAdapter(out, lm.AdapterSaveOptions{}))
	return out
}

// TestServeAdapters: an adapter given with -lora-modules is served from
// the start, another is loaded at run time through SGLang's endpoint;
// each generates what the checkpoint with it attached does, and
// /v1/models lists both under the served model.
func TestServeAdapters(t *testing.T) {
	dir := setuptest.TinyCheckpoint(t, qwen3Testdata)
	a, b := tinyAdapter(t, dir, 1), tinyAdapter(t, dir, 2)
	p := start(t, "-model", dir, "-name", "tiny", "-lora-modules", "a="+a)
	assert.Contains(t, p.stdout.String(), "adapter a from "+a)
	status, body := post(t, p.url+"/load_lora_adapter", fmt.Sprintf(`{"lora_name": "b", "lora_path": %q}`, b))
	require.Equal(t, http.StatusOK, status, "%s", body)

	req := lm.GenerateRequest{Prompt: []int{9707, 11, 1879}, Params: lm.SampleParams{MaxNewTokens: 4, Logprobs: true}}
	plain, err := policy.Load(dir)
	require.NoError(t, err)
	base, err := plain.Generate(context.Background(), []lm.GenerateRequest{req})
	require.NoError(t, err)
	require.NoError(t, plain.Close())
	for name, adapter := range map[string]string{"a": a, "b": b} {
		m, err := policy.Load(dir)
		require.NoError(t, err)
		require.NoError(t, m.LoadAdapter(adapter))
		want, err := m.Generate(context.Background(), []lm.GenerateRequest{req})
		require.NoError(t, err)
		require.NoError(t, m.Close())
		require.NotEqual(t, base[0].RawLogProbs, want[0].RawLogProbs, "the adapter must change what the model computes")
		sampler, err := openai.New(openai.Config{BaseURLs: []string{p.url}, Adapter: func() string { return name }})
		require.NoError(t, err)
		gens, err := sampler.Generate(context.Background(), []lm.GenerateRequest{req})
		require.NoError(t, err)
		assert.Equal(t, want[0].Tokens, gens[0].Tokens, name)
		assert.Equal(t, want[0].RawLogProbs, gens[0].RawLogProbs, name)
	}
	resp, err := http.Get(p.url + "/v1/models")
	require.NoError(t, err)
	var l struct {
		Data []struct {
			ID     string  `json:"id"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&l))
	resp.Body.Close()
	require.Len(t, l.Data, 3)
	assert.Equal(t, []string{"tiny", "a", "b"}, []string{l.Data[0].ID, l.Data[1].ID, l.Data[2].ID})
	assert.Equal(t, "tiny", *l.Data[2].Parent)
	assert.Equal(t, 0, p.wait(t))
}

// TestServeAdapterDoesNotFit: an adapter made for another model exits
// with 1 and says which.
func TestServeAdapterDoesNotFit(t *testing.T) {
	dir := setuptest.TinyCheckpoint(t, qwen3Testdata)
	other := t.TempDir()
	m, err := policy.New(policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 64, HiddenSize: 16, IntermediateSize: 16,
		NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
		MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 1e4,
	}, 1)
	require.NoError(t, err)
	require.NoError(t, m.Save(other, lm.SaveOptions{}))
	require.NoError(t, m.Close())
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-model", dir, "-addr", "127.0.0.1:0", "-lora-modules", "w=" + tinyAdapter(t, other, 1)}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "loading LoRA adapter w")
	assert.Contains(t, stderr.String(), "shape")
}

// TestAddressInUse: a listening failure exits with 1.
func TestAddressInUse(t *testing.T) {
	dir := setuptest.TinyCheckpoint(t, qwen3Testdata)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-model", dir, "-addr", ln.Addr().String()}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "address already in use")
}

// TestFlags: usage errors exit with 2, their cause on the first line of
// stderr and a pointer to -h on the second, nothing more.
func TestFlags(t *testing.T) {
	dir := t.TempDir()
	ckpt := setuptest.TinyCheckpoint(t, qwen3Testdata)
	adapter := tinyAdapter(t, ckpt, 1)
	for _, c := range []struct {
		name string
		args []string
		msg  string // the first line of stderr, after "serve: "
	}{
		{"no model", nil, "-model is required"},
		{"extra argument", []string{"-model", dir, "x"}, `unexpected arguments ["x"]`},
		{"missing folder", []string{"-model", dir + "/nope"}, "-model: stat " + dir + "/nope: no such file or directory"},
		{"no config", []string{"-model", dir}, "-model: no config.json in " + dir},
		{"logprobs mode", []string{"-model", dir, "-logprobs-mode", "raw_logits"}, `-logprobs-mode "raw_logits": want raw_logprobs or processed_logprobs`},
		{"negative sessions", []string{"-model", dir, "-max-sessions", "-1"}, "-max-sessions -1: want 0 (none) or more"},
		{"zero timeout", []string{"-model", dir, "-shutdown-timeout", "0s"}, "-shutdown-timeout 0s: want a positive duration"},
		{"bad address", []string{"-model", dir, "-addr", "localhost"}, "-addr: address localhost: missing port in address"},
		{"empty version", []string{"-model", dir, "-weight-version", ""}, "-weight-version must not be empty"},
		{"unknown flag", []string{"-port", "8000"}, "flag provided but not defined: -port"},
		{"bad device", []string{"-model", ckpt, "-device", "cuda:-1"}, `invalid value "cuda:-1" for flag -device: device: invalid choice: device "cuda:-1": N in cuda:N must be a device number 0, 1, … (at most 9 digits)`},
		{"bad precision", []string{"-model", ckpt, "-precision", "half"}, `invalid value "half" for flag -precision: device: invalid choice: precision "half": want auto, fp32, tf32 or bf16`},
		{"bf16 on the cpu", []string{"-model", ckpt, "-device", "cpu", "-precision", "bf16"}, "device: invalid choice: -precision bf16 with -device cpu: the CPU backend computes in fp32 only (use auto or fp32, or a CUDA device)"},
		{"lora module without a folder", []string{"-model", dir, "-lora-modules", "a"}, `invalid value "a" for flag -lora-modules: "a": want NAME=DIR`},
		{"lora module without a name", []string{"-model", dir, "-lora-modules", "=x"}, `invalid value "=x" for flag -lora-modules: "=x": want NAME=DIR`},
		{"lora module folder missing", []string{"-model", ckpt, "-lora-modules", "a=" + dir + "/nope"}, "-lora-modules a: stat " + dir + "/nope: no such file or directory"},
		{"lora module not an adapter", []string{"-model", ckpt, "-lora-modules", "a=" + dir}, "-lora-modules a: no adapter_config.json in " + dir},
		{"lora module twice", []string{"-model", ckpt, "-lora-modules", "a=" + adapter, "-lora-modules", "a=" + adapter}, `-lora-modules: "a" given twice`},
		{"unknown tool-call parser", []string{"-model", ckpt, "-tool-call-parser", "xml"}, `-tool-call-parser: rollout: unknown tool-call format "xml" (known: hermes, qwen3_coder, llama3_json, openai)`},
		{"lora module the served name", []string{"-model", ckpt, "-name", "a", "-lora-modules", "a=" + adapter}, `-lora-modules a=` + adapter + `: "a" is the served model's name`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), c.args, &stdout, &stderr)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout.String())
			assert.Equal(t, "serve: "+c.msg+"\n"+setup.HelpPointer("serve")+"\n", stderr.String())
		})
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 0, run(context.Background(), []string{"-h"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "usage: serve -model DIR")
	assert.Contains(t, stderr.String(), "-device value")
}

// TestDeviceCUDAUnavailable: -device cuda where this binary or machine
// has no GPU exits with status 1 and says why, before serving.
func TestDeviceCUDAUnavailable(t *testing.T) {
	gerr := setuptest.CUDAError(t)
	if gerr == nil {
		t.Skip("a GPU opens here")
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-model", setuptest.TinyCheckpoint(t, qwen3Testdata), "-addr", "127.0.0.1:0", "-device", "cuda"}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "serve: device cuda:0: ")
	assert.Contains(t, stderr.String(), gerr.Error())
	assert.Empty(t, stdout.String(), "nothing served")
}
