#include "passes/quant/gptq.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>

#include "models/error.h"
#include "passes/quant/linalg.h"
#include "passes/quant/quantease.h"

namespace g4c::quant {

void HessianAccumulator::reset(int64_t n) {
  n_ = n;
  rows_ = 0;
  H_.assign(size_t(n * n), 0.0);
  partial_.assign(size_t(n * n), 0.f);
}

void HessianAccumulator::add(const float* X, int64_t rows, int64_t ld, int threads, const GramUpdate& gram) {
  if (rows <= 0) return;
  if (ld < n_) throw Error("gptq: Hessian input has leading dimension " + std::to_string(ld) + " < " + std::to_string(n_));
  // fp32 partial sums over at most kRowsPerPartial rows, float64 beyond, so the rounding
  // of H does not grow with the calibration set (a chain of 8192 fp32 FMAs: ~√8192·2⁻²⁴
  // ≈ 5e-6 relative, typical). Shorter chains (1024 rows) cost ~5 s more on the tiny
  // model's 2-core run and moved its GPTQ NLL by 1e-5, well inside the ±3e-4 that any
  // fp32-level change of the calibration forward causes (README, Quantization).
  constexpr int64_t kRowsPerPartial = 8192;
  for (int64_t r0 = 0; r0 < rows; r0 += kRowsPerPartial) {
    const int64_t nr = std::min(kRowsPerPartial, rows - r0);
    const float* Xr = X + r0 * ld;
    std::fill(partial_.begin(), partial_.end(), 0.f);
    // Upper triangle only, in row blocks: partial[i0.., j ≥ i0] += X[:, i]ᵀ·X[:, j].
    constexpr int64_t RB = 64;
    if (gram) gram(Xr, nr, n_, ld, partial_.data());
    for (int64_t i0 = 0; i0 < n_ && !gram; i0 += RB) {
      int64_t mi = std::min(RB, n_ - i0);
      sgemm_acc(mi, n_ - i0, nr, Xr + i0, /*a_sm=*/1, /*a_sk=*/ld, Xr + i0, ld, partial_.data() + i0 * n_ + i0, n_,
                threads);
    }
    for (int64_t i = 0; i < n_; ++i)
      for (int64_t j = i; j < n_; ++j) {
        double v = 2.0 * double(partial_[i * n_ + j]);
        H_[i * n_ + j] += v;
        if (j != i) H_[j * n_ + i] += v;
      }
  }
  rows_ += rows;
}

PreparedHessian prepare_hessian(const std::vector<double>& Hin, int64_t n, const GptqOptions& opt) {
  if (int64_t(Hin.size()) != n * n)
    throw Error("gptq: Hessian is " + std::to_string(Hin.size()) + " values, expected " + std::to_string(n) + "²");
  PreparedHessian P;
  P.n = n;
  std::vector<double> H = Hin;
  P.dead.assign(static_cast<size_t>(n), 0);
  for (int64_t j = 0; j < n; ++j)
    if (H[j * n + j] == 0.0) {
      ++P.dead_columns;
      P.dead[j] = 1;
      H[j * n + j] = 1.0;
    }
  P.perm.resize(static_cast<size_t>(n));
  std::iota(P.perm.begin(), P.perm.end(), 0);
  if (opt.act_order) {
    std::stable_sort(P.perm.begin(), P.perm.end(),
                     [&](int64_t a, int64_t b) { return H[a * n + a] > H[b * n + b]; });
    std::vector<double> Hp(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) Hp[i * n + j] = H[P.perm[i] * n + P.perm[j]];
    H.swap(Hp);
  }
  double mean_diag = 0.0;
  for (int64_t j = 0; j < n; ++j) mean_diag += H[j * n + j];
  mean_diag /= double(n);
  P.damp_value = opt.damp * mean_diag;
  for (int64_t j = 0; j < n; ++j) H[j * n + j] += P.damp_value;
  if (opt.quantease_sweeps > 0) P.h = H;
  P.hinv.resize(static_cast<size_t>(n * n));
  if (!upper_cholesky_of_inverse(H.data(), n, P.hinv.data()))
    throw Error("gptq: the damped Hessian (" + std::to_string(n) + "×" + std::to_string(n) + ", damp " +
                std::to_string(opt.damp) + ") is not positive definite; raise --damp");
  return P;
}

GptqResult gptq_quantize(const float* W, int64_t out, int64_t in, const std::vector<double>& H,
                         const GptqOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  GptqResult r = gptq_quantize(W, out, in, prepare_hessian(H, in, opt), opt);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

GptqResult gptq_quantize(const float* W, int64_t out, int64_t in, const PreparedHessian& P, const GptqOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  const int64_t n = in, G = opt.spec.group_size;
  if (P.n != n) throw Error("gptq: Hessian is " + std::to_string(P.n) + "² for a Linear with " + std::to_string(n) + " inputs");
  if (opt.block_size <= 0) throw Error("gptq: block size must be positive");
  GptqResult res;
  QuantizedLinear& q = res.q;
  q.out = out;
  q.in = in;
  q.group_size = opt.spec.group_size;
  q.symmetric = opt.spec.symmetric;
  q.padded_in = padded_in_features(in, opt.spec.group_size);
  const int64_t ng = q.groups();
  q.codes.assign(size_t(out * q.padded_in), 0);
  q.scales.assign(size_t(out * ng), 0.f);
  q.zeros.assign(size_t(out * ng), 0);
  res.dead_columns = P.dead_columns;
  res.damp_value = P.damp_value;
  const std::vector<int64_t>& perm = P.perm;
  const std::vector<double>& Hinv = P.hinv;

  std::vector<double> Wd(size_t(out * n));
  for (int64_t k = 0; k < out * n; ++k) Wd[k] = W[k];
  for (int64_t j = 0; j < n; ++j)
    if (P.dead[j])
      for (int64_t o = 0; o < out; ++o) Wd[o * n + j] = 0.0;
  auto set_params = [&](int64_t o, int64_t g, const GroupParams& p) {
    q.scales[o * ng + g] = p.scale;
    q.zeros[o * ng + g] = uint8_t(p.zero);
  };
  const bool fixed = static_groups(opt);
  if (fixed) {
    parallel_ranges(out, int(std::clamp<int64_t>(opt.threads, 1, std::max<int64_t>(1, out / 16))), 1,
                    [&](int64_t o0, int64_t o1) {
                      for (int64_t o = o0; o < o1; ++o)
                        for (int64_t g = 0; g < ng; ++g) {
                          const int64_t c0 = g * G;
                          set_params(o, g,
                                     group_params(Wd.data() + o * n + c0, std::min(G, n - c0), 1, q.symmetric, opt.clip));
                        }
                    });
  }
  if (opt.act_order) {
    std::vector<double> Wp(size_t(out * n));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t j = 0; j < n; ++j) Wp[o * n + j] = Wd[o * n + perm[j]];
    Wd.swap(Wp);
  }

  // Output rows are independent given Hinv (GPTQ couples columns, never rows), so they
  // are solved in ranges on `threads` threads; each row's loss is kept and summed in row
  // order, so codes and objective do not depend on the thread count.
  const int64_t B = opt.block_size;
  std::vector<double> row_loss(static_cast<size_t>(out), 0.0);
  auto solve_rows = [&](int64_t o0, int64_t o1) {
    std::vector<double> E(size_t((o1 - o0) * B));
    for (int64_t i1 = 0; i1 < n; i1 += B) {
      const int64_t i2 = std::min(i1 + B, n), bw = i2 - i1;
      for (int64_t i = i1; i < i2; ++i) {
        const int64_t col = perm[i];
        if (!fixed && i % G == 0) {
          for (int64_t o = o0; o < o1; ++o)
            set_params(o, i / G, group_params(Wd.data() + o * n + i, std::min(G, n - i), 1, q.symmetric, opt.clip));
        }
        const double d = Hinv[i * n + i];
        const double* hrow = Hinv.data() + i * n;
        for (int64_t o = o0; o < o1; ++o) {
          double* wrow = Wd.data() + o * n;
          const GroupParams p = q.params(o, col / G);
          const float w = float(wrow[i]);
          const int code = quantize_code(w, p);
          q.codes[o * q.padded_in + col] = uint8_t(code);
          const double err = double(w) - double(dequantize_code(code, p));
          const double e = err / d;
          row_loss[size_t(o)] += err * err / (d * d) / 2.0;
          for (int64_t j = i + 1; j < i2; ++j) wrow[j] -= e * hrow[j];
          E[(o - o0) * B + (i - i1)] = e;
        }
      }
      if (i2 < n) {
        for (int64_t o = o0; o < o1; ++o) {
          double* wrow = Wd.data() + o * n + i2;
          for (int64_t k = 0; k < bw; ++k) {
            const double e = E[(o - o0) * B + k];
            const double* hrow = Hinv.data() + (i1 + k) * n + i2;
            for (int64_t j = 0; j < n - i2; ++j) wrow[j] -= e * hrow[j];
          }
        }
      }
    }
  };
  parallel_ranges(out, int(std::clamp<int64_t>(opt.threads, 1, std::max<int64_t>(1, out / 16))), 1, solve_rows);
  double loss = 0.0;
  for (const double l : row_loss) loss += l;
  // Padding columns decode to 0.
  for (int64_t o = 0; o < out; ++o)
    for (int64_t c = in; c < q.padded_in; ++c) q.codes[o * q.padded_in + c] = q.zeros[o * ng + c / G];
  res.predicted_loss = res.gptq_loss = loss;
  if (opt.quantease_sweeps > 0) {
    const QuantEaseStats qe = quantease_refine(W, out, in, P, opt.quantease_sweeps, opt.threads, q);
    res.predicted_loss = qe.after;
    res.quantease_changed = qe.changed;
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace g4c::quant
