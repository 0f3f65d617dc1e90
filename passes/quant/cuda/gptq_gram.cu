// GPTQ Hessians on the device (gptq_kernels.cuh): the Gram of the calibration rows (fp32 FMA
// chains from host rows, tensor cores from the forward's bf16 rows), its float64 sum, dead columns.
#include <cuda_bf16.h>

#include <cstdint>

#include "passes/quant/cuda/gptq_common.cuh"
#include "passes/quant/cuda/gptq_kernels.cuh"

namespace g4c::cuda {
namespace {

using gptq_detail::blocks_for;
using gptq_detail::cdiv;
// ---- Gram: partial = XᵀX, 128×128 tiles on and above the diagonal ----
// 256 threads; thread (tx, ty) of 16×16 holds rows {ty·4 + i, 64 + ty·4 + i} and the same
// columns in tx. Rows past `rows` load as 0: fma(0, 0, acc) = acc (acc is never −0: it starts
// at +0 and a sum that cancels to zero is +0 under round-to-nearest).
__global__ void __launch_bounds__(256) gram_kernel(const float* __restrict__ X, int64_t rows, int64_t n, int64_t ld,
                                                   float* __restrict__ P, bool accumulate) {
  const int bi = blockIdx.y, bj = blockIdx.x;
  if (bj < bi) return;
  const int64_t i0 = int64_t(bi) * 128, j0 = int64_t(bj) * 128;
  __shared__ __align__(16) float As[8][128];
  __shared__ __align__(16) float Bs[8][128];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t r = i0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4), c = j0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
      acc[i][j] = accumulate && r < n && c < n ? P[r * n + c] : 0.f;
    }
  for (int64_t k0 = 0; k0 < rows; k0 += 8) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int l = tid + 256 * q, kk = l / 128, c = l % 128;
      const int64_t r = k0 + kk;
      float a = 0.f, b = 0.f;
      if (r < rows) {
        if (i0 + c < n) a = X[r * ld + i0 + c];
        if (j0 + c < n) b = X[r * ld + j0 + c];
      }
      As[kk][c] = a;
      Bs[kk][c] = b;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      float a[8], b[8];
      const float4 a0 = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[kk][64 + ty * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk][64 + tx * 4]);
      a[0] = a0.x, a[1] = a0.y, a[2] = a0.z, a[3] = a0.w, a[4] = a1.x, a[5] = a1.y, a[6] = a1.z, a[7] = a1.w;
      b[0] = b0.x, b[1] = b0.y, b[2] = b0.z, b[3] = b0.w, b[4] = b1.x, b[5] = b1.y, b[6] = b1.z, b[7] = b1.w;
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int64_t r = i0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
    if (r >= n) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t c = j0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
      if (c < n) P[r * n + c] = acc[i][j];
    }
  }
}

// ---- Hessian update on the tensor cores (bf16 rows): H += 2·double(XᵀX), 128×128 tiles on and
// above the diagonal ----
// A bf16 × bf16 product is exact in fp32 (8 + 8 significant bits); mma.sync.m16n8k16 sums the
// products in fp32 in its own order, so each tile's partial is the exact Gram up to fp32
// summation error. 8 warps, warp w owns rows (w / 4)·64 … +64 and columns (w % 4)·32 … +32 of the
// tile (4 × 4 fragments). X streams through kGramStages shared-memory stages of kGramK rows by
// 16-byte cp.async (zero-filled past `rows` and n); both operands are Xᵀ-by-X views of the same
// [row][column] layout, read with ldmatrix.trans. Rows that are not 16-byte aligned (`vec`
// false) take synchronous scalar loads into the same layout. The epilogue adds 2·double(partial)
// of each entry (i ≤ j) to H[i, j] and H[j, i] — one value for both, so H stays exactly symmetric
// — through a per-warp shared staging slab, coalesced both ways.
constexpr int kGramK = 32;          // rows of X per stage
constexpr int kGramStages = 3;
constexpr int kGramLd = 128 + 8;    // stage row length in bf16: 272 bytes, ldmatrix rows hit 8 bank groups
constexpr int kGramStage = 2 * kGramK * kGramLd;  // bf16: the i-tile's and the j-tile's columns
constexpr int kSlabLd = 32 + 4;     // epilogue slab row length (floats)
constexpr size_t kGramSmem = size_t(kGramStages) * kGramStage * 2;
static_assert(8 * 16 * kSlabLd * 4 <= kGramSmem, "the epilogue slabs fit the stages' memory");

