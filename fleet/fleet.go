package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentrl/agentrl/internal/atomicfile"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/openai"
)

// Kind names the weight-update API a server speaks.
type Kind string

const (
	// SGLang: /update_weights_from_disk alone, whose lock holds the
	// requests of every client while the weights change. The zero Kind
	// means SGLang.
	SGLang Kind = "sglang"
	// VLLM: the dev-mode /collective_rpc reload_weights with a
	// weights_path, between /pause (waiting for the requests in flight)
	// and /resume (VLLM_SERVER_DEV_MODE=1).
	VLLM Kind = "vllm"
	// VLLMModelConfig: vLLM releases whose reload_weights takes no
	// arguments: /collective_rpc update_config with the new model path,
	// then reload_weights.
	VLLMModelConfig Kind = "vllm-model-config"
)

// ErrConfig is wrapped by New's error for an unusable Config.
var ErrConfig = errors.New("fleet: invalid configuration")

// ErrUpdate is wrapped by Publish's error for a server that did not take
// the new weights; the message names the server.
var ErrUpdate = errors.New("fleet: weight update failed")

// ErrNoAdapter is wrapped by Publish's error when Config.Adapter is set
// and the policy has no LoRA adapter to publish.
var ErrNoAdapter = errors.New("fleet: no LoRA adapter to publish")

// Server is one inference server of the fleet.
type Server struct {
	// URL is the server's base URL, such as "http://10.0.0.5:8000".
	URL string
	// Kind is the weight-update API it speaks; "" means SGLang.
	Kind Kind
}

// Config configures a Fleet. Zero values take the defaults given.
type Config struct {
	// Servers sample the rollouts; at least one is required.
	Servers []Server
	// Dir is the folder Publish writes checkpoints into, as
	// Dir/v00000042; every server must read it under the same path (a
	// shared file system, or the same machine). Required.
	Dir string
	// Keep is how many published checkpoints stay in Dir; 0 means 2 (the
	// current one and its predecessor, which a server that has not
	// finished switching may still read).
	Keep int
	// Save says how checkpoints are written: SaveOptions{} is float32 in
	// one file; BF16 halves what the servers read.
	Save lm.SaveOptions
	// Client sends the control requests; nil means a client of its own.
	Client *http.Client
	// Timeout bounds each control request (a checkpoint load included);
	// 0 means 10 minutes.
	Timeout time.Duration
	// APIKey, when set, is sent as "Authorization: Bearer <APIKey>" on
	// every request.
	APIKey string
	// Sampler configures the sampling client; its BaseURLs, APIKey and
	// WeightVersion are set by New.
	Sampler openai.Config
	// Version is the weight version the servers hold when New is called
	// (the checkpoint they were started from); the trainer's policy
	// version counts optimizer steps, so 0 for a fresh run (see the
	// package documentation's "Versions"). Servers report their own name
	// for it: SGLang says "default" unless started with --weight-version,
	// package serve "0" (or "default" playing SGLang), vLLM nothing. Until
	// the first Publish the fleet expects the name the servers report,
	// which it reads from them (GET /model_info, else
	// /get_weight_version) in Check or before the first Generate; the
	// servers must agree, and a number must be Version (unless
	// AdoptVersion).
	Version int
	// AdoptVersion makes the fleet take the number the servers report,
	// whatever it is, as the version they hold, instead of requiring
	// Version: servers that kept the weights of an earlier run (a server
	// keeps the last weights it loaded) report that run's last version.
	// Version then returns the number once Check or the first Generate
	// has read it; a name that is not a number (SGLang's "default") or
	// none (vLLM) leaves Version as configured. The servers must still
	// agree with each other. The weights they hold are what the fleet
	// samples until the first Publish, so a trainer whose policy is not
	// those weights publishes before sampling (agentrl.Trainer does,
	// before its first rollout; a validation before it samples the
	// servers' weights).
	AdoptVersion bool
	// Adapter, when set, makes Publish publish the policy's LoRA adapter
	// instead of full weights: the servers keep their base weights and
	// load each version's adapter under the name AdapterName(version),
	// "<Adapter>-v00000042", and sampling names the current one. Empty
	// means full weights. Until the first Publish the fleet samples the
	// base model, as version Version.
	Adapter string
	// PartialRollouts makes Publish interrupt the generations in flight
	// instead of waiting for them to end: each server aborts them —
	// SGLang's /update_weights_from_disk with abort_all_requests, vLLM's
	// /pause?mode=abort before the reload — and they come back with what
	// they generated so far (lm.FinishAbort, tagged with the version that
	// generated it), for package rollout to continue under the new
	// weights (see the package documentation's "Partial rollouts"). The
	// checkpoint is written while sampling goes on. Not with Adapter.
	PartialRollouts bool
}

