package serve

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentrl/agentrl/internal/httpjson"
)

// errorWriter answers a refused request in an endpoint's own error shape.
type errorWriter func(w http.ResponseWriter, e *apiError)

// readBody reads a request body of at most maxBodyBytes; when it cannot,
// it answers with fail and reports false.
func readBody(w http.ResponseWriter, r *http.Request, fail errorWriter) ([]byte, bool) {
	body, aerr := httpjson.ReadBody(w, r, maxBodyBytes, "BadRequestError", "request body larger than %d bytes")
	if aerr != nil {
		fail(w, aerr)
		return nil, false
	}
	return body, true
}

// writeJSON answers with v as JSON; a value that does not encode (a NaN)
// is a 500.
func writeJSON(w http.ResponseWriter, status int, v any) {
	httpjson.WriteJSON(w, status, v, func(err error) []byte {
		data, _ := json.Marshal(map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("encoding the response: %v", err), "type": "InternalServerError", "param": nil, "code": http.StatusInternalServerError,
		}})
		return data
	})
}

// writeOpenAIError answers with vLLM's ErrorResponse
// (vllm/entrypoints/openai/engine/protocol.py):
// {"error": {"message", "type", "param", "code"}}.
func writeOpenAIError(w http.ResponseWriter, e *apiError) {
	var param any
	if e.Param != "" {
		param = e.Param
	}
	writeJSON(w, e.Status, map[string]any{"error": map[string]any{
		"message": e.Message, "type": e.Type, "param": param, "code": e.Status,
	}})
}

// writeSGLangError answers with SGLang's flat validation error
// {"object": "error", "message", "type": "Bad Request", "param": null, "code"}.
func writeSGLangError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, map[string]any{
		"object": "error", "message": e.Message, "type": http.StatusText(e.Status), "param": nil, "code": e.Status,
	})
}

// writeDetail answers with FastAPI's HTTPException body {"detail": msg}.
func writeDetail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"detail": msg})
}

// writeDetailError is writeDetail as an errorWriter.
func writeDetailError(w http.ResponseWriter, e *apiError) { writeDetail(w, e.Status, e.Message) }

// writeStatusError answers with vLLM's RL routes' {"error": msg}.
func writeStatusError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, map[string]string{"error": e.Message})
}
