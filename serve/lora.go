package serve

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// ErrAdapterLoaded is wrapped by LoadAdapter's error for a name already
// loaded.
var ErrAdapterLoaded = errors.New("serve: LoRA adapter already loaded")

// ErrUnknownAdapter is wrapped by the error for a name no adapter is
// loaded under.
var ErrUnknownAdapter = errors.New("serve: LoRA adapter not loaded")

// errAdapterArgs marks an adapter request without a name or a folder, or
// with the served model's name.
var errAdapterArgs = errors.New("serve: bad adapter request")

// unknownAdapterError names the adapter asked for and those loaded.
type unknownAdapterError struct {
	name   string
	loaded []string
}

func (e *unknownAdapterError) Error() string {
	return fmt.Sprintf("serve: LoRA adapter %q is not loaded (loaded: %s)", e.name, strings.Join(e.loaded, ", "))
}

func (e *unknownAdapterError) Unwrap() error { return ErrUnknownAdapter }

// unknownAdapterLocked is the error for name, which is not loaded.
func (s *Server) unknownAdapterLocked(name string) error {
	return &unknownAdapterError{name: name, loaded: s.adapterNamesLocked()}
}

// sortedAdaptersLocked lists the loaded adapters in load order.
func (s *Server) sortedAdaptersLocked() []*engine {
	out := make([]*engine, 0, len(s.adapters))
	for _, a := range s.adapters {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// adapterNamesLocked lists the loaded adapters' names in load order.
func (s *Server) adapterNamesLocked() []string {
	as := s.sortedAdaptersLocked()
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.name
	}
	return names
}

// loadedAdaptersLocked maps the loaded adapters' names to their folders,
// as SGLang's loaded_adapters.
func (s *Server) loadedAdaptersLocked() map[string]string {
	out := make(map[string]string, len(s.adapters))
	for name, a := range s.adapters {
		out[name] = a.path
	}
	return out
}

// Adapters returns the folders of the loaded LoRA adapters by name.
func (s *Server) Adapters() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadedAdaptersLocked()
}

// hasAdapter reports whether an adapter is loaded under name.
func (s *Server) hasAdapter(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adapters[name] != nil
}

// LoadAdapter loads the PEFT adapter in dir (adapter_config.json and
// adapter_model.safetensors, as policy.Model.SaveAdapter writes them)
// under name: requests then sample from it by naming it, as "model" of
// /v1/completions or "lora_path" of /generate. The adapter runs on a copy
// of the weights served (so that it costs the memory of a second model),
// taken when the base model is idle between generations; the copy starts
// when no other reload or adapter change is under way. A name already
// loaded is an error wrapping ErrAdapterLoaded, a folder without
// adapter_config.json one wrapping fs.ErrNotExist, and an adapter that
// does not fit the served model (another architecture, rank mismatch)
// one that says why; the server is unchanged after any of them. Any rank
// is accepted.
func (s *Server) LoadAdapter(ctx context.Context, name, dir string) error {
	return s.loadAdapter(ctx, name, dir, false)
}

// loadAdapter is LoadAdapter; with replace, a loaded adapter of that
// name is replaced (vLLM's load_inplace), its generations in flight
// finishing on the old one.
func (s *Server) loadAdapter(ctx context.Context, name, dir string, replace bool) error {
	switch {
	case name == "" || dir == "":
		return fmt.Errorf("%w: both the adapter's name and its folder are required", errAdapterArgs)
	case name == s.name:
		return fmt.Errorf("%w: %q is the served model's name", errAdapterArgs, name)
	}
	release, err := s.takeReload(ctx)
	if err != nil {
		return err
	}
	defer release()

	s.mu.Lock()
	closed, base, exists := s.closed, s.eng, s.adapters[name] != nil
	s.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case exists && !replace:
		return fmt.Errorf("%w: %q", ErrAdapterLoaded, name)
	}
	if _, err := os.Stat(filepath.Join(dir, policy.AdapterConfigFileName)); err != nil {
		return fmt.Errorf("%w: adapter %q: %w", errLoad, name, err)
	}
	m, err := s.copyBase(base.model)
	if err != nil {
		return fmt.Errorf("%w: adapter %q: %w", errLoad, name, err)
	}
	if err := m.LoadAdapter(dir); err != nil {
		_ = m.Close()
		return fmt.Errorf("%w: adapter %q: %w", errLoad, name, err)
	}
	cfg, _ := m.LoRA()

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = m.Close()
		return ErrClosed
	}
	e := s.newEngine(m, dir, base.version)
	e.name, e.lora, e.created = name, cfg, time.Now().Unix()
	var closeOld *engine
	if old := s.adapters[name]; old != nil {
		// In place: it keeps its place in the list; its generations in
		// flight finish on it, and the last one closes it.
		e.seq = old.seq
		old.retired = true
		if old.calls == 0 {
			closeOld = old
		}
	} else {
		s.lastSeq++
		e.seq = s.lastSeq
	}
	s.adapters[name] = e
	s.broadcastLocked()
	s.mu.Unlock()
	if closeOld != nil {
		_ = closeOld.model.Close()
	}
	return nil
}

