// GPTQ column solve on the device (gptq_kernels.cuh): group parameters (static, or at each
// group's first column with the clip search), the blocked column loop, the later columns' update.
#include <cuda_fp16.h>

#include <cstdint>

#include "passes/quant/cuda/gptq_common.cuh"
#include "passes/quant/cuda/gptq_dgemm.cuh"
#include "passes/quant/cuda/gptq_kernels.cuh"

namespace g4c::cuda {
namespace {

using gptq_detail::blocks_for;
using gptq_detail::cdiv;
using gptq_detail::dgemm;
// ---- GPTQ solve ----

struct Params {
  float scale;
  int zero;
};

// quant::group_params on fp32 values (the host converts each double to float first).
__device__ Params make_params(float amax, float mn, float mx, bool symmetric) {
  Params p;
  if (symmetric) {
    float s = amax < 1e-8f ? 1e-8f : amax;  // std::max(amax, 1e-8f)
    s = __fdiv_rn(s, 7.0f);
    p.scale = __half2float(__float2half_rn(s));
    p.zero = 8;
  } else {
    float s = __fdiv_rn(__fsub_rn(mx, mn), 15.0f);
    s = s < 1e-8f ? 1e-8f : s;
    const float z = rintf(__fdiv_rn(-mn, s));
    p.scale = __half2float(__float2half_rn(s));
    p.zero = int(z < 0.f ? 0.f : (z > 15.f ? 15.f : z));
  }
  return p;
}

__device__ int quantize_code(float w, Params p) {
  if (p.scale == 0.f) return p.zero;
  const float c = __fadd_rn(rintf(__fdiv_rn(w, p.scale)), float(p.zero));
  return c < 0.f ? 0 : (c > 15.f ? 15 : int(c));
}

// Σ (w − ŵ)² of one group under p: float64 sum of exact fp32 differences (quant::group_sq_error).
__device__ double group_sq_error(const float* __restrict__ W, const uint8_t* __restrict__ dead, int64_t c0,
                                 int64_t c1, Params p) {
  double e = 0.0;
  for (int64_t c = c0; c < c1; ++c) {
    const float v = dead[c] ? 0.f : W[c];
    const float deq = __fmul_rn(float(quantize_code(v, p) - p.zero), p.scale);
    const double d = __dsub_rn(double(v), double(deq));
    e = __dadd_rn(e, __dmul_rn(d, d));
  }
  return e;
}

// Static groups (act_order): params of group g of row o from the unpermuted weights;
// with clip_steps > 0 the MSE-optimal shrink of the range (quant::group_params with a ClipSearch).
__global__ void static_params_kernel(const float* __restrict__ W, const uint8_t* __restrict__ dead, int64_t out,
                                     int64_t n, int G, int64_t ng, bool symmetric, int clip_grid, int clip_steps,
                                     float* scales, uint8_t* zeros) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= out * ng) return;
  const int64_t o = idx / ng, g = idx % ng, c0 = g * G, c1 = c0 + G < n ? c0 + G : n;
  const float* row = W + o * n;
  float amax = 0.f, mn = 0.f, mx = 0.f;
  for (int64_t c = c0; c < c1; ++c) {
    const float v = dead[c] ? 0.f : row[c];
    const float a = fabsf(v);
    amax = amax < a ? a : amax;
    mn = v < mn ? v : mn;
    mx = mx < v ? v : mx;
  }
  Params p = make_params(amax, mn, mx, symmetric);
  if (clip_grid > 0 && clip_steps > 1) {
    double best = group_sq_error(row, dead, c0, c1, p);
    for (int i = 1; i < clip_steps; ++i) {
      const float sh = __fsub_rn(1.0f, __fdiv_rn(float(i), float(clip_grid)));
      const Params c = make_params(__fmul_rn(amax, sh), __fmul_rn(mn, sh), __fmul_rn(mx, sh), symmetric);
      const double e = group_sq_error(row, dead, c0, c1, c);
      if (e < best) {
        best = e;
        p = c;
      }
    }
  }
  scales[idx] = p.scale;
  zeros[idx] = uint8_t(p.zero);
}

__global__ void init_w_kernel(const float* __restrict__ W, const uint8_t* __restrict__ dead,
                              const int64_t* __restrict__ perm, int64_t out, int64_t n, double* __restrict__ wd) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= out * n) return;
  const int64_t o = idx / n, j = idx % n, c = perm ? perm[j] : j;
  wd[idx] = dead[c] ? 0.0 : double(W[o * n + c]);
}

