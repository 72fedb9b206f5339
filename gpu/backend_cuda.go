//go:build agentrl_cuda && cgo

package gpu

// The cgo shim: the CUDA driver API and cuBLAS, both opened with dlopen at
// run time so that a binary built with the agentrl_cuda tag starts on any machine
// and reports a missing driver or library as an error. The headers give
// the types and enum values only; every call goes through a function
// pointer looked up with dlsym by its versioned name (cuMemAlloc_v2 …, as
// cuda.h's macros would name them).

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <cuda.h>
#include <cublas_v2.h>

typedef struct {
	void* lib;
	CUresult (*p_init)(unsigned int);
	CUresult (*p_driverVersion)(int*);
	CUresult (*p_deviceCount)(int*);
	CUresult (*p_deviceGet)(CUdevice*, int);
	CUresult (*p_deviceName)(char*, int, CUdevice);
	CUresult (*p_deviceAttr)(int*, CUdevice_attribute, CUdevice);
	CUresult (*p_primaryRetain)(CUcontext*, CUdevice);
	CUresult (*p_primaryRelease)(CUdevice);
	CUresult (*p_ctxSetCurrent)(CUcontext);
	CUresult (*p_streamCreate)(CUstream*, unsigned int);
	CUresult (*p_streamDestroy)(CUstream);
	CUresult (*p_streamSync)(CUstream);
	CUresult (*p_memAlloc)(CUdeviceptr*, size_t);
	CUresult (*p_memFree)(CUdeviceptr);
	CUresult (*p_memcpyHtoD)(CUdeviceptr, const void*, size_t);
	CUresult (*p_memcpyDtoH)(void*, CUdeviceptr, size_t);
	CUresult (*p_memcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*p_memsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
	CUresult (*p_memGetInfo)(size_t*, size_t*);
	CUresult (*p_moduleLoadData)(CUmodule*, const void*);
	CUresult (*p_moduleUnload)(CUmodule);
	CUresult (*p_moduleGetFunction)(CUfunction*, CUmodule, const char*);
	CUresult (*p_funcSetAttr)(CUfunction, CUfunction_attribute, int);
	CUresult (*p_launch)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
		unsigned int, CUstream, void**, void**);
	CUresult (*p_errorString)(CUresult, const char**);
	// Events, for profiles only: optional, so that a driver without them
	// still runs everything else.
	CUresult (*p_eventCreate)(CUevent*, unsigned int);
	CUresult (*p_eventRecord)(CUevent, CUstream);
	CUresult (*p_eventElapsed)(float*, CUevent, CUevent);
	CUresult (*p_eventDestroy)(CUevent);
	// Pinned staging and CUDA graphs (queue_cuda.go): optional as well;
	// without them a step's uploads are plain copies and its launches
	// are never captured.
	CUresult (*p_memAllocHost)(void**, size_t);
	CUresult (*p_memFreeHost)(void*);
	CUresult (*p_memcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
	CUresult (*p_eventSync)(CUevent);
	CUresult (*p_beginCapture)(CUstream, CUstreamCaptureMode);
	CUresult (*p_endCapture)(CUstream, CUgraph*);
	CUresult (*p_graphInstantiate)(CUgraphExec*, CUgraph, unsigned long long);
	CUresult (*p_graphLaunch)(CUgraphExec, CUstream);
	CUresult (*p_graphExecDestroy)(CUgraphExec);
	CUresult (*p_graphDestroy)(CUgraph);
} drv_t;

#define DRV_SYM(field, name) if ((d->field = (void*)dlsym(d->lib, name)) == NULL) { *missing = name; return 0; }

// drv_open dlopens the driver library and resolves every symbol; it returns
// 0 and sets *missing (to a symbol name, or NULL when the library itself
// could not be opened) on failure.
static int drv_open(drv_t* d, const char* libname, const char** missing) {
	*missing = NULL;
	d->lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
	if (d->lib == NULL) return 0;
	DRV_SYM(p_init, "cuInit")
	DRV_SYM(p_driverVersion, "cuDriverGetVersion")
	DRV_SYM(p_deviceCount, "cuDeviceGetCount")
	DRV_SYM(p_deviceGet, "cuDeviceGet")
	DRV_SYM(p_deviceName, "cuDeviceGetName")
	DRV_SYM(p_deviceAttr, "cuDeviceGetAttribute")
	DRV_SYM(p_primaryRetain, "cuDevicePrimaryCtxRetain")
	DRV_SYM(p_primaryRelease, "cuDevicePrimaryCtxRelease_v2")
	DRV_SYM(p_ctxSetCurrent, "cuCtxSetCurrent")
	DRV_SYM(p_streamCreate, "cuStreamCreate")
	DRV_SYM(p_streamDestroy, "cuStreamDestroy_v2")
	DRV_SYM(p_streamSync, "cuStreamSynchronize")
	DRV_SYM(p_memAlloc, "cuMemAlloc_v2")
	DRV_SYM(p_memFree, "cuMemFree_v2")
	DRV_SYM(p_memcpyHtoD, "cuMemcpyHtoD_v2")
	DRV_SYM(p_memcpyDtoH, "cuMemcpyDtoH_v2")
	DRV_SYM(p_memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
	DRV_SYM(p_memsetD32Async, "cuMemsetD32Async")
	DRV_SYM(p_memGetInfo, "cuMemGetInfo_v2")
	DRV_SYM(p_moduleLoadData, "cuModuleLoadData")
	DRV_SYM(p_moduleUnload, "cuModuleUnload")
	DRV_SYM(p_moduleGetFunction, "cuModuleGetFunction")
	DRV_SYM(p_funcSetAttr, "cuFuncSetAttribute")
	DRV_SYM(p_launch, "cuLaunchKernel")
	DRV_SYM(p_errorString, "cuGetErrorString")
	d->p_eventCreate = (void*)dlsym(d->lib, "cuEventCreate");
	d->p_eventRecord = (void*)dlsym(d->lib, "cuEventRecord");
	d->p_eventElapsed = (void*)dlsym(d->lib, "cuEventElapsedTime");
	d->p_eventDestroy = (void*)dlsym(d->lib, "cuEventDestroy_v2");
	d->p_memAllocHost = (void*)dlsym(d->lib, "cuMemAllocHost_v2");
	d->p_memFreeHost = (void*)dlsym(d->lib, "cuMemFreeHost");
	d->p_memcpyHtoDAsync = (void*)dlsym(d->lib, "cuMemcpyHtoDAsync_v2");
	d->p_eventSync = (void*)dlsym(d->lib, "cuEventSynchronize");
	d->p_beginCapture = (void*)dlsym(d->lib, "cuStreamBeginCapture_v2");
	d->p_endCapture = (void*)dlsym(d->lib, "cuStreamEndCapture");
	d->p_graphInstantiate = (void*)dlsym(d->lib, "cuGraphInstantiateWithFlags");
	d->p_graphLaunch = (void*)dlsym(d->lib, "cuGraphLaunch");
	d->p_graphExecDestroy = (void*)dlsym(d->lib, "cuGraphExecDestroy");
	d->p_graphDestroy = (void*)dlsym(d->lib, "cuGraphDestroy");
	return 1;
}

static int drv_has_pinned(drv_t* d) {
	return d->p_memAllocHost != NULL && d->p_memFreeHost != NULL && d->p_memcpyHtoDAsync != NULL && d->p_eventSync != NULL &&
		d->p_eventCreate != NULL && d->p_eventRecord != NULL && d->p_eventDestroy != NULL;
}
static int drv_has_graphs(drv_t* d) {
	return d->p_beginCapture != NULL && d->p_endCapture != NULL && d->p_graphInstantiate != NULL && d->p_graphLaunch != NULL &&
		d->p_graphExecDestroy != NULL && d->p_graphDestroy != NULL;
}
static int drv_host_alloc(drv_t* d, void** p, size_t n) { return d->p_memAllocHost(p, n); }
static int drv_host_free(drv_t* d, void* p) { return d->p_memFreeHost(p); }
static int drv_htod_async(drv_t* d, unsigned long long dst, const void* src, size_t n, CUstream s) {
	return d->p_memcpyHtoDAsync((CUdeviceptr)dst, src, n, s);
}
static int drv_event_sync(drv_t* d, CUevent e) { return d->p_eventSync(e); }
// Capture in thread-local mode: the worker thread is the only one that
// calls the driver, and another thread's unsafe call must not end it.
static int drv_begin_capture(drv_t* d, CUstream s) { return d->p_beginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); }
static int drv_end_capture(drv_t* d, CUstream s, CUgraph* g) { return d->p_endCapture(s, g); }
static int drv_graph_instantiate(drv_t* d, CUgraphExec* e, CUgraph g) { return d->p_graphInstantiate(e, g, 0); }
static int drv_graph_launch(drv_t* d, CUgraphExec e, CUstream s) { return d->p_graphLaunch(e, s); }
static int drv_graph_exec_destroy(drv_t* d, CUgraphExec e) { return d->p_graphExecDestroy(e); }
static int drv_graph_destroy(drv_t* d, CUgraph g) { return d->p_graphDestroy(g); }

static int drv_has_events(drv_t* d) {
	return d->p_eventCreate != NULL && d->p_eventRecord != NULL && d->p_eventElapsed != NULL && d->p_eventDestroy != NULL;
}
static int drv_event_create(drv_t* d, CUevent* e) { return d->p_eventCreate(e, CU_EVENT_DEFAULT); }
static int drv_event_record(drv_t* d, CUevent e, CUstream s) { return d->p_eventRecord(e, s); }
static int drv_event_elapsed(drv_t* d, float* ms, CUevent a, CUevent b) { return d->p_eventElapsed(ms, a, b); }
static int drv_event_destroy(drv_t* d, CUevent e) { return d->p_eventDestroy(e); }

static const char* drv_error_string(drv_t* d, int code) {
	const char* s = NULL;
	if (d->p_errorString == NULL || d->p_errorString((CUresult)code, &s) != CUDA_SUCCESS || s == NULL) return "unknown error";
	return s;
}

static int drv_init(drv_t* d) { return d->p_init(0); }
static int drv_version(drv_t* d, int* v) { return d->p_driverVersion(v); }
static int drv_device_count(drv_t* d, int* n) { return d->p_deviceCount(n); }
static int drv_device_get(drv_t* d, CUdevice* dev, int ordinal) { return d->p_deviceGet(dev, ordinal); }
static int drv_device_name(drv_t* d, char* buf, int n, CUdevice dev) { return d->p_deviceName(buf, n, dev); }
static int drv_device_attr(drv_t* d, int* v, int attr, CUdevice dev) { return d->p_deviceAttr(v, (CUdevice_attribute)attr, dev); }
static int drv_primary_retain(drv_t* d, CUcontext* c, CUdevice dev) { return d->p_primaryRetain(c, dev); }
static int drv_primary_release(drv_t* d, CUdevice dev) { return d->p_primaryRelease(dev); }
static int drv_set_current(drv_t* d, CUcontext c) { return d->p_ctxSetCurrent(c); }
static int drv_stream_create(drv_t* d, CUstream* s) { return d->p_streamCreate(s, CU_STREAM_DEFAULT); }
static int drv_stream_destroy(drv_t* d, CUstream s) { return d->p_streamDestroy(s); }
static int drv_stream_sync(drv_t* d, CUstream s) { return d->p_streamSync(s); }
static int drv_mem_alloc(drv_t* d, unsigned long long* p, size_t n) {
	CUdeviceptr q = 0;
	int r = d->p_memAlloc(&q, n);
	*p = (unsigned long long)q;
	return r;
}
static int drv_mem_free(drv_t* d, unsigned long long p) { return d->p_memFree((CUdeviceptr)p); }
static int drv_htod(drv_t* d, unsigned long long dst, const void* src, size_t n) { return d->p_memcpyHtoD((CUdeviceptr)dst, src, n); }
static int drv_dtoh(drv_t* d, void* dst, unsigned long long src, size_t n) { return d->p_memcpyDtoH(dst, (CUdeviceptr)src, n); }
static int drv_dtod(drv_t* d, unsigned long long dst, unsigned long long src, size_t n, CUstream s) {
	return d->p_memcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, n, s);
}
static int drv_memset32(drv_t* d, unsigned long long dst, unsigned int v, size_t n, CUstream s) {
	return d->p_memsetD32Async((CUdeviceptr)dst, v, n, s);
}
static int drv_mem_info(drv_t* d, size_t* free, size_t* total) { return d->p_memGetInfo(free, total); }
static int drv_module_load(drv_t* d, CUmodule* m, const char* ptx) { return d->p_moduleLoadData(m, ptx); }
static int drv_module_unload(drv_t* d, CUmodule m) { return d->p_moduleUnload(m); }
static int drv_module_function(drv_t* d, CUfunction* f, CUmodule m, const char* name) { return d->p_moduleGetFunction(f, m, name); }
static int drv_func_max_smem(drv_t* d, CUfunction f, int bytes) {
	return d->p_funcSetAttr(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

// drv_launch builds the parameter pointer array from the packed arguments
// (Go memory without pointers, read during the call only: cuLaunchKernel
// copies the values).
static int drv_launch(drv_t* d, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
	unsigned smem, CUstream s, char* args, int* offs, int n) {
	void* params[32];
	if (n > 32) return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < n; i++) params[i] = args + offs[i];
	return d->p_launch(f, gx, gy, gz, bx, by, bz, smem, s, params, NULL);
}

typedef struct {
	void* lib;
	cublasStatus_t (*p_create)(cublasHandle_t*);
	cublasStatus_t (*p_destroy)(cublasHandle_t);
	cublasStatus_t (*p_setStream)(cublasHandle_t, CUstream);
	cublasStatus_t (*p_gemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
		const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int,
		cublasComputeType_t, cublasGemmAlgo_t);
	cublasStatus_t (*p_gemmStridedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
		const void*, cudaDataType, int, long long, const void*, cudaDataType, int, long long, const void*, void*,
		cudaDataType, int, long long, int, cublasComputeType_t, cublasGemmAlgo_t);
	cublasHandle_t h;
} blas_t;

#define BLAS_SYM(field, name) if ((b->field = (void*)dlsym(b->lib, name)) == NULL) { dlclose(b->lib); b->lib = NULL; return 0; }

static int blas_open(blas_t* b, const char* libname) {
	b->lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
	if (b->lib == NULL) return 0;
	BLAS_SYM(p_create, "cublasCreate_v2")
	BLAS_SYM(p_destroy, "cublasDestroy_v2")
	BLAS_SYM(p_setStream, "cublasSetStream_v2")
	BLAS_SYM(p_gemmEx, "cublasGemmEx")
	BLAS_SYM(p_gemmStridedEx, "cublasGemmStridedBatchedEx")
	return 1;
}

static int blas_create(blas_t* b, CUstream s) {
	int r = b->p_create(&b->h);
	if (r != CUBLAS_STATUS_SUCCESS) return r;
	return b->p_setStream(b->h, s);
}
static int blas_destroy(blas_t* b) { return b->p_destroy(b->h); }

// blas_gemm runs a column-major (batched) GemmEx; inputs of type atype
// (CUDA_R_32F or CUDA_R_16BF), float32 output and scalars.
static int blas_gemm(blas_t* b, int ta, int tb, int m, int n, int k, float alpha, unsigned long long A, int atype, int lda,
	long long sA, unsigned long long B, int ldb, long long sB, float beta, unsigned long long C, int ldc, long long sC, int batch,
	int compute) {
	cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	if (batch <= 1)
		return b->p_gemmEx(b->h, oa, ob, m, n, k, &alpha, (const void*)A, (cudaDataType)atype, lda, (const void*)B,
			(cudaDataType)atype, ldb, &beta, (void*)C, CUDA_R_32F, ldc, (cublasComputeType_t)compute, CUBLAS_GEMM_DEFAULT);
	return b->p_gemmStridedEx(b->h, oa, ob, m, n, k, &alpha, (const void*)A, (cudaDataType)atype, lda, sA, (const void*)B,
		(cudaDataType)atype, ldb, sB, &beta, (void*)C, CUDA_R_32F, ldc, sC, batch, (cublasComputeType_t)compute,
		CUBLAS_GEMM_DEFAULT);
}

enum {
	ATTR_CC_MAJOR = CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
	ATTR_CC_MINOR = CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
	ATTR_SMS = CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
	ATTR_SMEM_OPTIN = CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
	TYPE_F32 = CUDA_R_32F,
	TYPE_BF16 = CUDA_R_16BF,
	COMPUTE_32F = CUBLAS_COMPUTE_32F,
	COMPUTE_TF32 = CUBLAS_COMPUTE_32F_FAST_TF32,
	CU_OOM = CUDA_ERROR_OUT_OF_MEMORY,
	CU_NO_DEVICE = CUDA_ERROR_NO_DEVICE,
};
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/agentrl/agentrl/internal/osthread"
	"github.com/agentrl/agentrl/policy/backend"
)

