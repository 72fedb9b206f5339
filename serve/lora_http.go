package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// vllmLoadRequest is vLLM's LoadLoRAAdapterRequest
// (vllm/entrypoints/serve/lora/protocol.py): lora_name and lora_path are
// required strings, load_inplace (newer releases) replaces an adapter
// loaded under the name.
type vllmLoadRequest struct {
	LoraName    *string `json:"lora_name"`
	LoraPath    *string `json:"lora_path"`
	LoadInplace *bool   `json:"load_inplace"`
}

// vllmUnloadRequest is vLLM's UnloadLoRAAdapterRequest; lora_int_id is
// accepted and has no effect.
type vllmUnloadRequest struct {
	LoraName  *string `json:"lora_name"`
	LoraIntID *int64  `json:"lora_int_id"`
}

// adapterRequest is a decoded load or unload request.
type adapterRequest struct {
	name, path string
	inplace    bool
}

// invalidUserInput is vLLM's 400 for an adapter request it refuses
// (serving.py, _check_load_lora_adapter_request).
func invalidUserInput(msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "InvalidUserInput", Message: msg}
}

// fieldRequired is the refusal of a body without a required field, as
// the validation of a pydantic request model answers it.
func fieldRequired(field string) *apiError {
	return badRequest(field, "%s: Field required", field)
}

// decodeVLLMLoad parses POST /v1/load_lora_adapter's body with vLLM's
// refusals: a missing or null field as a validation error, an empty one
// as InvalidUserInput.
func decodeVLLMLoad(body []byte) (adapterRequest, *apiError) {
	var req vllmLoadRequest
	if err := unmarshalObject(body, &req); err != nil {
		return adapterRequest{}, badRequest("", "%v", err)
	}
	switch {
	case req.LoraName == nil:
		return adapterRequest{}, fieldRequired("lora_name")
	case req.LoraPath == nil:
		return adapterRequest{}, fieldRequired("lora_path")
	case *req.LoraName == "" || *req.LoraPath == "":
		return adapterRequest{}, invalidUserInput("Both 'lora_name' and 'lora_path' must be provided.")
	}
	return adapterRequest{name: *req.LoraName, path: *req.LoraPath, inplace: req.LoadInplace != nil && *req.LoadInplace}, nil
}

// decodeVLLMUnload parses POST /v1/unload_lora_adapter's body.
func decodeVLLMUnload(body []byte) (adapterRequest, *apiError) {
	var req vllmUnloadRequest
	if err := unmarshalObject(body, &req); err != nil {
		return adapterRequest{}, badRequest("", "%v", err)
	}
	switch {
	case req.LoraName == nil:
		return adapterRequest{}, fieldRequired("lora_name")
	case *req.LoraName == "":
		return adapterRequest{}, invalidUserInput("'lora_name' needs to be provided to unload a LoRA adapter.")
	}
	return adapterRequest{name: *req.LoraName}, nil
}

// adapterError maps a failed LoadAdapter or UnloadAdapter to vLLM's
// answer (vllm/entrypoints/openai/models/serving.py).
func adapterError(err error, req adapterRequest, r *http.Request) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, errAdapterArgs):
		return invalidUserInput(err.Error())
	case errors.Is(err, ErrAdapterLoaded):
		return invalidUserInput(fmt.Sprintf("The lora adapter '%s' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.", req.name))
	case errors.Is(err, ErrUnknownAdapter):
		return &apiError{Status: http.StatusNotFound, Type: "NotFoundError", Message: fmt.Sprintf("The lora adapter '%s' cannot be found.", req.name)}
	case adapterNotFound(err):
		// LoRAAdapterNotFoundError, a VLLMNotFoundError.
		return &apiError{Status: http.StatusNotFound, Type: "NotFoundError", Message: fmt.Sprintf("Loading lora %s failed: No adapter found for %s", req.name, req.path)}
	}
	return reloadError(err, r)
}

