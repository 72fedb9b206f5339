// check.cc runs the kernels of ../kernels.cu under emu.h against naive
// float64 references written here (attention forward, split-K decode and
// backward; the bf16 mma instruction and the tensor-core attention forward
// and backward; the chunked LM head forward and backward; the fallback
// GEMM; RMSNorm; RoPE; SwiGLU; the fused optimizer pass and the gradient
// norm). Build
// and run with check.sh; it prints the largest error of each check (and,
// where the bound is per element, the largest ratio of error to bound) and
// exits 1 when one exceeds its bound.
#include "emu.h"
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
using std::max;
using std::min;
#include "kernels_emu.inc"

static std::mt19937_64 rng(42);
static std::vector<float> randn(size_t n, double s = 1) {
  std::normal_distribution<double> d(0, s);
  std::vector<float> x(n);
  for (auto& v : x) v = (float)d(rng);
  return x;
}
static int failures = 0;
static void report(const char* name, const std::vector<float>& got, const std::vector<double>& want, double rel) {
  double scale = 0, err = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  bool nan = false;
  for (size_t i = 0; i < want.size(); i++) {
    if (std::isnan(got[i])) nan = true;
    err = std::max(err, std::fabs(got[i] - want[i]));
  }
  bool ok = !nan && err <= rel * scale + 1e-6;
  printf("%-34s max err %.3g (scale %.3g)%s\n", name, err, scale, ok ? "" : "  FAIL");
  if (!ok) failures++;
}

static void reportBound(const char* name, const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& bound);

struct Span { int q0, qlen, k0, klen; };

// References: causal GQA attention in float64 per span, head and row.
static void refAttn(int heads, int kvh, int hd, float scale, const std::vector<Span>& spans, int tq, const std::vector<float>& q,
                    const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& dout, std::vector<double>& out,
                    std::vector<double>& lse, std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv) {
  int group = heads / kvh, qRow = heads * hd, kRow = kvh * hd;
  out.assign((size_t)tq * qRow, 0);
  lse.assign((size_t)tq * heads, 0);
  dq.assign(q.size(), 0);
  dk.assign(k.size(), 0);
  dv.assign(v.size(), 0);
  for (auto& s : spans)
    for (int h = 0; h < heads; h++) {
      int g = h / group;
      for (int i = 0; i < s.qlen; i++) {
        int lim = s.klen - s.qlen + i + 1, qr = (s.q0 + i) * qRow + h * hd;
        std::vector<double> p(lim);
        double m = -INFINITY;
        for (int j = 0; j < lim; j++) {
          double d = 0;
          for (int c = 0; c < hd; c++) d += (double)q[qr + c] * k[(s.k0 + j) * kRow + g * hd + c];
          p[j] = scale * d;
          m = std::max(m, p[j]);
        }
        double sum = 0;
        for (auto& x : p) sum += (x = std::exp(x - m));
        for (auto& x : p) x /= sum;
        lse[(s.q0 + i) * heads + h] = m + std::log(sum);
        for (int j = 0; j < lim; j++)
          for (int c = 0; c < hd; c++) out[qr + c] += p[j] * v[(s.k0 + j) * kRow + g * hd + c];
        if (dout.empty()) continue;
        // dP_j = dO·v_j, D = Σ_j P_j dP_j, dS = P(dP − D).
        std::vector<double> dp(lim);
        double D = 0;
        for (int j = 0; j < lim; j++) {
          double d = 0;
          for (int c = 0; c < hd; c++) d += (double)dout[qr + c] * v[(s.k0 + j) * kRow + g * hd + c];
          dp[j] = d;
          D += p[j] * d;
        }
        for (int j = 0; j < lim; j++) {
          double ds = p[j] * (dp[j] - D);
          for (int c = 0; c < hd; c++) {
            size_t kk = (size_t)(s.k0 + j) * kRow + g * hd + c;
            dq[qr + c] += scale * ds * k[kk];
            dk[kk] += scale * ds * q[qr + c];
            dv[kk] += p[j] * dout[qr + c];
          }
        }
      }
    }
}

static std::vector<int> tilesOf(const std::vector<Span>& spans) {
  std::vector<int> t;
  for (auto& s : spans)
    for (int r = 0; r < s.qlen; r += 4) {
      int n = std::min(4, s.qlen - r);
      t.insert(t.end(), {s.q0 + r, n, s.k0, s.klen - s.qlen + r + 1});
    }
  return t;
}
static std::vector<int> keyTilesOf(const std::vector<Span>& spans) {
  std::vector<int> t;
  for (auto& s : spans) {
    if (s.qlen == 0) continue;
    for (int j = 0; j < s.klen; j += 4) t.insert(t.end(), {s.k0 + j, std::min(4, s.klen - j), j, s.q0, s.qlen, s.klen - s.qlen});
  }
  return t;
}
static std::vector<float> f32(const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); }

