//go:build agentrl_cuda && cgo

package agentrl_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// stepResult is what one trainer step on one backend leaves behind.
type stepResult struct {
	metrics       agentrl.StepMetrics
	responses     []string      // every trajectory's response, sorted
	before, after lm.TokenStats // the probe's log-probs and entropies around the step
	params        map[string][]float32
}

// trainOneStep builds the bandit's tiny Qwen3 (seed 3) on be, trains one
// GRPO-TCR step with it as sampler and trainable — rollouts generated on
// be, log-probs recomputed, loss, backward, the backend-resident AdamW —
// and scores probe before and after.
func trainOneStep(t *testing.T, be backend.Backend, pc policy.Config, cfg agentrl.TrainerConfig, probe lm.TokenBatch) stepResult {
	t.Helper()
	ctx := context.Background()
	tok := alphaTokenizer{banditAlphabet}
	m, err := policy.New(pc, 3, policy.WithBackend(be), policy.WithDecoder(tok.Decode))
	require.NoError(t, err)
	defer m.Close()

	var mu sync.Mutex
	var res stepResult
	// The fraction of c's in the response: a reward that varies within
	// each group, so that every advantage and gradient is nonzero.
	rf := func(_ context.Context, in reward.Input) (reward.Output, error) {
		mu.Lock()
		res.responses = append(res.responses, in.Response)
		mu.Unlock()
		if in.Response == "" {
			return reward.Output{Score: 0}, nil
		}
		return reward.Output{Score: float64(strings.Count(in.Response, "c")) / float64(len(in.Response))}, nil
	}
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: tok, MaxResponseTokens: 8})
	require.NoError(t, err)
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: rf, Prompts: banditPrompts(4)})
	require.NoError(t, err)
	defer tr.Close()
	_, ok := tr.Optimizer().(*policy.DeviceAdamW)
	require.True(t, ok, "the trainer steps AdamW on the backend: %T", tr.Optimizer())

	res.before, _, err = m.Forward(ctx, probe, false)
	require.NoError(t, err)
	res.metrics, err = tr.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.metrics.Updates)
	res.after, _, err = m.Forward(ctx, probe, false)
	require.NoError(t, err)
	res.params = map[string][]float32{}
	for _, p := range m.Params() {
		res.params[p.Name] = slices.Clone(p.Data)
	}
	slices.Sort(res.responses)
	return res
}

