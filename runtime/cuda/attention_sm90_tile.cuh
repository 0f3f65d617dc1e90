// The per-key-tile math of the Hopper prefill attention kernel (attention_sm90.cu): S = Q·Kᵀ and O += P·V on
// wgmma, and the online softmax between them (fp32, base 2, lazy rescale). Thread layout: one
// warpgroup's 64 query rows, mma.m16n8's accumulator layout per warp (rows g and g + 8 of the
// warp's 16, columns 2t, 2t + 1 of each 8-wide block). Only included from .cu files built for
// sm_90a.
#pragma once

#include "runtime/cuda/common.cuh"
#include "runtime/cuda/wgmma.cuh"

namespace g4c::cuda::detail {

// S = Q·Kᵀ for one BK-key tile into s (zeroed first), committed as one wgmma group. dq: the
// warpgroup's rows of the Q tile (QROWS rows per 64-column block), dks: the K stage; both in the
// canonical 128-byte-swizzle layout (cbs, attention_impl.cuh).
template <int D, int BK, int QROWS>
__device__ __forceinline__ void sm90_issue_s(float (&s)[BK / 2], uint64_t dq, uint64_t dks) {
#pragma unroll
  for (int j = 0; j < BK / 2; ++j) s[j] = 0.f;
  wgmma_fence();
#pragma unroll
  for (int kd = 0; kd < D / 16; ++kd)
    wgmma_ss(s, dq + (((kd >> 2) * (QROWS * 128) + (kd & 3) * 32) >> 4),
             dks + (((kd >> 2) * (BK * 128) + (kd & 3) * 32) >> 4));
  wgmma_commit();
}

// O += P·V for one tile (A = P from registers, B = the V stage dvs, N-major), one wgmma group.
template <int BK>
__device__ __forceinline__ void sm90_issue_pv(float (&o)[128], const uint32_t (&pa)[BK / 16][4], uint64_t dvs) {
  wgmma_fence();  // O / P written since (S and P·V are separate pipeline stages)
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) wgmma_rs_tb(o, pa[kk], dvs + ((kk * 2048) >> 4));
  wgmma_commit();
}

// What the softmax needs of the thread's two rows: their positions p0 / p1 and validity (rows
// past the block's queries see nothing), the block's pmin / pmax (keys every valid row sees: ≤
// pmin and > pmax − window), the window (0: none), t = lane & 3 and the scale · log2(e).
struct Sm90RowMask {
  int p0, p1, pmin, pmax, window, t;
  bool valid0, valid1;
  float sl;
};

// Tile j0 … j0 + BK − 1's scores in s → P (unnormalized, in s), the rows' reference maxima m and
// sums l updated; c0 / c1: O's rescale factors. Scores stay unscaled (scale > 0: the maximum
// commutes with it); the scale folds into the exponent's FFMA. Tiles that every row sees whole
// skip the per-element mask. Lazy rescale: a row's reference moves only when the tile's maximum
// exceeds it by more than 8 (P ≤ 256 otherwise; O and l share the reference; c = 1 otherwise,
// also while a row has seen no visible key).
template <int BK>
__device__ __forceinline__ void sm90_softmax(float (&s)[BK / 2], float& m0, float& m1, float& l0, float& l1,
                                             float& c0, float& c1, int j0, const Sm90RowMask r) {
  const bool whole = j0 + BK - 1 <= r.pmin && (r.window == 0 || j0 > r.pmax - r.window);
  float mx0 = -INFINITY, mx1 = -INFINITY;
  if (whole) {
#pragma unroll
    for (int k = 0; k < BK / 2; k += 4) {
      mx0 = fmaxf(mx0, fmaxf(s[k], s[k + 1]));
      mx1 = fmaxf(mx1, fmaxf(s[k + 2], s[k + 3]));
    }
  } else {
#pragma unroll
    for (int k = 0; k < BK / 2; ++k) {
      const int j = j0 + (k >> 2) * 8 + 2 * r.t + (k & 1);
      const bool hi = (k >> 1) & 1;
      const int p = hi ? r.p1 : r.p0;
      const bool vis = (hi ? r.valid1 : r.valid0) && j <= p && (r.window == 0 || j > p - r.window);
      const float v = vis ? s[k] : -INFINITY;
      s[k] = v;
      if (hi) mx1 = fmaxf(mx1, v); else mx0 = fmaxf(mx0, v);
    }
  }
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
  }
  mx0 *= r.sl;  // −∞ stays −∞
  mx1 *= r.sl;
  const float mn0 = mx0 > m0 + 8.f ? mx0 : m0, mn1 = mx1 > m1 + 8.f ? mx1 : m1;
  const float b0 = mn0 == -INFINITY ? 0.f : mn0, b1 = mn1 == -INFINITY ? 0.f : mn1;
  c0 = mn0 == m0 ? 1.f : fast_exp2(m0 - b0);
  c1 = mn1 == m1 ? 1.f : fast_exp2(m1 - b1);
  float ls0 = 0.f, ls1 = 0.f;
