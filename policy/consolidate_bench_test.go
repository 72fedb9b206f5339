package policy

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/atomicfile"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// peakHeap runs f and returns the highest Go heap (HeapAlloc, sampled
// every millisecond and at the end) above the heap before it, and the
// bytes it allocated.
func peakHeap(f func()) (peak, alloc uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, total := ms.HeapAlloc, ms.TotalAlloc
	var mu sync.Mutex
	sample := func() {
		var s runtime.MemStats
		runtime.ReadMemStats(&s)
		mu.Lock()
		peak = max(peak, s.HeapAlloc-min(base, s.HeapAlloc))
		mu.Unlock()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	f()
	sample()
	close(done)
	wg.Wait()
	runtime.ReadMemStats(&ms)
	return peak, ms.TotalAlloc - total
}

// BenchmarkConsolidatePeakHeap measures the peak Go heap of what
// examples/consolidate does with a checkpoint of a 334 MiB model (Qwen3
// shapes, 16 Ki vocabulary, 1024 wide, 6 layers; its largest tensor, the
// tied embedding, 64 MiB): WriteModel reading the weights from a
// safetensors file (exportFull), in float32 and in bfloat16, and
// ConsolidateState joining the optimizer state of two ranks (668 MiB of
// moments; its largest parameter's moment is 64 MiB). It reports
// peak-heap-MiB and alloc-MiB besides the model's size. Run it with
//
//	go test -run '^$' -bench ConsolidatePeakHeap -benchtime 1x ./policy/
func BenchmarkConsolidatePeakHeap(b *testing.B) {
	cfg, err := ReadConfig(filepath.Join("testdata", "model", "qwen3-tiny"))
	require.NoError(b, err)
	cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 16384, 1024, 2816, 6
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = 16, 8, 64
	modelMiB := float64(4*cfg.NumParams()) / (1 << 20)
	src := b.TempDir()
	require.NoError(b, WriteModel(src, cfg, newPatternRead(cfg).read, lm.SaveOptions{}))
	f, err := safetensors.Open(filepath.Join(src, safetensors.SingleFileName))
	require.NoError(b, err)
	defer f.Close()
	report := func(b *testing.B, peak, alloc uint64, size float64) {
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(alloc)/(1<<20), "alloc-MiB")
		b.ReportMetric(size, "data-MiB")
	}
	for _, dt := range []safetensors.DType{safetensors.F32, safetensors.BF16} {
		b.Run("model-"+string(dt), func(b *testing.B) {
			for range b.N {
				out := filepath.Join(b.TempDir(), "hf")
				peak, alloc := peakHeap(func() {
					require.NoError(b, WriteModel(out, cfg, f.ReadFloat32, lm.SaveOptions{DType: dt}))
				})
				report(b, peak, alloc, modelMiB)
				require.NoError(b, os.RemoveAll(out))
			}
		})
	}
	b.Run("optimizer-state", func(b *testing.B) {
		var sizes []int
		for _, sp := range cfg.TensorSpecs() {
			sizes = append(sizes, int(sp.Size()))
		}
		dir := b.TempDir()
		shardedStateFixture(b, dir, sizes, 2, DefaultShardUnitElements)
		for range b.N {
			out := filepath.Join(b.TempDir(), StateFileName)
			peak, alloc := peakHeap(func() {
				require.NoError(b, atomicfile.Write(out, 0o600, func(w io.Writer) error { return ConsolidateState(dir, w) }))
			})
			report(b, peak, alloc, 2*modelMiB)
			require.NoError(b, os.Remove(out))
		}
	})
}