__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  const unsigned s = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* p) {
  const unsigned s = unsigned(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(256) gram_add_tc_kernel(const __nv_bfloat16* __restrict__ X, int64_t rows,
                                                          int64_t n, int64_t ld, bool vec, double* __restrict__ H) {
  const int bi = blockIdx.y, bj = blockIdx.x;
  if (bj < bi) return;
  const int64_t i0 = int64_t(bi) * 128, j0 = int64_t(bj) * 128;
  extern __shared__ __align__(16) __nv_bfloat16 gsm[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wm = warp >> 2, wn = warp & 3;

  // Stage loads: 2 × 512 chunks of 8 bf16 (row u / 16, columns (u % 16)·8) per operand.
  auto load_stage = [&](int slot, int64_t r0) {
    __nv_bfloat16* S = gsm + slot * kGramStage;
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // 0: the i-tile's columns, 1: the j-tile's
      const int64_t c0 = half ? j0 : i0;
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int u = tid + 256 * q, kk = u >> 4, c = (u & 15) * 8;
        __nv_bfloat16* dst = S + (half * kGramK + kk) * kGramLd + c;
        const int64_t r = r0 + kk, col = c0 + c;
        if (vec) {
          const int64_t left = r < rows ? n - col : 0;
          const int bytes = left <= 0 ? 0 : left >= 8 ? 16 : int(left) * 2;
          cp_async16(dst, bytes ? X + r * ld + col : X, bytes);
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e)
            dst[e] = r < rows && col + e < n ? X[r * ld + col + e] : __float2bfloat16(0.f);
        }
      }
    }
  };

  float acc[4][4][4] = {};
  const int ktiles = int((rows + kGramK - 1) / kGramK);
#pragma unroll
  for (int s = 0; s < kGramStages - 1; ++s) {
    if (s < ktiles) load_stage(s, int64_t(s) * kGramK);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  // ldmatrix row addresses: lane L feeds row L % 8 of matrix L / 8.
  const int lq = lane >> 3, lr = lane & 7;
  for (int kt = 0; kt < ktiles; ++kt) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kGramStages - 2));
    __syncthreads();  // stage kt landed for every thread; stage kt − 1's slot is free
    const int next = kt + kGramStages - 1;
    if (next < ktiles) load_stage(next % kGramStages, int64_t(next) * kGramK);
    asm volatile("cp.async.commit_group;\n" ::);
    const __nv_bfloat16* Si = gsm + (kt % kGramStages) * kGramStage;
    const __nv_bfloat16* Sj = Si + kGramK * kGramLd;