// One column block [i1, i1 + bw) of GPTQ: a warp per row, lane l holds columns i1 + l + 32k.
// The block of U is staged in shared memory (bw² doubles), followed by a 128-float buffer per
// warp for the clip search of a group's current values.
template <int K>
__global__ void __launch_bounds__(1024) solve_block_kernel(GptqSolveArgs a, int64_t i1, int bw) {
  extern __shared__ double Us[];  // [bw][bw], then float gv[warps][128]
  const int64_t n = a.n;
  for (int l = threadIdx.x; l < bw * bw; l += blockDim.x) Us[l] = a.U[(i1 + l / bw) * n + i1 + l % bw];
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const int64_t o = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (o >= a.out) return;
  const int G = a.group;
  const int64_t ng = a.padded_in / G;
  double* wrow = a.wd + o * n;
  double w[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int t = lane + 32 * k;
    w[k] = t < bw ? wrow[i1 + t] : 0.0;
  }
  double loss = a.row_loss[o];
  Params p{0.f, 8};
#pragma unroll
  for (int kq = 0; kq < K; ++kq) {
    for (int l = 0; l < 32; ++l) {
      const int t = kq * 32 + l;
      if (t >= bw) break;
      const int64_t i = i1 + t;
      const int64_t col = a.act_order ? a.perm[i] : i;
      if (!a.static_groups && i % G == 0) {
        const int gl = int(n - i < G ? n - i : G);
        float amax = 0.f, mn = 0.f, mx = 0.f;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          const int tt = lane + 32 * k;
          if (tt >= t && tt < t + gl) {
            const float v = float(w[k]);
            const float av = fabsf(v);
            amax = amax < av ? av : amax;
            mn = v < mn ? v : mn;
            mx = mx < v ? v : mx;
          }
        }
#pragma unroll
        for (int off = 16; off; off >>= 1) {
          const float oa = __shfl_xor_sync(0xffffffffu, amax, off), on = __shfl_xor_sync(0xffffffffu, mn, off),
                      ox = __shfl_xor_sync(0xffffffffu, mx, off);
          amax = amax < oa ? oa : amax;
          mn = on < mn ? on : mn;
          mx = mx < ox ? ox : mx;
        }
        p = make_params(amax, mn, mx, a.symmetric);
        if (a.clip_grid > 0 && a.clip_steps > 1) {
          // quant::group_params with a ClipSearch on the group's current values: lane l scores
          // candidates l, l + 32, …, each summed in column order as the host does; the first
          // candidate of least error wins (ties: the smaller shrink index, as the host's strict <).
          float* gv = reinterpret_cast<float*>(Us + bw * bw) + (threadIdx.x / 32) * 128;
#pragma unroll
          for (int k = 0; k < K; ++k) {
            const int tt = lane + 32 * k;
            if (tt >= t && tt < t + gl) gv[tt - t] = float(w[k]);
          }
          __syncwarp();
          double best = 0.0;
          int besti = -1;
          for (int ci = lane; ci < a.clip_steps; ci += 32) {
            const float sh = __fsub_rn(1.0f, __fdiv_rn(float(ci), float(a.clip_grid)));
            const Params c =
                ci == 0 ? p : make_params(__fmul_rn(amax, sh), __fmul_rn(mn, sh), __fmul_rn(mx, sh), a.symmetric);
            double e = 0.0;
            for (int x = 0; x < gl; ++x) {
              const float v = gv[x];
              const float deq = __fmul_rn(float(quantize_code(v, c) - c.zero), c.scale);
              const double d = __dsub_rn(double(v), double(deq));
              e = __dadd_rn(e, __dmul_rn(d, d));
            }
            if (besti < 0 || e < best) {
              best = e;
              besti = ci;
            }
          }
#pragma unroll
          for (int off = 16; off; off >>= 1) {
            const double ob = __shfl_xor_sync(0xffffffffu, best, off);
            const int oi = __shfl_xor_sync(0xffffffffu, besti, off);
            if (oi >= 0 && (besti < 0 || ob < best || (ob == best && oi < besti))) {
              best = ob;
              besti = oi;
            }
          }
          if (besti > 0) {
            const float sh = __fsub_rn(1.0f, __fdiv_rn(float(besti), float(a.clip_grid)));
            p = make_params(__fmul_rn(amax, sh), __fmul_rn(mn, sh), __fmul_rn(mx, sh), a.symmetric);
          }
          __syncwarp();
        }
        if (lane == 0) {
          a.scales[o * ng + i / G] = p.scale;
          a.zeros[o * ng + i / G] = uint8_t(p.zero);
        }
      } else if (a.static_groups) {
        p = {a.scales[o * ng + col / G], int(a.zeros[o * ng + col / G])};
      }
      const float wf = float(__shfl_sync(0xffffffffu, w[kq], l));
      const int code = quantize_code(wf, p);
      const float deq = __fmul_rn(float(code - p.zero), p.scale);
      const double err = __dsub_rn(double(wf), double(deq));
      const double d = Us[t * bw + t];
      const double e = __ddiv_rn(err, d);
      loss = __dadd_rn(loss, __ddiv_rn(__ddiv_rn(__dmul_rn(err, err), __dmul_rn(d, d)), 2.0));
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int tt = lane + 32 * k;
        if (tt > t && tt < bw) w[k] = __dsub_rn(w[k], __dmul_rn(e, Us[t * bw + tt]));
      }
      if (lane == 0) {
        a.codes[o * a.padded_in + col] = uint8_t(code);
        a.err[o * kSolveErrBlocks * a.block + i1 % (kSolveErrBlocks * a.block) + t] = e;
      }
    }
  }
  if (lane == 0) a.row_loss[o] = loss;
}

