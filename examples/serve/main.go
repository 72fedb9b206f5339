// Command serve runs a Hugging Face checkpoint behind the completions API
// of vLLM and SGLang, with their weight-reload and pause endpoints (package
// serve): the inference server a trainer can use with nothing installed,
// and a stand-in for a real engine when testing code written against one.
//
// Usage:
//
//	serve -model DIR [-addr 127.0.0.1:8000] [-name NAME] [-lora-modules NAME=DIR ...] [flags]
//
// -model is a checkpoint folder (config.json and *.safetensors) that
// package policy loads; when it holds tokenizer.json, the tokenizer fills
// the "text" fields, decodes logprobs.tokens, matches stop strings and
// takes text prompts, otherwise prompts are token ids only. The model
// generates with continuous batching (concurrent requests share the
// decoding steps) on the -device (package device): auto, the default, is
// CUDA device 0 when this program was built with -tags agentrl_cuda and
// the machine has a GPU, the CPU otherwise (the choice, and why it fell
// back, are printed on stderr); cpu, cuda and cuda:N ask for one.
// -precision sets the GPU's matrix products (auto: bf16 from hidden size
// 1024, fp32 below). Reloaded weights and adapters' copies of the model
// stay on that device.
//
// Point a policy/openai Sampler (or any vLLM client) at it:
//
//	serve -model Qwen3-0.6B -addr 127.0.0.1:8000 &
//	eval -model Qwen3-0.6B -data aime_2024.parquet -sampler http://127.0.0.1:8000 -served-model Qwen3-0.6B
//
// and publish new weights as a trainer does with SGLang or vLLM:
//
//	curl -X POST localhost:8000/update_weights_from_disk -d '{"model_path": "ckpt/step-10", "weight_version": "10"}'
//	curl -X POST localhost:8000/collective_rpc -d '{"method": "reload_weights", "kwargs": {"weights_path": "ckpt/step-10"}}'
//
// A reload loads the new folder while generation goes on, then swaps the
// weights between requests: no completion mixes two weight versions, and
// each one's metadata.weight_version names its weights. The tokenizer
// stays the one read at start. The reload endpoints read any folder this
// process can read, as vLLM's and SGLang's do: keep the server on
// localhost or a private network.
//
// The served model name (-name) defaults to -model as given, as vLLM's
// --served-model-name defaults to --model; requests naming another model
// get a 404. -logprobs-mode is vLLM's --logprobs-mode: raw_logprobs (the
// log-softmax of the unprocessed logits) or processed_logprobs (after
// temperature and truncation, the sampling distribution's).
// -max-sessions keeps that many finished sequences' KV caches, so that a
// prompt extending one (the next turn of a multi-turn rollout) prefills
// only its new tokens; 0 turns this off.
//
// LoRA adapters (PEFT folders: adapter_config.json and
// adapter_model.safetensors, as policy.Model.SaveAdapter and package
// fleet write them) are served by name: -lora-modules NAME=DIR, which
// may be repeated, loads one at start, as vLLM's --lora-modules does, and
// the adapter endpoints load and unload them at run time, in vLLM's
// spelling and in SGLang's:
//
//	curl -X POST localhost:8000/v1/load_lora_adapter -d '{"lora_name": "pol-v00000010", "lora_path": "ckpt/v00000010"}'
//	curl -X POST localhost:8000/load_lora_adapter -d '{"lora_name": "pol-v00000010", "lora_path": "ckpt/v00000010"}'
//	curl -X POST localhost:8000/v1/unload_lora_adapter -d '{"lora_name": "pol-v00000010"}'
//
// A completion with "model": NAME, or a /generate with "lora_path":
// NAME, samples from that adapter; /v1/models lists the adapters. This
// server takes adapters of any rank with no flag, each on a copy of the
// model (memory for a second model per adapter); vLLM needs
// --enable-lora, --max-lora-rank at least the adapter's rank and, for the
// endpoints, VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; SGLang needs
// --enable-lora with --max-lora-rank and --lora-target-modules. Package
// fleet publishes a trainer's adapters through these endpoints
// (fleet.Config.Adapter).
//
// When the checkpoint's tokenizer has a chat template, OpenAI's chat
// completions are served too (POST /v1/chat/completions, with tools,
// streaming and not; package record, through serve.Config.Chat): the
// messages are rendered with that template and the tool calls parsed in
// the format -tool-call-parser names (vLLM's names: hermes, qwen3_coder,
// llama3_json, openai), by default the one the template writes, else
// hermes. Every call made under a session (a base URL of
// /sessions/ID/v1, the X-Session-Id header, or "user") is recorded,
// prompt and sampled tokens and log-probabilities:
// GET /v1/sessions/ID returns them, POST /v1/sessions/ID/reward ends the
// session with its reward.
//
// The server runs until SIGINT or SIGTERM, then stops taking connections
// and waits up to -shutdown-timeout for the requests in flight, after
// which it ends those left (they answer 503).
//
// Exit status: 0 after a signal, 2 for a usage error (bad flag, missing
// or unreadable checkpoint or adapter folder), 1 for any other failure (a
// checkpoint or adapter that does not load, an address in use).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/record"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/serve"
)

