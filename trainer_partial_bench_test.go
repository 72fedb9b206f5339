package agentrl_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/serve"
)

// restarting is the baseline that discards interrupted turns: a
// generation that a weight update cut is sampled again from the start
// of the turn under the new weights, its tokens thrown away.
type restarting struct {
	lm.Sampler
	wasted *atomic.Int64
}

func (r restarting) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	for {
		gens, err := r.Sampler.Generate(ctx, reqs)
		if err != nil {
			return nil, err
		}
		cut := false
		for _, g := range gens {
			if g.FinishReason == lm.FinishAbort {
				cut = true
				r.wasted.Add(int64(len(g.Tokens)))
			}
		}
		if !cut {
			return gens, nil
		}
	}
}

// BenchmarkPartialRollouts trains a tiny random Qwen3 for a few steps of
// long responses (16 trajectories of up to 384 tokens a step) against
// two package serve servers, in four ways: synchronous updates
// (MaxStaleness 0), and one step ahead (MaxStaleness 1) with a publish
// that waits for the turns in flight, that discards the turns it
// interrupts, or that keeps them (partial rollouts). It reports the
// sampled tokens trained per second of wall time, the staleness of the
// trained tokens (mean and max), the seconds the trainer spent
// publishing (waiting for the turns in flight, when it waits), the turns
// continued across a publish and the tokens thrown away. Run it with
//
//	go test -run '^$' -bench BenchmarkPartialRollouts -benchtime 1x .
func BenchmarkPartialRollouts(b *testing.B) {
	const steps, budget = 6, 384
	tok, err := tokenizer.NewBytes(tokenizer.BytesConfig{})
	require.NoError(b, err)
	root := b.TempDir()
	ckpt := filepath.Join(root, "start")
	{
		m, err := policy.New(policy.Config{
			ModelType: policy.ModelQwen3, VocabSize: 256, HiddenSize: 32, IntermediateSize: 64, NumHiddenLayers: 2,
			NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 8, MaxPositionEmbeddings: 512, RMSNormEps: 1e-6, RopeTheta: 1e4,
		}, 1)
		require.NoError(b, err)
		require.NoError(b, m.Save(ckpt, lm.SaveOptions{}))
		require.NoError(b, m.Close())
	}
	modes := []struct {
		name             string
		staleness        int
		partial, discard bool
	}{
		{"sync", 0, false, false},
		{"wait", 1, false, false},
		{"discard", 1, true, true},
		{"partial", 1, true, false},
	}
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				var servers []fleet.Server
				for range 2 {
					sm, err := policy.Load(ckpt, policy.WithDecoder(tok.Decode))
					require.NoError(b, err)
					srv, err := serve.New(serve.Config{Model: sm, ModelPath: ckpt, Encode: tok.Encode, Decode: tok.Decode,
						LogprobsMode: openai.ProcessedLogprobs, Engine: serve.EngineSGLang})
					require.NoError(b, err)
					hs := httptest.NewServer(srv)
					b.Cleanup(func() { hs.Close(); srv.Close() })
					servers = append(servers, fleet.Server{URL: hs.URL, Kind: fleet.SGLang})
				}
				f, err := fleet.New(fleet.Config{Servers: servers, Dir: b.TempDir(), PartialRollouts: mode.partial,
					Sampler: openai.Config{LogprobsMode: openai.ProcessedLogprobs}})
				require.NoError(b, err)
				var wasted atomic.Int64
				var sampler lm.Sampler = f
				if mode.discard {
					sampler = restarting{Sampler: f, wasted: &wasted}
				}
				engine, err := rollout.NewEngine(rollout.Config{Sampler: sampler, Tokenizer: tok, MaxResponseTokens: budget, MaxResumes: 1000})
				require.NoError(b, err)
				model, err := policy.Load(ckpt, policy.WithDecoder(tok.Decode))
				require.NoError(b, err)
				b.Cleanup(func() { model.Close() })
				cfg := agentrl.GRPOTCR()
				cfg.PromptsPerStep, cfg.SamplesPerPrompt, cfg.MiniBatchSize, cfg.MicroBatchSize = 4, 4, 16, 16
				cfg.Sampling = lm.SampleParams{Temperature: 1, MaxNewTokens: budget}
				cfg.Overlong = nil
				cfg.MaxStaleness, cfg.SyncEvery = mode.staleness, 1
				prompts := make([]agentrl.Prompt, 8)
				for i := range prompts {
					prompts[i] = agentrl.Prompt{ID: string(rune('a' + i)), Text: "say a " + string(rune('a'+i))}
				}
				tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{
					Policy: model, Engine: engine, Reward: containsA, Sync: f, GroundTruthOptional: true, Prompts: prompts,
				})
				require.NoError(b, err)
				ctx := context.Background()
				start := time.Now()
				var tokens, staleSum float64
				staleMax, partialTurns, publishing := 0, 0, 0.0
				for range steps {
					st, err := tr.Step(ctx)
					require.NoError(b, err)
					n := st.ResponseLenMean * float64(st.Trajectories)
					tokens += n
					staleSum += st.StalenessTokenMean * n
					staleMax = max(staleMax, st.StalenessMax)
					partialTurns += st.PartialTurns
					publishing += st.SyncSeconds
				}
				wall := time.Since(start).Seconds()
				require.NoError(b, tr.Close())
				b.ReportMetric(tokens/wall, "tokens/s")
				b.ReportMetric(wall, "wall_s")
				b.ReportMetric(publishing, "publish_s")
				b.ReportMetric(staleSum/tokens, "staleness_token_mean")
				b.ReportMetric(float64(staleMax), "staleness_max")
				b.ReportMetric(float64(partialTurns), "partial_turns")
				b.ReportMetric(float64(wasted.Load()), "wasted_tokens")
			}
		})
	}
}
