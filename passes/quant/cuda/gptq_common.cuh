// Helpers shared by the GPTQ kernel files (gram.cu, factor.cu, solve.cu; API in gptq_kernels.cuh).
#pragma once

#include <cstdint>

namespace g4c::cuda::gptq_detail {

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline unsigned blocks_for(int64_t n, int t = 256) { return unsigned(cdiv(n, t)); }

}  // namespace g4c::cuda::gptq_detail
