// GEMM epilogue shared by the GEMM kernels (gemm.cu, gemm_sm90.cu). Only included from .cu.
#pragma once

#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm.cuh"

namespace g4c::cuda::detail {

struct EpiArgs {
  int ep;
  GemmOut o;
  int n;  // packed rows
  int m;
};

// One output element (packed row `prow`, token `tok`); for GeluMul call with the gate row value
// `v` and the up value `vu`, prow = the gate row.
__device__ __forceinline__ void epi_write(const EpiArgs& e, int prow, int tok, float v, float vu) {
  if (tok >= e.m) return;
  switch (e.ep) {
    case 2: {  // GeluMul
      const int j = (prow >> 4) * 8 + (prow & 7);
      if (j >= e.n / 2) return;
      static_cast<bf16*>(e.o.y)[long(tok) * e.o.ldy + j] = __float2bfloat16(gelu_mul_bf16(v, vu));
      return;
    }
    case 3:
      if (prow < e.n)
        static_cast<float*>(e.o.y)[long(tok) * e.o.ldy + prow] =
            e.o.softcap > 0.f ? e.o.softcap * tanhf(v / e.o.softcap) : v;
      return;
    case 1:
      if (prow < e.n) {
        const float r = __bfloat162float(e.o.residual[long(tok) * e.o.ldr + prow]);
        static_cast<bf16*>(e.o.y)[long(tok) * e.o.ldy + prow] = __float2bfloat16(v + r);
      }
      return;
    default:
      if (prow < e.n) static_cast<bf16*>(e.o.y)[long(tok) * e.o.ldy + prow] = __float2bfloat16(v);
  }
}

// sm_90a wgmma kernels (gemm_sm90.cu), used for m ≥ 64.
// bt: tokens per block, 128 or 256.
cudaError_t launch_wgmma_int4(const bf16* x, int ldx, const Int4Weight& w, const EpiArgs& e,
                              int bt, cudaStream_t stream);
cudaError_t launch_wgmma_bf16(const bf16* x, int ldx, const Bf16Weight& w, const EpiArgs& e,
                              int bt, cudaStream_t stream);
// Warp-specialized persistent wgmma kernels (gemm_sm90_ws.cu): 128 weight rows × bt (128 or
// 256) tokens per tile; max_blocks > 0 caps the grid (persistent: each block loops over tiles),
// 0 launches one block per tile. rel0: consumers drain their wgmmas every k step (variant).
cudaError_t launch_ws_int4(const bf16* x, int ldx, const Int4Weight& w, const EpiArgs& e, int bt,
                           int max_blocks, bool rel0, cudaStream_t stream);
// Register-A variant (gemm_sm90_rs.cu): TMA-fed X, INT4 dequantized in the consumer warps'
// registers (wgmma with A from registers); bt 256 or 128; max_blocks as above; tensor_maps: the
// weight fragments, scales and zeros by one TMA box each per stage (else 8 bulk copies each).
// ksplit 2 / 4 (tensor maps only): split-K over a cluster of that many blocks per tile, summed
// through distributed shared memory (one tile per cluster; max_blocks ignored); capped by the
// k chunks.
cudaError_t launch_rs_int4(const bf16* x, int ldx, const Int4Weight& w, const EpiArgs& e, int bt,
                           int max_blocks, bool tensor_maps, int ksplit, cudaStream_t stream);
// How many clusters of the split-K kernel (bt, ksplit 2 or 4) can be resident at once on the
// device (occupancy API; 0 when unknown).
int rs_split_clusters(int bt, int ksplit);
cudaError_t launch_ws_bf16(const bf16* x, int ldx, const Bf16Weight& w, const EpiArgs& e, int bt,
                           int max_blocks, cudaStream_t stream);

}  // namespace g4c::cuda::detail