static void checkAttention(const char* name, int heads, int kvh, int hd, std::vector<Span> spans, int tq, int tk, bool decode) {
  float scale = 1 / std::sqrt((float)hd);
  auto q = randn((size_t)tq * heads * hd), k = randn((size_t)tk * kvh * hd), v = randn((size_t)tk * kvh * hd), dout = randn(q.size());
  std::vector<double> ro, rl, rdq, rdk, rdv;
  refAttn(heads, kvh, hd, scale, spans, tq, q, k, v, decode ? std::vector<float>() : dout, ro, rl, rdq, rdk, rdv);
  std::vector<float> out(q.size(), 0), lse((size_t)tq * heads, 0);
  char buf[128];
  if (decode) {
    std::vector<int> rows;
    int maxK = 0;
    for (auto& s : spans)
      for (int i = 0; i < s.qlen; i++) {
        int cnt = s.klen - s.qlen + i + 1;
        rows.insert(rows.end(), {s.q0 + i, s.k0, cnt});
        maxK = std::max(maxK, cnt);
      }
    int nr = rows.size() / 3, splits = std::min((maxK + 255) / 256, 64), chunk = (maxK + splits - 1) / splits;
    // Small chunks exercise several splits in the emulator.
    splits = std::min(4, maxK);
    chunk = (maxK + splits - 1) / splits;
    std::vector<float> ml((size_t)nr * heads * splits * 2), pacc((size_t)nr * heads * splits * hd);
    emu_launch({(unsigned)nr, (unsigned)heads, (unsigned)splits}, {32}, 4 * (hd + 32 * (hd + 1)),
               [&] { attn_decode_partial(ml.data(), pacc.data(), q.data(), k.data(), v.data(), rows.data(), heads, kvh, hd, scale, chunk); });
    emu_launch({(unsigned)nr, (unsigned)heads}, {32}, 0,
               [&] { attn_decode_combine(out.data(), lse.data(), ml.data(), pacc.data(), rows.data(), heads, hd, splits); });
    snprintf(buf, sizeof buf, "%s decode out", name);
    report(buf, out, ro, 1e-5);
    snprintf(buf, sizeof buf, "%s decode lse", name);
    report(buf, lse, rl, 1e-5);
    return;
  }
  auto tiles = tilesOf(spans);
  int smemF = 4 * (4 * hd + 32 * (hd + 1)), smemB = 4 * (8 * hd + 64 * (hd + 1));
  emu_launch({(unsigned)tiles.size() / 4, (unsigned)heads}, {128}, smemF,
             [&] { attn_fwd(out.data(), lse.data(), q.data(), k.data(), v.data(), tiles.data(), heads, kvh, hd, scale); });
  snprintf(buf, sizeof buf, "%s out", name);
  report(buf, out, ro, 1e-5);
  snprintf(buf, sizeof buf, "%s lse", name);
  report(buf, lse, rl, 1e-5);
  int rowsHeads = tq * heads;
  std::vector<float> D(rowsHeads);
  emu_launch({(unsigned)((rowsHeads * 32 + 255) / 256)}, {256}, 0, [&] { attn_bwd_dot(D.data(), dout.data(), out.data(), rowsHeads, hd); });
  // Gradients start at 1 to check that the kernels accumulate.
  std::vector<float> dq(q.size(), 1), dk(k.size(), 1), dv(v.size(), 1);
  emu_launch({(unsigned)tiles.size() / 4, (unsigned)heads}, {128}, smemB, [&] {
    attn_bwd_dq(dq.data(), dout.data(), q.data(), k.data(), v.data(), lse.data(), D.data(), tiles.data(), heads, kvh, hd, scale);
  });
  auto kt = keyTilesOf(spans);
  emu_launch({(unsigned)kt.size() / 6, (unsigned)kvh}, {128}, smemB, [&] {
    attn_bwd_dkdv(dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), lse.data(), D.data(), kt.data(), heads, kvh, hd, scale);
  });
  for (auto* g : {&rdq, &rdk, &rdv})
    for (auto& x : *g) x += 1;
  snprintf(buf, sizeof buf, "%s dq", name);
  report(buf, dq, rdq, 1e-5);
  snprintf(buf, sizeof buf, "%s dk", name);
  report(buf, dk, rdk, 1e-5);
  snprintf(buf, sizeof buf, "%s dv", name);
  report(buf, dv, rdv, 1e-5);
}

static void refGemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb, float beta,
                    const std::vector<float>& C0, std::vector<double>& C, int ldc, long sA, long sB, long sC, int batch) {
  C.assign(C0.begin(), C0.end());
  for (int bt = 0; bt < batch; bt++)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double s = 0;
        for (int p = 0; p < K; p++)
          s += (double)(ta ? A[bt * sA + p * lda + i] : A[bt * sA + i * lda + p]) * (tb ? B[bt * sB + j * ldb + p] : B[bt * sB + p * ldb + j]);
        size_t o = bt * sC + i * ldc + j;
        C[o] = alpha * s + (beta == 0 ? 0 : beta * C0[o]);
      }
}

static void checkGemm() {
  struct G { bool ta, tb; int M, N, K; float alpha, beta; int batch; long sA, sB, sC; };
  for (G g : {G{false, false, 7, 5, 3, 1, 0, 1, 0, 0, 0}, G{true, false, 13, 40, 70, -1, 0.25f, 1, 0, 0, 0}, G{false, true, 33, 17, 64, 2, 0, 1, 0, 0, 0},
              G{true, true, 20, 21, 22, 1, 1, 1, 0, 0, 0}, G{false, true, 4, 6, 5, 1, 0.5f, 3, 0, 35, 30}}) {
    int lda = g.ta ? g.M : g.K, ldb = g.tb ? g.K : g.N;
    long nA = (g.batch - 1) * g.sA + (long)g.M * g.K, nB = (g.batch - 1) * g.sB + (long)g.K * g.N, nC = (g.batch - 1) * g.sC + (long)g.M * g.N;
    if (g.batch == 1) g.sC = g.M * g.N;
    auto A = randn(nA), B = randn(nB), C = randn(nC);
    std::vector<double> want;
    refGemm(g.ta, g.tb, g.M, g.N, g.K, g.alpha, A.data(), lda, B.data(), ldb, g.beta, C, want, g.N, g.sA, g.sB, g.sC, g.batch);
    emu_launch({(unsigned)(g.N + 15) / 16, (unsigned)(g.M + 15) / 16, (unsigned)g.batch}, {16, 16}, 0, [&] {
      sgemm_tiled(g.ta, g.tb, g.M, g.N, g.K, g.alpha, A.data(), lda, g.sA, B.data(), ldb, g.sB, g.beta, C.data(), g.N, g.sC);
    });
    char buf[64];
    snprintf(buf, sizeof buf, "sgemm %dx%dx%d t%d%d b%d", g.M, g.N, g.K, g.ta, g.tb, g.batch);
    report(buf, C, want, 1e-5);
  }
}

