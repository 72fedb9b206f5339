// check_decode.cc runs the kernels of ../decode.cu under emu.h against
// references written here in float64: the paged KV append and block copy
// (exact), paged attention for decode rows (split-K) and prefill tiles
// against causal attention over each sequence's keys and values laid out
// contiguously, and sample_rows against backend.SampleRow's rule (the
// same rule as policy/backend/backendtest's refSample, with the same
// Philox4x32-10 number per seed and step). Build and run with
// check_decode.sh; it prints the largest error of each check and exits 1
// when one exceeds its bound.
#include "emu.h"
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <set>
using std::max;
using std::min;
#include "decode_emu.inc"

static std::mt19937_64 rng(7);
static int failures = 0;
static std::vector<float> randn(size_t n, double s = 1) {
  std::normal_distribution<double> d(0, s);
  std::vector<float> x(n);
  for (auto& v : x) v = (float)d(rng);
  return x;
}
static void verdict(const char* name, bool ok, const char* fmt, double a, double b) {
  printf("%-44s ", name);
  printf(fmt, a, b);
  printf("%s\n", ok ? "" : "  FAIL");
  if (!ok) failures++;
}
static float bf16round(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

// ---- paged attention --------------------------------------------------------------

struct Seq {
  int qlen, klen;
  std::vector<int> blocks;
};

// checkPaged builds a cache of nblocks blocks of bs rows for 2 layers,
// fills it with the sequences' keys and values through kv_append (layer
// 1, the second layer, so that layer offsets are exercised), then runs
// the decode kernel on the sequences with qlen ≤ 4 and the prefill kernel
// on the others, and compares with causal attention in float64 over the
// keys and values as stored (bf16-rounded for a bf16 cache). Bound: 1e-5
// of the output's scale, as check.cc's float32 attention checks (float32
// sums of at most a few hundred terms of magnitude ≤ the scale).
template <class T>
static void checkPaged(const char* name, int heads, int kvh, int hd, int bs, int nblocks, std::vector<Seq> seqs, int splits) {
  bool bf = sizeof(T) == 2;
  int width = kvh * hd, layers = 2, layer = 1;
  long long half = (long long)nblocks * bs * width;
  std::vector<T> cache(layers * 2 * half);
  T* kc = cache.data() + layer * 2 * half;
  T* vc = kc + half;
  // Every sequence's whole content: keys and values of all positions.
  std::vector<std::vector<float>> K(seqs.size()), V(seqs.size());
  int rows = 0;
  for (auto& s : seqs) rows += s.qlen;
  // Append the past in one call, then the new rows in a second, the way
  // generation does over two steps.
  for (int phase = 0; phase < 2; phase++) {
    std::vector<int> slots;
    std::vector<float> k, v;
    for (size_t i = 0; i < seqs.size(); i++) {
      auto& s = seqs[i];
      int p0 = phase == 0 ? 0 : s.klen - s.qlen, p1 = phase == 0 ? s.klen - s.qlen : s.klen;
      for (int p = p0; p < p1; p++) {
        slots.push_back(s.blocks[p / bs] * bs + p % bs);
        auto kr = randn(width), vr = randn(width);
        k.insert(k.end(), kr.begin(), kr.end());
        v.insert(v.end(), vr.begin(), vr.end());
        for (int c = 0; c < width; c++) {
          K[i].push_back(bf ? bf16round(kr[c]) : kr[c]);
          V[i].push_back(bf ? bf16round(vr[c]) : vr[c]);
        }
      }
    }
    int n = slots.size();
    slots.push_back(-1);  // a row in no sequence: skipped
    k.resize(k.size() + width, 99.f);
    v.resize(v.size() + width, 99.f);
    long long total = (long long)(n + 1) * width;
    emu_launch_seq({(unsigned)((total + 255) / 256)}, {256}, [&] {
      if constexpr (sizeof(T) == 2)
        kv_append_bf16(kc, vc, k.data(), v.data(), slots.data(), n + 1, width);
      else
        kv_append_f32(kc, vc, k.data(), v.data(), slots.data(), n + 1, width);
    });
  }
  // Layout: tables, decode rows {query row, table offset, count}, tiles.
  std::vector<int> tabs, drows, tiles;
  int q0 = 0, maxK = 0;
  for (auto& s : seqs) {
    int tab = tabs.size();
    tabs.insert(tabs.end(), s.blocks.begin(), s.blocks.end());
    int past = s.klen - s.qlen;
    if (s.qlen <= 4) {
      for (int i = 0; i < s.qlen; i++) {
        drows.insert(drows.end(), {q0 + i, tab, past + i + 1});
        maxK = max(maxK, past + i + 1);
      }
    } else {
      for (int r = 0; r < s.qlen; r += 4) tiles.insert(tiles.end(), {q0 + r, min(4, s.qlen - r), tab, past + r + 1});
    }
    q0 += s.qlen;
  }
  float scale = 1 / std::sqrt((float)hd);
  auto q = randn((size_t)rows * heads * hd);
  std::vector<float> out(q.size(), 0);
  int group = heads / kvh;
  if (!drows.empty()) {
    int nd = drows.size() / 3, chunk = (maxK + splits - 1) / splits;
    int maxg = group <= 2 ? 2 : group <= 4 ? 4 : 8, ngrp = (group + maxg - 1) / maxg;
    std::vector<float> ml((size_t)nd * heads * splits * 2), pacc((size_t)nd * heads * splits * hd);
    int HD = hd <= 128 ? 128 : 256;
    auto dec = [&] {
#define D(G, H)                                                                                                                       \
  if (maxg == G && HD == H) {                                                                                                         \
    if constexpr (sizeof(T) == 2)                                                                                                     \
      paged_decode_bf16_g##G##_h##H(ml.data(), pacc.data(), q.data(), kc, vc, drows.data(), tabs.data(), heads, kvh, hd, bs, scale, chunk, \
                                    ngrp);                                                                                            \
    else                                                                                                                              \
      paged_decode_f32_g##G##_h##H(ml.data(), pacc.data(), q.data(), kc, vc, drows.data(), tabs.data(), heads, kvh, hd, bs, scale, chunk,  \
                                   ngrp);                                                                                             \
  }
      D(2, 128) D(4, 128) D(8, 128) D(2, 256) D(4, 256) D(8, 256)
#undef D
    };
    // Shared memory as the kernel lays it out: queries, padded key tile, value tile.
    int smem = 4 * maxg * HD + 32 * (HD + 16 / (int)sizeof(T)) * (int)sizeof(T) + 32 * HD * (int)sizeof(T);
    emu_launch({(unsigned)nd, (unsigned)(kvh * ngrp), (unsigned)splits}, {32}, smem, dec);
    emu_launch({(unsigned)nd, (unsigned)heads}, {32}, 0, [&] { paged_combine(out.data(), ml.data(), pacc.data(), drows.data(), heads, hd, splits); });
  }
  if (!tiles.empty()) {
    emu_launch({(unsigned)tiles.size() / 4, (unsigned)heads}, {128}, 4 * (4 * hd + 32 * (hd + 1)), [&] {
      if constexpr (sizeof(T) == 2)
        paged_prefill_bf16(out.data(), q.data(), kc, vc, tiles.data(), tabs.data(), heads, kvh, hd, bs, scale);
      else
        paged_prefill_f32(out.data(), q.data(), kc, vc, tiles.data(), tabs.data(), heads, kvh, hd, bs, scale);
    });
  }
  // Reference.
  std::vector<double> want(q.size(), 0);
  q0 = 0;
  for (size_t si = 0; si < seqs.size(); si++) {
    auto& s = seqs[si];
    for (int h = 0; h < heads; h++) {
      int g = h / group;
      for (int i = 0; i < s.qlen; i++) {
        int lim = s.klen - s.qlen + i + 1;
        size_t qr = ((size_t)(q0 + i) * heads + h) * hd;
        std::vector<double> p(lim);
        double m = -INFINITY;
        for (int j = 0; j < lim; j++) {
          double d = 0;
          for (int c = 0; c < hd; c++) d += (double)q[qr + c] * K[si][(size_t)j * width + g * hd + c];
          p[j] = scale * d;
          m = max(m, p[j]);
        }
        double sum = 0;
        for (auto& x : p) sum += (x = std::exp(x - m));
        for (int j = 0; j < lim; j++)
          for (int c = 0; c < hd; c++) want[qr + c] += p[j] / sum * V[si][(size_t)j * width + g * hd + c];
      }
    }
    q0 += s.qlen;
  }
  double sc = 0, err = 0;
  bool nan = false;
  for (size_t i = 0; i < want.size(); i++) {
    sc = max(sc, std::fabs(want[i]));
    err = max(err, std::fabs(out[i] - want[i]));
    nan |= std::isnan(out[i]);
  }
  char buf[96];
  snprintf(buf, sizeof buf, "paged %s %s", name, bf ? "bf16" : "f32");
  verdict(buf, !nan && err <= 1e-5 * sc, "max err %.3g (scale %.3g)", err, sc);
}