__global__ void pad_codes_kernel(GptqSolveArgs a) {
  const int64_t pad = a.padded_in - a.n;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.out * pad) return;
  const int64_t o = idx / pad, c = a.n + idx % pad;
  a.codes[o * a.padded_in + c] = a.zeros[o * (a.padded_in / a.group) + c / a.group];
}

template <int K>
cudaError_t launch_block(const GptqSolveArgs& a, int64_t i1, int bw, cudaStream_t s) {
  const int rows_per_cta = 32;
  const size_t clip_buf = size_t(rows_per_cta) * 128 * sizeof(float);  // one group's values per warp
  const size_t smem = size_t(bw) * bw * sizeof(double) + clip_buf;
  static bool attr = false;
  if (!attr) {
    const cudaError_t e = cudaFuncSetAttribute(solve_block_kernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               int(128 * 128 * 8 + clip_buf));
    if (e != cudaSuccess) return e;
    attr = true;
  }
  solve_block_kernel<K><<<unsigned(cdiv(a.out, rows_per_cta)), 32 * rows_per_cta, smem, s>>>(a, i1, bw);
  return cudaGetLastError();
}

}  // namespace

cudaError_t gptq_solve(const GptqSolveArgs& a, cudaStream_t s) {
  if (a.out <= 0 || a.n <= 0) return cudaSuccess;
  if (a.block <= 0 || a.block > 128 || (!a.act_order && a.block % a.group)) return cudaErrorInvalidValue;
  const int64_t ng = a.padded_in / a.group;
  if (a.act_order && !a.static_groups) return cudaErrorInvalidValue;
  if (a.static_groups) {
    static_params_kernel<<<blocks_for(a.out * ng), 256, 0, s>>>(a.w, a.dead, a.out, a.n, a.group, ng, a.symmetric,
                                                                a.clip_grid, a.clip_steps, a.scales, a.zeros);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  init_w_kernel<<<blocks_for(a.out * a.n), 256, 0, s>>>(a.w, a.dead, a.act_order ? a.perm : nullptr, a.out, a.n,
                                                        a.wd);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  if ((e = cudaMemsetAsync(a.row_loss, 0, size_t(a.out) * 8, s)) != cudaSuccess) return e;
  for (int64_t i1 = 0; i1 < a.n; i1 += a.block) {
    const int bw = int(a.n - i1 < a.block ? a.n - i1 : a.block);
    switch ((bw + 31) / 32) {
      case 1: e = launch_block<1>(a, i1, bw, s); break;
      case 2: e = launch_block<2>(a, i1, bw, s); break;
      case 3: e = launch_block<3>(a, i1, bw, s); break;
      default: e = launch_block<4>(a, i1, bw, s); break;
    }
    if (e != cudaSuccess) return e;
    // The rest of this superblock now (its columns are solved next), the columns after it from
    // all of its errors at once when its last block is done: the same products, fewer passes over wd.
    const int64_t S = int64_t(kSolveErrBlocks) * a.block, s0 = i1 / S * S, s_end = s0 + S < a.n ? s0 + S : a.n;
    const int64_t i2 = i1 + bw;
    if (i2 < s_end && (e = dgemm<false, false>(a.out, s_end - i2, bw, a.err + (i1 - s0), S, a.U + i1 * a.n + i2, a.n,
                                               a.wd + i2, a.n, -1.0, 1.0, s)) != cudaSuccess)
      return e;
    if (i2 == s_end && s_end < a.n &&
        (e = dgemm<false, false>(a.out, a.n - s_end, s_end - s0, a.err, S, a.U + s0 * a.n + s_end, a.n, a.wd + s_end,
                                 a.n, -1.0, 1.0, s)) != cudaSuccess)
      return e;
  }
  if (a.padded_in > a.n) {
    pad_codes_kernel<<<blocks_for(a.out * (a.padded_in - a.n)), 256, 0, s>>>(a);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace g4c::cuda