// The LM head as the Go side drives it: logits chunks from a GEMM (here
// the reference product), lm_stats per chunk, lm_finish; backward lm_dz.
static void checkLMHead() {
  int rows = 37, dim = 8, vocab = 1000, nc = 300;  // 4 chunks, the last one short
  float inv = 1 / 0.7f;
  auto h = randn(rows * dim, 0.5), w = randn(vocab * dim, 0.5), gl = randn(rows), ge = randn(rows);
  std::vector<int> tg(rows);
  for (int r = 0; r < rows; r++) tg[r] = (r * 97) % vocab;
  tg[5] = -1;
  tg[6] = 299;
  tg[7] = 300;
  std::vector<double> z((size_t)rows * vocab);
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < vocab; j++) {
      double d = 0;
      for (int c = 0; c < dim; c++) d += (double)h[r * dim + c] * w[j * dim + c];
      z[(size_t)r * vocab + j] = inv * d;
    }
  std::vector<double> rlp(rows), rent(rows), rlse(rows), rdz((size_t)rows * vocab);
  for (int r = 0; r < rows; r++) {
    double m = -INFINITY, s = 0, t = 0;
    for (int j = 0; j < vocab; j++) m = std::max(m, z[(size_t)r * vocab + j]);
    for (int j = 0; j < vocab; j++) {
      double e = std::exp(z[(size_t)r * vocab + j] - m);
      s += e;
      t += e * z[(size_t)r * vocab + j];
    }
    rlse[r] = m + std::log(s);
    rent[r] = rlse[r] - t / s;
    rlp[r] = tg[r] >= 0 ? z[(size_t)r * vocab + tg[r]] - rlse[r] : 0;
    for (int j = 0; j < vocab; j++) {
      double lp = z[(size_t)r * vocab + j] - rlse[r], p = std::exp(lp);
      double gL = tg[r] >= 0 ? gl[r] : 0;
      rdz[(size_t)r * vocab + j] = -gL * p - ge[r] * p * (lp + rent[r]) + (j == tg[r] ? gL : 0);
    }
  }
  std::vector<double> m(rows), s(rows), t(rows);
  std::vector<float> zt(rows), lp(rows), ent(rows), lse(rows), chunk((size_t)rows * nc), dz((size_t)rows * vocab);
  emu_launch({1}, {64}, 0, [&] { lm_init(m.data(), s.data(), t.data(), zt.data(), rows); });
  for (int c0 = 0; c0 < vocab; c0 += nc) {
    int cn = std::min(nc, vocab - c0);
    for (int r = 0; r < rows; r++)
      for (int j = 0; j < cn; j++) chunk[(size_t)r * cn + j] = (float)z[(size_t)r * vocab + c0 + j];
    emu_launch({(unsigned)rows}, {64}, 0, [&] { lm_stats(chunk.data(), cn, c0, tg.data(), m.data(), s.data(), t.data(), zt.data()); });
  }
  emu_launch({1}, {64}, 0, [&] { lm_finish(lp.data(), ent.data(), lse.data(), m.data(), s.data(), t.data(), zt.data(), tg.data(), rows); });
  report("lm logp", lp, rlp, 1e-5);
  report("lm entropy", ent, rent, 1e-5);
  report("lm lse", lse, rlse, 1e-5);
  // lm_dz_bf16 must be lm_dz followed by f32_to_bf16, bit for bit.
  size_t bf16Diff = 0;
  std::vector<__nv_bfloat16> zb((size_t)rows * nc), zr((size_t)rows * nc);
  for (int c0 = 0; c0 < vocab; c0 += nc) {
    int cn = std::min(nc, vocab - c0);
    for (int r = 0; r < rows; r++)
      for (int j = 0; j < cn; j++) chunk[(size_t)r * cn + j] = (float)z[(size_t)r * vocab + c0 + j];
    emu_launch({(unsigned)rows}, {64}, 0,
               [&] { lm_dz_bf16(zb.data(), chunk.data(), cn, c0, tg.data(), gl.data(), ge.data(), lse.data(), ent.data()); });
    emu_launch({(unsigned)rows}, {64}, 0, [&] { lm_dz(chunk.data(), cn, c0, tg.data(), gl.data(), ge.data(), lse.data(), ent.data()); });
    long long n = (long long)rows * cn;
    emu_launch({2}, {256}, 0, [&] { f32_to_bf16(zr.data(), chunk.data(), n); });
    for (long long i = 0; i < n; i++) bf16Diff += zb[i].bits != zr[i].bits;
    for (int r = 0; r < rows; r++)
      for (int j = 0; j < cn; j++) dz[(size_t)r * vocab + c0 + j] = chunk[(size_t)r * cn + j];
  }
  report("lm dz", dz, rdz, 1e-5);
  printf("%-34s %zu of %d elements differ%s\n", "lm dz bf16 = bf16(lm dz)", bf16Diff, rows * vocab, bf16Diff ? "  FAIL" : "");
  if (bf16Diff) failures++;
}

static void checkRowKernels() {
  int rows = 5, dim = 130;
  auto x = randn(rows * dim, 2), w = randn(dim), g = randn(rows * dim);
  std::vector<double> ro(rows * dim), rr(rows), rdx(rows * dim), rdw(dim);
  for (int r = 0; r < rows; r++) {
    double ss = 0;
    for (int i = 0; i < dim; i++) ss += (double)x[r * dim + i] * x[r * dim + i];
    rr[r] = 1 / std::sqrt(ss / dim + 1e-6);
    double dot = 0;
    for (int i = 0; i < dim; i++) {
      ro[r * dim + i] = w[i] * x[r * dim + i] * rr[r];
      dot += (double)g[r * dim + i] * w[i] * x[r * dim + i];
    }
    for (int i = 0; i < dim; i++) {
      rdx[r * dim + i] = rr[r] * w[i] * g[r * dim + i] - rr[r] * rr[r] * rr[r] / dim * dot * x[r * dim + i];
      rdw[i] += g[r * dim + i] * x[r * dim + i] * rr[r];
    }
  }
  // Blocks of one warp (rowThreads for head dims) and of 256 threads.
  for (unsigned threads : {32u, 256u}) {
    std::vector<float> out(rows * dim), rs(rows), dx(rows * dim, 0);
    emu_launch({(unsigned)rows}, {threads}, 0, [&] { rmsnorm_fwd(out.data(), rs.data(), x.data(), w.data(), rows, dim, 1e-6f); });
    emu_launch({(unsigned)rows}, {threads}, 0, [&] { rmsnorm_bwd_dx(dx.data(), g.data(), x.data(), w.data(), rs.data(), rows, dim); });
    char name[64];
    snprintf(name, sizeof name, "rmsnorm out (%u threads)", threads);
    report(name, out, ro, 1e-5);
    snprintf(name, sizeof name, "rmsnorm rstd (%u threads)", threads);
    report(name, rs, rr, 1e-5);
    snprintf(name, sizeof name, "rmsnorm dx (%u threads)", threads);
    report(name, dx, rdx, 1e-5);
  }

  int ntok = 3, heads = 2, hd = 8;
  std::vector<int> pos = {0, 7, 40000};
  std::vector<float> fr = {1, 0.1f, 0.01f, 0.001f};
  auto xr = randn(ntok * heads * hd);
  std::vector<double> want(xr.size());
  for (int t = 0; t < ntok; t++)
    for (int h = 0; h < heads; h++)
      for (int i = 0; i < 4; i++) {
        double ang = (float)pos[t] * fr[i], c = std::cos(ang), s = std::sin(ang);
        int b = (t * heads + h) * hd;
        want[b + i] = xr[b + i] * c - xr[b + i + 4] * s;
        want[b + i + 4] = xr[b + i + 4] * c + xr[b + i] * s;
      }
  std::vector<float> ro2(xr.size());
  emu_launch({1}, {32}, 0, [&] { rope(ro2.data(), xr.data(), pos.data(), fr.data(), ntok, heads, hd, 1.f, 0); });
  report("rope", ro2, want, 1e-6);
}