// Fleet samples from inference servers and publishes new weights to
// them. It implements lm.Sampler and is safe for concurrent use.
type Fleet struct {
	cfg     Config
	client  *http.Client
	sampler *openai.Sampler
	// gate is held shared by every Generate and exclusively by Publish
	// while the servers switch weights (full weights) or the samplers
	// switch adapters, so that no turn spans two versions.
	gate    sync.RWMutex
	version atomic.Int64
	// adapter is the name of the adapter sampled ("" for the base
	// model); it changes under gate.
	adapter atomic.Pointer[string]

	// published is set once a Publish moved the version: from then on
	// every server must report it. Before, the servers must report
	// initial, the name they give the weights they started with.
	published atomic.Bool
	initial   atomic.Pointer[string] // "" until read, or when none reports one
	// reading serialises the reads of the initial version; read is set
	// once one succeeded.
	reading sync.Mutex
	read    atomic.Bool

	// cuts is the partial rollouts' gate (Config.PartialRollouts).
	cuts cutGate

	// publishing serialises Publish calls; it guards what follows.
	publishing sync.Mutex
	dirs       []string // published checkpoints, oldest first
	held       []string // per server, the adapter it holds ("" for none)
}

// New checks cfg and returns a Fleet whose servers hold cfg.Version.
func New(cfg Config) (*Fleet, error) {
	switch {
	case len(cfg.Servers) == 0:
		return nil, fmt.Errorf("%w: no Servers", ErrConfig)
	case cfg.Dir == "":
		return nil, fmt.Errorf("%w: Dir is empty: Publish needs a folder the servers can read", ErrConfig)
	case cfg.Keep < 0 || cfg.Timeout < 0 || cfg.Version < 0:
		return nil, fmt.Errorf("%w: negative Keep, Timeout or Version", ErrConfig)
	case cfg.PartialRollouts && cfg.Adapter != "":
		return nil, fmt.Errorf("%w: PartialRollouts with Adapter: partial rollouts across adapter updates are not supported (the adapter is switched between turns)", ErrConfig)
	}
	f := &Fleet{cfg: cfg, client: cfg.Client}
	f.cfg.Servers = slices.Clone(cfg.Servers)
	if f.cfg.Keep == 0 {
		f.cfg.Keep = 2
	}
	if f.cfg.Timeout == 0 {
		f.cfg.Timeout = 10 * time.Minute
	}
	if f.client == nil {
		f.client = &http.Client{}
	}
	sc := cfg.Sampler
	sc.BaseURLs = nil
	sc.APIKey = cfg.APIKey
	sc.Partial = cfg.PartialRollouts
	f.cuts.changed = make(chan struct{})
	for i, s := range f.cfg.Servers {
		switch s.Kind {
		case "":
			f.cfg.Servers[i].Kind = SGLang
		case SGLang, VLLM, VLLMModelConfig:
		default:
			return nil, fmt.Errorf("%w: Servers[%d].Kind %q (want %q, %q or %q)", ErrConfig, i, s.Kind, SGLang, VLLM, VLLMModelConfig)
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: Servers[%d].URL %q is not an http(s) URL", ErrConfig, i, s.URL)
		}
		sc.BaseURLs = append(sc.BaseURLs, s.URL)
	}
	f.version.Store(int64(cfg.Version))
	f.adapter.Store(new(string))
	f.initial.Store(new(string))
	f.held = make([]string, len(f.cfg.Servers))
	if cfg.Adapter != "" {
		// The base weights never change, so the version the servers
		// report does neither: the adapter's name pins the version, and
		// a server without it refuses the request (openai.Config.Adapter).
		sc.WeightVersion = nil
		sc.Adapter = f.Adapter
	} else {
		sc.WeightVersion = f.expectedVersion
	}
	s, err := openai.New(sc)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	f.sampler = s
	return f, nil
}