#pragma unroll
    for (int kk = 0; kk < kGramK; kk += 16) {
      // A (m = column i, k = row): matrices (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15).
      uint32_t a[4][4];
#pragma unroll
      for (int f = 0; f < 4; ++f)
        ldmatrix_x4_trans(a[f], Si + (kk + lr + 8 * (lq >> 1)) * kGramLd + wm * 64 + f * 16 + 8 * (lq & 1));
      // B (k = row, n = column j): matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
      uint32_t b[2][4];
#pragma unroll
      for (int g = 0; g < 2; ++g)
        ldmatrix_x4_trans(b[g], Sj + (kk + lr + 8 * (lq & 1)) * kGramLd + wn * 32 + g * 16 + 8 * (lq >> 1));
#pragma unroll
      for (int f = 0; f < 4; ++f)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_bf16(acc[f][j], a[f], b[j >> 1][2 * (j & 1)], b[j >> 1][2 * (j & 1) + 1]);
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
  __syncthreads();  // the stages' memory becomes the epilogue slabs

  float* slab = reinterpret_cast<float*>(gsm) + warp * 16 * kSlabLd;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int f = 0; f < 4; ++f) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      slab[g * kSlabLd + j * 8 + 2 * t] = acc[f][j][0];
      slab[g * kSlabLd + j * 8 + 2 * t + 1] = acc[f][j][1];
      slab[(g + 8) * kSlabLd + j * 8 + 2 * t] = acc[f][j][2];
      slab[(g + 8) * kSlabLd + j * 8 + 2 * t + 1] = acc[f][j][3];
    }
    __syncwarp();
    const int64_t r0 = i0 + wm * 64 + f * 16, c0 = j0 + wn * 32;
    for (int e = lane; e < 16 * 32; e += 32) {  // H[r, c], r ≤ c: a warp covers one row's 32 columns
      const int64_t r = r0 + e / 32, c = c0 + e % 32;
      if (r < n && c < n && r <= c)
        H[r * n + c] = __dadd_rn(H[r * n + c], __dmul_rn(2.0, double(slab[(e / 32) * kSlabLd + e % 32])));
    }
    for (int e = lane; e < 16 * 32; e += 32) {  // H[c, r], r < c: 16 consecutive columns r per row c
      const int64_t c = c0 + e / 16, r = r0 + e % 16;
      if (r < n && c < n && r < c)
        H[c * n + r] = __dadd_rn(H[c * n + r], __dmul_rn(2.0, double(slab[(e % 16) * kSlabLd + e / 16])));
    }
    __syncwarp();
  }
}

__global__ void hessian_add_kernel(const float* __restrict__ P, int64_t n, double* __restrict__ H) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n * n) return;
  const int64_t i = idx / n, j = idx % n;
  const float p = i <= j ? P[i * n + j] : P[j * n + i];
  H[idx] = __dadd_rn(H[idx], __dmul_rn(2.0, double(p)));
}

__global__ void dead_kernel(double* H, int64_t n, uint8_t* dead, double* diag) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  double& d = H[j * n + j];
  dead[j] = d == 0.0;
  if (d == 0.0) d = 1.0;
  diag[j] = d;
}

}  // namespace

cudaError_t gptq_gram_upper(const float* X, int64_t rows, int64_t n, int64_t ld, float* partial, bool accumulate,
                            cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  const unsigned nt = unsigned(cdiv(n, 128));
  gram_kernel<<<dim3(nt, nt), 256, 0, s>>>(X, rows, n, ld, partial, accumulate);
  return cudaGetLastError();
}

cudaError_t gptq_gram_add_bf16(const void* X, int64_t rows, int64_t n, int64_t ld, double* H, cudaStream_t s) {
  if (n <= 0 || rows <= 0) return cudaSuccess;
  const unsigned nt = unsigned(cdiv(n, 128));
  const bool vec = reinterpret_cast<uintptr_t>(X) % 16 == 0 && ld % 8 == 0;
  if (cudaError_t e =
          cudaFuncSetAttribute(gram_add_tc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGramSmem));
      e != cudaSuccess)
    return e;
  gram_add_tc_kernel<<<dim3(nt, nt), 256, kGramSmem, s>>>(static_cast<const __nv_bfloat16*>(X), rows, n, ld, vec, H);
  return cudaGetLastError();
}

cudaError_t gptq_hessian_add(const float* partial, int64_t n, double* H, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  hessian_add_kernel<<<blocks_for(n * n), 256, 0, s>>>(partial, n, H);
  return cudaGetLastError();
}

cudaError_t gptq_dead_columns(double* H, int64_t n, uint8_t* dead, double* diag, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  dead_kernel<<<blocks_for(n), 256, 0, s>>>(H, n, dead, diag);
  return cudaGetLastError();
}

}  // namespace g4c::cuda