// checkOptimizer runs opt_pass over a table of four tensors (10,000,
// 1, 20,000 and 8,192 elements: chunks cut short, a tensor of one
// element, one of exactly a chunk) with every combination of operations
// the Go side gathers — clip scale, AdamW with a bf16 copy, zeroing —
// against the same operations done one after the other on the host
// (Scale's multiply, backend.AdamWUpdate's operations in order, each
// rounded to float32, Fill): bit for bit. Then the gradient norm's two
// stages against a long-double sum, within (n + 2)·2⁻⁵³ of Σ g² (float64
// sums of exact float64 squares), and bit for bit under two shuffled
// block orders.
static void checkOptimizer() {
  struct T {
    std::vector<float> p, g, m, v;
    std::vector<__nv_bfloat16> wb;
    int flags;
  };
  std::vector<int> sizes = {10000, 1, 20000, 8192};
  std::vector<int> flags = {OPT_SCALE | OPT_ADAM | OPT_ZERO, OPT_ADAM, OPT_SCALE, OPT_SCALE | OPT_ADAM};
  std::vector<T> ts;
  for (size_t i = 0; i < sizes.size(); i++) {
    int n = sizes[i];
    T t{randn(n), randn(n, 0.1), randn(n, 0.01), randn(n, 0.001), std::vector<__nv_bfloat16>(n, __nv_bfloat16{0}), flags[i]};
    for (auto& x : t.v) x = std::fabs(x);
    ts.push_back(t);
  }
  auto ref = ts;
  const float gscale = 0.37f, decay = 0.999f, b1 = 0.9f, ob1 = 0.1f, b2 = 0.95f, ob2 = 0.050000012f, negStep = -3e-4f, bc2Sqrt = 0.2236068f,
              eps = 1e-8f;
  for (auto& t : ref)
    for (size_t i = 0; i < t.g.size(); i++) {
      float g = t.g[i];
      if (t.flags & OPT_SCALE) g = g * gscale;
      if (t.flags & OPT_ADAM) {
        float x = t.p[i] * decay;
        float mj = t.m[i] * b1 + g * ob1;
        float vj = t.v[i] * b2 + (ob2 * g) * g;
        float denom = std::sqrt(vj) / bc2Sqrt + eps;
        t.p[i] = x + negStep * (mj / denom);
        t.m[i] = mj;
        t.v[i] = vj;
      }
      if (t.flags & OPT_ZERO) t.g[i] = 0;
      else if (t.flags & OPT_SCALE) t.g[i] = g;
    }
  std::vector<OptEntry> table;
  long long blocks = 0;
  for (size_t k = 0; k < ts.size(); k++) {
    auto& t = ts[k];
    bool copy = k == 0 || k == 3;
    table.push_back({t.p.data(), t.g.data(), t.m.data(), t.v.data(), copy ? t.wb.data() : nullptr, (long long)t.g.size(), blocks, t.flags, 0});
    blocks += ((long long)t.g.size() + OPT_CHUNK - 1) / OPT_CHUNK;
  }
  // Entries 0 and 3 carry a bf16 copy of their parameter, which must
  // become the updated parameter rounded to bf16; the others' stay zero.
  emu_launch({(unsigned)blocks}, {256}, 0, [&] {
    opt_pass(table.data(), (int)table.size(), gscale, decay, 1, b1, ob1, b2, ob2, negStep, bc2Sqrt, eps);
  });
  size_t bad = 0;
  auto same = [&](const std::vector<float>& a, const std::vector<float>& b) {
    for (size_t i = 0; i < a.size(); i++)
      if (std::memcmp(&a[i], &b[i], 4) != 0) bad++;
  };
  for (size_t k = 0; k < ts.size(); k++) {
    same(ts[k].p, ref[k].p);
    same(ts[k].g, ref[k].g);
    same(ts[k].m, ref[k].m);
    same(ts[k].v, ref[k].v);
    bool copy = k == 0 || k == 3;
    for (size_t i = 0; i < ts[k].g.size(); i++) {
      uint16_t want = copy && (ts[k].flags & OPT_ADAM) ? __float2bfloat16_rn(ref[k].p[i]).bits : 0;
      if (ts[k].wb[i].bits != want) bad++;
    }
  }
  printf("%-34s %zu elements differ from the calls one by one%s\n", "opt_pass (4 tensors, 5 blocks)", bad, bad ? "  FAIL" : "");
  if (bad) failures++;

  // The gradient norm over the same kind of table: g only.
  std::vector<std::vector<float>> gs = {randn(30000), randn(1), randn(8192, 3), randn(77777, 0.01)};
  std::vector<OptEntry> nt;
  blocks = 0;
  long double exact = 0;
  size_t n = 0;
  for (auto& g : gs) {
    nt.push_back({nullptr, g.data(), nullptr, nullptr, nullptr, (long long)g.size(), blocks, 0, 0});
    blocks += ((long long)g.size() + OPT_CHUNK - 1) / OPT_CHUNK;
    for (float x : g) exact += (long double)x * x;
    n += g.size();
  }
  double got[3];
  for (unsigned order : {0u, 7u, 1234u}) {
    emu_block_order = order;
    std::vector<double> part(blocks), out(1);
    emu_launch({(unsigned)blocks}, {256}, 0, [&] { grad_sumsq_partial(part.data(), nt.data(), (int)nt.size()); });
    emu_launch({1}, {1024}, 0, [&] { grad_sumsq_finish(out.data(), part.data(), blocks); });
    got[order == 0 ? 0 : order == 7 ? 1 : 2] = out[0];
  }
  emu_block_order = 0;
  double bound = (double)(n + 2) * std::ldexp(1.0, -53) * (double)exact;
  double err = std::fabs(got[0] - (double)exact);
  bool ok = err <= bound && got[0] == got[1] && got[0] == got[2];
  printf("%-34s err %.3g, bound %.3g, same bits in 3 block orders: %s%s\n", "grad norm (4 tensors, 16 blocks)", err, bound,
         got[0] == got[1] && got[0] == got[2] ? "yes" : "no", ok ? "" : "  FAIL");
  if (!ok) failures++;
}