// driver is the opened driver library.
type driver struct{ d *C.drv_t }

// openDriver dlopens the first loadable driver library of names.
func openDriver(names []string) (*driver, error) {
	d := (*C.drv_t)(C.calloc(1, C.sizeof_drv_t))
	var tried []string
	for _, name := range names {
		cname := C.CString(name)
		var missing *C.char
		ok := C.drv_open(d, cname, &missing)
		C.free(unsafe.Pointer(cname))
		if ok == 1 {
			return &driver{d: d}, nil
		}
		if missing != nil {
			C.free(unsafe.Pointer(d))
			return nil, fmt.Errorf("%w: %s lacks %s (driver too old)", ErrNoDriver, name, C.GoString(missing))
		}
		tried = append(tried, name)
	}
	C.free(unsafe.Pointer(d))
	return nil, fmt.Errorf("%w: could not load any of %v", ErrNoDriver, tried)
}

// check turns a driver status into nil or a *DriverError.
func (dr *driver) check(call string, code C.int) error {
	if code == 0 {
		return nil
	}
	return &DriverError{Call: call, Code: int(code), Msg: C.GoString(C.drv_error_string(dr.d, code))}
}

// blasLib is an opened cuBLAS with its handle.
type blasLib struct {
	b    *C.blas_t
	name string
}

