// mbarrier helpers shared by the sm_90 kernels (prefill wgmma, decode streaming): the
// transaction-count barriers that cp.async.bulk / TMA copies complete on.
#pragma once

#include <cstdint>

#include "runtime/cuda/common.cuh"

namespace g4c::cuda::detail {

__device__ __forceinline__ void mbar_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
// (saddr: the barrier's shared-window address, for callers that keep it in 32 bits.)
__device__ __forceinline__ void mbar_arrive(uint32_t saddr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(saddr) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) { mbar_arrive(smem_u32(b)); }
// Arrives on barrier `saddr` once every cp.async this thread issued before it has landed; the
// arrival is one of the count the barrier was initialized with (.noinc), so the thread itself
// never waits for its copies.
__device__ __forceinline__ void cp_async_arrive_noinc(uint32_t saddr) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(saddr) : "memory");
}
// Arrives and adds `bytes` to the transaction count the current phase waits for.
__device__ __forceinline__ void mbar_expect_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(b)), "r"(bytes)
               : "memory");
}
// One try: whether the phase of parity `parity` of barrier b has completed (the hardware may
// suspend the thread for a while before answering no).
__device__ __forceinline__ bool mbar_try_wait(uint64_t* b, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_u32(b)), "r"(parity)
      : "memory");
  return done != 0;
}
// The same without waiting at all.
__device__ __forceinline__ bool mbar_test(uint64_t* b, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_u32(b)), "r"(parity)
      : "memory");
  return done != 0;
}
// Waits until the phase of parity `parity` of barrier b has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  while (!mbar_try_wait(b, parity)) {
  }
}

}  // namespace g4c::cuda::detail
