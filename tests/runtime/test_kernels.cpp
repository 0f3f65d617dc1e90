// CPU kernel math against float64 references on awkward shapes (K not a multiple of the
// 8 lanes, row counts not a multiple of the 4-row blocking), as every backend's kernels
// are checked (STYLE.md: normalised error on random inputs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/cpu/attention.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/kernels.h"

using namespace g4c::runtime;
using g4c::plan::fb::Epilogue;

namespace {

std::vector<float> random(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// nmse = mse(a, b) / mse(b, 0)
double nmse(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return num / den;
}

double gelu64(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// float64 reference of cpu::linear: y[t][n] = x[t]·w0[n] (+ r[t][n] for ResidualAdd; gelu(x·w0)·(x·w1)
// for GeluTanhGateUp), x [rows][K], w0 / w1 [N][K].
std::vector<double> linear64(const std::vector<float>& x, const std::vector<float>& w0, const std::vector<float>& w1,
                             const std::vector<float>& r, int rows, int K, int N, Epilogue ep) {
  std::vector<double> ref(size_t(rows) * N);
  for (int t = 0; t < rows; ++t)
    for (int n = 0; n < N; ++n) {
      double a = 0, b = 0;
      for (int k = 0; k < K; ++k) {
        a += double(x[t * K + k]) * w0[n * K + k];
        b += double(x[t * K + k]) * w1[n * K + k];
      }
      ref[t * N + n] = ep == Epilogue::None ? a : ep == Epilogue::ResidualAdd ? r[t * N + n] + a : gelu64(a) * b;
    }
  return ref;
}

}  // namespace

TEST(CpuKernels, LinearAllEpiloguesMatchFloat64) {
  ThreadPool pool(2);
  for (int rows : {1, 3, 4, 7}) {
    const int K = 37, N = 13;
    auto x = random(size_t(rows) * K, 1), w0 = random(size_t(N) * K, 2), w1 = random(size_t(N) * K, 3);
    auto r = random(size_t(rows) * N, 4);
    for (Epilogue ep : {Epilogue::None, Epilogue::ResidualAdd, Epilogue::GeluTanhGateUp}) {
      std::vector<float> y = r;  // ResidualAdd in place (y aliases the residual)
      cpu::linear(pool, x.data(), rows, K, w0.data(), w1.data(), N, y.data(), y.data(), ep);
      const std::vector<double> ref = linear64(x, w0, w1, r, rows, K, N, ep);
      // fp32 accumulation of 37 products of N(0,1) values: relative error ~1e-7 per add;
      // nmse 1e-10 is three orders above that and far below any indexing mistake (~1).
      EXPECT_LT(nmse(y, ref), 1e-10) << "rows " << rows << " epilogue " << int(ep);
    }
  }
}

TEST(CpuKernels, RmsNormPerHeadAndPerRow) {
  const int rows = 3, cols = 12, eps_dim = 4;
  auto x = random(rows * cols, 5), w = random(eps_dim, 6);
  for (bool with_weight : {true, false}) {
    std::vector<float> y(x.size());
    cpu::rms_norm(x.data(), y.data(), rows, cols, eps_dim, with_weight ? w.data() : nullptr, 1e-6f);
    std::vector<double> ref(x.size());
    for (int r = 0; r < rows; ++r)
      for (int g = 0; g < cols; g += eps_dim) {
        double ss = 0;
        for (int j = 0; j < eps_dim; ++j) ss += double(x[r * cols + g + j]) * x[r * cols + g + j];
        const double inv = 1 / std::sqrt(ss / eps_dim + 1e-6);
        for (int j = 0; j < eps_dim; ++j) ref[r * cols + g + j] = x[r * cols + g + j] * inv * (with_weight ? w[j] : 1.0);
      }
    EXPECT_LT(nmse(y, ref), 1e-12);  // a handful of fp32 roundings per element
  }
}

TEST(CpuKernels, RopeRotatesOnlyTheFirstPairs) {
  // Two heads of D=8, proportional RoPE with 2 of the 4 pairs rotated, at positions 0, 5, 700.
  const int D = 8, pairs = 2, cols = 16;
  const int32_t pos[] = {0, 5, 700};
  auto x = random(3 * cols, 7);
  auto y = x;
  cpu::rope(y.data(), 3, cols, pos, D, pairs, 1e6);
  for (int r = 0; r < 3; ++r)
    for (int h = 0; h < cols; h += D)
      for (int j = 0; j < D / 2; ++j) {
        const double a = x[r * cols + h + j], b = x[r * cols + h + j + D / 2];
        double c = 1, s = 0;
        if (j < pairs) {
          const double angle = pos[r] * std::pow(1e6, -2.0 * j / D);
          c = std::cos(angle);
          s = std::sin(angle);
        }
        // angle = 700 * inv_freq computed in fp32 (as HF): |Δangle| <= 700 * 2^-24 ≈ 4e-5.
        EXPECT_NEAR(y[r * cols + h + j], a * c - b * s, 2e-4);
        EXPECT_NEAR(y[r * cols + h + j + D / 2], b * c + a * s, 2e-4);
      }
}

// ---- the GEMM tiles, attention and vector exp behind the CPU Linear (runtime/cpu/gemm.h,
// attention.h): shapes that hit every edge of the 6×16 (6×32 with AVX-512) tiling, K past
// the 256-deep k block, and more rows than one attention query block (64). GPTQ's XᵀX on
// these tiles: tests/quant/test_quant_executor.cpp.

TEST(CpuKernels, LinearLargeRaggedShapesMatchFloat64) {
  ThreadPool pool(2);
  const int64_t limit = cpu::linear_pack_all_limit;
  // limit 0: every task packs its own column tile (the path of a 262k-vocabulary LM head).
  for (int64_t pack_limit : {limit, int64_t(0)})
  for (int rows : {6, 97, 200})
    for (int N : {45, 100}) {
      const int K = 300;
      auto x = random(size_t(rows) * K, 11), w0 = random(size_t(N) * K, 12), w1 = random(size_t(N) * K, 13);
      auto r = random(size_t(rows) * N, 14);
      for (Epilogue ep : {Epilogue::None, Epilogue::ResidualAdd, Epilogue::GeluTanhGateUp}) {
        cpu::linear_pack_all_limit = pack_limit;
        std::vector<float> y = r;  // ResidualAdd in place (y aliases the residual)
        cpu::linear(pool, x.data(), rows, K, w0.data(), w1.data(), N, y.data(), y.data(), ep);
        const std::vector<double> ref = linear64(x, w0, w1, r, rows, K, N, ep);
        // One fp32 FMA chain of 300 N(0,1) products per output: relative error ~√300·6e-8
        // ≈ 1e-6, nmse ~1e-12; 1e-10 still catches any misplaced tile (nmse ~1).
        EXPECT_LT(nmse(y, ref), 1e-10) << "rows " << rows << " N " << N << " epilogue " << int(ep)
                                       << " pack limit " << pack_limit;
      }
    }
  cpu::linear_pack_all_limit = limit;
}

TEST(CpuKernels, GeluAndExpMatchFloat64) {
  std::vector<float> g, u;
  for (float v = -20.f; v <= 12.f; v += 0.01f) {
    g.push_back(v);
    u.push_back(1.f + 0.1f * v);
  }
  std::vector<float> y(g.size());
  cpu::gelu_tanh_mul(g.data(), u.data(), y.data(), int64_t(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    // 0.5x(1 + tanh z) written as x / (1 + e^(−2z)): same function, but float64 tanh
    // rounds to −1 for z < −18.4 and would make the reference 0 where the value is not.
    const double x = g[i], z = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
    const double ref = x / (1 + std::exp(-2 * z)) * double(u[i]);
    // e^y is as exact as its argument: the ~3 fp32 roundings in y = −2z cost |y|·2⁻²⁴ each
    // (relative), the exp polynomial and the rest a few ulp: (|2z| + 5)·2e-7 relative;
    // 1e-30 absolute where e^(−2z) passes fp32's range (the result is then < 1e-30).
    EXPECT_LE(std::abs(y[i] - ref), (std::abs(2 * z) + 5) * 2e-7 * std::abs(ref) + 1e-30) << "x = " << g[i];
  }
  std::vector<float> p;
  for (float v = -87.f; v <= 0.f; v += 0.37f) p.push_back(v);
  const std::vector<float> p0 = p;
  const float shift = -1.5f;
  const float sum = cpu::exp_shift_sum(p.data(), int64_t(p.size()), shift);
  double ref_sum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = std::exp(double(p0[i]) - shift);
    ref_sum += e;
    EXPECT_LE(std::abs(p[i] - e), 1e-6 * e) << "x = " << p0[i];
  }
  EXPECT_LE(std::abs(sum - ref_sum), 1e-6 * ref_sum);
}

TEST(CpuKernels, AttentionMatchesFloat64AcrossBlocksWindowsAndCachedKeys) {
  // Two sequences in one batch: 70 prompt rows at positions 0..69 (two query blocks) and
  // 3 rows at positions 40..42 of a sequence whose keys 0..39 are already cached.
  // 4 query heads over 2 KV heads (GQA), head_dim 72 (one 64-wide register block + 8).
  const int Hq = 4, Hkv = 2, D = 72, max_pos = 80;
  g4c::runtime::BatchDesc b;
  std::vector<int32_t> t0(70, 5), t1(3, 5);
  b.add_sequence(t0.data(), 70, 0, 0, nullptr, false, false);
  b.add_sequence(t1.data(), 3, 40, 1, nullptr, false, false);
  const int T = b.num_tokens();
  auto K = random(size_t(2) * max_pos * Hkv * D, 17), V = random(size_t(2) * max_pos * Hkv * D, 18);
  auto q = random(size_t(T) * Hq * D, 19);
  cpu::KvRows kv{K.data(), V.data(), [&](int seq, int pos) { return size_t(seq * max_pos + pos) * Hkv * D; }};
  ThreadPool pool(2);
  for (int window : {0, 16}) {
    const float scale = 0.125f;
    std::vector<float> o(size_t(T) * Hq * D);
    cpu::attention(pool, b, q.data(), o.data(), Hq, Hkv, D, window, scale, kv);
    std::vector<double> ref(o.size());
    for (int r = 0; r < T; ++r)
      for (int h = 0; h < Hq; ++h) {
        const int seq = b.seq_of_row[r], t = b.positions[r], g = h / (Hq / Hkv);
        const int lo = window > 0 ? std::max(0, t - window + 1) : 0;
        std::vector<double> s;
        double mx = -1e300, sum = 0;
        for (int j = lo; j <= t; ++j) {
          double d = 0;
          for (int e = 0; e < D; ++e) d += double(q[(size_t(r) * Hq + h) * D + e]) * K[kv.index(seq, j) + g * D + e];
          s.push_back(d * scale);
          mx = std::max(mx, s.back());
        }
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int e = 0; e < D; ++e) {
          double acc = 0;
          for (int j = lo; j <= t; ++j) acc += s[j - lo] * V[kv.index(seq, j) + g * D + e];
          ref[(size_t(r) * Hq + h) * D + e] = acc / sum;
        }
      }
    // fp32 dot products of 72 terms and an fp32 softmax: relative errors ~1e-6, nmse
    // ~1e-12; a wrong window edge or KV head changes outputs by O(1).
    EXPECT_LT(nmse(o, ref), 1e-10) << "window " << window;
  }
}
