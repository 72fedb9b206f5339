package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/serve"
)

// tinyModel is a random two-layer model over 64 ids; seeds give models
// whose greedy continuations differ.
func tinyModel(t *testing.T, seed uint64) *policy.Model {
	t.Helper()
	m, err := policy.New(policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 64, HiddenSize: 16, IntermediateSize: 32,
		NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
		MaxPositionEmbeddings: 64, RMSNormEps: 1e-6, RopeTheta: 1e4,
		Extra: map[string]json.RawMessage{"initializer_range": json.RawMessage("0.5")},
	}, seed)
	require.NoError(t, err)
	return m
}

// servers starts n package serve servers over copies of the model drawn
// with seed; wrap, when set, wraps each handler.
func servers(t *testing.T, n int, seed uint64, wrap func(i int, h http.Handler) http.Handler) []*httptest.Server {
	t.Helper()
	return engineServers(t, n, seed, "", wrap)
}

// kindServers starts one package serve server per kind over the model
// drawn with seed 1, each playing its kind's engine with the engine's
// defaults (serve.EngineSGLang, serve.EngineVLLM).
func kindServers(t *testing.T, kinds ...fleet.Kind) []*httptest.Server {
	t.Helper()
	var out []*httptest.Server
	for _, k := range kinds {
		engine := serve.EngineSGLang
		if k == fleet.VLLM || k == fleet.VLLMModelConfig {
			engine = serve.EngineVLLM
		}
		out = append(out, engineServers(t, 1, 1, engine, nil)...)
	}
	return out
}

// engineServers is servers playing engine (serve.Config.Engine).
func engineServers(t *testing.T, n int, seed uint64, engine serve.Engine, wrap func(i int, h http.Handler) http.Handler) []*httptest.Server {
	t.Helper()
	var out []*httptest.Server
	for i := range n {
		srv, err := serve.New(serve.Config{Model: tinyModel(t, seed), LogprobsMode: openai.ProcessedLogprobs, Engine: engine})
		require.NoError(t, err)
		var h http.Handler = srv
		if wrap != nil {
			h = wrap(i, srv)
		}
		hs := httptest.NewServer(h)
		t.Cleanup(func() { hs.Close(); srv.Close() })
		out = append(out, hs)
	}
	return out
}

func greedyReqs(n int) []lm.GenerateRequest {
	reqs := make([]lm.GenerateRequest, n)
	for i := range reqs {
		reqs[i] = lm.GenerateRequest{Prompt: []int{1, 2, 3, i % 7}, Params: lm.SampleParams{MaxNewTokens: 6, Logprobs: true}}
	}
	return reqs
}

// TestFleetOnServe trains nothing but does what a trainer does with a
// fleet of two package serve servers, each playing its engine with the
// engine's defaults (SGLang's weight version "default" at start, vLLM's
// 16-token default bound and no version): Check, sample, publish new
// weights, and sample again — through vLLM's /v1/completions (one server
// updated as SGLang, one as vLLM) and through SGLang's /generate, as real
// SGLang servers are sampled. Before the update the generations are the old
// model's; after it, on every server, exactly the new model's (greedy,
// so comparable token for token with the model's own Generate), each
// tagged with the version that made it.
func TestFleetOnServe(t *testing.T) {
	ctx := context.Background()
	reqs := greedyReqs(8)
	old, next := tinyModel(t, 1), tinyModel(t, 2)
	wantOld, err := old.Generate(ctx, reqs)
	require.NoError(t, err)
	wantNew, err := next.Generate(ctx, reqs)
	require.NoError(t, err)
	require.NotEqual(t, wantOld[0].Tokens, wantNew[0].Tokens, "the two models must differ for the test to mean anything")

	for _, tc := range []struct {
		name  string
		kinds [2]fleet.Kind
		api   openai.API
	}{
		{"completions", [2]fleet.Kind{fleet.SGLang, fleet.VLLM}, openai.APICompletions},
		{"sglang generate", [2]fleet.Kind{fleet.SGLang, fleet.SGLang}, openai.APISGLangGenerate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := kindServers(t, tc.kinds[0], tc.kinds[1])
			f, err := fleet.New(fleet.Config{
				Servers: []fleet.Server{{URL: hs[0].URL, Kind: tc.kinds[0]}, {URL: hs[1].URL, Kind: tc.kinds[1]}},
				Dir:     t.TempDir(),
				Sampler: openai.Config{API: tc.api, LogprobsMode: openai.ProcessedLogprobs},
			})
			require.NoError(t, err)
			require.NoError(t, f.Check(ctx))
			got, err := f.Generate(ctx, reqs)
			require.NoError(t, err)
			for i := range got {
				assert.Equal(t, wantOld[i].Tokens, got[i].Tokens)
				assert.Equal(t, wantOld[i].FinishReason, got[i].FinishReason)
				assert.Equal(t, "0", got[i].WeightVersion)
			}

			require.NoError(t, f.Publish(ctx, 1, next))
			for range 3 { // requests spread over both servers
				got, err = f.Generate(ctx, reqs)
				require.NoError(t, err)
				for i := range got {
					assert.Equal(t, wantNew[i].Tokens, got[i].Tokens)
					assert.InDeltaSlice(t, wantNew[i].LogProbs, got[i].LogProbs, 1e-5)
					assert.Equal(t, "1", got[i].WeightVersion)
				}
			}
		})
	}
}

