// Per-row INT8 table kernels (runtime/int8_rows.h format): the tied embedding / LM head of a plan
// compiled with `--table-dtype int8`. Host API only; kernels in gemm_w8.cu.
//
// Row j of the table holds k int8 codes q[j][0..k) (|code| ≤ 127) and an fp32 scale s[j]; its
// value is float(code) · s[j]. Both kernels are deterministic (fixed summation order, no atomics),
// allocate nothing and never synchronize the host, so they can be captured in a CUDA graph.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace g4c::cuda {

using bf16 = __nv_bfloat16;

// Codes row-major [n][k] (row stride k bytes), scales fp32 [n].
struct Int8RowsWeight {
  const int8_t* q = nullptr;  // 16-byte aligned
  const float* scale = nullptr;
  int n = 0;
  int k = 0;
};

// The LM head: y[r][j] = scale[j] · Σ_k x[r][k] · q[j][k], r < m, j < n. x bf16 [m][ldx] (first k
// columns used), y fp32 [m][ldy]. Products bf16 · code are exact in fp32; the sum is the tensor
// cores' fp32 accumulation in a fixed order; the scale is applied once, in fp32, at the end.
// Requires k % 16 == 0, ldx % 8 == 0, ldx ≥ k, ldy ≥ n, x and w.q 16-byte aligned,
// n ≤ 65535 · 128; else cudaErrorInvalidValue. m == 0: nothing to do.
// Streams the table once per 64 rows of x (one pass for decode batches, m ≤ 64).
cudaError_t w8a16_gemm_f32(const bf16* x, int m, int ldx, const Int8RowsWeight& w, float* y, long ldy,
                           cudaStream_t s);

// The embedding gather: out[t][c] = bf16_rn((float(q[ids[t]][c]) · scale[ids[t]]) · normalizer)
// in exactly that fp32 order, c < w.k; ids outside [0, w.n) give a zero row (as
// embed_gather_scale). Requires w.k % 8 == 0, ldo % 8 == 0, ldo ≥ w.k, out 16-byte aligned; else
// cudaErrorInvalidValue. t == 0: nothing to do.
cudaError_t embed_gather_int8(const int* ids, int t, const Int8RowsWeight& w, float normalizer, bf16* out, int ldo,
                              cudaStream_t s);

}  // namespace g4c::cuda
