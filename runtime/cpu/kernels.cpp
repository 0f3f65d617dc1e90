// CPU kernel math (see kernels.h). Written so that GCC vectorises the inner loops
// (explicit lane accumulators instead of a single serial sum).
#include "runtime/cpu/kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/cpu/gemm.h"

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

void linear(ThreadPool& pool, const float* x, int rows, int K, const float* w0, const float* w1, int N,
            const float* residual, float* y, plan::fb::Epilogue epilogue) {
  using plan::fb::Epilogue;
  if (rows < kGemmMr) {
    // Decode-sized: dot products straight from the weight rows (packing would cost as much
    // as the product). Parallel over output features: each task owns whole columns of y.
    pool.parallel_for(N, 8, [&](int64_t n0, int64_t n1) {
      std::vector<float> a(rows), b(rows);
      for (int64_t n = n0; n < n1; ++n) {
        dot_all_rows(x, rows, K, w0 + size_t(n) * K, a.data());
        if (epilogue == Epilogue::GeluTanhGateUp) {
          dot_all_rows(x, rows, K, w1 + size_t(n) * K, b.data());
          gelu_tanh_mul(a.data(), b.data(), a.data(), rows);  // the GEMM path's GELU, bit for bit
          for (int t = 0; t < rows; ++t) y[size_t(t) * N + n] = a[t];
        } else if (epilogue == Epilogue::ResidualAdd) {
          for (int t = 0; t < rows; ++t) y[size_t(t) * N + n] = residual[size_t(t) * N + n] + a[t];
        } else {
          for (int t = 0; t < rows; ++t) y[size_t(t) * N + n] = a[t];
        }
      }
    });
    return;
  }
  // B panels: each weight packed once per call (a cost of 1/rows of the product), unless
  // it is huge (an LM head over a large vocabulary), when each task packs its own columns.
  constexpr int64_t kRowTile = 16 * kGemmMr, kColTile = 256;
  const int64_t row_tiles = (rows + kRowTile - 1) / kRowTile, col_tiles = (N + kColTile - 1) / kColTile;
  const bool gate_up = epilogue == Epilogue::GeluTanhGateUp;
  const bool pack_all = packed_b_floats(N, K) <= linear_pack_all_limit;
  thread_local std::vector<float> packed_storage[2];  // the calling thread's; workers use `packed`
  float* packed[2] = {nullptr, nullptr};
  if (pack_all) {
    for (int w = 0; w < (gate_up ? 2 : 1); ++w) {
      packed_storage[w].resize(size_t(packed_b_floats(N, K)));
      packed[w] = packed_storage[w].data();
    }
    const int64_t panels = (N + kGemmNr - 1) / kGemmNr;
    pool.parallel_for(panels, 4, [&](int64_t p0, int64_t p1) {
      pack_b({w0, K, 1}, N, K, packed[0], p0, p1);
      if (gate_up) pack_b({w1, K, 1}, N, K, packed[1], p0, p1);
    });
  }
  const float* const ws[2] = {w0, w1};
  // Tiles of kRowTile × kColTile outputs, each computed whole (all of K) by one thread into
  // a local buffer, then the epilogue writes y (which may alias the residual). Tasks walk
  // the columns of one row tile first, so that row tile of x stays in cache.
  pool.parallel_for(row_tiles * col_tiles, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> tile[2], own[2];
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t m0 = task / col_tiles * kRowTile, n0 = task % col_tiles * kColTile;
      const int64_t mb = std::min<int64_t>(kRowTile, rows - m0), nb = std::min<int64_t>(kColTile, N - n0);
      for (int w = 0; w < (gate_up ? 2 : 1); ++w) {
        PanelB b{nullptr, kGemmNr, kGemmNr * int64_t(K)};
        if (pack_all) {
          b.p = packed[w] + n0 / kGemmNr * b.panel_stride;
        } else {
          own[w].resize(size_t(packed_b_floats(nb, K)));
          pack_b({ws[w] + n0 * K, K, 1}, nb, K, own[w].data(), 0, (nb + kGemmNr - 1) / kGemmNr);
          b.p = own[w].data();
        }
        tile[w].resize(size_t(mb * nb));
        gemm_tile({x + m0 * K, K, 1}, b, mb, nb, K, tile[w].data(), nb, false);
      }
      for (int64_t r = 0; r < mb; ++r) {
        float* yr = y + (m0 + r) * N + n0;
        const float* g = &tile[0][size_t(r * nb)];
        if (gate_up) {
          gelu_tanh_mul(g, &tile[1][size_t(r * nb)], yr, nb);
        } else if (epilogue == Epilogue::ResidualAdd) {
          const float* res = residual + (m0 + r) * N + n0;
          for (int64_t j = 0; j < nb; ++j) yr[j] = res[j] + g[j];
        } else {
          std::copy(g, g + nb, yr);
        }
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
