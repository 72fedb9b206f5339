package policy

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/agentrl/agentrl/lm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logits4 are ln 4, ln 3, ln 2, ln 1: softmax gives 0.4, 0.3, 0.2, 0.1.
var logits4 = []float32{float32(math.Log(4)), float32(math.Log(3)), float32(math.Log(2)), 0}

// distribution estimates the sampling distribution by the returned
// log-probabilities: every token the sampler can return reports its
// processed probability, so collect them over many draws.
func keptProbs(t *testing.T, logits []float32, p lm.SampleParams, draws int) map[int]float64 {
	t.Helper()
	s := NewTokenSampler(rand.New(rand.NewPCG(7, 7)))
	out := map[int]float64{}
	for i := 0; i < draws; i++ {
		r, err := s.Sample(logits, p)
		require.NoError(t, err)
		out[r.Token] = math.Exp(r.LogProb)
	}
	return out
}

func TestSampleDistributionsByHand(t *testing.T) {
	cases := []struct {
		name string
		p    lm.SampleParams
		want map[int]float64
	}{
		// No truncation at T=1: the softmax itself.
		{"plain", lm.SampleParams{Temperature: 1}, map[int]float64{0: 0.4, 1: 0.3, 2: 0.2, 3: 0.1}},
		// T=0.5 squares the probabilities: 16, 9, 4, 1 over 30.
		{"temperature", lm.SampleParams{Temperature: 0.5}, map[int]float64{0: 16.0 / 30, 1: 9.0 / 30, 2: 4.0 / 30, 3: 1.0 / 30}},
		// top-k 2: {0.4, 0.3} renormalised: 4/7, 3/7.
		{"top-k", lm.SampleParams{Temperature: 1, TopK: 2}, map[int]float64{0: 4.0 / 7, 1: 3.0 / 7}},
		// top-p 0.65: token 0 (before 0 < 0.65) and token 1 (before 0.4 <
		// 0.65) are kept, token 2 (before 0.7) is not: 4/7, 3/7.
		{"top-p 0.65", lm.SampleParams{Temperature: 1, TopP: 0.65}, map[int]float64{0: 4.0 / 7, 1: 3.0 / 7}},
		// top-p 0.75: token 2 (before 0.7 < 0.75) joins: 4/9, 3/9, 2/9.
		{"top-p 0.75", lm.SampleParams{Temperature: 1, TopP: 0.75}, map[int]float64{0: 4.0 / 9, 1: 3.0 / 9, 2: 2.0 / 9}},
		// top-p below the largest probability keeps the top token alone.
		{"top-p tiny", lm.SampleParams{Temperature: 1, TopP: 0.01}, map[int]float64{0: 1}},
		// min-p 0.3: threshold 0.3·0.4 = 0.12 drops token 3: 4/9, 3/9, 2/9.
		{"min-p", lm.SampleParams{Temperature: 1, MinP: 0.3}, map[int]float64{0: 4.0 / 9, 1: 3.0 / 9, 2: 2.0 / 9}},
		// T=0.5 then top-k 3: 16, 9, 4 over 29.
		{"temperature+top-k", lm.SampleParams{Temperature: 0.5, TopK: 3}, map[int]float64{0: 16.0 / 29, 1: 9.0 / 29, 2: 4.0 / 29}},
		// min-p 0.3 leaves 4/9, 3/9, 2/9; top-p 0.7 on that: token 2's
		// before is 7/9 ≥ 0.7, so 4/7, 3/7 (vLLM order: min-p first).
		{"min-p+top-p", lm.SampleParams{Temperature: 1, MinP: 0.3, TopP: 0.7}, map[int]float64{0: 4.0 / 7, 1: 3.0 / 7}},
		// top-k 3 then top-p 0.6 over {4/9, 3/9, 2/9}: before of token 1
		// is 4/9 < 0.6, of token 2 is 7/9: 4/7, 3/7.
		{"top-k+top-p", lm.SampleParams{Temperature: 1, TopK: 3, TopP: 0.6}, map[int]float64{0: 4.0 / 7, 1: 3.0 / 7}},
		// Disabled values: TopK -1, TopP 1, MinP 0.
		{"disabled", lm.SampleParams{Temperature: 1, TopK: -1, TopP: 1}, map[int]float64{0: 0.4, 1: 0.3, 2: 0.2, 3: 0.1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := keptProbs(t, logits4, c.p, 400)
			require.Len(t, got, len(c.want), "support %v", got)
			for tok, w := range c.want {
				assert.InDelta(t, w, got[tok], 1e-6, "token %d", tok)
			}
		})
	}
}