// openBLAS dlopens the first loadable cuBLAS of names (nil, nil when none).
func openBLAS(names []string) *blasLib {
	for _, name := range names {
		b := (*C.blas_t)(C.calloc(1, C.sizeof_blas_t))
		cname := C.CString(name)
		ok := C.blas_open(b, cname)
		C.free(unsafe.Pointer(cname))
		if ok == 1 {
			return &blasLib{b: b, name: name}
		}
		C.free(unsafe.Pointer(b))
	}
	return nil
}

func blasCheck(call string, code C.int) error {
	if code == 0 {
		return nil
	}
	return &DriverError{Call: call, Code: int(code), Msg: "cublasStatus_t"}
}

// Backend is the CUDA backend on one device. Create it with New and release
// it with Close. All its calls run in order on one locked OS thread (see
// the package doc), so a Backend is safe for concurrent use.
type Backend struct {
	cfg     config
	w       *osthread.Worker
	dr      *driver
	blas    *blasLib // nil: the tiled fallback GEMM
	dev     C.CUdevice
	ctx     C.CUcontext
	stream  C.CUstream
	mod     C.CUmodule
	modDec  C.CUmodule // the decode kernels (kernels/decode.cu)
	fn      map[string]C.CUfunction
	cache   *cache
	weights *weightCache // bf16 copies of weights (WithWeightCache)
	acts    *actCache    // bf16 copies of activations (WithActivationCache)
	name    string
	closed  atomic.Bool
	stats   atomic.Pointer[CacheStats]
	// counters and prof belong to the worker thread (Counters and
	// Profile read them there), and so do the pending optimizer pass and
	// the device copies of its tables.
	counters Counters
	prof     profiler
	opt      optPending
	tables   deviceTables
	// The launch queue (callers' side, locked) and, on the worker, the
	// pinned staging, the record of the round trip's stream work, the
	// captured graphs, and whether work was queued on the stream since
	// the host last waited for it (queue_cuda.go).
	q          launchQueue
	stage      stager
	rec        *record
	graphs     graphs
	queuedWork bool
}

// profiler holds the events of a profile (WithProfile): a pair per
// recorded call, read and recycled by Profile.
type profiler struct {
	pending []profiledCall
	spare   []C.CUevent
}

// profiledCall is one call between two recorded events.
type profiledCall struct {
	name       string
	start, end C.CUevent
}

var (
	_ backend.Backend     = (*Backend)(nil)
	_ backend.Optimizer   = (*Backend)(nil)
	_ backend.Initializer = (*Backend)(nil)
)

// New opens the CUDA driver, retains the primary context of the selected
// device, creates a stream and a cuBLAS handle, and loads the kernels. It
// returns ErrNoDriver or ErrNoDevice (wrapped) on machines without them.
// cuInit itself cannot be interrupted; ctx is checked before and after.
func New(ctx context.Context, opts ...Option) (*Backend, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dr, err := openDriver(driverLibraries())
	if err != nil {
		return nil, err
	}
	be := &Backend{cfg: cfg, w: osthread.New(ErrClosed), dr: dr, fn: map[string]C.CUfunction{}, weights: newWeightCache(),
		acts:     newActCache(uint64(cfg.actCache)),
		counters: Counters{Kernels: map[string]uint64{}}}
	be.stats.Store(&CacheStats{})
	if err := be.w.Do(be.open); err != nil {
		// Release what open got before it failed (a context, a stream …).
		_ = be.w.Stop(be.teardown)
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		_ = be.Close()
		return nil, err
	}
	return be, nil
}

