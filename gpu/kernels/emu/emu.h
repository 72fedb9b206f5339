// emu.h runs kernels.cu on the CPU for checking kernel logic on a machine
// without a GPU: every CUDA thread of a block is an std::thread, blocks run
// one after another, __syncthreads is a block barrier, and warp shuffles
// exchange through a per-warp array between two warp barriers. It models
// the semantics the kernels rely on (barriers, shuffles, shared memory,
// atomics, the bf16 tensor-core mma), not performance. See check.sh.
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx;
// emu_tid is the calling thread's linear index in its block (x fastest),
// which decides its warp and lane as on the GPU.
inline thread_local unsigned emu_tid;
inline dim3 blockDim, gridDim;

// kernels.cu picks the emulated mma (emu_mma_m16n8k16_bf16) with this.
#define AGENTRL_EMU 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

struct EmuWarp {
  std::barrier<> bar{32};
  double v[32];
  uint32_t ma[32][4], mb[32][2];  // mma fragments of every lane
  std::atomic<int> exited{0};     // lanes that have returned
};
inline std::unique_ptr<std::barrier<>> emu_block_bar;
inline std::vector<std::unique_ptr<EmuWarp>> emu_warps;
inline std::vector<float> emu_smem;
inline std::mutex emu_atomic_mu;

inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
inline void __syncwarp() { emu_warps[emu_tid >> 5]->bar.arrive_and_wait(); }

template <class T>
inline T emu_exchange(T v, int src) {
  EmuWarp& w = *emu_warps[emu_tid >> 5];
  int lane = emu_tid & 31;
  w.v[lane] = (double)v;
  w.bar.arrive_and_wait();
  T r = (T)w.v[src & 31];
  w.bar.arrive_and_wait();
  return r;
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int o) { return emu_exchange(v, (emu_tid & 31) ^ o); }
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

// Intrinsics with round-to-nearest and no contraction, even where the
// emulator is compiled to contract like nvcc (fakecuda.sh with
// EMU_CONTRACT=1): the empty asm makes the rounded value opaque, so it
// cannot be fused into the operation that uses it.
inline float emu_opaque(float r) {
#if defined(__x86_64__)
  asm("" : "+x"(r));
#else
  asm("" : "+w"(r));
#endif
  return r;
}
inline float __fmul_rn(float a, float b) { return emu_opaque(a * b); }
inline float __fadd_rn(float a, float b) { return emu_opaque(a + b); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }

