// Decode kernels of the agentrl CUDA backend (package gpu): the paged KV
// cache (append, block copy, attention over the pages for decode rows and
// prefill chunks) and sampling over logits that stay on the device, for
// backend.Decoder. A module of its own beside kernels.cu, compiled to
// decode_sm80.ptx / decode_sm90.ptx by `go generate ./gpu` and loaded
// after it; every kernel is extern "C" so that its .entry name is the
// name the Go side looks up.
//
// The cache is one allocation: per layer, the keys of every block then
// the values, a block holding BlockSize rows of KVHeads·HeadDim values,
// float32 or bfloat16 (T below). Position p of a sequence whose block
// table starts at tabs[t] sits in row tabs[t + p/bs]·bs + p%bs.
#include <cuda_bf16.h>
#include <math.h>
#ifdef AGENTRL_EMU
#include "emu_decode.h"
#endif

#define DFULL 0xffffffffu

__device__ __forceinline__ float dec_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(DFULL, v, o);
  return v;
}
__device__ __forceinline__ float dec_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(DFULL, v, o));
  return v;
}

// Cache element access: float32 as is, bfloat16 widened (reads) or
// rounded to nearest even (writes).
__device__ __forceinline__ float kv_get(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float kv_get(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void kv_put(float* p, long long i, float x) { p[i] = x; }
__device__ __forceinline__ void kv_put(__nv_bfloat16* p, long long i, float x) { p[i] = __float2bfloat16_rn(x); }
// Two consecutive elements from an even index.
__device__ __forceinline__ float2 kv_get2(const float* p, long long i) { return *(const float2*)(p + i); }
__device__ __forceinline__ float2 kv_get2(const __nv_bfloat16* p, long long i) {
  unsigned u = *(const unsigned*)(p + i);
  return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}
// Eight consecutive elements from an index that is a multiple of 8 (one
// or two 16-byte loads).
__device__ __forceinline__ void kv_get8(const float* p, long long i, float* x) {
  float4 a = *(const float4*)(p + i), b = *(const float4*)(p + i + 4);
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}
__device__ __forceinline__ void kv_get8(const __nv_bfloat16* p, long long i, float* x) {
  uint4 u = *(const uint4*)(p + i);
  unsigned w[4] = {u.x, u.y, u.z, u.w};
  for (int j = 0; j < 4; j++) {
    x[2 * j] = __uint_as_float(w[j] << 16);
    x[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
  }
}

// The cache row of position p of the sequence whose table starts at tab.
__device__ __forceinline__ long long kv_row(const int* tabs, int tab, int p, int bs) {
  return (long long)tabs[tab + p / bs] * bs + p % bs;
}

// ---- append and copy ----------------------------------------------------------

// kv_append writes the new rows' keys k and values v [rows, width] to the
// cache rows slots[r] of the layer's keys kc and values vc (slot −1:
// skipped). One thread per element.
template <class T>
__device__ void kv_append(T* kc, T* vc, const float* k, const float* v, const int* slots, int rows, int width) {
  long long n = (long long)rows * width;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    int r = (int)(i / width), c = (int)(i % width);
    int s = slots[r];
    if (s < 0) continue;
    long long d = (long long)s * width + c;
    kv_put(kc, d, k[i]);
    kv_put(vc, d, v[i]);
  }
}
extern "C" __global__ void kv_append_f32(float* kc, float* vc, const float* k, const float* v, const int* slots, int rows, int width) {
  kv_append<float>(kc, vc, k, v, slots, rows, width);
}
extern "C" __global__ void kv_append_bf16(__nv_bfloat16* kc, __nv_bfloat16* vc, const float* k, const float* v, const int* slots, int rows,
                                          int width) {
  kv_append<__nv_bfloat16>(kc, vc, k, v, slots, rows, width);
}

// kv_copy_blocks copies block pairs[2i] to block pairs[2i+1] in every layer,
// keys and values, as 32-bit words: a block is blockWords words, a layer's
// keys (or values) halfWords. One thread per word.
extern "C" __global__ void kv_copy_blocks(unsigned* base, const int* pairs, int npairs, long long blockWords, long long halfWords, int layers) {
  long long n = (long long)npairs * layers * 2 * blockWords;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long w = i % blockWords, t = i / blockWords;
    int half = (int)(t % 2);
    t /= 2;
    int layer = (int)(t % layers), pr = (int)(t / layers);
    long long off = (2 * (long long)layer + half) * halfWords;
    base[off + pairs[2 * pr + 1] * blockWords + w] = base[off + pairs[2 * pr] * blockWords + w];
  }
}

// ---- attention over the pages: decode rows (split-K) ------------------------------
//
// Flash-decoding over the pages: rows[3r] = {query row, offset of the
// sequence's block table in tabs, visible keys}; block (r, y, split) is one
// warp covering keys [split·chunk, min(count, (split+1)·chunk)) for up to
// MAXG query heads of one KV head g (y = g·ngrp + group of heads), so the
// keys and values it reads serve every query head of the group. Per tile
// of 32 keys the warp first stages the tile's keys and values in shared
// memory with 16-byte loads, all issued before any is used (HD, the head
// dim rounded up to 128 or 256, is a compile-time bound so the copy loop
// unrolls); then a lane scores one key against the queries, and the lanes
// split the channels in pairs for the weighted values. Head dims that are
// not a multiple of 8 are staged element by element. Writes the running
// max and sum to ml [R, heads, splits, 2] and the unnormalized output to
// pacc [R, heads, splits, hd]. Dynamic shared memory: the queries,
// MAXG·HD floats, then the key tile, 32 rows of HD + 16/sizeof(T)
// elements (the padding keeps 16-byte row reads free of bank conflicts),
// then the value tile, 32 rows of HD elements.
template <class T, int MAXG, int HD>
__device__ void paged_decode(float* ml, float* pacc, const float* q, const T* kc, const T* vc, const int* rows, const int* tabs, int heads,
                             int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  constexpr int PAD = 16 / sizeof(T), KS = HD + PAD, CH = HD / 8;
  extern __shared__ float dsm[];
  float* sq = dsm;
  T* sk = (T*)(dsm + MAXG * HD);
  T* sv = sk + 32 * KS;
  int r = blockIdx.x, sp = blockIdx.z, nsp = gridDim.z;
  int g = blockIdx.y / ngrp, hg = blockIdx.y % ngrp;
  int group = heads / kvheads, h0 = g * group + hg * MAXG, nh = min(MAXG, group - hg * MAXG);
  int qr = rows[3 * r], tab = rows[3 * r + 1], cnt = rows[3 * r + 2];
  int lane = threadIdx.x, width = kvheads * hd;
  bool vec = (hd & 7) == 0;
  for (int i = lane; i < nh * hd; i += 32) sq[(i / hd) * HD + i % hd] = q[((long long)qr * heads + h0) * hd + i];
  int lo = sp * chunk, hi = min(cnt, lo + chunk);
  float m[MAXG], l[MAXG], acc[MAXG][HD / 32];
  for (int h = 0; h < MAXG; h++) {
    m[h] = -INFINITY;
    l[h] = 0.f;
    for (int j = 0; j < HD / 32; j++) acc[h][j] = 0.f;
  }
  for (int kt = lo; kt < hi; kt += 32) {
    int nk = min(32, hi - kt);
    __syncwarp();  // the previous tile is consumed
    if (vec) {
#pragma unroll 16
      for (int it = 0; it < CH; it++) {
        int e = it * 32 + lane, key = e / CH, c = (e % CH) * 8;
        if (key < nk && c < hd) {
          long long src = kv_row(tabs, tab, kt + key, bs) * width + (long long)g * hd + c;
          *(uint4*)(sk + key * KS + c) = *(const uint4*)(kc + src);
          *(uint4*)(sv + key * HD + c) = *(const uint4*)(vc + src);
          if (sizeof(T) == 4) {
            *(uint4*)(sk + key * KS + c + 4) = *(const uint4*)(kc + src + 4);
            *(uint4*)(sv + key * HD + c + 4) = *(const uint4*)(vc + src + 4);
          }
        }
      }
    } else {
      for (int e = lane; e < nk * hd; e += 32) {
        int key = e / hd, c = e % hd;
        long long src = kv_row(tabs, tab, kt + key, bs) * width + (long long)g * hd + c;
        sk[key * KS + c] = kc[src];
        sv[key * HD + c] = vc[src];
      }
    }
    __syncwarp();
    float s[MAXG];
    for (int h = 0; h < MAXG; h++) s[h] = 0.f;
    if (lane < nk) {
      const T* kr = sk + lane * KS;
      if (vec) {
#pragma unroll
        for (int c = 0; c < HD; c += 8) {
          if (c >= hd) break;
          float x[8];
          kv_get8(kr, c, x);
          for (int h = 0; h < MAXG; h++)
            if (h < nh)
              for (int e = 0; e < 8; e++) s[h] += x[e] * sq[h * HD + c + e];
        }
      } else {
        for (int c = 0; c < hd; c++) {
          float x = kv_get(kr, c);
          for (int h = 0; h < MAXG; h++)
            if (h < nh) s[h] += x * sq[h * HD + c];
        }
      }
    }
    float p[MAXG];
    for (int h = 0; h < MAXG; h++) {
      float sc = lane < nk ? s[h] * scale : -INFINITY;
      float mn = fmaxf(m[h], dec_warp_max(sc));
      float corr = expf(m[h] - mn);
      p[h] = lane < nk ? expf(sc - mn) : 0.f;
      l[h] = l[h] * corr + dec_warp_sum(p[h]);
      for (int j = 0; j < HD / 32; j++) acc[h][j] *= corr;
      m[h] = mn;
    }
    for (int jj = 0; jj < nk; jj++) {
      float pj[MAXG];
      for (int h = 0; h < MAXG; h++) pj[h] = __shfl_sync(DFULL, p[h], jj);
      const T* vr = sv + jj * HD;
#pragma unroll
      for (int jp = 0; jp < HD / 64; jp++) {
        int c = 2 * (lane + 32 * jp);
        if (c >= hd) break;
        float2 v2 = kv_get2(vr, c);
        for (int h = 0; h < MAXG; h++) {
          acc[h][2 * jp] += pj[h] * v2.x;
          acc[h][2 * jp + 1] += pj[h] * v2.y;
        }
      }
    }
  }
  for (int h = 0; h < MAXG; h++) {
    if (h >= nh) break;
    long long slot = ((long long)r * heads + h0 + h) * nsp + sp;
    if (lane == 0) {
      ml[2 * slot] = m[h];
      ml[2 * slot + 1] = l[h];
    }
    for (int jp = 0; jp < HD / 64; jp++) {
      int c = 2 * (lane + 32 * jp);
      if (c >= hd) break;
      pacc[slot * hd + c] = acc[h][2 * jp];
      pacc[slot * hd + c + 1] = acc[h][2 * jp + 1];
    }
  }
}

// The instantiations: float32 or bfloat16 cache; up to 2, 4 or 8 query
// heads per block; head dim up to 128 or 256.
extern "C" __global__ void paged_decode_f32_g2_h128(float* ml, float* pacc, const float* q, const float* kc, const float* vc, const int* rows,
    const int* tabs, int heads, int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  paged_decode<float, 2, 128>(ml, pacc, q, kc, vc, rows, tabs, heads, kvheads, hd, bs, scale, chunk, ngrp);
}
extern "C" __global__ void paged_decode_f32_g4_h128(float* ml, float* pacc, const float* q, const float* kc, const float* vc, const int* rows,
    const int* tabs, int heads, int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  paged_decode<float, 4, 128>(ml, pacc, q, kc, vc, rows, tabs, heads, kvheads, hd, bs, scale, chunk, ngrp);
}
extern "C" __global__ void paged_decode_f32_g8_h128(float* ml, float* pacc, const float* q, const float* kc, const float* vc, const int* rows,
    const int* tabs, int heads, int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  paged_decode<float, 8, 128>(ml, pacc, q, kc, vc, rows, tabs, heads, kvheads, hd, bs, scale, chunk, ngrp);
}
extern "C" __global__ void paged_decode_f32_g2_h256(float* ml, float* pacc, const float* q, const float* kc, const float* vc, const int* rows,
    const int* tabs, int heads, int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  paged_decode<float, 2, 256>(ml, pacc, q, kc, vc, rows, tabs, heads, kvheads, hd, bs, scale, chunk, ngrp);
}
extern "C" __global__ void paged_decode_f32_g4_h256(float* ml, float* pacc, const float* q, const float* kc, const float* vc, const int* rows,
    const int* tabs, int heads, int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  paged_decode<float, 4, 256>(ml, pacc, q, kc, vc, rows, tabs, heads, kvheads, hd, bs, scale, chunk, ngrp);
}
extern "C" __global__ void paged_decode_f32_g8_h256(float* ml, float* pacc, const float* q, const float* kc, const float* vc, const int* rows,
    const int* tabs, int heads, int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  paged_decode<float, 8, 256>(ml, pacc, q, kc, vc, rows, tabs, heads, kvheads, hd, bs, scale, chunk, ngrp);
}
extern "C" __global__ void paged_decode_bf16_g2_h128(float* ml, float* pacc, const float* q, const __nv_bfloat16* kc, const __nv_bfloat16* vc, const int* rows,
    const int* tabs, int heads, int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  paged_decode<__nv_bfloat16, 2, 128>(ml, pacc, q, kc, vc, rows, tabs, heads, kvheads, hd, bs, scale, chunk, ngrp);
}
extern "C" __global__ void paged_decode_bf16_g4_h128(float* ml, float* pacc, const float* q, const __nv_bfloat16* kc, const __nv_bfloat16* vc, const int* rows,
    const int* tabs, int heads, int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  paged_decode<__nv_bfloat16, 4, 128>(ml, pacc, q, kc, vc, rows, tabs, heads, kvheads, hd, bs, scale, chunk, ngrp);
}
extern "C" __global__ void paged_decode_bf16_g8_h128(float* ml, float* pacc, const float* q, const __nv_bfloat16* kc, const __nv_bfloat16* vc, const int* rows,
    const int* tabs, int heads, int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  paged_decode<__nv_bfloat16, 8, 128>(ml, pacc, q, kc, vc, rows, tabs, heads, kvheads, hd, bs, scale, chunk, ngrp);
}
extern "C" __global__ void paged_decode_bf16_g2_h256(float* ml, float* pacc, const float* q, const __nv_bfloat16* kc, const __nv_bfloat16* vc, const int* rows,
    const int* tabs, int heads, int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  paged_decode<__nv_bfloat16, 2, 256>(ml, pacc, q, kc, vc, rows, tabs, heads, kvheads, hd, bs, scale, chunk, ngrp);
}
extern "C" __global__ void paged_decode_bf16_g4_h256(float* ml, float* pacc, const float* q, const __nv_bfloat16* kc, const __nv_bfloat16* vc, const int* rows,
    const int* tabs, int heads, int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  paged_decode<__nv_bfloat16, 4, 256>(ml, pacc, q, kc, vc, rows, tabs, heads, kvheads, hd, bs, scale, chunk, ngrp);
}
extern "C" __global__ void paged_decode_bf16_g8_h256(float* ml, float* pacc, const float* q, const __nv_bfloat16* kc, const __nv_bfloat16* vc, const int* rows,
    const int* tabs, int heads, int kvheads, int hd, int bs, float scale, int chunk, int ngrp) {
  paged_decode<__nv_bfloat16, 8, 256>(ml, pacc, q, kc, vc, rows, tabs, heads, kvheads, hd, bs, scale, chunk, ngrp);
}

// paged_combine merges the splits of one (decode row, head): M = max m_s,
// L = Σ l_s·e^(m_s−M), out = Σ acc_s·e^(m_s−M) / L. One warp.
extern "C" __global__ void paged_combine(float* out, const float* ml, const float* pacc, const int* rows, int heads, int hd, int nsp) {
  int r = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
  long long base = ((long long)r * heads + h) * nsp;
  float M = -INFINITY;
  for (int s = 0; s < nsp; s++) M = fmaxf(M, ml[2 * (base + s)]);
  float L = 0.f;
  for (int s = 0; s < nsp; s++) {
    float ms = ml[2 * (base + s)];
    if (ms != -INFINITY) L += ml[2 * (base + s) + 1] * expf(ms - M);
  }
  long long orow = ((long long)rows[3 * r] * heads + h) * hd;
  for (int c = lane; c < hd; c += 32) {
    float a = 0.f;
    for (int s = 0; s < nsp; s++) {
      float ms = ml[2 * (base + s)];
      if (ms != -INFINITY) a += pacc[(base + s) * hd + c] * expf(ms - M);
    }
    out[orow + c] = a / L;
  }
}

// ---- attention over the pages: prefill chunks ----------------------------------
//
// Tiles of up to PF_ROWS query rows (a warp each) of a prefill chunk:
// tiles[4t] = {first query row, rows, offset of the sequence's block table,
// keys visible to the first row}; row i of a tile sees one key more than
// row i−1. As attn_fwd in kernels.cu (online softmax over key tiles of 32
// staged in shared memory, a lane per key), with keys and values read
// through the block table. Grid (tiles, heads); dynamic shared memory
// (PF_ROWS·hd + 32·(hd+1)) floats.
#define PF_ROWS 4
#define PF_MAXC 8
template <class T>
__device__ void paged_prefill(float* out, const float* q, const T* kc, const T* vc, const int* tiles, const int* tabs, int heads, int kvheads, int hd,
                              int bs, float scale) {
  extern __shared__ float psm[];
  float* sq = psm;
  float* sk = psm + PF_ROWS * hd;
  const int* tl = tiles + 4 * blockIdx.x;
  int q0 = tl[0], nrows = tl[1], tab = tl[2], cnt0 = tl[3];
  int h = blockIdx.y, g = h / (heads / kvheads);
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  long long qRow = (long long)heads * hd, width = (long long)kvheads * hd;
  for (int i = threadIdx.x; i < nrows * hd; i += blockDim.x) sq[i] = q[(q0 + i / hd) * qRow + h * hd + i % hd];
  bool active = warp < nrows;
  int mycnt = cnt0 + warp, maxcnt = cnt0 + nrows - 1;
  float m = -INFINITY, l = 0.f, acc[PF_MAXC];
  for (int j = 0; j < PF_MAXC; j++) acc[j] = 0.f;
  for (int kt = 0; kt < maxcnt; kt += 32) {
    int nk = min(32, maxcnt - kt);
    __syncthreads();
    for (int i = threadIdx.x; i < nk * hd; i += blockDim.x) {
      int j = i / hd, c = i % hd;
      sk[j * (hd + 1) + c] = kv_get(kc, kv_row(tabs, tab, kt + j, bs) * width + g * hd + c);
    }
    __syncthreads();
    if (!active || kt >= mycnt) continue;
    int vis = min(nk, mycnt - kt);
    float s = -INFINITY;
    if (lane < vis) {
      float d = 0.f;
      for (int c = 0; c < hd; c++) d += sq[warp * hd + c] * sk[lane * (hd + 1) + c];
      s = d * scale;
    }
    float mn = fmaxf(m, dec_warp_max(s));
    float corr = expf(m - mn);
    float p = lane < vis ? expf(s - mn) : 0.f;
    l = l * corr + dec_warp_sum(p);
    for (int j = 0; j < PF_MAXC; j++) acc[j] *= corr;
    for (int jj = 0; jj < vis; jj++) {
      float pj = __shfl_sync(DFULL, p, jj);
      long long vr = kv_row(tabs, tab, kt + jj, bs) * width + g * hd;
      for (int j = 0; j < PF_MAXC; j++) {
        int c = lane + 32 * j;
        if (c < hd) acc[j] += pj * kv_get(vc, vr + c);
      }
    }
    m = mn;
  }
  if (!active) return;
  long long orow = (q0 + warp) * qRow + h * hd;
  float inv = 1.f / l;
  for (int j = 0; j < PF_MAXC; j++) {
    int c = lane + 32 * j;
    if (c < hd) out[orow + c] = acc[j] * inv;
  }
}
extern "C" __global__ void paged_prefill_f32(float* out, const float* q, const float* kc, const float* vc, const int* tiles, const int* tabs, int heads,
                                             int kvheads, int hd, int bs, float scale) {
  paged_prefill<float>(out, q, kc, vc, tiles, tabs, heads, kvheads, hd, bs, scale);
}
extern "C" __global__ void paged_prefill_bf16(float* out, const float* q, const __nv_bfloat16* kc, const __nv_bfloat16* vc, const int* tiles,
                                              const int* tabs, int heads, int kvheads, int hd, int bs, float scale) {
  paged_prefill<__nv_bfloat16>(out, q, kc, vc, tiles, tabs, heads, kvheads, hd, bs, scale);
}

// ---- sampling ---------------------------------------------------------------------
//
// sample_rows draws one token per row of logits [rows, vocab] by
// backend.SampleRow's rule, one block per row (any multiple of 32 threads
// up to 1024). params[9r] = {flags (1: greedy), top-k, seed low, seed high,
// step low, step high, 1/temperature, top-p, min-p} (the last three as
// float bits); out[3r] = {token, processed log-prob bits, raw log-prob
// bits}, token −1 for logits with a NaN or +Inf or no finite value.
//
// Weights w = exp(z/T − max/T) are float32; a token is a candidate when
// z/T − max/T ≥ max(ln min-p, −103) (below −103 the weight underflows).
// Sums of weights are exact integer sums of w·2⁴⁴ truncated (fixed point:
// a sum of 151,936 weights ≤ 1 stays below 2⁶², each term off by < 2⁻⁴⁴),
// so they do not depend on the order of the additions, and the sampled
// token is a deterministic function of the logits, seed and step. Top-k's
// threshold is the k-th largest candidate logit, found by a radix select
// over the logits' order-preserving 32-bit keys (digits of 11, 11 and 10
// bits, a shared-memory histogram per digit); top-p's is the largest key
// whose candidates at or above it weigh at least top-p times the total, by
// the same select on weighted histograms; tokens tied at it are kept in
// increasing id order while their preceding weight stays below the
// target. The token is found by an ordered block scan of the kept weights.
// Rows without top-k or top-p skip their passes; greedy rows make one.

#define SR_BINS 2048

// Order-preserving key of a float: larger floats, larger keys.
__device__ __forceinline__ unsigned sr_key(float z) {
  unsigned b = __float_as_uint(z);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float sr_unkey(unsigned k) { return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }
__device__ __forceinline__ unsigned long long sr_fx(float w) { return (unsigned long long)(w * 17592186044416.0f); }  // w·2⁴⁴
__device__ __forceinline__ double sr_unfx(unsigned long long x) { return (double)x * 5.684341886080801486968994140625e-14; }  // ·2⁻⁴⁴

__device__ __forceinline__ unsigned long long sr_shfl_up(unsigned long long v, int d) {
  unsigned lo = __shfl_up_sync(DFULL, (unsigned)v, d), hi = __shfl_up_sync(DFULL, (unsigned)(v >> 32), d);
  return ((unsigned long long)hi << 32) | lo;
}
__device__ __forceinline__ unsigned long long sr_shfl_down(unsigned long long v, int d) {
  unsigned lo = __shfl_down_sync(DFULL, (unsigned)v, d), hi = __shfl_down_sync(DFULL, (unsigned)(v >> 32), d);
  return ((unsigned long long)hi << 32) | lo;
}

// sr_scan returns the inclusive prefix sum of v over the block's threads
// in order, and the block's total in *total. sh holds 32 values.
__device__ unsigned long long sr_scan(unsigned long long v, unsigned long long* sh, unsigned long long* total) {
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int o = 1; o < 32; o <<= 1) {
    unsigned long long n = sr_shfl_up(v, o);
    if (lane >= o) v += n;
  }
  __syncthreads();
  if (lane == 31) sh[w] = v;
  __syncthreads();
  if (w == 0) {
    unsigned long long x = lane < nw ? sh[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      unsigned long long n = sr_shfl_up(x, o);
      if (lane >= o) x += n;
    }
    sh[lane] = x;
  }
  __syncthreads();
  *total = sh[nw - 1];
  return v + (w > 0 ? sh[w - 1] : 0);
}

// sr_sum returns the block's sum of v to every thread.
__device__ unsigned long long sr_sum(unsigned long long v, unsigned long long* sh) {
  unsigned long long total;
  sr_scan(v, sh, &total);
  return total;
}

// sr_pick finds, by warp 0, the histogram bin where the running sum from
// the top bin down first reaches the target: counts (weighted false) reach
// an integer target, weights reach a double target, both after `above`.
// It stores the bin in res[0] and the sum of the bins above it in res[1].
__device__ void sr_pick(const unsigned* hc, const unsigned long long* hw, int nbins, bool weighted, unsigned long long above, double target,
                        unsigned long long* res) {
  if (threadIdx.x >= 32) return;
  int lane = threadIdx.x, per = nbins / 32;
  unsigned long long own = 0;
  for (int b = lane * per; b < (lane + 1) * per; b++) own += weighted ? hw[b] : hc[b];
  unsigned long long suf = own;  // Σ of this lane's bins and those above
  for (int o = 1; o < 32; o <<= 1) {
    unsigned long long n = sr_shfl_down(suf, o);
    if (lane + o < 32) suf += n;
  }
  unsigned long long excl = above + suf - own;
  if ((double)excl < target && (double)(excl + own) >= target) {
    unsigned long long acc = excl;
    for (int b = (lane + 1) * per - 1; b >= lane * per; b--) {
      unsigned long long x = weighted ? hw[b] : hc[b];
      if ((double)(acc + x) >= target) {
        res[0] = b;
        res[1] = acc;
        return;
      }
      acc += x;
    }
  }
}

extern "C" __global__ void sample_rows(const float* logits, int vocab, const int* params, int* out) {
  __shared__ unsigned hc[SR_BINS];
  __shared__ unsigned long long hw[SR_BINS];
  __shared__ unsigned long long sh[32];
  __shared__ unsigned long long res[2];
  __shared__ float fm[32];
  __shared__ int fi[32];
  __shared__ double fd[32];
  __shared__ int found;
  int row = blockIdx.x, tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, w = tid >> 5, nw = nt >> 5;
  const float* z = logits + (long long)row * vocab;
  const int* pr = params + 9 * row;
  int* o = out + 3 * row;

  // Pass 1: validity, the first maximal logit, and Σ e^(z−max) online.
  float m = -INFINITY, s = 0.f;
  int best = vocab, bad = 0;
  for (int i = tid; i < vocab; i += nt) {
    float x = z[i];
    if (x != x || x == INFINITY) bad = 1;
    if (x > m) {
      if (m != -INFINITY) s *= expf(m - x);
      m = x;
      best = i;
    }
    if (x != -INFINITY) s += expf(x - m);
  }
  for (int off = 16; off > 0; off >>= 1) {
    float m2 = __shfl_xor_sync(DFULL, m, off), s2 = __shfl_xor_sync(DFULL, s, off);
    int b2 = __shfl_xor_sync(DFULL, best, off), bad2 = __shfl_xor_sync(DFULL, bad, off);
    float mn = fmaxf(m, m2);
    s = (m == -INFINITY ? 0.f : s * expf(m - mn)) + (m2 == -INFINITY ? 0.f : s2 * expf(m2 - mn));
    best = (m2 > m || (m2 == m && b2 < best)) ? b2 : best;
    m = mn;
    bad |= bad2;
  }
  __syncthreads();
  if (lane == 0) {
    fm[w] = m;
    fi[w] = best | (bad << 30);
    fd[w] = s;
  }
  __syncthreads();
  double rawSum = 0;
  float zmax = -INFINITY;
  best = vocab;
  bad = 0;
  for (int i = 0; i < nw; i++) zmax = fmaxf(zmax, fm[i]);
  for (int i = 0; i < nw; i++) {
    int b = fi[i] & ((1 << 30) - 1);
    bad |= fi[i] >> 30;
    if (fm[i] == zmax && b < best) best = b;
    if (fm[i] != -INFINITY) rawSum += fd[i] * exp((double)fm[i] - (double)zmax);
  }
  if (bad || zmax == -INFINITY) {
    if (tid == 0) o[0] = -1, o[1] = 0, o[2] = 0;
    return;
  }
  double lse = (double)zmax + log(rawSum);
  int flags = pr[0], topk = pr[1];
  if (flags & 1) {
    if (tid == 0) {
      o[0] = best;
      o[1] = __float_as_int(0.f);
      o[2] = __float_as_int((float)((double)z[best] - lse));
    }
    return;
  }
  float invT = __int_as_float(pr[6]), topp = __int_as_float(pr[7]), minp = __int_as_float(pr[8]);
  // Rounded products, never fused into the subtraction: with a fused
  // multiply-add the maximal logit's d would be the rounding error of
  // zmax·invT, below 0 half the time, and min-p 1 would keep nothing.
  float zmaxT = __fmul_rn(zmax, invT);
  float dlo = minp > 0.f ? fmaxf(logf(minp), -103.f) : -103.f;
#define SR_D(x) (__fmul_rn((x), invT) - zmaxT)

  // Pass 2: candidates and their total weight.
  unsigned long long cw = 0, cn = 0;
  for (int i = tid; i < vocab; i += nt) {
    float d = SR_D(z[i]);
    if (d >= dlo) {
      cw += sr_fx(expf(d));
      cn++;
    }
  }
  unsigned long long total = sr_sum(cw, sh), count = sr_sum(cn, sh);
  unsigned klo = sr_key(-INFINITY);  // candidates also need key ≥ klo (top-k)

  // Top-k: the k-th largest candidate key.
  if (topk > 0 && (unsigned long long)topk < count) {
    unsigned prefix = 0;
    unsigned long long k = topk;
    for (int lvl = 0; lvl < 3; lvl++) {
      int shift = lvl == 0 ? 21 : lvl == 1 ? 10 : 0, nb = lvl == 2 ? 1024 : 2048;
      for (int b = tid; b < nb; b += nt) hc[b] = 0;
      __syncthreads();
      for (int i = tid; i < vocab; i += nt) {
        float x = z[i];
        if (SR_D(x) < dlo) continue;
        unsigned key = sr_key(x);
        if (lvl > 0 && (key >> (shift + (lvl == 1 ? 11 : 10))) != (prefix >> (shift + (lvl == 1 ? 11 : 10)))) continue;
        atomicAdd(&hc[(key >> shift) & (nb - 1)], 1u);
      }
      __syncthreads();
      sr_pick(hc, hw, nb, false, 0, (double)k, res);
      __syncthreads();
      prefix |= (unsigned)res[0] << shift;
      k -= res[1];
      __syncthreads();
    }
    klo = prefix;
    // The kept total (needed without top-p).
    unsigned long long kw = 0;
    for (int i = tid; i < vocab; i += nt) {
      float x = z[i], d = SR_D(x);
      if (d >= dlo && sr_key(x) >= klo) kw += sr_fx(expf(d));
    }
    total = sr_sum(kw, sh);
  }

  // Top-p: the cut key tau, the weight above it, and the last tied id kept.
  unsigned tau = 0;
  int cut = vocab;
  if (topp > 0.f && topp < 1.f) {
    double target = (double)topp * (double)total;
    unsigned prefix = 0;
    unsigned long long above = 0, tieCount = 0;
    for (int lvl = 0; lvl < 3; lvl++) {
      int shift = lvl == 0 ? 21 : lvl == 1 ? 10 : 0, nb = lvl == 2 ? 1024 : 2048;
      for (int b = tid; b < nb; b += nt) hc[b] = 0, hw[b] = 0;
      __syncthreads();
      for (int i = tid; i < vocab; i += nt) {
        float x = z[i], d = SR_D(x);
        unsigned key = sr_key(x);
        if (d < dlo || key < klo) continue;
        if (lvl > 0 && (key >> (shift + (lvl == 1 ? 11 : 10))) != (prefix >> (shift + (lvl == 1 ? 11 : 10)))) continue;
        int b = (key >> shift) & (nb - 1);
        atomicAdd(&hc[b], 1u);
        atomicAdd(&hw[b], sr_fx(expf(d)));
      }
      __syncthreads();
      sr_pick(hc, hw, nb, true, above, target, res);
      __syncthreads();
      prefix |= (unsigned)res[0] << shift;
      above = res[1];
      if (lvl == 2) tieCount = hc[res[0]];
      __syncthreads();
    }
    tau = prefix;
    unsigned long long wt = sr_fx(expf(SR_D(sr_unkey(tau))));
    // Ties j = 0, 1, … are kept while above + j·wt < target.
    unsigned long long keepTies = (unsigned long long)ceil((target - (double)above) / (double)wt);
    if (keepTies < 1) keepTies = 1;
    if (keepTies > tieCount) keepTies = tieCount;
    if (keepTies < tieCount) {
      // The keepTies-th tie in id order: an ordered count.
      unsigned long long base = 0, tt;
      if (tid == 0) found = vocab;
      for (int t0 = 0; t0 < vocab; t0 += nt) {
        int i = t0 + tid;
        unsigned long long f = 0;
        if (i < vocab) {
          float x = z[i];
          f = (SR_D(x) >= dlo && sr_key(x) == tau) ? 1 : 0;
        }
        unsigned long long incl = sr_scan(f, sh, &tt);
        if (f && base + incl == keepTies) found = i;
        base += tt;
        __syncthreads();
        if (found != vocab) break;
      }
      cut = found;
      __syncthreads();
    }
    total = above + keepTies * wt;
  }

  // The draw: the first kept token, in id order, whose cumulative weight
  // exceeds u·total.
  unsigned c0 = (unsigned)pr[4], c1 = (unsigned)pr[5], k0 = (unsigned)pr[2], k1 = (unsigned)pr[3], c2 = 0, c3 = 0;
  for (int r = 0; r < 10; r++) {
    if (r > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    unsigned long long p0 = (unsigned long long)0xD2511F53u * c0, p1 = (unsigned long long)0xCD9E8D57u * c2;
    unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ k0, n1 = (unsigned)p1, n2 = (unsigned)(p0 >> 32) ^ c3 ^ k1, n3 = (unsigned)p0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
  }
  double u = (double)(((unsigned long long)c0 << 21) | (c1 >> 11)) * 1.1102230246251565404236316680908203125e-16;  // ·2⁻⁵³
  double target = u * (double)total;
  unsigned long long base = 0, tt;
  int lastKept = -1;
  if (tid == 0) found = vocab;
  __syncthreads();
  for (int t0 = 0; t0 < vocab; t0 += nt) {
    int i = t0 + tid;
    unsigned long long v = 0;
    if (i < vocab) {
      float x = z[i], d = SR_D(x);
      unsigned key = sr_key(x);
      if (d >= dlo && key >= klo && (tau == 0 || key > tau || (key == tau && i <= cut))) {
        v = sr_fx(expf(d));
        lastKept = i;
      }
    }
    unsigned long long incl = sr_scan(v, sh, &tt);
    if (v && (double)(base + incl) > target && (double)(base + incl - v) <= target) found = i;
    base += tt;
    __syncthreads();
    if (found != vocab) break;
  }
  int tok = found;
  if (tok == vocab) {
    // u·total rounded up to the total: the last kept token.
    for (int off = 16; off > 0; off >>= 1) lastKept = max(lastKept, __shfl_xor_sync(DFULL, lastKept, off));
    if (lane == 0) fi[w] = lastKept;
    __syncthreads();
    tok = -1;
    for (int i = 0; i < nw; i++) tok = max(tok, fi[i]);
  }
  if (tok < 0) {
    // Nothing kept (not reachable with the rounded d above): no token
    // rather than a read before the row.
    if (tid == 0) o[0] = -1, o[1] = 0, o[2] = 0;
    return;
  }
  if (tid == 0) {
    o[0] = tok;
    o[1] = __float_as_int((float)((double)SR_D(z[tok]) - log(sr_unfx(total))));
    o[2] = __float_as_int((float)((double)z[tok] - lse));
  }
#undef SR_D
}