// dwPlan is launch.go's dwPlan: chunks of at least 128 rows, at most 256
// chunks, chunk rows a multiple of 8.
static void dwPlan(int rows, int& chunks, int& chunkRows) {
  chunks = std::min(std::max((rows + 127) / 128, 1), 256);
  chunkRows = (rows + chunks - 1) / chunks;
  chunkRows = (chunkRows + 7) / 8 * 8;
  chunks = (rows + chunkRows - 1) / chunkRows;
}

// runDW runs RMSNorm's two-stage weight gradient as RMSNormBackward
// launches it, adding into dw.
static void runDW(std::vector<float>& dw, const std::vector<float>& g, const std::vector<float>& x, const std::vector<float>& rs, int rows,
                  int dim) {
  int chunks, chunkRows;
  dwPlan(rows, chunks, chunkRows);
  std::vector<double> part((size_t)chunks * dim, std::nan(""));
  emu_launch({(unsigned)((dim + 31) / 32), (unsigned)chunks}, {32, 8}, 0,
             [&] { rmsnorm_dw_partial(part.data(), g.data(), x.data(), rs.data(), rows, dim, chunkRows); });
  unsigned warps = (unsigned)dim * 32;
  emu_launch({(warps + 255) / 256}, {256}, 0, [&] { rmsnorm_dw_finish(dw.data(), part.data(), chunks, dim); });
}

// checkRMSNormDW checks the weight gradient dw_i += Σ_r g_ri·x_ri·r_r
// against a long-double sum of the same float32 inputs, element by
// element: the kernels multiply in float64 (g·x is exact in float64, 48
// significant bits; ·r rounds once, 2^-53 relative) and add n terms in
// float64, so before the final rounding to float32 they are within
// (n + 2)·2^-53·Σ_r |g x r| of the exact sum; the rounding to float32 adds
// 2^-24·|dw| (half an ulp), and the add into dw's prior value one more.
// The shapes cover a column tile and a chunk cut short (300 × 130), a
// per-head norm (rows = tokens·heads, dim 128) and a row count past the
// chunk cap (40,000 rows, 250 chunks). Each also runs with its blocks in
// two shuffled orders: the results must be the same bit for bit.
static void checkRMSNormDW() {
  struct Case {
    const char* name;
    int rows, dim;
  } cases[] = {{"rmsnorm dw 300x130", 300, 130}, {"rmsnorm dw heads 4100x128", 4100, 128}, {"rmsnorm dw 40000x16", 40000, 16}};
  for (auto& c : cases) {
    int rows = c.rows, dim = c.dim;
    auto x = randn((size_t)rows * dim, 2), g = randn((size_t)rows * dim);
    std::vector<float> rs(rows);
    for (auto& v : rs) v = (float)std::exp(0.3 * std::normal_distribution<double>(0, 1)(rng));
    auto prior = randn(dim, 0.1);
    std::vector<double> want(dim), bound(dim);
    for (int i = 0; i < dim; i++) {
      long double sum = 0, mag = 0;
      for (int r = 0; r < rows; r++) {
        long double t = (long double)g[(size_t)r * dim + i] * x[(size_t)r * dim + i] * rs[r];
        sum += t;
        mag += std::fabs(t);
      }
      double d = (double)(prior[i] + (float)(double)sum);  // the value a perfect kernel would store
      want[i] = (double)(prior[i] + sum);
      bound[i] = (rows + 2) * 0x1p-53 * (double)mag + 0x1p-24 * std::fabs((double)sum) + 0x1p-24 * std::fabs(d) + 1e-30;
    }
    std::vector<float> dw = prior;
    runDW(dw, g, x, rs, rows, dim);
    reportBound(c.name, dw, want, bound);
    bool same = true;
    for (unsigned order : {1u, 2u}) {
      emu_block_order = order;
      std::vector<float> again = prior;
      runDW(again, g, x, rs, rows, dim);
      same = same && std::memcmp(again.data(), dw.data(), dw.size() * sizeof(float)) == 0;
    }
    emu_block_order = 0;
    printf("%-34s %s\n", (std::string(c.name) + " order").c_str(), same ? "bit-identical under shuffled block orders" : "DIFFERS  FAIL");
    if (!same) failures++;
  }
  // The order check has teeth: a sum whose blocks add into one float
  // with atomics (as a one-stage reduction would) gives different bits
  // under the same two orders.
  auto v = randn(4096, 1e3);
  float sums[3];
  for (unsigned order : {0u, 1u, 2u}) {
    emu_block_order = order;
    float acc = 0;
    emu_launch({64}, {64}, 0, [&] { atomicAdd(&acc, v[blockIdx.x * 64 + threadIdx.x]); });
    sums[order] = acc;
  }
  emu_block_order = 0;
  bool differs = sums[0] != sums[1] || sums[1] != sums[2];
  printf("%-34s %s\n", "emu block order (atomic sum)", differs ? "differs, as it must" : "identical  FAIL: the shuffle shows nothing");
  if (!differs) failures++;
}

// ---- tensor cores -------------------------------------------------------------

static float bf16r(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
static std::vector<float> bf16r(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); i++) y[i] = bf16r(x[i]);
  return y;
}

// reportBound checks |got − want| ≤ bound element by element and prints
// the largest error and the largest ratio error/bound (≤ 1 passes).
static void reportBound(const char* name, const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& bound) {
  double err = 0, ratio = 0, scale = 0;
  bool nan = false;
  for (size_t i = 0; i < want.size(); i++) {
    if (std::isnan(got[i])) nan = true;
    double e = std::fabs(got[i] - want[i]);
    err = std::max(err, e);
    ratio = std::max(ratio, e / bound[i]);
    scale = std::max(scale, std::fabs(want[i]));
  }
  bool ok = !nan && ratio <= 1;
  printf("%-34s max err %.3g (scale %.3g), err/bound %.3f%s\n", name, err, scale, ratio, ok ? "" : "  FAIL");
  if (!ok) failures++;
}

