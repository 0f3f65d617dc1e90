// Register-direct BF16 GEMM for m ≤ 16 tokens with fp32 (softcapped) outputs: the LM head of a
// decode step (262144 × 3840 BF16, 2 GB a step). Launched by gemv_bf16.cu when
// gemm_set_bf16_decode_rd is on; opt-in, not yet run on a GPU (2026-12-05).
//
// Why: the m ≤ 16 BF16 path (tile_gemm_kernel in gemm.cu) stages weights through shared memory
// (cp.async in, ldmatrix out). On the whole H200 it streams the LM head at 4.1 TB/s, but in the
// 16-SM slice each SM must move ~94 GB/s (47 B/clk) for the slice's copy rate, and the staging
// costs that twice in shared-memory bandwidth plus the activation tile's reads; the sixth
// session's eager trace gave the LM head 2.7 ms there, ≈ 50% of the slice's copy rate.
// Here every weight byte goes from global memory straight into mma.sync A fragments:
//   warp = 16 weight rows × all of K; lane (g = lane / 4, t = lane % 4) loads, per 32-column chunk
//   c, the 16 bytes of rows g and g + 8 at columns 32c + 8t … + 7 (streaming loads) and of each
//   token tile's token g (8 tokens per tile, L1/L2-resident). The k order inside a chunk is
//   permuted, identically for A and B: mma step s ∈ {0, 1} takes elements 4s, 4s+1 of the lane's
//   16 bytes as k-slots 2t, 2t+1 and elements 4s+2, 4s+3 as 2t+8, 2t+9, so the 16-byte loads are
//   the fragments and no shuffle or shared memory is needed. U chunks are loaded before any is
//   multiplied (U KB in flight per warp).
// Rows past n read row n − 1 and are not stored; tokens past m read zeros. K % 32 == 0.
//
// Written against a small device API so that tests/runtime/cuda_emu.h can run it on the CPU: the
// includer defines g4c_mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t
// b1) (mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32, d += a·b) and g4c_ld_stream16(const U4*)
// (a 16-byte load that need not stay in cache) before including it.
#pragma once

#include <cstdint>

namespace g4c::cuda::gemv_detail {

struct alignas(16) U4 {
  uint32_t x, y, z, w;
};

constexpr int kGemvWarps = 4;  // warps per block (each independent)
constexpr int kGemvU = 8;      // 32-column chunks loaded ahead per warp

struct GemvArgs {
  const uint16_t* x;  // bf16 [m][ldx]
  int m, ldx;
  const uint16_t* w;  // bf16 [n][k], row stride k
  int n, k;
  float* y;  // fp32 [m][ldy]
  int ldy;
  float softcap;  // > 0: y = softcap · tanh(v / softcap)
};

__device__ __forceinline__ uint32_t word(const U4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// MT token tiles of 8 (m ≤ 8: 1, m ≤ 16: 2).
template <int MT>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_bf16_kernel(const GemvArgs a) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int warps = int(gridDim.x) * kGemvWarps;
  const int nt = (a.n + 15) / 16, nc = a.k / 32;
  const U4 zero{0, 0, 0, 0};
  for (int tile = int(blockIdx.x) * kGemvWarps + int(threadIdx.x >> 5); tile < nt; tile += warps) {
    const int r0 = tile * 16 + g, r1 = r0 + 8;
    const U4* wr0 = reinterpret_cast<const U4*>(a.w + long(min(r0, a.n - 1)) * a.k) + t;
    const U4* wr1 = reinterpret_cast<const U4*>(a.w + long(min(r1, a.n - 1)) * a.k) + t;
    const U4* xr[MT];
    bool xin[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int tok = mt * 8 + g;
      xin[mt] = tok < a.m;
      xr[mt] = reinterpret_cast<const U4*>(a.x + long(xin[mt] ? tok : 0) * a.ldx) + t;
    }
    float acc[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.f;
    for (int c0 = 0; c0 < nc; c0 += kGemvU) {
      U4 wa[kGemvU], wb[kGemvU], xv[kGemvU][MT];
#pragma unroll
      for (int u = 0; u < kGemvU; ++u) {
        const int c = min(c0 + u, nc - 1);  // (past the end: a repeat, multiplied by nothing below)
        wa[u] = g4c_ld_stream16(wr0 + 4 * c);
        wb[u] = g4c_ld_stream16(wr1 + 4 * c);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) xv[u][mt] = xin[mt] ? xr[mt][4 * c] : zero;
      }
#pragma unroll
      for (int u = 0; u < kGemvU; ++u) {
        if (c0 + u >= nc) break;
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          const uint32_t af[4] = {word(wa[u], 2 * s), word(wb[u], 2 * s), word(wa[u], 2 * s + 1),
                                  word(wb[u], 2 * s + 1)};
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            g4c_mma_bf16_16816(acc[mt], af, word(xv[u][mt], 2 * s), word(xv[u][mt], 2 * s + 1));
        }
      }
    }
    // C fragment: (row g, tokens 2t, 2t + 1) and (row g + 8, the same tokens) of each token tile.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = i < 2 ? r0 : r1, tok = mt * 8 + 2 * t + (i & 1);
        if (row >= a.n || tok >= a.m) continue;
        const float v = acc[mt][i];
        a.y[long(tok) * a.ldy + row] = a.softcap > 0.f ? a.softcap * tanhf(v / a.softcap) : v;
      }
  }
}

}  // namespace g4c::cuda::gemv_detail
