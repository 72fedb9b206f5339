// Package httpjson is the JSON-over-HTTP plumbing that the servers of
// packages serve (vLLM's and SGLang's APIs) and record (OpenAI's chat
// API) share: a refused request (Error), a request body read within a
// limit (ReadBody), an answer written (WriteJSON), and a request object
// decoded with errors that name the field and the JSON value expected
// (UnmarshalObject). What differs between their APIs — the error types,
// the messages, the error bodies — stays with each server.
package httpjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
)

// Error is a refused request: an HTTP status and the fields of the
// error object that OpenAI's, vLLM's and SGLang's servers answer with.
type Error struct {
	Status int
	// Type is the API's error type ("invalid_request_error",
	// "BadRequestError", …).
	Type string
	// Param names the request field at fault, if any.
	Param   string
	Message string
}

// Error is the message.
func (e *Error) Error() string { return e.Message }

// ReadBody reads r's body, of at most limit bytes. When it cannot, it
// returns the refusal, of error type typ: 413 with the message
// tooLarge (a format of the limit, "request body larger than %d bytes")
// for a larger body, 400 "reading the request body: …" otherwise.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64, typ, tooLarge string) ([]byte, *Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		return body, nil
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Type: typ, Message: fmt.Sprintf(tooLarge, tooBig.Limit)}
	}
	return nil, &Error{Status: http.StatusBadRequest, Type: typ, Message: fmt.Sprintf("reading the request body: %v", err)}
}

// WriteJSON answers with status and v as JSON, and a newline. A value
// that does not encode (a NaN) is a 500 whose body is failed(err)'s.
func WriteJSON(w http.ResponseWriter, status int, v any, failed func(err error) []byte) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = failed(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// UnmarshalObject decodes a JSON object into v, with errors that name
// the field and the JSON value expected rather than Go types ("n: want
// an integer in range, got JSON string"). Other decoding errors are
// wrapped as "JSON decode error: …" (a *json.SyntaxError among them).
func UnmarshalObject(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("the request body must be a JSON object")
	}
	if err := json.Unmarshal(trimmed, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "body"
			}
			return fmt.Errorf("%s: want %s, got JSON %s", field, JSONKind(te.Type), te.Value)
		}
		return fmt.Errorf("JSON decode error: %w", err)
	}
	return nil
}

// JSONKind names the JSON value a Go type takes ("a number", "a
// list", …).
func JSONKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}
