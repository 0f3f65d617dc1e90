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

// Two adjacent output columns (col, col + 1; col even) of token `tok`, bounded by `lim` columns
// (ep 0 store, 1 + residual); pair_ok: 4-byte-aligned pairs may be stored as one bf162. The
// epilogue of the wgmma tiles that epilogue_full_tile does not take (gemm_sm90_rs.cu).
__device__ __forceinline__ void epi_store2(const EpiArgs& e, int tok, int col, float v0, float v1, int lim,
                                           bool pair_ok) {
  if (tok >= e.m || col >= lim) return;
  bf16* y = static_cast<bf16*>(e.o.y) + long(tok) * e.o.ldy + col;
  const bool two = col + 1 < lim;
  const bool vec = two && pair_ok;
  if (e.ep == 1) {
    const bf16* r = e.o.residual + long(tok) * e.o.ldr + col;
    if (vec) {
      const float2 rf = __bfloat1622float2(*reinterpret_cast<const bf162*>(r));
      v0 += rf.x;
      v1 += rf.y;
    } else {
      v0 += __bfloat162float(r[0]);
      if (two) v1 += __bfloat162float(r[1]);
    }
  }
  if (vec) {
    *reinterpret_cast<bf162*>(y) = __floats2bfloat162_rn(v0, v1);
  } else {
    y[0] = __float2bfloat16(v0);
    if (two) y[1] = __float2bfloat16(v1);
  }
}

// The epilogue of a wgmma tile inside both bounds, with 4-byte-aligned column pairs
// (gemm_sm90_rs.cu). acc is a 64-row warpgroup slice's accumulator: acc[4j..4j+3]
// = (row g, tok 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1) of token block j; `tok` is this lane's
// token in block 0 (+ 8 per block), `prow` its packed row (+ 8 for acc[4j+2..3]). Straight-line
// code per kind (EP 0 store, 1 + residual, 2 gelu(gate)·up), no per-element tests; KS > 1: token
// blocks j ≡ rank (mod KS) only (split-K clusters). Why: a generic per-element epilogue
// compiled to ~14k SASS instructions and stalled on instruction fetch.
template <int BT, int KS, int EP>
__device__ __forceinline__ void epilogue_full_tile_kind(const EpiArgs& e, const float (&acc)[BT / 2], int prow,
                                                        int tok, bool odd, int rank) {
  bf16* const y = static_cast<bf16*>(e.o.y);
  const long ystep = 8L * e.o.ldy;
  if constexpr (EP == 2) {  // gate rows g, up rows g + 8 of each 16-row tile → 8 output columns
    bf16* p = y + long(tok) * e.o.ldy + (prow >> 4) * 8 + (prow & 7) - (odd ? 1 : 0);
#pragma unroll
    for (int j = 0; j < BT / 8; ++j) {
      if (KS > 1 && j % KS != rank) continue;  // another block of the cluster stores it
      const float* c = acc + 4 * j;
      const float v0 = gelu_mul_bf16(c[0], c[2]), v1 = gelu_mul_bf16(c[1], c[3]);
      const float recv = __shfl_xor_sync(0xffffffffu, odd ? v0 : v1, 4);
      *reinterpret_cast<bf162*>(p + j * ystep) = odd ? __floats2bfloat162_rn(recv, v1) : __floats2bfloat162_rn(v0, recv);
    }
  } else {
    bf16* p = y + long(tok) * e.o.ldy + prow - (odd ? 1 : 0);
    // Residual: the pairs of 8 token blocks are loaded before any of them is stored, so that
    // their loads run as one round (y may alias the residual, but only in the element that reads
    // it); 16 registers at a time (all 64 at once spilled: 168 registers).
    const bf16* r = EP == 1 ? e.o.residual + long(tok) * e.o.ldr + prow - (odd ? 1 : 0) : nullptr;
    const long rstep = 8L * e.o.ldr;
#pragma unroll
    for (int j0 = 0; j0 < BT / 8; j0 += 8) {
      bf162 res[16];
      if constexpr (EP == 1) {
#pragma unroll
        for (int j = j0; j < j0 + 8 && j < BT / 8; ++j) {
          if (KS > 1 && j % KS != rank) continue;
#pragma unroll
          for (int h = 0; h < 2; ++h) res[2 * (j - j0) + h] = *reinterpret_cast<const bf162*>(r + j * rstep + 8 * h);
        }
      }
#pragma unroll
      for (int j = j0; j < j0 + 8 && j < BT / 8; ++j) {
        if (KS > 1 && j % KS != rank) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float x0 = acc[4 * j + 2 * h], x1 = acc[4 * j + 2 * h + 1];
          const float recv = __shfl_xor_sync(0xffffffffu, odd ? x0 : x1, 4);
          float lo = odd ? recv : x0, hi = odd ? x1 : recv;
          if constexpr (EP == 1) {
            const float2 rf = __bfloat1622float2(res[2 * (j - j0) + h]);
            lo += rf.x;
            hi += rf.y;
          }
          *reinterpret_cast<bf162*>(p + j * ystep + 8 * h) = __floats2bfloat162_rn(lo, hi);
        }
      }
    }
  }
}

