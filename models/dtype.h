// Element types of checkpoint tensors and the scalar conversions between them.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace g4c {

// F8E4M3 (OCP FP8 E4M3) is a plan storage type of the KV cache (runtime/fp8.h); checkpoint
// tensors of it are not read (parse_dtype refuses "F8_E4M3").
enum class DType : uint8_t { BF16, F16, F32, U8, I8, I32, I64, F8E4M3 };

// Bytes per element.
size_t dtype_size(DType t);
// Safetensors spelling: "BF16", "F16", "F32", "U8", "I8", "I32", "I64", "F8_E4M3".
std::string_view dtype_name(DType t);
// Parses the safetensors spelling; returns false for anything else.
bool parse_dtype(std::string_view s, DType* out);

inline float bf16_to_f32(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round to nearest even

}  // namespace g4c
