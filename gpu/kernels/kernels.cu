// Kernels of the agentrl CUDA backend (package gpu). Compiled to PTX by
// `go generate ./gpu` (see gen.go); the PTX is committed and embedded, so
// users need no nvcc. Every kernel is extern "C" so that its .entry name in
// the PTX is the name the Go side looks up.
//
// Conventions match policy/backend: row-major float32 tensors, backward
// kernels accumulate (+=), reductions in float32 or float64. Arithmetic that
// must match the CPU bit for bit (AdamW) uses the _rn intrinsics, which nvcc
// never contracts into fused multiply-adds.
#include <cuda_bf16.h>
#include <math.h>

#define FULL 0xffffffffu

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
  return v;
}
// block_sum reduces v over a block of at most 1024 threads (a multiple of
// 32); every thread gets the total. sh holds 32 floats.
__device__ float block_sum(float v, float* sh) {
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : 0.f;
  return warp_sum(v);
}
__device__ float block_max(float v, float* sh) {
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : -INFINITY;
  return warp_max(v);
}

// ---- elementwise -----------------------------------------------------------

extern "C" __global__ void fill_f32(float* p, float v, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) p[i] = v;
}

extern "C" __global__ void scale_f32(float* p, float a, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) p[i] *= a;
}

// f32_to_bf16 rounds to nearest even (NaN stays NaN), as torch's
// tensor.to(torch.bfloat16).
extern "C" __global__ void f32_to_bf16(__nv_bfloat16* y, const float* x, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) y[i] = __float2bfloat16_rn(x[i]);
}

// round_bf16 stores x rounded to bfloat16 and widened back to float32: the
// inputs of the bf16 fallback GEMM when cuBLAS is absent.
extern "C" __global__ void round_bf16(float* y, const float* x, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) y[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}

// bf16_to_f32 widens bfloat16 to float32 (exact): a weight held in
// bfloat16 only (Backend.AllocBF16) read where float32 is needed.
extern "C" __global__ void bf16_to_f32(float* y, const __nv_bfloat16* x, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) y[i] = __bfloat162float(x[i]);
}

extern "C" __global__ void add_f32(float* out, const float* a, const float* b, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) out[i] = a[i] + b[i];
}

extern "C" __global__ void axpy_f32(float alpha, const float* x, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) y[i] += alpha * x[i];
}

// ---- random initialization ---------------------------------------------------

__device__ __forceinline__ unsigned long long splitmix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// rand_normal sets p[i] = (float)(std·N_i) with N_i the i-th draw of the
// counter-based normal stream seed, policy/backend.NormalAt: SplitMix64's
// outputs 2i+1 and 2i+2 from state seed through Box–Muller, in double.
extern "C" __global__ void rand_normal(float* p, long long n, long long seed, float std) {
  const unsigned long long g = 0x9e3779b97f4a7c15ull, s = (unsigned long long)seed;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned long long a = splitmix64(s + (2ull * (unsigned long long)i + 1ull) * g);
    unsigned long long b = splitmix64(s + (2ull * (unsigned long long)i + 2ull) * g);
    double u1 = (double)((a >> 11) + 1ull) * 0x1p-53;
    double u2 = (double)(b >> 11) * 0x1p-53;
    double z = sqrt(-2.0 * log(u1)) * cos((2.0 * 3.141592653589793) * u2);
    p[i] = (float)((double)std * z);
  }
}

// ---- linear: bias ---------------------------------------------------------

extern "C" __global__ void bias_add(float* y, const float* b, int rows, int out) {
  long long n = (long long)rows * out;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) y[i] += b[i % out];
}

// bias_grad: db[j] += Σ_r dy[r, j], one thread per column (coalesced rows),
// float64 sums as the CPU backend.
extern "C" __global__ void bias_grad(float* db, const float* dy, int rows, int out) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= out) return;
  double s = 0;
  for (int r = 0; r < rows; r++) s += dy[(long long)r * out + j];
  db[j] += (float)s;
}

// ---- embedding --------------------------------------------------------------

// embedding_fwd gathers out[t] = table[ids[t]]; also the row gather of Logits.
extern "C" __global__ void embedding_fwd(float* out, const float* table, const int* ids, int n, int dim) {
  long long total = (long long)n * dim;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long t = i / dim;
    int c = (int)(i % dim);
    out[i] = table[(long long)ids[t] * dim + c];
  }
}

// embedding_fwd_bf16 is embedding_fwd from a table held in bfloat16,
// each element widened exactly.
extern "C" __global__ void embedding_fwd_bf16(float* out, const __nv_bfloat16* table, const int* ids, int n, int dim) {
  long long total = (long long)n * dim;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long t = i / dim;
    int c = (int)(i % dim);
    out[i] = __bfloat162float(table[(long long)ids[t] * dim + c]);
  }
}

// embedding_bwd adds dout's rows into dtable's: dtable[id] += dout[t] for
// every position t of id, in increasing t, as the CPU backend does, so the
// sums are the same bits on every run and on both backends (no atomics).
// grp lays out the u distinct ids: grp[0:u] the ids, grp[u:2u+1] the
// offsets of their positions in grp[2u+1:], each id's ascending (see
// embeddingGroups). One thread per (distinct id, column).
extern "C" __global__ void embedding_bwd(float* dtable, const float* dout, const int* grp, int u, int dim) {
  long long total = (long long)u * dim;
  const int* off = grp + u;
  const int* pos = grp + 2 * u + 1;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    int g = (int)(i / dim), c = (int)(i % dim);
    float* dst = dtable + (long long)grp[g] * dim + c;
    float acc = *dst;
    for (int k = off[g]; k < off[g + 1]; k++) acc += dout[(long long)pos[k] * dim + c];
    *dst = acc;
  }
}

// ---- RMSNorm ----------------------------------------------------------------

// rmsnorm_fwd: one block per row; rstd may be null.
extern "C" __global__ void rmsnorm_fwd(float* out, float* rstd, const float* x, const float* w, int rows, int dim, float eps) {
  __shared__ float sh[32];
  int r = blockIdx.x;
  const float* xr = x + (long long)r * dim;
  float ss = 0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss, sh);
  float rs = (float)(1.0 / sqrt((double)ss / dim + (double)eps));
  if (rstd != 0 && threadIdx.x == 0) rstd[r] = rs;
  float* orow = out + (long long)r * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) orow[i] = w[i] * (xr[i] * rs);
}

// rmsnorm_bwd_dx: dx_k += r·w_k·g_k − (r³/D)·x_k·Σ_i g_i·w_i·x_i, a block per row.
extern "C" __global__ void rmsnorm_bwd_dx(float* dx, const float* dout, const float* x, const float* w, const float* rstd, int rows, int dim) {
  __shared__ float sh[32];
  int r = blockIdx.x;
  const float* xr = x + (long long)r * dim;
  const float* gr = dout + (long long)r * dim;
  float dot = 0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dot += gr[i] * w[i] * xr[i];
  dot = block_sum(dot, sh);
  float rs = rstd[r];
  float c = rs * rs * rs / dim * dot;
  float* dr = dx + (long long)r * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dr[i] += rs * w[i] * gr[i] - c * xr[i];
}

// The weight gradient dw_i = Σ_r g_ri·x_ri·r_r is a reduction over the
// rows, in two deterministic stages: rmsnorm_dw_partial sums chunks of
// rows per column into part [chunks, dim] (float64), rmsnorm_dw_finish
// sums the chunks of each column. Every sum has one fixed order — by
// thread, row lane and chunk index, never by which block runs first — so
// the result is the same bit for bit on every run. The host chooses the
// chunks (launch.go, dwPlan) from the row count alone.
#define DW_COLS 32  // columns per block of rmsnorm_dw_partial: one per lane
#define DW_LANES 8  // row lanes per block: rows r0+y, r0+y+8, … for lane y

// rmsnorm_dw_partial: block (tile, chunk) of DW_COLS × DW_LANES threads
// covers columns [DW_COLS·tile, +DW_COLS) and rows [chunk·chunkRows,
// min(rows, (chunk+1)·chunkRows)); thread (c, y) adds the terms of its
// rows in row order, then lane 0 adds the DW_LANES sums in lane order and
// writes part[chunk·dim + column]. A warp reads 32 consecutive floats of
// one row: coalesced.
extern "C" __global__ void rmsnorm_dw_partial(double* part, const float* dout, const float* x, const float* rstd, int rows, int dim,
                                              int chunkRows) {
  __shared__ double sh[DW_LANES][DW_COLS + 1];
  int c = blockIdx.x * DW_COLS + threadIdx.x, y = threadIdx.y;
  int r0 = blockIdx.y * chunkRows, r1 = min(rows, r0 + chunkRows);
  double s = 0;
  if (c < dim)
    for (int r = r0 + y; r < r1; r += DW_LANES) {
      long long i = (long long)r * dim + c;
      s += (double)dout[i] * x[i] * rstd[r];
    }
  sh[y][threadIdx.x] = s;
  __syncthreads();
  if (y == 0 && c < dim) {
    double t = 0;
    for (int k = 0; k < DW_LANES; k++) t += sh[k][threadIdx.x];
    part[(long long)blockIdx.y * dim + c] = t;
  }
}

