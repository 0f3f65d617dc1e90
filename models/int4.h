// The lab's INT4 weight format (DESIGN.md §3), per Linear weight W [out, in]:
//   qweight uint8 [out, padded_in/2]: element 2j in the low nibble of byte j, 2j+1 high
//   scales  fp16 (or bf16) [out, padded_in/G]
//   zeros   uint8 [out, padded_in/G], absent when symmetric
//   padded_in = ceil(in/G)*G
//   symmetric:  s = max|w|/7,          code = clamp(round(w/s), -8, 7) + 8,  w ≈ (code-8)*s
//   asymmetric: s = (max-min)/15,      z = round(-min/s), code = clamp(round(w/s)+z, 0, 15),
//               w ≈ (code-z)*s
// Conventions this implementation fixes (the format leaves them open):
//  - asymmetric min/max are taken over the group with 0 included (min<=0<=max, as
//    GPTQ's quantizer does) so that z always fits in [0, 15];
//  - codes are computed with the scale already rounded to its stored dtype, so
//    dequantize() reproduces exactly what was rounded;
//  - round() is round-half-to-even (torch.round);
//  - an all-zero group gets scale 0 (sym code 8 / asym z 0, codes = z): it dequantizes to 0;
//  - the padding columns in..padded_in-1 hold the code of 0.0 (8, or z), i.e. they
//    dequantize to exactly 0.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/dtype.h"

namespace g4c::models::int4 {

struct Params {
  int group_size = 128;          // G, even and > 0
  bool symmetric = true;
  DType scale_dtype = DType::F16;  // F16 or BF16
};

inline int64_t padded_in(int64_t in, int group_size) { return (in + group_size - 1) / group_size * group_size; }

// codes: [rows, cols] values 0..15, cols even → [rows, cols/2] bytes.
std::vector<uint8_t> pack_codes(std::span<const uint8_t> codes, int64_t rows, int64_t cols);
// The inverse: [rows, cols/2] bytes → [rows, cols] codes.
std::vector<uint8_t> unpack_codes(std::span<const uint8_t> packed, int64_t rows, int64_t cols);

// Scale and zero of one group of n weights (zero unused when symmetric). The scale
// is already rounded to `scale_dtype`.
struct GroupQuant {
  float scale = 0.0f;
  int zero = 8;  // 8 for symmetric
};
GroupQuant group_quant(const float* w, int64_t n, bool symmetric, DType scale_dtype);
// The code (0..15) of one weight under a group's scale/zero.
int quantize_value(float w, const GroupQuant& g);
inline float dequantize_value(int code, const GroupQuant& g) { return float(code - g.zero) * g.scale; }

// One quantized Linear in the stored layout.
struct QuantizedLinear {
  int64_t out = 0, in = 0, padded_in = 0;
  Params params;
  std::vector<uint8_t> qweight;   // [out, padded_in/2]
  std::vector<uint16_t> scales;   // [out, padded_in/G], raw fp16/bf16 bits
  std::vector<uint8_t> zeros;     // [out, padded_in/G]; empty when symmetric
  int64_t groups() const { return padded_in / params.group_size; }
  float scale(int64_t row, int64_t group) const;
};

// Round-to-nearest quantization of a row-major [out, in] float matrix.
// Throws g4c::Error for a bad group size / scale dtype or a non-finite weight.
QuantizedLinear quantize_rtn(std::span<const float> w, int64_t out, int64_t in, const Params& p);
// Back to a row-major [out, in] float matrix (padding dropped).
std::vector<float> dequantize(const QuantizedLinear& q);
// Same from raw stored bytes (e.g. mmap'd tensors): zeros may be empty when symmetric.
std::vector<float> dequantize(std::span<const uint8_t> qweight, std::span<const uint16_t> scales,
                              std::span<const uint8_t> zeros, int64_t out, int64_t in, const Params& p);

}  // namespace g4c::models::int4
