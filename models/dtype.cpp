#include "models/dtype.h"

#include <cmath>

namespace g4c {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::BF16: case DType::F16: return 2;
    case DType::F32: case DType::I32: return 4;
    case DType::U8: case DType::I8: case DType::F8E4M3: return 1;
    case DType::I64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::F32: return "F32";
    case DType::U8: return "U8";
    case DType::I8: return "I8";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::F8E4M3: return "F8_E4M3";
  }
  return "?";
}

bool parse_dtype(std::string_view s, DType* out) {
  static constexpr std::pair<std::string_view, DType> kNames[] = {
      {"BF16", DType::BF16}, {"F16", DType::F16}, {"F32", DType::F32}, {"U8", DType::U8},
      {"I8", DType::I8},     {"I32", DType::I32}, {"I64", DType::I64}};
  for (auto& [name, t] : kNames)
    if (s == name) { *out = t; return true; }
  return false;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) { man <<= 1; --exp; }
      man &= 0x3ff;
      u = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = uint16_t((u >> 16) & 0x8000);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00;        // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00;       // overflow → inf (≥ 65520 rounds up)
  if (a < 0x38800000u) {                            // subnormal or zero in f16
    if (a < 0x33000000u) return sign;               // < half the smallest subnormal
    uint32_t exp = a >> 23, man = (a & 0x7fffff) | 0x800000;
    // value = man * 2^(exp-150); f16 subnormal unit = 2^-24 → q = man * 2^(exp-126)
    uint32_t drop = 126 - exp;                      // ≥ 1
    uint32_t q = man >> drop, rem = man & ((1u << drop) - 1), half = 1u << (drop - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return sign | uint16_t(q);
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u);       // round mantissa to 10 bits, nearest even
  return sign | uint16_t(((r >> 13) - ((127 - 15) << 10)) & 0x7fff);
}

}  // namespace g4c