// rmsnorm_dw_finish: dw_c += Σ_k part[k·dim + c], a warp per column: lane
// l adds chunks l, l+32, … in order, the lanes' sums meet in a fixed
// butterfly, and lane 0 stores. blockDim is a multiple of 32, so whole
// warps return together.
extern "C" __global__ void rmsnorm_dw_finish(float* dw, const double* part, int chunks, int dim) {
  long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (w >= dim) return;
  double s = 0;
  for (int k = lane; k < chunks; k += 32) s += part[(long long)k * dim + w];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
  if (lane == 0) dw[w] += (float)s;
}

// ---- RoPE -------------------------------------------------------------------

// rope rotates pairs (i, i+half) of x [ntok, heads, hd] by sign·pos·freq; the
// angle is the float32 product (as transformers), its cosine and sine are
// taken in float64. accumulate adds into out (backward). One thread per pair;
// out may be x when not accumulating (each pair is read before written).
extern "C" __global__ void rope(float* out, const float* x, const int* pos, const float* freqs, int ntok, int heads, int hd, float sign, int accumulate) {
  int half = hd / 2;
  long long total = (long long)ntok * heads * half;
  for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total; idx += (long long)gridDim.x * blockDim.x) {
    int i = (int)(idx % half);
    long long th = idx / half;  // t*heads + h
    int t = (int)(th / heads);
    float ang = (float)pos[t] * freqs[i];
    double sd, cd;
    sincos((double)ang, &sd, &cd);
    float c = (float)cd, s = sign * (float)sd;
    long long base = th * hd;
    float a = x[base + i], b = x[base + i + half];
    float r0 = a * c - b * s, r1 = b * c + a * s;
    if (accumulate) {
      out[base + i] += r0;
      out[base + i + half] += r1;
    } else {
      out[base + i] = r0;
      out[base + i + half] = r1;
    }
  }
}

// ---- SwiGLU -----------------------------------------------------------------

__device__ __forceinline__ float sigm(float g) { return 1.f / (1.f + expf(-g)); }

extern "C" __global__ void swiglu_fwd(float* out, const float* gate, const float* up, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float g = gate[i];
    out[i] = g * sigm(g) * up[i];
  }
}

// swiglu_bwd: dgate += dout·up·σ(g)(1 + g(1−σ(g))), dup += dout·silu(g); either may be null.
extern "C" __global__ void swiglu_bwd(float* dgate, float* dup, const float* dout, const float* gate, const float* up, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float g = gate[i], s = sigm(g), d = dout[i];
    if (dgate != 0) dgate[i] += d * up[i] * s * (1.f + g * (1.f - s));
    if (dup != 0) dup[i] += d * g * s;
  }
}

// ---- attention ----------------------------------------------------------------
//
// Flash-style causal GQA attention (Dao et al., FlashAttention-2): no score
// matrix is stored. The host splits the query rows of every span into tiles
// of up to ATT_ROWS rows (one warp each) that share the key range; keys are
// walked in tiles of 32 (one lane per key) staged in shared memory, with an
// online softmax (running max m and sum l, rescaled per tile). Head dim ≤ 256
// (8 channels per lane).

#define ATT_ROWS 4
#define ATT_BK 32
#define ATT_MAXC 8

// attn_fwd: tiles[4·b] = {first query row, rows, first key row, visible keys
// of the first row}; row i of the tile sees one more key than row i−1.
// Dynamic shared memory: (ATT_ROWS·hd + ATT_BK·(hd+1)) floats.
extern "C" __global__ void attn_fwd(float* out, float* lse, const float* q, const float* k, const float* v, const int* tiles,
                                    int heads, int kvheads, int hd, float scale) {
  extern __shared__ float sm[];
  float* sq = sm;
  float* sk = sm + ATT_ROWS * hd;
  const int* tl = tiles + 4 * blockIdx.x;
  int q0 = tl[0], nrows = tl[1], k0 = tl[2], cnt0 = tl[3];
  int h = blockIdx.y, g = h / (heads / kvheads);
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  long long qRow = (long long)heads * hd, kRow = (long long)kvheads * hd;
  for (int i = threadIdx.x; i < nrows * hd; i += blockDim.x) sq[i] = q[(q0 + i / hd) * qRow + h * hd + i % hd];
  bool active = warp < nrows;
  int mycnt = cnt0 + warp, maxcnt = cnt0 + nrows - 1;
  float m = -INFINITY, l = 0.f, acc[ATT_MAXC];
  for (int j = 0; j < ATT_MAXC; j++) acc[j] = 0.f;
  for (int kt = 0; kt < maxcnt; kt += ATT_BK) {
    int nk = min(ATT_BK, maxcnt - kt);
    __syncthreads();
    for (int i = threadIdx.x; i < nk * hd; i += blockDim.x) sk[(i / hd) * (hd + 1) + i % hd] = k[(k0 + kt + i / hd) * kRow + g * hd + i % hd];
    __syncthreads();
    if (!active || kt >= mycnt) continue;
    int vis = min(nk, mycnt - kt);
    float s = -INFINITY;
    if (lane < vis) {
      float d = 0.f;
      for (int c = 0; c < hd; c++) d += sq[warp * hd + c] * sk[lane * (hd + 1) + c];
      s = d * scale;
    }
    float mn = fmaxf(m, warp_max(s));
    float corr = expf(m - mn);
    float p = lane < vis ? expf(s - mn) : 0.f;
    l = l * corr + warp_sum(p);
    for (int j = 0; j < ATT_MAXC; j++) acc[j] *= corr;
    for (int jj = 0; jj < vis; jj++) {
      float pj = __shfl_sync(FULL, p, jj);
      const float* vr = v + (k0 + kt + jj) * kRow + g * hd;
      for (int j = 0; j < ATT_MAXC; j++) {
        int c = lane + 32 * j;
        if (c < hd) acc[j] += pj * vr[c];
      }
    }
    m = mn;
  }
  if (!active) return;
  long long orow = (q0 + warp) * qRow + h * hd;
  float inv = 1.f / l;
  for (int j = 0; j < ATT_MAXC; j++) {
    int c = lane + 32 * j;
    if (c < hd) out[orow + c] = acc[j] * inv;
  }
  if (lse != 0 && lane == 0) lse[(long long)(q0 + warp) * heads + h] = m + logf(l);
}

// attn_decode_partial is the first pass of split-K decoding
// (flash-decoding): few query rows against a long KV cache. rows[3·r] =
// {query row, first key row, visible keys}; block (r, h, split) covers keys
// [split·chunk, min(count, (split+1)·chunk)) with one warp and writes its
// running max, sum and unnormalized output to ml [R, heads, splits, 2] and
// pacc [R, heads, splits, hd]. Dynamic shared memory: (hd + ATT_BK·(hd+1)) floats.
extern "C" __global__ void attn_decode_partial(float* ml, float* pacc, const float* q, const float* k, const float* v, const int* rows,
                                               int heads, int kvheads, int hd, float scale, int chunk) {
  extern __shared__ float sm[];
  float* sq = sm;
  float* sk = sm + hd;
  int r = blockIdx.x, h = blockIdx.y, sp = blockIdx.z, nsp = gridDim.z;
  int qr = rows[3 * r], k0 = rows[3 * r + 1], cnt = rows[3 * r + 2];
  int g = h / (heads / kvheads), lane = threadIdx.x;
  long long qRow = (long long)heads * hd, kRow = (long long)kvheads * hd;
  for (int c = lane; c < hd; c += 32) sq[c] = q[qr * qRow + h * hd + c];
  int lo = sp * chunk, hi = min(cnt, lo + chunk);
  float m = -INFINITY, l = 0.f, acc[ATT_MAXC];
  for (int j = 0; j < ATT_MAXC; j++) acc[j] = 0.f;
  for (int kt = lo; kt < hi; kt += ATT_BK) {
    int nk = min(ATT_BK, hi - kt);
    __syncwarp();
    for (int i = lane; i < nk * hd; i += 32) sk[(i / hd) * (hd + 1) + i % hd] = k[(k0 + kt + i / hd) * kRow + g * hd + i % hd];
    __syncwarp();
    float s = -INFINITY;
    if (lane < nk) {
      float d = 0.f;
      for (int c = 0; c < hd; c++) d += sq[c] * sk[lane * (hd + 1) + c];
      s = d * scale;
    }
    float mn = fmaxf(m, warp_max(s));
    float corr = expf(m - mn);
    float p = lane < nk ? expf(s - mn) : 0.f;
    l = l * corr + warp_sum(p);
    for (int j = 0; j < ATT_MAXC; j++) acc[j] *= corr;
    for (int jj = 0; jj < nk; jj++) {
      float pj = __shfl_sync(FULL, p, jj);
      const float* vr = v + (k0 + kt + jj) * kRow + g * hd;
      for (int j = 0; j < ATT_MAXC; j++) {
        int c = lane + 32 * j;
        if (c < hd) acc[j] += pj * vr[c];
      }
    }
    m = mn;
  }
  long long slot = ((long long)r * heads + h) * nsp + sp;
  if (lane == 0) {
    ml[2 * slot] = m;
    ml[2 * slot + 1] = l;
  }
  for (int j = 0; j < ATT_MAXC; j++) {
    int c = lane + 32 * j;
    if (c < hd) pacc[slot * hd + c] = acc[j];
  }
}

