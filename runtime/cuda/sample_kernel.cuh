// The device sampler's kernel (runtime/cuda/sample.cu launches it): CUDA C++ over a small
// part of the device API (threadIdx, blockIdx, __syncthreads, __shfl_xor_sync, __shfl_up_sync,
// atomicAdd on shared uint32 / double, expf, isfinite, __float_as_uint, min / max), so that
// tests/runtime/cuda_emu.h can run the same source on the CPU, a thread per CUDA thread
// (tests/runtime/test_sample_kernel_emu.cpp). Include after the CUDA headers (or the emulator);
// it declares namespace g4c::cuda::sample_detail and includes nothing CUDA of its own.
#pragma once

#include <cstdint>

#include "runtime/cuda/sample_row.h"

namespace g4c::cuda::sample_detail {

constexpr int kST = 1024;  // threads per row
constexpr int kSBins = 2048;
constexpr float kXMax = 104.0f;  // exp(−x) is 0 in float past ~103.97 (sampler.cpp's kXMax)
constexpr float kSBinScale = kSBins / kXMax;
// A radix descent keeps the indices of its bin's tokens (found by its first pass over the row) when
// they fit, so its later passes read only those: a Gaussian row's nucleus or top-k boundary bin
// holds tens of tokens, a T = 4 row's bulk bins ~2000 (2048 bins over 262k tokens).
// (G4C_SAMPLE_KERNEL_CANDIDATES: a smaller list, so that a test takes the overflow path — full
// passes — on most rows.)
#ifndef G4C_SAMPLE_KERNEL_CANDIDATES
#define G4C_SAMPLE_KERNEL_CANDIDATES 3072
#endif
constexpr int kSCand = G4C_SAMPLE_KERNEL_CANDIDATES;

__device__ __forceinline__ uint32_t fkey(float v) {
  if (v != v) v = -INFINITY;
  if (v == 0.0f) v = 0.0f;  // −0 → +0: the host compares them equal
  const uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ uint64_t okey(float v, int i) {
  return (uint64_t(fkey(v)) << 32) | uint64_t(0xFFFFFFFFu - uint32_t(i));
}
__device__ __forceinline__ int okey_index(uint64_t k) { return int(0xFFFFFFFFu - uint32_t(k)); }
__device__ __forceinline__ int sbin(float x) { return x <= kXMax ? min(kSBins - 1, int(x * kSBinScale)) : kSBins - 1; }
__device__ __forceinline__ float sweight(float x) { return x <= kXMax ? expf(-x) : 0.0f; }

// Block-wide helpers (all kST threads call them; `red` is shared scratch of ≥ 32 entries).
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, T* red, Op op) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[w] = v;
  __syncthreads();
  v = red[0];
  for (int i = 1; i < kST / 32; ++i) v = op(v, red[i]);
  return v;
}
// Inclusive scan over the block's threads (thread order).
template <class T>
__device__ __forceinline__ T block_scan(T v, T* red) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  __syncthreads();
  if (lane == 31) red[w] = v;
  __syncthreads();
  T base = 0;
  for (int i = 0; i < w; ++i) base += red[i];
  return v + base;
}

struct RowCtx {
  const float* l;
  int n;
  float mx, inv_t;
  __device__ float x(int i) const { return (mx - l[i]) * inv_t; }
};

struct Shared {
  uint32_t cnt[kSBins];
  double mass[kSBins];
  double dred[32];
  uint32_t ured[32];
  int ired[32];
  unsigned long long kred[32];
  int found;
  double base;  // the weight or count of the order before the found digit / bin
  int ncand;    // descend: tokens of its bin seen by the first pass (the list's length when ≤ kSCand)
  int cand[kSCand];
};

