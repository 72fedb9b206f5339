package policy

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/lm"
)

// The sampler's log-probabilities are the trainer's: on the CPU backend
// (whose kernels are batch-invariant, see internal/cpu), the
// log-probability Generate records for each sampled token (Logprobs,
// untruncated sampling at temperature T) equals bit for bit the one
// Forward computes at temperature T for the full sequence, whatever the
// number of requests generated together, the prefill's chunks, the KV
// cache's block size, the workers, and the other sequences of the
// training batch — so that the PPO ratio of an update on the rollout's
// own policy is exactly 1.

// genSetting is one way of running Generate: requests side by side,
// prompt tokens prefilled per step, rows of a KV-cache block, workers of
// the CPU backend (0: GOMAXPROCS).
type genSetting struct {
	batch, prefill, block, workers int
}

func (g genSetting) String() string {
	return fmt.Sprintf("batch %d, prefill %d, blocks of %d, workers %d", g.batch, g.prefill, g.block, g.workers)
}

// withEngine sets the generation engine's prefill budget and block size.
func withEngine(prefill, block int) ModelOption {
	return func(o *modelOptions) { o.gen.PrefillTokens, o.gen.BlockSize = prefill, block }
}

// invarianceModel is a model of the test and how to load it.
type invarianceModel struct {
	name     string
	load     func(t *testing.T, opts ...ModelOption) *Model
	settings []genSetting
	newTok   int
}

func tinyLoader(name string, adapter bool) func(t *testing.T, opts ...ModelOption) *Model {
	return func(t *testing.T, opts ...ModelOption) *Model {
		m := loadTiny(t, name, opts...)
		if adapter {
			require.NoError(t, m.LoadAdapter("testdata/model/qwen3-tiny-lora"))
		}
		return m
	}
}

// mkmodelQwen3 is examples/mkmodel's default model: a Qwen3 body of
// hidden size 64 over Qwen3's vocabulary of 151,936 tokens (37 chunks of
// the log-softmax), random weights.
func mkmodelQwen3(t *testing.T, opts ...ModelOption) *Model {
	cfg := Config{ModelType: ModelQwen3, VocabSize: 151936, HiddenSize: 64, IntermediateSize: 192,
		NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 16,
		MaxPositionEmbeddings: 4096, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true,
		EOSTokenIDs: []int{151645}}
	m, err := New(cfg, 1, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func invarianceModels() []invarianceModel {
	all := []genSetting{
		{batch: 1, prefill: 2048, block: 16},
		{batch: 3, prefill: 5, block: 3, workers: 2},
		{batch: 17, prefill: 2048, block: 16, workers: 1},
		{batch: 17, prefill: 1, block: 1, workers: 2},
		{batch: 17, prefill: 7, block: 5},
	}
	models := []invarianceModel{
		{name: "qwen3-tiny+lora", load: tinyLoader("qwen3-tiny", true), settings: all, newTok: 10},
		{name: "mkmodel-qwen3", load: mkmodelQwen3, settings: all[:2], newTok: 4},
	}
	for _, name := range tinyModels {
		models = append(models, invarianceModel{name: name, load: tinyLoader(name, false), settings: all, newTok: 10})
	}
	return models
}

// invariancePrompts are 17 prompts of 1 to 12 tokens below 62 (every
// tiny model's vocabulary).
func invariancePrompts() [][]int {
	prompts := make([][]int, 17)
	for i := range prompts {
		for j := range 1 + (i*5)%12 {
			prompts[i] = append(prompts[i], 2+(i*13+j*7)%60)
		}
	}
	return prompts
}

func requireBits(t *testing.T, want, got []float32, msgAndArgs ...any) {
	t.Helper()
	w, g := make([]uint32, len(want)), make([]uint32, len(got))
	for i, v := range want {
		w[i] = math.Float32bits(v)
	}
	for i, v := range got {
		g[i] = math.Float32bits(v)
	}
	require.Equal(t, w, g, msgAndArgs...)
}

func TestSampledLogProbsAreTheTrainers(t *testing.T) {
	ctx := context.Background()
	prompts := invariancePrompts()
	for _, im := range invarianceModels() {
		for _, temp := range []float64{1, 0.7} {
			t.Run(fmt.Sprintf("%s/T=%v", im.name, temp), func(t *testing.T) {
				// Generate the requests (a prefix of them) in every setting:
				// request i gives the same tokens and log-probabilities in all.
				var ref []lm.Generation
				for _, g := range im.settings {
					opts := []ModelOption{withEngine(g.prefill, g.block)}
					if g.workers > 0 {
						opts = append(opts, WithBackend(cpu.New(cpu.WithWorkers(g.workers))))
					}
					m := im.load(t, opts...)
					reqs := make([]lm.GenerateRequest, g.batch)
					for i := range reqs {
						reqs[i] = lm.GenerateRequest{Prompt: prompts[i], Params: lm.SampleParams{
							Temperature: temp, MaxNewTokens: im.newTok, Logprobs: true, Seed: u64(uint64(100 + i))}}
					}
					gens, err := m.Generate(ctx, reqs)
					require.NoError(t, err, g)
					for i, gen := range gens {
						require.NotEmpty(t, gen.Tokens, "%v request %d", g, i)
						if i >= len(ref) {
							ref = append(ref, gen)
							continue
						}
						require.Equal(t, ref[i].Tokens, gen.Tokens, "%v request %d: tokens", g, i)
						requireBits(t, ref[i].LogProbs, gen.LogProbs, "%v request %d: log-probs", g, i)
						requireBits(t, ref[i].RawLogProbs, gen.RawLogProbs, "%v request %d: raw log-probs", g, i)
					}
				}
				// Score the sequences with Forward, at T and at 1, alone and
				// in ragged batches of 3 and 17 (one of them masked).
				m := im.load(t)
				seqs := make([][]int, len(ref))
				for i, gen := range ref {
					seqs[i] = append(append([]int(nil), prompts[i]...), gen.Tokens...)
				}
				score := func(batch lm.TokenBatch) [][]float32 {
					st, _, err := m.Forward(ctx, batch, false)
					require.NoError(t, err)
					return st.LogProbs
				}
				for i, gen := range ref {
					n := len(prompts[i])
					alone := score(lm.TokenBatch{Tokens: seqs[i : i+1], Temperature: temp})[0]
					requireBits(t, gen.LogProbs, alone[n:], "request %d: the sampler's log-probs at T=%v are the trainer's", i, temp)
					raw := score(lm.TokenBatch{Tokens: seqs[i : i+1]})[0]
					requireBits(t, gen.RawLogProbs, raw[n:], "request %d: the sampler's raw log-probs are the trainer's at T=1", i)
				}
				for _, bs := range []int{3, 17} {
					for b0 := 0; b0 < len(seqs); b0 += bs {
						part := seqs[b0:min(b0+bs, len(seqs))]
						batch := lm.TokenBatch{Tokens: part, Temperature: temp}
						if bs == 17 {
							// Mask the prompts, as SFT and RL do: the response
							// tokens' log-probs are unchanged.
							batch.Mask = make([][]float32, len(part))
							for j, s := range part {
								batch.Mask[j] = make([]float32, len(s))
								for k := len(prompts[b0+j]); k < len(s); k++ {
									batch.Mask[j][k] = 1
								}
							}
						}
						for j, lp := range score(batch) {
							n := len(prompts[b0+j])
							requireBits(t, ref[b0+j].LogProbs, lp[n:], "sequence %d in a training batch of %d", b0+j, len(part))
						}
					}
				}
			})
		}
	}
}