// attn_decode_combine merges the splits of one (row, head): M = max m_s,
// L = Σ l_s·e^(m_s−M), out = Σ acc_s·e^(m_s−M) / L, lse = M + log L. One warp.
extern "C" __global__ void attn_decode_combine(float* out, float* lse, const float* ml, const float* pacc, const int* rows, int heads, int hd, int nsp) {
  int r = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
  long long base = ((long long)r * heads + h) * nsp;
  float M = -INFINITY;
  for (int s = 0; s < nsp; s++) M = fmaxf(M, ml[2 * (base + s)]);
  float L = 0.f;
  for (int s = 0; s < nsp; s++) {
    float ms = ml[2 * (base + s)];
    if (ms != -INFINITY) L += ml[2 * (base + s) + 1] * expf(ms - M);
  }
  int qr = rows[3 * r];
  long long orow = ((long long)qr * heads + h) * hd;
  for (int c = lane; c < hd; c += 32) {
    float a = 0.f;
    for (int s = 0; s < nsp; s++) {
      float ms = ml[2 * (base + s)];
      if (ms != -INFINITY) a += pacc[(base + s) * hd + c] * expf(ms - M);
    }
    out[orow + c] = a / L;
  }
  if (lse != 0 && lane == 0) lse[(long long)qr * heads + h] = M + logf(L);
}

// attn_bwd_dot: D[row, h] = Σ_c dout·out (FlashAttention-2's D_i), a warp
// per (row, head).
extern "C" __global__ void attn_bwd_dot(float* D, const float* dout, const float* out, int nrows, int hd) {
  long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (w >= nrows) return;
  float s = 0.f;
  for (int c = lane; c < hd; c += 32) s += dout[w * hd + c] * out[w * hd + c];
  s = warp_sum(s);
  if (lane == 0) D[w] = s;
}

// attn_bwd_dq: dq_i += scale·Σ_j p_ij(dp_ij − D_i)·k_j with p recomputed from
// lse and dp_ij = dO_i·v_j; the forward's query tiles. dq may be written by
// exactly one warp per (row, head), so no atomics. Dynamic shared memory:
// (2·ATT_ROWS·hd + 2·ATT_BK·(hd+1)) floats.
extern "C" __global__ void attn_bwd_dq(float* dq, const float* dout, const float* q, const float* k, const float* v, const float* lse,
                                       const float* D, const int* tiles, int heads, int kvheads, int hd, float scale) {
  extern __shared__ float sm[];
  float* sq = sm;
  float* sdo = sq + ATT_ROWS * hd;
  float* sk = sdo + ATT_ROWS * hd;
  float* sv = sk + ATT_BK * (hd + 1);
  const int* tl = tiles + 4 * blockIdx.x;
  int q0 = tl[0], nrows = tl[1], k0 = tl[2], cnt0 = tl[3];
  int h = blockIdx.y, g = h / (heads / kvheads);
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  long long qRow = (long long)heads * hd, kRow = (long long)kvheads * hd;
  for (int i = threadIdx.x; i < nrows * hd; i += blockDim.x) {
    long long src = (q0 + i / hd) * qRow + h * hd + i % hd;
    sq[i] = q[src];
    sdo[i] = dout[src];
  }
  bool active = warp < nrows;
  int mycnt = cnt0 + warp, maxcnt = cnt0 + nrows - 1;
  float L = 0.f, Di = 0.f, acc[ATT_MAXC];
  if (active) {
    L = lse[(long long)(q0 + warp) * heads + h];
    Di = D[(long long)(q0 + warp) * heads + h];
  }
  for (int j = 0; j < ATT_MAXC; j++) acc[j] = 0.f;
  for (int kt = 0; kt < maxcnt; kt += ATT_BK) {
    int nk = min(ATT_BK, maxcnt - kt);
    __syncthreads();
    for (int i = threadIdx.x; i < nk * hd; i += blockDim.x) {
      long long src = (k0 + kt + i / hd) * kRow + g * hd + i % hd;
      int dst = (i / hd) * (hd + 1) + i % hd;
      sk[dst] = k[src];
      sv[dst] = v[src];
    }
    __syncthreads();
    if (!active || kt >= mycnt) continue;
    int vis = min(nk, mycnt - kt);
    float ds = 0.f;
    if (lane < vis) {
      float s = 0.f, dp = 0.f;
      for (int c = 0; c < hd; c++) {
        s += sq[warp * hd + c] * sk[lane * (hd + 1) + c];
        dp += sdo[warp * hd + c] * sv[lane * (hd + 1) + c];
      }
      float p = expf(s * scale - L);
      ds = p * (dp - Di);
    }
    for (int jj = 0; jj < vis; jj++) {
      float d = __shfl_sync(FULL, ds, jj);
      for (int j = 0; j < ATT_MAXC; j++) {
        int c = lane + 32 * j;
        if (c < hd) acc[j] += d * sk[jj * (hd + 1) + c];
      }
    }
  }
  if (!active) return;
  long long orow = (q0 + warp) * qRow + h * hd;
  for (int j = 0; j < ATT_MAXC; j++) {
    int c = lane + 32 * j;
    if (c < hd) dq[orow + c] += scale * acc[j];
  }
}

// attn_bwd_dkdv: dv_j += Σ_h Σ_i p_ij·dO_i and dk_j += scale·Σ_h Σ_i
// p_ij(dp_ij − D_i)·q_i over the query heads h of KV head g and the queries
// i that see key j. ktiles[6·b] = {first key row, rows, span-relative index
// of the first key, first query row of the span, QLen, KLen−QLen}. A warp
// per key row; one lane per query of a 32-query tile. dk or dv may be null.
// Dynamic shared memory: (2·ATT_ROWS·hd + 2·ATT_BK·(hd+1)) floats.
extern "C" __global__ void attn_bwd_dkdv(float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
                                         const float* lse, const float* D, const int* ktiles, int heads, int kvheads, int hd, float scale) {
  extern __shared__ float sm[];
  float* skr = sm;
  float* svr = skr + ATT_ROWS * hd;
  float* sq = svr + ATT_ROWS * hd;
  float* sdo = sq + ATT_BK * (hd + 1);
  const int* tl = ktiles + 6 * blockIdx.x;
  int kr0 = tl[0], nrows = tl[1], jr0 = tl[2], q0 = tl[3], qlen = tl[4], past = tl[5];
  int g = blockIdx.y, group = heads / kvheads;
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  long long qRow = (long long)heads * hd, kRow = (long long)kvheads * hd;
  for (int i = threadIdx.x; i < nrows * hd; i += blockDim.x) {
    long long src = (kr0 + i / hd) * kRow + g * hd + i % hd;
    skr[i] = k[src];
    svr[i] = v[src];
  }
  bool active = warp < nrows;
  int jr = jr0 + warp;
  // Query i (0-based in the span) sees key jr when jr ≤ past + i.
  int first = max(0, jr0 - past);  // the first query any row of the tile needs
  int myfirst = max(0, jr - past);
  float ak[ATT_MAXC], av[ATT_MAXC];
  for (int j = 0; j < ATT_MAXC; j++) ak[j] = av[j] = 0.f;
  for (int h = g * group; h < (g + 1) * group; h++) {
    for (int it = first; it < qlen; it += ATT_BK) {
      int nq = min(ATT_BK, qlen - it);
      __syncthreads();
      for (int i = threadIdx.x; i < nq * hd; i += blockDim.x) {
        long long src = (q0 + it + i / hd) * qRow + h * hd + i % hd;
        int dst = (i / hd) * (hd + 1) + i % hd;
        sq[dst] = q[src];
        sdo[dst] = dout[src];
      }
      __syncthreads();
      if (!active) continue;
      int qi = it + lane;
      float p = 0.f, ds = 0.f;
      if (lane < nq && qi >= myfirst) {
        long long row = (long long)(q0 + qi) * heads + h;
        float s = 0.f, dp = 0.f;
        for (int c = 0; c < hd; c++) {
          s += sq[lane * (hd + 1) + c] * skr[warp * hd + c];
          dp += sdo[lane * (hd + 1) + c] * svr[warp * hd + c];
        }
        p = expf(s * scale - lse[row]);
        ds = p * (dp - D[row]);
      }
      for (int ii = 0; ii < nq; ii++) {
        float pi = __shfl_sync(FULL, p, ii), di = __shfl_sync(FULL, ds, ii);
        for (int j = 0; j < ATT_MAXC; j++) {
          int c = lane + 32 * j;
          if (c < hd) {
            av[j] += pi * sdo[ii * (hd + 1) + c];
            ak[j] += di * sq[ii * (hd + 1) + c];
          }
        }
      }
    }
  }
  if (!active) return;
  long long krow = (kr0 + warp) * kRow + g * hd;
  for (int j = 0; j < ATT_MAXC; j++) {
    int c = lane + 32 * j;
    if (c >= hd) continue;
    if (dk != 0) dk[krow + c] += scale * ak[j];
    if (dv != 0) dv[krow + c] += av[j];
  }
}

