// GPTQ factor on the device (gptq_kernels.cuh): U = chol(H⁻¹)ᵀ by the host's route: the Cholesky and
// the inverse of its factor in one recursion over halves, the GEMMs on the fp64 tensor cores.

#include <cstdint>

#include "passes/quant/cuda/gptq_common.cuh"
#include "passes/quant/cuda/gptq_dgemm.cuh"
#include "passes/quant/cuda/gptq_kernels.cuh"

namespace g4c::cuda {
namespace {

using gptq_detail::blocks_for;
using gptq_detail::cdiv;
using gptq_detail::dgemm;
using gptq_detail::Skip;

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

// One diagonal block (b ≤ 64) of the Cholesky: factor in shared memory, write L_kk into A (zero
// above the diagonal) and L_kk⁻¹ into Inv (ld ldi, zero above the diagonal). Same pivot test as
// the host.
__global__ void __launch_bounds__(256) chol_diag_kernel(double* A, int64_t lda, int b, double* Inv, int64_t ldi,
                                                        int* fail) {
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
    for (int i = 0; i < b; ++i) Inv[int64_t(i) * ldi + c] = x[i];
  }
  for (int l = tid; l < b * b; l += 256) {
    const int r = l / b, c = l % b;
    A[int64_t(r) * lda + c] = c <= r ? L[r][c] : 0.0;
  }
}

// The rows/columns o … o+m of the n×n matrices R (in: the SPD matrix's lower triangle; out: L)
// and Inv (in: zero; out: L⁻¹), recursively on halves whose first is a multiple of 64 rows:
//   L11, L11⁻¹ ← recurse(R11);  L21 = R21 · L11⁻ᵀ;  R22 −= L21 · L21ᵀ;  L22, L22⁻¹ ← recurse(R22);
//   Inv21 = −L22⁻¹ · (L21 · L11⁻¹).
// Every product is one large GEMM (the right-looking 64-column form is n/64 thin ones), and the
// triangular operands skip their zero halves. Scratch: L21 · L11⁻ᵀ goes through Inv21 (written
// last), L21 · L11⁻¹ through R[o … o+m2, o+m2 … o+m], strictly above the diagonal, which no
// later step reads (only L's lower triangle is used, and only inside this call).
cudaError_t chol_inverse(double* R, double* Inv, int64_t n, int64_t o, int64_t m, int* fail, cudaStream_t s) {
  if (m <= kNB) {
    chol_diag_kernel<<<1, 256, 0, s>>>(R + o * n + o, n, int(m), Inv + o * n + o, n, fail);
    return cudaGetLastError();
  }
  const int64_t m1 = cdiv(m / 2, kNB) * kNB, m2 = m - m1;
  double* R21 = R + (o + m1) * n + o;
  double* R22 = R21 + m1;
  double* I11 = Inv + o * n + o;
  double* I21 = Inv + (o + m1) * n + o;
  double* I22 = I21 + m1;
  double* P = R + o * n + o + m2;
  cudaError_t e;
  if ((e = chol_inverse(R, Inv, n, o, m1, fail, s)) != cudaSuccess) return e;
  if ((e = dgemm<true, false, Skip::kKToN>(m2, m1, m1, R21, n, I11, n, I21, n, 1.0, 0.0, s)) != cudaSuccess) return e;
  if ((e = cudaMemcpy2DAsync(R21, size_t(n) * 8, I21, size_t(n) * 8, size_t(m1) * 8, size_t(m2),
                             cudaMemcpyDeviceToDevice, s)) != cudaSuccess)
    return e;
  if ((e = dgemm<true, true>(m2, m2, m1, R21, n, R21, n, R22, n, -1.0, 1.0, s)) != cudaSuccess) return e;
  if ((e = chol_inverse(R, Inv, n, o + m1, m2, fail, s)) != cudaSuccess) return e;
  if ((e = dgemm<false, false, Skip::kKFromN>(m2, m1, m1, R21, n, I11, n, P, n, 1.0, 0.0, s)) != cudaSuccess) return e;
  return dgemm<false, false, Skip::kKToM>(m2, m1, m2, I22, n, P, n, I21, n, -1.0, 0.0, s);
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

cudaError_t gptq_cholesky_inverse(double* R, int64_t n, double* Inv, int* fail, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  if (cudaError_t e = cudaMemsetAsync(Inv, 0, size_t(n) * n * 8, s); e != cudaSuccess) return e;
  return chol_inverse(R, Inv, n, 0, n, fail, s);
}

}  // namespace g4c::cuda