// open runs on the worker thread: device, context, stream, cuBLAS, module.
func (be *Backend) open() error {
	d := be.dr.d
	if code := C.drv_init(d); code != 0 {
		// CUDA_ERROR_NO_DEVICE (100): a driver without a GPU.
		sentinel := ErrNoDriver
		if code == C.CU_NO_DEVICE {
			sentinel = ErrNoDevice
		}
		return fmt.Errorf("%w: %w", sentinel, be.dr.check("cuInit", code))
	}
	var n C.int
	if err := be.dr.check("cuDeviceGetCount", C.drv_device_count(d, &n)); err != nil {
		return fmt.Errorf("%w: %w", ErrNoDevice, err)
	}
	if be.cfg.device >= int(n) {
		return fmt.Errorf("%w: device %d requested, %d present", ErrNoDevice, be.cfg.device, int(n))
	}
	if err := be.dr.check("cuDeviceGet", C.drv_device_get(d, &be.dev, C.int(be.cfg.device))); err != nil {
		return err
	}
	attr := func(a C.int) int {
		var v C.int
		if C.drv_device_attr(d, &v, a, be.dev) != 0 {
			return 0
		}
		return int(v)
	}
	major, minor := attr(C.ATTR_CC_MAJOR), attr(C.ATTR_CC_MINOR)
	if major < 8 {
		return fmt.Errorf("%w: device %d has compute capability %d.%d; the kernels need 8.0 (bfloat16, large shared memory)", ErrNoDevice, be.cfg.device, major, minor)
	}
	var nameBuf [256]C.char
	_ = C.drv_device_name(d, &nameBuf[0], 256, be.dev)
	if err := be.dr.check("cuDevicePrimaryCtxRetain", C.drv_primary_retain(d, &be.ctx, be.dev)); err != nil {
		return err
	}
	if err := be.dr.check("cuCtxSetCurrent", C.drv_set_current(d, be.ctx)); err != nil {
		return err
	}
	if err := be.dr.check("cuStreamCreate", C.drv_stream_create(d, &be.stream)); err != nil {
		return err
	}
	if be.cfg.profile && C.drv_has_events(d) == 0 {
		return fmt.Errorf("%w: WithProfile needs the driver's event calls (cuEventCreate, cuEventRecord, cuEventElapsedTime, cuEventDestroy_v2)", ErrNoDriver)
	}
	be.cache = newCache(rawDevice{be}, uint64(be.cfg.cacheLimit))
	ptx := ptxFor(major)
	cptx := C.CString(string(ptx))
	err := be.dr.check("cuModuleLoadData", C.drv_module_load(d, &be.mod, cptx))
	C.free(unsafe.Pointer(cptx))
	if err != nil {
		return fmt.Errorf("loading the %s kernels: %w", parsePTX(ptx).Target, err)
	}
	smemOptin := attr(C.ATTR_SMEM_OPTIN)
	for _, k := range kernelNames {
		ck := C.CString(k)
		var f C.CUfunction
		err := be.dr.check("cuModuleGetFunction("+k+")", C.drv_module_function(d, &f, be.mod, ck))
		C.free(unsafe.Pointer(ck))
		if err != nil {
			return err
		}
		be.fn[k] = f
	}
	// The backward attention kernels need more than the default 48 KiB of
	// dynamic shared memory: the float32 ones at head dim 256, the
	// tensor-core dK/dV kernels at head dims above 64.
	smem := map[string]int{}
	for _, k := range []string{"attn_fwd", "attn_decode_partial", "attn_bwd_dq", "attn_bwd_dkdv"} {
		smem[k] = attnBwdSmem(attMaxHead)
	}
	for _, k := range tcKernels() {
		smem[k.fwdName()], smem[k.dqName()], smem[k.dkdvName()] = k.fwdSmem(), k.dqSmem(), k.dkdvSmem()
	}
	if err := be.loadDecodeModule(major, smemOptin); err != nil {
		return err
	}
	for k, need := range smem {
		if smemOptin < need {
			return fmt.Errorf("%w: device offers %d bytes of shared memory per block, kernel %s needs %d", ErrNoDevice, smemOptin, k, need)
		}
		if err := be.dr.check("cuFuncSetAttribute("+k+")", C.drv_func_max_smem(d, be.fn[k], C.int(need))); err != nil {
			return err
		}
	}
	gemmName := "tiled fp32 gemm (no cuBLAS)"
	if len(be.cfg.cublas) > 0 {
		b := openBLAS(be.cfg.cublas)
		if b == nil && !be.cfg.noBLASOK {
			return noCuBLASError(be.cfg.cublas)
		}
		if b != nil {
			if err := blasCheck("cublasCreate", C.blas_create(b.b, be.stream)); err != nil {
				return err
			}
			be.blas = b
			gemmName = b.name
		}
	}
	var ver C.int
	_ = C.drv_version(d, &ver)
	be.name = fmt.Sprintf("gpu(%s, sm_%d%d, driver %d, %s, %v, %s)", C.GoString(&nameBuf[0]), major, minor, int(ver), gemmName, be.cfg.precision,
		be.cfg.attentionName())
	return nil
}

// Close releases the device memory, the cuBLAS handle, the module, the
// stream and the context, and stops the worker thread. Buffers of a closed
// Backend are invalid; its calls return ErrClosed.
func (be *Backend) Close() error {
	if be == nil || be.w == nil || be.closed.Swap(true) {
		return nil
	}
	return be.w.Stop(be.teardown)
}

// teardown releases whatever open acquired; it runs on the worker thread.
func (be *Backend) teardown() error {
	d := be.dr.d
	var errs []error
	if be.stream != nil {
		// Updates still pending are made: Close ends the work queued so far.
		errs = append(errs, be.drainQueue(), be.flushOpt(), be.settle())
		errs = append(errs, be.dr.check("cuStreamSynchronize", C.drv_stream_sync(d, be.stream)))
	}
	errs = append(errs, be.releaseGraphs(), be.releaseStaging())
	for _, c := range be.prof.pending {
		be.prof.spare = append(be.prof.spare, c.start, c.end)
	}
	for _, e := range be.prof.spare {
		errs = append(errs, be.dr.check("cuEventDestroy", C.drv_event_destroy(d, e)))
	}
	be.prof = profiler{}
	if be.cache != nil {
		errs = append(errs, be.cache.release())
	}
	if be.blas != nil {
		errs = append(errs, blasCheck("cublasDestroy", C.blas_destroy(be.blas.b)))
	}
	if be.mod != nil {
		errs = append(errs, be.dr.check("cuModuleUnload", C.drv_module_unload(d, be.mod)))
	}
	if be.modDec != nil {
		errs = append(errs, be.dr.check("cuModuleUnload", C.drv_module_unload(d, be.modDec)))
	}
	if be.stream != nil {
		errs = append(errs, be.dr.check("cuStreamDestroy", C.drv_stream_destroy(d, be.stream)))
	}
	if be.ctx != nil {
		errs = append(errs, be.dr.check("cuDevicePrimaryCtxRelease", C.drv_primary_release(d, be.dev)))
	}
	return errors.Join(errs...)
}

