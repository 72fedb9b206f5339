package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// reloadError maps a failed reload to its status and message: 400 for a
// checkpoint that does not load or fit (the request's fault; the old
// weights keep serving), 503 once closed, 504 when the request's own
// timeout ran out, 400 "Client disconnected" when the client left.
func reloadError(err error, r *http.Request) *apiError {
	switch {
	case errors.Is(err, ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableError", Message: err.Error()}
	case r.Context().Err() != nil:
		return badRequest("", "Client disconnected")
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{Status: http.StatusGatewayTimeout, Type: "TimeoutError", Message: err.Error()}
	}
	return badRequest("", "%v", err)
}

// updateFromDiskRequest is SGLang's UpdateWeightFromDiskReqInput
// (sglang/srt/managers/io_struct.py). is_async, torch_empty_cache,
// recapture_cuda_graph, token_step, manifest and rid are accepted and
// have no effect here.
type updateFromDiskRequest struct {
	ModelPath        *string `json:"model_path"`
	LoadFormat       *string `json:"load_format"`
	AbortAllRequests bool    `json:"abort_all_requests"`
	WeightVersion    *string `json:"weight_version"`
	KeepPause        bool    `json:"keep_pause"`
	FlushCache       *bool   `json:"flush_cache"`
}

// updateResult is SGLang's UpdateWeightFromDiskReqOutput.
type updateResult struct {
	Success           bool   `json:"success"`
	Message           string `json:"message"`
	NumPausedRequests int    `json:"num_paused_requests"`
}

// handleUpdateWeightsFromDisk serves SGLang's POST
// /update_weights_from_disk: the checkpoint in model_path replaces the
// served weights, with weight_version as the new version (else the next
// integer; with EngineSGLang the version stays, as SGLang's does). abort_all_requests aborts
// the completions in flight instead of waiting for them; keep_pause
// leaves generation paused afterwards, until /continue_generation. The
// prefix cache always starts empty on new weights, whatever flush_cache
// says. Success: 200 {"success": true, "message": "Succeeded to update
// model weights.", "num_paused_requests": requests held back during the
// swap}; failure: 400 with success false and the error, the old weights
// still serving. Unlike SGLang, the served model name stays.
func (s *Server) handleUpdateWeightsFromDisk(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, writeSGLangError)
	if !ok {
		return
	}
	var req updateFromDiskRequest
	if err := unmarshalObject(body, &req); err != nil {
		writeSGLangError(w, badRequest("", "%v", err))
		return
	}
	if req.ModelPath == nil || *req.ModelPath == "" {
		writeSGLangError(w, badRequest("model_path", "model_path is required"))
		return
	}
	fail := func(status int, msg string) {
		writeJSON(w, status, updateResult{Message: msg})
	}
	if err := checkLoadFormat(req.LoadFormat); err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	o := reloadOptions{abort: req.AbortAllRequests, keepPause: req.KeepPause, keepVersion: s.lim.engine == EngineSGLang}
	if req.WeightVersion != nil {
		o.version = *req.WeightVersion
	}
	_, held, err := s.reload(r.Context(), *req.ModelPath, o)
	if err != nil {
		e := reloadError(err, r)
		fail(e.Status, fmt.Sprintf("Failed to update weights: %v.\nRolling back to original weights.", e.Message))
		return
	}
	writeJSON(w, http.StatusOK, updateResult{Success: true, Message: "Succeeded to update model weights.", NumPausedRequests: held})
}

// checkLoadFormat accepts the load formats that mean safetensors.
func checkLoadFormat(f *string) error {
	if f == nil || *f == "auto" || *f == "safetensors" {
		return nil
	}
	return fmt.Errorf("load_format %q is not supported: this server reads Hugging Face safetensors checkpoints (\"auto\" or \"safetensors\")", *f)
}

// collectiveRPCRequest is the body of vLLM's POST /collective_rpc
// (vllm/entrypoints/serve/dev/rpc/api_router.py).
type collectiveRPCRequest struct {
	Method  *string                    `json:"method"`
	Args    []json.RawMessage          `json:"args"`
	Kwargs  map[string]json.RawMessage `json:"kwargs"`
	Timeout *float64                   `json:"timeout"`
}

