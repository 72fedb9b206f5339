package backend

import (
	"math"
	"slices"

	"github.com/agentrl/agentrl/internal/quickselect"
)

// HostSampler draws tokens from host logits by SampleRow's rule, in
// float64: the CPU backend's SampleRows, and the reference the device
// samplers are checked against. It reuses its buffers across calls and
// is not safe for concurrent use; the zero value is ready.
type HostSampler struct {
	w     []float64 // weights exp(z·invT − max·invT) of the candidates, by id
	keep  []int32   // kept ids, increasing
	vals  []float32 // scratch: candidate logits for top-k
	order []int32   // scratch: top-p candidates in (logit desc, id asc) order
	tvals []float32 // scratch: the logits, for SampleRow.TopLogprobs
	tids  []int32   // scratch: the most likely ids
}

// Sample draws one token from logits by r (which must pass
// CheckSampleRows); a result with Token −1 marks logits with a NaN or
// +Inf, or none finite.
func (s *HostSampler) Sample(logits []float32, r SampleRow) SampleResult {
	best, maxL := -1, math.Inf(-1)
	for i, l := range logits {
		x := float64(l)
		if math.IsNaN(x) || math.IsInf(x, 1) {
			return SampleResult{Token: -1}
		}
		if x > maxL {
			best, maxL = i, x
		}
	}
	if best < 0 {
		return SampleResult{Token: -1}
	}
	rawLSE := func() float64 {
		var sum float64
		for _, l := range logits {
			sum += math.Exp(float64(l) - maxL)
		}
		return maxL + math.Log(sum)
	}
	if r.Greedy {
		lse := rawLSE()
		res := SampleResult{Token: int32(best), RawLogProb: float32(float64(logits[best]) - lse)}
		if r.TopLogprobs > 0 {
			res.Top = s.top(logits, r.TopLogprobs, lse, func(id int32) float64 {
				if id == int32(best) {
					return 0
				}
				return math.Inf(-1)
			})
		}
		return res
	}
	invT := 1 / r.Temperature
	zMax := maxL * invT
	if cap(s.w) < len(logits) {
		s.w = make([]float64, len(logits))
	}
	w := s.w[:len(logits)]
	keep := s.keep[:0]
	var sumW float64
	for i, l := range logits {
		w[i] = math.Exp(float64(l)*invT - zMax)
		sumW += w[i]
		if w[i] > 0 && w[i] >= r.MinP {
			keep = append(keep, int32(i))
		}
	}
	var lse float64
	if r.Temperature == 1 {
		lse = maxL + math.Log(sumW) // the weights are the raw softmax numerators
	} else {
		lse = rawLSE()
	}
	if r.TopK > 0 && r.TopK < len(keep) {
		vals := s.vals[:0]
		for _, id := range keep {
			vals = append(vals, logits[id])
		}
		kth := quickselect.KthLargest(vals, r.TopK)
		s.vals = vals
		out := keep[:0]
		for _, id := range keep {
			if logits[id] >= kth {
				out = append(out, id)
			}
		}
		keep = out
	}
	if r.TopP > 0 && r.TopP < 1 {
		keep = s.nucleus(keep, logits, w, r.TopP)
	}
	s.keep = keep
	var total float64
	for _, id := range keep {
		total += w[id]
	}
	target := SampleUniform(r.Seed, r.Step) * total
	tok := keep[len(keep)-1]
	var acc float64
	for _, id := range keep {
		acc += w[id]
		if acc > target {
			tok = id
			break
		}
	}
	logTotal := math.Log(total)
	res := SampleResult{
		Token:      tok,
		LogProb:    float32(float64(logits[tok])*invT - zMax - logTotal),
		RawLogProb: float32(float64(logits[tok]) - lse),
	}
	if r.TopLogprobs > 0 {
		res.Top = s.top(logits, r.TopLogprobs, lse, func(id int32) float64 {
			if _, kept := slices.BinarySearch(keep, id); !kept {
				return math.Inf(-1)
			}
			return float64(logits[id])*invT - zMax - logTotal
		})
	}
	return res
}

// top lists the n most likely tokens of logits (all of them when there
// are fewer), by decreasing logit then increasing id, with their raw
// log-probabilities (lse is the logits' log-sum-exp) and processed ones.
// Only the selection costs O(len(logits)); the list is a new slice.
func (s *HostSampler) top(logits []float32, n int, lse float64, processed func(id int32) float64) []TopLogProb {
	n = min(n, len(logits))
	vals := append(s.tvals[:0], logits...)
	kth := quickselect.KthLargest(vals, n)
	s.tvals = vals
	ids := s.tids[:0]
	for i, l := range logits {
		if l > kth {
			ids = append(ids, int32(i))
		}
	}
	// Fewer than n lie above the n-th largest: ties with it fill the
	// list, lowest ids first.
	for i, l := range logits {
		if len(ids) == n {
			break
		}
		if l == kth {
			ids = append(ids, int32(i))
		}
	}
	slices.SortFunc(ids, func(a, b int32) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return int(a - b)
	})
	s.tids = ids
	out := make([]TopLogProb, len(ids))
	for j, id := range ids {
		out[j] = TopLogProb{Token: id, LogProb: float32(processed(id)), RawLogProb: float32(float64(logits[id]) - lse)}
	}
	return out
}

// nucleus keeps, of keep (increasing ids), the tokens that top-p keeps:
// in order of decreasing logit then increasing id, each whose preceding
// weight is below p times the total. Only tokens above a logit threshold
// are sorted: the others follow all of them in the order, so once those
// above reach p·total the rest cannot be kept. The result is in
// increasing id order.
func (s *HostSampler) nucleus(keep []int32, logits []float32, w []float64, p float64) []int32 {
	var total float64
	zTop := float32(math.Inf(-1))
	for _, id := range keep {
		total += w[id]
		zTop = max(zTop, logits[id])
	}
	target := p * total
	order := s.order[:0]
	// Thresholds in logits: weights above e⁻⁵ ≈ 7e-3, e⁻¹⁵, e⁻⁴⁰ of the
	// largest at temperature 1 (fewer at higher temperatures), then all.
	for _, gap := range []float32{5, 15, 40, float32(math.Inf(1))} {
		order = order[:0]
		for _, id := range keep {
			if logits[id] >= zTop-gap {
				order = append(order, id)
			}
		}
		slices.SortFunc(order, func(a, b int32) int {
			switch {
			case logits[a] > logits[b]:
				return -1
			case logits[a] < logits[b]:
				return 1
			}
			return int(a - b)
		})
		var before float64
		n := 0
		for _, id := range order {
			if before >= target {
				break
			}
			before += w[id]
			n++
		}
		if n < len(order) || before >= target || math.IsInf(float64(gap), 1) {
			order = order[:n]
			break
		}
	}
	s.order = order
	out := append(keep[:0], order...)
	slices.Sort(out)
	return out
}