// Name identifies the device, driver, GEMM library, precision and the
// attention kernels.
func (be *Backend) Name() string { return be.name }

// TensorCoreAttention reports whether attention with head dim headDim
// (training and prefill; split-K decoding always runs in float32) runs on
// the bf16 tensor-core kernels under this Backend's options (see
// WithAttention).
func (be *Backend) TensorCoreAttention(headDim int) bool { return be.cfg.tensorCoreAttention(headDim) }

// Stats returns the caching allocator's counters, with every call made
// before it counted: the calls still in the launch queue (Alloc and Free
// join it) are sent to the worker first. On a closed Backend it returns
// the counters as of its last call.
func (be *Backend) Stats() CacheStats {
	if err := be.run(func() error { return nil }); err != nil && !errors.Is(err, ErrClosed) {
		// A queued call failed: the next call that can report it does.
		be.q.mu.Lock()
		be.q.held = errors.Join(be.q.held, err)
		be.q.mu.Unlock()
	}
	return *be.stats.Load()
}

// run executes f on the worker thread after checking that the Backend is
// open and running the pending optimizer pass (flushOpt), and publishes
// the allocator statistics.
func (be *Backend) run(f func() error) error { return be.do(true, f) }

// do is run, with the pending optimizer pass run first only when flush
// is set (runOpt's calls join it instead).
func (be *Backend) do(flush bool, f func() error) error {
	if be == nil || be.w == nil {
		return fmt.Errorf("%w: zero Backend (use New)", ErrClosed)
	}
	if be.closed.Load() {
		return ErrClosed
	}
	return be.w.Do(func() error {
		be.counters.WorkerCalls++
		err := be.drainQueue()
		if err == nil && flush {
			err = be.flushOpt()
		}
		if err == nil {
			err = f()
		}
		if err == nil {
			// What f queued on the stream is sent now.
			err = be.settle()
		}
		s := be.cache.stats
		s.WeightBytes, s.WeightHits, s.WeightConversions = be.weights.bytes, be.weights.hits, be.weights.conversions
		s.ActivationBytes, s.ActivationHits, s.ActivationConversions = be.acts.bytes, be.acts.hits, be.acts.convs
		be.stats.Store(&s)
		return err
	})
}

// runW is run for a call that writes the buffers outs (nil ones are
// skipped): their converted weight copies become stale, in stream order,
// before f queues the writes. Every method that writes a buffer goes
// through it; see weightCache.
func (be *Backend) runW(outs []*buffer, f func() error) error {
	return be.run(func() error {
		be.weights.wrote(outs...)
		return f()
	})
}

// rawDevice is the cache's source: cuMemAlloc / cuMemFree.
type rawDevice struct{ be *Backend }

func (r rawDevice) alloc(bytes uint64) (devPtr, error) {
	r.be.counters.DeviceAllocs++
	var p C.ulonglong
	code := C.drv_mem_alloc(r.be.dr.d, &p, C.size_t(bytes))
	if code == C.CU_OOM {
		return 0, fmt.Errorf("%w: %w", errOutOfMemory, r.be.dr.check("cuMemAlloc", code))
	}
	if err := r.be.dr.check("cuMemAlloc", code); err != nil {
		return 0, err
	}
	return devPtr(p), nil
}

func (r rawDevice) free(p devPtr) error {
	// Recorded work may still use the block: it goes to the stream first.
	if err := r.be.settle(); err != nil {
		return err
	}
	r.be.counters.DeviceFrees++
	return r.be.dr.check("cuMemFree", C.drv_mem_free(r.be.dr.d, C.ulonglong(p)))
}

