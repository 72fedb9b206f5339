package gpu

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	spans := []profileSpan{{"b", 1}, {"a", 0.5}, {"b", 2}, {"c", 0.5}, {"a", 0.25}}
	// b: 2 calls, 3 ms; a: 2 calls, 0.75 ms; c: 1 call, 0.5 ms.
	want := []KernelTime{
		{Name: "b", Calls: 2, Total: 3 * time.Millisecond},
		{Name: "a", Calls: 2, Total: 750 * time.Microsecond},
		{Name: "c", Calls: 1, Total: 500 * time.Microsecond},
	}
	require.Equal(t, want, summarize(spans))
	require.Empty(t, summarize(nil))
	// Equal totals are ordered by name.
	require.Equal(t, []KernelTime{{Name: "x", Calls: 1, Total: time.Millisecond}, {Name: "y", Calls: 1, Total: time.Millisecond}},
		summarize([]profileSpan{{"y", 1}, {"x", 1}}))
}

func TestGemmLabel(t *testing.T) {
	cases := []struct {
		bf16, tA, tB bool
		want         string
	}{
		{true, false, true, "gemm bf16 NT"},
		{true, true, false, "gemm bf16 TN"},
		{false, false, false, "gemm f32 NN"},
		{false, true, true, "gemm f32 TT"},
	}
	for _, c := range cases {
		require.Equal(t, c.want, gemmLabel(c.bf16, c.tA, c.tB))
	}
}

func TestCountersSubAndHostSyncs(t *testing.T) {
	old := Counters{Launches: 3, Kernels: map[string]uint64{"a": 2, "b": 1}, HtoD: 1, HtoDBytes: 8, StreamSyncs: 1, DtoD: 1}
	now := Counters{Launches: 7, Kernels: map[string]uint64{"a": 2, "b": 4, "c": 1}, HtoD: 3, HtoDBytes: 20,
		DtoH: 2, DtoHBytes: 16, DtoD: 4, StreamSyncs: 2, DeviceAllocs: 1, Gemms: 5}
	d := now.Sub(old)
	require.Equal(t, Counters{Launches: 4, Kernels: map[string]uint64{"b": 3, "c": 1}, HtoD: 2, HtoDBytes: 12,
		DtoH: 2, DtoHBytes: 16, DtoD: 3, StreamSyncs: 1, DeviceAllocs: 1, Gemms: 5}, d)
	// 1 stream sync + 2 DtoH + 2 HtoD + 1 alloc; device copies wait for nothing.
	require.Equal(t, uint64(6), d.HostSyncs())
	// Asynchronous uploads from pinned memory make the host wait for
	// nothing; the new counts subtract like the others.
	now.HtoDAsync, now.LateUploads, now.WorkerCalls, now.Queued = 1, 2, 9, 40
	now.GraphCaptures, now.GraphReplays, now.GraphFallbacks = 1, 5, 1
	old.WorkerCalls, old.Queued, old.GraphReplays = 4, 10, 2
	d = now.Sub(old)
	require.Equal(t, uint64(5), d.HostSyncs(), "one of the two uploads was asynchronous")
	require.Equal(t, []uint64{1, 2, 5, 30, 1, 3, 1},
		[]uint64{d.HtoDAsync, d.LateUploads, d.WorkerCalls, d.Queued, d.GraphCaptures, d.GraphReplays, d.GraphFallbacks})
	c := now.clone()
	c.Kernels["a"]++
	require.Equal(t, uint64(2), now.Kernels["a"], "clone copies the map")
}
