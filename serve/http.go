package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// errorWriter answers a refused request in an endpoint's own error shape.
type errorWriter func(w http.ResponseWriter, e *apiError)

// readBody reads a request body of at most maxBodyBytes; when it cannot,
// it answers with fail and reports false.
func readBody(w http.ResponseWriter, r *http.Request, fail errorWriter) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(w, &apiError{status: http.StatusRequestEntityTooLarge, typ: "BadRequestError", msg: fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)})
			return nil, false
		}
		fail(w, badRequest("", "reading the request body: %v", err))
		return nil, false
	}
	return body, true
}

// writeJSON answers with v as JSON; a value that does not encode (a NaN)
// is a 500.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data, _ = json.Marshal(map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("encoding the response: %v", err), "type": "InternalServerError", "param": nil, "code": status,
		}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// writeOpenAIError answers with vLLM's ErrorResponse
// (vllm/entrypoints/openai/engine/protocol.py):
// {"error": {"message", "type", "param", "code"}}.
func writeOpenAIError(w http.ResponseWriter, e *apiError) {
	var param any
	if e.param != "" {
		param = e.param
	}
	writeJSON(w, e.status, map[string]any{"error": map[string]any{
		"message": e.msg, "type": e.typ, "param": param, "code": e.status,
	}})
}

// writeSGLangError answers with SGLang's flat validation error
// {"object": "error", "message", "type": "Bad Request", "param": null, "code"}.
func writeSGLangError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, map[string]any{
		"object": "error", "message": e.msg, "type": http.StatusText(e.status), "param": nil, "code": e.status,
	})
}

// writeDetail answers with FastAPI's HTTPException body {"detail": msg}.
func writeDetail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"detail": msg})
}

// writeDetailError is writeDetail as an errorWriter.
func writeDetailError(w http.ResponseWriter, e *apiError) { writeDetail(w, e.status, e.msg) }

// writeStatusError answers with vLLM's RL routes' {"error": msg}.
func writeStatusError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, map[string]string{"error": e.msg})
}
