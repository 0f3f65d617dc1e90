// The GPTQ kernels' fp64 GEMM on the tensor cores (factor.cu's Cholesky and triangular inverse,
// solve.cu's update of the later columns). Device code for the .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "passes/quant/cuda/gptq_common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "the GPTQ fp64 GEMM uses mma.sync.m16n8k8.f64 (sm_90)"
#endif

namespace g4c::cuda::gptq_detail {
namespace {  // internal linkage: each .cu has its own instantiations (no relocatable device code)

// ---- fp64 GEMM on the tensor cores: C = alpha·(A·B) + beta·C, alpha ∈ {1, −1}, beta ∈ {0, 1} ----
// B(k, n) = kTransB ? B[n·ldb + k] : B[k·ldb + n]; kLower: only the 64×64 tiles of C with bn ≤ bm
// (a diagonal tile is written whole). A triangular operand lets a tile skip the stages whose
// products are all zero (kSkip); the operand must then hold zeros in that triangle inside the
// diagonal 64×64 blocks, which the last stage still reads:
//   kKFromN: B(k, n) = 0 for k < n (B lower triangular): K starts at the tile's first column;
//   kKToN:   B(k, n) = 0 for k > n (B upper triangular): K ends after the tile's last column;
//   kKToM:   A(m, k) = 0 for k > m (A lower triangular): K ends after the tile's last row.
// 128 threads, a 64×64 tile of C; warp w owns rows (w / 2)·32 … +32 and columns (w % 2)·32 … +32
// as 2 × 4 fragments of mma.sync.m16n8k8.f64 (Hopper's native fp64 MMA shape). A and B stream
// through kStages shared-memory stages of kBK columns of K by cp.async (8 bytes per element:
// any ld and offset; out-of-range elements are zero-filled and never written). The accumulator
// starts at alpha·beta·C, so alpha·acc at the end is beta·C + alpha·(A·B) with the same roundings
// as a chain that scales A (negation is exact).
enum class Skip { kNone, kKFromN, kKToN, kKToM };

constexpr int kBK = 16;               // depth of one stage
constexpr int kStages = 3;            // stages in flight
constexpr int kLdK = kBK + 4;         // [row][k] rows (A; B when transposed): conflict-free fragment loads
constexpr int kLdN = 64 + 8;          // [k][n] rows (B)
constexpr int kStageA = 64 * kLdK;
constexpr int kStageB = 64 * kLdK > kBK * kLdN ? 64 * kLdK : kBK * kLdN;
constexpr int kStage = kStageA + kStageB;  // doubles
constexpr size_t kDgemmSmem = size_t(kStages) * kStage * sizeof(double);

__device__ __forceinline__ void cp_async8(double* dst, const double* src, bool valid) {
  const unsigned s = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 8 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void mma_f64(double (&d)[4], const double (&a)[4], const double (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}

template <bool kTransB, bool kLower, Skip kSkip>
__global__ void __launch_bounds__(128) dgemm_kernel(int64_t M, int64_t N, int64_t K, const double* __restrict__ A,
                                                    int64_t lda, const double* __restrict__ B, int64_t ldb, double* C,
                                                    int64_t ldc, double alpha, double beta) {
  const int bm = blockIdx.y, bn = blockIdx.x;
  if (kLower && bn > bm) return;
  const int64_t m0 = int64_t(bm) * 64, n0 = int64_t(bn) * 64;
  int64_t k_lo = 0, k_hi = K;
  if (kSkip == Skip::kKFromN) k_lo = n0;  // a multiple of kBK
  if (kSkip == Skip::kKToN) k_hi = n0 + 64 < K ? n0 + 64 : K;
  if (kSkip == Skip::kKToM) k_hi = m0 + 64 < K ? m0 + 64 : K;
  const int ktiles = k_hi > k_lo ? int((k_hi - k_lo + kBK - 1) / kBK) : 0;

  extern __shared__ __align__(16) double sm[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 1, wn = warp & 1;
  const int g = lane >> 2, t = lane & 3;

  // Stage loads: 8 elements of A and 8 of B per thread. [row][k] layouts: 16 threads read one
  // row's 16 consecutive k (128 bytes); the [k][n] layout: 64 threads read one k's 64 columns.
  const int rk = tid & 15, rr = tid >> 4;  // [row][k]: k offset, first row (rows rr + 8q)
  const int nk = tid >> 6, nc = tid & 63;  // [k][n]: first k (k = nk + 2q), column
  auto load_stage = [&](int slot, int64_t k0) {
    double* As = sm + slot * kStage;
    double* Bs = As + kStageA;
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      const int r = rr + 8 * q;
      const int64_t m = m0 + r, k = k0 + rk;
      const bool ok = m < M && k < K;
      cp_async8(&As[r * kLdK + rk], ok ? A + m * lda + k : A, ok);
    }
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      if (kTransB) {
        const int c = rr + 8 * q;
        const int64_t nn = n0 + c, k = k0 + rk;
        const bool ok = nn < N && k < K;
        cp_async8(&Bs[c * kLdK + rk], ok ? B + nn * ldb + k : B, ok);
      } else {
        const int kk = nk + 2 * q;
        const int64_t nn = n0 + nc, k = k0 + kk;
        const bool ok = nn < N && k < K;
        cp_async8(&Bs[kk * kLdN + nc], ok ? B + k * ldb + nn : B, ok);
      }
    }
  };

  // Element v of fragment (i, j) is C's row row_of(i, v) and column col_of(j, v) (m16n8 layout).
  auto row_of = [&](int i, int v) { return m0 + wm * 32 + i * 16 + g + 8 * (v >> 1); };
  auto col_of = [&](int j, int v) { return n0 + wn * 32 + j * 8 + 2 * t + (v & 1); };
  double acc[2][4][4];
  const double c_scale = alpha * beta;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const int64_t m = row_of(i, v), nn = col_of(j, v);
        acc[i][j][v] = beta != 0.0 && m < M && nn < N ? c_scale * C[m * ldc + nn] : 0.0;
      }

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load_stage(s, k_lo + int64_t(s) * kBK);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage kt landed for every thread; stage kt − 1's slot is free
    const int next = kt + kStages - 1;
    if (next < ktiles) load_stage(next % kStages, k_lo + int64_t(next) * kBK);
    cp_async_commit();
    const double* As = sm + (kt % kStages) * kStage;
    const double* Bs = As + kStageA;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 8) {
      double a[2][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const double* p = As + (wm * 32 + i * 16 + g) * kLdK + kk + t;
        a[i][0] = p[0];
        a[i][1] = p[8 * kLdK];
        a[i][2] = p[4];
        a[i][3] = p[8 * kLdK + 4];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = wn * 32 + j * 8 + g;
        if (kTransB) {
          b[j][0] = Bs[c * kLdK + kk + t];
          b[j][1] = Bs[c * kLdK + kk + t + 4];
        } else {
          b[j][0] = Bs[(kk + t) * kLdN + c];
          b[j][1] = Bs[(kk + t + 4) * kLdN + c];
        }
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_f64(acc[i][j], a[i], b[j]);
    }
  }
  cp_async_wait<0>();

#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const int64_t m = row_of(i, v), nn = col_of(j, v);
        if (m < M && nn < N) C[m * ldc + nn] = alpha * acc[i][j][v];
      }
}

template <bool kTransB, bool kLower, Skip kSkip = Skip::kNone>
cudaError_t dgemm(int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B, int64_t ldb,
                  double* C, int64_t ldc, double alpha, double beta, cudaStream_t s) {
  if (M <= 0 || N <= 0) return cudaSuccess;
  if ((alpha != 1.0 && alpha != -1.0) || (beta != 0.0 && beta != 1.0)) return cudaErrorInvalidValue;
  auto* kernel = dgemm_kernel<kTransB, kLower, kSkip>;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kDgemmSmem));
      e != cudaSuccess)
    return e;
  const dim3 grid(unsigned(cdiv(N, 64)), unsigned(cdiv(M, 64)));
  kernel<<<grid, 128, kDgemmSmem, s>>>(M, N, K, A, lda, B, ldb, C, ldc, alpha, beta);
  return cudaGetLastError();
}

}  // namespace
}  // namespace g4c::cuda::gptq_detail
