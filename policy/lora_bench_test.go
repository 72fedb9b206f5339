package policy

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// loraBenchCases are the adapters the LoRA benchmarks put on benchConfig's
// model, beside its full fine-tuning (BenchmarkModelTrainStep):
//
//	go test ./policy -run '^$' -bench 'ModelTrain(Step|Memory)' -benchtime 3x -count 3
var loraBenchCases = []struct {
	name string
	cfg  LoRAConfig
}{
	{"r16-all-linear", LoRAConfig{Rank: 16, Alpha: 32, TargetModules: []string{LoRAAllLinear}}},
	{"r16-qv", LoRAConfig{Rank: 16, Alpha: 32}},
}

func benchLoRAModel(b *testing.B, cfg LoRAConfig) *Model {
	m := benchModel(b)
	require.NoError(b, m.AddLoRA(cfg, 1))
	return m
}

// trainableParams counts the elements the optimizer updates.
func trainableParams(m *Model) int {
	n := 0
	for _, p := range m.Params() {
		n += len(p.Data)
	}
	return n
}

// BenchmarkModelTrainStepLoRA is BenchmarkModelTrainStep with the base
// weights frozen under an adapter: the same forward plus the adapters'
// small products, a backward without the base weights' dW products, and
// AdamW over the adapters alone.
func BenchmarkModelTrainStepLoRA(b *testing.B) {
	for _, tc := range loraBenchCases {
		b.Run(tc.name, func(b *testing.B) {
			m := benchLoRAModel(b, tc.cfg)
			opt, err := NewAdamW(m.Params(), DefaultAdamWConfig())
			require.NoError(b, err)
			runTrainSteps(b, m, opt)
			b.ReportMetric(float64(trainableParams(m)), "trainable")
		})
	}
}

// BenchmarkModelTrainMemoryLoRA reports the Go heap in use after 5 warm-up
// steps (weights, gradients, optimizer state and the allocator's
// retained memory) with full fine-tuning and with each adapter, on the
// batch of BenchmarkModelTrainMemory. One model per sub-benchmark, so
// run it with -benchtime 1x; the timed loop repeats the measure.
func BenchmarkModelTrainMemoryLoRA(b *testing.B) {
	cases := append([]struct {
		name string
		cfg  LoRAConfig
	}{{"full", LoRAConfig{}}}, loraBenchCases...)
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			runtime.GC()
			m, err := New(benchConfig(b), 1)
			require.NoError(b, err)
			defer m.Close()
			if tc.cfg.Rank > 0 {
				require.NoError(b, m.AddLoRA(tc.cfg, 1))
			}
			batch := benchBatch(m.Config().VocabSize)
			batch.Tokens = batch.Tokens[:2]
			grad := meanLossGrad(batch)
			opt, err := NewAdamW(m.Params(), DefaultAdamWConfig())
			require.NoError(b, err)
			ctx := context.Background()
			var ms runtime.MemStats
			for range b.N {
				for range 5 {
					require.NoError(b, trainStep(ctx, m, opt, batch, grad))
				}
				runtime.GC()
				runtime.ReadMemStats(&ms)
			}
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heapMiB_warm")
			b.ReportMetric(float64(trainableParams(m)), "trainable")
		})
	}
}
