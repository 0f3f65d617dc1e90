// Activation-aware per-input-channel scaling (AWQ: Lin et al. 2023, "AWQ: Activation-aware
// Weight Quantization for LLM Compression and Acceleration"), the MLIR-free half of the
// g4-awq-scale pass (passes/AWQScale.cpp).
//
// For Linears W_k [out_k, in] that read the same input X [tokens, in], a scale s > 0 per input
// channel is folded into them and into whatever produced X:
//   W_k ← W_k·diag(s),   X ← X·diag(1/s)      (X·W_kᵀ unchanged in exact arithmetic)
// Salient channels (large mean |x|) get s > 1, so their weights use more of the INT4 grid.
// The search (as AWQ's auto_scale): s = m^α with m_c = max(mean|x_c|, 1e-4), normalised so that
// max(s)·min(s) = 1, for α = i/grid, i = 0 … grid; the α with the least output error
//   E(s) = Σ_k ‖X·(Q(W_k·diag(s))·diag(1/s) − W_k)ᵀ‖² = Σ_k tr(D_k·XᵀX·D_kᵀ)
// wins (Q: round-to-nearest in the run's INT4 format; α = 0 is s = 1, so the choice is never worse
// than no scaling by this measure). XᵀX over all calibration tokens replaces the tokens.
//
// The folds (what produced X):
//   - an RMSNorm weight w (X = rms(h)·w): w ← w / s. The checkpoint stores w in BF16, so the
//     fold rounds w' = bf16(w / s) first and scales the Linears' columns by t = w / w' (t = 1
//     where w = 0): X' = rms(h)·w' and W' = W·diag(t) give X'·W'ᵀ = X·Wᵀ exactly in real
//     arithmetic, whatever the rounding of w'.
//   - a Linear U whose output is multiplied elementwise into X (X = g ⊙ (Y·Uᵀ), MLP up → down):
//     U's rows ← 1/s, the reading Linear's columns ← s. Both are quantized afterwards, so no
//     storage rounding enters.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "passes/quant/calibration.h"
#include "passes/quant/gptq.h"
#include "passes/quant/quantizer.h"

namespace g4c::quant {

// Per-channel statistics of one Linear input over the calibration tokens: mean |x| and XᵀX.
class ActivationStats {
 public:
  explicit ActivationStats(int64_t n = 0);
  // X is [rows, n] row-major with leading dimension ld (≥ n).
  void add(const float* X, int64_t rows, int64_t ld, int threads = 1, const GramUpdate& gram = {});
  int64_t n() const { return gram_.n(); }
  int64_t rows() const { return gram_.rows(); }
  std::vector<double> mean_abs() const;
  // 2·XᵀX (the Hessian accumulator's convention; the factor does not move the argmin).
  const std::vector<double>& gram() const { return gram_.hessian(); }

 private:
  HessianAccumulator gram_;
  std::vector<double> abs_sum_;
};

struct AwqOptions {
  QuantSpec spec;       // the INT4 format the scaled weights are quantized to
  ClipSearch clip;      // the range rule of Q in the search (disabled: the lab's min/max)
  int grid = 20;        // α = i/grid, i = 0 … grid
  int threads = 1;      // α candidates searched in parallel (the result does not depend on it)
};

// The scales s(α) of the search for mean |x| m (see the file comment).
std::vector<float> awq_scales(std::span<const double> mean_abs, double alpha);

// E(s) for Linears `weights` (each row-major [outs[k], in]) against Gram G [in, in] (row-major,
// symmetric, float64), quantized by `spec`/`clip`.
double awq_error(std::span<const float* const> weights, std::span<const int64_t> outs, int64_t in,
                 std::span<const float> s, const std::vector<double>& gram, const QuantSpec& spec,
                 const ClipSearch& clip);

struct AwqChoice {
  double alpha = 0.0;
  std::vector<float> scales;  // s of the winning α, [in]
  double error = 0.0;         // E(s) of the winner
  double error_unscaled = 0.0;  // E(1) (α = 0)
};

// The search over α; throws g4c::Error on mismatched sizes or a grid < 1.
AwqChoice awq_search(std::span<const float* const> weights, std::span<const int64_t> outs, int64_t in,
                     const ActivationStats& stats, const AwqOptions& opt);

// ---- folds ----

// RMSNorm weight w [n] ← round(w / s) (`round`: the storage rounding, e.g. to BF16; identity for
// F32); returns t = w / w' per channel (1 where w = 0), the column scale of the Linears.
std::vector<float> fold_into_norm(std::span<float> norm_weight, std::span<const float> s,
                                  const std::function<float(float)>& round);
// W [out, in] row-major: column c ← c·t[c].
void scale_columns(std::span<float> W, int64_t out, int64_t in, std::span<const float> t);
// W [out, in] row-major: row r ← r / s[r].
void divide_rows(std::span<float> W, int64_t out, int64_t in, std::span<const float> s);

// ---- the layer driver (on quant::CalibrationExecutor) ----

// One fold site of a layer: the Linears that read one input and what produced that input.
struct AwqSite {
  std::string producer;               // within the layer: "input_layernorm", or "mlp.up_proj"
  bool producer_is_linear = false;    // rows of a Linear (else an RMSNorm weight)
  std::vector<std::string> linears;   // the Linears reading the input: exactly one executor group
  std::function<float(float)> round;  // storage rounding of a norm producer (empty: none)
};

struct AwqSiteReport {
  int layer = 0;
  std::string producer;
  std::vector<std::string> linears;
  int64_t in = 0, calibration_rows = 0;
  double alpha = 0.0, error = 0.0, error_unscaled = 0.0;
  double max_scale = 1.0, min_scale = 1.0;  // of the folded scales
};

struct AwqDriverOptions {
  AwqOptions awq;
  int threads = 1;  // the Gram accumulation
  GramUpdate gram;  // its XᵀX kernel; empty: sgemm_acc
  std::function<void(const AwqSiteReport&)> on_site;
  // Every tensor a fold rewrote, with its new values, in order (a tensor may come twice:
  // mlp.up_proj's columns, then its rows).
  std::function<void(int layer, const std::string& name, const std::vector<float>& values)> on_tensor;
};

// Runs `layer` once on the calibration activations that enter it (observing every Linear input:
// mean |x| and XᵀX) and advances them with the weights as they are, then searches each site's
// scale and folds it (CalibrationExecutor::set_weight). The folded layer computes what the
// unfolded one did, so the activations advanced before the folds are those after them. Throws
// g4c::Error when a site's Linears are not exactly one of the executor's input groups.
std::vector<AwqSiteReport> awq_layer(CalibrationExecutor& exec, int layer, const std::vector<AwqSite>& sites,
                                     const AwqDriverOptions& opt);

}  // namespace g4c::quant
