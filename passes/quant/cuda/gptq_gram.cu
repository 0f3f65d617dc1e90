// GPTQ Hessians on the device (gptq_kernels.cuh): the Gram of the calibration rows (fp32 FMA
// chains from host rows, tensor cores from the forward's bf16 rows), its float64 sum, dead columns.
#include <cuda_bf16.h>
#include <mma.h>

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

// ---- Gram on the tensor cores (bf16 rows): partial = XᵀX, 128×128 tiles on and above the diagonal ----
// A bf16 × bf16 product is exact in fp32 (8 + 8 significant bits); the MMA sums the products in
// fp32 in its own order, so the partial is the exact Gram up to fp32 summation error (not the fma
// chain of gram_kernel). 8 warps, warp w owns rows (w / 4)·64 … +64 and columns (w % 4)·32 … +32
// of the tile: 4 × 2 accumulator fragments. X is staged kTcK rows at a time, double-buffered in
// shared memory (the next stage's loads are in registers while the current one multiplies).
// Rows past `rows` and columns past n load as 0 and add exact zeros.
namespace wmma = nvcuda::wmma;
constexpr int kTcK = 32;           // rows of X per stage
constexpr int kTcLd = 128 + 8;     // shared row length in bf16 (16-byte multiple; staggers the banks)

struct TcStage {
  uint4 a[2], b[2];  // 2 × 8 bf16 of the i-tile and of the j-tile
};

__device__ __forceinline__ uint4 load8(const __nv_bfloat16* __restrict__ X, int64_t r, int64_t c, int64_t rows,
                                       int64_t n, int64_t ld, bool vec) {
  if (r >= rows || c >= n) return make_uint4(0, 0, 0, 0);
  const __nv_bfloat16* p = X + r * ld + c;
  if (vec && c + 8 <= n) return *reinterpret_cast<const uint4*>(p);
  __align__(16) __nv_bfloat16 v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = c + e < n ? p[e] : __float2bfloat16(0.f);
  return *reinterpret_cast<const uint4*>(v);
}

__global__ void __launch_bounds__(256) gram_tc_kernel(const __nv_bfloat16* __restrict__ X, int64_t rows, int64_t n,
                                                      int64_t ld, bool vec, float* __restrict__ P) {
  const int bi = blockIdx.y, bj = blockIdx.x;
  if (bj < bi) return;
  const int64_t i0 = int64_t(bi) * 128, j0 = int64_t(bj) * 128;
  __shared__ __align__(32) __nv_bfloat16 As[2][kTcK][kTcLd];
  __shared__ __align__(32) __nv_bfloat16 Bs[2][kTcK][kTcLd];
  __shared__ __align__(32) float out[8][16 * 16];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wm = warp / 4, wn = warp % 4;

  // Thread t stages the 8-element units t and t + 256 of the 32 × 128 tile: row u / 16, column (u % 16)·8.
  auto fetch = [&](int64_t k0, TcStage& st) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int u = tid + 256 * q, kk = u / 16, c = (u % 16) * 8;
      st.a[q] = load8(X, k0 + kk, i0 + c, rows, n, ld, vec);
      st.b[q] = load8(X, k0 + kk, j0 + c, rows, n, ld, vec);
    }
  };
  auto store = [&](int buf, const TcStage& st) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int u = tid + 256 * q, kk = u / 16, c = (u % 16) * 8;
      *reinterpret_cast<uint4*>(&As[buf][kk][c]) = st.a[q];
      *reinterpret_cast<uint4*>(&Bs[buf][kk][c]) = st.b[q];
    }
  };

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
  for (int f = 0; f < 4; ++f)
#pragma unroll
    for (int g = 0; g < 2; ++g) wmma::fill_fragment(acc[f][g], 0.f);

  TcStage st;
  fetch(0, st);
  store(0, st);
  __syncthreads();
  int cur = 0;
  for (int64_t k0 = 0; k0 < rows; k0 += kTcK) {
    const bool more = k0 + kTcK < rows;
    if (more) fetch(k0 + kTcK, st);
#pragma unroll
    for (int kk = 0; kk < kTcK; kk += 16) {
      // A = Xᵀ: element (m, k) at As[k][m], i.e. column-major with ld kTcLd; B = X row-major.
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major> a[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b[2];
#pragma unroll
      for (int f = 0; f < 4; ++f) wmma::load_matrix_sync(a[f], &As[cur][kk][wm * 64 + f * 16], kTcLd);
#pragma unroll
      for (int g = 0; g < 2; ++g) wmma::load_matrix_sync(b[g], &Bs[cur][kk][wn * 32 + g * 16], kTcLd);
#pragma unroll
      for (int f = 0; f < 4; ++f)
#pragma unroll
        for (int g = 0; g < 2; ++g) wmma::mma_sync(acc[f][g], a[f], b[g], acc[f][g]);
    }
    // The other buffer was last read before the previous barrier: storing into it is safe.
    if (more) store(cur ^ 1, st);
    __syncthreads();
    cur ^= 1;
  }
#pragma unroll
  for (int f = 0; f < 4; ++f)
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      wmma::store_matrix_sync(out[warp], acc[f][g], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int64_t r = i0 + wm * 64 + f * 16 + e / 16, c = j0 + wn * 32 + g * 16 + e % 16;
        if (r < n && c < n) P[r * n + c] = out[warp][e];
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

cudaError_t gptq_gram_upper_bf16(const void* X, int64_t rows, int64_t n, int64_t ld, float* partial, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  const unsigned nt = unsigned(cdiv(n, 128));
  const bool vec = reinterpret_cast<uintptr_t>(X) % 16 == 0 && ld % 8 == 0;
  gram_tc_kernel<<<dim3(nt, nt), 256, 0, s>>>(static_cast<const __nv_bfloat16*>(X), rows, n, ld, vec, partial);
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