// handleCollectiveRPC serves vLLM's POST /collective_rpc for the two
// worker methods that reload weights from disk:
//
//   - "reload_weights" (GPUModelRunner.reload_weights): kwargs
//     {"weights_path": dir} (newest vLLM) or nothing (older vLLM: the
//     folder update_config set, else the one served). weights_iterator
//     must be null and is_checkpoint_format true; they may also come as
//     positional args in that order.
//   - "update_config" (Worker.update_config): args [{"model_config":
//     {"model": dir}}] (or kwargs {"overrides": …}) sets the folder the
//     next reload_weights reads; "load_config" may name load_format
//     "auto" or "safetensors". Other overrides are refused.
//
// Success answers 200 {"results": [null]}, one null per worker as vLLM.
// timeout (seconds) bounds the wait for other reloads and for the
// completions in flight (not the loading itself); past it the answer is
// a 504 and the old weights keep serving. Errors
// answer in FastAPI's shape {"detail": msg}: 400 for a missing or unknown
// method, bad arguments, or a checkpoint that fails to load (vLLM
// answers 500 for a worker's exception; the failure here is the
// request's, and the old weights keep serving), 503 once closed.
// Reloads wait for the completions in flight; vLLM's reload_weights
// swaps weights under them.
func (s *Server) handleCollectiveRPC(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, writeDetailError)
	if !ok {
		return
	}
	var req collectiveRPCRequest
	if err := unmarshalObject(body, &req); err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.Method == nil {
		writeDetail(w, http.StatusBadRequest, "Missing 'method' in request body")
		return
	}
	ctx := r.Context()
	if req.Timeout != nil && *req.Timeout > 0 && *req.Timeout < math.MaxInt64/float64(time.Second) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*req.Timeout*float64(time.Second)))
		defer cancel()
	}
	var err error
	switch *req.Method {
	case "reload_weights":
		err = s.rpcReloadWeights(ctx, req.Args, req.Kwargs)
	case "update_config":
		err = s.rpcUpdateConfig(req.Args, req.Kwargs)
	default:
		err = badRequest("method", "collective_rpc method %q is not supported by this server: use reload_weights or update_config", *req.Method)
	}
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = reloadError(err, r)
			if ae.Status == http.StatusGatewayTimeout && req.Timeout != nil {
				ae.Message = fmt.Sprintf("collective_rpc %s timed out after %gs: %s", *req.Method, *req.Timeout, ae.Message)
			}
		}
		writeDetail(w, ae.Status, ae.Message)
		return
	}
	writeJSON(w, http.StatusOK, map[string][]any{"results": {nil}})
}

// bindArgs matches positional args and kwargs to a Python signature's
// parameter names, as a call would.
func bindArgs(method string, params []string, args []json.RawMessage, kwargs map[string]json.RawMessage) (map[string]json.RawMessage, *apiError) {
	if len(args) > len(params) {
		return nil, badRequest("args", "%s() takes %d arguments but %d were given", method, len(params), len(args))
	}
	out := make(map[string]json.RawMessage, len(args)+len(kwargs))
	for i, a := range args {
		out[params[i]] = a
	}
	for k, v := range kwargs {
		known := false
		for _, p := range params {
			known = known || p == k
		}
		if !known {
			return nil, badRequest("kwargs", "%s() got an unexpected keyword argument '%s'", method, k)
		}
		if _, dup := out[k]; dup {
			return nil, badRequest("kwargs", "%s() got multiple values for argument '%s'", method, k)
		}
		out[k] = v
	}
	return out, nil
}

