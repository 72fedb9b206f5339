package agentrl_test

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// shuffledSampler delays each Generate call by a random time (drawn
// from its own seed) before passing it on, so that concurrent rollouts
// reach the model, share its batches and finish in an order of its
// seed's making.
type shuffledSampler struct {
	inner lm.Sampler
	mu    sync.Mutex
	rng   *rand.Rand
}

func (s *shuffledSampler) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	s.mu.Lock()
	d := time.Duration(s.rng.IntN(3000)) * time.Microsecond
	s.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.inner.Generate(ctx, reqs)
}

// orderAlphabet is the order test's vocabulary; 'h' ends a response.
const orderAlphabet = "abcdefgh"

// countC scores a response by its share of 'c's.
func countC(_ context.Context, in reward.Input) (reward.Output, error) {
	if in.Response == "" {
		return reward.Output{Pred: in.Response}, nil
	}
	c := float64(strings.Count(in.Response, "c")) / float64(len(in.Response))
	return reward.Output{Score: c, Acc: c > 0.5, Pred: in.Response}, nil
}

// orderRun trains a tiny transformer for three steps of GRPO-TCR (with
// TIS, whose weights read the sampler's log-probabilities) over prompts
// of 1 to 4 tokens, 8 samples each, responses of up to 6 tokens ended
// by 'h', with its rollouts delayed by a shuffledSampler of the
// given seed, at GOMAXPROCS procs (the CPU backend's workers follow
// it). It returns the sha256 of the saved weights and the steps'
// metrics that do not measure time.
func orderRun(t *testing.T, delaySeed uint64, procs int) ([32]byte, []agentrl.StepMetrics) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	pc := policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: len(orderAlphabet), HiddenSize: 16, IntermediateSize: 32,
		NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
		MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
		EOSTokenIDs: []int{strings.IndexByte(orderAlphabet, 'h')},
	}
	tok := alphaTokenizer{orderAlphabet}
	m, err := policy.New(pc, 5, policy.WithDecoder(tok.Decode))
	require.NoError(t, err)
	defer m.Close()
	sampler := &shuffledSampler{inner: m, rng: rand.New(rand.NewPCG(delaySeed, delaySeed))}
	eng, err := rollout.NewEngine(rollout.Config{Sampler: sampler, Tokenizer: tok, MaxResponseTokens: 8, MaxConcurrent: 16})
	require.NoError(t, err)
	prompts := make([]agentrl.Prompt, 4)
	for i := range prompts {
		prompts[i] = agentrl.Prompt{ID: string(rune('p' + i)), Tokens: tok.Encode(orderAlphabet[:1+i])}
	}
	cfg := agentrl.GRPOTCR()
	cfg.PromptsPerStep, cfg.SamplesPerPrompt = 2, 8
	cfg.MiniBatchSize, cfg.MicroBatchSize = 8, 4
	cfg.Sampling = lm.SampleParams{Temperature: 1, MaxNewTokens: 6}
	cfg.Optimizer = policy.AdamWConfig{LR: 0.05, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	cfg.Overlong = nil
	// The truncated importance weight between the trainer's old
	// log-probs and the sampler's carries the sampler's bits into the
	// update.
	cfg.Loss.TISCap = 2
	cfg.Seed = 11
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: countC, Prompts: prompts})
	require.NoError(t, err)
	defer tr.Close()
	var ms []agentrl.StepMetrics
	for range 3 {
		st, err := tr.Step(context.Background())
		require.NoError(t, err)
		ms = append(ms, timeless(st))
	}
	dir := t.TempDir()
	require.NoError(t, m.Save(dir, lm.SaveOptions{}))
	w, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	require.NoError(t, err)
	return sha256.Sum256(w), ms
}

// timeless is m without the fields that measure time.
func timeless(m agentrl.StepMetrics) agentrl.StepMetrics {
	m.RolloutTokensPerSec, m.TrainTokensPerSec = 0, 0
	m.RolloutSeconds, m.TrainSeconds, m.StepSeconds = 0, 0, 0
	m.OverlapSeconds, m.SyncSeconds, m.WallSeconds = 0, 0, 0
	m.AllReduceWaitSeconds, m.AllReduceSeconds = 0, 0
	return m
}

// TestStepsDoNotDependOnCompletionOrder: two runs of one seed whose
// rollouts reach the model and finish in different orders (random
// delays of different seeds, so the model batches them differently),
// at GOMAXPROCS 1 and 2, train the same weights bit for bit and report
// the same metrics. The batch-invariant CPU kernels make each rollout's
// tokens and log-probabilities independent of its batch, the per-request
// seeds its random stream, and the trainer's canonical order of the
// trajectories the update. (With the kernels before batch invariance,
// the sampler's log-probabilities, which TIS reads, differed in their
// last bits with the batching, and so did the metrics and weights.)
func TestStepsDoNotDependOnCompletionOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a transformer three times")
	}
	wantW, wantM := orderRun(t, 1, 1)
	for _, c := range []struct {
		seed  uint64
		procs int
	}{{2, 2}, {3, 1}} {
		w, ms := orderRun(t, c.seed, c.procs)
		require.Equal(t, wantM, ms, "delays of seed %d, GOMAXPROCS %d: metrics", c.seed, c.procs)
		require.Equal(t, wantW, w, "delays of seed %d, GOMAXPROCS %d: weights", c.seed, c.procs)
	}
}
