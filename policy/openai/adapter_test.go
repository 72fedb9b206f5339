package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/openai"
)

// loraServer answers both sampling APIs as vLLM and SGLang do for LoRA
// adapters: a completion names the adapter it was asked for in "model"
// (or echo, when set), a request for an adapter it does not hold is
// refused with the engine's answer (vLLM: 404 NotFoundError; SGLang: 400
// "not loaded"). It records the "model" and "lora_path" of each request.
type loraServer struct {
	loaded map[string]bool // adapters held; "" is the base model
	echo   string
	mu     sync.Mutex
	seen   []string
	calls  atomic.Int64
}

func (f *loraServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/completions":
		name, _ := body["model"].(string)
		f.record(name)
		if name != "base" && !f.loaded[name] {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error":{"message":"The model %s does not exist.","type":"NotFoundError","param":"model","code":404}}`, "`"+name+"`")
			return
		}
		if f.echo != "" {
			name = f.echo
		}
		fmt.Fprintf(w, `{"model":%q,"choices":[{"index":0,"token_ids":[7],"logprobs":{"tokens":["token_id:7"],"token_logprobs":[-0.5]},"finish_reason":"length"}]}`, name)
	case "/generate":
		name, _ := body["lora_path"].(string)
		if _, ok := body["lora_path"]; !ok {
			name = "<absent>"
		}
		f.record(name)
		if name != "<absent>" && !f.loaded[name] {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":"The following requested LoRA adapters are not loaded: %s\nLoaded adapters: odict_keys([])."}}`, name)
			return
		}
		fmt.Fprint(w, sglangOK("0"))
	default:
		http.NotFound(w, r)
	}
}

func (f *loraServer) record(name string) {
	f.mu.Lock()
	f.seen = append(f.seen, name)
	f.mu.Unlock()
}

func (f *loraServer) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// TestAdapterRequests: the adapter Config.Adapter names is sent as
// "model" to /v1/completions (in place of Config.Model) and as
// "lora_path" to /generate; "" means the base model (Config.Model, and no
// lora_path at all).
func TestAdapterRequests(t *testing.T) {
	for _, tc := range []struct {
		api      openai.API
		adapter  string
		want     string
		sgReq    bool
		loadedAs string
	}{
		{openai.APICompletions, "pol-v00000003", "pol-v00000003", false, "pol-v00000003"},
		{openai.APICompletions, "", "base", false, ""},
		{openai.APISGLangGenerate, "pol-v00000003", "pol-v00000003", true, "pol-v00000003"},
		{openai.APISGLangGenerate, "", "<absent>", true, ""},
	} {
		t.Run(string(tc.api)+"/"+tc.adapter, func(t *testing.T) {
			f := &loraServer{loaded: map[string]bool{tc.loadedAs: true}}
			srv := httptest.NewServer(f)
			defer srv.Close()
			s := newSampler(t, []string{srv.URL}, func(c *openai.Config) {
				c.API, c.Model = tc.api, "base"
				c.Adapter = func() string { return tc.adapter }
			})
			r := req
			if tc.sgReq {
				r = sgReq
			}
			_, err := s.Generate(context.Background(), []lm.GenerateRequest{r, r})
			require.NoError(t, err)
			assert.Equal(t, []string{tc.want, tc.want}, f.names())
		})
	}
}

// TestAdapterFailover: a server that does not hold the adapter (it
// failed to load it) is passed over for one that does, on either API;
// when none holds it the error wraps ErrWeightVersion and quotes the
// engine's refusal. Without an adapter the same 404 is the request's
// fault and not retried.
func TestAdapterFailover(t *testing.T) {
	for _, tc := range []struct {
		api    openai.API
		r      lm.GenerateRequest
		refuse string
	}{
		{openai.APICompletions, req, "status 404"},
		{openai.APISGLangGenerate, sgReq, "status 400"},
	} {
		t.Run(string(tc.api), func(t *testing.T) {
			lacks := &loraServer{loaded: map[string]bool{"a-v1": true}}
			holds := &loraServer{loaded: map[string]bool{"a-v1": true, "a-v2": true}}
			ls, hs := httptest.NewServer(lacks), httptest.NewServer(holds)
			defer ls.Close()
			defer hs.Close()
			name := "a-v2"
			s := newSampler(t, []string{ls.URL, hs.URL}, func(c *openai.Config) {
				c.API, c.Model = tc.api, "base"
				c.Adapter = func() string { return name }
				c.MaxRetries = 1
				c.Cooldown = time.Hour
			})
			for range 3 {
				_, err := s.Generate(context.Background(), []lm.GenerateRequest{tc.r})
				require.NoError(t, err)
			}
			assert.Equal(t, int64(3), holds.calls.Load())
			assert.LessOrEqual(t, lacks.calls.Load(), int64(1), "tried at most once, then cooled down")

			name = "a-v3" // nobody holds it
			_, err := s.Generate(context.Background(), []lm.GenerateRequest{tc.r})
			require.ErrorIs(t, err, openai.ErrWeightVersion)
			assert.ErrorContains(t, err, `adapter "a-v3" is not loaded there`)
			assert.ErrorContains(t, err, tc.refuse)
			var he *openai.HTTPError
			require.ErrorAs(t, err, &he)

			// The base model under a wrong name: a plain 4xx, not retried.
			if tc.api == openai.APICompletions {
				plain := &loraServer{}
				ps := httptest.NewServer(plain)
				defer ps.Close()
				b := newSampler(t, []string{ps.URL}, func(c *openai.Config) { c.Model = "other" })
				_, err := b.Generate(context.Background(), []lm.GenerateRequest{tc.r})
				require.ErrorAs(t, err, &he)
				assert.Equal(t, http.StatusNotFound, he.StatusCode)
				assert.NotErrorIs(t, err, openai.ErrWeightVersion)
				assert.Equal(t, int64(1), plain.calls.Load())
			}
		})
	}
}

// TestAdapterEcho: a completion whose "model" names another model than
// the adapter asked for (a proxy that routed elsewhere) is refused like a
// stale weight version.
func TestAdapterEcho(t *testing.T) {
	f := &loraServer{loaded: map[string]bool{"a-v2": true}, echo: "a-v1"}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := newSampler(t, []string{srv.URL}, func(c *openai.Config) {
		c.Adapter = func() string { return "a-v2" }
		c.MaxRetries = -1
	})
	_, err := s.Generate(context.Background(), []lm.GenerateRequest{req})
	require.ErrorIs(t, err, openai.ErrWeightVersion)
	assert.ErrorContains(t, err, `answered by model "a-v1", want adapter "a-v2"`)
}

// TestAdapterSwitchConcurrent: the adapter changes while requests run;
// each request is sent whole under one name, and every answer comes
// from the adapter its request named (run with -race).
func TestAdapterSwitchConcurrent(t *testing.T) {
	loaded := map[string]bool{}
	for v := range 20 {
		loaded[fmt.Sprintf("a-v%d", v)] = true
	}
	f := &loraServer{loaded: loaded}
	srv := httptest.NewServer(f)
	defer srv.Close()
	var cur atomic.Int64
	s := newSampler(t, []string{srv.URL}, func(c *openai.Config) {
		c.Adapter = func() string { return fmt.Sprintf("a-v%d", cur.Load()) }
	})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				_, err := s.Generate(context.Background(), []lm.GenerateRequest{req, req})
				assert.NoError(t, err)
			}
		}()
	}
	for v := 1; v < 20; v++ {
		cur.Store(int64(v))
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	for _, n := range f.names() {
		assert.True(t, loaded[n], n)
	}
}
