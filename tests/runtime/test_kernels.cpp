// CPU kernel math against float64 references on awkward shapes (K not a multiple of the
// 8 lanes, row counts not a multiple of the 4-row blocking), as every backend's kernels
// are checked (STYLE.md: normalised error on random inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

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

}  // namespace

TEST(CpuKernels, LinearAllEpiloguesMatchFloat64) {
  cpu::ThreadPool pool(2);
  for (int rows : {1, 3, 4, 7}) {
    const int K = 37, N = 13;
    auto x = random(size_t(rows) * K, 1), w0 = random(size_t(N) * K, 2), w1 = random(size_t(N) * K, 3);
    auto r = random(size_t(rows) * N, 4);
    for (Epilogue ep : {Epilogue::None, Epilogue::ResidualAdd, Epilogue::GeluTanhGateUp}) {
      std::vector<float> y = r;  // ResidualAdd in place (y aliases the residual)
      cpu::linear(pool, x.data(), rows, K, w0.data(), w1.data(), N, y.data(), y.data(), ep);
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
