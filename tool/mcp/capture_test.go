package mcp

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFindResult: the result of the response to an id, in a JSON body or
// in server-sent events (data over several lines, CRLF line ends, other
// messages before it).
func TestFindResult(t *testing.T) {
	for _, tc := range []struct {
		name, body, id, want string
	}{
		{"json", `{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"b"},{"name":"a"}]}}`, "3", `{"tools":[{"name":"b"},{"name":"a"}]}`},
		{"json other id", `{"jsonrpc":"2.0","id":4,"result":{}}`, "3", ""},
		{"json string id", `{"jsonrpc":"2.0","id":"x","result":[1]}`, `"x"`, `[1]`},
		{"json error", `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}`, "3", ""},
		{"sse", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n" +
			"event: message\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\n" + "data: \"result\":{\"z\":1,\"a\":2}}\n\n", "3", `{"z":1,"a":2}`},
		{"sse crlf, no final blank line", "event: message\r\ndata: {\"id\":3,\"result\":{\"k\":true}}\r\n", "3", `{"k":true}`},
		{"sse without the answer", "event: message\ndata: {\"id\":2,\"result\":{}}\n\n", "3", ""},
		{"empty", "", "3", ""},
		{"garbage", "data: {{{\n\n", "3", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, string(findResult([]byte(tc.body), tc.id)))
		})
	}
}

func TestCompactID(t *testing.T) {
	for raw, want := range map[string]string{`3`: `3`, `3.0`: `3`, ` 12 `: `12`, `"a"`: `"a"`, `2.5`: `2.5`, `{`: ``, `null`: `null`} {
		assert.Equal(t, want, compactID(json.RawMessage(raw)), raw)
	}
}

func TestObjectArgs(t *testing.T) {
	for in, want := range map[string]string{``: `{}`, `  `: `{}`, ` {"a": 1} `: `{"a": 1}`} {
		got, err := objectArgs(json.RawMessage(in))
		require.NoError(t, err, in)
		assert.Equal(t, want, string(got))
	}
	for _, in := range []string{`[]`, `"{}"`, `{"a":`, `1`, `null`, `{} {}`} {
		_, err := objectArgs(json.RawMessage(in))
		assert.Error(t, err, in)
	}
}

// FuzzFindResult: no body makes the parser panic or hang, and what it
// finds is valid JSON.
func FuzzFindResult(f *testing.F) {
	f.Add([]byte(`{"id":1,"result":{}}`), "1")
	f.Add([]byte("data: {\"id\":1,\n\ndata: \"result\":[]}\n\n"), "1")
	f.Add([]byte("event: x\r\ndata:{\"id\":\"a\",\"result\":0}"), `"a"`)
	f.Fuzz(func(t *testing.T, body []byte, id string) {
		if r := findResult(body, id); r != nil && !json.Valid(r) {
			t.Fatalf("invalid JSON %q", r)
		}
	})
}

// FuzzObjectArgs: whatever the model writes, arguments are refused or a
// valid JSON object.
func FuzzObjectArgs(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"a":[1,2]}`, `[]`, `"x"`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := objectArgs(in)
		if err != nil {
			return
		}
		var m map[string]any
		if json.Unmarshal(out, &m) != nil {
			t.Fatalf("accepted %q, not an object", in)
		}
	})
}