// toolFormat is the chat completions' tool-call format: the one name
// gives, else the chat template's, else Hermes (which it says).
func toolFormat(name, template string, stderr io.Writer) (rollout.ToolFormat, error) {
	if name != "" {
		return rollout.ToolFormatByName(name)
	}
	tf, err := rollout.ToolFormatFromTemplate(template)
	if errors.Is(err, rollout.ErrUnknownToolFormat) {
		fmt.Fprintln(stderr, "serve: the chat template writes no tool-call format this server knows; chat completions parse Hermes <tool_call> JSON (-tool-call-parser names another)")
		return rollout.ToolFormatByName(rollout.FormatHermes)
	}
	return tf, err
}

func main() { setup.Main(run) }

// options are the parsed flags.
type options struct {
	model, addr, name string
	logprobsMode      openai.LogprobsMode
	weightVersion     string
	maxSessions       int
	seed              uint64
	shutdownTimeout   time.Duration
	loraModules       []loraModule
	device            device.Config
	toolCallParser    string
}

// loraModule is one -lora-modules NAME=DIR.
type loraModule struct{ name, dir string }

// parseLoraModule reads NAME=DIR, both non-empty.
func parseLoraModule(v string) (loraModule, error) {
	name, dir, ok := strings.Cut(v, "=")
	if !ok || name == "" || dir == "" {
		return loraModule{}, fmt.Errorf("%q: want NAME=DIR", v)
	}
	return loraModule{name: name, dir: dir}, nil
}

// synopsis is the first line of -h.
const synopsis = "serve -model DIR [-addr 127.0.0.1:8000] [-name NAME] [-lora-modules NAME=DIR ...] [flags]"

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var mode string
	fs := setup.NewFlagSet("serve", synopsis, stderr)
	fs.StringVar(&o.model, "model", "", "Hugging Face checkpoint folder: config.json, *.safetensors, and tokenizer.json for text (required)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8000", "address to listen on, host:port (port 0: any free port)")
	fs.StringVar(&o.name, "name", "", "served model name; empty: -model as given, as vLLM")
	fs.StringVar(&mode, "logprobs-mode", string(openai.RawLogprobs), "returned log-probabilities, as vLLM's --logprobs-mode: raw_logprobs or processed_logprobs")
	fs.StringVar(&o.weightVersion, "weight-version", "0", "version of the weights loaded at start; reloads count up from it when it is an integer")
	fs.IntVar(&o.maxSessions, "max-sessions", 64, "finished sequences whose KV cache is kept for prompts that extend them; 0: none")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the sampler's random source, for requests without a seed")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown waits for the requests in flight")
	fs.Func("lora-modules", "LoRA adapter to serve from the start, NAME=DIR (a PEFT folder); may be repeated", func(v string) error {
		m, err := parseLoraModule(v)
		if err != nil {
			return err
		}
		o.loraModules = append(o.loraModules, m)
		return nil
	})
	fs.StringVar(&o.toolCallParser, "tool-call-parser", "", "tool-call format of the chat completions, as vLLM's: hermes, qwen3_coder, llama3_json or openai; empty: the chat template's, else hermes")
	o.device.RegisterFlags(fs)
	if err := setup.Parse(fs, args); err != nil {
		return o, err
	}
	bad := func(format string, a ...any) (options, error) {
		return o, fmt.Errorf(format, a...)
	}
	o.logprobsMode = openai.LogprobsMode(mode)
	switch {
	case fs.NArg() > 0:
		return bad("unexpected arguments %q", fs.Args())
	case o.model == "":
		return bad("-model is required")
	case o.addr == "":
		return bad("-addr is required")
	case o.logprobsMode != openai.RawLogprobs && o.logprobsMode != openai.ProcessedLogprobs:
		return bad("-logprobs-mode %q: want %s or %s", mode, openai.RawLogprobs, openai.ProcessedLogprobs)
	case o.weightVersion == "":
		return bad("-weight-version must not be empty")
	case o.maxSessions < 0:
		return bad("-max-sessions %d: want 0 (none) or more", o.maxSessions)
	case o.shutdownTimeout <= 0:
		return bad("-shutdown-timeout %v: want a positive duration", o.shutdownTimeout)
	}
	if o.toolCallParser != "" {
		if _, err := rollout.ToolFormatByName(o.toolCallParser); err != nil {
			return bad("-tool-call-parser: %w", err)
		}
	}
	if _, _, err := net.SplitHostPort(o.addr); err != nil {
		return bad("-addr: %w", err)
	}
	if err := o.device.Validate(); err != nil {
		return bad("%w", err)
	}
	if err := setup.CheckDir(o.model, policy.ConfigFileName); err != nil {
		return bad("-model: %v", err)
	}
	if o.name == "" {
		o.name = o.model
	}
	seen := map[string]bool{}
	for _, m := range o.loraModules {
		switch {
		case m.name == o.name:
			return bad("-lora-modules %s=%s: %q is the served model's name", m.name, m.dir, m.name)
		case seen[m.name]:
			return bad("-lora-modules: %q given twice", m.name)
		}
		seen[m.name] = true
		if err := setup.CheckDir(m.dir, policy.AdapterConfigFileName, policy.AdapterWeightsFileName); err != nil {
			return bad("-lora-modules %s: %w", m.name, err)
		}
	}
	return o, nil
}

