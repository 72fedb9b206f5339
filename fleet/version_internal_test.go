package fleet

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseVersion: the weight version of a GET /model_info or
// /get_weight_version answer, as SGLang writes it (a string; "default"
// before any update) and as a number would read.
func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		body, want, err string
	}{
		{`{"model_path":"/m","weight_version":"default","is_generation":true}`, "default", ""},
		{`{"weight_version":"12"}`, "12", ""},
		{`{"weight_version":12}`, "12", ""},
		{`{"weight_version":null}`, "", ""},
		{`{"model_path":"/m"}`, "", ""},
		{`{"weight_version":[1]}`, "", "neither a string nor a number"},
		{`{"weight_version":true}`, "", "neither a string nor a number"},
		{`[]`, "", "is not a JSON object"},
		{`Internal Server Error`, "", "is not a JSON object"},
	} {
		got, err := parseVersion("/model_info", []byte(c.body))
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.body)
			continue
		}
		require.NoError(t, err, c.body)
		assert.Equal(t, c.want, got, c.body)
	}
}

// TestRouteMissing: FastAPI's 404 for a path it does not route, and not
// the 404 of a route that exists (vLLM's unload of an unknown adapter).
func TestRouteMissing(t *testing.T) {
	assert.True(t, routeMissing(http.StatusNotFound, []byte(`{"detail":"Not Found"}`)))
	assert.True(t, routeMissing(http.StatusNotFound, []byte(`{"error":{"message":"Invalid URL (POST /collective_rpc)","type":"NotFoundError","param":null,"code":404}}`)))
	assert.False(t, routeMissing(http.StatusNotFound, []byte(`{"error":{"message":"The lora adapter 'x' cannot be found.","type":"NotFoundError","code":404}}`)))
	assert.False(t, routeMissing(http.StatusNotFound, []byte(`404 page not found`)))
	assert.False(t, routeMissing(http.StatusBadRequest, []byte(`{"detail":"Not Found"}`)))
	assert.False(t, routeMissing(http.StatusOK, []byte(`{"detail":"Not Found"}`)))
}

func FuzzParseVersion(f *testing.F) {
	f.Add([]byte(`{"weight_version":"default"}`))
	f.Add([]byte(`{"weight_version":3}`))
	f.Add([]byte(`{"weight_version":1e400}`))
	f.Add([]byte(`{"detail":"Not Found"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := parseVersion("/model_info", body)
		if err != nil && v != "" {
			t.Fatalf("version %q with error %v", v, err)
		}
		_ = routeMissing(http.StatusNotFound, body)
	})
}