#pragma unroll
  for (int k = 0; k < BK / 2; k += 4) {
    s[k] = fast_exp2(fmaf(s[k], r.sl, -b0));
    s[k + 1] = fast_exp2(fmaf(s[k + 1], r.sl, -b0));
    s[k + 2] = fast_exp2(fmaf(s[k + 2], r.sl, -b1));
    s[k + 3] = fast_exp2(fmaf(s[k + 3], r.sl, -b1));
    ls0 += s[k] + s[k + 1];
    ls1 += s[k + 2] + s[k + 3];
  }
  l0 = l0 * c0 + ls0;
  l1 = l1 * c1 + ls1;
  m0 = mn0;
  m1 = mn1;
}

// O's rescale (skipped when no row of the warp moved its reference: most tiles) and P packed to
// bf16 A fragments for the P·V wgmma.
template <int DV, int BK>
__device__ __forceinline__ void sm90_rescale_pack(float (&o)[DV / 2], const float (&s)[BK / 2],
                                                  uint32_t (&pa)[BK / 16][4], float c0, float c1) {
  if (__any_sync(0xffffffffu, c0 != 1.f || c1 != 1.f)) {
#pragma unroll
    for (int k = 0; k < DV / 2; k += 4) {
      o[k] *= c0; o[k + 1] *= c0; o[k + 2] *= c1; o[k + 3] *= c1;
    }
  }
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
    pa[kk][0] = pack_bf162(s[8 * kk], s[8 * kk + 1]);
    pa[kk][1] = pack_bf162(s[8 * kk + 2], s[8 * kk + 3]);
    pa[kk][2] = pack_bf162(s[8 * kk + 4], s[8 * kk + 5]);
    pa[kk][3] = pack_bf162(s[8 * kk + 6], s[8 * kk + 7]);
  }
}

// Merging another part's state of the same rows (pm = its m0 m1 l0 l1, same reference scheme)
// into this one's: m and l updated, and the weights O = O·a + O'·b takes per row (w = a0 b0 a1 b1).
__device__ __forceinline__ float4 sm90_merge_ml(float& m0, float& m1, float& l0, float& l1, float4 pm) {
  const float M0 = fmaxf(m0, pm.x), M1 = fmaxf(m1, pm.y);
  const float a0 = m0 == -INFINITY ? 0.f : exp2f(m0 - M0), b0 = pm.x == -INFINITY ? 0.f : exp2f(pm.x - M0);
  const float a1 = m1 == -INFINITY ? 0.f : exp2f(m1 - M1), b1 = pm.y == -INFINITY ? 0.f : exp2f(pm.y - M1);
  l0 = l0 * a0 + pm.z * b0;
  l1 = l1 * a1 + pm.w * b1;
  m0 = M0;
  m1 = M1;
  return make_float4(a0, b0, a1, b1);
}

}  // namespace g4c::cuda::detail