// Whether a tile of bt tokens from tok0 and `rows` packed rows from n0 takes epilogue_full_tile:
// inside both bounds, paired stores allowed, a bf16 epilogue (not ep 3).
__device__ __forceinline__ bool epilogue_full_tile_ok(const EpiArgs& e, int tok0, int bt, int n0, int rows,
                                                      bool pair_ok) {
  return pair_ok && e.ep != 3 && tok0 + bt <= e.m && n0 + rows <= e.n;
}
// epilogue_full_tile_kind for e.ep (0, 1 or 2). `tok0` is the tile's first token, `t`/`odd` the
// lane's quad index and row parity.
template <int BT, int KS>
__device__ __forceinline__ void epilogue_full_tile(const EpiArgs& e, const float (&acc)[BT / 2], int prow, int tok0,
                                                   int t, bool odd, int rank) {
  const int tok = tok0 + 2 * t + (odd ? 1 : 0);
  if (e.ep == 2)
    epilogue_full_tile_kind<BT, KS, 2>(e, acc, prow, tok, odd, rank);
  else if (e.ep == 1)
    epilogue_full_tile_kind<BT, KS, 1>(e, acc, prow, tok, odd, rank);
  else
    epilogue_full_tile_kind<BT, KS, 0>(e, acc, prow, tok, odd, rank);
}

// sm_90a wgmma kernel (gemm_sm90.cu), BF16 weights, m ≥ 64; bt: tokens per block, 128 or 256.
cudaError_t launch_wgmma_bf16(const bf16* x, int ldx, const Bf16Weight& w, const EpiArgs& e,
                              int bt, cudaStream_t stream);
// Register-A warp-specialized kernel (gemm_sm90_rs.cu), INT4 weights, any m: TMA-fed X, the
// weight fragments, scales and zeros by one TMA box each per stage, INT4 dequantized in the
// consumer warps' registers (wgmma with A from registers); bt 256, 128, 64 or 32; max_blocks caps the
// persistent grid (each block loops over tiles). ksplit 2 / 4: split-K over a cluster of that
// many blocks per tile, summed through distributed shared memory (one tile per cluster;
// max_blocks ignored); capped by the k chunks.
cudaError_t launch_rs_int4(const bf16* x, int ldx, const Int4Weight& w, const EpiArgs& e, int bt,
                           int max_blocks, int ksplit, cudaStream_t stream);
// How many clusters of the split-K kernel (bt, ksplit 2 or 4) can be resident at once on the
// device (occupancy API; 0 when unknown).
int rs_split_clusters(int bt, int ksplit);

}  // namespace g4c::cuda::detail
