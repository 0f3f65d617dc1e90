// Small dense kernels the quantizer needs: an fp32 accumulate-GEMM (Hessians,
// calibration forwards) and float64 Cholesky / triangular helpers (GPTQ).
#pragma once

#include <cstdint>
#include <functional>

namespace g4c::quant {

// C[m, n] += Σ_k A(m, k) · B[k, n] for m < M, n < N, k < K, where
// A(m, k) = A[m·a_sm + k·a_sk] (any strides: pass a transposed view for XᵀX),
// B is row-major with leading dimension ldb, C with ldc. Uses both AVX2/FMA
// and a generic version picked at load time. Runs on `threads` threads (≥1).
void sgemm_acc(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_sm, int64_t a_sk, const float* B,
               int64_t ldb, float* C, int64_t ldc, int threads = 1);

// fn(begin, end) over up to `threads` contiguous ranges of [0, n) whose bounds are multiples
// of `align`; the calling thread runs the first. Returns when all are done, rethrowing the
// first exception any range threw. (passes/ has no thread pool: runtime/ owns that one.)
void parallel_ranges(int64_t n, int threads, int64_t align, const std::function<void(int64_t, int64_t)>& fn);

// In-place lower Cholesky of the symmetric positive-definite n×n row-major A
// (only the lower triangle is read; the upper is zeroed). Returns false when A
// is not positive definite.
bool cholesky_lower(double* A, int64_t n);

// For symmetric positive-definite H (row-major n×n), writes to Out the upper
// Cholesky factor U of H⁻¹ (H⁻¹ = Uᵀ·U) — what GPTQ calls Hinv. Returns false when
// H is not positive definite.
bool upper_cholesky_of_inverse(const double* H, int64_t n, double* Out);

}  // namespace g4c::quant
