package loss_test

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"gorgonia.org/tensor"

	"github.com/agentrl/agentrl/loss"
)

// benchBatch is a [rows, cols] batch with ragged lengths (row r holds
// cols − r·cols/(2·rows) tokens), as a GRPO micro-batch would be.
func benchBatch(rows, cols int) loss.Batch {
	rng := rand.New(rand.NewPCG(1, 1))
	n := rows * cols
	lp, old, adv, mask := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for r := range rows {
		length := cols - r*cols/(2*rows)
		a := float32(rng.NormFloat64())
		for t := range cols {
			i := r*cols + t
			lp[i] = float32(-rng.ExpFloat64())
			old[i] = lp[i] + float32(0.1*rng.NormFloat64())
			adv[i] = a
			if t < length {
				mask[i] = 1
			}
		}
	}
	mk := func(v []float32) *tensor.Dense {
		return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(v))
	}
	return loss.Batch{LogProbs: mk(lp), OldLogProbs: mk(old), Advantages: mk(adv), Mask: mk(mask)}
}

// BenchmarkCompute measures vanilla PPO-clip, token-mean, on B = 64,
// T = 4096: "cached" reuses the compiled graph in a Computer, "uncached"
// builds, differentiates and compiles it on every call (package Compute).
func BenchmarkCompute(b *testing.B) { benchCompute(b, 64, 4096) }

// BenchmarkComputeSmall is BenchmarkCompute on B = 8, T = 256, where
// building the graph weighs more.
func BenchmarkComputeSmall(b *testing.B) { benchCompute(b, 8, 256) }

func benchCompute(b *testing.B, rows, cols int) {
	batch := benchBatch(rows, cols)
	cfg := loss.Config{Mode: loss.ModeVanilla, ClipLow: 0.2, ClipHigh: 0.28, ClipC: 10, Agg: loss.AggTokenMean}
	// The machine is shared, so besides wall time per token the benchmark
	// reports process CPU time per token (getrusage, all threads, GC
	// included), which other tenants' load inflates much less.
	var cpu0 int64
	start := func() { cpu0 = cpuNanos() }
	report := func(b *testing.B) {
		tokens := float64(b.N) * float64(rows*cols)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/tokens, "ns/token")
		b.ReportMetric(float64(cpuNanos()-cpu0)/tokens, "cpu-ns/token")
	}
	b.Run("cached", func(b *testing.B) {
		c := loss.NewComputer(nil)
		if _, err := c.Compute(cfg, batch); err != nil {
			b.Fatal(err)
		}
		start()
		for b.Loop() {
			if _, err := c.Compute(cfg, batch); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("uncached", func(b *testing.B) {
		start()
		for b.Loop() {
			if _, err := loss.Compute(cfg, batch); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
}

// cpuNanos is the user+system CPU time of the process so far.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