// Alloc returns a zeroed buffer of n float32 elements from the caching
// allocator.
func (be *Backend) Alloc(n int) (backend.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: alloc of %d elements", backend.ErrShape, n)
	}
	b := &buffer{owner: be, n: n}
	err := be.enqueue(nil, func() error {
		p, err := be.cache.get(uint64(n) * 4)
		if err != nil {
			return err
		}
		b.ptr = p
		return be.memset(p, 0, n)
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Free returns b's memory to the caching allocator.
func (be *Backend) Free(b backend.Buffer) error {
	gb, err := resolveAny(be, "free", b)
	if err != nil {
		return err
	}
	if gb == nil {
		return fmt.Errorf("%w: free of a nil buffer", backend.ErrBuffer)
	}
	if gb.freed.Swap(true) {
		return fmt.Errorf("%w: free has been freed", backend.ErrBuffer)
	}
	return be.enqueue(nil, func() error {
		return errors.Join(be.weights.drop(gb, be.cache.put), be.acts.drop(gb, be.cache.put), be.cache.put(gb.ptr))
	})
}

// Upload copies src into dst[off:] (rounded to bfloat16 into a bf16
// buffer).
func (be *Backend) Upload(dst backend.Buffer, off int, src []float32) error {
	d, err := resolveAny(be, "upload dst", dst)
	if err != nil {
		return err
	}
	if d == nil {
		return fmt.Errorf("%w: upload to a nil buffer", backend.ErrBuffer)
	}
	if err := rangeErr("upload", off, len(src), d.n); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	if d.half {
		h := make([]uint16, len(src))
		for i, f := range src {
			h[i] = bf16FromFloat32(f)
		}
		return be.runW([]*buffer{d}, func() error { return be.htod(d.ptr+devPtr(2*off), unsafe.Pointer(&h[0]), 2*len(h)) })
	}
	return be.runW([]*buffer{d}, func() error { return be.htod(d.ptr+devPtr(4*off), unsafe.Pointer(&src[0]), 4*len(src)) })
}

// Download copies src[off:off+len(dst)] into dst (widened from a bf16
// buffer).
func (be *Backend) Download(dst []float32, src backend.Buffer, off int) error {
	s, err := resolveAny(be, "download src", src)
	if err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("%w: download from a nil buffer", backend.ErrBuffer)
	}
	if err := rangeErr("download", off, len(dst), s.n); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	if s.half {
		h := make([]uint16, len(dst))
		err := be.run(func() error { return be.dtohBytes(unsafe.Pointer(&h[0]), s.ptr+devPtr(2*off), 2*len(h)) })
		for i, b := range h {
			dst[i] = bf16ToFloat32(b)
		}
		return err
	}
	return be.run(func() error {
		// cuMemcpyDtoH runs on the legacy stream, which waits for the
		// Backend's (blocking) stream: the kernels that wrote src finish first.
		return be.dtoh(dst, s.ptr+devPtr(4*off))
	})
}

// Copy copies n elements from src[srcOff:] to dst[dstOff:] on the stream:
// rounded to bfloat16 into a bf16 buffer from a float32 one, widened the
// other way.
func (be *Backend) Copy(dst backend.Buffer, dstOff int, src backend.Buffer, srcOff, n int) error {
	v, err := resolveW(be, "copy", 3, dst, src)
	if err != nil {
		return err
	}
	if dst == nil || src == nil {
		return fmt.Errorf("%w: copy with a nil buffer", backend.ErrBuffer)
	}
	if err := rangeErr("copy destination", dstOff, n, v[0].n); err != nil {
		return err
	}
	if err := rangeErr("copy source", srcOff, n, v[1].n); err != nil {
		return err
	}
	if dst == src && n > 0 && dstOff < srcOff+n && srcOff < dstOff+n {
		return fmt.Errorf("%w: copy ranges [%d,%d) and [%d,%d) of one buffer overlap", backend.ErrShape, srcOff, srcOff+n, dstOff, dstOff+n)
	}
	if n == 0 {
		return nil
	}
	return be.enqueue([]*buffer{v[0]}, func() error {
		dst, src := v[0].ptr+devPtr(v[0].elemBytes()*dstOff), v[1].ptr+devPtr(v[1].elemBytes()*srcOff)
		switch {
		case v[0].half && !v[1].half: // rounded, as Upload rounds
			return be.elementwise("f32_to_bf16", int64(n), dst, src, int64(n))
		case !v[0].half && v[1].half: // widened, as Download widens
			return be.elementwise("bf16_to_f32", int64(n), dst, src, int64(n))
		}
		return be.dtod(dst, src, v[0].elemBytes()*n)
	})
}

// ---- helpers on the worker thread -------------------------------------------

func (be *Backend) memset(p devPtr, val float32, n int) error {
	return be.memsetBits(p, math.Float32bits(val), n)
}

// memsetBits sets n 32-bit words at p to bits.
func (be *Backend) memsetBits(p devPtr, bits uint32, n int) error {
	if n == 0 {
		return nil
	}
	return be.issue(opKey('M', uint64(p), uint64(bits), uint64(n)), func() error {
		return be.dr.check("cuMemsetD32Async", C.drv_memset32(be.dr.d, C.ulonglong(p), C.uint(bits), C.size_t(n), be.stream))
	})
}

func (be *Backend) htod(dst devPtr, src unsafe.Pointer, bytes int) error {
	// A plain copy waits for the stream: the recorded work goes first.
	if err := be.settle(); err != nil {
		return err
	}
	be.noteUpload(bytes)
	return be.profiled("memcpy HtoD", func() error {
		return be.dr.check("cuMemcpyHtoD", C.drv_htod(be.dr.d, C.ulonglong(dst), src, C.size_t(bytes)))
	})
}

// scratch is temporary device memory of one call, returned by done.
type scratch struct {
	be   *Backend
	ptrs []devPtr
}

func (s *scratch) get(bytes int) (devPtr, error) {
	p, err := s.be.cache.get(uint64(bytes))
	if err != nil {
		return 0, err
	}
	s.ptrs = append(s.ptrs, p)
	return p, nil
}

// done returns the scratch blocks to the cache. Kernels that use them are
// queued on the Backend's stream, and any later use of a recycled block is
// queued on the same stream after them, so no synchronization is needed.
func (s *scratch) done() {
	for _, p := range s.ptrs {
		_ = s.be.cache.put(p)
	}
	s.ptrs = nil
}

// launch runs kernel name on the Backend's stream.
func (be *Backend) launch(name string, grid, block [3]uint32, smem int, args ...any) error {
	if grid[0] == 0 || grid[1] == 0 || grid[2] == 0 {
		return nil
	}
	buf, offs, err := packArgs(args...)
	if err != nil {
		return err
	}
	f, ok := be.fn[name]
	if !ok {
		return fmt.Errorf("gpu: kernel %s not loaded", name)
	}
	be.counters.Launches++
	be.counters.Kernels[name]++
	key := append(opKey('L', uint64(uintptr(unsafe.Pointer(f))), uint64(grid[0]), uint64(grid[1]), uint64(grid[2]),
		uint64(block[0]), uint64(block[1]), uint64(block[2]), uint64(smem)), buf...)
	return be.issue(key, func() error {
		return be.profiled(name, func() error {
			code := C.drv_launch(be.dr.d, f, C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]), C.uint(block[0]), C.uint(block[1]), C.uint(block[2]),
				C.uint(smem), be.stream, (*C.char)(unsafe.Pointer(&buf[0])), (*C.int)(unsafe.Pointer(&offs[0])), C.int(len(offs)))
			return be.dr.check("cuLaunchKernel("+name+")", code)
		})
	})
}

// elementwise launches a grid-stride kernel over n elements.
func (be *Backend) elementwise(name string, n int64, args ...any) error {
	return be.launch(name, [3]uint32{grid1D(n, blockElem), 1, 1}, [3]uint32{blockElem, 1, 1}, 0, args...)
}

// operand is a GEMM input in device memory: float32, bfloat16 storage, or
// float32 already rounded to bfloat16 values (the fallback's BF16 input).
type operand struct {
	ptr  devPtr
	kind int
}

const (
	opF32 = iota
	opBF16
	opRounded
)

// prep converts n float32 elements at p into what this Backend's GEMM
// multiplies: bfloat16 for cuBLAS in BF16 mode, bf16-rounded float32 for
// the fallback in BF16 mode, the data itself otherwise.
func (be *Backend) prep(s *scratch, p devPtr, n int64) (operand, error) {
	if be.cfg.precision != BF16 || n == 0 {
		return operand{p, opF32}, nil
	}
	if be.blas != nil {
		q, err := s.get(int(2 * n))
		if err != nil {
			return operand{}, err
		}
		return operand{q, opBF16}, be.elementwise("f32_to_bf16", n, q, p, n)
	}
	q, err := s.get(int(4 * n))
	if err != nil {
		return operand{}, err
	}
	return operand{q, opRounded}, be.elementwise("round_bf16", n, q, p, n)
}

// weight returns the GEMM operand of the weight buffer b: in BF16
// precision its converted copy from the weight cache (made again only
// after b has been written), or a conversion into scratch when the cache
// is off; the data itself in the other precisions. A bf16 buffer is its
// own operand (halfWeight).
func (be *Backend) weight(s *scratch, b *buffer) (operand, error) {
	n := int64(b.n)
	if b.half {
		return be.halfWeight(b)
	}
	if be.cfg.precision != BF16 || n == 0 {
		return operand{b.ptr, opF32}, nil
	}
	if !be.cfg.weightCache {
		return be.prep(s, b.ptr, n)
	}
	kind, conv, bytes := opBF16, "f32_to_bf16", 2*n
	if be.blas == nil {
		kind, conv, bytes = opRounded, "round_bf16", 4*n
	}
	p, err := be.weights.get(b, uint64(bytes), be.cache.get, func(dst devPtr) error { return be.elementwise(conv, n, dst, b.ptr, n) })
	if err != nil {
		return operand{}, fmt.Errorf("converting a weight to bf16: %w", err)
	}
	return operand{p, kind}, nil
}

// activation returns the GEMM operand of the activation buffer b: in
// BF16 precision through cuBLAS its bf16 copy from the activation cache
// (made again only after b has been written; see actCache), else what
// prep gives (a conversion into scratch, or b itself).
func (be *Backend) activation(s *scratch, b *buffer) (operand, error) {
	n := int64(b.n)
	if be.cfg.precision != BF16 || be.blas == nil || n == 0 {
		return be.prep(s, b.ptr, n)
	}
	p, ok, err := be.acts.get(b, uint64(2*n), be.cache.get, be.cache.put, func(dst devPtr) error {
		return be.elementwise("f32_to_bf16", n, dst, b.ptr, n)
	})
	if err != nil {
		return operand{}, fmt.Errorf("converting an activation to bf16: %w", err)
	}
	if !ok {
		return be.prep(s, b.ptr, n)
	}
	return operand{p, opBF16}, nil
}