// The first entry r (0 ≤ r < nb, in order) where base + Σ_{≤ r} h ≥ need; sets sh.found and
// sh.base += Σ_{< found} h. Should rounding leave the total short (the sums of a bin and of its
// digits are added in different orders), the last nonzero entry: the whole range. Entry r is at
// h[r] (rev = false) or h[nb − 1 − r] (rev = true: digits, highest first). Two entries per thread.
template <class T>
__device__ void find_crossing(const T* h, int nb, bool rev, double need, Shared& sh, T* red) {
  const int r0 = 2 * int(threadIdx.x);
  auto at = [&](int r) -> T { return r < nb ? h[rev ? nb - 1 - r : r] : T(0); };
  const T a = at(r0), b = at(r0 + 1);
  const T incl = block_scan<T>(a + b, red);  // through r0 + 1
  const double before = double(incl - a - b);
  const double base = sh.base;
  const int nz = b > T(0) ? r0 + 1 : a > T(0) ? r0 : -1;
  const int last_nz = block_reduce(nz, sh.ired, [](int x, int y) { return x > y ? x : y; });
  if (threadIdx.x == 0) sh.found = -1;
  __syncthreads();
  // One writer: the entry where the running sum first reaches need (it only grows).
  if (r0 < nb && base + before < need && base + before + double(a) >= need) sh.found = r0;
  else if (r0 + 1 < nb && base + before + double(a) < need && base + before + double(a) + double(b) >= need)
    sh.found = r0 + 1;
  __syncthreads();
  const int f = sh.found >= 0 ? sh.found : max(last_nz, 0);
  __syncthreads();
  if (threadIdx.x == 0) sh.found = f;
  // sh.base += Σ_{< f}: the thread holding f knows it.
  if (r0 == f || r0 + 1 == f) sh.base = base + before + (r0 + 1 == f ? double(a) : 0.0);
  __syncthreads();
}

// The okey of the boundary token: in x-bin `bin`, the one where count (MASS = false) or weight
// (MASS = true) of the order, starting from sh.base (the bins before), reaches `need`.
template <bool MASS>
__device__ uint64_t descend(const RowCtx& c, int bin, double need, Shared& sh, bool use_list) {
  uint64_t prefix = 0;
  int known = 0;
  if (threadIdx.x == 0) sh.ncand = 0;
#pragma unroll 1
  for (int pass = 0; pass < 6; ++pass) {
    const int wd = pass < 4 ? 11 : 10, shift = 64 - known - wd;
    for (int d = threadIdx.x; d < kSBins; d += kST) {
      sh.cnt[d] = 0;
      sh.mass[d] = 0.0;
    }
    __syncthreads();
    auto take = [&](int i, float x) {
      const uint64_t k = okey(c.l[i], i);
      if (known > 0 && (k >> (64 - known)) != (prefix >> (64 - known))) return;
      const int d = int((k >> shift) & ((1u << wd) - 1));
      if constexpr (MASS) atomicAdd(&sh.mass[d], double(sweight(x)));
      else atomicAdd(&sh.cnt[d], 1u);
    };
    const int nc = pass > 0 ? sh.ncand : 0;  // (pass 0 is still counting)
    if (use_list && pass > 0 && nc <= kSCand) {
      for (int j = threadIdx.x; j < nc; j += kST) {
        const int i = sh.cand[j];
        take(i, c.x(i));
      }
    } else {
      for (int i = threadIdx.x; i < c.n; i += kST) {
        const float x = c.x(i);
        if (sbin(x) != bin) continue;
        if (pass == 0) {
          const int slot = int(atomicAdd(reinterpret_cast<uint32_t*>(&sh.ncand), 1u));
          if (slot < kSCand) sh.cand[slot] = i;
        }
        take(i, x);
      }
    }
    __syncthreads();
    if constexpr (MASS) find_crossing<double>(sh.mass, 1 << wd, true, need, sh, sh.dred);
    else find_crossing<uint32_t>(sh.cnt, 1 << wd, true, need, sh, sh.ured);
    const int digit = (1 << wd) - 1 - sh.found;
    prefix |= uint64_t(digit) << shift;
    known += wd;
  }
  return prefix;
}

