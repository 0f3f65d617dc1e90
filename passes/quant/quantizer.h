// INT4 group quantization math shared by RTN and GPTQ (pure C++, no MLIR, no runtime).
//
// Matches the lab format (DESIGN.md §3) and the reference quantizer of
// models/gemma4-tiny/train.py exactly:
//   symmetric:  s = max|w| / 7,                 z = 8
//   asymmetric: mn = min(min w, 0), mx = max(max w, 0), s = (mx − mn) / 15, z = round(−mn / s)
//   (both clamped to s ≥ 1e-8; z is computed with the fp32 s, then s is rounded to fp16)
//   code = clamp(round(w / s) + z, 0, 15),  w ≈ (code − z) · s
// round() is round-half-to-even (torch.round), all in fp32.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace g4c::quant {

struct QuantSpec {
  int group_size = 128;
  bool symmetric = true;
};

struct GroupParams {
  float scale = 0.f;  // exactly representable in fp16
  int zero = 8;       // 8 when symmetric
};

// Parameters of one group from `n` weights w[0], w[stride], ….
GroupParams group_params(const float* w, int64_t n, int64_t stride, bool symmetric);
GroupParams group_params(const double* w, int64_t n, int64_t stride, bool symmetric);

// MSE-optimal clipping of a group's range: the candidates shrink the range the lab's rule
// would use by p_i = 1 − i/grid, i = 0 … steps−1 (symmetric: max|w|·p; asymmetric: min·p and
// max·p, both ends together), each turned into (s, z) by the same rule (fp16 s, rounded z), and
// the one with the least Σ (w − ŵ)² over the group wins (first, i.e. least shrink, on ties).
// The error sum is float64 over exact fp32 differences, so the choice does not depend on FMA
// contraction; passes/quant/cuda/gptq_solve.cu (solve_block_kernel, static_params_kernel) does the same search.
// Disabled (grid or steps 0): group_params.
struct ClipSearch {
  int grid = 0;   // p step 1/grid
  int steps = 0;  // candidates, p from 1 down to 1 − (steps−1)/grid
  bool enabled() const { return grid > 0 && steps > 0; }
  // The recipe of the GPTQ reference's --mse option (grid 100, max shrink 0.8), with norm 2.
  static ClipSearch mse() { return {100, 80}; }
};
// The range-shrink factor of candidate i.
inline float clip_shrink(const ClipSearch& c, int i) { return 1.0f - float(i) / float(c.grid); }
// Parameters from the range (amax for symmetric, [mn, mx] ∋ 0 for asymmetric) by the lab's rule.
GroupParams params_from_range(float amax, float mn, float mx, bool symmetric);
GroupParams group_params(const float* w, int64_t n, int64_t stride, bool symmetric, const ClipSearch& clip);
GroupParams group_params(const double* w, int64_t n, int64_t stride, bool symmetric, const ClipSearch& clip);
// Σ (w − ŵ)² of the group under p (float64 sum of exact fp32 differences).
double group_sq_error(const float* w, int64_t n, int64_t stride, const GroupParams& p);

inline int quantize_code(float w, const GroupParams& p) {
  if (p.scale == 0.f) return p.zero;  // all-zero group whose scale underflowed fp16
  float c = __builtin_nearbyintf(w / p.scale) + float(p.zero);
  return c < 0.f ? 0 : (c > 15.f ? 15 : int(c));
}
inline float dequantize_code(int code, const GroupParams& p) { return float(code - p.zero) * p.scale; }

// A quantized Linear [out, in] with unpacked codes; packing to the checkpoint's
// uint8 nibbles is models/int4's job.
struct QuantizedLinear {
  int64_t out = 0, in = 0, padded_in = 0;
  int group_size = 128;
  bool symmetric = true;
  std::vector<uint8_t> codes;   // [out, padded_in], 0..15; padding columns hold the zero point
  std::vector<float> scales;    // [out, padded_in / group_size]
  std::vector<uint8_t> zeros;   // [out, padded_in / group_size] (8 when symmetric)

  int64_t groups() const { return padded_in / group_size; }
  GroupParams params(int64_t o, int64_t g) const { return {scales[o * groups() + g], zeros[o * groups() + g]}; }
  float dequant(int64_t o, int64_t i) const {
    return dequantize_code(codes[o * padded_in + i], params(o, i / group_size));
  }
  // Dense [out, in] fp32 fake-quantized weights (rows split over up to `threads` threads).
  std::vector<float> dequantized(int threads = 1) const;
  void dequantize_into(std::span<float> w, int threads = 1) const;  // w: out·in values
};

int64_t padded_in_features(int64_t in, int group_size);

// Round-to-nearest per group. W is row-major [out, in]. With `clip`, each group's range is
// the MSE-optimal one of the search (ClipSearch).
QuantizedLinear quantize_rtn(const float* W, int64_t out, int64_t in, const QuantSpec& spec,
                             const ClipSearch& clip = {});

}  // namespace g4c::quant