// run is the program after main, with its exit status (setup.Run); the
// tests call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return setup.Run(ctx, "serve", args, stdout, stderr, parseFlags, serveModel)
}

// serveModel loads the checkpoint and serves it until ctx ends.
func serveModel(ctx context.Context, o options, stdout, stderr io.Writer) error {
	var tok *tokenizer.BPE
	if _, err := os.Stat(filepath.Join(o.model, "tokenizer.json")); err == nil {
		if tok, err = tokenizer.Load(o.model); err != nil {
			return fmt.Errorf("loading the tokenizer: %w", err)
		}
	}
	mc, err := policy.ReadConfig(o.model)
	if err != nil {
		return fmt.Errorf("loading the model: %w", err)
	}
	dev, err := setup.OpenDevice(ctx, o.device, mc, stderr)
	if err != nil {
		return err
	}
	// The device outlives the server, which closes its models.
	defer dev.Close()
	opts := []policy.ModelOption{policy.WithSamplerSeed(o.seed), policy.WithBackend(dev.Backend())}
	if tok != nil {
		opts = append(opts, policy.WithDecoder(tok.Decode))
	}
	if o.maxSessions > 0 {
		opts = append(opts, policy.WithMaxSessions(o.maxSessions))
	}
	load := func(dir string) (*policy.Model, error) { return policy.Load(dir, opts...) }
	m, err := load(o.model)
	if err != nil {
		return fmt.Errorf("loading the model: %w", err)
	}
	cfg := serve.Config{
		Model: m, ModelPath: o.model, Name: o.name, Load: load,
		LogprobsMode: o.logprobsMode, WeightVersion: o.weightVersion, MaxSessions: o.maxSessions,
	}
	if tok != nil {
		if err := setup.CheckVocab(tok, m); err != nil {
			_ = m.Close()
			return err
		}
		cfg.Encode, cfg.Decode = tok.Encode, tok.Decode
		if tok.ChatTemplate() != "" {
			tf, err := toolFormat(o.toolCallParser, tok.ChatTemplate(), stderr)
			if err != nil {
				_ = m.Close()
				return err
			}
			cfg.Chat = &record.Config{Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok, ToolFormat: tf}
		}
	}
	srv, err := serve.New(cfg)
	if err != nil {
		_ = m.Close()
		return err
	}
	for _, a := range o.loraModules {
		if err := srv.LoadAdapter(ctx, a.name, a.dir); err != nil {
			_ = srv.Close()
			return fmt.Errorf("loading LoRA adapter %s: %w", a.name, err)
		}
		fmt.Fprintf(stdout, "adapter %s from %s\n", a.name, a.dir)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.addr)
	if err != nil {
		_ = srv.Close()
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	text := "token ids only (no tokenizer.json)"
	switch {
	case cfg.Chat != nil:
		text = "token ids and text, chat completions with " + cfg.Chat.ToolFormat.Name + " tool calls"
	case tok != nil:
		text = "token ids and text"
	}
	fmt.Fprintf(stdout, "serving %s, weights %s, %s, on http://%s\n", o.name, o.weightVersion, text, ln.Addr())

	select {
	case err := <-served:
		_ = srv.Close()
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stderr, "serve: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "serve: requests still in flight after %v are ended: %v\n", o.shutdownTimeout, err)
		// Closing the Server ends them (503); then the connections go.
		cerr := srv.Close()
		return errors.Join(cerr, hs.Close())
	}
	return srv.Close()
}
