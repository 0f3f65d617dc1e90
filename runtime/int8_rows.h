// Per-row INT8 storage of a dense [rows, cols] table: the tied embedding / LM head of a plan
// compiled with `--table-dtype int8` (plan WeightFormat Int8Rows). Row r keeps cols int8 codes and
// one fp32 scale:
//   scale = amax(|w[r][:]|) / 127   (0 for an all-zero row)
//   code  = w / scale rounded to the nearest integer (ties to even), in [-127, 127]
//   value = float(code) · scale      (fp32, the single product the kernels form)
// The CPU backend computes from these values (the weight store holds them as fp32); the CUDA
// backend stores codes and scales and its kernels form the same products.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace g4c::runtime {

// Codes of row w[0..n) (w(i) returns value i as fp32) into codes[n]; returns the row's scale.
template <class Value>
float quantize_row_int8_of(Value w, size_t n, int8_t* codes) {
  float amax = 0.f;
  for (size_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(w(i)));
  const float scale = amax / 127.f;
  if (!(scale > 0.f) || !std::isfinite(scale)) {
    std::memset(codes, 0, n);
    return 0.f;
  }
  for (size_t i = 0; i < n; ++i) {
    const float c = std::nearbyint(w(i) / scale);  // the default rounding mode: ties to even
    codes[i] = int8_t(std::fmin(127.f, std::fmax(-127.f, c)));
  }
  return scale;
}

inline float quantize_row_int8(const float* w, size_t n, int8_t* codes) {
  return quantize_row_int8_of([w](size_t i) { return w[i]; }, n, codes);
}

// A row of BF16 bits (the checkpoint's tied embedding), without an fp32 copy.
inline float quantize_row_int8_bf16(const uint16_t* w, size_t n, int8_t* codes) {
  return quantize_row_int8_of(
      [w](size_t i) {
        const uint32_t u = uint32_t(w[i]) << 16;
        float x;
        std::memcpy(&x, &u, 4);
        return x;
      },
      n, codes);
}

// Replaces row values by their INT8 values in place (w[i] = code · scale): the weight store's
// form of an Int8Rows table.
inline void round_trip_rows_int8(float* w, size_t rows, size_t cols, int8_t* scratch_cols) {
  for (size_t r = 0; r < rows; ++r) {
    float* row = w + r * cols;
    const float s = quantize_row_int8(row, cols, scratch_cols);
    for (size_t i = 0; i < cols; ++i) row[i] = float(scratch_cols[i]) * s;
  }
}

}  // namespace g4c::runtime