// TestTrainerStepOnCUDA: one step of the RL trainer on the CUDA backend
// in FP32 matches the same step on the CPU backend from the same weights
// — the sampled responses exactly, log-probs and weights to float32
// rounding. It runs on a GPU or under gpu/kernels/emu's fake driver:
//
//	bash gpu/kernels/emu/fakecuda.sh . -test.run TestTrainerStepOnCUDA -test.v
//
// Tolerances. Both backends compute every product and reduction in
// float32 (r = 2⁻²⁴ ≈ 6e-8 per rounding), in different orders. A K-term
// dot product then differs by at most about K·r relative to the sum of
// its terms' magnitudes; along the forward pass of this model (embedding
// → RMSNorm → q/k/v, K = 16 → attention over ≤ 4 keys → o, K = 16 →
// RMSNorm → gate/up, K = 16 → down, K = 32 → RMSNorm → LM head, K = 16 →
// log-softmax over 4) the terms sum to ≲ 130·r ≈ 8e-6 relative on values
// of order 1 (normalised activations; logits ≈ 0.1 with weights of
// std 0.02), so log-probs and entropies agree to within tolLogProb = 1e-5
// — far below what one update moves them (lr 0.02: ≈ 1e-2, checked
// below), so a wrong gradient cannot hide in the tolerance. The sampled
// tokens are then equal unless a uniform draw falls within 1e-5 of a
// boundary of the cumulative distribution: for the 2·4·3 draws here, a
// chance of about 5e-4, fixed by the seeds (no flakiness: the same draws
// every run). AdamW's first step moves each weight by lr·u, u =
// g/(|g|+ε) (m̂ = g, v̂ = g²): ±lr whatever |g| ≫ ε, so where the
// gradients agree the weights agree to float32 rounding of their values
// (tolWeight = 1e-6); a gradient error Δg moves u by (Δg/ε)·(1−|u|)²,
// which the weights' bound adds (see below) — it matters only for the
// elements whose gradient is within its own rounding error of 0, whose
// update is then noise on either backend. The log-probs after the step,
// the function the weights compute, agree within tolLogProb regardless.
func TestTrainerStepOnCUDA(t *testing.T) {
	const (
		tolLogProb = 1e-5
		tolWeight  = 1e-6
		lr         = 0.02
	)
	pc := policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 4, HiddenSize: 16, IntermediateSize: 32,
		NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
		MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
	}
	d, err := device.Open(context.Background(), device.Config{Device: device.Spec{Kind: device.CUDA}, Precision: device.FP32}, pc)
	if err != nil {
		require.True(t, errors.Is(err, gpu.ErrNoDriver) || errors.Is(err, gpu.ErrNoDevice), "%v", err)
		if os.Getenv("AGENTRL_REQUIRE_GPU") != "" {
			t.Fatalf("AGENTRL_REQUIRE_GPU is set but no GPU: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	defer func() { require.NoError(t, d.Close()) }()
	t.Logf("device: %s", d)

	cfg := banditConfig()
	cfg.PromptsPerStep, cfg.SamplesPerPrompt = 2, 4
	cfg.Sampling.MaxNewTokens = 3
	cfg.Optimizer.LR = lr
	probe := lm.TokenBatch{Tokens: [][]int{{0, 1, 2, 3, 2, 1}, {0, 2, 2}, {3, 0, 1, 2}}}

	cpuRes := trainOneStep(t, device.NewCPU(0), pc, cfg, probe)
	gpuRes := trainOneStep(t, d.Backend(), pc, cfg, probe)

	require.Equal(t, cpuRes.responses, gpuRes.responses, "the same tokens were sampled")
	t.Logf("responses: %q", cpuRes.responses)

	maxDiff := func(a, b [][]float32) float64 {
		require.Equal(t, len(a), len(b))
		worst := 0.0
		for i := range a {
			require.Equal(t, len(a[i]), len(b[i]))
			for j := range a[i] {
				worst = max(worst, math.Abs(float64(a[i][j])-float64(b[i][j])))
			}
		}
		return worst
	}
	lpBefore := maxDiff(cpuRes.before.LogProbs, gpuRes.before.LogProbs)
	entBefore := maxDiff(cpuRes.before.Entropy, gpuRes.before.Entropy)
	lpAfter := maxDiff(cpuRes.after.LogProbs, gpuRes.after.LogProbs)
	entAfter := maxDiff(cpuRes.after.Entropy, gpuRes.after.Entropy)
	moved := maxDiff(cpuRes.before.LogProbs, cpuRes.after.LogProbs)
	t.Logf("largest |cuda − cpu|: log-probs %.3g before the step, %.3g after; entropies %.3g, %.3g; the step moved the log-probs by up to %.3g",
		lpBefore, lpAfter, entBefore, entAfter, moved)
	assert.LessOrEqual(t, lpBefore, tolLogProb)
	assert.LessOrEqual(t, entBefore, tolLogProb)
	assert.LessOrEqual(t, lpAfter, tolLogProb)
	assert.LessOrEqual(t, entAfter, tolLogProb)
	assert.Greater(t, moved, 100*tolLogProb, "the step changed the model well beyond the tolerance")

	// The weights: from the same start, each moved by lr·u with u =
	// g/(|g|+ε) on the CPU. A gradient error Δg changes the update by
	// lr·ε·Δg/(|g|+ε)² = lr·(Δg/ε)·(1−|u|)², so each weight must agree
	// within tolWeight + lr·(δ/ε)·(1−|u|)², δ = tolLogProb·‖g‖ bounding
	// the gradient's elements' rounding: 1e-6 where |g| ≫ ε, no bound for
	// the few elements whose gradient is within its own error of 0.
	start, err := policy.New(pc, 3)
	require.NoError(t, err)
	defer start.Close()
	eps := cfg.Optimizer.Eps
	delta := tolLogProb * cpuRes.metrics.GradNorm
	worst, worstName, tight, loose := 0.0, "", 0, 0
	for _, p := range start.Params() {
		w, g := cpuRes.params[p.Name], gpuRes.params[p.Name]
		require.Len(t, w, len(p.Data), p.Name)
		require.Len(t, g, len(p.Data), p.Name)
		for i := range w {
			dw := math.Abs(float64(w[i]) - float64(g[i]))
			u := math.Min(math.Abs(float64(w[i])-float64(p.Data[i]))/lr, 1)
			bound := tolWeight + lr*(delta/eps)*(1-u)*(1-u)
			assert.LessOrEqual(t, dw, bound, "%s[%d]: update %.4g·lr", p.Name, i, u)
			if dw <= tolWeight {
				tight++
			} else {
				loose++
			}
			if dw > worst {
				worst, worstName = dw, fmt.Sprintf("%s[%d], |update| %.3g·lr", p.Name, i, u)
			}
		}
	}
	t.Logf("weights: %d of %d within %g of the CPU's after the step (each moved by up to lr = %g); largest difference %.3g at %s",
		tight, tight+loose, tolWeight, lr, worst, worstName)

	for _, m := range []struct {
		name     string
		cpu, gpu float64
	}{
		{"loss", cpuRes.metrics.Loss, gpuRes.metrics.Loss},
		{"entropy", cpuRes.metrics.Entropy, gpuRes.metrics.Entropy},
		{"grad norm", cpuRes.metrics.GradNorm, gpuRes.metrics.GradNorm},
		{"pg_clipfrac", cpuRes.metrics.PGClipFrac, gpuRes.metrics.PGClipFrac},
		{"reward", cpuRes.metrics.RewardMean, gpuRes.metrics.RewardMean},
	} {
		t.Logf("%s: cpu %.9g, cuda %.9g", m.name, m.cpu, m.gpu)
		assert.InDelta(t, m.cpu, m.gpu, tolLogProb*max(1, math.Abs(m.cpu)), m.name)
	}
}
