// The GPTQ kernels' fp64 GEMM on the tensor cores (factor.cu's Cholesky and triangular inverse,
// solve.cu's update of the later columns). Device code for the .cu files only.
#pragma once

#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "passes/quant/cuda/gptq_common.cuh"

namespace g4c::cuda::gptq_detail {
namespace {  // internal linkage: each .cu has its own instantiations (no relocatable device code)

// ---- fp64 GEMM on the tensor cores (DMMA 8×8×4): C = beta·C + (alpha·A)·B ----
// B(k, n) = kTransB ? B[n·ldb + k] : B[k·ldb + n]; kLower: only the 64×64 tiles with bn ≤ bm.
// 128 threads, a 64×64 tile of C; warp w owns rows (w / 2)·32 … +32 and columns (w % 2)·32 … +32
// (4 × 4 accumulator fragments). A and B are staged kDk deep in shared memory; C is staged
// through the same memory on the way in and out (bounds: out-of-range elements are 0 and not
// written). Each output is a chain of fp64 FMAs, the uses have alpha = ±1 (scaling A is exact)
// and beta ∈ {0, 1}.
namespace dmma = nvcuda::wmma;
constexpr int kDk = 32;          // depth of one A/B stage
constexpr int kDa = kDk + 4;     // As row length (doubles): 32-byte multiple
constexpr int kDb = 64 + 4;      // Bs / Cs row length
constexpr int kDsmem = 64 * kDa + kDk * kDb;  // doubles: one A/B stage, or the C tile

template <bool kTransB, bool kLower>
__global__ void __launch_bounds__(128) dgemm_kernel(int64_t M, int64_t N, int64_t K, const double* __restrict__ A,
                                                    int64_t lda, const double* __restrict__ B, int64_t ldb, double* C,
                                                    int64_t ldc, double alpha, double beta) {
  static_assert(64 * kDb <= kDsmem, "the C tile fits the stage's memory");
  const int bm = blockIdx.y, bn = blockIdx.x;
  if (kLower && bn > bm) return;
  const int64_t m0 = int64_t(bm) * 64, n0 = int64_t(bn) * 64;
  __shared__ __align__(32) double sm[kDsmem];
  double* As = sm;              // [64][kDa]  (m, k)
  double* Bs = sm + 64 * kDa;   // [kDk][kDb] (k, n)
  const int tid = threadIdx.x, warp = tid / 32, wm = warp / 2, wn = warp % 2;
  dmma::fragment<dmma::accumulator, 8, 8, 4, double> acc[4][4];
  if (beta != 0.0) {
    for (int l = tid; l < 64 * 64; l += 128) {
      const int r = l / 64, c = l % 64;
      const int64_t m = m0 + r, nn = n0 + c;
      sm[r * kDb + c] = m < M && nn < N ? beta * C[m * ldc + nn] : 0.0;
    }
    __syncthreads();
#pragma unroll
    for (int f = 0; f < 4; ++f)
#pragma unroll
      for (int g = 0; g < 4; ++g)
        dmma::load_matrix_sync(acc[f][g], &sm[(wm * 32 + f * 8) * kDb + wn * 32 + g * 8], kDb, dmma::mem_row_major);
    __syncthreads();
  } else {
#pragma unroll
    for (int f = 0; f < 4; ++f)
#pragma unroll
      for (int g = 0; g < 4; ++g) dmma::fill_fragment(acc[f][g], 0.0);
  }
  for (int64_t k0 = 0; k0 < K; k0 += kDk) {
    for (int l = tid; l < 64 * kDk; l += 128) {
      const int r = l / kDk, kk = l % kDk;
      const int64_t m = m0 + r, k = k0 + kk;
      As[r * kDa + kk] = m < M && k < K ? alpha * A[m * lda + k] : 0.0;
    }
    for (int l = tid; l < 64 * kDk; l += 128) {
      int kk, c;
      if (kTransB) kk = l % kDk, c = l / kDk;
      else kk = l / 64, c = l % 64;
      const int64_t nn = n0 + c, k = k0 + kk;
      Bs[kk * kDb + c] = nn < N && k < K ? (kTransB ? B[nn * ldb + k] : B[k * ldb + nn]) : 0.0;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kDk; kk += 4) {
      dmma::fragment<dmma::matrix_a, 8, 8, 4, double, dmma::row_major> a[4];
      dmma::fragment<dmma::matrix_b, 8, 8, 4, double, dmma::row_major> b[4];
#pragma unroll
      for (int f = 0; f < 4; ++f) dmma::load_matrix_sync(a[f], &As[(wm * 32 + f * 8) * kDa + kk], kDa);
#pragma unroll
      for (int g = 0; g < 4; ++g) dmma::load_matrix_sync(b[g], &Bs[kk * kDb + wn * 32 + g * 8], kDb);
#pragma unroll
      for (int f = 0; f < 4; ++f)
#pragma unroll
        for (int g = 0; g < 4; ++g) dmma::mma_sync(acc[f][g], a[f], b[g], acc[f][g]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int f = 0; f < 4; ++f)
#pragma unroll
    for (int g = 0; g < 4; ++g)
      dmma::store_matrix_sync(&sm[(wm * 32 + f * 8) * kDb + wn * 32 + g * 8], acc[f][g], kDb, dmma::mem_row_major);
  __syncthreads();
  for (int l = tid; l < 64 * 64; l += 128) {
    const int r = l / 64, c = l % 64;
    const int64_t m = m0 + r, nn = n0 + c;
    if (m < M && nn < N) C[m * ldc + nn] = sm[r * kDb + c];
  }
}

template <bool kTransB, bool kLower>
cudaError_t dgemm(int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B, int64_t ldb,
                  double* C, int64_t ldc, double alpha, double beta, cudaStream_t s) {
  if (M <= 0 || N <= 0) return cudaSuccess;
  const dim3 grid(unsigned(cdiv(N, 64)), unsigned(cdiv(M, 64)));
  dgemm_kernel<kTransB, kLower><<<grid, 128, 0, s>>>(M, N, K, A, lda, B, ldb, C, ldc, alpha, beta);
  return cudaGetLastError();
}

}  // namespace
}  // namespace g4c::cuda::gptq_detail
