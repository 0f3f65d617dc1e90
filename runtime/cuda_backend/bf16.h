// Host-side fp32 ↔ bf16 conversion of bulk arrays (weights, plan values), split over up to 8
// threads (runtime::parallel_chunks) in chunks of at least 4M values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/thread_pool.h"

namespace g4c::cudart {

// fp32 → bf16 bits, round to nearest even (exact for values that came from BF16); NaN → 0x7fc0.
inline void to_bf16(const float* in, uint16_t* out, size_t n) {
  runtime::parallel_chunks(int64_t(n), /*threads=*/0, int64_t(1) << 22, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      uint32_t u;
      std::memcpy(&u, &in[i], 4);
      out[i] = (u & 0x7fffffffu) > 0x7f800000u ? uint16_t(0x7fc0) : uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    }
  });
}

// bf16 bits → fp32 (exact).
inline void from_bf16(const uint16_t* in, float* out, size_t n) {
  runtime::parallel_chunks(int64_t(n), /*threads=*/0, int64_t(1) << 22, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const uint32_t u = uint32_t(in[i]) << 16;
      std::memcpy(&out[i], &u, 4);
    }
  });
}

}  // namespace g4c::cudart
