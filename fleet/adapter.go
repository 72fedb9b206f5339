package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/agentrl/agentrl/lm"
)

// publishAdapter publishes w's LoRA adapter as version: it writes the
// adapter into Dir/v<version> (complete before it appears under that
// name; lora_alpha folded into the scale when an SGLang server will read
// it, as SGLang ignores use_rslora), has every server load it under
// AdapterName(version) while sampling goes on with the current adapter,
// then — waiting for the turns in flight to end and holding new ones —
// switches sampling to the new adapter, and finally has each server that
// took it unload the adapter it held before. A server that fails to load
// it makes Publish fail naming it (ErrUpdate), as for full weights; the
// fleet switches when at least one server took it, and the sampler
// passes over the servers that did not (they refuse the new name).
func (f *Fleet) publishAdapter(ctx context.Context, version int, w lm.Saver) error {
	as, ok := w.(lm.AdapterSaver)
	if !ok {
		return fmt.Errorf("%w: Config.Adapter is %q, but %T cannot save an adapter (it is not a lm.AdapterSaver)", ErrNoAdapter, f.cfg.Adapter, w)
	}
	if h, ok := w.(adapterHolder); ok {
		if !h.HasAdapter() {
			return fmt.Errorf("%w: Config.Adapter is %q, but the %T has no adapter (add one with AddLoRA or LoadAdapter)", ErrNoAdapter, f.cfg.Adapter, w)
		}
	}
	f.publishing.Lock()
	defer f.publishing.Unlock()

	opts := lm.AdapterSaveOptions{DType: f.cfg.Save.DType, FoldScale: f.sglangReads()}
	dir, err := f.write(version, func(dir string) error { return as.SaveAdapter(dir, opts) })
	if err != nil {
		return err
	}
	name := f.AdapterName(version)
	took := make([]bool, len(f.cfg.Servers))
	errs := make([]error, len(f.cfg.Servers))
	var g errgroup.Group
	for i, s := range f.cfg.Servers {
		g.Go(func() error {
			if err := f.loadAdapter(ctx, s, name, dir); err != nil {
				errs[i] = fmt.Errorf("%w: %s server %s: adapter %s: %w", ErrUpdate, s.Kind, s.URL, name, err)
				return nil
			}
			took[i] = true
			return nil
		})
	}
	_ = g.Wait()
	if !slices.Contains(took, true) {
		return errors.Join(errs...)
	}

	// The switch: no turn runs while the name and version change.
	f.gate.Lock()
	f.adapter.Store(&name)
	f.version.Store(int64(version))
	f.gate.Unlock()

	// No turn uses the old adapters any more.
	var unloads errgroup.Group
	for i, s := range f.cfg.Servers {
		if !took[i] {
			continue
		}
		prev := f.held[i]
		f.held[i] = name
		if prev == "" || prev == name {
			continue
		}
		unloads.Go(func() error {
			if err := f.unloadAdapter(ctx, s, prev); err != nil {
				errs[i] = fmt.Errorf("%w: %s server %s: unloading the previous adapter %s (it serves %s): %w", ErrUpdate, s.Kind, s.URL, prev, name, err)
			}
			return nil
		})
	}
	_ = unloads.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return f.prune()
}

// adapterHolder is a policy that says whether it has an adapter, as
// *policy.Model does.
type adapterHolder interface {
	HasAdapter() bool
}

// sglangReads reports whether an SGLang server is among the servers.
func (f *Fleet) sglangReads() bool {
	return slices.ContainsFunc(f.cfg.Servers, func(s Server) bool { return s.Kind == SGLang })
}

// loadAdapter has server s load the adapter in dir under name. A name
// the server already holds (a version published again, or an adapter
// left by an earlier run) is unloaded and loaded again.
func (f *Fleet) loadAdapter(ctx context.Context, s Server, name, dir string) error {
	already, err := f.tryLoadAdapter(ctx, s, name, dir)
	if !already {
		return err
	}
	if uerr := f.unloadAdapter(ctx, s, name); uerr != nil {
		return fmt.Errorf("%w; unloading it to load it again: %w", err, uerr)
	}
	_, err = f.tryLoadAdapter(ctx, s, name, dir)
	return err
}

// loraResult is SGLang's LoRAUpdateOutput, the fields read.
type loraResult struct {
	Success      *bool  `json:"success"`
	ErrorMessage string `json:"error_message"`
}

// tryLoadAdapter sends one load request: vLLM's POST
// /v1/load_lora_adapter {"lora_name", "lora_path"} (200 with a text), or
// SGLang's POST /load_lora_adapter {"lora_name", "lora_path", "pinned"}
// (LoRAUpdateOutput with success true). already reports a refusal
// because the name is loaded (vLLM: 400 "has already been loaded";
// SGLang: "because it is already loaded").
func (f *Fleet) tryLoadAdapter(ctx context.Context, s Server, name, dir string) (already bool, err error) {
	if s.Kind == VLLM || s.Kind == VLLMModelConfig {
		const path = "/v1/load_lora_adapter"
		status, data, err := f.call(ctx, s.URL, path, map[string]any{"lora_name": name, "lora_path": dir})
		switch {
		case err != nil:
			return false, err
		case status/100 == 2:
			return false, nil
		}
		return status == http.StatusBadRequest && bytes.Contains(data, []byte("already")), statusError(path, status, data)
	}
	const path = "/load_lora_adapter"
	status, data, err := f.call(ctx, s.URL, path, map[string]any{"lora_name": name, "lora_path": dir, "pinned": false})
	if err != nil {
		return false, err
	}
	var res loraResult
	if json.Unmarshal(data, &res) != nil || res.Success == nil {
		if status/100 == 2 {
			return false, fmt.Errorf("POST %s: answer %.200q is not SGLang's LoRAUpdateOutput", path, data)
		}
		return false, statusError(path, status, data)
	}
	if !*res.Success {
		return strings.Contains(res.ErrorMessage, "already"), fmt.Errorf("POST %s: status %d: not successful: %q", path, status, res.ErrorMessage)
	}
	return false, nil
}

// unloadAdapter has server s unload the adapter loaded under name:
// vLLM's POST /v1/unload_lora_adapter or SGLang's POST
// /unload_lora_adapter, {"lora_name"}. A name the server does not hold
// counts as unloaded (vLLM's 404 "cannot be found", SGLang's "does not
// exist"): a server restarted since, say.
func (f *Fleet) unloadAdapter(ctx context.Context, s Server, name string) error {
	body := map[string]any{"lora_name": name}
	if s.Kind == VLLM || s.Kind == VLLMModelConfig {
		const path = "/v1/unload_lora_adapter"
		status, data, err := f.call(ctx, s.URL, path, body)
		switch {
		case err != nil:
			return err
		case status/100 == 2, status == http.StatusNotFound:
			return nil
		}
		return statusError(path, status, data)
	}
	const path = "/unload_lora_adapter"
	status, data, err := f.call(ctx, s.URL, path, body)
	if err != nil {
		return err
	}
	var res loraResult
	if json.Unmarshal(data, &res) != nil || res.Success == nil {
		if status/100 == 2 {
			return fmt.Errorf("POST %s: answer %.200q is not SGLang's LoRAUpdateOutput", path, data)
		}
		return statusError(path, status, data)
	}
	if !*res.Success && !strings.Contains(res.ErrorMessage, "does not exist") {
		return fmt.Errorf("POST %s: status %d: not successful: %q", path, status, res.ErrorMessage)
	}
	return nil
}
