// GPTQ factor on the device (gptq_kernels.cuh): U = chol(H⁻¹)ᵀ by the host's route, blocked in
// fp64 with the GEMMs on the fp64 tensor cores (DMMA).

#include <cstdint>

#include "passes/quant/cuda/gptq_common.cuh"
#include "passes/quant/cuda/gptq_dgemm.cuh"
#include "passes/quant/cuda/gptq_kernels.cuh"

namespace g4c::cuda {
namespace {

using gptq_detail::blocks_for;
using gptq_detail::cdiv;
using gptq_detail::dgemm;

constexpr int kNB = 64;  // Cholesky / triangular-inverse block

__global__ void reverse_permute_kernel(const double* __restrict__ H, const int64_t* __restrict__ perm, int64_t n,
                                       double damp, double* __restrict__ R) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n * n) return;
  const int64_t i = idx / n, j = idx % n;
  const int64_t pi = perm ? perm[n - 1 - i] : n - 1 - i, pj = perm ? perm[n - 1 - j] : n - 1 - j;
  const double v = H[pi * n + pj];
  R[idx] = i == j ? __dadd_rn(v, damp) : v;
}

__global__ void reverse_kernel(const double* __restrict__ Inv, int64_t n, double* __restrict__ U) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n * n) return;
  const int64_t a = idx / n, b = idx % n;
  U[idx] = Inv[(n - 1 - a) * n + (n - 1 - b)];
}

// One diagonal block (b ≤ 64) of the Cholesky: factor in shared memory, write L_kk (zero above
// the diagonal) and L_kk⁻¹ (ld 64, zero above the diagonal). Same pivot test as the host.
__global__ void __launch_bounds__(256) chol_diag_kernel(double* A, int64_t lda, int b, double* dinv, int* fail) {
  __shared__ double L[kNB][kNB + 1];
  const int tid = threadIdx.x;
  for (int l = tid; l < b * b; l += 256) {
    const int r = l / b, c = l % b;
    L[r][c] = c <= r ? A[int64_t(r) * lda + c] : 0.0;
  }
  __syncthreads();
  for (int j = 0; j < b; ++j) {
    if (tid == 0) {
      double d = L[j][j];
      if (!(d > 0.0) || !isfinite(d)) {
        *fail = 1;
        d = 1.0;
      }
      L[j][j] = sqrt(d);
    }
    __syncthreads();
    for (int i = j + 1 + tid; i < b; i += 256) L[i][j] /= L[j][j];
    __syncthreads();
    const int w = b - j - 1;
    for (int l = tid; l < w * w; l += 256) {
      const int i = j + 1 + l / w, c = j + 1 + l % w;
      if (c <= i) L[i][c] -= L[i][j] * L[c][j];
    }
    __syncthreads();
  }
  if (tid < b) {  // column c of L⁻¹ by forward substitution
    const int c = tid;
    double x[kNB];
#pragma unroll
    for (int i = 0; i < kNB; ++i) x[i] = 0.0;
    for (int i = c; i < b; ++i) {
      double v = i == c ? 1.0 : 0.0;
      for (int k = c; k < i; ++k) v -= L[i][k] * x[k];
      x[i] = v / L[i][i];
    }
    for (int i = 0; i < kNB; ++i) dinv[i * kNB + c] = i < b ? x[i] : 0.0;
  }
  for (int c = b + tid; c < kNB; c += 256)
    for (int i = 0; i < kNB; ++i) dinv[i * kNB + c] = 0.0;
  for (int l = tid; l < b * b; l += 256) {
    const int r = l / b, c = l % b;
    A[int64_t(r) * lda + c] = c <= r ? L[r][c] : 0.0;
  }
}

}  // namespace

cudaError_t gptq_reverse_permute(const double* H, const int64_t* perm, int64_t n, double damp, double* R,
                                 cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  reverse_permute_kernel<<<blocks_for(n * n), 256, 0, s>>>(H, perm, n, damp, R);
  return cudaGetLastError();
}

cudaError_t gptq_reverse(const double* Inv, int64_t n, double* U, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  reverse_kernel<<<blocks_for(n * n), 256, 0, s>>>(Inv, n, U);
  return cudaGetLastError();
}

// Right-looking blocked Cholesky: factor the diagonal block (and invert it), panel ← panel·L_kk⁻ᵀ,
// trailing lower triangle −= panel·panelᵀ.
cudaError_t gptq_cholesky(double* R, int64_t n, double* dinv, double* panel, int* fail, cudaStream_t s) {
  for (int64_t k0 = 0; k0 < n; k0 += kNB) {
    const int b = int(n - k0 < kNB ? n - k0 : kNB);
    double* dk = dinv + (k0 / kNB) * kNB * kNB;
    chol_diag_kernel<<<1, 256, 0, s>>>(R + k0 * n + k0, n, b, dk, fail);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    const int64_t m = n - k0 - b;
    if (m <= 0) break;
    double* a = R + (k0 + b) * n + k0;
    if ((e = dgemm<true, false>(m, b, b, a, n, dk, kNB, panel, kNB, 1.0, 0.0, s)) != cudaSuccess) return e;
    if ((e = cudaMemcpy2DAsync(a, size_t(n) * 8, panel, kNB * 8, size_t(b) * 8, size_t(m), cudaMemcpyDeviceToDevice,
                               s)) != cudaSuccess)
      return e;
    if ((e = dgemm<true, true>(m, m, b, panel, kNB, panel, kNB, R + (k0 + b) * n + k0 + b, n, -1.0, 1.0, s)) !=
        cudaSuccess)
      return e;
  }
  return cudaSuccess;
}

// Block row by block row: Inv[r, r] = L_rr⁻¹, Inv[r, :r] = −L_rr⁻¹ · (L[r, :r] · Inv[:r, :r]).
cudaError_t gptq_tri_inverse(const double* L, const double* dinv, int64_t n, double* Inv, double* panel,
                             cudaStream_t s) {
  cudaError_t e = cudaMemsetAsync(Inv, 0, size_t(n) * n * 8, s);
  if (e != cudaSuccess) return e;
  for (int64_t r0 = 0; r0 < n; r0 += kNB) {
    const int b = int(n - r0 < kNB ? n - r0 : kNB);
    const double* dk = dinv + (r0 / kNB) * kNB * kNB;
    if ((e = cudaMemcpy2DAsync(Inv + r0 * n + r0, size_t(n) * 8, dk, kNB * 8, size_t(b) * 8, size_t(b),
                               cudaMemcpyDeviceToDevice, s)) != cudaSuccess)
      return e;
    if (r0 == 0) continue;
    if ((e = dgemm<false, false>(b, r0, r0, L + r0 * n, n, Inv, n, panel, n, 1.0, 0.0, s)) != cudaSuccess)
      return e;
    if ((e = dgemm<false, false>(b, r0, b, dk, kNB, panel, n, Inv + r0 * n, n, -1.0, 0.0, s)) != cudaSuccess)
      return e;
  }
  return cudaSuccess;
}

}  // namespace g4c::cuda