// ---- attention on tensor cores (bf16 mma.sync) --------------------------------
//
// FlashAttention-2 (Dao, 2023) with the two products of the forward (S = QKᵀ,
// O = PV) and the four of the backward (S, dP = dO·Vᵀ, dQ = dS·K,
// dK = dSᵀ·Q, dV = Pᵀ·dO) on tensor cores: mma.sync.m16n8k16 with bfloat16
// inputs and float32 accumulation. The buffers stay float32; tiles are
// rounded to bfloat16 (to nearest even) as they are loaded into shared
// memory or registers, so no bf16 copy of q, k, v or dout is ever made in
// global memory. Softmax statistics (running max, sums, lse, D) and the
// accumulators are float32. P and dS are rounded to bfloat16 between the
// products, as in FlashAttention-2.
//
// The kernels are templates on the padded head dim HD (64 or 128): a head
// dim hd ≤ HD is zero-padded to HD in the tiles (zero channels add nothing
// to q·k and give output channels that are never stored), so every
// hd ≤ 128 runs here. A block is 4 warps (128 threads); each warp owns 16
// rows of its block's 64-row tile.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with
// floating point type"): lane = 4·groupID + threadID_in_group (gr, tq below).
// A (16×16, row-major) is four .b32 registers of two bf16 each, the lower
// half holding the lower column: a0 = A[gr][2tq, 2tq+1], a1 = A[gr+8][2tq, …],
// a2 = A[gr][2tq+8, …], a3 = A[gr+8][2tq+8, …]. B (16×8, "col") is two
// registers: b0 = B[2tq, 2tq+1][gr], b1 = B[2tq+8, 2tq+9][gr]. C/D (16×8
// float32) is four floats: c0, c1 = C[gr][2tq, 2tq+1], c2, c3 =
// C[gr+8][2tq, 2tq+1]. Two adjacent C tiles (columns 0–7 and 8–15) thus
// hold exactly the elements of one A fragment (frag_a_from_c), which is how
// P and dS go from one product into the next without shared memory.
// emu/emu.h implements the instruction from the same table and emu/check.cc
// checks it against a direct product.

#define TC_THREADS 128
#define TC_ROWS 64  // query rows (forward, dQ) or key rows (dK/dV) per block
#define TC_PAD 8    // bf16 elements of padding per shared-memory row (no bank conflicts)
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

typedef unsigned int u32;
typedef unsigned short u16;