// TestFleetTurnsNeverMixVersions: generations run without pause while
// the weights are published again and again; every generation equals
// what the model of the version it reports produces, never a mix.
func TestFleetTurnsNeverMixVersions(t *testing.T) {
	ctx := context.Background()
	hs := kindServers(t, fleet.SGLang, fleet.VLLM)
	f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: hs[0].URL}, {URL: hs[1].URL, Kind: fleet.VLLM}}, Dir: t.TempDir()})
	require.NoError(t, err)
	models := map[string]*policy.Model{"0": tinyModel(t, 1), "1": tinyModel(t, 2), "2": tinyModel(t, 3), "3": tinyModel(t, 4)}
	reqs := greedyReqs(4)
	want := map[string][]lm.Generation{}
	for v, m := range models {
		want[v], err = m.Generate(ctx, reqs)
		require.NoError(t, err)
	}

	seen := publishWhileSampling(t, f, reqs, want, func(v int) {
		require.NoError(t, f.Publish(ctx, v, models[fmt.Sprint(v)]))
	})
	assert.Positive(t, seen["0"])
	assert.Positive(t, seen["3"])
}

// publishWhileSampling samples reqs from f on 4 goroutines without pause
// while publish(v) publishes versions 1 to 3, checking that every
// generation equals want of the version it reports (never a mix of two),
// and returns how many batches each version answered.
func publishWhileSampling(t *testing.T, f *fleet.Fleet, reqs []lm.GenerateRequest, want map[string][]lm.Generation, publish func(v int)) map[string]int {
	t.Helper()
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := f.Generate(ctx, reqs)
				if !assert.NoError(t, err) {
					return
				}
				for i, g := range got {
					assert.Equal(t, want[g.WeightVersion][i].Tokens, g.Tokens, "version %s", g.WeightVersion)
				}
				mu.Lock()
				seen[got[0].WeightVersion]++
				mu.Unlock()
			}
		}()
	}
	for v := 1; v <= 3; v++ {
		time.Sleep(20 * time.Millisecond)
		publish(v)
	}
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	return seen
}