func TestSampleGreedyAndRaw(t *testing.T) {
	s := NewTokenSampler(rand.New(rand.NewPCG(1, 2)))
	r, err := s.Sample(logits4, lm.SampleParams{})
	require.NoError(t, err)
	assert.Equal(t, 0, r.Token)
	assert.Equal(t, 0.0, r.LogProb)
	assert.InDelta(t, math.Log(0.4), r.RawLogProb, 1e-6)
	// Ties: the first maximum, as torch.argmax.
	r, err = s.Sample([]float32{1, 3, 3, 2}, lm.SampleParams{Temperature: 0, TopK: 1})
	require.NoError(t, err)
	assert.Equal(t, 1, r.Token)
	// The raw log-probability ignores temperature and truncation: with
	// top-k 1 and T=0.5 the processed log-prob is 0, the raw one ln 0.4.
	r, err = s.Sample(logits4, lm.SampleParams{Temperature: 0.5, TopK: 1})
	require.NoError(t, err)
	assert.Equal(t, 0, r.Token)
	assert.InDelta(t, 0, r.LogProb, 1e-12)
	assert.InDelta(t, math.Log(0.4), r.RawLogProb, 1e-6)
}

func TestSampleTiesAndMasks(t *testing.T) {
	// top-k 2 with three tied maxima keeps all three (≥ the 2nd value).
	got := keptProbs(t, []float32{1, 1, 1, 0}, lm.SampleParams{Temperature: 1, TopK: 2}, 300)
	assert.Len(t, got, 3)
	for _, p := range got {
		assert.InDelta(t, 1.0/3, p, 1e-9)
	}
	// -Inf logits (masked tokens) are never drawn; ln(1)=0 and ln(3).
	inf := float32(math.Inf(-1))
	got = keptProbs(t, []float32{inf, 0, inf, float32(math.Log(3))}, lm.SampleParams{Temperature: 1}, 300)
	assert.Equal(t, map[int]float64{1: 0.25, 3: 0.75}, roundMap(got))
	// A temperature so low that every other weight underflows.
	got = keptProbs(t, []float32{0, 1, 0.5}, lm.SampleParams{Temperature: 1e-5}, 50)
	assert.Equal(t, map[int]float64{1: 1}, got)
	// Below GreedyTemperature: greedy, even where logits/T would overflow.
	got = keptProbs(t, []float32{3e38, 1, 3.1e38}, lm.SampleParams{Temperature: 1e-300, TopP: 0.5}, 5)
	assert.Equal(t, map[int]float64{2: 1}, got)
}

func roundMap(m map[int]float64) map[int]float64 {
	out := map[int]float64{}
	for k, v := range m {
		out[k] = math.Round(v*1e6) / 1e6
	}
	return out
}

// TestSampleChiSquare draws 20,000 tokens with a fixed seed and compares
// the counts with the hand-derived distribution by Pearson's chi-square.
// T=0.5, top-k 3 on probabilities 0.4, 0.3, 0.2, 0.1 gives 16/29, 9/29,
// 4/29 (and never token 3). With 2 degrees of freedom the 0.1% critical
// value is 13.82. The seed makes the test deterministic.
func TestSampleChiSquare(t *testing.T) {
	const n = 20000
	want := []float64{16.0 / 29, 9.0 / 29, 4.0 / 29}
	s := NewTokenSampler(rand.New(rand.NewPCG(2025, 11)))
	counts := make([]int, 4)
	for i := 0; i < n; i++ {
		r, err := s.Sample(logits4, lm.SampleParams{Temperature: 0.5, TopK: 3})
		require.NoError(t, err)
		counts[r.Token]++
	}
	assert.Zero(t, counts[3])
	var chi2 float64
	for i, p := range want {
		e := p * n
		chi2 += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
	}
	t.Logf("counts %v, chi² = %.3f", counts, chi2)
	assert.Less(t, chi2, 13.82)

	// The same seed gives the same tokens.
	a := NewTokenSampler(rand.New(rand.NewPCG(5, 5)))
	b := NewTokenSampler(rand.New(rand.NewPCG(5, 5)))
	for i := 0; i < 100; i++ {
		ra, _ := a.Sample(logits4, lm.SampleParams{Temperature: 1, TopP: 0.9})
		rb, _ := b.Sample(logits4, lm.SampleParams{Temperature: 1, TopP: 0.9})
		require.Equal(t, ra, rb)
	}
}