// Version is the weight version the servers hold.
func (f *Fleet) Version() int { return int(f.version.Load()) }

// expectedVersion is the weight version every answer from server i
// must report: the published version, or before the first Publish the
// name the servers give the weights they started with ("" checks
// nothing: none gives one, or it was not read yet). After a Publish a
// vLLM server's answers are not checked: vLLM's reload takes no version,
// so a server of that kind that reports one anyway (package serve, which
// counts its reloads) reports its own count, not the fleet's.
func (f *Fleet) expectedVersion(i int) string {
	if f.published.Load() {
		if f.cfg.Servers[i].Kind != SGLang {
			return ""
		}
		return strconv.FormatInt(f.version.Load(), 10)
	}
	return *f.initial.Load()
}

// Adapter is the name of the LoRA adapter sampled: AdapterName(Version)
// once an adapter has been published, "" for the base model.
func (f *Fleet) Adapter() string { return *f.adapter.Load() }

// AdapterName is the name under which the servers load version's
// adapter: Config.Adapter, "-v" and the version in eight digits, as the
// folder it is written to.
func (f *Fleet) AdapterName(version int) string {
	return fmt.Sprintf("%s-v%08d", f.cfg.Adapter, version)
}

// Servers returns the fleet's servers.
func (f *Fleet) Servers() []Server { return slices.Clone(f.cfg.Servers) }

// Generate samples on the servers (openai.Sampler.Generate). Every
// generation comes from the weights of one version, which its
// WeightVersion names (the decimal text of Version); a Publish waits for
// the call to end, or with Config.PartialRollouts interrupts it: the
// generations it cut end with lm.FinishAbort and hold the tokens their
// version generated.
func (f *Fleet) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	if f.cfg.PartialRollouts {
		return f.generatePartial(ctx, reqs)
	}
	f.gate.RLock()
	defer f.gate.RUnlock()
	if err := f.readInitial(ctx); err != nil {
		return nil, err
	}
	v := strconv.FormatInt(f.version.Load(), 10)
	gens, err := f.sampler.Generate(ctx, reqs)
	for i := range gens {
		gens[i].WeightVersion = v
	}
	return gens, err
}

// Publish makes w the fleet's weights at version: it waits for the turns
// in flight to end and holds new ones, writes w as a Hugging Face
// checkpoint into Dir/v<version> (complete before it appears under that
// name), has every server load it, and then lets sampling go on. A
// server that fails to take it makes Publish fail with an error wrapping
// ErrUpdate that names the server (all failures are reported, joined);
// the fleet then counts the new version as current when at least one
// server took it, so that the failed servers' answers are refused where
// they report their version. Old checkpoints beyond Keep are removed.
//
// With Config.Adapter set, Publish publishes w's LoRA adapter instead
// (see the package documentation): the servers load it while sampling
// goes on, and the turns are held only while sampling switches to it. w
// must then be a lm.AdapterSaver holding an adapter, else the error
// wraps ErrNoAdapter.
func (f *Fleet) Publish(ctx context.Context, version int, w lm.Saver) error {
	if version < 0 {
		return fmt.Errorf("%w: version %d is negative", ErrUpdate, version)
	}
	if f.cfg.Adapter != "" {
		return f.publishAdapter(ctx, version, w)
	}
	if f.cfg.PartialRollouts {
		return f.publishPartial(ctx, version, w)
	}
	f.publishing.Lock()
	defer f.publishing.Unlock()
	f.gate.Lock()
	defer f.gate.Unlock()
	dir, err := f.write(version, func(dir string) error { return w.Save(dir, f.cfg.Save) })
	if err != nil {
		return err
	}
	return f.updateAll(ctx, version, dir, false)
}