// TestFleetServerDiesOrLags: a server that is gone when the update comes
// (it died) is named by Publish's error, while the other takes the
// version; a server that missed an update and still reports the older
// version is passed over by sampling, and when it is the only one the
// error names it; a server that reports another version than
// Config.Version from the start (a run resumed against servers started
// from another checkpoint) fails the first Generate at once.
func TestFleetServerDiesOrLags(t *testing.T) {
	ctx := context.Background()
	hs := servers(t, 2, 1, nil)
	f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: hs[0].URL}, {URL: hs[1].URL}}, Dir: t.TempDir(), Timeout: time.Second,
		Sampler: openai.Config{MaxRetries: 2, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond}})
	require.NoError(t, err)
	hs[1].Close() // died
	err = f.Publish(ctx, 1, tinyModel(t, 2))
	require.ErrorIs(t, err, fleet.ErrUpdate)
	assert.ErrorContains(t, err, "sglang server "+hs[1].URL+": version 1")
	assert.NotContains(t, err.Error(), hs[0].URL)
	assert.Equal(t, 1, f.Version())
	got, err := f.Generate(ctx, greedyReqs(2))
	require.NoError(t, err, "the live server answers")
	assert.Equal(t, "1", got[0].WeightVersion)

	// A server that refused version 1 stays at 0: sampling passes over
	// it while the other serves, and names it when it is alone.
	refuse := func(i int, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if i == 1 && r.URL.Path == "/update_weights_from_disk" {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"success":false,"message":"Failed to update weights: out of memory."}`)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	two := servers(t, 2, 1, refuse)
	next := tinyModel(t, 2)
	wantNew, err := next.Generate(ctx, greedyReqs(4))
	require.NoError(t, err)
	g, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: two[0].URL}, {URL: two[1].URL}}, Dir: t.TempDir(),
		Sampler: openai.Config{MaxRetries: 2, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond}})
	require.NoError(t, err)
	require.ErrorIs(t, g.Publish(ctx, 1, next), fleet.ErrUpdate)
	for range 3 {
		got, err := g.Generate(ctx, greedyReqs(4))
		require.NoError(t, err)
		for i := range got {
			assert.Equal(t, wantNew[i].Tokens, got[i].Tokens, "only the server that took version 1 answers")
		}
	}
	two[0].Close()
	_, err = g.Generate(ctx, greedyReqs(1))
	require.ErrorIs(t, err, openai.ErrWeightVersion)
	assert.ErrorContains(t, err, two[1].URL)
	assert.ErrorContains(t, err, `weight_version "0", want "1"`)

	// A server at version 0 for a fleet told it starts at 1.
	lag := servers(t, 1, 1, nil)
	l, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: lag[0].URL}}, Dir: t.TempDir(), Version: 1})
	require.NoError(t, err)
	_, err = l.Generate(ctx, greedyReqs(1))
	require.ErrorIs(t, err, fleet.ErrVersion)
	assert.ErrorContains(t, err, lag[0].URL+` "0", but Config.Version is 1`)
}

// TestFleetSlowServer: a server whose update takes longer than Timeout
// fails Publish with a deadline error that names it, and is resumed.
func TestFleetSlowServer(t *testing.T) {
	slow := func(_ int, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/update_weights_from_disk" {
				select {
				case <-time.After(2 * time.Second):
				case <-r.Context().Done():
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	}
	hs := servers(t, 1, 1, slow)
	f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: hs[0].URL}}, Dir: t.TempDir(), Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	err = f.Publish(context.Background(), 1, tinyModel(t, 2))
	require.ErrorIs(t, err, fleet.ErrUpdate)
	assert.ErrorContains(t, err, hs[0].URL)
	assert.ErrorContains(t, err, "deadline exceeded")
	assert.Equal(t, 0, f.Version())
	// Resumed: sampling goes on with the old weights.
	got, err := f.Generate(context.Background(), greedyReqs(1))
	require.NoError(t, err)
	assert.Equal(t, "0", got[0].WeightVersion)
}

// TestFleetSamplesSGLangFromTheStart reproduces issue 22's second bug:
// SGLang starts at weight_version "default" (--weight-version), and the
// fleet, expecting "0" for Config.Version 0, refused every answer with
// ErrWeightVersion until the first Publish set a number. Against package
// serve playing SGLang the fleet must sample from the start, through
// /generate and /v1/completions, and after a Publish expect the number
// it published.
func TestFleetSamplesSGLangFromTheStart(t *testing.T) {
	ctx := context.Background()
	reqs := greedyReqs(4)
	for _, api := range []openai.API{openai.APISGLangGenerate, openai.APICompletions} {
		t.Run(string(api), func(t *testing.T) {
			hs := engineServers(t, 2, 1, serve.EngineSGLang, nil)
			f, err := fleet.New(fleet.Config{
				Servers: []fleet.Server{{URL: hs[0].URL, Kind: fleet.SGLang}, {URL: hs[1].URL, Kind: fleet.SGLang}},
				Dir:     t.TempDir(),
				Sampler: openai.Config{API: api, LogprobsMode: openai.ProcessedLogprobs, MaxRetries: 1, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond},
			})
			require.NoError(t, err)
			got, err := f.Generate(ctx, reqs)
			require.NoError(t, err, "the servers hold what they started with, which SGLang calls \"default\"")
			assert.Equal(t, "0", got[0].WeightVersion, "stamped with the fleet's version")

			require.NoError(t, f.Publish(ctx, 1, tinyModel(t, 2)))
			got, err = f.Generate(ctx, reqs)
			require.NoError(t, err)
			assert.Equal(t, "1", got[0].WeightVersion)
		})
	}
}

// TestFleetVLLMKindOnOwnVersions: a server driven through vLLM's reload
// that reports versions of its own (package serve in its own mode counts
// its reloads: "0" at start, "1" after the fleet's version 0, "2" after
// its version 1) still serves the fleet after every Publish, since vLLM's
// reload names no version and the fleet cannot expect one; the answers
// come from the published weights (the greedy tokens of each model).
func TestFleetVLLMKindOnOwnVersions(t *testing.T) {
	ctx := context.Background()
	hs := servers(t, 1, 1, nil)
	f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: hs[0].URL, Kind: fleet.VLLM}}, Dir: t.TempDir(),
		Sampler: openai.Config{MaxRetries: 1, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond}})
	require.NoError(t, err)
	require.NoError(t, f.Check(ctx))
	for v, seed := range []uint64{1, 2, 3} {
		m := tinyModel(t, seed)
		want, err := m.Generate(ctx, greedyReqs(3))
		require.NoError(t, err)
		require.NoError(t, f.Publish(ctx, v, m))
		got, err := f.Generate(ctx, greedyReqs(3))
		require.NoError(t, err, "version %d", v)
		for i := range got {
			assert.Equal(t, want[i].Tokens, got[i].Tokens, "version %d, request %d", v, i)
			assert.Equal(t, strconv.Itoa(v), got[i].WeightVersion)
		}
	}
}

// TestFleetSecondRun: the servers of a finished run keep its last
// weights. A two-step run publishes versions 0 (the policy it starts
// from), 1 and 2: an SGLang server reports "2"; package serve in its own
// mode, driven as a vLLM server, numbers the three loads itself and
// reports "3". A second fleet expecting version 0 is refused, naming the
// number and Config.AdoptVersion; with AdoptVersion it takes the number,
// samples the weights the servers hold under it, and after its own
// Publish counts from there.
func TestFleetSecondRun(t *testing.T) {
	ctx := context.Background()
	quick := openai.Config{MaxRetries: 1, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond}
	for _, c := range []struct {
		kind   fleet.Kind
		engine serve.Engine
		after  int // the number the server reports after the first run
	}{
		{fleet.SGLang, serve.EngineSGLang, 2},
		{fleet.VLLM, "", 3},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			hs := engineServers(t, 1, 1, c.engine, nil)
			srv := []fleet.Server{{URL: hs[0].URL, Kind: c.kind}}
			first, err := fleet.New(fleet.Config{Servers: srv, Dir: t.TempDir(), Sampler: quick})
			require.NoError(t, err)
			require.NoError(t, first.Check(ctx))
			last := tinyModel(t, 3)
			for v, m := range []*policy.Model{tinyModel(t, 1), tinyModel(t, 2), last} {
				require.NoError(t, first.Publish(ctx, v, m))
			}
			reported := strconv.Itoa(c.after)

			second, err := fleet.New(fleet.Config{Servers: srv, Dir: t.TempDir(), Sampler: quick})
			require.NoError(t, err)
			err = second.Check(ctx)
			require.ErrorIs(t, err, fleet.ErrVersion)
			assert.ErrorContains(t, err, fmt.Sprintf("%s %q, but Config.Version is 0: start the servers from that version's checkpoint, set Config.Version, or take theirs (Config.AdoptVersion)", hs[0].URL, reported))

			adopt, err := fleet.New(fleet.Config{Servers: srv, Dir: t.TempDir(), Sampler: quick, AdoptVersion: true})
			require.NoError(t, err)
			require.NoError(t, adopt.Check(ctx))
			assert.Equal(t, c.after, adopt.Version())
			want, err := last.Generate(ctx, greedyReqs(3))
			require.NoError(t, err)
			got, err := adopt.Generate(ctx, greedyReqs(3))
			require.NoError(t, err)
			for i := range got {
				assert.Equal(t, want[i].Tokens, got[i].Tokens, "the first run's last weights")
				assert.Equal(t, reported, got[i].WeightVersion)
			}
			require.NoError(t, adopt.Publish(ctx, 0, tinyModel(t, 4)))
			assert.Equal(t, 0, adopt.Version())
			got, err = adopt.Generate(ctx, greedyReqs(1))
			require.NoError(t, err)
			assert.Equal(t, "0", got[0].WeightVersion)

			// Without Check, the first Generate adopts as well.
			lazy, err := fleet.New(fleet.Config{Servers: srv, Dir: t.TempDir(), Sampler: quick, AdoptVersion: true, Version: 7})
			require.NoError(t, err)
			_, err = lazy.Generate(ctx, greedyReqs(1))
			require.NoError(t, err)
			if c.kind == fleet.SGLang {
				assert.Equal(t, 0, lazy.Version(), "the number the SGLang server now reports")
			} else {
				assert.Equal(t, c.after+1, lazy.Version(), "serve counted the adopting fleet's load")
			}
		})
	}
}