// checkMMA runs mma_bf16 (the instruction as kernels.cu issues it) on one
// warp. The fragments are distributed here by the inverse of the ISA's
// table, written independently of emu.h: A[r][c] is in lane
// 4·(r mod 8) + (c mod 8)/2, register (r div 8) + 2·(c div 8), half c mod 2;
// B[k][n] in lane 4·n + (k mod 8)/2, register k div 8, half k mod 2;
// C[r][c] in lane 4·(r mod 8) + c/2, element 2·(r div 8) + c mod 2. D must
// equal C + A·B computed directly in float64 to within float32 rounding of
// the sum (one rounding, or 17 in the sequential mode). It also checks
// frag_a_from_c, the kernels' reuse of two D tiles as the A fragment of the
// next product: bf16(A·B1)·B2 against the direct float64 product.
static void checkMMA(bool sequential) {
  emu_mma_f32_sequential = sequential;
  std::normal_distribution<double> nd(0, 1);
  float A[16][16], B[16][8], B2[16][8], C[16][8];
  for (auto& r : A)
    for (auto& x : r) x = bf16r((float)nd(rng));
  for (auto& r : B)
    for (auto& x : r) x = bf16r((float)nd(rng));
  for (auto& r : B2)
    for (auto& x : r) x = bf16r((float)nd(rng));
  for (auto& r : C)
    for (auto& x : r) x = (float)nd(rng);
  auto bits = [](float x) { return (uint32_t)__float2bfloat16_rn(x).bits; };
  uint32_t fa[32][4] = {}, fb[32][2] = {}, fb2[32][2] = {}, fbh[32][2] = {};
  float fc[32][4];
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 16; c++) fa[4 * (r % 8) + (c % 8) / 2][r / 8 + 2 * (c / 8)] |= bits(A[r][c]) << (16 * (c % 2));
  for (int kk = 0; kk < 16; kk++)
    for (int n = 0; n < 8; n++) {
      fb[4 * n + (kk % 8) / 2][kk / 8] |= bits(B[kk][n]) << (16 * (kk % 2));
      fb2[4 * n + (kk % 8) / 2][kk / 8] |= bits(B2[kk][n]) << (16 * (kk % 2));
      // B rows 8–15 as a second 16×8 tile: columns 8–15 of A·[B | Bh].
      fbh[4 * n + (kk % 8) / 2][kk / 8] |= bits(B[(kk + 5) % 16][n]) << (16 * (kk % 2));
    }
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 8; c++) fc[4 * (r % 8) + c / 2][2 * (r / 8) + c % 2] = C[r][c];
  float fd[32][4], fe[32][4];
  emu_launch({1}, {32}, 0, [&] {
    int l = threadIdx.x;
    float d[4] = {fc[l][0], fc[l][1], fc[l][2], fc[l][3]};
    mma_bf16(d, fa[l], fb[l]);
    for (int i = 0; i < 4; i++) fd[l][i] = d[i];
    // S = A·[B | Bh] (16×16 as two tiles), then S·B2 through frag_a_from_c.
    float s0[4] = {0, 0, 0, 0}, s1[4] = {0, 0, 0, 0}, e[4] = {0, 0, 0, 0};
    mma_bf16(s0, fa[l], fb[l]);
    mma_bf16(s1, fa[l], fbh[l]);
    uint32_t a2[4];
    frag_a_from_c(a2, s0, s1);
    mma_bf16(e, a2, fb2[l]);
    for (int i = 0; i < 4; i++) fe[l][i] = e[i];
  });
  std::vector<float> got, got2;
  std::vector<double> want, want2, bound, bound2;
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 8; c++) {
      double s = C[r][c], sa = std::fabs(C[r][c]);
      for (int kk = 0; kk < 16; kk++) {
        s += (double)A[r][kk] * B[kk][c];
        sa += std::fabs((double)A[r][kk] * B[kk][c]);
      }
      got.push_back(fd[4 * (r % 8) + c / 2][2 * (r / 8) + c % 2]);
      want.push_back(s);
      // One rounding: half an ulp of |s|; sequential: 16 roundings of partial sums ≤ Σ|terms|.
      bound.push_back((sequential ? 17 * sa : std::fabs(s)) * 0x1p-24 + 1e-30);
      // bf16(A·[B|Bh])·B2: the elements of S are rounded to bf16 (as the
      // kernels do with P and dS) before the second product. The reference
      // rounds the float64 S; the kernel's float32 S can round the other
      // way only when S lies within a float32 ulp of a bf16 tie, so the
      // bound allows one term one bf16 ulp off, besides the float32 sums.
      double s2 = 0, sa2 = 0, flip = 0;
      for (int kk = 0; kk < 16; kk++) {
        double sv = 0;
        for (int m = 0; m < 16; m++) sv += (double)A[r][m] * (kk < 8 ? B[m][kk] : B[(m + 5) % 16][kk - 8]);
        double rs = bf16r((float)sv);
        s2 += rs * B2[kk][c];
        sa2 += std::fabs(rs * B2[kk][c]);
        flip = std::max(flip, std::fabs(rs * B2[kk][c]) * 0x1p-7);
      }
      got2.push_back(fe[4 * (r % 8) + c / 2][2 * (r / 8) + c % 2]);
      want2.push_back(s2);
      bound2.push_back(flip + sa2 * 34 * 0x1p-24);
    }
  reportBound(sequential ? "mma m16n8k16 bf16 (f32 sequential)" : "mma m16n8k16 bf16", got, want, bound);
  reportBound(sequential ? "mma C→A fragment (f32 sequential)" : "mma C→A fragment", got2, want2, bound2);
  emu_mma_f32_sequential = false;
}

