package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"
)

// ErrVersion is wrapped by the error for servers whose weight versions
// cannot be the fleet's before its first Publish: they disagree, or one
// reports a number other than Config.Version (without
// Config.AdoptVersion).
var ErrVersion = errors.New("fleet: servers report unexpected weight versions")

// serverVersion reads the weight version server s reports: SGLang's GET
// /model_info "weight_version" (python/sglang/srt/entrypoints/
// http_server.py; package serve answers it too), else its older GET
// /get_weight_version (which current SGLang answers with a 404 naming
// /model_info). "" when the server has neither (vLLM) or names none.
func (f *Fleet) serverVersion(ctx context.Context, s Server) (string, error) {
	for _, path := range []string{"/model_info", "/get_weight_version"} {
		status, data, err := f.do(ctx, http.MethodGet, s.URL, path, nil)
		if err != nil {
			return "", err
		}
		if status == http.StatusNotFound {
			continue
		}
		if status != http.StatusOK {
			return "", statusError("GET "+path, status, data)
		}
		return parseVersion(path, data)
	}
	return "", nil
}

// parseVersion reads {"weight_version": v} from a GET answer: a string,
// a number (its decimal text) or null/absent ("").
func parseVersion(path string, data []byte) (string, error) {
	var info struct {
		WeightVersion json.RawMessage `json:"weight_version"`
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return "", fmt.Errorf("GET %s: answer %.200q is not a JSON object", path, data)
	}
	raw := bytes.TrimSpace(info.WeightVersion)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", fmt.Errorf("GET %s: weight_version: %w", path, err)
		}
		return v, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", fmt.Errorf("GET %s: weight_version %.40s is neither a string nor a number", path, raw)
	}
	return n.String(), nil
}

// readInitial reads, once, the name the servers give the weights they
// started with, unless a Publish already set the version or adapters
// pin it (see Config.Version): a server that cannot be asked is left
// out, unless none can. Check reads it too.
func (f *Fleet) readInitial(ctx context.Context) error {
	if f.read.Load() || f.published.Load() || f.cfg.Adapter != "" {
		return nil
	}
	f.reading.Lock()
	defer f.reading.Unlock()
	if f.read.Load() || f.published.Load() {
		return nil
	}
	labels := make([]string, len(f.cfg.Servers))
	missed := make([]bool, len(f.cfg.Servers))
	errs := make([]error, len(f.cfg.Servers))
	var g errgroup.Group
	for i, s := range f.cfg.Servers {
		g.Go(func() error {
			v, err := f.serverVersion(ctx, s)
			if err != nil {
				missed[i] = true
				errs[i] = fmt.Errorf("fleet: %s server %s: reading its weight version: %w", s.Kind, s.URL, err)
			}
			labels[i] = v
			return nil
		})
	}
	_ = g.Wait()
	if !slices.Contains(missed, false) {
		return errors.Join(errs...)
	}
	return f.agree(labels, missed)
}

// agree checks the versions the servers reported (missed: not asked)
// and, before the first Publish, makes the one they agree on the one
// every answer must report.
func (f *Fleet) agree(labels []string, missed []bool) error {
	if f.published.Load() {
		// The servers must report the published version; the sampler
		// passes over those that do not.
		return nil
	}
	want := strconv.Itoa(f.Version())
	label := ""
	var by []string
	for i, l := range labels {
		if missed[i] || l == "" {
			continue
		}
		by = append(by, fmt.Sprintf("%s %q", f.cfg.Servers[i].URL, l))
		if label == "" {
			label = l
		}
	}
	for i, l := range labels {
		if !missed[i] && l != "" && l != label {
			return fmt.Errorf("%w: before any Publish every server must hold the weights it started with under one name, but %s: start them alike (SGLang: the same --weight-version, or none), or publish", ErrVersion, strings.Join(by, ", "))
		}
	}
	if n, err := strconv.Atoi(label); err == nil && label != want {
		if !f.cfg.AdoptVersion || n < 0 {
			return fmt.Errorf("%w: %s, but Config.Version is %s: start the servers from that version's checkpoint, set Config.Version, or take theirs (Config.AdoptVersion)", ErrVersion, strings.Join(by, ", "), want)
		}
		f.version.Store(int64(n))
	}
	f.initial.Store(&label)
	f.read.Store(true)
	return nil
}
