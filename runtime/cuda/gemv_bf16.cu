// The register-direct BF16 GEMM for m ≤ 16 with fp32 outputs (the decode step's LM head); kernel
// and why in gemv_bf16_kernel.cuh. Opt-in: gemm_set_bf16_decode_rd (gemm.cuh).
#include <cuda_runtime.h>

#include <algorithm>

#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm.cuh"
#include "runtime/cuda/gemm_epilogue.cuh"  // bf16_gemv_rd's declaration

// The two device operations the kernel source leaves to its includer (gemv_bf16_kernel.cuh).
__device__ __forceinline__ void g4c_mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  g4c::cuda::detail::mma_bf16(d, a, b0, b1);
}
template <class U4>
__device__ __forceinline__ U4 g4c_ld_stream16(const U4* p) {
  const uint4 v = __ldcs(reinterpret_cast<const uint4*>(p));  // evict-first: read once
  return U4{v.x, v.y, v.z, v.w};
}

#include "runtime/cuda/gemv_bf16_kernel.cuh"

namespace g4c::cuda {

namespace {
bool g_bf16_decode_rd = false;
}

void gemm_set_bf16_decode_rd(bool on) { g_bf16_decode_rd = on; }

namespace detail {

// bf16_gemm's m ≤ 16 fp32-output path when the switch is on and the shapes allow it; false: not
// taken (the caller launches its usual kernel).
bool bf16_gemv_rd(const bf16* x, int m, int ldx, const Bf16Weight& w, const GemmOut& out, cudaError_t* err,
                  cudaStream_t stream) {
  if (!g_bf16_decode_rd || m < 1 || m > 16 || w.k % 32 != 0 || w.ldw != w.k || ldx % 8 != 0 || w.gate_up ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(w.w) % 16 != 0)
    return false;
  gemv_detail::GemvArgs a{reinterpret_cast<const uint16_t*>(x), m, ldx, reinterpret_cast<const uint16_t*>(w.w), w.n,
                          w.k, static_cast<float*>(out.y), int(out.ldy), out.softcap};
  // Enough warps for ~16 per SM (each warp streams one 16-row tile at a time), no more than tiles.
  const int tiles = (w.n + 15) / 16;
  const int blocks = std::max(1, std::min((tiles + gemv_detail::kGemvWarps - 1) / gemv_detail::kGemvWarps,
                                          gemm_stream_sms(stream) * 4));
  if (m <= 8)
    gemv_detail::gemv_bf16_kernel<1><<<blocks, gemv_detail::kGemvWarps * 32, 0, stream>>>(a);
  else
    gemv_detail::gemv_bf16_kernel<2><<<blocks, gemv_detail::kGemvWarps * 32, 0, stream>>>(a);
  *err = cudaGetLastError();
  return true;
}

}  // namespace detail
}  // namespace g4c::cuda
