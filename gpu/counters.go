package gpu

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Counters are what a Backend asked of the driver and cuBLAS since New or
// the last ResetCounters: the work it queued, the bytes it moved between
// host and device, and the calls that made the host wait for the device.
// They describe the structure of a computation (how many kernels, how
// many copies and synchronizations per training step), not its speed,
// and are the same on a GPU and under the emulator's fake driver.
type Counters struct {
	// Launches counts cuLaunchKernel calls; Kernels splits them by
	// kernel name.
	Launches uint64
	Kernels  map[string]uint64
	// Gemms counts cuBLAS products (GemmEx, GemmStridedBatchedEx).
	Gemms uint64
	// GemmBytes is the memory the cuBLAS products' operands span: A and
	// B read, C written, and read as well when Beta ≠ 0 — bytes each
	// product must move at least, whatever its tiling.
	GemmBytes uint64
	// HtoD and DtoH count host-to-device and device-to-host copies,
	// HtoDBytes and DtoHBytes their sizes.
	HtoD, HtoDBytes uint64
	DtoH, DtoHBytes uint64
	// DtoD counts device-to-device copies (Copy; the KV cache's block
	// copies are a kernel, counted in Launches). They are queued on the
	// stream and make the host wait for nothing.
	DtoD uint64
	// StreamSyncs counts cuStreamSynchronize calls (Synchronize, Close,
	// Profile).
	StreamSyncs uint64
	// DeviceAllocs and DeviceFrees count the allocator's cuMemAlloc and
	// cuMemFree calls (blocks served from or returned to its cache are
	// not counted).
	DeviceAllocs, DeviceFrees uint64
	// HtoDAsync counts the host-to-device copies (of those in HtoD) that
	// were asynchronous, from pinned staging memory: the one upload of
	// each round trip's step data (see WithLaunchQueue).
	HtoDAsync uint64
	// LateUploads counts host-to-device copies made after device work
	// was queued and before the host next waited for it: uploads in the
	// middle of a step, which a decode step should not have.
	LateUploads uint64
	// WorkerCalls counts round trips to the worker thread (calls that
	// waited for it); Queued counts the calls that joined the launch
	// queue instead (WithLaunchQueue).
	WorkerCalls, Queued uint64
	// GraphCaptures, GraphReplays and GraphFallbacks count the queued
	// work captured into a CUDA graph (and launched), replayed from one,
	// and run as plain launches because capture failed (WithCUDAGraphs).
	GraphCaptures, GraphReplays, GraphFallbacks uint64
}

// HostSyncs is the number of calls after which the host had waited for
// the device's queued work: stream synchronizations, device-to-host
// copies (they return when the data is on the host), host-to-device
// copies (cuMemcpyHtoD from pageable memory runs on the legacy stream,
// which waits for the Backend's stream; the asynchronous ones, HtoDAsync,
// do not count), and cuMemAlloc and cuMemFree
// (which may synchronize the device). Each one drains the device's
// queue, so a step whose count grows with its layers leaves the device
// idle once per layer.
func (c Counters) HostSyncs() uint64 {
	return c.StreamSyncs + c.DtoH + c.HtoD - c.HtoDAsync + c.DeviceAllocs + c.DeviceFrees
}

// Sub returns the counts of c minus those of an earlier snapshot old:
// what happened between the two.
func (c Counters) Sub(old Counters) Counters {
	d := Counters{
		Launches: c.Launches - old.Launches, Gemms: c.Gemms - old.Gemms, GemmBytes: c.GemmBytes - old.GemmBytes,
		HtoD: c.HtoD - old.HtoD, HtoDBytes: c.HtoDBytes - old.HtoDBytes,
		DtoH: c.DtoH - old.DtoH, DtoHBytes: c.DtoHBytes - old.DtoHBytes,
		DtoD:         c.DtoD - old.DtoD,
		StreamSyncs:  c.StreamSyncs - old.StreamSyncs,
		DeviceAllocs: c.DeviceAllocs - old.DeviceAllocs, DeviceFrees: c.DeviceFrees - old.DeviceFrees,
		HtoDAsync: c.HtoDAsync - old.HtoDAsync, LateUploads: c.LateUploads - old.LateUploads,
		WorkerCalls: c.WorkerCalls - old.WorkerCalls, Queued: c.Queued - old.Queued,
		GraphCaptures: c.GraphCaptures - old.GraphCaptures, GraphReplays: c.GraphReplays - old.GraphReplays,
		GraphFallbacks: c.GraphFallbacks - old.GraphFallbacks,
		Kernels:        map[string]uint64{},
	}
	for k, n := range c.Kernels {
		if n -= old.Kernels[k]; n != 0 {
			d.Kernels[k] = n
		}
	}
	return d
}

// clone returns a copy of c whose Kernels map is its own.
func (c Counters) clone() Counters {
	c.Kernels = maps.Clone(c.Kernels)
	if c.Kernels == nil {
		c.Kernels = map[string]uint64{}
	}
	return c
}

// KernelTime is the device time of one kernel (or cuBLAS product kind, or
// copy direction) over the calls a profile recorded.
type KernelTime struct {
	// Name is the kernel's name; cuBLAS products are "gemm <inputs>
	// <op(A)><op(B)>" in row-major terms (e.g. "gemm bf16 NT" for x·Wᵀ),
	// copies "memcpy HtoD" and "memcpy DtoH".
	Name  string
	Calls int
	Total time.Duration
}

// profileSpan is one recorded call: its name and the milliseconds between
// its two events.
type profileSpan struct {
	name string
	ms   float32
}

// summarize adds up spans by name, largest total first (ties by name).
func summarize(spans []profileSpan) []KernelTime {
	by := map[string]*KernelTime{}
	for _, s := range spans {
		k := by[s.name]
		if k == nil {
			k = &KernelTime{Name: s.name}
			by[s.name] = k
		}
		k.Calls++
		k.Total += time.Duration(float64(s.ms) * float64(time.Millisecond))
	}
	out := make([]KernelTime, 0, len(by))
	for _, k := range by {
		out = append(out, *k)
	}
	slices.SortFunc(out, func(a, b KernelTime) int {
		if a.Total != b.Total {
			if a.Total > b.Total {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// gemmLabel names a cuBLAS product for profiles: its input type and the
// row-major transposes of A and B.
func gemmLabel(bf16, tA, tB bool) string {
	in := "f32"
	if bf16 {
		in = "bf16"
	}
	t := func(b bool) byte {
		if b {
			return 'T'
		}
		return 'N'
	}
	return "gemm " + in + " " + string([]byte{t(tA), t(tB)})
}
