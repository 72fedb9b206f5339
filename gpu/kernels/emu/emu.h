// emu.h runs kernels.cu on the CPU for checking kernel logic on a machine
// without a GPU: every CUDA thread of a block is an std::thread, blocks run
// one after another, __syncthreads is a block barrier, and warp shuffles
// exchange through a per-warp array between two warp barriers. It models
// the semantics the kernels rely on (barriers, shuffles, shared memory,
// atomics), not performance. See check.sh.
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

struct EmuWarp {
  std::barrier<> bar{32};
  double v[32];
};
inline std::unique_ptr<std::barrier<>> emu_block_bar;
inline std::vector<std::unique_ptr<EmuWarp>> emu_warps;
inline std::vector<float> emu_smem;
inline std::mutex emu_atomic_mu;

inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
inline void __syncwarp() { emu_warps[threadIdx.x >> 5]->bar.arrive_and_wait(); }

template <class T>
inline T emu_exchange(T v, int src) {
  EmuWarp& w = *emu_warps[threadIdx.x >> 5];
  int lane = threadIdx.x & 31;
  w.v[lane] = (double)v;
  w.bar.arrive_and_wait();
  T r = (T)w.v[src & 31];
  w.bar.arrive_and_wait();
  return r;
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int o) { return emu_exchange(v, (threadIdx.x & 31) ^ o); }
template <class T>
inline T __shfl_sync(unsigned, T v, int src) { return emu_exchange(v, src); }

inline float atomicAdd(float* p, float v) {
  std::lock_guard<std::mutex> l(emu_atomic_mu);
  float o = *p;
  *p = o + v;
  return o;
}
inline double atomicAdd(double* p, double v) {
  std::lock_guard<std::mutex> l(emu_atomic_mu);
  double o = *p;
  *p = o + v;
  return o;
}

// Intrinsics with round-to-nearest and no contraction (check.sh compiles
// with -ffp-contract=off).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }

struct __nv_bfloat16 {
  uint16_t bits;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  if (f != f) return {(uint16_t)((b >> 16) | 0x40)};
  b += 0x7fff + ((b >> 16) & 1);
  return {(uint16_t)(b >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
  uint32_t b = (uint32_t)h.bits << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// emu_launch_seq runs every thread of every block in turn on the calling
// thread: only for kernels that use no barriers, shuffles or atomics whose
// order matters.
inline void emu_launch_seq(dim3 grid, dim3 block, const std::function<void()>& f) {
  gridDim = grid;
  blockDim = block;
  for (unsigned bz = 0; bz < grid.z; bz++)
    for (unsigned by = 0; by < grid.y; by++)
      for (unsigned bx = 0; bx < grid.x; bx++)
        for (unsigned t = 0; t < block.x * block.y * block.z; t++) {
          blockIdx = {bx, by, bz};
          threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
          f();
        }
}

// emu_launch runs kernel f over grid × block with smem bytes of dynamic
// shared memory (the kernels see it through emu_smem).
inline void emu_launch(dim3 grid, dim3 block, size_t smem, const std::function<void()>& f) {
  gridDim = grid;
  blockDim = block;
  unsigned n = block.x * block.y * block.z;
  for (unsigned bz = 0; bz < grid.z; bz++)
    for (unsigned by = 0; by < grid.y; by++)
      for (unsigned bx = 0; bx < grid.x; bx++) {
        emu_smem.assign(smem / 4 + 1, NAN);  // garbage-like: NaN exposes reads of unwritten memory
        emu_block_bar = std::make_unique<std::barrier<>>(n);
        emu_warps.clear();
        for (unsigned w = 0; w < (n + 31) / 32; w++) emu_warps.push_back(std::make_unique<EmuWarp>());
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < n; t++)
          ts.emplace_back([&, t, bx, by, bz] {
            blockIdx = {bx, by, bz};
            threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
            f();
            // An exited thread no longer takes part in barriers.
            emu_block_bar->arrive_and_drop();
            emu_warps[t >> 5]->bar.arrive_and_drop();
          });
        for (auto& th : ts) th.join();
      }
}
