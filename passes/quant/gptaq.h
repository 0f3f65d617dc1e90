// GPTAQ-style asymmetric calibration (Li et al. 2025, "GPTAQ: Efficient Finetuning-Free
// Quantization for Asymmetric Calibration"). A Linear of the model being quantized sees inputs X
// (computed through the layers already quantized) where the full-precision model's same Linear
// sees X̃. GPTQ minimizes ‖X·(W − Q)ᵀ‖²; GPTAQ minimizes ‖X̃·Wᵀ − X·Qᵀ‖², the distance to the
// full-precision output. Its unconstrained minimizer is
//   W* = W·X̃ᵀX·(XᵀX)⁻¹ = W + W·(X̃ − X)ᵀX·(XᵀX)⁻¹,
// and ‖X̃·Wᵀ − X·Qᵀ‖² = ‖X·(W* − Q)ᵀ‖² + const, so GPTQ of W* against H = 2·XᵀX solves it.
// With GPTQ's damping: W* = W + W·(G − H)·(H + λI)⁻¹, G = X̃ᵀX, H = XᵀX, λ = damp · mean(diag H)
// (a column with diag H = 0, never fed, gets H_jj = 1 as in GPTQ) — exactly W when X̃ = X.
#pragma once

#include <cstdint>
#include <vector>

namespace g4c::quant {

// G = X̃ᵀX and H = XᵀX (float64 n×n, row-major), from row blocks of the two models' inputs fed in
// the same order (fp32 partials of ≤ 8192 rows, float64 beyond, as HessianAccumulator).
class CrossGramAccumulator {
 public:
  explicit CrossGramAccumulator(int64_t n);
  // Xref (the full-precision model's rows) and X, both [rows, ld], ld ≥ n.
  void add(const float* Xref, const float* X, int64_t rows, int64_t ld, int threads = 1);
  int64_t n() const { return n_; }
  int64_t rows() const { return rows_; }
  const std::vector<double>& cross() const { return G_; }  // X̃ᵀX
  const std::vector<double>& gram() const { return H_; }   // XᵀX

 private:
  int64_t n_ = 0, rows_ = 0;
  std::vector<double> G_, H_;
  std::vector<float> pg_, ph_;
};

// W* above for W [out, n] (row-major fp32), rows solved on up to `threads` threads (the result
// does not depend on it). Throws g4c::Error when the damped H is not positive definite.
std::vector<float> gptaq_target(const float* W, int64_t out, int64_t n, const std::vector<double>& G,
                                const std::vector<double>& H, double damp, int threads = 1);

}  // namespace g4c::quant