__global__ void __launch_bounds__(kST) sample_kernel(const float* __restrict__ logits, int n, long ldl,
                                                      const SampleRow* __restrict__ rows, int* __restrict__ out,
                                                      bool use_list) {
  __shared__ Shared sh;
  const SampleRow p = rows[blockIdx.x];
  const float* l = logits + long(blockIdx.x) * ldl;
  // The first token of the order (argmax: highest key, lowest index on ties).
  unsigned long long best = 0;
  for (int i = threadIdx.x; i < n; i += kST) best = max(best, (unsigned long long)okey(l[i], i));
  best = block_reduce(best, sh.kred, [](unsigned long long a, unsigned long long b) { return a > b ? a : b; });
  const int bi = okey_index(best);
  const float mx = l[bi];
  if (p.temperature <= 0.0f || !isfinite(mx)) {
    if (threadIdx.x == 0) out[blockIdx.x] = bi;
    return;
  }
  const RowCtx c{l, n, mx, 1.0f / p.temperature};
  const bool top_k = p.top_k > 0 && p.top_k < n, nucleus = p.top_p < 1.0f;
  uint64_t lim = 0;  // K = {okey ≥ lim}: every okey is > 0 (fkey(−inf) > 0)
  double z = 0;      // Σ_C w
  if (top_k || nucleus) {
    for (int d = threadIdx.x; d < kSBins; d += kST) {
      sh.cnt[d] = 0;
      sh.mass[d] = 0.0;
    }
    __syncthreads();
    double zt = 0;
    for (int i = threadIdx.x; i < n; i += kST) {
      const float x = c.x(i);
      const float w = sweight(x);
      const int b = sbin(x);
      atomicAdd(&sh.cnt[b], 1u);
      atomicAdd(&sh.mass[b], double(w));
      zt += w;
    }
    z = block_reduce(zt, sh.dred, [](double a, double b) { return a + b; });  // (also orders the histograms)
    if (top_k) {
      if (threadIdx.x == 0) sh.base = 0.0;
      __syncthreads();
      find_crossing<uint32_t>(sh.cnt, kSBins, false, double(p.top_k), sh, sh.ured);
      const int bk = sh.found;
      lim = descend<false>(c, bk, double(p.top_k), sh, use_list);
      // z over the candidates only.
      double zc = 0;
      for (int i = threadIdx.x; i < n; i += kST)
        if (okey(l[i], i) >= lim) zc += sweight(c.x(i));
      z = block_reduce(zc, sh.dred, [](double a, double b) { return a + b; });
      if (nucleus) {  // the x-bins' weights again (descend reused the arrays)
        for (int d = threadIdx.x; d < kSBins; d += kST) sh.mass[d] = 0.0;
        __syncthreads();
        for (int i = threadIdx.x; i < n; i += kST) {
          const float x = c.x(i);
          atomicAdd(&sh.mass[sbin(x)], double(sweight(x)));
        }
        __syncthreads();
      }
    }
    if (nucleus) {
      const double target = double(p.top_p) * z;
      if (threadIdx.x == 0) sh.base = 0.0;
      __syncthreads();
      find_crossing<double>(sh.mass, kSBins, false, target, sh, sh.dred);
      const int bp = sh.found;
      const uint64_t e = descend<true>(c, bp, target, sh, use_list);
      lim = e > lim ? e : lim;  // the shorter prefix
    }
  }
  // The draw over K in index order: contiguous segments per thread.
  const int seg = (n + kST - 1) / kST, i0 = min(n, int(threadIdx.x) * seg), i1 = min(n, i0 + seg);
  double ss = 0;
  int last = -1;  // the segment's last token of K with positive weight
  for (int i = i0; i < i1; ++i) {
    if (okey(l[i], i) < lim) continue;
    const float w = sweight(c.x(i));
    if (w > 0.0f) {
      ss += w;
      last = i;
    }
  }
  const double incl = block_scan<double>(ss, sh.dred);
  __syncthreads();
  if (threadIdx.x == kST - 1) sh.base = incl;  // s = Σ_K w
  __syncthreads();
  const double s = sh.base, target = p.u * s;
  const int lastk = block_reduce(last, sh.ired, [](int a, int b) { return a > b ? a : b; });
  if (threadIdx.x == 0) sh.found = -1;
  __syncthreads();
  double run = incl - ss;
  if (run <= target && target < incl) {  // this segment holds the crossing (segments are disjoint)
    int f = last;  // (the walk's own sums falling short of incl by rounding: its last token)
    for (int i = i0; i < i1; ++i) {
      if (okey(l[i], i) < lim) continue;
      const float w = sweight(c.x(i));
      if (w > 0.0f && (run += w) > target) {
        f = i;
        break;
      }
    }
    sh.found = f;
  }
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = sh.found >= 0 ? sh.found : lastk;  // (rounding: the last of K)
}

}  // namespace g4c::cuda::sample_detail
