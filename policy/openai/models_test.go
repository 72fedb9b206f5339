package openai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vllmModels is vLLM's GET /v1/models with a LoRA adapter loaded
// (vllm/entrypoints/openai/models/serving.py, show_available_models): the
// served model's card first, with its max_model_len, then the adapter's,
// with the served name as parent and no length.
const vllmModels = `{"object":"list","data":[
 {"id":"Qwen/Qwen3-4B","object":"model","created":1,"owned_by":"vllm","root":"/ckpt/qwen3-4b","parent":null,"max_model_len":32768,"permission":[{}]},
 {"id":"pol-v00000003","object":"model","created":2,"owned_by":"vllm","root":"/shared/v00000003","parent":"Qwen/Qwen3-4B","max_model_len":null,"permission":[{}]}]}`

// sglangModels is SGLang's (http_server.py, available_models): one card
// whose id and root are the served name, max_model_len the context.
const sglangModels = `{"object":"list","data":[{"id":"/models/qwen","object":"model","created":1,"owned_by":"sglang","root":"/models/qwen","max_model_len":40960}]}`

func TestParseModels(t *testing.T) {
	for _, c := range []struct {
		name   string
		body   string
		cards  Models
		served []string
		// maxLen[model] is MaxModelLen(model).
		maxLen map[string]int
		err    string
	}{
		{name: "vllm with an adapter", body: vllmModels,
			cards: Models{{ID: "Qwen/Qwen3-4B", Root: "/ckpt/qwen3-4b", MaxModelLen: 32768},
				{ID: "pol-v00000003", Root: "/shared/v00000003", Parent: "Qwen/Qwen3-4B"}},
			served: []string{"Qwen/Qwen3-4B"},
			// The adapter's card has no length: the served model's is it.
			maxLen: map[string]int{"": 32768, "Qwen/Qwen3-4B": 32768, "pol-v00000003": 32768, "other": 32768}},
		{name: "sglang", body: sglangModels,
			cards:  Models{{ID: "/models/qwen", Root: "/models/qwen", MaxModelLen: 40960}},
			served: []string{"/models/qwen"}, maxLen: map[string]int{"": 40960}},
		{name: "two served models", body: `{"data":[{"id":"a","max_model_len":10},{"id":"b","max_model_len":20}]}`,
			cards: Models{{ID: "a", MaxModelLen: 10}, {ID: "b", MaxModelLen: 20}}, served: []string{"a", "b"},
			maxLen: map[string]int{"": 10, "b": 20, "a": 10}},
		{name: "no length", body: `{"data":[{"id":"a"}]}`, cards: Models{{ID: "a"}}, served: []string{"a"}, maxLen: map[string]int{"a": 0}},
		{name: "empty list", body: `{"object":"list","data":[]}`, cards: Models{}, maxLen: map[string]int{"": 0}},
		{name: "not an object", body: `[]`, err: "want a JSON object"},
		{name: "no data", body: `{"object":"list"}`, err: `no "data" list`},
		{name: "data not a list", body: `{"data":{}}`, err: "cannot unmarshal"},
		{name: "no id", body: `{"data":[{"max_model_len":5}]}`, err: "card 0 has no id"},
		{name: "empty id", body: `{"data":[{"id":""}]}`, err: "card 0 has no id"},
		{name: "length not a number", body: `{"data":[{"id":"a","max_model_len":"big"}]}`, err: `card "a": max_model_len "big" is not a positive integer`},
		{name: "length zero", body: `{"data":[{"id":"a","max_model_len":0}]}`, err: "not a positive integer"},
		{name: "length negative", body: `{"data":[{"id":"a","max_model_len":-4}]}`, err: "not a positive integer"},
		{name: "length fractional", body: `{"data":[{"id":"a","max_model_len":4.5}]}`, err: "not a positive integer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := ParseModels([]byte(c.body))
			if c.err != "" {
				require.ErrorIs(t, err, ErrBadResponse)
				assert.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.cards, m)
			assert.Equal(t, c.served, m.Served())
			for model, want := range c.maxLen {
				assert.Equal(t, want, m.MaxModelLen(model), "MaxModelLen(%q)", model)
			}
		})
	}
}

func FuzzParseModels(f *testing.F) {
	f.Add([]byte(vllmModels))
	f.Add([]byte(sglangModels))
	f.Add([]byte(`{"data":[{"id":"a","max_model_len":1e3}]}`))
	f.Add([]byte(`{"data":[{"id":"a","parent":"b","max_model_len":null}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := ParseModels(body)
		if err != nil {
			return
		}
		for _, c := range m {
			if c.ID == "" || c.MaxModelLen < 0 {
				t.Fatalf("card %+v", c)
			}
		}
		if n := m.MaxModelLen(""); n < 0 {
			t.Fatalf("MaxModelLen %d", n)
		}
		for _, id := range m.Served() {
			if id == "" {
				t.Fatal("empty served name")
			}
		}
	})
}
