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
  // Dense [out, in] fp32 fake-quantized weights.
  std::vector<float> dequantized() const;
};

int64_t padded_in_features(int64_t in, int group_size);

// Round-to-nearest per group. W is row-major [out, in].
QuantizedLinear quantize_rtn(const float* W, int64_t out, int64_t in, const QuantSpec& spec);

}  // namespace g4c::quant
