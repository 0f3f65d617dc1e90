// Device helpers shared by the CUDA kernel families (runtime/cuda/*.cu).
// Only included from .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace g4c::cuda::detail {

using bf16 = __nv_bfloat16;
using bf162 = __nv_bfloat162;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy global → shared; src_bytes < 16 zero-fills the rest (0 = all zero).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
               "r"(src_bytes));
}
// The same, always 16 bytes, to a shared-memory address already in the shared window.
__device__ __forceinline__ void cp_async16_s(uint32_t saddr, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(saddr), "l"(gmem));
}
// The same with a source size (< 16 zero-fills the rest; 0: all zero).
__device__ __forceinline__ void cp_async16_s(uint32_t saddr, const void* gmem, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr), "l"(gmem), "r"(src_bytes));
}
// Programmatic dependent launch (PDL): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start before the kernel ahead of it in
// the stream has finished. pdl_wait() returns once that kernel has completed and its writes are
// visible (at once when the launch had no such dependency); pdl_trigger() lets the kernel after
// this one launch early (it changes nothing for a kernel launched without the attribute).
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
// Host side: a launch configuration for cudaLaunchKernelEx(C) with the `n` attributes at `at`
// (kept alive by the caller).
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                        cudaLaunchAttribute* at, unsigned n) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = at;
  cfg.numAttrs = n;
  return cfg;
}
// The same, launched by PDL when `pdl`.
inline cudaLaunchConfig_t pdl_launch_config(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                                            cudaLaunchAttribute* at) {
  at->id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at->val.programmaticStreamSerializationAllowed = 1;
  return launch_config(grid, block, smem, stream, at, pdl ? 1 : 0);
}
// 2^x by one MUFU.EX2 (ex2.approx.ftz: max relative error 2^-22, subnormal results flush to 0,
// 2^-inf = 0); exp2f adds a range check and two multiplies per call.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(smem)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(smem)));
}

// D += A·B, m16n8k16, bf16 operands, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// v rounded to bf16 and back (where HF's bf16 run rounds).
__device__ __forceinline__ float rbf(float v) { return __bfloat162float(__float2bfloat16(v)); }

__device__ __forceinline__ uint32_t pack_bf162(float lo, float hi) {
  bf162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Loads that bypass L1 (ld.global.cg, like the cp.async.cg copies they stand in for): a block
// may read a cache slot, then read it again after the kernel ahead of it (PDL) rewrote it.
// volatile: issued in program order, so a run of them is in flight before the first use.
__device__ __forceinline__ uint2 ld_cg_u2(const void* p) {
  uint2 v;
  asm volatile("ld.global.cg.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ float ld_cg_f32(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ void st_shared_v4(uint32_t saddr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(saddr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// The FP8 KV row quantizer of runtime/fp8.h on a warp's row: scale = amax / 448 over the row
// (amax: the warp's |x| maximum), code = e4m3(x / scale) rounded to nearest even and saturating
// (the hardware conversion's rule, equal to the host encoder: tests/cuda_kernels), a zero row
// scale 0 and codes 0. Returns the scale; code() converts one of the lane's values.
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
struct Fp8Row {
  float scale;
  __device__ __forceinline__ explicit Fp8Row(float lane_amax) { scale = __fdiv_rn(warp_max(lane_amax), 448.f); }
  __device__ __forceinline__ uint8_t code(float x) const {
    return scale == 0.f ? uint8_t(0) : uint8_t(__nv_cvt_float_to_fp8(__fdiv_rn(x, scale), __NV_SATFINITE, __NV_E4M3));
  }
};

// Eight OCP E4M3 codes (byte i of c = element i) times their row's scale s as eight bf16
// (element i in the low half of word i / 2): code → fp16 by the hardware conversion (exact:
// every E4M3 value is an fp16 value), → fp32 (exact), · s in fp32, rounded to bf16 once.
__device__ __forceinline__ uint4 fp8x8_to_bf16(uint2 c, float s) {
  uint32_t o[4];
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const uint32_t w = h < 2 ? c.x : c.y;
    const __half2_raw r =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>((w >> (16 * (h & 1))) & 0xffffu), __NV_E4M3);
    const float2 f = __half22float2(__half2(r));
    o[h] = pack_bf162(f.x * s, f.y * s);
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// Four bf16x2 registers holding (code − zero)·scale for the 8 nibbles of `w`, in the
// order the repacked INT4 layout stores them: register i takes nibbles i (low half) and
// i+4 (high half). 0x4300 is bf16 128.0, so (nib | 0x4300) is exactly 128 + nib.
__device__ __forceinline__ void dequant8(uint32_t w, bf162 zlo, bf162 zhi, bf162 slo, bf162 shi,
                                         uint32_t (&out)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t v = ((w >> (4 * i)) & 0x000F000Fu) | 0x43004300u;
    bf162 x = *reinterpret_cast<bf162*>(&v);
    // Registers 0 and 2 hold row g, 1 and 3 row g+8 of the mma A fragment.
    bf162 z = (i & 1) ? zhi : zlo;
    bf162 s = (i & 1) ? shi : slo;
    x = __hmul2(__hsub2(x, z), s);  // subtraction exact (integers < 256), one rounding
    out[i] = *reinterpret_cast<uint32_t*>(&x);
  }
}

__device__ __forceinline__ float gelu_tanh(float x) {
  const float k0 = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.f + tanhf(k0 * (x + 0.044715f * x * x * x)));
}

// gelu_tanh(gate)·up from fp32 GEMM accumulators, rounded where HF's bf16 run rounds (gate_proj
// and up_proj outputs, the activation, the product: tests/bf16/hf_bf16.h point 8).
__device__ __forceinline__ float gelu_mul_bf16(float gate, float up) {
  const float g = __bfloat162float(__float2bfloat16(gate));
  const float u = __bfloat162float(__float2bfloat16(up));
  return __bfloat162float(__float2bfloat16(gelu_tanh(g))) * u;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over a block of blockDim.x threads (multiple of 32, ≤ 1024); every thread gets it.
__device__ __forceinline__ float block_sum(float v, float* scratch32) {
  v = warp_sum(v);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  __syncthreads();
  if (l == 0) scratch32[w] = v;
  __syncthreads();
  float t = (l < int(blockDim.x >> 5)) ? scratch32[l] : 0.f;
  return warp_sum(t);
}

}  // namespace g4c::cuda::detail