// refAttnTC is the float64 reference of the tensor-core kernels on the
// bf16-rounded inputs qr, kr, vr, dor, with per-element error bounds.
//
// Tolerances. Let u = 2⁻⁸, the unit roundoff of bfloat16 (8 significant
// bits). The kernels round q, k, v and dO to bf16 (so does the reference:
// no error) and, between the products, P and dS (relative error ≤ u each);
// products are exact and sums float32 (relative error ~2⁻²⁴ per addition,
// negligible next to u). To first order in u:
//   out_ic: Σ_j P_ij(1+δ_j)v_jc / l  ⇒  |err| ≤ u·Σ_j P_ij|v_jc|.
//   D_i = Σ_c dO_ic·O_ic is computed in float32 from the unrounded dO and
//     the kernel's O: |err| ≤ β_i = u·Σ_c |dO_ic|(|O_ic| + Σ_j P_ij|v_jc|).
//   dS_ij = P_ij(dP_ij − D_i), rounded: |err| ≤ u|dS_ij| + P_ij·β_i.
//   dq_ic = scale·Σ_j dS_ij k_jc ⇒ |err| ≤ scale·Σ_j (u|dS_ij| + P_ij β_i)|k_jc|;
//   dk_jc likewise with |q_ic| (summed over the group's heads and queries);
//   dv_jc = Σ P_ij dO_ic ⇒ |err| ≤ u·Σ P_ij|dO_ic|.
//   lse_i: float32 scores (≤ hd/16 roundings of a float32 sum of |s|
//     at most scale·Σ_c|q_ic k_jc|), float32 sums of lim terms and exp2f/log2f
//     (2 ulp): |err| ≤ 2⁻²²·(scale·max_j Σ_c|q_ic k_jc|·hd/16 + lim) + 2⁻²⁰|lse_i|.
// The checks allow twice these first-order bounds (for the second-order
// terms and float32 rounding of the sums) plus 1e-6 absolute.
struct TCRef {
  std::vector<double> out, lse, dq, dk, dv, bout, blse, bdq, bdk, bdv;
};
static TCRef refAttnTC(int heads, int kvh, int hd, float scale, const std::vector<Span>& spans, int tq, const std::vector<float>& q,
                       const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& dout) {
  const double u = 0x1p-8;
  int group = heads / kvh, qRow = heads * hd, kRow = kvh * hd;
  TCRef r;
  r.out.assign((size_t)tq * qRow, 0);
  r.bout = r.out;
  r.lse.assign((size_t)tq * heads, 0);
  r.blse = r.lse;
  r.dq.assign(q.size(), 0);
  r.bdq = r.dq;
  r.dk.assign(k.size(), 0);
  r.bdk = r.dk;
  r.dv.assign(v.size(), 0);
  r.bdv = r.dv;
  for (auto& s : spans)
    for (int h = 0; h < heads; h++) {
      int g = h / group;
      for (int i = 0; i < s.qlen; i++) {
        int lim = s.klen - s.qlen + i + 1;
        size_t qr = (size_t)(s.q0 + i) * qRow + h * hd;
        std::vector<double> p(lim);
        double m = -INFINITY, smax = 0;
        for (int j = 0; j < lim; j++) {
          double d = 0, da = 0;
          for (int c = 0; c < hd; c++) {
            double x = (double)q[qr + c] * k[(size_t)(s.k0 + j) * kRow + g * hd + c];
            d += x;
            da += std::fabs(x);
          }
          p[j] = scale * d;
          smax = std::max(smax, scale * da);
          m = std::max(m, p[j]);
        }
        double sum = 0;
        for (auto& x : p) sum += (x = std::exp(x - m));
        for (auto& x : p) x /= sum;
        double L = m + std::log(sum);
        r.lse[(s.q0 + i) * heads + h] = L;
        r.blse[(s.q0 + i) * heads + h] = 2 * (0x1p-22 * (smax * hd / 16 + lim) + 0x1p-20 * std::fabs(L)) + 1e-6;
        std::vector<double> pv(hd, 0);  // Σ_j P_ij|v_jc|
        for (int j = 0; j < lim; j++)
          for (int c = 0; c < hd; c++) {
            double x = v[(size_t)(s.k0 + j) * kRow + g * hd + c];
            r.out[qr + c] += p[j] * x;
            pv[c] += p[j] * std::fabs(x);
          }
        for (int c = 0; c < hd; c++) r.bout[qr + c] = 2 * u * pv[c] + 1e-6;
        double D = 0, beta = 0;
        for (int c = 0; c < hd; c++) {
          D += (double)dout[qr + c] * r.out[qr + c];
          beta += u * std::fabs(dout[qr + c]) * (std::fabs(r.out[qr + c]) + pv[c]);
        }
        for (int j = 0; j < lim; j++) {
          size_t kk = (size_t)(s.k0 + j) * kRow + g * hd;
          double dp = 0;
          for (int c = 0; c < hd; c++) dp += (double)dout[qr + c] * v[kk + c];
          double ds = p[j] * (dp - D), e = u * std::fabs(ds) + p[j] * beta;
          for (int c = 0; c < hd; c++) {
            r.dq[qr + c] += scale * ds * k[kk + c];
            r.bdq[qr + c] += scale * e * std::fabs(k[kk + c]);
            r.dk[kk + c] += scale * ds * q[qr + c];
            r.bdk[kk + c] += scale * e * std::fabs(q[qr + c]);
            r.dv[kk + c] += p[j] * dout[qr + c];
            r.bdv[kk + c] += u * p[j] * std::fabs(dout[qr + c]);
          }
        }
      }
    }
  for (auto* b : {&r.bdq, &r.bdk, &r.bdv})
    for (auto& x : *b) x = 2 * x + 1e-6;
  return r;
}

static std::vector<int> tilesOfN(const std::vector<Span>& spans, int rows) {
  std::vector<int> t;
  for (auto& s : spans)
    for (int r = 0; r < s.qlen; r += rows) t.insert(t.end(), {s.q0 + r, std::min(rows, s.qlen - r), s.k0, s.klen - s.qlen + r + 1});
  return t;
}
static std::vector<int> keyTilesOfN(const std::vector<Span>& spans, int rows) {
  std::vector<int> t;
  for (auto& s : spans) {
    if (s.qlen == 0) continue;
    for (int j = 0; j < s.klen; j += rows) t.insert(t.end(), {s.k0 + j, std::min(rows, s.klen - j), j, s.q0, s.qlen, s.klen - s.qlen});
  }
  return t;
}

// Shared memory of the tensor-core kernels in bytes (as launch.go's tcFwdSmem …).
static int tcFwdSmem(int HD, int BN) { return 2 * (BN * (HD + 8) + HD * (BN + 8)); }
static int tcDqSmem(int HD, int BN) { return 2 * (2 * BN * (HD + 8) + HD * (BN + 8)); }
static int tcDkdvSmem(int HD, int BQ) { return 2 * (2 * 64 * (HD + 8) + 2 * BQ * (HD + 8) + 2 * HD * (BQ + 8)) + 8 * BQ; }

