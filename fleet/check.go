package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/agentrl/agentrl/policy/openai"
)

// ErrCheck is wrapped by Check's error for a server that cannot serve the
// fleet; the message names the server and what it lacks.
var ErrCheck = errors.New("fleet: server check failed")

// Check makes sure, before any training or evaluation, that every server
// can serve the fleet, without changing anything on it:
//
//   - it answers GET /v1/models, and serves Config.Sampler.Model when that
//     is set (for SGLang, whose served name becomes the checkpoint folder
//     after an update, a folder inside Dir counts too);
//   - it takes the fleet's weight updates: a vLLM server answers GET
//     /is_paused, is not paused, and has POST /collective_rpc (both come
//     with VLLM_SERVER_DEV_MODE=1), asked without a method so that it runs
//     nothing; with Config.Adapter it has POST /v1/unload_lora_adapter
//     (VLLM_ALLOW_RUNTIME_LORA_UPDATING=True), asked without a name. An
//     SGLang server always has its update routes;
//   - for full weights (no Config.Adapter), the weight versions the
//     servers report (GET /model_info, else /get_weight_version) agree,
//     and, before the first Publish, name Config.Version where they are
//     numbers (SGLang's "default", the weights it started with, is taken
//     as Config.Version; with Config.AdoptVersion any number is, and
//     becomes Version). Check then expects that name until the first
//     Publish, as Generate would.
//
// A route is missing when the server answers FastAPI's 404 {"detail":
// "Not Found"} or OpenAI's 404 "Invalid URL (…)". All failures are reported, joined, each wrapping ErrCheck
// (or ErrVersion) and naming its server.
func (f *Fleet) Check(ctx context.Context) error {
	labels := make([]string, len(f.cfg.Servers))
	errs := make([]error, len(f.cfg.Servers))
	var g errgroup.Group
	for i, s := range f.cfg.Servers {
		g.Go(func() error {
			var err error
			labels[i], err = f.checkServer(ctx, s)
			if err != nil {
				errs[i] = fmt.Errorf("%w: %s server %s: %w", ErrCheck, s.Kind, s.URL, err)
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if f.cfg.Adapter != "" {
		// The base weights never change: their version is not checked.
		return nil
	}
	return f.agree(labels, make([]bool, len(labels)))
}

// checkServer checks server s (see Check) and returns the weight version
// it reports ("" for none).
func (f *Fleet) checkServer(ctx context.Context, s Server) (string, error) {
	status, data, err := f.do(ctx, http.MethodGet, s.URL, "/v1/models", nil)
	if err != nil {
		return "", fmt.Errorf("does not answer: %w", err)
	}
	if status != http.StatusOK {
		return "", statusError("GET /v1/models", status, data)
	}
	models, err := openai.ParseModels(data)
	if err != nil {
		return "", fmt.Errorf("GET /v1/models: %w", err)
	}
	if err := f.checkModel(s, models); err != nil {
		return "", err
	}
	if s.Kind == VLLM || s.Kind == VLLMModelConfig {
		if err := f.checkVLLMRoutes(ctx, s); err != nil {
			return "", err
		}
	}
	return f.serverVersion(ctx, s)
}

// checkModel checks that the server lists Config.Sampler.Model, when set.
func (f *Fleet) checkModel(s Server, models openai.Models) error {
	want := f.cfg.Sampler.Model
	if want == "" {
		return nil
	}
	served := models.Served()
	if slices.Contains(served, want) {
		return nil
	}
	if s.Kind == SGLang {
		// SGLang names the model after the folder it last loaded
		// (tokenizer_manager.py, _update_model_path_info).
		dir, err := filepath.Abs(f.cfg.Dir)
		if err == nil && slices.ContainsFunc(served, func(id string) bool { return strings.HasPrefix(id, dir+string(filepath.Separator)) }) {
			return nil
		}
	}
	return fmt.Errorf("serves %q, not %q (Config.Sampler.Model)", served, want)
}

// checkVLLMRoutes checks that a vLLM server takes the fleet's updates
// (and adapters, with Config.Adapter) and is not paused.
func (f *Fleet) checkVLLMRoutes(ctx context.Context, s Server) error {
	status, data, err := f.do(ctx, http.MethodGet, s.URL, "/is_paused", nil)
	switch {
	case err != nil:
		return err
	case routeMissing(status, data):
		return errors.New("no GET /is_paused: start vLLM with VLLM_SERVER_DEV_MODE=1 for /pause, /resume and /collective_rpc")
	case status != http.StatusOK:
		return statusError("GET /is_paused", status, data)
	}
	var paused struct {
		IsPaused *bool `json:"is_paused"`
	}
	if json.Unmarshal(data, &paused) != nil || paused.IsPaused == nil {
		return fmt.Errorf("GET /is_paused: answer %.200q has no is_paused", data)
	}
	if *paused.IsPaused {
		return errors.New("is paused (an update that did not finish?): POST /resume to it")
	}
	// Without a method the RPC route refuses the request (400 "Missing
	// 'method'") and runs nothing.
	status, data, err = f.call(ctx, s.URL, "/collective_rpc", map[string]any{})
	switch {
	case err != nil:
		return err
	case routeMissing(status, data):
		return errors.New("no POST /collective_rpc: start vLLM with VLLM_SERVER_DEV_MODE=1")
	}
	if f.cfg.Adapter == "" {
		return nil
	}
	// Without a name the unload route refuses the request.
	status, data, err = f.call(ctx, s.URL, "/v1/unload_lora_adapter", map[string]any{})
	switch {
	case err != nil:
		return err
	case routeMissing(status, data):
		return errors.New("no POST /v1/load_lora_adapter: start vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True")
	}
	return nil
}

// routeMissing reports a server's answer for a path it does not route:
// FastAPI's 404 {"detail": "Not Found"}, as vLLM and SGLang give it, or
// OpenAI's 404 error object whose message is "Invalid URL (<method>
// <path>)", as OpenAI's API and package serve give it. A 404 of a route
// that exists carries another body.
func routeMissing(status int, data []byte) bool {
	if status != http.StatusNotFound {
		return false
	}
	var d struct {
		Detail string `json:"detail"`
		Error  struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &d) != nil {
		return false
	}
	return d.Detail == "Not Found" || strings.HasPrefix(d.Error.Message, "Invalid URL (")
}