// gemmCall is one row-major (batched) product C = alpha·op(A)·op(B) + beta·C.
type gemmCall struct {
	tA, tB        bool
	m, n, k       int
	alpha, beta   float32
	a, b          operand
	lda, ldb, ldc int
	sA, sB, sC    int64
	batch         int
	c             devPtr
}

// gemm runs g through cuBLAS (or the fallback kernel), converting float32
// operands first when the precision asks for it. K = 0 scales C by beta.
func (be *Backend) gemm(s *scratch, g gemmCall) error {
	batch := max(g.batch, 1)
	if g.m == 0 || g.n == 0 {
		return nil
	}
	if g.k == 0 {
		rows, cols := g.m, g.n
		if g.ldc == g.n { // contiguous: one call per matrix
			rows, cols = 1, g.m*g.n
		}
		for i := range batch {
			c := g.c + devPtr(4*int64(i)*g.sC)
			for r := range rows {
				row := c + devPtr(4*int64(r)*int64(g.ldc))
				var err error
				if g.beta == 0 {
					err = be.memset(row, 0, cols)
				} else {
					err = be.elementwise("scale_f32", int64(cols), row, g.beta, int64(cols))
				}
				if err != nil {
					return err
				}
			}
		}
		return nil
	}
	ar, ac := g.m, g.k
	if g.tA {
		ar, ac = g.k, g.m
	}
	br, bc := g.k, g.n
	if g.tB {
		br, bc = g.n, g.k
	}
	conv := func(o operand, rows, cols, ld int, stride int64) (operand, error) {
		if o.kind != opF32 {
			return o, nil
		}
		return be.prep(s, o.ptr, gemmSpan(rows, cols, ld, batch, stride))
	}
	a, err := conv(g.a, ar, ac, g.lda, g.sA)
	if err != nil {
		return err
	}
	b, err := conv(g.b, br, bc, g.ldb, g.sB)
	if err != nil {
		return err
	}
	if be.blas != nil {
		atype, compute := C.int(C.TYPE_F32), C.int(C.COMPUTE_32F)
		switch {
		case a.kind == opBF16 && b.kind == opBF16:
			atype = C.TYPE_BF16
		case a.kind != b.kind:
			return fmt.Errorf("gpu: gemm operands of kinds %d and %d", a.kind, b.kind)
		case be.cfg.precision == TF32:
			compute = C.COMPUTE_TF32
		}
		// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ:
		// swap the operands and the dimensions M and N.
		be.counters.Gemms++
		be.counters.GemmBytes += g.bytes(a.kind, ar, ac, br, bc, batch)
		key := opKey('G', uint64(cbool(g.tA)), uint64(cbool(g.tB)), uint64(g.m), uint64(g.n), uint64(g.k), uint64(math.Float32bits(g.alpha)),
			uint64(a.ptr), uint64(b.ptr), uint64(atype), uint64(g.lda), uint64(g.ldb), uint64(g.sA), uint64(g.sB),
			uint64(math.Float32bits(g.beta)), uint64(g.c), uint64(g.ldc), uint64(g.sC), uint64(batch), uint64(compute))
		return be.issue(key, func() error {
			return be.profiled(gemmLabel(atype == C.TYPE_BF16, g.tA, g.tB), func() error {
				code := C.blas_gemm(be.blas.b, cbool(g.tB), cbool(g.tA), C.int(g.n), C.int(g.m), C.int(g.k), C.float(g.alpha),
					C.ulonglong(b.ptr), atype, C.int(g.ldb), C.longlong(g.sB), C.ulonglong(a.ptr), C.int(g.lda), C.longlong(g.sA),
					C.float(g.beta), C.ulonglong(g.c), C.int(g.ldc), C.longlong(g.sC), C.int(batch), compute)
				return blasCheck("cublasGemmEx", code)
			})
		})
	}
	grid := [3]uint32{uint32((g.n + gemmTile - 1) / gemmTile), uint32((g.m + gemmTile - 1) / gemmTile), uint32(batch)}
	return be.launch("sgemm_tiled", grid, [3]uint32{gemmTile, gemmTile, 1}, 0,
		b2i(g.tA), b2i(g.tB), int32(g.m), int32(g.n), int32(g.k), g.alpha, a.ptr, int32(g.lda), g.sA, b.ptr, int32(g.ldb), g.sB,
		g.beta, g.c, int32(g.ldc), g.sC)
}

