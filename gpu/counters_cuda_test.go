//go:build agentrl_cuda && cgo

package gpu

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// TestCountersProfileAndPeak checks the instrumentation against calls
// whose driver traffic is known by construction: an upload of 1,000
// floats (one host-to-device copy of 4,000 bytes), an Add (one add_f32
// launch), a BF16 Gemm through cuBLAS (two f32_to_bf16 launches for its
// inputs, one product), a Copy between two buffers (one device-to-device
// copy), a Download of 10 floats (one copy of 40 bytes) and a Synchronize (one stream synchronization). The profile names
// each call once, and the peak in use covers the buffers alive at once.
func TestCountersProfileAndPeak(t *testing.T) {
	be := newOrSkip(t, WithProfile(true), WithPrecision(BF16))
	const n = 1000
	x, err := be.Alloc(n)
	require.NoError(t, err)
	y, err := be.Alloc(n)
	require.NoError(t, err)
	_, err = be.Profile() // drop the allocations' records, if any
	require.NoError(t, err)
	require.NoError(t, be.ResetCounters())
	require.NoError(t, be.ResetPeak())

	require.NoError(t, be.Upload(x, 0, make([]float32, n)))
	require.NoError(t, be.Add(y, x, x))
	// 10×10 = (10×100)·(100×10): x and y hold the operands.
	require.NoError(t, be.Gemm(backend.Gemm{M: 10, N: 10, K: 100, Alpha: 1}, x, y, x))
	require.NoError(t, be.Copy(y, 0, x, 0, 10))
	require.NoError(t, be.Download(make([]float32, 10), y, 0))
	require.NoError(t, be.Synchronize())

	c, err := be.Counters()
	require.NoError(t, err)
	want := Counters{
		Launches: 3, Kernels: map[string]uint64{"add_f32": 1, "f32_to_bf16": 2},
		// A and B of 1,000 bf16 each read, C of 100 float32 written.
		Gemms: 1, GemmBytes: 2*1000 + 2*1000 + 4*100,
		HtoD: 1, HtoDBytes: 4 * n, DtoH: 1, DtoHBytes: 40, DtoD: 1, StreamSyncs: 1,
	}
	if be.blas == nil { // the fallback GEMM: rounded float32 inputs, a tiled kernel
		want.Launches, want.Gemms, want.GemmBytes = 4, 0, 0
		want.Kernels = map[string]uint64{"add_f32": 1, "round_bf16": 2, "sgemm_tiled": 1}
	}
	// The Gemm's scratch for the converted inputs may come from the
	// device on a cold cache; everything else is above.
	want.DeviceAllocs, want.DeviceFrees = c.DeviceAllocs, c.DeviceFrees
	// Round trips to the worker: ResetPeak, Upload, Download, Synchronize
	// and Counters; the Add, the Gemm and the Copy were queued (the
	// Download ran them).
	want.WorkerCalls, want.Queued = 5, 3
	require.Equal(t, want, c)
	require.Equal(t, 3+c.DeviceAllocs+c.DeviceFrees, c.HostSyncs(), "upload, download, synchronize, and cuMemAlloc/Free")
	require.Equal(t, want.Sub(Counters{}), c.Sub(Counters{}), "Sub of zero is the identity")

	prof, err := be.Profile()
	require.NoError(t, err)
	calls := map[string]int{}
	for _, k := range prof {
		calls[k.Name] = k.Calls
		require.GreaterOrEqual(t, k.Total, time.Duration(0), k.Name)
	}
	wantCalls := map[string]int{"memcpy HtoD": 1, "add_f32": 1, "f32_to_bf16": 2, "gemm bf16 NN": 1, "memcpy DtoH": 1}
	if be.blas == nil {
		wantCalls = map[string]int{"memcpy HtoD": 1, "add_f32": 1, "round_bf16": 2, "sgemm_tiled": 1, "memcpy DtoH": 1}
	}
	require.Equal(t, wantCalls, calls)
	again, err := be.Profile()
	require.NoError(t, err)
	require.Empty(t, again, "Profile starts the record over")

	st := be.Stats()
	require.GreaterOrEqual(t, st.PeakInUse, uint64(2*roundSize(4*n)), "x and y were alive together")
	require.GreaterOrEqual(t, st.PeakReserved, st.PeakInUse)
	require.NoError(t, be.ResetCounters())
	c, err = be.Counters()
	require.NoError(t, err)
	require.Equal(t, Counters{Kernels: map[string]uint64{}, WorkerCalls: 1}, c, "the Counters call itself")
}

// TestProfileNeedsTheOption: Profile on a Backend made without
// WithProfile is an error, not an empty profile.
func TestProfileNeedsTheOption(t *testing.T) {
	be := newOrSkip(t)
	_, err := be.Profile()
	require.Error(t, err)
}