// updateAll has every server load the checkpoint in dir as version,
// aborting the generations in flight when abort is set, counts the new
// version as current when at least one server took it, and prunes the
// old checkpoints.
func (f *Fleet) updateAll(ctx context.Context, version int, dir string, abort bool) error {
	tag := strconv.Itoa(version)
	took := make([]bool, len(f.cfg.Servers))
	errs := make([]error, len(f.cfg.Servers))
	var g errgroup.Group
	for i, s := range f.cfg.Servers {
		g.Go(func() error {
			if err := f.update(ctx, s, dir, tag, abort); err != nil {
				errs[i] = fmt.Errorf("%w: %s server %s: version %d: %w", ErrUpdate, s.Kind, s.URL, version, err)
				return nil
			}
			took[i] = true
			return nil
		})
	}
	_ = g.Wait()
	if slices.Contains(took, true) {
		f.version.Store(int64(version))
		f.published.Store(true)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return f.prune()
}

// write has save write version's folder, Dir/v<version>, through a
// temporary folder renamed into place, so that a server never reads a
// partial checkpoint.
func (f *Fleet) write(version int, save func(dir string) error) (string, error) {
	if err := os.MkdirAll(f.cfg.Dir, 0o755); err != nil {
		return "", fmt.Errorf("fleet: checkpoint folder: %w", err)
	}
	name := fmt.Sprintf("v%08d", version)
	dir := filepath.Join(f.cfg.Dir, name)
	tmp := filepath.Join(f.cfg.Dir, "."+name+".tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return "", fmt.Errorf("fleet: %w", err)
	}
	if err := save(tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("fleet: writing version %d: %w", version, err)
	}
	// A version published again (after a resume) replaces its folder.
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("fleet: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("fleet: %w", err)
	}
	if err := atomicfile.SyncDir(f.cfg.Dir); err != nil {
		return "", fmt.Errorf("fleet: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("fleet: %w", err)
	}
	f.dirs = slices.DeleteFunc(f.dirs, func(d string) bool { return d == abs })
	f.dirs = append(f.dirs, abs)
	return abs, nil
}

// prune removes the published checkpoints beyond Keep.
func (f *Fleet) prune() error {
	var errs []error
	for len(f.dirs) > f.cfg.Keep {
		if err := os.RemoveAll(f.dirs[0]); err != nil {
			errs = append(errs, err)
		}
		f.dirs = f.dirs[1:]
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("fleet: removing old checkpoints: %w", err)
	}
	return nil
}

// vllmPause is vLLM's pause that lets the requests in flight finish:
// mode=wait for current releases, and wait_for_inflight_requests=true for
// those before mode, which read only that flag and otherwise abort the
// requests in flight; current ones take it as mode=wait too
// (vllm/entrypoints/serve/dev/rlhf/api_router.py, pause_generation, and
// vllm/v1/engine/async_llm.py, AsyncLLM.pause_generation). clear_cache
// keeps its default, true: the prefix cache of the old weights goes.
const vllmPause = "/pause?mode=wait&wait_for_inflight_requests=true"

// vllmPauseAbort is vLLM's pause that aborts the requests in flight,
// which answer finish_reason "abort" with their output so far (mode
// "abort", AsyncLLM.pause_generation's default; releases before mode
// read wait_for_inflight_requests=false, the default, the same way).
const vllmPauseAbort = "/pause?mode=abort"

// update has server s load the checkpoint in dir, aborting the
// generations in flight first when abort is set (partial rollouts). A
// vLLM server is resumed whatever happened to the load, so that a failed
// update does not leave it paused.
//
// SGLang is sent /update_weights_from_disk alone, with flush_cache true
// and abort_all_requests false: without a pause its tokenizer manager
// takes the model-update writer lock, which waits for the generate
// requests of every client to end and holds new ones (a writer-preferring
// lock, python/sglang/srt/aio_rwlock.py), so that nothing runs when the
// scheduler flushes the cache after loading. A /pause_generation before
// it would be unsafe when the fleet is not the server's only client: the
// update then skips the lock (tokenizer_manager.py,
// update_weights_from_disk, is_pause), and requests paused in place
// ("in_place") stay in the running batch, or go back to the waiting
// queue ("retract"), so the scheduler's flush_cache fails its assertion
// "Cache flush failed after updating weights"
// (scheduler_update_weights_mixin.py, flush_cache_after_weight_update)
// and the scheduler dies. flush_cache itself is needed: the cached
// prefixes hold keys and values of the old weights.
func (f *Fleet) update(ctx context.Context, s Server, dir, version string, abort bool) (err error) {
	switch s.Kind {
	case VLLM, VLLMModelConfig:
		pause := vllmPause
		if abort {
			pause = vllmPauseAbort
		}
		if err := f.post(ctx, s.URL, pause, nil, nil); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, f.post(ctx, s.URL, "/resume", nil, nil)) }()
		if s.Kind == VLLMModelConfig {
			cfg := rpcRequest{Method: "update_config", Args: []any{map[string]any{"model_config": map[string]any{"model": dir}}}}
			if err := f.post(ctx, s.URL, "/collective_rpc", cfg, nil); err != nil {
				return err
			}
			return f.post(ctx, s.URL, "/collective_rpc", rpcRequest{Method: "reload_weights"}, nil)
		}
		return f.post(ctx, s.URL, "/collective_rpc", rpcRequest{Method: "reload_weights", Kwargs: map[string]any{"weights_path": dir}}, nil)
	default:
		var res struct {
			Success *bool  `json:"success"`
			Message string `json:"message"`
		}
		req := map[string]any{"model_path": dir, "weight_version": version, "flush_cache": true, "abort_all_requests": abort}
		if err := f.post(ctx, s.URL, "/update_weights_from_disk", req, &res); err != nil {
			return err
		}
		if res.Success == nil || !*res.Success {
			return fmt.Errorf("/update_weights_from_disk: not successful: %q", res.Message)
		}
		return nil
	}
}