// handleVLLMLoadAdapter serves vLLM's POST /v1/load_lora_adapter
// {"lora_name", "lora_path", "load_inplace"} (vLLM serves it with
// VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; vllm/entrypoints/serve/lora/
// api_router.py): 200 with the text "Success: LoRA adapter '<name>' added
// successfully."; refusals in vLLM's ErrorResponse: 400 InvalidUserInput
// for an empty field or a name already loaded (unless load_inplace), 404
// NotFoundError "Loading lora <name> failed: No adapter found for <path>"
// for a folder without an adapter, 400 for an adapter that does not load
// or fit the served model (vLLM answers 500 for a failure of its engine;
// here it is the request's), 503 once closed.
func (s *Server) handleVLLMLoadAdapter(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, writeOpenAIError)
	if !ok {
		return
	}
	req, aerr := decodeVLLMLoad(body)
	if aerr != nil {
		writeOpenAIError(w, aerr)
		return
	}
	if err := s.loadAdapter(r.Context(), req.name, req.path, req.inplace); err != nil {
		writeOpenAIError(w, adapterError(err, req, r))
		return
	}
	writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", req.name))
}

// handleVLLMUnloadAdapter serves vLLM's POST /v1/unload_lora_adapter
// {"lora_name"}: 200 with "Success: LoRA adapter '<name>' removed
// successfully."; 400 InvalidUserInput for an empty name, 404
// NotFoundError "The lora adapter '<name>' cannot be found." for a name
// not loaded. The requests in flight on the adapter finish first.
func (s *Server) handleVLLMUnloadAdapter(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, writeOpenAIError)
	if !ok {
		return
	}
	req, aerr := decodeVLLMUnload(body)
	if aerr != nil {
		writeOpenAIError(w, aerr)
		return
	}
	if err := s.UnloadAdapter(r.Context(), req.name); err != nil {
		writeOpenAIError(w, adapterError(err, req, r))
		return
	}
	writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' removed successfully.", req.name))
}

// writeText answers 200 with a plain-text body, as vLLM's adapter
// endpoints do.
func writeText(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(text))
}

// sglangLoadRequest is SGLang's LoadLoRAAdapterReqInput
// (python/sglang/srt/managers/io_struct.py); pinned and lora_id are
// accepted and have no effect (this server never evicts an adapter).
type sglangLoadRequest struct {
	LoraName *string `json:"lora_name"`
	LoraPath *string `json:"lora_path"`
	Pinned   *bool   `json:"pinned"`
	LoraID   *string `json:"lora_id"`
}

// sglangUnloadRequest is SGLang's UnloadLoRAAdapterReqInput.
type sglangUnloadRequest struct {
	LoraName *string `json:"lora_name"`
	LoraID   *string `json:"lora_id"`
}

// loraUpdateResult is SGLang's LoRAUpdateOutput, the answer of both
// endpoints: loaded_adapters maps the adapters loaded afterwards to their
// folders (null when the request was refused before reaching them).
type loraUpdateResult struct {
	Success        bool              `json:"success"`
	ErrorMessage   string            `json:"error_message"`
	LoadedAdapters map[string]string `json:"loaded_adapters"`
}

// decodeSGLangLoad parses POST /load_lora_adapter's body; a missing or
// null field is a validation error.
func decodeSGLangLoad(body []byte) (adapterRequest, *apiError) {
	var req sglangLoadRequest
	if err := unmarshalObject(body, &req); err != nil {
		return adapterRequest{}, badRequest("", "%v", err)
	}
	switch {
	case req.LoraName == nil:
		return adapterRequest{}, fieldRequired("lora_name")
	case req.LoraPath == nil:
		return adapterRequest{}, fieldRequired("lora_path")
	}
	return adapterRequest{name: *req.LoraName, path: *req.LoraPath}, nil
}

// decodeSGLangUnload parses POST /unload_lora_adapter's body.
func decodeSGLangUnload(body []byte) (adapterRequest, *apiError) {
	var req sglangUnloadRequest
	if err := unmarshalObject(body, &req); err != nil {
		return adapterRequest{}, badRequest("", "%v", err)
	}
	if req.LoraName == nil {
		return adapterRequest{}, fieldRequired("lora_name")
	}
	return adapterRequest{name: *req.LoraName}, nil
}

