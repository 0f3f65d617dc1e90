#include "models/tensor_check.h"

#include <cstring>

namespace g4c::models {

int64_t count_nonfinite(const TensorView& t) {
  if (!t.info || !t.data) return 0;
  const size_t n = t.info->nbytes;
  int64_t bad = 0;
  switch (t.info->dtype) {
    case DType::BF16:
    case DType::F16: {
      const uint16_t mask = t.info->dtype == DType::BF16 ? 0x7F80 : 0x7C00;
      for (size_t i = 0; i + 1 < n; i += 2) {
        uint16_t v;
        std::memcpy(&v, t.data + i, 2);
        bad += (v & mask) == mask;
      }
      break;
    }
    case DType::F32:
      for (size_t i = 0; i + 3 < n; i += 4) {
        uint32_t v;
        std::memcpy(&v, t.data + i, 4);
        bad += (v & 0x7F800000u) == 0x7F800000u;
      }
      break;
    default:
      break;
  }
  return bad;
}

}  // namespace g4c::models