// isNull reports an absent or null JSON value.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// rpcReloadWeights is collective_rpc "reload_weights".
func (s *Server) rpcReloadWeights(ctx context.Context, args []json.RawMessage, kwargs map[string]json.RawMessage) error {
	bound, aerr := bindArgs("reload_weights", []string{"weights_iterator", "weights_path", "is_checkpoint_format"}, args, kwargs)
	if aerr != nil {
		return aerr
	}
	if !isNull(bound["weights_iterator"]) {
		return badRequest("weights_iterator", "reload_weights: weights_iterator cannot be sent over HTTP; pass weights_path")
	}
	if raw := bound["is_checkpoint_format"]; !isNull(raw) {
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil || !b {
			return badRequest("is_checkpoint_format", "reload_weights: is_checkpoint_format must be true: this server reads checkpoints as saved")
		}
	}
	dir := ""
	if raw := bound["weights_path"]; !isNull(raw) {
		if err := json.Unmarshal(raw, &dir); err != nil || dir == "" {
			return badRequest("weights_path", "reload_weights: weights_path must be a non-empty string")
		}
	} else {
		s.mu.Lock()
		dir = s.rpcPath
		s.mu.Unlock()
		if dir == "" {
			return badRequest("weights_path", "reload_weights: no checkpoint folder: the server was started without one; pass kwargs {\"weights_path\": dir}")
		}
	}
	if _, _, err := s.reload(ctx, dir, reloadOptions{}); err != nil {
		return fmt.Errorf("reload_weights: %w", err)
	}
	return nil
}

// rpcUpdateConfig is collective_rpc "update_config" (vllm/config,
// update_config: only "model_config" and "load_config" overrides).
func (s *Server) rpcUpdateConfig(args []json.RawMessage, kwargs map[string]json.RawMessage) error {
	bound, aerr := bindArgs("update_config", []string{"overrides"}, args, kwargs)
	if aerr != nil {
		return aerr
	}
	var overrides map[string]map[string]json.RawMessage
	if raw := bound["overrides"]; isNull(raw) || json.Unmarshal(raw, &overrides) != nil {
		return badRequest("overrides", "update_config: overrides must be an object such as {\"model_config\": {\"model\": dir}}")
	}
	path := ""
	for section, fields := range overrides {
		if section != "model_config" && section != "load_config" {
			return badRequest("overrides", "update_config: unknown config section %q: want model_config or load_config", section)
		}
		for key, raw := range fields {
			switch {
			case section == "model_config" && key == "model":
				if err := json.Unmarshal(raw, &path); err != nil || path == "" {
					return badRequest("overrides", "update_config: model_config.model must be a non-empty string")
				}
			case section == "load_config" && key == "load_format":
				var f string
				if err := json.Unmarshal(raw, &f); err != nil {
					return badRequest("overrides", "update_config: load_config.load_format must be a string")
				}
				if err := checkLoadFormat(&f); err != nil {
					return badRequest("overrides", "update_config: %v", err)
				}
			default:
				return badRequest("overrides", "update_config: %s.%s cannot be changed on this server", section, key)
			}
		}
	}
	if path != "" {
		s.mu.Lock()
		s.rpcPath = path
		s.mu.Unlock()
	}
	return nil
}

// handlePause serves vLLM's POST /pause (vllm/entrypoints/rl/online/api_router.py).
// Query: mode "abort" (default: in-flight requests answer finish_reason
// "abort"), "wait" (they finish) or "keep" (served as "wait": a
// continuous batch cannot be frozen here, so they finish before the
// pause takes hold rather than after /resume); the deprecated
// wait_for_inflight_requests=true means "wait" whatever mode says, as in
// vLLM (vllm/v1/engine/async_llm.py, AsyncLLM.pause_generation), and
// releases before mode read only it;
// clear_cache (default true) drops the prefix cache, except for "keep".
// New completions wait until /resume. It answers {"status": "paused"}
// once nothing runs, or 400 {"error": msg} for a bad parameter.
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bad := func(format string, a ...any) { writeStatusError(w, badRequest("", format, a...)) }
	waitInflight, err := queryBool(q.Get("wait_for_inflight_requests"), false)
	if err != nil {
		bad("wait_for_inflight_requests: %v", err)
		return
	}
	clearCache, err := queryBool(q.Get("clear_cache"), true)
	if err != nil {
		bad("clear_cache: %v", err)
		return
	}
	mode := pauseAbort
	switch m := q.Get("mode"); m {
	case "", "abort":
	case "wait":
		mode = pauseWait
	case "keep":
		mode, clearCache = pauseWait, false
	default:
		bad("Invalid mode %q: must be one of 'abort', 'wait', 'keep'", m)
		return
	}
	if waitInflight {
		// Whatever mode says (AsyncLLM.pause_generation), as releases
		// that read only this flag do.
		mode = pauseWait
	}
	if err := s.pause(r.Context(), mode, clearCache); err != nil {
		writeStatusError(w, pauseError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "paused"})
}