// CUDA's vector types, as far as the kernels use them.
struct float4 {
  float x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }

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
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.bits; }
inline float __bfloat162float(__nv_bfloat16 h) {
  uint32_t b = (uint32_t)h.bits << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// ---- tensor cores ---------------------------------------------------------
//
// emu_mma_m16n8k16_bf16 is mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// (d = a·b + d) for the calling lane, after every lane of its warp has
// arrived: the lanes' fragments are gathered into A (16×16) and B (16×8)
// by the PTX ISA's table ("Matrix Fragments for mma.m16n8k16 with floating
// point type"), with groupID = lane>>2 and threadID_in_group = lane%4:
//
//   A element i (0…7) of a lane, i.e. register i/2, half i%2 (even i in the
//   low 16 bits): row = groupID for i ∈ {0,1,4,5}, groupID+8 otherwise;
//   col = 2·threadID_in_group + (i&1), +8 for i ≥ 4.
//   B element i (0…3): row (k) = 2·threadID_in_group + (i&1), +8 for i ≥ 2;
//   col (n) = groupID.
//   C/D element i (0…3): row = groupID for i < 2, groupID+8 otherwise;
//   col = 2·threadID_in_group + (i&1).
//
// Arithmetic: the ISA makes the products of bf16 elements exact ("performed
// with specified precision") and the accumulation "at least single
// precision", order and rounding unspecified. The emulator takes the exact
// sum of c and the 16 products (float64 holds each product exactly, and the
// sums of the test data to well below a float32 ulp) and rounds it once to
// float32: the most accurate result the ISA allows. Hardware may round
// partial sums (emu_mma_f32_sequential emulates the least accurate order
// the ISA allows: one float32 rounding per product added, in k order); the
// checks' tolerances cover either. A lane that has exited is an error (the
// ISA leaves mma undefined then), as is a warp that does not arrive whole
// (the barrier would hang: the checks run under a timeout).
inline bool emu_mma_f32_sequential = false;

inline float emu_bf16_half(uint32_t r, int hi) {
  uint32_t b = (hi ? r >> 16 : r & 0xffff) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline void emu_mma_m16n8k16_bf16(float* d, const uint32_t* a, const uint32_t* b) {
  EmuWarp& w = *emu_warps[emu_tid >> 5];
  int lane = emu_tid & 31;
  if (w.exited.load() != 0) {
    fprintf(stderr, "emu: mma.sync in a warp with an exited lane (block %u, thread %u)\n", blockIdx.x, threadIdx.x);
    std::abort();
  }
  std::memcpy(w.ma[lane], a, sizeof w.ma[lane]);
  std::memcpy(w.mb[lane], b, sizeof w.mb[lane]);
  w.bar.arrive_and_wait();
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; l++) {
    int gid = l >> 2, tig = l & 3;
    for (int i = 0; i < 8; i++) {
      int row = (i < 2 || (i >= 4 && i < 6)) ? gid : gid + 8;
      int col = 2 * tig + (i & 1) + (i >= 4 ? 8 : 0);
      A[row][col] = emu_bf16_half(w.ma[l][i / 2], i & 1);
    }
    for (int i = 0; i < 4; i++) {
      int row = 2 * tig + (i & 1) + (i >= 2 ? 8 : 0);
      B[row][gid] = emu_bf16_half(w.mb[l][i / 2], i & 1);
    }
  }
  w.bar.arrive_and_wait();  // nobody overwrites ma/mb before all have read them
  int gid = lane >> 2, tig = lane & 3;
  for (int i = 0; i < 4; i++) {
    int row = i < 2 ? gid : gid + 8, col = 2 * tig + (i & 1);
    if (emu_mma_f32_sequential) {
      float s = d[i];
      for (int kk = 0; kk < 16; kk++) s += A[row][kk] * B[kk][col];  // the product is exact in float32
      d[i] = s;
    } else {
      double s = d[i];
      for (int kk = 0; kk < 16; kk++) s += (double)A[row][kk] * B[kk][col];
      d[i] = (float)s;
    }
  }
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
          emu_tid = t;
          f();
        }
}

// emu_block_order, when not 0, makes emu_launch run the blocks of a grid
// in an order shuffled with it as the seed instead of x, then y, then z:
// a kernel whose result depends on the order its blocks run in (a race
// between blocks, an atomic sum) shows it when run under two orders.
inline unsigned emu_block_order = 0;

// emu_launch runs kernel f over grid × block with smem bytes of dynamic
// shared memory (the kernels see it through emu_smem).
inline void emu_launch(dim3 grid, dim3 block, size_t smem, const std::function<void()>& f) {
  gridDim = grid;
  blockDim = block;
  unsigned n = block.x * block.y * block.z;
  std::vector<dim3> blocks;
  for (unsigned bz = 0; bz < grid.z; bz++)
    for (unsigned by = 0; by < grid.y; by++)
      for (unsigned bx = 0; bx < grid.x; bx++) blocks.push_back({bx, by, bz});
  if (emu_block_order != 0) {
    std::mt19937 g(emu_block_order);
    std::shuffle(blocks.begin(), blocks.end(), g);
  }
  for (const dim3& b : blocks) {
    unsigned bx = b.x, by = b.y, bz = b.z;
    // Garbage-like: all-ones bytes are NaN as float32 and as bfloat16,
    // so reads of unwritten shared memory show up.
    emu_smem.assign(smem / 4 + 1, 0.f);
    std::memset(emu_smem.data(), 0xff, emu_smem.size() * sizeof(float));
    emu_block_bar = std::make_unique<std::barrier<>>(n);
    emu_warps.clear();
    for (unsigned w = 0; w < (n + 31) / 32; w++) emu_warps.push_back(std::make_unique<EmuWarp>());
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < n; t++)
      ts.emplace_back([&, t, bx, by, bz] {
        blockIdx = {bx, by, bz};
        threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
        emu_tid = t;
        f();
        // An exited thread no longer takes part in barriers.
        emu_warps[t >> 5]->exited++;
        emu_block_bar->arrive_and_drop();
        emu_warps[t >> 5]->bar.arrive_and_drop();
      });
    for (auto& th : ts) th.join();
  }
}
