package advantage

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchBatch is b trajectories of t tokens, 8 per prompt, binary scores,
// each with three 200-token tool outputs (mask 0), with critic values and
// greedy baselines.
func benchBatch(b, t int) Input {
	rng := rand.New(rand.NewPCG(1, 2))
	in := Input{
		Scores:         make([]float64, b),
		Groups:         make([]string, b),
		Mask:           make([][]float32, b),
		Values:         make([][]float32, b),
		BaselineScores: make([]float64, b),
	}
	for i := range b {
		in.Scores[i] = float64(rng.IntN(2))
		in.Groups[i] = fmt.Sprintf("prompt-%d", i/8)
		in.BaselineScores[i] = float64(rng.IntN(2))
		mask := make([]float32, t)
		values := make([]float32, t)
		for j := range mask {
			mask[j] = 1
			values[j] = rng.Float32()
		}
		for span := 1; span <= 3; span++ {
			start := span * t / 4
			for j := start; j < min(t, start+200); j++ {
				mask[j] = 0
			}
		}
		in.Mask[i], in.Values[i] = mask, values
	}
	return in
}

// BenchmarkCompute times each estimator on 512 trajectories × 4096 tokens,
// and reports ns per token. Reproduce with
//
//	go test -run '^$' -bench BenchmarkCompute -benchtime 20x ./advantage/
//
// testdata/bench_ref.py times verl's PyTorch implementation on the same
// shapes, for comparison.
func BenchmarkCompute(b *testing.B) {
	const B, T = 512, 4096
	full := benchBatch(B, T)
	for _, name := range NewRegistry().Names() {
		// Pass only what the estimator reads, as a trainer would: GRPO
		// runs have no critic, so no Values to validate.
		in := full
		if name != GAE {
			in.Values = nil
		}
		if name != ReMax {
			in.BaselineScores = nil
		}
		b.Run(string(name), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compute(Config{Estimator: name}, in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(B*T), "ns/token")
		})
	}
}
