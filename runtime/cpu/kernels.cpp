// CPU kernel math (see kernels.h). Written so that GCC vectorises the inner loops
// (explicit lane accumulators instead of a single serial sum).
#include "runtime/cpu/kernels.h"

#include <cmath>
#include <vector>

namespace g4c::runtime::cpu {
namespace {

constexpr int kLanes = 8;

// Dot products of `nr` (1..4) x rows with one weight row, fp32 lane accumulators.
template <int NR>
inline void dot_rows(const float* const* xs, const float* w, int K, float* out) {
  float acc[NR][kLanes] = {};
  int k = 0;
  for (; k + kLanes <= K; k += kLanes)
    for (int r = 0; r < NR; ++r)
      for (int l = 0; l < kLanes; ++l) acc[r][l] += xs[r][k + l] * w[k + l];
  for (int r = 0; r < NR; ++r) {
    float s = 0;
    for (int l = 0; l < kLanes; ++l) s += acc[r][l];
    for (int kk = k; kk < K; ++kk) s += xs[r][kk] * w[kk];
    out[r] = s;
  }
}

// out[t] = x[t] · w for all rows t.
inline void dot_all_rows(const float* x, int rows, int K, const float* w, float* out) {
  int t = 0;
  for (; t + 4 <= rows; t += 4) {
    const float* xs[4] = {x + size_t(t) * K, x + size_t(t + 1) * K, x + size_t(t + 2) * K, x + size_t(t + 3) * K};
    dot_rows<4>(xs, w, K, out + t);
  }
  for (; t < rows; ++t) {
    const float* xs[1] = {x + size_t(t) * K};
    dot_rows<1>(xs, w, K, out + t);
  }
}

}  // namespace

float gelu_tanh(float x) {
  const float c = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
}

void linear(ThreadPool& pool, const float* x, int rows, int K, const float* w0, const float* w1, int N,
            const float* residual, float* y, plan::fb::Epilogue epilogue) {
  using plan::fb::Epilogue;
  // Parallel over output features: each task owns whole columns of y, so no two threads
  // write the same element and the result does not depend on the thread count.
  pool.parallel_for(N, 8, [&](int64_t n0, int64_t n1) {
    std::vector<float> a(rows), b(rows);
    for (int64_t n = n0; n < n1; ++n) {
      dot_all_rows(x, rows, K, w0 + size_t(n) * K, a.data());
      if (epilogue == Epilogue::GeluTanhGateUp) {
        dot_all_rows(x, rows, K, w1 + size_t(n) * K, b.data());
        for (int t = 0; t < rows; ++t) y[size_t(t) * N + n] = gelu_tanh(a[t]) * b[t];
      } else if (epilogue == Epilogue::ResidualAdd) {
        for (int t = 0; t < rows; ++t) y[size_t(t) * N + n] = residual[size_t(t) * N + n] + a[t];
      } else {
        for (int t = 0; t < rows; ++t) y[size_t(t) * N + n] = a[t];
      }
    }
  });
}

void rms_norm(const float* x, float* y, int rows, int cols, int norm_dim, const float* w, float eps) {
  for (int r = 0; r < rows; ++r)
    for (int g = 0; g < cols; g += norm_dim) {
      const float* xi = x + size_t(r) * cols + g;
      float* yi = y + size_t(r) * cols + g;
      double ss = 0;
      for (int j = 0; j < norm_dim; ++j) ss += double(xi[j]) * xi[j];
      const float inv = float(1.0 / std::sqrt(ss / norm_dim + eps));
      for (int j = 0; j < norm_dim; ++j) yi[j] = w ? xi[j] * inv * w[j] : xi[j] * inv;
    }
}

void rope(float* x, int rows, int cols, const int32_t* positions, int head_dim, int rotary_pairs, double theta) {
  const int half = head_dim / 2;
  std::vector<float> inv_freq(rotary_pairs), c(rotary_pairs), s(rotary_pairs);
  for (int j = 0; j < rotary_pairs; ++j) inv_freq[j] = float(1.0 / std::pow(theta, 2.0 * j / head_dim));
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < rotary_pairs; ++j) {
      const float angle = float(positions[r]) * inv_freq[j];  // fp32 product, as HF
      c[j] = std::cos(angle);
      s[j] = std::sin(angle);
    }
    for (int h = 0; h < cols; h += head_dim) {
      float* xh = x + size_t(r) * cols + h;
      for (int j = 0; j < rotary_pairs; ++j) {
        const float a = xh[j], b = xh[j + half];
        xh[j] = a * c[j] - b * s[j];
        xh[j + half] = b * c[j] + a * s[j];
      }
    }
  }
}

}  // namespace g4c::runtime::cpu
