// QuantEase coordinate descent on GPTQ's codes (passes/quant/quantease.h) on hand-sized layers:
// the refined objective is at most GPTQ's, and equals a brute-force float64 coordinate descent
// written here (every one of the 16 codes tried at each column, the whole objective recomputed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "passes/quant/gptq.h"
#include "passes/quant/quantease.h"
#include "passes/quant/quantizer.h"

using namespace g4c::quant;

namespace {

struct Layer {
  int64_t rows, n, out;
  std::vector<float> X, W;
};

// Correlated inputs (a few shared factors) with a spread of column scales, as in real layers.
Layer make_layer(int64_t rows, int64_t n, int64_t out, uint32_t seed) {
  Layer L{rows, n, out, std::vector<float>(size_t(rows * n)), std::vector<float>(size_t(out * n))};
  std::mt19937 rng(seed);
  std::normal_distribution<float> N(0.f, 1.f);
  const int64_t factors = 6;
  std::vector<float> mix(static_cast<size_t>(factors * n)), colscale(static_cast<size_t>(n));
  for (auto& v : mix) v = N(rng);
  for (int64_t j = 0; j < n; ++j) colscale[j] = std::exp(0.7f * N(rng));
  for (int64_t r = 0; r < rows; ++r) {
    float f[factors];
    for (auto& v : f) v = N(rng);
    for (int64_t j = 0; j < n; ++j) {
      float v = 0.3f * N(rng);
      for (int64_t k = 0; k < factors; ++k) v += f[k] * mix[k * n + j];
      L.X[r * n + j] = v * colscale[j];
    }
  }
  for (auto& v : L.W) v = 0.05f * N(rng);
  return L;
}

std::vector<double> hessian64(const Layer& L) {
  std::vector<double> H(size_t(L.n * L.n), 0.0);
  for (int64_t r = 0; r < L.rows; ++r)
    for (int64_t i = 0; i < L.n; ++i)
      for (int64_t j = 0; j < L.n; ++j) H[i * L.n + j] += 2.0 * double(L.X[r * L.n + i]) * double(L.X[r * L.n + j]);
  return H;
}

// ½·eᵀ·Hd·e of one row (e = w − ŵ), float64, columns in their own order.
double row_objective(const std::vector<double>& Hd, int64_t n, const std::vector<double>& e) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k) s += e[i] * Hd[i * n + k] * e[k];
  return 0.5 * s;
}

// Brute-force coordinate descent: per row, per sweep, columns in `order`; at each column every
// code 0..15 is tried and the one with the least whole-row objective kept (the current one on ties).
struct RefResult {
  std::vector<uint8_t> codes;
  double before = 0.0, after = 0.0;
};
RefResult reference_cd(const Layer& L, const QuantizedLinear& q0, const std::vector<double>& H, double damp,
                       const std::vector<int64_t>& order, int sweeps) {
  const int64_t n = L.n;
  std::vector<double> Hd = H;
  double mean = 0.0;
  for (int64_t j = 0; j < n; ++j) mean += H[j * n + j];
  for (int64_t j = 0; j < n; ++j) Hd[j * n + j] += damp * mean / double(n);
  RefResult res;
  res.codes = q0.codes;
  for (int64_t o = 0; o < L.out; ++o) {
    auto deq = [&](int64_t j, int code) {
      const GroupParams p = q0.params(o, j / q0.group_size);
      return double(float(code - p.zero) * p.scale);
    };
    std::vector<double> e(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) e[j] = double(L.W[o * n + j]) - deq(j, res.codes[o * q0.padded_in + j]);
    double obj = row_objective(Hd, n, e);
    res.before += obj;
    for (int s = 0; s < sweeps; ++s) {
      for (const int64_t j : order) {
        uint8_t& code = res.codes[o * q0.padded_in + j];
        int best = code;
        double best_obj = obj;
        for (int c = 0; c < 16; ++c) {
          std::vector<double> e2 = e;
          e2[j] = double(L.W[o * n + j]) - deq(j, c);
          const double v = row_objective(Hd, n, e2);
          if (v < best_obj - 1e-12 * std::fabs(best_obj)) {
            best_obj = v;
            best = c;
          }
        }
        code = uint8_t(best);
        e[j] = double(L.W[o * n + j]) - deq(j, best);
        obj = best_obj;
      }
    }
    res.after += obj;
  }
  return res;
}

