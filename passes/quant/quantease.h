// QuantEase-style refinement of GPTQ's codes (Behdin et al. 2023, "QuantEase: Optimization-based
// Quantization for Language Models"): cyclic coordinate descent on the codes of one Linear, the
// group scales and zeros GPTQ chose held fixed, so the result stays in the lab's INT4 format.
//
//   objective  ½·tr((W − Ŵ)·H·(W − Ŵ)ᵀ)  (H: the damped Hessian GPTQ used, PreparedHessian::h;
//              the same quantity as GptqResult::predicted_loss)
//   per row, per sweep, per column j in GPTQ's visiting order:
//     ŵ*_j = ŵ_j + R_j / H_jj   (R = (W − Ŵ)·H: the unconstrained optimum of column j given the others)
//     code_j ← quantize(ŵ*_j) on the row's group grid (codes clamped to 0..15)
//     kept only if it lowers the objective (exactly: −2δR_j + δ²H_jj < 0, δ = new ŵ_j − old ŵ_j),
//     then R −= δ·H_j·
//   Sweeps stop early once one changes no code. The objective never increases.
#pragma once

#include <cstdint>

#include "passes/quant/gptq.h"
#include "passes/quant/quantizer.h"

namespace g4c::quant {

struct QuantEaseStats {
  double before = 0.0;  // objective of the codes handed in
  double after = 0.0;   // objective of the refined codes
  int64_t changed = 0;  // code changes over all sweeps
  int sweeps = 0;       // sweeps run (the most over the rows)
};

// Refines q (GPTQ's result for W [out, in], row-major fp32) in place. P must come from
// prepare_hessian with keep_hessian (P.h). Dead columns stay as GPTQ left them (their target is 0).
// Rows are refined in parallel on `threads` threads; the result does not depend on it.
QuantEaseStats quantease_refine(const float* W, int64_t out, int64_t in, const PreparedHessian& P, int sweeps,
                                int threads, QuantizedLinear& q);

}  // namespace g4c::quant