// digest is the FNV-1a hash of the bits of every float of the vectors, in
// order: two runs that agree bit for bit have the same digest.
static uint64_t digest(std::initializer_list<const std::vector<float>*> vs) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (auto* v : vs)
    for (float f : *v) {
      uint32_t b;
      std::memcpy(&b, &f, 4);
      for (int i = 0; i < 4; i++) h = (h ^ ((b >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    }
  return h;
}

// printDigest prints a case's digest: the same on two builds of the
// kernels when they compute every bit of every result alike (a change
// that only moves, reorders or batches loads must keep it; compare the
// output of this program before and after such a change).
static void printDigest(const char* name, uint64_t d) { printf("%-34s digest %016llx\n", name, (unsigned long long)d); }

// checkAttentionTC runs the tensor-core forward and backward as the
// backend does (attn_bwd_dot for D between them) on float32 inputs, and
// compares them with refAttnTC on the bf16-rounded inputs, and prints
// the digest of their bits.
static void checkAttentionTC(const char* name, int heads, int kvh, int hd, std::vector<Span> spans, int tq, int tk) {
  float scale = 1 / std::sqrt((float)hd);
  auto q = randn((size_t)tq * heads * hd), k = randn((size_t)tk * kvh * hd), v = randn((size_t)tk * kvh * hd), dout = randn(q.size());
  TCRef ref = refAttnTC(heads, kvh, hd, scale, spans, tq, bf16r(q), bf16r(k), bf16r(v), bf16r(dout));
  int HD = hd <= 64 ? 64 : 128, BN = HD == 64 ? 64 : 32;
  auto tiles = tilesOfN(spans, 64), kt = keyTilesOfN(spans, 64);
  std::vector<float> out(q.size(), 0), lse((size_t)tq * heads, 0);
  emu_launch({(unsigned)tiles.size() / 4, (unsigned)heads}, {128}, tcFwdSmem(HD, 64), [&] {
    (HD == 64 ? attn_fwd_tc64 : attn_fwd_tc128)(out.data(), lse.data(), q.data(), k.data(), v.data(), tiles.data(), heads, kvh, hd, scale);
  });
  char buf[128];
  snprintf(buf, sizeof buf, "%s out", name);
  reportBound(buf, out, ref.out, ref.bout);
  snprintf(buf, sizeof buf, "%s lse", name);
  reportBound(buf, lse, ref.lse, ref.blse);
  int rowsHeads = tq * heads;
  std::vector<float> D(rowsHeads);
  emu_launch({(unsigned)((rowsHeads * 32 + 255) / 256)}, {256}, 0, [&] { attn_bwd_dot(D.data(), dout.data(), out.data(), rowsHeads, hd); });
  // Gradients start at 1 to check that the kernels accumulate.
  std::vector<float> dq(q.size(), 1), dk(k.size(), 1), dv(v.size(), 1);
  emu_launch({(unsigned)tiles.size() / 4, (unsigned)heads}, {128}, tcDqSmem(HD, BN), [&] {
    (HD == 64 ? attn_bwd_dq_tc64 : attn_bwd_dq_tc128)(dq.data(), dout.data(), q.data(), k.data(), v.data(), lse.data(), D.data(), tiles.data(), heads,
                                                      kvh, hd, scale);
  });
  emu_launch({(unsigned)kt.size() / 6, (unsigned)kvh}, {128}, tcDkdvSmem(HD, BN), [&] {
    (HD == 64 ? attn_bwd_dkdv_tc64 : attn_bwd_dkdv_tc128)(dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), lse.data(), D.data(),
                                                          kt.data(), heads, kvh, hd, scale);
  });
  for (auto* g : {&ref.dq, &ref.dk, &ref.dv})
    for (auto& x : *g) x += 1;
  snprintf(buf, sizeof buf, "%s dq", name);
  reportBound(buf, dq, ref.dq, ref.bdq);
  snprintf(buf, sizeof buf, "%s dk", name);
  reportBound(buf, dk, ref.dk, ref.bdk);
  snprintf(buf, sizeof buf, "%s dv", name);
  reportBound(buf, dv, ref.dv, ref.bdv);
  printDigest(name, digest({&out, &lse, &dq, &dk, &dv}));
}

int main() {
  checkAttention("packed gqa", 4, 2, 8, {{0, 3, 0, 3}, {3, 5, 3, 5}, {8, 1, 8, 1}}, 9, 9, false);
  checkAttention("long mqa hd40", 2, 1, 40, {{0, 70, 0, 70}}, 70, 70, false);
  checkAttention("padded hd6", 2, 2, 6, {{0, 4, 0, 4}, {6, 6, 6, 6}}, 12, 12, false);
  checkAttention("cache prefix", 4, 2, 8, {{0, 3, 0, 40}, {3, 2, 40, 2}}, 5, 42, false);
  checkAttention("decode", 4, 2, 8, {{0, 1, 0, 6}, {1, 3, 16, 9}, {4, 1, 32, 77}}, 5, 109, true);
  checkMMA(false);
  checkMMA(true);
  // Tensor-core attention: packed causal sequences longer and shorter than
  // the 64-row tiles, GQA 16/4 and MHA 8/8, head dims 64 and 128, spans
  // over a KV-cache prefix (queries the last QLen of KLen keys, one of
  // them a single decode query), rows in no span, and head dims padded up
  // to the kernels' 64 or 128.
  checkAttentionTC("tc gqa16/4 hd128", 16, 4, 128, {{0, 70, 0, 70}, {70, 3, 70, 3}, {73, 45, 73, 45}}, 118, 118);
  checkAttentionTC("tc mha8/8 hd64", 8, 8, 64, {{0, 100, 0, 100}, {100, 29, 100, 29}}, 129, 129);
  checkAttentionTC("tc prefix gqa8/2 hd128", 8, 2, 128, {{0, 5, 0, 80}, {5, 20, 80, 90}, {25, 1, 170, 33}}, 26, 203);
  checkAttentionTC("tc prefix mqa hd64", 4, 1, 64, {{0, 66, 0, 131}, {66, 2, 131, 7}}, 68, 138);
  checkAttentionTC("tc padded hd40", 2, 1, 40, {{0, 7, 0, 7}, {8, 66, 8, 66}}, 74, 74);
  checkAttentionTC("tc padded hd80", 4, 2, 80, {{0, 33, 0, 33}}, 33, 33);
  checkAttentionTC("tc odd hd6", 2, 2, 6, {{0, 4, 0, 4}, {6, 6, 6, 6}}, 12, 12);
  // The least accurate accumulation the ISA allows (float32, in order).
  emu_mma_f32_sequential = true;
  checkAttentionTC("tc gqa4/2 hd128 f32-sequential", 4, 2, 128, {{0, 90, 0, 90}, {90, 10, 120, 40}}, 100, 160);
  emu_mma_f32_sequential = false;
  checkGemm();
  checkLMHead();
  checkRowKernels();
  checkRMSNormDW();
  checkOptimizer();
  printf(failures ? "FAILED: %d checks\n" : "all kernel checks passed\n", failures);
  return failures ? 1 : 0;
}