__device__ __forceinline__ u16 bf16_bits(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
// pack_bf16 rounds lo and hi to bfloat16 and packs them, lo in the lower half.
__device__ __forceinline__ u32 pack_bf16(float lo, float hi) { return (u32)bf16_bits(lo) | ((u32)bf16_bits(hi) << 16); }
// ld_pair reads two adjacent bf16 (4-byte aligned) as one register.
__device__ __forceinline__ u32 ld_pair(const u16* p) { return *(const u32*)p; }

// mma_bf16: d += a·b for one m16n8k16 tile, bf16 inputs, float32 accumulators.
// All 32 lanes of the warp must execute it together.
__device__ __forceinline__ void mma_bf16(float* d, const u32* a, const u32* b) {
#if defined(__CUDA_ARCH__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(AGENTRL_EMU)
  emu_mma_m16n8k16_bf16(d, a, b);
#endif
}

// frag_a loads the A fragment of rows m0…m0+15, columns k0…k0+15 of a
// row-major bf16 matrix in shared memory (row stride ld elements).
__device__ __forceinline__ void frag_a(u32* a, const u16* s, int ld, int m0, int k0) {
  int gr = (threadIdx.x & 31) >> 2, tq = threadIdx.x & 3;
  const u16* p = s + (m0 + gr) * ld + k0 + 2 * tq;
  a[0] = ld_pair(p);
  a[1] = ld_pair(p + 8 * ld);
  a[2] = ld_pair(p + 8);
  a[3] = ld_pair(p + 8 * ld + 8);
}

// frag_b loads the B fragment of B[k0…k0+15][n0…n0+7] from shared memory
// that stores Bᵀ row-major (row n holds B[·][n], stride ld): the two k of
// a register are adjacent there.
__device__ __forceinline__ void frag_b(u32* b, const u16* s, int ld, int n0, int k0) {
  int gr = (threadIdx.x & 31) >> 2, tq = threadIdx.x & 3;
  const u16* p = s + (n0 + gr) * ld + k0 + 2 * tq;
  b[0] = ld_pair(p);
  b[1] = ld_pair(p + 8);
}

// frag_a_from_c rounds two accumulator tiles (columns 0–7 in c0, 8–15 in
// c1) to bf16 as one A fragment (same lanes, same rows: see the table above).
__device__ __forceinline__ void frag_a_from_c(u32* a, const float* c0, const float* c1) {
  a[0] = pack_bf16(c0[0], c0[1]);
  a[1] = pack_bf16(c0[2], c0[3]);
  a[2] = pack_bf16(c1[0], c1[1]);
  a[3] = pack_bf16(c1[2], c1[3]);
}

// load_rows rounds n ≥ 1 float32 rows of hd channels (row r at src +
// r·stride) to bf16 into a [ROWS][HD+TC_PAD] tile s and/or its transpose t
// [HD][ROWS+TC_PAD] (either may be null). Rows ≥ n and channels ≥ hd are
// zero, so padded products add nothing and never read NaN garbage.
//
// When hd is a multiple of 4 (16-byte aligned rows: every head dim of
// note), the tile is ROWS·HD/4 groups of 4 channels, each moved with one
// float4 load; thread x takes groups x, x + TC_THREADS, x + 2·TC_THREADS,
// … — a stride fixed at compile time, so the loop unrolls completely, and
// each batch of TC_LOADS groups is loaded before any of them is converted
// or stored: TC_LOADS 16-byte loads in flight per thread instead of one
// global round trip per group. A group outside the rows or channels loads
// row 0, channel 0 (always inside the buffer: n ≥ 1) and is zeroed after,
// so no load waits on a branch. Consecutive threads take consecutive
// channels of a row (coalesced loads, conflict-free stores to s) unless
// the tile is transposed, where they take consecutive rows of a channel
// group, so that the 2-byte stores to t fall in distinct banks. Every
// kernel that calls it runs TC_THREADS threads per block.
#define TC_LOADS 8  // 16-byte loads a thread issues before converting any

// tile_group places group i of a [ROWS][HD] tile (4 channels): row-major
// order for s, row fastest for the transposed t.
template <int HD, int ROWS>
__device__ __forceinline__ void tile_group(int i, bool transposed, int& r, int& c) {
  if (transposed) {
    r = i % ROWS;
    c = 4 * (i / ROWS);
  } else {
    r = i / (HD / 4);
    c = 4 * (i % (HD / 4));
  }
}

template <int HD, int ROWS, int LOADS = TC_LOADS>
__device__ __forceinline__ void load_rows(u16* s, u16* t, const float* src, long long stride, int n, int hd) {
  if ((hd & 3) == 0) {
    constexpr int PER = ROWS * HD / 4 / TC_THREADS;  // groups per thread
    constexpr int BATCH = PER < LOADS ? PER : LOADS;
    static_assert(PER * TC_THREADS == ROWS * HD / 4 && PER % BATCH == 0, "a tile must be whole batches of groups");
    // One batch after the other (not unrolled: the registers of one batch
    // are what the loads in flight cost).
#pragma unroll 1
    for (int j0 = 0; j0 < PER; j0 += BATCH) {
      float4 x[BATCH];
#pragma unroll
      for (int j = 0; j < BATCH; j++) {
        int r, c;
        tile_group<HD, ROWS>(threadIdx.x + TC_THREADS * (j0 + j), t != 0, r, c);
        x[j] = *(const float4*)(src + (r < n && c < hd ? r * stride + c : 0));
      }
#pragma unroll
      for (int j = 0; j < BATCH; j++) {
        int r, c;
        tile_group<HD, ROWS>(threadIdx.x + TC_THREADS * (j0 + j), t != 0, r, c);
        if (!(r < n && c < hd)) x[j] = make_float4(0.f, 0.f, 0.f, 0.f);
        u32 lo = pack_bf16(x[j].x, x[j].y), hi = pack_bf16(x[j].z, x[j].w);
        if (s != 0) *(uint2*)(s + r * (HD + TC_PAD) + c) = make_uint2(lo, hi);
        if (t != 0) {
          u16* col = t + c * (ROWS + TC_PAD) + r;
          col[0] = (u16)lo;
          col[ROWS + TC_PAD] = (u16)(lo >> 16);
          col[2 * (ROWS + TC_PAD)] = (u16)hi;
          col[3 * (ROWS + TC_PAD)] = (u16)(hi >> 16);
        }
      }
    }
    return;
  }
  for (int i = threadIdx.x; i < ROWS * HD; i += blockDim.x) {
    int r = i / HD, c = i % HD;
    float x = (r < n && c < hd) ? src[r * stride + c] : 0.f;
    u16 b = bf16_bits(x);
    if (s != 0) s[r * (HD + TC_PAD) + c] = b;
    if (t != 0) t[c * (ROWS + TC_PAD) + r] = b;
  }
}

// load_frag_a_global loads the A fragments of 16 rows × HD channels of a
// float32 matrix straight from global memory, rounded to bf16 (rows ≥ n
// and channels ≥ hd are zero): the Q (and dO) rows a warp keeps in
// registers for the whole kernel.
template <int HD>
__device__ __forceinline__ void load_frag_a_global(u32 (*a)[4], const float* src, long long stride, int m0, int n, int hd) {
  int gr = (threadIdx.x & 31) >> 2, tq = threadIdx.x & 3;
#pragma unroll
  for (int kc = 0; kc < HD / 16; kc++)
#pragma unroll
    for (int i = 0; i < 4; i++) {
      int r = m0 + gr + 8 * (i & 1), c = kc * 16 + 2 * tq + 8 * (i >> 1);
      const float* p = src + r * stride;
      float lo = (r < n && c < hd) ? p[c] : 0.f, hi = (r < n && c + 1 < hd) ? p[c + 1] : 0.f;
      a[kc][i] = pack_bf16(lo, hi);
    }
}

// quad_max/quad_sum reduce over the 4 lanes that hold one accumulator row.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(FULL, v, 1));
  return fmaxf(v, __shfl_xor_sync(FULL, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(FULL, v, 1);
  return v + __shfl_xor_sync(FULL, v, 2);
}

// attn_fwd_tc: the forward over the tiles of attn_fwd (tiles[4·b] = {first
// query row, rows ≤ 64, first key row, visible keys of the first row}),
// one block per (tile, head), BN keys per step. Scores are kept in base 2
// (s·scale·log2 e) so that exp2f serves the softmax; lse is converted back
// to base e. Dynamic shared memory: tc_fwd_smem.
template <int HD, int BN>
__device__ void attn_fwd_tc(float* out, float* lse, const float* q, const float* k, const float* v, const int* tiles, int heads, int kvheads,
                            int hd, float scale) {
  extern __shared__ float tc_smem[];
  constexpr int KS = HD + TC_PAD, VS = BN + TC_PAD, NS = BN / 8, NO = HD / 8;
  u16* sK = (u16*)tc_smem;        // [BN][KS]: B of S = Q·Kᵀ
  u16* sVt = sK + BN * KS;   // [HD][VS]: B of O = P·V
  const int* tl = tiles + 4 * blockIdx.x;
  int q0 = tl[0], nrows = tl[1], k0 = tl[2], cnt0 = tl[3];
  int h = blockIdx.y, g = h / (heads / kvheads);
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;
  long long qRow = (long long)heads * hd, kRow = (long long)kvheads * hd;
  u32 qf[HD / 16][4];
  load_frag_a_global<HD>(qf, q + q0 * qRow + h * hd, qRow, warp * 16, nrows, hd);
  // Row r of the tile sees keys [0, cnt0 + r) of the span; rows past the
  // tile (never stored) are clamped to its last row.
  int r0 = warp * 16 + gr, r1 = r0 + 8;
  int lim0 = cnt0 + min(r0, nrows - 1), lim1 = cnt0 + min(r1, nrows - 1);
  int warpLim = cnt0 + min(warp * 16 + 15, nrows - 1), maxcnt = cnt0 + nrows - 1;
  bool active = warp * 16 < nrows;
  const float sl2 = scale * LOG2E;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f, o[NO][4];
#pragma unroll
  for (int n = 0; n < NO; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  for (int kt = 0; kt < maxcnt; kt += BN) {
    int nk = min(BN, maxcnt - kt);
    __syncthreads();  // the previous tile's readers are done
    load_rows<HD, BN>(sK, 0, k + (k0 + kt) * kRow + g * hd, kRow, nk, hd);
    load_rows<HD, BN>(0, sVt, v + (k0 + kt) * kRow + g * hd, kRow, nk, hd);
    __syncthreads();
    if (!active || kt >= warpLim) continue;  // warp-uniform: whole warps skip
    float s[NS][4];
#pragma unroll
    for (int j = 0; j < NS; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int kc = 0; kc < HD / 16; kc++)
#pragma unroll
      for (int j = 0; j < NS; j++) {
        if (kt + j * 8 >= warpLim) continue;  // all masked
        u32 b[2];
        frag_b(b, sK, KS, j * 8, kc * 16);
        mma_bf16(s[j], qf[kc], b);
      }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < NS; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        int key = kt + j * 8 + 2 * tq + e;
        s[j][e] = key < lim0 ? s[j][e] * sl2 : -INFINITY;
        s[j][2 + e] = key < lim1 ? s[j][2 + e] * sl2 : -INFINITY;
        mx0 = fmaxf(mx0, s[j][e]);
        mx1 = fmaxf(mx1, s[j][2 + e]);
      }
    float mn0 = fmaxf(m0, quad_max(mx0)), mn1 = fmaxf(m1, quad_max(mx1));
    // Every row sees key 0 of the first tile, so mn is finite; the guard
    // only keeps −∞ − (−∞) out of exp2f.
    float b0 = mn0 == -INFINITY ? 0.f : mn0, b1 = mn1 == -INFINITY ? 0.f : mn1;
    float c0 = exp2f(m0 - b0), c1 = exp2f(m1 - b1);
    l0 *= c0;
    l1 *= c1;
#pragma unroll
    for (int n = 0; n < NO; n++) {
      o[n][0] *= c0;
      o[n][1] *= c0;
      o[n][2] *= c1;
      o[n][3] *= c1;
    }
#pragma unroll
    for (int j = 0; j < NS; j++) {
      s[j][0] = exp2f(s[j][0] - b0);
      s[j][1] = exp2f(s[j][1] - b0);
      s[j][2] = exp2f(s[j][2] - b1);
      s[j][3] = exp2f(s[j][3] - b1);
      l0 += s[j][0] + s[j][1];  // this lane's part of the row sum
      l1 += s[j][2] + s[j][3];
    }
    m0 = mn0;
    m1 = mn1;
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
      if (kt + kk * 16 >= warpLim) continue;
      u32 a[4];
      frag_a_from_c(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int n = 0; n < NO; n++) {
        u32 b[2];
        frag_b(b, sVt, VS, n * 8, kk * 16);
        mma_bf16(o[n], a, b);
      }
    }
  }
  l0 = quad_sum(l0);
  l1 = quad_sum(l1);
  if (!active) return;
#pragma unroll
  for (int half = 0; half < 2; half++) {
    int r = half ? r1 : r0;
    if (r >= nrows) continue;
    float inv = 1.f / (half ? l1 : l0);
    float* orow = out + (q0 + r) * qRow + h * hd;
#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        int c = n * 8 + 2 * tq + e;
        if (c < hd) orow[c] = o[n][2 * half + e] * inv;
      }
    if (lse != 0 && tq == 0) lse[(long long)(q0 + r) * heads + h] = ((half ? m1 : m0) + log2f(half ? l1 : l0)) * LN2;
  }
}