// sglangAdapterResult maps the outcome of a load or unload to SGLang's
// status and LoRAUpdateOutput (tokenizer_control_mixin.py and
// lora/lora_manager.py): 200 with success true, else 400 with
// success false and SGLang's message (503 once closed, 504 when the
// request's own time ran out).
func (s *Server) sglangAdapterResult(err error, req adapterRequest, unload bool, r *http.Request) (int, loraUpdateResult) {
	s.mu.Lock()
	loaded := s.loadedAdaptersLocked()
	names := s.adapterNamesLocked()
	s.mu.Unlock()
	if err == nil {
		return http.StatusOK, loraUpdateResult{Success: true, LoadedAdapters: loaded}
	}
	status := http.StatusBadRequest
	res := loraUpdateResult{LoadedAdapters: loaded}
	switch {
	case errors.Is(err, ErrClosed):
		status, res.ErrorMessage = http.StatusServiceUnavailable, err.Error()
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
		status, res.ErrorMessage = http.StatusGatewayTimeout, err.Error()
	case errors.Is(err, ErrAdapterLoaded):
		res.ErrorMessage = fmt.Sprintf("Failed to load LoRA adapter %s because it is already loaded", req.name)
	case errors.Is(err, ErrUnknownAdapter) && unload:
		// LoRARegistry.unregister's ValueError, before the backend.
		res.ErrorMessage = fmt.Sprintf("LoRA with name %s does not exist. Loaded LoRAs: %s", req.name, pyKeys(names))
		res.LoadedAdapters = nil
	default:
		res.ErrorMessage = err.Error()
	}
	return status, res
}

// handleSGLangLoadAdapter serves SGLang's POST /load_lora_adapter
// {"lora_name", "lora_path", "pinned"} (http_server.py): 200 {"success":
// true, "error_message": "", "loaded_adapters": {name: folder}}, or 400
// with success false and the reason — SGLang's "Failed to load LoRA
// adapter <name> because it is already loaded" for a duplicate name, the
// load error for a folder without an adapter or one that does not fit;
// a body without lora_name or lora_path is refused as SGLang's
// validation error. Any rank is taken (SGLang refuses ranks above its
// --max-lora-rank).
func (s *Server) handleSGLangLoadAdapter(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, writeSGLangError)
	if !ok {
		return
	}
	req, aerr := decodeSGLangLoad(body)
	if aerr != nil {
		writeSGLangError(w, aerr)
		return
	}
	err := s.loadAdapter(r.Context(), req.name, req.path, false)
	status, res := s.sglangAdapterResult(err, req, false, r)
	writeJSON(w, status, res)
}

// handleSGLangUnloadAdapter serves SGLang's POST /unload_lora_adapter
// {"lora_name"}: 200 with success true once the requests in flight on it
// have finished, as SGLang waits for them; 400 {"success": false,
// "error_message": "LoRA with name <name> does not exist. Loaded LoRAs:
// …", "loaded_adapters": null} for a name not loaded.
func (s *Server) handleSGLangUnloadAdapter(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, writeSGLangError)
	if !ok {
		return
	}
	req, aerr := decodeSGLangUnload(body)
	if aerr != nil {
		writeSGLangError(w, aerr)
		return
	}
	err := s.UnloadAdapter(r.Context(), req.name)
	status, res := s.sglangAdapterResult(err, req, true, r)
	writeJSON(w, status, res)
}

// parseLoraPath reads /generate's lora_path for n prompts: absent, null
// or "" is the base model; a string names a loaded adapter; a list gives
// one entry per prompt, which must all be the same here (one
// Model.Generate per request).
func parseLoraPath(raw json.RawMessage, n int) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	shape := badRequest("lora_path", "lora_path must be a string, null or a list of them")
	if raw[0] != '[' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return "", shape
		}
		return name, nil
	}
	var list []*string
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", shape
	}
	if len(list) != n || n == 0 {
		return "", badRequest("lora_path", "lora_path has %d entries for %d prompts", len(list), n)
	}
	name := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for _, p := range list {
		if name(p) != name(list[0]) {
			return "", badRequest("lora_path", "lora_path: different adapters within one request are not supported by this server; send one request per adapter")
		}
	}
	return name(list[0]), nil
}
