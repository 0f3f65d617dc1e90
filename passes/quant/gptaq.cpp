#include "passes/quant/gptaq.h"

#include <algorithm>
#include <string>

#include "models/error.h"
#include "passes/quant/linalg.h"

namespace g4c::quant {

CrossGramAccumulator::CrossGramAccumulator(int64_t n)
    : n_(n), G_(size_t(n * n), 0.0), H_(size_t(n * n), 0.0), pg_(size_t(n * n)), ph_(size_t(n * n)) {}

void CrossGramAccumulator::add(const float* Xref, const float* X, int64_t rows, int64_t ld, int threads) {
  if (rows <= 0) return;
  if (ld < n_) throw Error("gptaq: input has leading dimension " + std::to_string(ld) + " < " + std::to_string(n_));
  constexpr int64_t kRowsPerPartial = 8192;  // as HessianAccumulator
  for (int64_t r0 = 0; r0 < rows; r0 += kRowsPerPartial) {
    const int64_t nr = std::min(kRowsPerPartial, rows - r0);
    std::fill(pg_.begin(), pg_.end(), 0.f);
    std::fill(ph_.begin(), ph_.end(), 0.f);
    // pg[i, j] += Σ_r Xref[r, i]·X[r, j]; ph[i, j] += Σ_r X[r, i]·X[r, j] (A read transposed).
    sgemm_acc(n_, n_, nr, Xref + r0 * ld, 1, ld, X + r0 * ld, ld, pg_.data(), n_, threads);
    sgemm_acc(n_, n_, nr, X + r0 * ld, 1, ld, X + r0 * ld, ld, ph_.data(), n_, threads);
    for (size_t i = 0; i < G_.size(); ++i) {
      G_[i] += double(pg_[i]);
      H_[i] += double(ph_[i]);
    }
  }
  rows_ += rows;
}

std::vector<float> gptaq_target(const float* W, int64_t out, int64_t n, const std::vector<double>& G,
                                const std::vector<double>& H, double damp, int threads) {
  if (int64_t(G.size()) != n * n || int64_t(H.size()) != n * n)
    throw Error("gptaq: cross and Gram matrices must be " + std::to_string(n) + "²");
  std::vector<double> L = H;
  double mean_diag = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    if (L[j * n + j] == 0.0) L[j * n + j] = 1.0;
    mean_diag += L[j * n + j];
  }
  const double lambda = damp * mean_diag / double(n);
  for (int64_t j = 0; j < n; ++j) L[j * n + j] += lambda;
  if (!cholesky_lower(L.data(), n))
    throw Error("gptaq: the damped Gram matrix (" + std::to_string(n) + "×" + std::to_string(n) +
                ") is not positive definite; raise --damp");
  std::vector<double> R(size_t(n * n));
  for (size_t i = 0; i < R.size(); ++i) R[i] = G[i] - H[i];
  std::vector<float> Wt(W, W + out * n);
  parallel_ranges(out, std::max(1, threads), 1, [&](int64_t o0, int64_t o1) {
    std::vector<double> v(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (int64_t o = o0; o < o1; ++o) {
      const float* w = W + o * n;
      // v = w·R, then y·(H + λI) = v: L·z = vᵀ, Lᵀ·yᵀ = z.
      std::fill(v.begin(), v.end(), 0.0);
      for (int64_t i = 0; i < n; ++i) {
        const double wi = w[i];
        if (wi == 0.0) continue;
        const double* Ri = R.data() + i * n;
        for (int64_t j = 0; j < n; ++j) v[j] += wi * Ri[j];
      }
      for (int64_t i = 0; i < n; ++i) {
        double s = v[i];
        for (int64_t k = 0; k < i; ++k) s -= L[i * n + k] * y[k];
        y[i] = s / L[i * n + i];
      }
      for (int64_t i = n - 1; i >= 0; --i) {
        double s = y[i];
        for (int64_t k = i + 1; k < n; ++k) s -= L[k * n + i] * y[k];
        y[i] = s / L[i * n + i];
      }
      for (int64_t j = 0; j < n; ++j) Wt[o * n + j] = float(double(w[j]) + y[j]);
    }
  });
  return Wt;
}

}  // namespace g4c::quant