// A random block table: distinct blocks from a shuffled pool.
static std::vector<Seq> layoutSeqs(const std::vector<std::pair<int, int>>& qk, int bs, int nblocks) {
  std::vector<int> pool(nblocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<Seq> out;
  size_t next = 0;
  for (auto [qlen, klen] : qk) {
    Seq s{qlen, klen, {}};
    for (int b = 0; b < (klen + bs - 1) / bs; b++) s.blocks.push_back(pool[next++]);
    out.push_back(s);
  }
  return out;
}

static void checkCopyBlocks() {
  int layers = 3, nblocks = 6, blockWords = 10;
  long long halfWords = (long long)nblocks * blockWords;
  std::vector<unsigned> base(layers * 2 * halfWords);
  for (auto& x : base) x = (unsigned)rng();
  auto want = base;
  std::vector<int> pairs = {4, 1, 0, 5};
  for (int l = 0; l < layers; l++)
    for (int h = 0; h < 2; h++)
      for (int p = 0; p < 2; p++)
        for (int w = 0; w < blockWords; w++) {
          long long off = (2LL * l + h) * halfWords;
          want[off + pairs[2 * p + 1] * blockWords + w] = base[off + pairs[2 * p] * blockWords + w];
        }
  emu_launch_seq({1}, {256}, [&] { kv_copy_blocks(base.data(), pairs.data(), 2, blockWords, halfWords, layers); });
  verdict("kv_copy_blocks", base == want, "%g words differ%.0s", (double)(base != want), 0);
}

// ---- sampling ---------------------------------------------------------------------

static void philox(uint32_t c[4], uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; r++) {
    if (r > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
    uint32_t n[4] = {(uint32_t)(p1 >> 32) ^ c[1] ^ k0, (uint32_t)p1, (uint32_t)(p0 >> 32) ^ c[3] ^ k1, (uint32_t)p0};
    std::memcpy(c, n, sizeof n);
  }
}
static double uniform(uint64_t seed, uint64_t step) {
  uint32_t c[4] = {(uint32_t)step, (uint32_t)(step >> 32), 0, 0};
  philox(c, (uint32_t)seed, (uint32_t)(seed >> 32));
  return (double)(((uint64_t)c[0] << 21) | (c[1] >> 11)) * 0x1p-53;
}

struct Row {
  bool greedy;
  double temp;
  int topk;
  double topp, minp;
  uint64_t seed, step;
};

// The rule in float64 (backend.SampleRow): kept ids in increasing order,
// their weights, the accepted tokens for u (two at a boundary within
// 1e-6 of the total), log-probs.
struct Ref {
  int greedy;
  std::vector<int> kept;
  std::vector<double> w, raw;
  double total = 0;
  std::set<int> tokens(double u) const {
    double target = u * total, eps = 1e-6 * total, acc = 0;
    for (size_t j = 0; j < kept.size(); j++) {
      double prev = acc;
      acc += w[kept[j]];
      if (acc <= target) continue;
      std::set<int> ok = {kept[j]};
      if (j + 1 < kept.size() && acc - target < eps) ok.insert(kept[j + 1]);
      if (j > 0 && target - prev < eps) ok.insert(kept[j - 1]);
      return ok;
    }
    return {kept.back()};
  }
};
static Ref reference(const std::vector<float>& z, const Row& r) {
  Ref ref;
  int V = z.size();
  double m = -INFINITY;
  ref.greedy = -1;
  for (int i = 0; i < V; i++)
    if (z[i] > m) m = z[i], ref.greedy = i;
  double sum = 0;
  for (float x : z) sum += std::exp(x - m);
  ref.raw.resize(V);
  for (int i = 0; i < V; i++) ref.raw[i] = z[i] - m - std::log(sum);
  if (r.greedy) return ref;
  double invT = 1 / r.temp;
  ref.w.resize(V);
  std::vector<int> cand;
  for (int i = 0; i < V; i++) {
    ref.w[i] = std::exp(z[i] * invT - m * invT);
    if (ref.w[i] > 0 && ref.w[i] >= r.minp) cand.push_back(i);
  }
  auto byLogit = [&](std::vector<int> s) {
    std::stable_sort(s.begin(), s.end(), [&](int a, int b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
    return s;
  };
  if (r.topk > 0 && r.topk < (int)cand.size()) {
    float kth = z[byLogit(cand)[r.topk - 1]];
    std::vector<int> k;
    for (int i : cand)
      if (z[i] >= kth) k.push_back(i);
    cand = k;
  }
  if (r.topp > 0 && r.topp < 1) {
    double total = 0, before = 0;
    for (int i : cand) total += ref.w[i];
    std::vector<int> k;
    for (int i : byLogit(cand)) {
      if (before >= r.topp * total) break;
      k.push_back(i);
      before += ref.w[i];
    }
    std::sort(k.begin(), k.end());
    cand = k;
  }
  ref.kept = cand;
  for (int i : cand) ref.total += ref.w[i];
  return ref;
}

// sample runs sample_rows on rows of logits with threads per block.
static std::vector<int> sample(const std::vector<float>& z, int vocab, const std::vector<Row>& rows, int threads) {
  std::vector<int> params, out(3 * rows.size());
  for (auto& r : rows) {
    float invT = r.greedy ? 1.f : (float)(1 / r.temp), topp = (float)r.topp, minp = (float)r.minp;
    params.insert(params.end(), {r.greedy ? 1 : 0, r.topk, (int)(uint32_t)r.seed, (int)(uint32_t)(r.seed >> 32), (int)(uint32_t)r.step,
                                 (int)(uint32_t)(r.step >> 32), __float_as_int(invT), __float_as_int(topp), __float_as_int(minp)});
  }
  emu_launch({(unsigned)rows.size()}, {(unsigned)threads}, 0, [&] { sample_rows(z.data(), vocab, params.data(), out.data()); });
  return out;
}

// checkSampling draws steps tokens from each (logits, parameters) case
// and compares every token with the reference's choice for the same
// uniform number, and the log-probabilities with the reference's: within
// 2e-6 (weights in float32, rel. error ≤ 2.4e-7 each, and fixed-point sums
// off by at most vocab·2⁻⁴⁴ ≈ 9e-9 of a total ≥ 1: |Δ log(w/W)| ≤ 5e-7
// plus float32 rounding of the result at magnitudes ≤ 10).
static void checkSampling(const char* name, const std::vector<std::pair<std::vector<float>, Row>>& cases, int steps, int threads) {
  int vocab = cases[0].first.size();
  std::vector<float> z;
  std::vector<Row> rows;
  std::vector<Ref> refs;
  for (auto& [zc, r] : cases) {
    Ref ref = reference(zc, r);
    for (int s = 0; s < steps; s++) {
      Row rr = r;
      rr.step = s;
      z.insert(z.end(), zc.begin(), zc.end());
      rows.push_back(rr);
      refs.push_back(ref);
    }
  }
  auto out = sample(z, vocab, rows, threads);
  int mism = 0;
  double lpErr = 0;
  for (size_t i = 0; i < rows.size(); i++) {
    int tok = out[3 * i];
    float lp = __int_as_float(out[3 * i + 1]), raw = __int_as_float(out[3 * i + 2]);
    const Ref& ref = refs[i];
    if (tok < 0 || tok >= vocab) {
      mism++;
      continue;
    }
    if (rows[i].greedy) {
      if (tok != ref.greedy || lp != 0) mism++;
    } else {
      if (!ref.tokens(uniform(rows[i].seed, rows[i].step)).count(tok)) mism++;
      lpErr = max(lpErr, std::fabs(lp - std::log(ref.w[tok] / ref.total)));
    }
    lpErr = max(lpErr, std::fabs(raw - ref.raw[tok]));
  }
  char buf[96];
  snprintf(buf, sizeof buf, "sample %s (%zu draws, %d threads)", name, rows.size(), threads);
  verdict(buf, mism == 0 && lpErr <= 2e-6, "%g tokens differ, log-prob err %.3g", mism, lpErr);
}

static std::vector<float> logitsRow(int vocab, double s) { return randn(vocab, s); }

static void checkSamplingCases() {
  int V = 300;
  auto r = [](double t, int k, double p, double mp, uint64_t seed) { return Row{t == 0, t, k, p, mp, seed, 0}; };
  auto ties = logitsRow(V, 1);
  ties[17] = ties[250] = 6;  // two maximal logits: greedy takes 17
  auto withInf = logitsRow(V, 2);
  for (int i = 0; i < V; i += 7) withInf[i] = -INFINITY;
  auto tieK = logitsRow(V, 0.5);
  tieK[100] = 7;
  for (int i : {3, 40, 41, 299}) tieK[i] = 6;  // top-2 keeps 100 and all four 6s
  // Top-p ties: logit 2 at id 4, 1 at ids 1, 6, 30, the rest ≤ −1; with
  // P·total = 1 + 1.5/e the first two ties are kept, the third is not.
  std::vector<float> tieP(V);
  std::normal_distribution<double> nd(0, 1);
  for (auto& x : tieP) x = (float)(-1 - std::fabs(nd(rng)));
  tieP[4] = 2;
  for (int i : {1, 6, 30}) tieP[i] = 1;
  double tt = 0;
  for (float x : tieP) tt += std::exp((double)x - 2);
  double tiePP = (1 + 1.5 / M_E) / tt;
  checkSampling("mixed", {
                             {logitsRow(V, 2), r(0, 0, 0, 0, 1)},
                             {ties, r(0, 0, 0, 0, 2)},
                             {withInf, r(0, 5, 0, 0, 3)},
                             {logitsRow(V, 1), r(1, 0, 0, 0, 4)},
                             {logitsRow(V, 1.5), r(0.6, 0, 0, 0, 5)},
                             {withInf, r(1.7, 0, 0, 0, 6)},
                             {logitsRow(V, 1), r(0.8, 5, 0, 0, 7)},
                             {logitsRow(V, 1), r(1, 1, 0, 0, 8)},
                             {tieK, r(1, 2, 0, 0, 9)},
                             {logitsRow(V, 1), r(1.2, 0, 0.6, 0, 10)},
                             {logitsRow(V, 1), r(1, 0, 1e-9, 0, 11)},
                             {tieP, r(1, 0, tiePP, 0, 12)},
                             {logitsRow(V, 1), r(1, 0, 0, 0.2, 13)},
                             {logitsRow(V, 1), r(0.9, 0, 0, 1, 14)},
                             {logitsRow(V, 2), r(0.7, 12, 0.8, 0.01, 15)},
                             {logitsRow(V, 1), r(2.5, 30, 0.95, 0.05, 16)},
                         },
                24, 64);
  // Qwen's vocabulary: 151,936 logits, a full block of 1,024 threads;
  // greedy with the maximum tied at the end, then truncation over
  // logits of a trained model's spread.
  int QV = 151936;
  auto big = logitsRow(QV, 3);
  big[151935] = big[90000] = 30;
  checkSampling("qwen vocab", {{big, r(0, 0, 0, 0, 1)}, {big, r(0.7, 50, 0.9, 0, 2)}, {big, r(1, 0, 0.95, 0.05, 3)}, {big, r(1, 0, 0, 0, 4)}}, 2,
                1024);
}

// Invalid rows get −1; a valid row among them is unaffected.
static void checkInvalid() {
  int V = 50;
  std::vector<float> z;
  std::vector<float> a = logitsRow(V, 1), b = logitsRow(V, 1), c = logitsRow(V, 1), d(V, -INFINITY);
  a[3] = NAN;
  b[49] = INFINITY;
  for (auto* x : {&a, &b, &c, &d}) z.insert(z.end(), x->begin(), x->end());
  std::vector<Row> rows = {{false, 1, 0, 0, 0, 1, 0}, {true, 0, 0, 0, 0, 0, 0}, {false, 0.5, 3, 0, 0, 2, 0}, {false, 1, 0, 0.9, 0, 3, 0}};
  auto out = sample(z, V, rows, 32);
  Ref ref = reference(c, rows[2]);
  bool ok = out[0] == -1 && out[3] == -1 && out[9] == -1 && ref.tokens(uniform(2, 0)).count(out[6]);
  verdict("sample invalid rows", ok, "tokens %g, valid row %g", (double)(out[0] + out[3] + out[9]), (double)out[6]);
}

// chi-square: 3,000 draws from one row (as backendtest's chiSquare), the
// limit the 1−10⁻⁶ quantile of χ² with |kept|−1 degrees of freedom
// (Wilson–Hilferty).
static void checkChiSquare() {
  std::vector<float> z = {2.1f, 1.7f, 1.5f, 1.4f, 0.9f, 0.8f, 0.5f, 0.2f, 0.1f, -0.4f, -1.6f, -3.f};
  Row r{false, 0.8, 9, 0.9, 0.02, 77, 0};
  Ref ref = reference(z, r);
  int n = 3000;
  std::vector<float> flat;
  std::vector<Row> rows;
  for (int i = 0; i < n; i++) {
    flat.insert(flat.end(), z.begin(), z.end());
    r.step = i;
    rows.push_back(r);
  }
  auto out = sample(flat, z.size(), rows, 32);
  std::map<int, int> counts;
  for (int i = 0; i < n; i++) counts[out[3 * i]]++;
  double x2 = 0;
  bool outside = false;
  for (auto [tok, c] : counts)
    if (std::find(ref.kept.begin(), ref.kept.end(), tok) == ref.kept.end()) outside = true;
  for (int i : ref.kept) {
    double e = n * ref.w[i] / ref.total;
    x2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  double df = ref.kept.size() - 1, h = 2 / (9 * df), limit = df * std::pow(1 - h + 4.7534 * std::sqrt(h), 3);
  verdict("sample chi-square (3000 draws)", !outside && x2 < limit, "X² %.2f, limit %.2f", x2, limit);
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  checkCopyBlocks();
  int bs = 16;
  auto mixed = layoutSeqs({{1, 1}, {1, 300}, {3, 70}, {4, 33}, {9, 9}, {13, 40}}, bs, 64);
  checkPaged<float>("mixed GQA 8/2 hd 128", 8, 2, 128, bs, 64, mixed, 3);
  checkPaged<__nv_bfloat16>("mixed GQA 8/2 hd 128", 8, 2, 128, bs, 64, mixed, 3);
  auto dec = layoutSeqs({{1, 150}, {2, 17}, {1, 64}}, bs, 32);
  checkPaged<__nv_bfloat16>("decode GQA 16/8 hd 128 (Qwen3-0.6B)", 16, 8, 128, bs, 32, dec, 2);
  checkPaged<__nv_bfloat16>("decode GQA 32/8 hd 128 (Qwen3-4B)", 32, 8, 128, bs, 32, dec, 4);
  checkPaged<float>("decode MQA 12/1 hd 64 (two head groups)", 12, 1, 64, bs, 32, dec, 1);
  checkPaged<float>("decode GQA 6/1 hd 40 (scalar loads)", 6, 1, 40, 5, 64, layoutSeqs({{1, 33}, {4, 21}}, 5, 64), 3);
  checkPaged<__nv_bfloat16>("mixed MHA 2/2 hd 256", 2, 2, 256, 4, 48, layoutSeqs({{1, 50}, {6, 30}}, 4, 48), 2);
  checkSamplingCases();
  checkInvalid();
  checkChiSquare();
  if (failures) {
    printf("%d checks FAILED\n", failures);
    return 1;
  }
  printf("all decode checks passed\n");
  return 0;
}
