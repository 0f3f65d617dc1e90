// GPTQ (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for
// Generative Pre-trained Transformers") for one Linear, in the lab's INT4 group format.
//
//   H = 2·XᵀX over the calibration inputs X [tokens, in]
//   dead columns (diag H = 0): H_jj = 1, W[:, j] = 0
//   H += damp · mean(diag H) · I
//   Hinv = upper Cholesky factor of H⁻¹
//   columns are quantized in blocks of `block_size`; after each column the error
//   (w − q) / Hinv_jj is fed back into the remaining columns of the block through
//   Hinv's row, and into the later blocks lazily at the end of the block.
//   Group scales/zeros are computed at each group start from the error-updated weights.
//   act_order: columns are visited by decreasing diag H; group parameters then come
//   from the (dead-column-zeroed) weights of each contiguous group before any update
//   ("static groups"), so the checkpoint keeps contiguous groups in column order.
//   clip: each group's range is the MSE-optimal one (quantizer.h ClipSearch), searched where
//   the group's range is taken: at its first column from the error-updated weights, or before
//   the solve from the original weights with act_order.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "passes/quant/quantizer.h"

namespace g4c::quant {

// An fp32 Gram update the caller may supply (tools/ binds the runtime's CPU GEMM):
// C[i·n + j] += Σ_r X[r·ld + i]·X[r·ld + j] for at least every j ≥ i (the upper triangle;
// the lower one may be written too), X being [rows, n] with leading dimension ld.
using GramUpdate = std::function<void(const float* X, int64_t rows, int64_t n, int64_t ld, float* C)>;

// Accumulates H = 2·XᵀX over row blocks of activations (fp32 products per call,
// float64 running sum).
class HessianAccumulator {
 public:
  explicit HessianAccumulator(int64_t n = 0) { reset(n); }
  void reset(int64_t n);
  // X is [rows, n] row-major with leading dimension ld (≥ n).
  // Uses `gram` when given, else sgemm_acc (linalg.h) on `threads` threads.
  void add(const float* X, int64_t rows, int64_t ld, int threads = 1, const GramUpdate& gram = {});
  int64_t n() const { return n_; }
  int64_t rows() const { return rows_; }
  // Full symmetric n×n matrix.
  const std::vector<double>& hessian() const { return H_; }

 private:
  int64_t n_ = 0, rows_ = 0;
  std::vector<double> H_;
  std::vector<float> partial_;
};

struct GptqOptions {
  QuantSpec spec;
  double damp = 0.01;
  int block_size = 128;
  bool act_order = false;
  ClipSearch clip;  // disabled: the lab's min/max range
  int threads = 1;  // output rows solved in parallel (results do not depend on it)
  // > 0: after the solve, that many sweeps (at most) of QuantEase coordinate descent on the codes,
  // scales/zeros fixed (passes/quant/quantease.h); host solve only.
  int quantease_sweeps = 0;
};

// Group parameters are fixed before the solve (from the original weights) with act_order, whose
// column order crosses groups; otherwise each group's (clip-searched) range is taken when the
// solve reaches its first column, from the values the earlier columns' errors updated.
inline bool static_groups(const GptqOptions& o) { return o.act_order; }

struct GptqResult {
  QuantizedLinear q;
  int64_t dead_columns = 0;
  // The GPTQ objective Σ_j ‖w_j − q_j‖² / (2·Hinv_jj²) — the increase of
  // ½·tr((W−Q)·H_damped·(W−Q)ᵀ), i.e. ‖X·(W−Q)ᵀ‖² plus the damping term, for H = 2XᵀX.
  // With quantease_sweeps, the objective of the refined codes.
  double predicted_loss = 0.0;
  double gptq_loss = 0.0;         // the same objective of GPTQ's own codes (before any refinement)
  int64_t quantease_changed = 0;  // codes the refinement changed
  double damp_value = 0.0;  // damp · mean(diag H) actually added
  double seconds = 0.0;
};

// W is row-major [out, in] (fp32); H is the in×in Hessian (row-major float64).
// Throws g4c::Error if the damped Hessian is not positive definite.
GptqResult gptq_quantize(const float* W, int64_t out, int64_t in, const std::vector<double>& H,
                         const GptqOptions& opt);

// The part of GPTQ that depends only on H and the options (dead columns, column
// order, damping, Hinv): Linears fed the same input (q/k/v, gate/up) share it.
struct PreparedHessian {
  int64_t n = 0;
  std::vector<char> dead;      // [n]
  std::vector<int64_t> perm;   // visiting order (identity without act-order)
  std::vector<double> hinv;    // upper Cholesky factor of the damped, permuted H⁻¹
  std::vector<double> h;       // the damped, permuted H itself; kept only with quantease_sweeps
  int64_t dead_columns = 0;
  double damp_value = 0.0;
};
PreparedHessian prepare_hessian(const std::vector<double>& H, int64_t n, const GptqOptions& opt);
GptqResult gptq_quantize(const float* W, int64_t out, int64_t in, const PreparedHessian& P, const GptqOptions& opt);

}  // namespace g4c::quant
