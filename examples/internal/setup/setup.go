// Package setup holds the flag glue that the example programs share: the
// device the local model runs on (-device, -precision: package device),
// the sampler (local model or OpenAI-compatible servers), the code tools
// (local sandbox or SandboxFusion), the reward (reward.OpenAgentRL), the
// verl prompts (agentrl.LoadPrompts), the checks of command-line paths and
// URLs, and the programs' exit-status handling (Run, Main).
//
// It is internal to examples: programs outside examples/ build the same
// from the public packages it calls.
package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/hftrain"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/tool"
)

// NoThinkPrompt opens an assistant turn of Qwen3 with thinking disabled
// (hftrain.NoThinkGenerationPrompt).
const NoThinkPrompt = hftrain.NoThinkGenerationPrompt

// OpenDevice opens the device the -device and -precision flags chose for
// a model of configuration mc, this rank's own under a launcher, and
// says on stderr what it chose and, after a fallback to the CPU, why
// (hftrain.OpenDevice). Close it after the models on it.
func OpenDevice(ctx context.Context, dc device.Config, mc policy.Config, stderr io.Writer) (*device.Device, error) {
	return hftrain.OpenDevice(ctx, dc, mc, stderr)
}

// LoadOnDevice reads the configuration of the checkpoint in dir, opens
// the device dc chooses for it (OpenDevice) and loads the model onto it
// with opts. Close the model, then the device.
func LoadOnDevice(ctx context.Context, dc device.Config, dir string, stderr io.Writer, opts ...policy.ModelOption) (*policy.Model, *device.Device, error) {
	mc, err := policy.ReadConfig(dir)
	if err != nil {
		return nil, nil, err
	}
	d, err := OpenDevice(ctx, dc, mc, stderr)
	if err != nil {
		return nil, nil, err
	}
	m, err := policy.Load(dir, append(append([]policy.ModelOption(nil), opts...), policy.WithBackend(d.Backend()))...)
	if err != nil {
		_ = d.Close()
		return nil, nil, err
	}
	return m, d, nil
}

// NewSampler returns the sampler of the rollouts: the local model, or the
// OpenAI-compatible servers listed in spec (comma-separated base URLs).
// Both batch on their own: the local model admits each trajectory's turn
// into its running batch (continuous batching), as the servers do.
func NewSampler(spec string, model *policy.Model, servedModel string) (lm.Sampler, error) {
	if spec == "local" {
		return model, nil
	}
	urls := SplitList(spec)
	s, err := openai.New(openai.Config{BaseURLs: urls, Model: servedModel})
	if err != nil {
		return nil, fmt.Errorf("-sampler: %w", err)
	}
	return s, nil
}

// CodeTools returns the code_interpreter tool the model calls and the
// executor the code reward runs its test harnesses on: the same local
// sandbox (spec "local") or SandboxFusion server (spec a URL). The reward
// reads the harness's verdict from the executor's stdout, so the model's
// output budget does not apply to it; the sandbox's output cap (1 MiB)
// does, see package reward's "Output caps". workers bounds the code
// executions at once; 0 means the number of CPUs for the local sandbox
// and 16 for SandboxFusion. A SandboxFusion server must answer at once
// (tool.SandboxFusion.Check). close stops the local sandbox.
func CodeTools(spec string, workers int, timeout time.Duration) (model tool.Tool, harness tool.Executor, close func() error, err error) {
	var ci *tool.CodeInterpreter
	if workers == 0 && spec != "local" {
		workers = 16
	}
	if spec == "local" {
		ci, err = tool.NewCodeInterpreter(tool.SandboxConfig{Workers: workers, Timeout: timeout})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("-sandbox local: %w", err)
		}
	} else {
		sf, err := tool.NewSandboxFusion(tool.SandboxFusionConfig{URL: spec, RunTimeout: timeout, MaxConcurrent: workers})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("-sandbox: %w", err)
		}
		// A dead URL fails here, not at the first tool call. Check
		// bounds its own requests.
		if err := sf.Check(context.Background()); err != nil {
			return nil, nil, nil, fmt.Errorf("-sandbox: %w", err)
		}
		if ci, err = tool.NewCodeInterpreterOn(sf, tool.OutputBudget{}); err != nil {
			return nil, nil, nil, fmt.Errorf("-sandbox: %w", err)
		}
	}
	return ci, ci.Executor(), ci.Close, nil
}

// NewReward returns Open-AgentRL's reward, routed by data_source, with
// code tests on harness and the tool bonus when toolBonus is set
// (reward.OpenAgentRL).
func NewReward(harness tool.Executor, toolBonus bool) (reward.Func, error) {
	return reward.OpenAgentRL(reward.OpenAgentRLConfig{Executor: harness, ToolBonus: toolBonus})
}