// rpcRequest is vLLM's /collective_rpc body.
type rpcRequest struct {
	Method string         `json:"method"`
	Args   []any          `json:"args,omitempty"`
	Kwargs map[string]any `json:"kwargs,omitempty"`
}

// maxControlBody bounds a control answer that is read.
const maxControlBody = 4 << 20

// post sends body (nil: none) to base+path and decodes a JSON answer
// into out when out is not nil. A status other than 2xx is an error
// that quotes the answer.
func (f *Fleet) post(ctx context.Context, base, path string, body, out any) error {
	status, data, err := f.call(ctx, base, path, body)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return statusError(path, status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("POST %s: answer: %w", path, err)
		}
	}
	return nil
}

// call sends body (nil: none) to base+path within Timeout and returns the
// answer's status and body; the error is for a request that got no
// answer.
func (f *Fleet) call(ctx context.Context, base, path string, body any) (int, []byte, error) {
	return f.do(ctx, http.MethodPost, base, path, body)
}

// do is call with a method.
func (f *Fleet) do(ctx context.Context, method, base, path string, body any) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if f.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+f.cfg.APIKey)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxControlBody))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return resp.StatusCode, data, nil
}

// statusError is a refusal that quotes the answer.
func statusError(path string, status int, data []byte) error {
	msg := string(data)
	if len(msg) > 512 {
		msg = msg[:512] + "…"
	}
	return fmt.Errorf("POST %s: status %d: %s", path, status, strings.TrimSpace(msg))
}
