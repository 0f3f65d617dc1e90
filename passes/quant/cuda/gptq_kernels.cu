// GPTQ kernels (gptq.cuh): Gram, Cholesky factor of H⁻¹, blocked column solve.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>

#include "passes/quant/cuda/gptq_kernels.cuh"

namespace g4c::cuda {
namespace {

constexpr int kNB = 64;  // Cholesky / triangular-inverse block

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

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
        a.err[o * a.block + t] = e;
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

unsigned blocks_for(int64_t n, int t = 256) { return unsigned(cdiv(n, t)); }

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
    const int64_t i2 = i1 + bw;
    if (i2 < a.n &&
        (e = dgemm<false, false>(a.out, a.n - i2, bw, a.err, a.block, a.U + i1 * a.n + i2, a.n, a.wd + i2, a.n,
                                       -1.0, 1.0, s)) != cudaSuccess)
      return e;
  }
  if (a.padded_in > a.n) {
    pad_codes_kernel<<<blocks_for(a.out * (a.padded_in - a.n)), 256, 0, s>>>(a);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace g4c::cuda