// UnloadAdapter unloads the adapter loaded under name: new requests
// naming it are refused at once; it returns when the generations in
// flight on it have finished (or ctx ends first), and the last of them
// releases its model. A name that is not loaded is an error wrapping
// ErrUnknownAdapter.
func (s *Server) UnloadAdapter(ctx context.Context, name string) error {
	if name == "" {
		return fmt.Errorf("%w: the adapter's name is required", errAdapterArgs)
	}
	release, err := s.takeReload(ctx)
	if err != nil {
		return err
	}
	defer release()

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	e := s.adapters[name]
	if e == nil {
		err := s.unknownAdapterLocked(name)
		s.mu.Unlock()
		return err
	}
	delete(s.adapters, name)
	e.retired = true
	s.broadcastLocked()
	if e.calls == 0 {
		s.mu.Unlock()
		_ = e.model.Close()
		return nil
	}
	// As SGLang's LoRARegistry.wait_for_unload: the requests using it end
	// first. The last one closes the model, even after ctx ended.
	for e.calls > 0 && ctx.Err() == nil {
		_ = s.waitLocked(ctx)
	}
	s.mu.Unlock()
	return nil
}

// copyBase returns a new model with base's weights (policy.Model.Clone,
// which waits for base to be idle) on its backend, with the server's
// decoder and session count. A base that carries an adapter of its own
// cannot be copied.
func (s *Server) copyBase(base *policy.Model) (*policy.Model, error) {
	if _, ok := base.LoRA(); ok {
		return nil, errors.New("the served model carries a LoRA adapter of its own: serve its merged checkpoint")
	}
	opts := []policy.ModelOption{policy.WithBackend(base.Backend())}
	if s.lim.decode != nil {
		opts = append(opts, policy.WithDecoder(s.lim.decode))
	}
	if s.maxSessions > 0 {
		opts = append(opts, policy.WithMaxSessions(s.maxSessions))
	}
	m, err := base.Clone(opts...)
	if err != nil {
		return nil, fmt.Errorf("copying the served weights: %w", err)
	}
	return m, nil
}

// copyParams copies src's values into dst, tensor by tensor, which must
// be the same tensors in the same order.
func copyParams(dst, src []lm.Param) error {
	if len(dst) != len(src) {
		return fmt.Errorf("%d tensors, want %d", len(src), len(dst))
	}
	for i := range dst {
		if dst[i].Name != src[i].Name || len(dst[i].Data) != len(src[i].Data) {
			return fmt.Errorf("tensor %d is %s of %d values, want %s of %d", i, src[i].Name, len(src[i].Data), dst[i].Name, len(dst[i].Data))
		}
		copy(dst[i].Data, src[i].Data)
	}
	return nil
}

// prepareAdapters returns, for each of olds, a copy of m with an adapter
// of the same configuration attached, to take the old adapter's values
// (copyAdapters) once nothing generates on it.
func (s *Server) prepareAdapters(m *policy.Model, olds []*engine) ([]*policy.Model, error) {
	out := make([]*policy.Model, 0, len(olds))
	fail := func(err error) ([]*policy.Model, error) {
		for _, c := range out {
			_ = c.Close()
		}
		return nil, err
	}
	for _, a := range olds {
		c, err := s.copyBase(m)
		if err != nil {
			return fail(fmt.Errorf("adapter %q on the new weights: %w", a.name, err))
		}
		if err := c.AddLoRA(a.lora, 0); err != nil {
			_ = c.Close()
			return fail(fmt.Errorf("adapter %q on the new weights: %w", a.name, err))
		}
		out = append(out, c)
	}
	return out, nil
}

// copyAdapters copies each old adapter's values into its prepared copy.
func copyAdapters(olds []*engine, moved []*policy.Model) error {
	for i, a := range olds {
		if err := copyParams(moved[i].Params(), a.model.Params()); err != nil {
			return fmt.Errorf("adapter %q on the new weights: %w", a.name, err)
		}
	}
	return nil
}

// adapterNotFound reports a load error that is a missing folder or file.
func adapterNotFound(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// pyKeys renders names as Python prints an OrderedDict's keys, as
// SGLang's messages quote them.
func pyKeys(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return "odict_keys([" + strings.Join(q, ", ") + "])"
}
