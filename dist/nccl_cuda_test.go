//go:build agentrl_cuda && cgo

package dist

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/gpu"
)

// openOneRankNCCL opens CUDA device 0 and a one-rank NCCL communicator
// on it through Open — the code path of a job's ranks, without the
// rendezvous — or skips when the machine has no GPU or no NCCL.
func openOneRankNCCL(t testing.TB) (*gpu.Backend, DeviceComm) {
	ctx := context.Background()
	g, err := gpu.New(ctx, gpu.WithPrecision(gpu.FP32))
	if errors.Is(err, gpu.ErrNoDriver) || errors.Is(err, gpu.ErrNoDevice) {
		t.Skip("no GPU:", err)
	}
	require.NoError(t, err)
	c, err := Open(ctx, Options{Env: &Env{Launcher: Alone, Size: 1}, Backend: g, Engine: EngineNCCL, Timeout: time.Minute})
	if errors.Is(err, gpu.ErrNoNCCL) {
		_ = g.Close()
		t.Skip("no NCCL:", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, c.Close())
		assert.NoError(t, g.Close())
	})
	dc, ok := c.(DeviceComm)
	require.True(t, ok, "an NCCL communicator runs on the device")
	return g, dc
}

// TestNCCLOneRank: every collective of a one-rank NCCL communicator, on
// device buffers and on host buffers staged through the device. One
// rank's reduction is its own data, its gather and scatter a copy.
func TestNCCLOneRank(t *testing.T) {
	g, c := openOneRankNCCL(t)
	ctx := context.Background()
	require.NoError(t, checkCollectives(ctx, t, c))

	buf, err := g.Alloc(5)
	require.NoError(t, err)
	require.NoError(t, g.Upload(buf, 0, []float32{1, 2, 3, 4, 5}))
	require.NoError(t, c.AllReduce(ctx, Device{Buffer: buf, Off: 1, N: 3}, Sum))
	out, err := g.Alloc(3)
	require.NoError(t, err)
	require.NoError(t, c.AllGather(ctx, Device{Buffer: buf, Off: 1, N: 3}, Device{Buffer: out, N: 3}))
	got := make([]float32, 3)
	require.NoError(t, g.Download(got, out, 0))
	assert.Equal(t, []float32{2, 3, 4}, got)
}

// TestNCCLBandwidth prints the one-rank all-reduce's time, algorithm
// bandwidth (bytes/time) and bus bandwidth (algbw·2(n−1)/n, nccl-tests'
// formula, 0 for one rank) at several sizes, and beside it NCCL's own
// figure from nccl-tests' all_reduce_perf when it is on PATH.
func TestNCCLBandwidth(t *testing.T) {
	g, c := openOneRankNCCL(t)
	ctx := context.Background()
	n := c.Size()
	for _, size := range []int{8 << 20, 64 << 20, 256 << 20, 1 << 30} {
		buf, err := g.Alloc(size / 4)
		require.NoError(t, err)
		d := Device{Buffer: buf, N: size / 4}
		for range 3 { // warm up
			require.NoError(t, c.AllReduce(ctx, d, Sum))
		}
		const iters = 20
		start := time.Now()
		for range iters {
			require.NoError(t, c.AllReduce(ctx, d, Sum))
		}
		sec := time.Since(start).Seconds() / iters
		alg := float64(size) / sec / 1e9
		t.Logf("all-reduce of %4d MiB on %d rank(s): %9.1f µs, algbw %7.1f GB/s, busbw %7.1f GB/s", size>>20, n, sec*1e6, alg, alg*2*float64(n-1)/float64(n))
		require.NoError(t, g.Free(buf))
	}
	perf, err := exec.LookPath("all_reduce_perf")
	if err != nil {
		t.Log("nccl-tests' all_reduce_perf is not on PATH: build NVIDIA/nccl-tests and run all_reduce_perf -b 8M -e 1G -f 2 -g 1 for NCCL's own figure")
		return
	}
	out, err := exec.Command(perf, "-b", "8M", "-e", "1G", "-f", "2", "-g", "1").CombinedOutput()
	require.NoError(t, err, "%s", out)
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	t.Logf("NCCL's own figure (%s):\n%s", perf, strings.Join(lines, "\n"))
}
