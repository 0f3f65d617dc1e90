// OCP FP8 E4M3 ("e4m3fn") scalars and the row quantizer of the FP8 KV cache (DESIGN.md §4,
// plan.fbs KvLayer.dtype = F8E4M3). Header-only and free of library calls, so host code and
// (later) device code share one statement of the format.
//
// Element: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits. Largest finite value 448
// (0x7E), no infinities, 0x7F / 0xFF are NaN, subnormals are multiples of 2^-9.
// Row: one fp32 scale per row of d values, scale = amax(|x|) / 448 (a zero row: scale 0 and
// codes 0); code = e4m3(x / scale) rounded to nearest, ties to even, saturating at ±448;
// a value decodes as fp8_e4m3_decode(code) * scale.
#pragma once

#include <bit>
#include <cstdint>

namespace g4c::runtime {

inline constexpr float kFp8E4M3Max = 448.0f;

// Nearest E4M3 code of x (ties to even); |x| ≥ 448 and ±inf saturate to ±448; NaN → 0x7F.
constexpr uint8_t fp8_e4m3_encode(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;                   // NaN
  if (a >= 0x43e00000u) return uint8_t(sign | 0x7eu);  // |x| ≥ 448 = 1.75·2^8
  if (a < 0x3c800000u) {                              // |x| < 2^-6: subnormal, a multiple of 2^-9
    const float f = std::bit_cast<float>(a) * 512.0f;  // exact (power of two), < 8
    uint32_t q = uint32_t(f);
    const float r = f - float(q);                       // exact
    if (r > 0.5f || (r == 0.5f && (q & 1u))) ++q;       // q = 8 is 2^-6, the smallest normal
    return uint8_t(sign | q);
  }
  // Normal: fp32 exponent e8 ∈ [121, 135] becomes e8 − 120 ∈ [1, 15]; keep 3 of 23 mantissa
  // bits, rounding the 20 dropped ones to nearest even (a carry moves into the exponent).
  const uint32_t mant = a & 0x7fffffu;
  uint32_t code = (((a >> 23) - 120u) << 3) | (mant >> 20);
  const uint32_t rest = mant & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (code & 1u))) ++code;
  if (code > 0x7eu) code = 0x7eu;  // unreachable below 448; kept as the satfinite guard
  return uint8_t(sign | code);
}

constexpr float fp8_e4m3_decode(uint8_t c) {
  const uint32_t sign = uint32_t(c & 0x80u) << 24, e = (c >> 3) & 0xfu, m = c & 7u;
  if (e == 15 && m == 7) return std::bit_cast<float>(0x7fc00000u | sign);  // NaN
  if (e == 0) {
    const float v = float(m) * 0.001953125f;  // m · 2^-9, exact
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((e + 120u) << 23) | (m << 20));
}

// Quantizes x[0..d) into codes[0..d) and returns the row's scale (see the file comment).
inline float quantize_row_e4m3(const float* x, int d, uint8_t* codes) {
  float amax = 0.0f;
  for (int i = 0; i < d; ++i) {
    const float a = x[i] < 0 ? -x[i] : x[i];
    amax = a > amax ? a : amax;
  }
  const float scale = amax / kFp8E4M3Max;
  if (scale == 0.0f) {
    for (int i = 0; i < d; ++i) codes[i] = 0;
    return 0.0f;
  }
  for (int i = 0; i < d; ++i) codes[i] = fp8_e4m3_encode(x[i] / scale);
  return scale;
}

}  // namespace g4c::runtime