// attn_bwd_dq_tc: dq += scale·Σ_j dS_ij·k_j over the forward's tiles, with
// P_ij = exp(s_ij − lse_i) recomputed and dS = P(dP − D), dP = dO·Vᵀ. One
// block per (tile, head), BN keys per step; each dq element has one writer,
// so no atomics. Dynamic shared memory: tc_dq_smem.
template <int HD, int BN>
__device__ void attn_bwd_dq_tc(float* dq, const float* dout, const float* q, const float* k, const float* v, const float* lse, const float* D,
                               const int* tiles, int heads, int kvheads, int hd, float scale) {
  extern __shared__ float tc_smem[];
  constexpr int KS = HD + TC_PAD, VS = BN + TC_PAD, NS = BN / 8, NO = HD / 8;
  u16* sK = (u16*)tc_smem;        // [BN][KS]: B of S = Q·Kᵀ
  u16* sV = sK + BN * KS;    // [BN][KS]: B of dP = dO·Vᵀ
  u16* sKt = sV + BN * KS;   // [HD][VS]: B of dQ = dS·K
  const int* tl = tiles + 4 * blockIdx.x;
  int q0 = tl[0], nrows = tl[1], k0 = tl[2], cnt0 = tl[3];
  int h = blockIdx.y, g = h / (heads / kvheads);
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;
  long long qRow = (long long)heads * hd, kRow = (long long)kvheads * hd;
  u32 qf[HD / 16][4], df[HD / 16][4];
  load_frag_a_global<HD>(qf, q + q0 * qRow + h * hd, qRow, warp * 16, nrows, hd);
  load_frag_a_global<HD>(df, dout + q0 * qRow + h * hd, qRow, warp * 16, nrows, hd);
  int r0 = warp * 16 + gr, r1 = r0 + 8;
  bool ok0 = r0 < nrows, ok1 = r1 < nrows;
  int lim0 = ok0 ? cnt0 + r0 : 0, lim1 = ok1 ? cnt0 + r1 : 0;  // rows past the tile see nothing
  int warpLim = cnt0 + min(warp * 16 + 15, nrows - 1), maxcnt = cnt0 + nrows - 1;
  bool active = warp * 16 < nrows;
  const float sl2 = scale * LOG2E;
  float L0 = ok0 ? lse[(long long)(q0 + r0) * heads + h] * LOG2E : 0.f, L1 = ok1 ? lse[(long long)(q0 + r1) * heads + h] * LOG2E : 0.f;
  float D0 = ok0 ? D[(long long)(q0 + r0) * heads + h] : 0.f, D1 = ok1 ? D[(long long)(q0 + r1) * heads + h] : 0.f;
  float acc[NO][4];
#pragma unroll
  for (int n = 0; n < NO; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  for (int kt = 0; kt < maxcnt; kt += BN) {
    int nk = min(BN, maxcnt - kt);
    __syncthreads();
    load_rows<HD, BN>(sK, sKt, k + (k0 + kt) * kRow + g * hd, kRow, nk, hd);
    load_rows<HD, BN>(sV, 0, v + (k0 + kt) * kRow + g * hd, kRow, nk, hd);
    __syncthreads();
    if (!active || kt >= warpLim) continue;
    float s[NS][4], dp[NS][4];
#pragma unroll
    for (int j = 0; j < NS; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[j][e] = dp[j][e] = 0.f;
#pragma unroll
    for (int kc = 0; kc < HD / 16; kc++)
#pragma unroll
      for (int j = 0; j < NS; j++) {
        if (kt + j * 8 >= warpLim) continue;
        u32 b[2];
        frag_b(b, sK, KS, j * 8, kc * 16);
        mma_bf16(s[j], qf[kc], b);
        frag_b(b, sV, KS, j * 8, kc * 16);
        mma_bf16(dp[j], df[kc], b);
      }
#pragma unroll
    for (int j = 0; j < NS; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        int key = kt + j * 8 + 2 * tq + e;
        float p0 = key < lim0 ? exp2f(s[j][e] * sl2 - L0) : 0.f;
        float p1 = key < lim1 ? exp2f(s[j][2 + e] * sl2 - L1) : 0.f;
        s[j][e] = p0 * (dp[j][e] - D0);  // dS
        s[j][2 + e] = p1 * (dp[j][2 + e] - D1);
      }
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
      if (kt + kk * 16 >= warpLim) continue;
      u32 a[4];
      frag_a_from_c(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int n = 0; n < NO; n++) {
        u32 b[2];
        frag_b(b, sKt, VS, n * 8, kk * 16);
        mma_bf16(acc[n], a, b);
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int half = 0; half < 2; half++) {
    int r = half ? r1 : r0;
    if (r >= nrows) continue;
    float* drow = dq + (q0 + r) * qRow + h * hd;
#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        int c = n * 8 + 2 * tq + e;
        if (c < hd) drow[c] += scale * acc[n][2 * half + e];
      }
  }
}

// attn_bwd_dkdv_tc: dv_j += Σ_h Σ_i P_ij·dO_i and dk_j += scale·Σ_h Σ_i
// dS_ij·q_i over the query heads h of KV head g and the queries i that see
// key j, over the key tiles of attn_bwd_dkdv (ktiles[6·b] = {first key row,
// rows ≤ 64, span index of the first key, first query row of the span,
// QLen, KLen−QLen}). Each warp computes Sᵀ and dPᵀ for its 16 keys against
// BQ queries per step, so P and dS arrive as A fragments of the dV and dK
// products. One block per (key tile, KV head): each dk, dv element has one
// writer. dk or dv may be null. Dynamic shared memory: tc_dkdv_smem.
template <int HD, int BQ, int DKDV_LOADS>
__device__ void attn_bwd_dkdv_tc(float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v, const float* lse,
                                 const float* D, const int* ktiles, int heads, int kvheads, int hd, float scale) {
  extern __shared__ float tc_smem[];
  constexpr int KS = HD + TC_PAD, QS = BQ + TC_PAD, NS = BQ / 8, NO = HD / 8;
  u16* sK = (u16*)tc_smem;            // [64][KS]: A of Sᵀ = K·Qᵀ
  u16* sV = sK + TC_ROWS * KS;   // [64][KS]: A of dPᵀ = V·dOᵀ
  u16* sQ = sV + TC_ROWS * KS;   // [BQ][KS]: B of Sᵀ
  u16* sO = sQ + BQ * KS;        // [BQ][KS]: B of dPᵀ (dO)
  u16* sQt = sO + BQ * KS;       // [HD][QS]: B of dK = dSᵀ·Q
  u16* sOt = sQt + HD * QS;      // [HD][QS]: B of dV = Pᵀ·dO
  float* sL = (float*)(sOt + HD * QS);  // [BQ] lse·log2 e
  float* sD = sL + BQ;                  // [BQ]
  const int* tl = ktiles + 6 * blockIdx.x;
  int kr0 = tl[0], nrows = tl[1], jr0 = tl[2], q0 = tl[3], qlen = tl[4], past = tl[5];
  int g = blockIdx.y, group = heads / kvheads;
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;
  long long qRow = (long long)heads * hd, kRow = (long long)kvheads * hd;
  load_rows<HD, TC_ROWS>(sK, 0, k + kr0 * kRow + g * hd, kRow, nrows, hd);
  load_rows<HD, TC_ROWS>(sV, 0, v + kr0 * kRow + g * hd, kRow, nrows, hd);
  // Key jr (span index) is seen by queries i ≥ jr − past; rows past the
  // tile by none.
  int j0 = warp * 16 + gr, j1 = j0 + 8;
  int need0 = j0 < nrows ? jr0 + j0 - past : qlen, need1 = j1 < nrows ? jr0 + j1 - past : qlen;
  bool active = warp * 16 < nrows;
  int warpFirst = jr0 + warp * 16 - past;  // the first query any key of the warp needs
  int first = max(0, jr0 - past);
  const float sl2 = scale * LOG2E;
  float ak[NO][4], av[NO][4];
#pragma unroll
  for (int n = 0; n < NO; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) ak[n][e] = av[n][e] = 0.f;
  for (int h = g * group; h < (g + 1) * group; h++) {
    for (int it = first; it < qlen; it += BQ) {
      int nq = min(BQ, qlen - it);
      __syncthreads();
      load_rows<HD, BQ, DKDV_LOADS>(sQ, sQt, q + (q0 + it) * qRow + h * hd, qRow, nq, hd);
      load_rows<HD, BQ, DKDV_LOADS>(sO, sOt, dout + (q0 + it) * qRow + h * hd, qRow, nq, hd);
      for (int i = threadIdx.x; i < BQ; i += blockDim.x) {
        long long row = (long long)(q0 + it + i) * heads + h;
        sL[i] = i < nq ? lse[row] * LOG2E : 0.f;
        sD[i] = i < nq ? D[row] : 0.f;
      }
      __syncthreads();
      if (!active || it + nq - 1 < warpFirst) continue;  // no query of this step sees the warp's keys
      float s[NS][4], dp[NS][4];
#pragma unroll
      for (int j = 0; j < NS; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[j][e] = dp[j][e] = 0.f;
#pragma unroll
      for (int kc = 0; kc < HD / 16; kc++) {
        u32 ka[4], va[4];
        frag_a(ka, sK, KS, warp * 16, kc * 16);
        frag_a(va, sV, KS, warp * 16, kc * 16);
#pragma unroll
        for (int j = 0; j < NS; j++) {
          u32 b[2];
          frag_b(b, sQ, KS, j * 8, kc * 16);
          mma_bf16(s[j], ka, b);
          frag_b(b, sO, KS, j * 8, kc * 16);
          mma_bf16(dp[j], va, b);
        }
      }
#pragma unroll
      for (int j = 0; j < NS; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
          int c = j * 8 + 2 * tq + e, qi = it + c;  // query column of the step
          bool in = c < nq;
          float L = sL[c], Dq = sD[c];
          float p0 = in && qi >= need0 ? exp2f(s[j][e] * sl2 - L) : 0.f;
          float p1 = in && qi >= need1 ? exp2f(s[j][2 + e] * sl2 - L) : 0.f;
          s[j][e] = p0;  // Pᵀ
          s[j][2 + e] = p1;
          dp[j][e] = p0 * (dp[j][e] - Dq);  // dSᵀ
          dp[j][2 + e] = p1 * (dp[j][2 + e] - Dq);
        }
#pragma unroll
      for (int kk = 0; kk < BQ / 16; kk++) {
        u32 pa[4], da[4];
        frag_a_from_c(pa, s[2 * kk], s[2 * kk + 1]);
        frag_a_from_c(da, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
        for (int n = 0; n < NO; n++) {
          u32 b[2];
          frag_b(b, sOt, QS, n * 8, kk * 16);
          mma_bf16(av[n], pa, b);
          frag_b(b, sQt, QS, n * 8, kk * 16);
          mma_bf16(ak[n], da, b);
        }
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int half = 0; half < 2; half++) {
    int r = half ? j1 : j0;
    if (r >= nrows) continue;
    long long krow = (kr0 + r) * kRow + g * hd;
#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        int c = n * 8 + 2 * tq + e;
        if (c >= hd) continue;
        if (dk != 0) dk[krow + c] += scale * ak[n][2 * half + e];
        if (dv != 0) dv[krow + c] += av[n][2 * half + e];
      }
  }
}

// The instantiations the backend launches: padded head dim 64 and 128.
// Steps of 32 keys or queries at head dim 128 keep the accumulators in
// registers (the 64-dim kernels take 64).
extern "C" __global__ void attn_fwd_tc64(float* out, float* lse, const float* q, const float* k, const float* v, const int* tiles, int heads,
                                         int kvheads, int hd, float scale) {
  attn_fwd_tc<64, 64>(out, lse, q, k, v, tiles, heads, kvheads, hd, scale);
}
extern "C" __global__ void attn_fwd_tc128(float* out, float* lse, const float* q, const float* k, const float* v, const int* tiles, int heads,
                                          int kvheads, int hd, float scale) {
  attn_fwd_tc<128, 64>(out, lse, q, k, v, tiles, heads, kvheads, hd, scale);
}
extern "C" __global__ void attn_bwd_dq_tc64(float* dq, const float* dout, const float* q, const float* k, const float* v, const float* lse,
                                            const float* D, const int* tiles, int heads, int kvheads, int hd, float scale) {
  attn_bwd_dq_tc<64, 64>(dq, dout, q, k, v, lse, D, tiles, heads, kvheads, hd, scale);
}
extern "C" __global__ void attn_bwd_dq_tc128(float* dq, const float* dout, const float* q, const float* k, const float* v, const float* lse,
                                             const float* D, const int* tiles, int heads, int kvheads, int hd, float scale) {
  attn_bwd_dq_tc<128, 32>(dq, dout, q, k, v, lse, D, tiles, heads, kvheads, hd, scale);
}
extern "C" __global__ void attn_bwd_dkdv_tc64(float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
                                              const float* lse, const float* D, const int* ktiles, int heads, int kvheads, int hd, float scale) {
  attn_bwd_dkdv_tc<64, 64, TC_LOADS>(dk, dv, dout, q, k, v, lse, D, ktiles, heads, kvheads, hd, scale);
}
extern "C" __global__ void attn_bwd_dkdv_tc128(float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
                                               const float* lse, const float* D, const int* ktiles, int heads, int kvheads, int hd, float scale) {
  attn_bwd_dkdv_tc<128, 32, 4>(dk, dv, dout, q, k, v, lse, D, ktiles, heads, kvheads, hd, scale);
}

// ---- log-softmax, gather, entropy over vocabulary chunks --------------------

// lm_stats updates, per row of a logits chunk z [nr, nc] covering vocabulary
// [c0, c0+nc), the running max m, s = Σ e^(z−m), t = Σ e^(z−m)·z and the
// target logit zt (rows r0… of the full batch; targets < 0 have none). A
// block per row; sums in float32 per chunk, carried in float64.
extern "C" __global__ void lm_stats(const float* z, int nc, int c0, const int* targets, double* m, double* s, double* t, float* zt) {
  __shared__ float sh[32];
  int r = blockIdx.x;
  const float* row = z + (long long)r * nc;
  float cm = -INFINITY;
  for (int j = threadIdx.x; j < nc; j += blockDim.x) cm = fmaxf(cm, row[j]);
  cm = block_max(cm, sh);
  double mo = m[r];
  double mn = fmax(mo, (double)cm);
  float mf = (float)mn;
  float cs = 0.f, ct = 0.f;
  for (int j = threadIdx.x; j < nc; j += blockDim.x) {
    float e = expf(row[j] - mf);
    cs += e;
    ct += e * row[j];
  }
  cs = block_sum(cs, sh);
  ct = block_sum(ct, sh);
  if (threadIdx.x == 0) {
    double f = mo == -INFINITY ? 0.0 : exp(mo - mn);
    s[r] = s[r] * f + cs;
    t[r] = t[r] * f + ct;
    m[r] = mn;
    int tg = targets[r];
    if (tg >= c0 && tg < c0 + nc) zt[r] = row[tg - c0];
  }
}

// lm_finish: lse = m + log s, logp = zt − lse (0 without target),
// entropy = lse − t/s (entropy may be null).
extern "C" __global__ void lm_finish(float* logp, float* entropy, float* lse, const double* m, const double* s, const double* t, const float* zt,
                                     const int* targets, int rows) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  double l = m[r] + log(s[r]);
  lse[r] = (float)l;
  logp[r] = targets[r] >= 0 ? (float)((double)zt[r] - l) : 0.f;
  if (entropy != 0) entropy[r] = (float)(l - t[r] / s[r]);
}

// lm_init sets m = −∞ and s = t = 0 for rows.
extern "C" __global__ void lm_init(double* m, double* s, double* t, float* zt, int rows) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  m[r] = -INFINITY;
  s[r] = 0;
  t[r] = 0;
  zt[r] = 0.f;
}

// lm_dz turns a logits chunk into dL/dz in place:
// dz_j = gL·(1[j = target] − p_j) − gH·p_j·((z_j − lse) + H).
// dentropy (and entropy) may be null. A block per row.
extern "C" __global__ void lm_dz(float* z, int nc, int c0, const int* targets, const float* dlogp, const float* dentropy, const float* lse,
                                 const float* entropy) {
  int r = blockIdx.x;
  float* row = z + (long long)r * nc;
  int tg = targets[r];
  float gL = tg >= 0 ? dlogp[r] : 0.f;
  float gH = 0.f, H = 0.f;
  if (dentropy != 0) {
    gH = dentropy[r];
    H = entropy[r];
  }
  float l = lse[r];
  for (int j = threadIdx.x; j < nc; j += blockDim.x) {
    float x = row[j];
    float p = expf(x - l);
    float d = -gL * p - gH * p * ((x - l) + H);
    if (c0 + j == tg) d += gL;
    row[j] = d;
  }
}

// lm_dz_bf16 is lm_dz writing dL/dz rounded to bfloat16 (to nearest even,
// as f32_to_bf16) into dz [nr, nc] instead of float32 in place: the
// operand of the two backward products in BF16 precision, without a
// separate rounding pass over the chunk. Bit for bit what lm_dz followed
// by f32_to_bf16 gives.
extern "C" __global__ void lm_dz_bf16(__nv_bfloat16* dz, const float* z, int nc, int c0, const int* targets, const float* dlogp,
                                      const float* dentropy, const float* lse, const float* entropy) {
  int r = blockIdx.x;
  const float* row = z + (long long)r * nc;
  __nv_bfloat16* out = dz + (long long)r * nc;
  int tg = targets[r];
  float gL = tg >= 0 ? dlogp[r] : 0.f;
  float gH = 0.f, H = 0.f;
  if (dentropy != 0) {
    gH = dentropy[r];
    H = entropy[r];
  }
  float l = lse[r];
  for (int j = threadIdx.x; j < nc; j += blockDim.x) {
    float x = row[j];
    float p = expf(x - l);
    float d = -gL * p - gH * p * ((x - l) + H);
    if (c0 + j == tg) d += gL;
    out[j] = __float2bfloat16_rn(d);
  }
}

// ---- fallback GEMM ----------------------------------------------------------

// sgemm_tiled is the GEMM used when no cuBLAS library can be loaded:
// C = alpha·op(A)·op(B) + beta·C, row-major, strided batches over
// blockIdx.z, 16×16 shared-memory tiles, float32 accumulation. beta = 0
// writes C without reading it.
#define GT 16
extern "C" __global__ void sgemm_tiled(int transA, int transB, int M, int N, int K, float alpha, const float* A, int lda, long long sA,
                                       const float* B, int ldb, long long sB, float beta, float* C, int ldc, long long sC) {
  __shared__ float ta[GT][GT + 1], tb[GT][GT + 1];
  A += blockIdx.z * sA;
  B += blockIdx.z * sB;
  C += blockIdx.z * sC;
  int row = blockIdx.y * GT + threadIdx.y, col = blockIdx.x * GT + threadIdx.x;
  float acc = 0.f;
  for (int p0 = 0; p0 < K; p0 += GT) {
    int pa = p0 + threadIdx.x, pb = p0 + threadIdx.y;
    ta[threadIdx.y][threadIdx.x] = (row < M && pa < K) ? (transA ? A[(long long)pa * lda + row] : A[(long long)row * lda + pa]) : 0.f;
    tb[threadIdx.y][threadIdx.x] = (col < N && pb < K) ? (transB ? B[(long long)col * ldb + pb] : B[(long long)pb * ldb + col]) : 0.f;
    __syncthreads();
    for (int p = 0; p < GT; p++) acc += ta[threadIdx.y][p] * tb[p][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) {
    long long o = (long long)row * ldc + col;
    C[o] = beta == 0.f ? alpha * acc : alpha * acc + beta * C[o];
  }
}

// ---- optimizer ----------------------------------------------------------------
//
// The optimizer runs as one pass over a table of tensors (opt_pass): the
// Go side gathers a step's per-tensor calls — the gradient clip's Scale,
// AdamW, ZeroGrad's Fill(0) — into the table and launches once, whatever
// the number of tensors. The gradient norm is a two-stage reduction over
// the same kind of table (grad_sumsq_partial, grad_sumsq_finish). A table
// entry is an OptEntry, laid out as the Go side packs it (optTable).
struct OptEntry {
  float* p;              // parameter (AdamW), or null
  float* g;              // gradient (every entry; the norm's tensor)
  float* m;              // first moment (AdamW)
  float* v;              // second moment (AdamW)
  __nv_bfloat16* wb;     // the parameter's bf16 copy to rewrite, or null
  long long n;           // elements
  long long first;       // the first block of the grid that covers it
  int flags;             // OPT_* below
  int pad;
};
#define OPT_SCALE 1  // g ← g·gscale first (Scale)
#define OPT_ADAM 2   // then AdamW from g
#define OPT_ZERO 4   // then g ← 0 (Fill); else a scaled g is stored back
#define OPT_CHUNK 8192  // elements per block: 32 per thread of 256

// opt_entry finds the entry whose blocks include block b: the last with
// first ≤ b (entries are in order of first; entry 0 starts at block 0).
__device__ __forceinline__ int opt_entry(const OptEntry* t, int entries, long long b) {
  int lo = 0, hi = entries - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) >> 1;
    if (t[mid].first <= b) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// opt_pass applies, for every element of every tensor of the table, the
// entry's operations in the order the calls came: g·gscale (OPT_SCALE),
// torch.optim.AdamW's single-tensor update operation for operation as
// policy.AdamW — p ← p·decay; m ← b1·m + ob1·g; v ← b2·v + (ob2·g)·g;
// p ← p + negStep·(m / (√v / bc2Sqrt + eps)), each product rounded to
// float32, no fused multiply-add (the _rn intrinsics) — with the bf16
// copy of the new p written when the entry has one (OPT_ADAM), and g ← 0
// (OPT_ZERO). Bit for bit what the separate calls compute. Block b covers
// OPT_CHUNK elements of its entry.
extern "C" __global__ void opt_pass(const OptEntry* table, int entries, float gscale, float decay, int useDecay, float b1, float ob1, float b2,
                                    float ob2, float negStep, float bc2Sqrt, float eps) {
  long long b = blockIdx.x;
  const OptEntry& e = table[opt_entry(table, entries, b)];
  long long i0 = (b - e.first) * OPT_CHUNK, i1 = min(e.n, i0 + OPT_CHUNK);
  int f = e.flags;
  for (long long i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    float g = e.g[i];
    if (f & OPT_SCALE) g = __fmul_rn(g, gscale);
    if (f & OPT_ADAM) {
      float x = e.p[i];
      if (useDecay) x = __fmul_rn(x, decay);
      float mj = __fadd_rn(__fmul_rn(e.m[i], b1), __fmul_rn(g, ob1));
      float vj = __fadd_rn(__fmul_rn(e.v[i], b2), __fmul_rn(__fmul_rn(ob2, g), g));
      float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vj), bc2Sqrt), eps);
      x = __fadd_rn(x, __fmul_rn(negStep, __fdiv_rn(mj, denom)));
      e.p[i] = x;
      e.m[i] = mj;
      e.v[i] = vj;
      if (e.wb != 0) e.wb[i] = __float2bfloat16_rn(x);
    }
    if (f & OPT_ZERO) e.g[i] = 0.f;
    else if (f & OPT_SCALE) e.g[i] = g;
  }
}

// grad_sumsq_partial: part[b] = Σ g² over block b's chunk of its entry's
// gradient (the table of opt_pass), in float64: each thread adds its
// elements in order, then the block's threads meet in a fixed tree.
extern "C" __global__ void grad_sumsq_partial(double* part, const OptEntry* table, int entries) {
  __shared__ double sh[32];
  long long b = blockIdx.x;
  const OptEntry& e = table[opt_entry(table, entries, b)];
  long long i0 = (b - e.first) * OPT_CHUNK, i1 = min(e.n, i0 + OPT_CHUNK);
  double s = 0;
  for (long long i = i0 + threadIdx.x; i < i1; i += blockDim.x) s += (double)e.g[i] * e.g[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) sh[w] = s;
  __syncthreads();
  if (w == 0) {
    s = lane < (int)(blockDim.x >> 5) ? sh[lane] : 0;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
    if (lane == 0) part[b] = s;
  }
}

// grad_sumsq_finish: *out = Σ_b part[b] over nparts partial sums, one
// block: thread x adds parts x, x + blockDim.x, … in order, the threads
// meet in a fixed tree. The same bits on every run (no atomics).
extern "C" __global__ void grad_sumsq_finish(double* out, const double* part, long long nparts) {
  __shared__ double sh[32];
  double s = 0;
  for (long long i = threadIdx.x; i < nparts; i += blockDim.x) s += part[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) sh[w] = s;
  __syncthreads();
  if (w == 0) {
    s = lane < (int)(blockDim.x >> 5) ? sh[lane] : 0;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
    if (lane == 0) *out = s;
  }
}
