package httpjson

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnmarshalObject(t *testing.T) {
	type req struct {
		N     *int      `json:"n"`
		Stop  []string  `json:"stop"`
		Temp  *float64  `json:"temperature"`
		Inner *struct{} `json:"inner"`
	}
	for _, tc := range []struct {
		body, want string
	}{
		{`{"n": 2}`, ""},
		{`  {"stop": ["a"]} `, ""},
		{``, "the request body must be a JSON object"},
		{`[1]`, "the request body must be a JSON object"},
		{`{"n": "2"}`, "n: want an integer in range, got JSON string"},
		{`{"n": 1e40}`, "n: want an integer in range, got JSON number 1e40"},
		{`{"stop": "a"}`, "stop: want a list, got JSON string"},
		{`{"temperature": true}`, "temperature: want a number, got JSON bool"},
		{`{"inner": 3}`, "inner: want an object, got JSON number"},
		{`{"n": 2`, "JSON decode error: unexpected end of JSON input"},
		{`{"n": x}`, "JSON decode error: invalid character 'x'"},
	} {
		var r req
		err := UnmarshalObject([]byte(tc.body), &r)
		if tc.want == "" {
			assert.NoError(t, err, tc.body)
			continue
		}
		require.Error(t, err, tc.body)
		assert.Contains(t, err.Error(), tc.want, tc.body)
	}
	var se *json.SyntaxError
	assert.True(t, errors.As(UnmarshalObject([]byte(`{"n": x}`), &struct{}{}), &se), "a syntax error stays reachable")
	assert.Equal(t, int64(7), se.Offset)
}

func TestReadBody(t *testing.T) {
	read := func(body string, limit int64) ([]byte, *Error) {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		return ReadBody(httptest.NewRecorder(), r, limit, "bad_request", "body over %d bytes")
	}
	b, aerr := read("hello", 5)
	require.Nil(t, aerr)
	assert.Equal(t, "hello", string(b))
	_, aerr = read("hello!", 5)
	require.NotNil(t, aerr)
	assert.Equal(t, &Error{Status: http.StatusRequestEntityTooLarge, Type: "bad_request", Message: "body over 5 bytes"}, aerr)
	r := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader("he"), failing{}))
	_, aerr = ReadBody(httptest.NewRecorder(), r, 5, "bad_request", "%d")
	require.NotNil(t, aerr)
	assert.Equal(t, http.StatusBadRequest, aerr.Status)
	assert.Equal(t, "reading the request body: broken pipe", aerr.Error())
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestWriteJSON(t *testing.T) {
	w := httptest.NewRecorder()
	WriteJSON(w, http.StatusCreated, map[string]int{"a": 1}, nil)
	assert.Equal(t, http.StatusCreated, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Equal(t, "{\"a\":1}\n", w.Body.String())

	w = httptest.NewRecorder()
	WriteJSON(w, http.StatusOK, math.NaN(), func(err error) []byte { return []byte(`{"failed":true}`) })
	assert.Equal(t, http.StatusInternalServerError, w.Code, "a NaN does not encode")
	assert.Equal(t, "{\"failed\":true}\n", w.Body.String())
}
