// fakecuda.cc builds a stand-in for libcuda.so.1 and libcublas.so.13 on a
// machine without a GPU, so that the agentrl_cuda-tagged Go test binary runs end to
// end: device memory is host memory, streams are synchronous, modules ignore
// the PTX and look kernels up in the emulated kernels.cu (emu.h), and the
// cuBLAS GemmEx calls are a naive column-major product (float32 or bfloat16
// inputs, float64 sums). It checks the Go side — cgo shim, argument packing,
// launch geometry, the row-major↔column-major cuBLAS mapping, scratch
// memory — not the real driver. Built and run by fakecuda.sh.
#include "emu.h"
#include <algorithm>
#include <chrono>
#include <dlfcn.h>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>
#include <cstdio>
#include <cstdlib>
using std::max;
using std::min;
#include "kernels_emu.inc"
#include "wrappers.inc"
#include <cuda.h>

extern "C" {
CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice* d, int o) { if (o != 0) return CUDA_ERROR_INVALID_DEVICE; *d = 0; return CUDA_SUCCESS; }
CUresult cuDeviceGetName(char* b, int n, CUdevice) { snprintf(b, n, "emulated sm_90 (fakecuda)"); return CUDA_SUCCESS; }
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 227 * 1024; break;
    default: *v = 0;
  }
  return CUDA_SUCCESS;
}
static int ctx_dummy;
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) { *c = (CUcontext)&ctx_dummy; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult cuStreamCreate(CUstream* s, unsigned int) { *s = (CUstream)&ctx_dummy; return CUDA_SUCCESS; }
CUresult cuStreamDestroy(CUstream) { return CUDA_SUCCESS; }
thread_local bool capturing = false;  // see "stream capture and graphs" below
static bool capturing_now() { return capturing; }
CUresult cuStreamSynchronize(CUstream) { return capturing_now() ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS; }
// FAKECUDA_NOOP=1 makes kernels, products and memsets do nothing and
// downloads read zeros (fresh memory is zeroed instead of NaN-filled, and
// its pages are touched only when written): what is left is the host's
// side of every call, to measure how long the Go code takes to issue a
// workload (the decode step's host time) on a machine without a GPU.
// Results are meaningless.
static bool noop() {
  static const bool on = [] {
    const char* v = getenv("FAKECUDA_NOOP");
    return v != nullptr && v[0] == '1';
  }();
  return on;
}
CUresult cuMemAlloc(CUdeviceptr* p, size_t n) {
  if (noop()) {
    void* z = calloc(1, n == 0 ? 1 : n);
    if (z == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)z;
    return CUDA_SUCCESS;
  }
  void* q = malloc(n);
  if (q == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  // Fresh device memory is not zeroed: fill with a NaN pattern so that a
  // missing memset shows up.
  memset(q, 0xff, n);
  *p = (CUdeviceptr)q;
  return CUDA_SUCCESS;
}
CUresult cuMemFree(CUdeviceptr p) { free((void*)p); return CUDA_SUCCESS; }
CUresult cuMemcpyHtoD(CUdeviceptr d, const void* s, size_t n) {
  if (capturing_now()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  memcpy((void*)d, s, n);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH(void* d, CUdeviceptr s, size_t n) {
  if (capturing_now()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (noop()) {
    // No kernel wrote the results: zeros (token 0 for a sampled row).
    memset(d, 0, n);
    return CUDA_SUCCESS;
  }
  memcpy(d, (void*)s, n);
  return CUDA_SUCCESS;
}
static void run_or_record(std::function<void()> f);
CUresult cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) {
  run_or_record([=] { memmove((void*)d, (void*)s, n); });
  return CUDA_SUCCESS;
}
// Pinned host memory is host memory; an asynchronous copy from it runs
// at once (or, captured, at each replay, from the host memory of then).
CUresult cuMemAllocHost(void** p, size_t n) {
  *p = malloc(n);
  return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void* p) { free(p); return CUDA_SUCCESS; }
CUresult cuMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream) {
  run_or_record([=] { memcpy((void*)d, s, n); });
  return CUDA_SUCCESS;
}
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream) {
  if (noop()) return CUDA_SUCCESS;
  run_or_record([=] {
    unsigned int* p = (unsigned int*)d;
    for (size_t i = 0; i < n; i++) p[i] = v;
  });
  return CUDA_SUCCESS;
}
// The device's memory: 16 GiB, or FAKECUDA_MEM_GIB (with FAKECUDA_NOOP,
// what a workload sizes from it, a KV cache, is mostly never touched).
CUresult cuMemGetInfo(size_t* f, size_t* t) {
  size_t gib = 16;
  if (const char* v = getenv("FAKECUDA_MEM_GIB")) gib = strtoull(v, nullptr, 10);
  *f = *t = gib << 30;
  return CUDA_SUCCESS;
}
CUresult cuModuleLoadData(CUmodule* m, const void*) { *m = (CUmodule)&ctx_dummy; return CUDA_SUCCESS; }
CUresult cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  for (auto& k : emu_kernels)
    if (strcmp(k.name, name) == 0) { *f = (CUfunction)&k; return CUDA_SUCCESS; }
  return CUDA_ERROR_NOT_FOUND;
}
CUresult cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
// ---- stream capture and graphs ----
// While the stream captures, the stream calls below (launches, memsets,
// copies, and the cuBLAS products of the other copy of this library,
// through fakecuda_record) are kept, not run; cuStreamEndCapture moves
// them into a graph, and cuGraphLaunch runs them again, in order, as
// often as it is called, reading the device memory of the moment: the
// inputs a caller updated in place. Synchronous calls during a capture
// fail, as they do on a GPU (cudaErrorStreamCaptureUnsupported).
thread_local std::vector<std::function<void()>> captured;
struct FakeGraph {
  std::vector<std::function<void()>> ops;
};
// fakecuda_record keeps *f for the capture and returns 1, or returns 0
// (the caller runs it) when the stream does not capture; it takes f.
int fakecuda_record(std::function<void()>* f) {
  std::unique_ptr<std::function<void()>> own(f);
  if (!capturing) return 0;
  captured.push_back(std::move(*f));
  return 1;
}
// run_or_record runs f now, or keeps it when the stream captures: in the
// library instance that owns the stream (libcuda.so.1), looked up once.
//
// The emulated kernels share the launch geometry (gridDim, blockDim) and
// shared memory of this library instance, so the calls run one at a
// time, whichever thread makes them: several Backends in one process
// (the ranks of an in-process data-parallel test) each capture on their
// own worker thread (capturing is per thread) and take turns to run.
static std::mutex run_mu;
static void run_locked(const std::function<void()>& f) {
  std::lock_guard<std::mutex> lock(run_mu);
  f();
}
static void run_or_record(std::function<void()> f) {
  using rec_t = int (*)(std::function<void()>*);
  static rec_t rec = [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return h ? (rec_t)dlsym(h, "fakecuda_record") : (rec_t) nullptr;
  }();
  auto* p = new std::function<void()>(f);
  if (rec != nullptr && rec(p)) return;
  if (rec == nullptr) delete p;
  run_locked(f);
}
CUresult cuStreamBeginCapture(CUstream, CUstreamCaptureMode) {
  if (capturing) return CUDA_ERROR_ILLEGAL_STATE;
  capturing = true;
  captured.clear();
  return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream, CUgraph* g) {
  if (!capturing) return CUDA_ERROR_ILLEGAL_STATE;
  capturing = false;
  auto* fg = new FakeGraph{std::move(captured)};
  captured.clear();
  *g = (CUgraph)fg;
  return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph g, unsigned long long) {
  *e = (CUgraphExec) new FakeGraph(*(FakeGraph*)g);
  return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(CUgraphExec e, CUstream) {
  if (capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  for (auto& op : ((FakeGraph*)e)->ops) run_locked(op);
  return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(CUgraphExec e) { delete (FakeGraph*)e; return CUDA_SUCCESS; }
CUresult cuGraphDestroy(CUgraph g) { delete (FakeGraph*)g; return CUDA_SUCCESS; }

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream,
                        void** params, void**) {
  auto* k = (decltype(&emu_kernels[0]))f;
  if (gx == 0 || gy == 0 || gz == 0 || bx * by * bz == 0 || bx * by * bz > 1024 || smem > 227 * 1024) return CUDA_ERROR_INVALID_VALUE;
  if (noop()) return CUDA_SUCCESS;
  // The arguments are copied (as cuLaunchKernel does): a captured launch
  // runs later with the values of now.
  std::vector<std::vector<char>> args(k->nargs);
  for (int i = 0; i < k->nargs; i++) args[i].assign((const char*)params[i], (const char*)params[i] + k->sizes[i]);
  run_or_record([k, args, gx, gy, gz, bx, by, bz, smem]() mutable {
    std::vector<void*> p(args.size());
    for (size_t i = 0; i < args.size(); i++) p[i] = args[i].data();
    if (k->seq)
      emu_launch_seq({gx, gy, gz}, {bx, by, bz}, [&] { k->fn(p.data()); });
    else
      emu_launch({gx, gy, gz}, {bx, by, bz}, smem, [&] { k->fn(p.data()); });
  });
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult, const char** s) { *s = "fakecuda error"; return CUDA_SUCCESS; }
// Events: the fake stream runs every call before returning, so an event
// recorded on it is the host's clock at the moment of recording.
struct FakeEvent {
  std::chrono::steady_clock::time_point t;
};
CUresult cuEventCreate(CUevent* e, unsigned int) { *e = (CUevent) new FakeEvent(); return CUDA_SUCCESS; }
CUresult cuEventRecord(CUevent e, CUstream) { ((FakeEvent*)e)->t = std::chrono::steady_clock::now(); return CUDA_SUCCESS; }
CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  *ms = std::chrono::duration<float, std::milli>(((FakeEvent*)b)->t - ((FakeEvent*)a)->t).count();
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy(CUevent e) { delete (FakeEvent*)e; return CUDA_SUCCESS; }
CUresult cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }

// ---- cuBLAS ----
int cublasCreate_v2(void** h) { *h = &ctx_dummy; return 0; }
int cublasDestroy_v2(void*) { return 0; }
int cublasSetStream_v2(void*, void*) { return 0; }
static double elem(const void* p, int type, long long i) {
  if (type == 14) return __bfloat162float(((const __nv_bfloat16*)p)[i]);
  if (type != 0) abort();
  return ((const float*)p)[i];
}
// The bytes the products move, by this library's own reckoning: each
// operand's elements from the first to the last it touches (column-major,
// leading dimension and batch stride included) times the element size,
// A and B read, C written, and read too when beta ≠ 0. When the
// environment names a file in FAKECUDA_GEMM_BYTES, the running total is
// written there after every product, for tests that check what a
// computation moves (gpu's TestLMHeadBackwardBytes).
static unsigned long long gemm_bytes = 0;
static long long span(int rows, int cols, int ld, int batch, long long stride) {
  if (rows == 0 || cols == 0) return 0;
  return (long long)(batch - 1) * stride + (long long)(cols - 1) * ld + rows;
}
static void count_gemm(int ta, int tb, int m, int n, int k, int at, int lda, long long sA, int ldb, long long sB, float beta, int ldc,
                       long long sC, int batch) {
  long long ea = at == 14 ? 2 : 4;
  gemm_bytes += ea * span(ta ? k : m, ta ? m : k, lda, batch, sA) + ea * span(tb ? n : k, tb ? k : n, ldb, batch, sB) +
                (beta == 0 ? 4 : 8) * span(m, n, ldc, batch, sC);
  if (const char* path = getenv("FAKECUDA_GEMM_BYTES")) {
    if (FILE* f = fopen(path, "w")) {
      fprintf(f, "%llu\n", gemm_bytes);
      fclose(f);
    }
  }
}
int cublasGemmStridedBatchedEx(void*, int ta, int tb, int m, int n, int k, const void* alpha, const void* A, int at, int lda, long long sA,
                               const void* B, int bt, int ldb, long long sB, const void* beta, void* C, int ct, int ldc, long long sC,
                               int batch, int compute, int) {
  if (ct != 0 || at != bt || (compute != 68 && compute != 77)) return 7;  // CUBLAS_STATUS_INVALID_VALUE
  if (lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m)) return 7;
  float al = *(const float*)alpha, be = *(const float*)beta;
  count_gemm(ta, tb, m, n, k, at, lda, sA, ldb, sB, be, ldc, sC, batch);
  if (noop()) return 0;
  run_or_record([=] {
  for (int b = 0; b < batch; b++)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) {
        double s = 0;
        for (int p = 0; p < k; p++) {
          // Column-major: op(A)(i,p) is A[i + p·lda] or, transposed, A[p + i·lda].
          double a = elem(A, at, b * sA + (ta ? p + (long long)i * lda : i + (long long)p * lda));
          double bb = elem(B, bt, b * sB + (tb ? j + (long long)p * ldb : p + (long long)j * ldb));
          s += a * bb;
        }
        float* c = (float*)C + b * sC + i + (long long)j * ldc;
        *c = (float)(al * s + (be == 0 ? 0.0 : (double)be * *c));
      }
  });
  return 0;
}
int cublasGemmEx(void* h, int ta, int tb, int m, int n, int k, const void* alpha, const void* A, int at, int lda, const void* B, int bt,
                 int ldb, const void* beta, void* C, int ct, int ldc, int compute, int algo) {
  return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1, compute, algo);
}
}
