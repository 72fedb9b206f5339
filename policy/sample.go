package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/agentrl/agentrl/internal/quickselect"
	"github.com/agentrl/agentrl/lm"
)

// Sampled is one token drawn from logits.
type Sampled struct {
	Token int
	// LogProb is the token's log-probability under the distribution it was
	// drawn from: softmax(logits/T) restricted to the tokens that min-p,
	// top-k and top-p keep, renormalised. 0 for greedy decoding.
	LogProb float64
	// RawLogProb is log-softmax of the unprocessed logits at the token
	// (temperature 1, nothing removed), vLLM's default returned logprob.
	RawLogProb float64
}

// TokenSampler draws tokens from logits with SampleParams' temperature,
// min-p, top-k and top-p, from a random source passed in. It reuses its
// buffers across calls and is not safe for concurrent use. It samples
// logits the caller holds on the host; Model.Generate samples on the
// backend instead (backend.Decoder.SampleRows), with the same truncations
// but a counter-based random number per token (backend.SampleRow), so
// its tokens are not TokenSampler's for the same seed.
type TokenSampler struct {
	rng  *rand.Rand
	w    []float64 // unnormalised probabilities exp(z - max z)
	keep []int32   // kept token ids
	vals []float64 // scratch for top-k selection
}

// NewTokenSampler returns a sampler drawing from rng, for example
// rand.New(rand.NewPCG(seed, stream)).
func NewTokenSampler(rng *rand.Rand) *TokenSampler { return &TokenSampler{rng: rng} }

// Sample draws one token from logits.
//
// The processing follows vLLM's v1 sampler (vllm/v1/sample/sampler.py and
// ops/topk_topp_sampler.py): a temperature below GreedyTemperature is
// greedy (the first maximal logit, as torch.argmax); otherwise the logits are divided by the
// temperature, then min-p removes tokens whose probability is below MinP
// times the largest, then top-k keeps the TopK largest (and all tied with
// the K-th, as vLLM and transformers' TopKLogitsWarper do), then top-p
// keeps, in order of decreasing probability (ties by increasing token id),
// each token whose preceding cumulative probability is below TopP — the
// smallest set reaching TopP, never empty — with probabilities
// renormalised over what top-k and min-p left. transformers applies min-p
// last instead; the two orders differ only when min-p is combined with
// top-k or top-p.
//
// Logits must be finite or -Inf, with at least one finite; NaN or +Inf is
// an error.
func (s *TokenSampler) Sample(logits []float32, p lm.SampleParams) (Sampled, error) {
	if err := lm.CheckSampleParams(p); err != nil {
		return Sampled{}, err
	}
	if len(logits) == 0 {
		return Sampled{}, fmt.Errorf("%w: empty logits", lm.ErrSampling)
	}
	// One pass: validate, find the maximum and its first index.
	best, maxL := -1, math.Inf(-1)
	for i, l := range logits {
		x := float64(l)
		if math.IsNaN(x) || math.IsInf(x, 1) {
			return Sampled{}, fmt.Errorf("%w: logit %d is %g", lm.ErrSampling, i, x)
		}
		if x > maxL {
			best, maxL = i, x
		}
	}
	if best < 0 {
		return Sampled{}, fmt.Errorf("%w: all %d logits are -Inf", lm.ErrSampling, len(logits))
	}
	if p.Temperature < lm.GreedyTemperature {
		var rawSum float64
		for _, l := range logits {
			rawSum += math.Exp(float64(l) - maxL)
		}
		return Sampled{Token: best, LogProb: 0, RawLogProb: float64(logits[best]) - maxL - math.Log(rawSum)}, nil
	}

	invT := 1 / p.Temperature
	zMax := maxL * invT
	if cap(s.w) < len(logits) {
		s.w = make([]float64, len(logits))
	}
	w := s.w[:len(logits)]
	// min-p: w_i/w_max < MinP with w_max = exp(0) = 1, so the maximum is
	// always kept.
	keep := s.keep[:0]
	var sumW float64
	for i, l := range logits {
		w[i] = math.Exp(float64(l)*invT - zMax)
		sumW += w[i]
		if w[i] > 0 && w[i] >= p.MinP {
			keep = append(keep, int32(i))
		}
	}
	// At temperature 1 the weights are the raw softmax numerators.
	rawSum := sumW
	if p.Temperature != 1 {
		rawSum = 0
		for _, l := range logits {
			rawSum += math.Exp(float64(l) - maxL)
		}
	}
	rawLSE := maxL + math.Log(rawSum)
	if p.TopK > 0 && p.TopK < len(keep) {
		if cap(s.vals) < len(keep) {
			s.vals = make([]float64, len(keep))
		}
		keep = topK(keep, w, p.TopK, s.vals[:len(keep)])
	}
	if p.TopP > 0 && p.TopP < 1 {
		keep = topP(keep, w, p.TopP)
	}
	s.keep = keep
	var total float64
	for _, id := range keep {
		total += w[id]
	}
	u := s.rng.Float64() * total
	tok := int(keep[len(keep)-1])
	var acc float64
	for _, id := range keep {
		acc += w[id]
		if u < acc {
			tok = int(id)
			break
		}
	}
	lp := (float64(logits[tok])*invT - zMax) - math.Log(total)
	return Sampled{Token: tok, LogProb: lp, RawLogProb: float64(logits[tok]) - rawLSE}, nil
}

// topK keeps the ids whose weight is at least the k-th largest; vals is
// scratch of len(keep).
func topK(keep []int32, w []float64, k int, vals []float64) []int32 {
	for i, id := range keep {
		vals[i] = w[id]
	}
	kth := quickselect.KthLargest(vals, k)
	out := keep[:0]
	for _, id := range keep {
		if w[id] >= kth {
			out = append(out, id)
		}
	}
	return out
}

// topP keeps the nucleus of the kept ids: in order of decreasing weight
// (then increasing id), each id whose preceding cumulative weight is below
// p times the total. Only ids above a threshold are sorted: any id below
// it follows all of them in the order, so if the ones above already reach
// p·total the rest cannot be kept.
func topP(keep []int32, w []float64, p float64) []int32 {
	var total float64
	for _, id := range keep {
		total += w[id]
	}
	target := p * total
	cands := make([]int32, 0, 64)
	for _, thr := range []float64{1e-2, 1e-4, 1e-8, 0} {
		cands = cands[:0]
		for _, id := range keep {
			if w[id] >= thr {
				cands = append(cands, id)
			}
		}
		slices.SortFunc(cands, func(a, b int32) int {
			switch {
			case w[a] > w[b]:
				return -1
			case w[a] < w[b]:
				return 1
			}
			return int(a - b)
		})
		var before float64
		n := 0
		for _, id := range cands {
			if before >= target {
				break
			}
			before += w[id]
			n++
		}
		if n < len(cands) || before >= target || thr == 0 {
			return append(keep[:0], cands[:n]...)
		}
	}
	return keep // unreachable: thr 0 takes every id
}