// pauseError is a pause that did not complete: 503 once closed, else
// 500 (the client left while the requests in flight drained; the pause
// stays in effect).
func pauseError(err error) *apiError {
	status := http.StatusInternalServerError
	if errors.Is(err, ErrClosed) {
		status = http.StatusServiceUnavailable
	}
	return &apiError{Status: status, Type: http.StatusText(status), Message: fmt.Sprintf("Failed to pause generation: %v", err)}
}

// queryBool parses a query flag as pydantic does (true/false, 1/0,
// yes/no, on/off, any case); empty means def.
func queryBool(v string, def bool) (bool, error) {
	switch strings.ToLower(v) {
	case "":
		return def, nil
	case "true", "1", "yes", "on", "t", "y":
		return true, nil
	case "false", "0", "no", "off", "f", "n":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", v)
}

// handleResume serves vLLM's POST /resume: {"status": "resumed"}.
func (s *Server) handleResume(w http.ResponseWriter, _ *http.Request) {
	s.resume()
	writeJSON(w, http.StatusOK, map[string]string{"status": "resumed"})
}

// handlePauseGeneration serves SGLang's POST /pause_generation with an
// optional body {"mode": "abort" | "retract" | "in_place"}, default
// "abort". "abort" aborts the completions in flight (finish_reason
// "abort"); "retract" stops them and starts them over from their prompts
// once generation continues, so that their tokens come from the weights
// served then (SGLang keeps their tokens so far and recomputes the cache;
// that would mix weight versions); "in_place" lets them finish first, as
// vLLM's "keep" here. New completions wait until /continue_generation.
// Answers {"message": "Generation paused successfully.", "status": "ok"}.
func (s *Server) handlePauseGeneration(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, writeSGLangError)
	if !ok {
		return
	}
	var req struct {
		Mode *string `json:"mode"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := unmarshalObject(body, &req); err != nil {
			writeSGLangError(w, badRequest("", "%v", err))
			return
		}
	}
	mode := pauseAbort
	if req.Mode != nil {
		switch *req.Mode {
		case "abort":
		case "retract":
			mode = pauseRetract
		case "in_place":
			mode = pauseWait
		default:
			writeSGLangError(w, badRequest("mode", "Invalid mode %q: must be one of 'abort', 'retract', 'in_place'", *req.Mode))
			return
		}
	}
	if err := s.pause(r.Context(), mode, false); err != nil {
		writeSGLangError(w, pauseError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": "Generation paused successfully.", "status": "ok"})
}

// handleContinueGeneration serves SGLang's POST /continue_generation; its
// body (torch_empty_cache) has no effect here. Answers {"message":
// "Generation continued successfully.", "status": "ok"}.
func (s *Server) handleContinueGeneration(w http.ResponseWriter, _ *http.Request) {
	s.resume()
	writeJSON(w, http.StatusOK, map[string]string{"message": "Generation continued successfully.", "status": "ok"})
}

// handleResetPrefixCache serves vLLM's POST /reset_prefix_cache: the
// prefix cache is dropped (generations in flight are unaffected); 200
// with an empty body.
func (s *Server) handleResetPrefixCache(w http.ResponseWriter, _ *http.Request) {
	s.clearPrefix()
	w.WriteHeader(http.StatusOK)
}

// handleFlushCache serves SGLang's GET|POST /flush_cache: the prefix
// cache is dropped, even with requests running (SGLang refuses then); 200
// with SGLang's plain-text answer.
func (s *Server) handleFlushCache(w http.ResponseWriter, _ *http.Request) {
	s.clearPrefix()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n"))
}