// LoadPrompts reads the verl-format files (comma-separated; the prompt
// in the promptKey field, a chat or a plain string taken as one user
// message) and renders each prompt once with the chat template, the
// tools' schemas and the generation prompt (agentrl.LoadPrompts), with
// Qwen3's enable_thinking set to thinking. Prompts longer than maxPrompt
// tokens are left out and counted; limit > 0 keeps the first limit
// prompts.
func LoadPrompts(ctx context.Context, files, promptKey string, tok *tokenizer.BPE, tools []tool.Tool, thinking bool, maxPrompt, limit int) ([]agentrl.Prompt, int, error) {
	return agentrl.LoadPrompts(ctx, SplitList(files), tok, tools, agentrl.PromptOptions{
		Vars:         map[string]any{"enable_thinking": thinking},
		MaxTokens:    maxPrompt,
		PromptKey:    promptKey,
		StringPrompt: true,
		Limit:        limit,
	})
}

// CheckVocab makes sure that every id the tokenizer can produce has a row
// in the model's embedding.
func CheckVocab(tok *tokenizer.BPE, m *policy.Model) error {
	if tv, mv := tok.VocabSize(), m.Config().VocabSize; tv > mv {
		return fmt.Errorf("tokenizer has %d ids but the model's vocab_size is %d: the tokenizer does not belong to this model", tv, mv)
	}
	return nil
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// CheckDir reports a folder that does not exist or lacks one of files
// ("no config.json in DIR").
func CheckDir(dir string, files ...string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	for _, f := range files {
		if err := CheckFile(filepath.Join(dir, f)); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no %s in %s", f, dir)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// CheckFile reports a path that is not a readable regular file.
func CheckFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	return nil
}

// CheckEmpty accepts a folder for a program to write into that does
// not exist yet or is empty; otherwise it says what the folder holds.
func CheckEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) == 1:
		return fmt.Errorf("not empty (it holds %s): choose a new folder", entries[0].Name())
	case len(entries) > 1:
		return fmt.Errorf("not empty (it holds %s and %d more): choose a new folder", entries[0].Name(), len(entries)-1)
	}
	return nil
}

// CheckURLs accepts "local" or comma-separated http(s) URLs.
func CheckURLs(name, spec string) error {
	if spec == "local" {
		return nil
	}
	urls := SplitList(spec)
	if len(urls) == 0 {
		return fmt.Errorf(`%s: want "local" or URLs`, name)
	}
	for _, s := range urls {
		if !isHTTPURL(s) {
			return fmt.Errorf(`%s: %q is neither "local" nor an http(s) URL`, name, s)
		}
	}
	return nil
}

// CheckServerURLs accepts comma-separated http(s) base URLs, at least
// one, each named once.
func CheckServerURLs(name, spec string) error {
	urls := SplitList(spec)
	if len(urls) == 0 {
		return fmt.Errorf("%s: want comma-separated http(s) URLs, got %q", name, spec)
	}
	seen := map[string]bool{}
	for _, s := range urls {
		if !isHTTPURL(s) {
			return fmt.Errorf("%s: %q is not an http(s) URL (want scheme://host:port)", name, s)
		}
		if seen[s] {
			return fmt.Errorf("%s: %s named twice", name, s)
		}
		seen[s] = true
	}
	return nil
}

// isHTTPURL reports an http or https URL with a host.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// CheckEndpoints checks the -sampler and -sandbox flags: each is "local"
// or base URLs, and the sandbox names at most one SandboxFusion server.
func CheckEndpoints(sampler, sandbox string) error {
	if err := CheckURLs("-sampler", sampler); err != nil {
		return err
	}
	if err := CheckURLs("-sandbox", sandbox); err != nil {
		return err
	}
	if sandbox != "local" && len(SplitList(sandbox)) != 1 {
		return fmt.Errorf("-sandbox: want one SandboxFusion URL, got %q", sandbox)
	}
	return nil
}

// DescribeTraining says what a trainer trains in m: its LoRA adapters
// (rank, alpha, the projections they adapt and how many weights they
// have, beside the frozen base) or, without LoRA, every weight. It reads
// only the configurations (Model.Params would end a device optimizer).
func DescribeTraining(m *policy.Model) string {
	mc := m.Config()
	cfg, ok := m.LoRA()
	if !ok {
		return fmt.Sprintf("trains all %d weights", mc.NumParams())
	}
	return fmt.Sprintf("trains LoRA adapters only (rank %d, alpha %g) on %s: %d weights, while the %d of the model stay frozen",
		cfg.Rank, cfg.Alpha, strings.Join(cfg.TargetModules, ", "), LoRAWeights(mc, cfg), mc.NumParams())
}

// LoRAWeights counts the weights of the adapters cfg puts on a model of
// configuration mc: for each layer and adapted projection of input size
// in and output size out, A (rank × in) and B (out × rank).
func LoRAWeights(mc policy.Config, cfg policy.LoRAConfig) int64 {
	h, q, kv, ffn := mc.HiddenSize, mc.NumAttentionHeads*mc.HeadDim, mc.NumKeyValueHeads*mc.HeadDim, mc.IntermediateSize
	shape := map[string][2]int{
		"q_proj": {h, q}, "k_proj": {h, kv}, "v_proj": {h, kv}, "o_proj": {q, h},
		"gate_proj": {h, ffn}, "up_proj": {h, ffn}, "down_proj": {ffn, h},
	}
	var n int64
	for _, t := range cfg.TargetModules {
		s := shape[t]
		n += int64(cfg.Rank) * int64(s[0]+s[1])
	}
	return n * int64(mc.NumHiddenLayers)
}
