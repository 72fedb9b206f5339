package reward

import (
	"context"
	"testing"
)

// BenchmarkMathVerifyCorpus measures checks per second on the labelled
// corpus (extraction, parsing and equivalence of each case), one goroutine.
// Compare with testdata/bench_sympy.py on the same machine.
func BenchmarkMathVerifyCorpus(b *testing.B) {
	cases := loadMathCases(b)
	ctx := context.Background()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		for _, c := range cases {
			MathVerify(ctx, c.Response, c.Gold)
			n++
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "checks/s")
}

// BenchmarkMathVerifySimple is the common case: a boxed fraction against
// a decimal gold answer.
func BenchmarkMathVerifySimple(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		MathVerify(ctx, `so the answer is \boxed{\frac{3}{4}}.`, "0.75")
	}
}
