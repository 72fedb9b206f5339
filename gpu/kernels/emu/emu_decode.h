// emu_decode.h adds to emu.h what ../decode.cu uses beyond kernels.cu:
// float2 and uint4, the bit casts between float and int, the up and down
// warp shuffles, and 32- and 64-bit integer atomics. decode.cu includes
// it when compiled for the emulator (AGENTRL_EMU).
#pragma once
#include <cstdint>
#include <cstring>
#include <mutex>

struct float2 {
  float x, y;
};
struct uint4 {
  unsigned x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }

inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline int __float_as_int(float f) { return (int)__float_as_uint(f); }
inline float __int_as_float(int i) { return __uint_as_float((unsigned)i); }

// Lanes below d (up) or at 32−d and above (down) keep their own value, as
// CUDA's shuffles do. emu_exchange carries values through a double: exact
// for 32-bit integers and floats (decode.cu shuffles 64-bit values as two
// 32-bit halves).
template <class T>
inline T __shfl_up_sync(unsigned, T v, int d) {
  int lane = threadIdx.x & 31;
  return emu_exchange(v, lane >= d ? lane - d : lane);
}
template <class T>
inline T __shfl_down_sync(unsigned, T v, int d) {
  int lane = threadIdx.x & 31;
  return emu_exchange(v, lane + d < 32 ? lane + d : lane);
}

inline unsigned atomicAdd(unsigned* p, unsigned v) {
  std::lock_guard<std::mutex> l(emu_atomic_mu);
  unsigned o = *p;
  *p = o + v;
  return o;
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  std::lock_guard<std::mutex> l(emu_atomic_mu);
  unsigned long long o = *p;
  *p = o + v;
  return o;
}