struct Case {
  int64_t n;
  int G;
  bool sym, act_order;
  int sweeps;
};

class QuantEaseVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(QuantEaseVsReference, LowersGptqObjectiveAndMatchesBruteForce) {
  const Case c = GetParam();
  const Layer L = make_layer(384, c.n, 12, 17 + uint32_t(c.n) + c.G + c.act_order);
  const std::vector<double> H = hessian64(L);
  GptqOptions opt;
  opt.spec = {c.G, c.sym};
  opt.act_order = c.act_order;
  const GptqResult g = gptq_quantize(L.W.data(), L.out, L.n, H, opt);  // GPTQ alone
  opt.quantease_sweeps = c.sweeps;
  const PreparedHessian P = prepare_hessian(H, L.n, opt);
  const GptqResult r = gptq_quantize(L.W.data(), L.out, L.n, P, opt);
  // The same GPTQ solve underneath, then the refinement.
  EXPECT_EQ(r.gptq_loss, g.predicted_loss);
  EXPECT_LE(r.predicted_loss, r.gptq_loss);
  EXPECT_LT(r.predicted_loss, r.gptq_loss) << "the refinement should find something on correlated inputs";
  EXPECT_GT(r.quantease_changed, 0);
  // Scales and zeros untouched; every code a nibble.
  EXPECT_EQ(r.q.scales, g.q.scales);
  EXPECT_EQ(r.q.zeros, g.q.zeros);
  for (const uint8_t code : r.q.codes) EXPECT_LE(code, 15);

  const RefResult ref = reference_cd(L, g.q, H, opt.damp, P.perm, c.sweeps);
  EXPECT_NEAR(ref.before, r.gptq_loss, 1e-6 * ref.before);  // GPTQ sums its loss column by column
  EXPECT_NEAR(ref.after, r.predicted_loss, 1e-9 * ref.after);
  int64_t mismatched = 0;
  for (size_t i = 0; i < ref.codes.size(); ++i) mismatched += ref.codes[i] != r.q.codes[i];
  EXPECT_EQ(mismatched, 0) << "of " << ref.codes.size();
}

INSTANTIATE_TEST_SUITE_P(Quant, QuantEaseVsReference,
                         ::testing::Values(Case{64, 32, false, false, 1}, Case{64, 32, false, false, 5},
                                           Case{64, 32, true, false, 3}, Case{96, 32, false, true, 5},
                                           Case{80, 32, true, true, 2}),  // 80: padded to 96
                         [](const ::testing::TestParamInfo<Case>& i) {
                           const Case& c = i.param;
                           return "in" + std::to_string(c.n) + "_g" + std::to_string(c.G) + (c.sym ? "_sym" : "_asym") +
                                  (c.act_order ? "_act" : "") + "_s" + std::to_string(c.sweeps);
                         });

TEST(QuantEase, DeadColumnsStayZeroAndObjectiveNeverRises) {
  Layer L = make_layer(256, 64, 8, 5);
  for (int64_t r = 0; r < L.rows; ++r) L.X[r * L.n + 9] = 0.f;  // column 9 never sees input
  const std::vector<double> H = hessian64(L);
  GptqOptions opt;
  opt.spec = {32, false};
  opt.quantease_sweeps = 4;
  const GptqResult r = gptq_quantize(L.W.data(), L.out, L.n, H, opt);
  EXPECT_EQ(r.dead_columns, 1);
  EXPECT_LE(r.predicted_loss, r.gptq_loss);
  for (int64_t o = 0; o < L.out; ++o) EXPECT_EQ(r.q.dequant(o, 9), 0.f);
}

TEST(QuantEase, NeedsTheKeptHessian) {
  const Layer L = make_layer(64, 32, 4, 3);
  GptqOptions opt;
  opt.spec = {32, true};
  const PreparedHessian P = prepare_hessian(hessian64(L), L.n, opt);  // quantease_sweeps 0: no P.h
  QuantizedLinear q = quantize_rtn(L.W.data(), L.out, L.n, opt.spec);
  EXPECT_ANY_THROW(quantease_refine(L.W.data(), L.out, L.n, P, 2, 1, q));
}

}  // namespace