// bytes is what the product moves at least (Counters.GemmBytes): A of
// ar×ac and B of br×bc elements of kind in (2 bytes for bf16, else 4)
// read, C written, and read too when beta ≠ 0.
func (g gemmCall) bytes(in, ar, ac, br, bc, batch int) uint64 {
	e := int64(4)
	if in == opBF16 {
		e = 2
	}
	cb := int64(4)
	if g.beta != 0 {
		cb = 8
	}
	return uint64(e*gemmSpan(ar, ac, g.lda, batch, g.sA) + e*gemmSpan(br, bc, g.ldb, batch, g.sB) + cb*gemmSpan(g.m, g.n, g.ldc, batch, g.sC))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// dtoh copies len(dst) float32 values from device address src.
func (be *Backend) dtoh(dst []float32, src devPtr) error {
	return be.dtohBytes(unsafe.Pointer(&dst[0]), src, 4*len(dst))
}

// dtohBytes copies bytes bytes from device address src to host memory dst.
func (be *Backend) dtohBytes(dst unsafe.Pointer, src devPtr, bytes int) error {
	if err := be.settle(); err != nil {
		return err
	}
	be.queuedWork = false
	be.counters.DtoH++
	be.counters.DtoHBytes += uint64(bytes)
	return be.profiled("memcpy DtoH", func() error {
		return be.dr.check("cuMemcpyDtoH", C.drv_dtoh(be.dr.d, dst, C.ulonglong(src), C.size_t(bytes)))
	})
}

// dtod queues a copy of bytes bytes from device address src to dst on
// the stream.
func (be *Backend) dtod(dst, src devPtr, bytes int) error {
	be.counters.DtoD++
	return be.issue(opKey('C', uint64(dst), uint64(src), uint64(bytes)), func() error {
		return be.dr.check("cuMemcpyDtoDAsync", C.drv_dtod(be.dr.d, C.ulonglong(dst), C.ulonglong(src), C.size_t(bytes), be.stream))
	})
}

// Synchronize waits until every queued kernel and copy of the Backend has
// finished (kernels run asynchronously; Download waits by itself). It is
// what benchmarks call to time device work.
func (be *Backend) Synchronize() error { return be.run(be.sync) }

// sync waits for the stream on the worker thread.
func (be *Backend) sync() error {
	if err := be.settle(); err != nil {
		return err
	}
	be.queuedWork = false
	be.counters.StreamSyncs++
	return be.dr.check("cuStreamSynchronize", C.drv_stream_sync(be.dr.d, be.stream))
}

// profiled runs call, between two events recorded on the stream when the
// Backend profiles (WithProfile).
func (be *Backend) profiled(name string, call func() error) error {
	if !be.cfg.profile {
		return call()
	}
	start, err := be.event()
	if err != nil {
		return err
	}
	if err := be.dr.check("cuEventRecord", C.drv_event_record(be.dr.d, start, be.stream)); err != nil {
		return err
	}
	if err := call(); err != nil {
		be.prof.spare = append(be.prof.spare, start)
		return err
	}
	end, err := be.event()
	if err != nil {
		return err
	}
	if err := be.dr.check("cuEventRecord", C.drv_event_record(be.dr.d, end, be.stream)); err != nil {
		return err
	}
	be.prof.pending = append(be.prof.pending, profiledCall{name: name, start: start, end: end})
	return nil
}

// event returns a spare event or a new one.
func (be *Backend) event() (C.CUevent, error) {
	if n := len(be.prof.spare); n > 0 {
		e := be.prof.spare[n-1]
		be.prof.spare = be.prof.spare[:n-1]
		return e, nil
	}
	var e C.CUevent
	return e, be.dr.check("cuEventCreate", C.drv_event_create(be.dr.d, &e))
}

// Profile waits for the device and returns the device time of every
// kernel, cuBLAS product and copy recorded since New or the last
// Profile, summed by name, largest first; the record starts over. The
// Backend must have been created WithProfile(true). Recording costs two
// events per call, so a profiled run is not for headline timings.
func (be *Backend) Profile() ([]KernelTime, error) {
	if !be.cfg.profile {
		return nil, fmt.Errorf("gpu: Profile needs a Backend made WithProfile(true)")
	}
	var spans []profileSpan
	err := be.run(func() error {
		if err := be.sync(); err != nil {
			return err
		}
		for _, c := range be.prof.pending {
			var ms C.float
			if err := be.dr.check("cuEventElapsedTime", C.drv_event_elapsed(be.dr.d, &ms, c.start, c.end)); err != nil {
				return err
			}
			spans = append(spans, profileSpan{name: c.name, ms: float32(ms)})
			be.prof.spare = append(be.prof.spare, c.start, c.end)
		}
		be.prof.pending = be.prof.pending[:0]
		return nil
	})
	return summarize(spans), err
}

// Counters returns the counts of driver and cuBLAS calls since New or
// the last ResetCounters (see Counters).
func (be *Backend) Counters() (Counters, error) {
	var c Counters
	err := be.run(func() error {
		c = be.counters.clone()
		return nil
	})
	return c, err
}

// ResetCounters starts the counts over from zero.
func (be *Backend) ResetCounters() error {
	return be.run(func() error {
		be.counters = Counters{Kernels: map[string]uint64{}}
		return nil
	})
}

// ResetPeak starts the allocator's peaks (CacheStats.PeakInUse and
// PeakReserved) over from the memory in use now.
func (be *Backend) ResetPeak() error {
	return be.run(func() error {
		be.cache.resetPeak()
		return nil
	})
}

// loadDecodeModule loads the decode kernels (kernels/decode.cu), a module
// of their own, into the kernel table, and allows each the dynamic shared
// memory it is launched with.
func (be *Backend) loadDecodeModule(major, smemOptin int) error {
	d := be.dr.d
	ptx := decodePTXFor(major)
	cptx := C.CString(string(ptx))
	err := be.dr.check("cuModuleLoadData", C.drv_module_load(d, &be.modDec, cptx))
	C.free(unsafe.Pointer(cptx))
	if err != nil {
		return fmt.Errorf("loading the %s decode kernels: %w", parsePTX(ptx).Target, err)
	}
	for _, k := range decodeKernelNames {
		ck := C.CString(k)
		var f C.CUfunction
		err := be.dr.check("cuModuleGetFunction("+k+")", C.drv_module_function(d, &f, be.modDec, ck))
		C.free(unsafe.Pointer(ck))
		if err != nil {
			return err
		}
		be.fn[k] = f
	}
	for k, need := range decodeKernelSmem() {
		if need <= 48<<10 {
			continue
		}
		if smemOptin < need {
			return fmt.Errorf("%w: device offers %d bytes of shared memory per block, kernel %s needs %d", ErrNoDevice, smemOptin, k, need)
		}
		if err := be.dr.check("cuFuncSetAttribute("+k+")", C.drv_func_max_smem(d, be.fn[k], C.int(need))); err != nil {
			return err
		}
	}
	return nil
}

// memInfo reports the device's free and total memory (worker thread).
func (be *Backend) memInfo() (free, total uint64, err error) {
	var f, t C.size_t
	err = be.dr.check("cuMemGetInfo", C.drv_mem_info(be.dr.d, &f, &t))
	return uint64(f), uint64(t), err
}

// ---- pinned staging and graphs (used by queue_cuda.go) ---------------------

func (dr *driver) hasPinned() bool { return C.drv_has_pinned(dr.d) == 1 }
func (dr *driver) hasGraphs() bool { return C.drv_has_graphs(dr.d) == 1 }

func (dr *driver) hostAlloc(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	return p, dr.check("cuMemAllocHost", C.drv_host_alloc(dr.d, &p, C.size_t(n)))
}

func (dr *driver) hostFree(p unsafe.Pointer) error {
	return dr.check("cuMemFreeHost", C.drv_host_free(dr.d, p))
}

func (dr *driver) htodAsync(dst devPtr, src unsafe.Pointer, n int, s C.CUstream) error {
	return dr.check("cuMemcpyHtoDAsync", C.drv_htod_async(dr.d, C.ulonglong(dst), src, C.size_t(n), s))
}

func (dr *driver) eventCreate() (C.CUevent, error) {
	var e C.CUevent
	return e, dr.check("cuEventCreate", C.drv_event_create(dr.d, &e))
}

func (dr *driver) eventRecord(e C.CUevent, s C.CUstream) error {
	return dr.check("cuEventRecord", C.drv_event_record(dr.d, e, s))
}

func (dr *driver) eventSync(e C.CUevent) error {
	return dr.check("cuEventSynchronize", C.drv_event_sync(dr.d, e))
}

func (dr *driver) eventDestroy(e C.CUevent) error {
	return dr.check("cuEventDestroy", C.drv_event_destroy(dr.d, e))
}

func (dr *driver) beginCapture(s C.CUstream) error {
	return dr.check("cuStreamBeginCapture", C.drv_begin_capture(dr.d, s))
}

func (dr *driver) endCapture(s C.CUstream) (C.CUgraph, error) {
	var g C.CUgraph
	return g, dr.check("cuStreamEndCapture", C.drv_end_capture(dr.d, s, &g))
}

func (dr *driver) graphInstantiate(g C.CUgraph) (C.CUgraphExec, error) {
	var e C.CUgraphExec
	return e, dr.check("cuGraphInstantiate", C.drv_graph_instantiate(dr.d, &e, g))
}

func (dr *driver) graphLaunch(e C.CUgraphExec, s C.CUstream) error {
	return dr.check("cuGraphLaunch", C.drv_graph_launch(dr.d, e, s))
}

func (dr *driver) graphExecDestroy(e C.CUgraphExec) error {
	return dr.check("cuGraphExecDestroy", C.drv_graph_exec_destroy(dr.d, e))
}

func (dr *driver) graphDestroy(g C.CUgraph) error {
	return dr.check("cuGraphDestroy", C.drv_graph_destroy(dr.d, g))
}
