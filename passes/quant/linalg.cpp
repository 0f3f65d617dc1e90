#include "passes/quant/linalg.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "models/target_clones.h"

namespace g4c::quant {

namespace detail {

typedef float v8f __attribute__((vector_size(32), aligned(4)));

// One panel: C[m0..m1, n0..n1) += A(m, k0..k1) · B[k0..k1, n). Register tile 4×16
// in the body, scalar code for the ragged edges. Compiled twice (AVX2+FMA and the
// baseline) and dispatched by the loader (GNU ifunc).
G4C_TARGET_CLONES("arch=x86-64-v3", "default") void sgemm_panel(
    int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t k0, int64_t k1, const float* A, int64_t a_sm,
    int64_t a_sk, const float* B, int64_t ldb, float* C, int64_t ldc) {
  int64_t m = m0;
  const int64_t n_vec_end = n0 + (n1 - n0) / 16 * 16;
  for (; m + 4 <= m1; m += 4) {
    for (int64_t n = n0; n < n_vec_end; n += 16) {
      v8f c[4][2];
      for (int r = 0; r < 4; ++r) {
        c[r][0] = *reinterpret_cast<const v8f*>(C + (m + r) * ldc + n);
        c[r][1] = *reinterpret_cast<const v8f*>(C + (m + r) * ldc + n + 8);
      }
      const float* a0 = A + m * a_sm;
      for (int64_t k = k0; k < k1; ++k) {
        const v8f b0 = *reinterpret_cast<const v8f*>(B + k * ldb + n);
        const v8f b1 = *reinterpret_cast<const v8f*>(B + k * ldb + n + 8);
        const float* ak = a0 + k * a_sk;
        for (int r = 0; r < 4; ++r) {
          const float a = ak[r * a_sm];
          c[r][0] += a * b0;
          c[r][1] += a * b1;
        }
      }
      for (int r = 0; r < 4; ++r) {
        *reinterpret_cast<v8f*>(C + (m + r) * ldc + n) = c[r][0];
        *reinterpret_cast<v8f*>(C + (m + r) * ldc + n + 8) = c[r][1];
      }
    }
    for (int r = 0; r < 4; ++r)
      for (int64_t k = k0; k < k1; ++k) {
        const float a = A[(m + r) * a_sm + k * a_sk];
        for (int64_t n = n_vec_end; n < n1; ++n) C[(m + r) * ldc + n] += a * B[k * ldb + n];
      }
  }
  for (; m < m1; ++m)
    for (int64_t k = k0; k < k1; ++k) {
      const float a = A[m * a_sm + k * a_sk];
      for (int64_t n = n0; n < n1; ++n) C[m * ldc + n] += a * B[k * ldb + n];
    }
}

G4C_TARGET_CLONES("arch=x86-64-v3", "default") void daxpy_neg(int64_t n, double a, const double* x,
                                                                            double* y) {
  for (int64_t i = 0; i < n; ++i) y[i] -= a * x[i];
}

}  // namespace detail

void sgemm_acc(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_sm, int64_t a_sk, const float* B,
               int64_t ldb, float* C, int64_t ldc, int threads) {
  if (M <= 0 || N <= 0 || K <= 0) return;
  constexpr int64_t KB = 256, NB = 512;
  auto rows = [&](int64_t r0, int64_t r1) {
    for (int64_t n0 = 0; n0 < N; n0 += NB)
      for (int64_t k0 = 0; k0 < K; k0 += KB)
        detail::sgemm_panel(r0, r1, n0, std::min(N, n0 + NB), k0, std::min(K, k0 + KB), A, a_sm, a_sk, B, ldb, C,
                            ldc);
  };
  if (threads <= 1 || M < 8 || double(M) * N * K < 4e6) {
    rows(0, M);
    return;
  }
  parallel_ranges(M, int(std::min<int64_t>(threads, M / 4)), 4, rows);
}

void parallel_ranges(int64_t n, int threads, int64_t align, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  align = std::max<int64_t>(1, align);
  threads = std::max(1, threads);
  const int64_t per = ((n + threads - 1) / threads + align - 1) / align * align;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t b = 0; b < n; b += per) ranges.emplace_back(b, std::min(n, b + per));
  std::vector<std::exception_ptr> errors(ranges.size());
  auto guarded = [&](size_t r) {
    try {
      fn(ranges[r].first, ranges[r].second);
    } catch (...) {
      errors[r] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  try {
    for (size_t r = 1; r < ranges.size(); ++r) pool.emplace_back(guarded, r);
  } catch (...) {
    for (auto& th : pool) th.join();
    throw;
  }
  guarded(0);
  for (auto& th : pool) th.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Works on U = Lᵀ stored row-major (upper), so every update is a contiguous axpy.
bool cholesky_lower(double* A, int64_t n) {
  std::vector<double> U(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) U[i * n + j] = A[j * n + i];
  for (int64_t k = 0; k < n; ++k) {
    double d = U[k * n + k];
    if (!(d > 0.0) || !std::isfinite(d)) return false;
    d = std::sqrt(d);
    double* rk = U.data() + k * n;
    rk[k] = d;
    for (int64_t j = k + 1; j < n; ++j) rk[j] /= d;
    for (int64_t i = k + 1; i < n; ++i) detail::daxpy_neg(n - i, rk[i], rk + i, U.data() + i * n + i);
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) A[i * n + j] = j <= i ? U[j * n + i] : 0.0;
  return true;
}

// With J the reversal permutation: if J·H·J = L̃·L̃ᵀ then H⁻¹ = Uᵀ·U with U = J·L̃⁻¹·J
// (upper triangular, positive diagonal) — one Cholesky and one triangular inverse
// instead of Cholesky, inverse, then Cholesky again.
bool upper_cholesky_of_inverse(const double* H, int64_t n, double* Out) {
  std::vector<double> Hr(size_t(n * n), 0.0);  // J·H·J, lower triangle
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) Hr[i * n + j] = H[(n - 1 - i) * n + (n - 1 - j)];
  if (!cholesky_lower(Hr.data(), n)) return false;
  // Inverse of lower-triangular Lt = Hr, column by column into Inv (lower).
  // Forward substitution on rows: Inv row i = (e_i − Σ_{k<i} Lt[i][k]·Inv row k) / Lt[i][i].
  std::vector<double> Inv(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double* ri = Inv.data() + i * n;
    ri[i] = 1.0;
    for (int64_t k = 0; k < i; ++k) {
      double c = Hr[i * n + k];
      if (c != 0.0) detail::daxpy_neg(k + 1, c, Inv.data() + k * n, ri);
    }
    double d = Hr[i * n + i];
    for (int64_t j = 0; j <= i; ++j) ri[j] /= d;
  }
  // U = J·Inv·J: U[a][b] = Inv[n-1-a][n-1-b].
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < n; ++b) Out[a * n + b] = Inv[(n - 1 - a) * n + (n - 1 - b)];
  return true;
}

}  // namespace g4c::quant
