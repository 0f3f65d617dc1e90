// Register-tiled fp32 GEMM tiles for the CPU backend (Linear, and GPTQ's XᵀX via tools/).
//
// gemm_tile computes one output tile C[M, N] = A[M, K] · B[N, K]ᵀ single-threaded (the
// caller parallelises over tiles, so the result never depends on the thread count).
// A is a strided view read in place (6 rows at a time, as broadcasts). B is read as
// zero-padded 16-column panels (pack_b's layout: a weight [out, in] packed once, or
// GPTQ's XᵀX operand copied per k-block by tools/quant_executor). The 6×16 micro-kernel
// uses AVX2+FMA when the CPU has it (checked at run time), two panels at a time (6×32)
// with AVX-512F, else a portable version of the same loops (std::fma). K runs in blocks of
// kGemmKc; every element of C is one fused-multiply-add chain over k = 0..K−1, in order,
// so the three kernels give identical results.
#pragma once

#include <cstdint>

namespace g4c::runtime::cpu {

struct MatView {
  const float* p;
  int64_t rs, cs;  // element (i, k) at p[i·rs + k·cs]
};

inline constexpr int kGemmMr = 6, kGemmNr = 16, kGemmKc = 256;

// B(j, k) = p[(j / 16)·panel_stride + k·k_stride + j % 16]; the last panel holds 16
// columns (zeros past N), as pack_b writes it.
struct PanelB {
  const float* p;
  int64_t k_stride, panel_stride;
};

// Floats pack_b writes for B [N, K]; panels [panel_begin, panel_end) of them (so several
// threads can pack disjoint ranges). Its PanelB is {out, 16, 16·K}.
int64_t packed_b_floats(int64_t N, int64_t K);
void pack_b(const MatView& B, int64_t N, int64_t K, float* out, int64_t panel_begin, int64_t panel_end);

// C[i·ldc + j] (+)= Σ_k A(i, k)·B(j, k) for i < M, j < N; `accumulate` adds to C.
void gemm_tile(const MatView& A, const PanelB& B, int64_t M, int64_t N, int64_t K, float* C, int64_t ldc,
               bool accumulate);

// True when gemm_tile and the vector helpers below use AVX2+FMA.
bool cpu_has_avx2_fma();
// True when gemm_tile pairs panels with AVX-512F (off with G4C_CPU_NO_AVX512=1).
bool cpu_uses_avx512();

// y[i] = gelu_tanh(g[i]) · u[i] (DESIGN.md §2: 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))),
// evaluated as x / (1 + e^(−2z)) with an fp32 exp accurate to ~2 ulp). Every element takes the
// same code path (a tail is padded through the vector kernel), so a value's result does not
// depend on its position or on n; y may alias g. gelu_tanh(x) is the same for one value.
void gelu_tanh_mul(const float* g, const float* u, float* y, int64_t n);
float gelu_tanh(float x);

// p[i] = e^(p[i] − shift) in place (same exp); returns Σ p[i] (fp32, lane-wise partials).
float exp_shift_sum(float* p, int64_t n, float shift);

}  // namespace g4c::runtime::cpu
