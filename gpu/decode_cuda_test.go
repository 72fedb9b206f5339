//go:build agentrl_cuda && cgo

package gpu

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/backend"
)

// decodeModel is a Qwen3-shaped model of the given depth, small enough
// for the fake driver: vocabulary 64, hidden 32, 4/2 heads of dim 16, no
// end-of-sequence token (every request runs its MaxNewTokens).
func decodeModel(t *testing.T, be *Backend, layers int) *policy.Model {
	t.Helper()
	cfg, err := policy.ParseConfig([]byte(fmt.Sprintf(`{"model_type": "qwen3", "vocab_size": 64, "hidden_size": 32,
		"intermediate_size": 48, "num_hidden_layers": %d, "num_attention_heads": 4, "num_key_value_heads": 2,
		"head_dim": 16, "max_position_embeddings": 128, "rope_theta": 10000, "tie_word_embeddings": true, "eos_token_id": []}`, layers)))
	require.NoError(t, err)
	m, err := policy.New(cfg, 3, policy.WithBackend(be))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// countedGenerate runs one Generate and returns its generations, what it
// sent the device (be's counters before and after) and its steps.
func countedGenerate(t *testing.T, be *Backend, m *policy.Model, reqs []lm.GenerateRequest) ([]lm.Generation, Counters, int64) {
	t.Helper()
	before, err := be.Counters()
	require.NoError(t, err)
	s0 := m.GenerateStats().Steps
	out, err := m.Generate(context.Background(), reqs)
	require.NoError(t, err)
	after, err := be.Counters()
	require.NoError(t, err)
	return out, after.Sub(before), m.GenerateStats().Steps - s0
}

// extraSteps is the decode steps decodeCounters divides by.
const extraSteps = 3

// decodeCounters is what one decode step sends to the device, measured as
// the difference between generations of base+extra and base tokens (the
// same prefill and set-up, extra more decode steps) divided by extra.
func decodeCounters(t *testing.T, be *Backend, m *policy.Model, batch int) Counters {
	t.Helper()
	run := func(n int) Counters {
		reqs := make([]lm.GenerateRequest, batch)
		for i := range reqs {
			reqs[i] = lm.GenerateRequest{Prompt: []int{1 + i, 2, 3, 4, 5}, Params: lm.SampleParams{MaxNewTokens: n, Temperature: 0.8, TopK: 10, Seed: new(uint64)}}
		}
		_, c, _ := countedGenerate(t, be, m, reqs)
		return c
	}
	const base, extra = 2, extraSteps
	run(1) // the model's first generation uploads its weights
	// The engine's goroutine may make a call of its own between
	// generations (the KV cache released or grown, the last step's
	// release), landing in either run: a difference that does not share
	// evenly over the steps is measured again, at most twice more.
	var d Counters
	for attempt := range 3 {
		d = run(base + extra).Sub(run(base))
		t.Logf("difference over %d steps: %+v", extra, d)
		if evenly(d, extra) {
			break
		}
		t.Logf("attempt %d: a count does not share evenly over the steps; measuring again", attempt+1)
	}
	per := func(x uint64) uint64 {
		require.Zero(t, x%extra, "an equal share per step")
		return x / extra
	}
	kernels := map[string]uint64{}
	for k, n := range d.Kernels {
		kernels[k] = per(n)
	}
	return Counters{Launches: per(d.Launches), Kernels: kernels, Gemms: per(d.Gemms), HtoD: per(d.HtoD), HtoDBytes: per(d.HtoDBytes),
		DtoH: per(d.DtoH), DtoHBytes: per(d.DtoHBytes), DtoD: per(d.DtoD), StreamSyncs: per(d.StreamSyncs),
		HtoDAsync: per(d.HtoDAsync), LateUploads: per(d.LateUploads),
		// Rounded to the nearest: between generations the engine's
		// goroutine may make a round trip of its own (the KV cache
		// released or grown), landing in either run, so the difference
		// may hold one call more or less than one per step.
		WorkerCalls: (d.WorkerCalls + extra/2) / extra,
		// Not per step: the engine's goroutine queues the last step's
		// ReleaseStep after Generate has returned or before, so the
		// difference may hold one call more or less.
		Queued: d.Queued}
}

// evenly reports whether every count of d that decodeCounters divides is
// a multiple of n.
func evenly(d Counters, n uint64) bool {
	for _, x := range []uint64{d.Launches, d.Gemms, d.HtoD, d.HtoDBytes, d.DtoH, d.DtoHBytes, d.DtoD, d.StreamSyncs, d.HtoDAsync, d.LateUploads} {
		if x%n != 0 {
			return false
		}
	}
	for _, x := range d.Kernels {
		if x%n != 0 {
			return false
		}
	}
	return true
}

// TestDecodeStepStructure (fake driver or GPU): what a decode step sends to
// the device does not depend on the batch size — kernel launches, cuBLAS
// products, uploads (nor, uploads and round trips to the worker thread,
// on the layers) — and no key or value row is copied per sequence
// (no device-to-device copy at all); what comes back is one download of
// 12 bytes per sequence (token id, log-prob, raw log-prob). In FP32
// (no bf16 conversions), a Qwen3 layer launches 12 kernels — RMSNorm
// before attention, after it, and on queries and keys (4), RoPE on
// queries and keys (2), the KV append (1), split-K paged attention and
// its merge (2), the two residual adds (2), SwiGLU (1); the projections
// are cuBLAS products (7) — and the step 4 more: the embedding, the final
// RMSNorm, the gather of the sampled rows' hidden states and sampling;
// and the LM head is one more product.
func TestDecodeStepStructure(t *testing.T) {
	be := newOrSkip(t, WithPrecision(FP32))
	for _, layers := range []int{1, 2} {
		m := decodeModel(t, be, layers)
		var first Counters
		for i, batch := range []int{1, 3, 7} {
			c := decodeCounters(t, be, m, batch)
			t.Logf("%d layers, batch %d: %+v per decode step", layers, batch, c)
			assert.Equal(t, uint64(12*layers+4), c.Launches, "launches, batch %d", batch)
			assert.Equal(t, uint64(7*layers+1), c.Gemms, "cuBLAS products, batch %d", batch)
			assert.Equal(t, uint64(1), c.DtoH, "downloads, batch %d", batch)
			assert.Equal(t, uint64(12*batch), c.DtoHBytes, "bytes downloaded, batch %d", batch)
			assert.Zero(t, c.DtoD, "device copies, batch %d", batch)
			// One upload, whatever the layers, asynchronous from pinned
			// memory, before the step's first launch: the token ids, the
			// pass's positions and RoPE's frequencies (once per pass, in
			// its backend.Rows, for the queries and keys of every layer),
			// the step's layout, the sampled rows and the sampling
			// parameters, staged by the calls that need them.
			assert.Equal(t, uint64(1), c.HtoD, "uploads, batch %d", batch)
			assert.Equal(t, uint64(1), c.HtoDAsync, "asynchronous uploads, batch %d", batch)
			assert.Zero(t, c.LateUploads, "uploads after the step's first launch, batch %d", batch)
			// The host waits at the one download only.
			assert.Equal(t, uint64(1), c.HostSyncs(), "host synchronizations, batch %d", batch)
			// One round trip to the worker thread: SampleRows, which runs
			// the queued step and downloads its tokens.
			assert.Equal(t, uint64(1), c.WorkerCalls, "round trips to the worker, batch %d", batch)
			assert.Greater(t, c.Queued, uint64(extraSteps), "queued calls (of the %d steps), batch %d", extraSteps, batch)
			if i == 0 {
				first = c
				continue
			}
			assert.Equal(t, first.HtoD, c.HtoD, "uploads, batch %d", batch)
		}
	}
}

// TestDecodeMatchesCPU (fake driver or GPU): the same requests on the
// device and on the CPU backend give the same tokens — greedy and sampled
// with top-k and top-p — over prompts that prefill by tiles (more than 4
// rows) and by split-K (a session's next turn adds 3), in FP32.
func TestDecodeMatchesCPU(t *testing.T) {
	be := newOrSkip(t, WithPrecision(FP32))
	dev := decodeModel(t, be, 2)
	host, err := dev.Clone()
	require.NoError(t, err)
	t.Cleanup(func() { _ = host.Close() })
	seed := uint64(9)
	reqs := []lm.GenerateRequest{
		{Prompt: []int{5, 6, 7, 8, 9, 10, 11, 12, 13}, Params: lm.SampleParams{MaxNewTokens: 6, Logprobs: true}, Session: "s"},
		{Prompt: []int{1, 2}, Params: lm.SampleParams{MaxNewTokens: 5, Temperature: 0.9, TopK: 12, TopP: 0.9, Seed: &seed, Logprobs: true}},
		{Prompt: []int{40, 41, 42}, Params: lm.SampleParams{MaxNewTokens: 4, Temperature: 1.3, MinP: 0.05, Seed: &seed, Logprobs: true}},
	}
	ctx := context.Background()
	got, err := dev.Generate(ctx, reqs)
	require.NoError(t, err)
	want, err := host.Generate(ctx, reqs)
	require.NoError(t, err)
	for i := range want {
		require.Equal(t, want[i].Tokens, got[i].Tokens, "request %d", i)
		require.InDeltaSlice(t, want[i].LogProbs, got[i].LogProbs, 1e-4, "request %d", i)
		require.InDeltaSlice(t, want[i].RawLogProbs, got[i].RawLogProbs, 1e-4, "request %d", i)
	}
	next := reqs[0]
	next.Prompt = append(append(append([]int(nil), next.Prompt...), got[0].Tokens...), 3, 4)
	g2, err := dev.Generate(ctx, []lm.GenerateRequest{next})
	require.NoError(t, err)
	w2, err := host.Generate(ctx, []lm.GenerateRequest{next})
	require.NoError(t, err)
	require.Equal(t, w2[0].Tokens, g2[0].Tokens)
	assert.Equal(t, len(reqs[0].Prompt)+5, g2[0].CachedTokens)
	assert.Equal(t, "backend", dev.GenerateStats().Decoder)
}

// TestDecodeGraphs (fake driver or GPU): a generation's decode steps of one
// batch size are captured into a CUDA graph once and replayed after, with
// the step's inputs (token ids, positions, layout, sampling parameters)
// uploaded in place before each replay; the tokens and log-probabilities
// are those of the same Backend without graphs, bit for bit (FP32: the
// same kernels on the same data in the same order). The fake driver runs
// a captured launch only at a replay, from a copy of its arguments, and
// reads the device memory of then, so a replay with stale inputs would
// repeat the captured step's tokens.
func TestDecodeGraphs(t *testing.T) {
	var trace bytes.Buffer
	gen := func(graphs bool) ([]lm.Generation, Counters, int64) {
		be := newOrSkip(t, WithPrecision(FP32), WithCUDAGraphs(graphs), WithGraphTrace(&trace))
		m := decodeModel(t, be, 2)
		seed := uint64(4)
		reqs := []lm.GenerateRequest{
			{Prompt: []int{3, 4, 5}, Params: lm.SampleParams{MaxNewTokens: 12, Temperature: 1.1, TopK: 20, Seed: &seed, Logprobs: true}},
			{Prompt: []int{9, 8}, Params: lm.SampleParams{MaxNewTokens: 12, Logprobs: true}},
			{Prompt: []int{30, 31, 32, 33}, Params: lm.SampleParams{MaxNewTokens: 12, Temperature: 0.7, TopP: 0.8, Seed: &seed, Logprobs: true}},
		}
		return countedGenerate(t, be, m, reqs)
	}
	plain, pc, _ := gen(false)
	require.Zero(t, trace.Len(), "no records traced without graphs")
	got, gc, steps := gen(true)
	t.Logf("%d steps; graphs: %d captured, %d replayed, %d fallbacks", steps, gc.GraphCaptures, gc.GraphReplays, gc.GraphFallbacks)
	require.Zero(t, pc.GraphCaptures+pc.GraphReplays, "WithCUDAGraphs(false)")
	require.Len(t, got, len(plain))
	for i := range plain {
		require.Equal(t, plain[i].Tokens, got[i].Tokens, "request %d", i)
		require.Equal(t, plain[i].LogProbs, got[i].LogProbs, "request %d", i)
	}
	// The first two steps have records of their own (the prefill, and
	// the first decode step, whose buffers differ from the later ones').
	// After them the block of a step's staged data alternates between
	// two (a step's layout is released after the next step's upload), so
	// two records alternate, each seen once, then captured, then
	// replayed: every step but the first six is a replay.
	require.Zero(t, gc.GraphFallbacks)
	require.Equal(t, uint64(2), gc.GraphCaptures)
	require.Equal(t, uint64(steps-6), gc.GraphReplays)
	// The trace says the same, record by record, and names what differs
	// between the alternating records: the staged data's address.
	require.Equal(t, 2, strings.Count(trace.String(), "captured (error: <nil>)"), trace.String())
	require.Equal(t, int(steps-6), strings.Count(trace.String(), ", replayed"), trace.String())
	require.Contains(t, trace.String(), "differs from the record before at call ")
	// Every launch of a replayed step is counted as well.
	require.Equal(t, pc.Launches, gc.Launches)
	require.Equal(t, pc.Gemms, gc.Gemms)
}

// TestDecodeGraphsGrowingTables: rows whose block tables grow at
// different steps (128 rows, prompts of 1 to 24 tokens, 100 new tokens,
// blocks of 16) must not change the step's launches at every growth. The
// step's staged arrays take power-of-two room (stageSlot), so the
// layout's growth by about 3 KiB moves the arrays after it at most once,
// and each move costs the two alternating records a sighting and a
// capture: at most 6 + 4 steps are not replays (91 of 100 are). Packed
// at 256-byte alignment, as before, the arrays moved at every 256 bytes
// of growth and 47 of 100 steps were replays. It runs under the fake
// driver with FAKECUDA_NOOP=1 (the records are the host's; the kernels'
// results do not matter), which makes 128 rows cheap; elsewhere it is
// skipped.
func TestDecodeGraphsGrowingTables(t *testing.T) {
	if os.Getenv("FAKECUDA_NOOP") != "1" {
		t.Skip("runs under gpu/kernels/emu's fake driver with FAKECUDA_NOOP=1")
	}
	be := newOrSkip(t, WithPrecision(FP32))
	m := decodeModel(t, be, 1)
	reqs := make([]lm.GenerateRequest, 128)
	for i := range reqs {
		p := make([]int, 1+i%24)
		for j := range p {
			p[j] = 1 + (i+j)%60
		}
		reqs[i] = lm.GenerateRequest{Prompt: p, Params: lm.SampleParams{MaxNewTokens: 100}}
	}
	_, c, steps := countedGenerate(t, be, m, reqs)
	t.Logf("%d steps; graphs: %d captured, %d replayed", steps, c.GraphCaptures, c.GraphReplays)
	require.GreaterOrEqual(t, c.GraphReplays, uint64(steps-10))
}

// TestSampleRowsMinPOne: with min-p 1 only the largest logit is a
// candidate, whatever the temperature. On a GPU, nvcc fused
// z·(1/T) − max·(1/T) into a multiply-add, whose value at the maximum is
// the rounding error of max·(1/T) (negative half the time): no candidate
// was left, and the kernel answered −1 after reading before the row. The
// emulator fuses the same way when built with EMU_CONTRACT=1 (as .ci/run
// runs this test); sample_rows now rounds the products first.
func TestSampleRowsMinPOne(t *testing.T) {
	be := newOrSkip(t, WithPrecision(FP32))
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, vocab = 64, 40
	z := make([]float32, rows*vocab)
	want := make([]int32, rows)
	for r := range rows {
		for i := range vocab {
			z[r*vocab+i] = float32(rng.NormFloat64() * 3)
			if z[r*vocab+i] > z[r*vocab+int(want[r])] {
				want[r] = int32(i)
			}
		}
	}
	sr := make([]backend.SampleRow, rows)
	for r := range sr {
		sr[r] = backend.SampleRow{Temperature: 0.7 + 0.01*float64(r), MinP: 1, Seed: uint64(r)}
	}
	out := make([]backend.SampleResult, rows)
	require.NoError(t, be.SampleRows(upload(t, be, z), vocab, sr, out))
	for r, res := range out {
		require.Equal(t, want[r], res.Token, "row %d", r)
		require.InDelta(t, 0, res.LogProb, 1e-6, "row %d: the only candidate", r)
	}
}