// bruteTopP is top-p by a full sort, the definition spelled out.
func bruteTopP(keep []int32, w []float64, p float64) []int32 {
	ids := slices.Clone(keep)
	slices.SortStableFunc(ids, func(a, b int32) int {
		if w[a] != w[b] {
			if w[a] > w[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	var total float64
	for _, id := range keep {
		total += w[id]
	}
	var before float64
	n := 0
	for _, id := range ids {
		if before >= p*total {
			break
		}
		before += w[id]
		n++
	}
	return ids[:n]
}

// TestTopPMatchesFullSort: the thresholded top-p keeps the same set as a
// full sort, on peaked and flat random distributions.
func TestTopPMatchesFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for trial := 0; trial < 300; trial++ {
		n := 1 + r.IntN(3000)
		scale := []float64{0.01, 1, 5, 30}[trial%4]
		w := make([]float64, n)
		keep := make([]int32, n)
		for i := range w {
			w[i] = math.Exp(r.NormFloat64() * scale)
			keep[i] = int32(i)
		}
		mx := slices.Max(w)
		for i := range w {
			w[i] /= mx
		}
		if trial%7 == 0 { // ties
			for i := range w {
				w[i] = math.Round(w[i]*4) / 4
				if w[i] == 0 {
					w[i] = 0.25
				}
			}
		}
		p := r.Float64()
		want := bruteTopP(keep, w, p)
		got := topP(slices.Clone(keep), w, p)
		require.Equal(t, want, got, "trial %d n %d p %g", trial, n, p)
	}
}

func TestSampleErrors(t *testing.T) {
	s := NewTokenSampler(rand.New(rand.NewPCG(1, 1)))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	cases := []struct {
		name   string
		logits []float32
		p      lm.SampleParams
		want   string
	}{
		{"empty", nil, lm.SampleParams{Temperature: 1}, "empty logits"},
		{"nan", []float32{0, nan}, lm.SampleParams{Temperature: 1}, "logit 1 is NaN"},
		{"+inf", []float32{inf, 0}, lm.SampleParams{Temperature: 1}, "logit 0 is +Inf"},
		{"all -inf", []float32{-inf, -inf}, lm.SampleParams{Temperature: 1}, "all 2 logits are -Inf"},
		{"negative temperature", logits4, lm.SampleParams{Temperature: -1}, "temperature -1"},
		{"nan temperature", logits4, lm.SampleParams{Temperature: math.NaN()}, "temperature NaN"},
		{"top_p > 1", logits4, lm.SampleParams{Temperature: 1, TopP: 1.5}, "top_p 1.5"},
		{"top_p < 0", logits4, lm.SampleParams{Temperature: 1, TopP: -0.1}, "top_p -0.1"},
		{"top_k", logits4, lm.SampleParams{Temperature: 1, TopK: -2}, "top_k -2"},
		{"min_p", logits4, lm.SampleParams{Temperature: 1, MinP: 2}, "min_p 2"},
		{"max_new", logits4, lm.SampleParams{MaxNewTokens: -1}, "max_new_tokens -1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Sample(c.logits, c.p)
			require.ErrorIs(t, err, lm.ErrSampling)
			assert.ErrorContains(t, err, c.want)
		})
	}
}

func qwenSizedLogits() []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	l := make([]float32, 151936)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 3)
	}
	return l
}

func BenchmarkSample(b *testing.B) {
	logits := qwenSizedLogits()
	for _, c := range []struct {
		name string
		p    lm.SampleParams
	}{
		{"greedy", lm.SampleParams{}},
		{"T1", lm.SampleParams{Temperature: 1}},
		{"T1_topp0.95", lm.SampleParams{Temperature: 1, TopP: 0.95}},
		{"T0.7_topk50_topp0.9", lm.SampleParams{Temperature: 0.7, TopK: 50, TopP: 0.9}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := NewTokenSampler(rand.New(rand.NewPCG(1, 1)))
			for i := 0; i < b.N; i++ {
				if _, err := s.Sample(logits, c.p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
