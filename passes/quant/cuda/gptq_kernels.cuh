// GPTQ on the device (the 12B's GPTQ on the GPU inside the budget). The host
// implementation (passes/quant/gptq.cpp) is the reference; these kernels do the same arithmetic:
//   gram        from host fp32 rows: one fp32 FMA chain per element over the rows in order (the
//               bits of the host's FMA GEMM tiles); from device bf16 rows (the forward's own
//               activations): tensor cores, exact products and fp32 sums added to H in the
//               same kernel; either way H += 2·double(partial) per ≤ 8192 rows as the host
//               accumulator does;
//   factor      H⁻¹'s upper Cholesky factor U by the host's route (J·P·H·P·J + damp·I = L·Lᵀ,
//               U = J·L⁻¹·J), blocked in fp64 with the GEMMs on the fp64 tensor cores (rounding
//               differs from the unblocked host loops);
//   solve       the blocked column loop: inside a block the host's operations in the host's order
//               and no FMA contraction (__dmul_rn/__dsub_rn); the update of the later columns
//               after each block on the fp64 tensor cores (FMA chains), so the weights being
//               solved differ from the host's by rounding and a code can differ only where w/s
//               lies within that rounding of a boundary.
// All pointers are device pointers, matrices row-major n×n (ld n) unless stated. Host API only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace g4c::cuda {

// partial[i, j] = Σ_{r < rows} X[r, i]·X[r, j] for the 128×128 tiles on and above the diagonal
// (every j ≥ i written; some j < i inside diagonal tiles too), each a chain fma(x, x, acc) from 0
// over r in order — continued from the partial's current values with `accumulate` (so rows
// given in pieces form the same chain). X is [rows, ld] fp32, ld ≥ n.
cudaError_t gptq_gram_upper(const float* X, int64_t rows, int64_t n, int64_t ld, float* partial, bool accumulate,
                            cudaStream_t s);

// H[i, j] += 2·double(partial[min(i, j), max(i, j)]) for all i, j, where partial is the Gram of
// the bf16 rows X [rows, ld] (__nv_bfloat16) on the tensor cores: each product is exact in fp32
// and the sums are fp32 in the MMA's order, so an entry is within fp32 summation error of the
// exact Σ X[r, i]·X[r, j] (no longer the fma chain of the fp32 rows). One call per ≤ 8192 rows.
cudaError_t gptq_gram_add_bf16(const void* X, int64_t rows, int64_t n, int64_t ld, double* H, cudaStream_t s);

// H[i, j] += 2·double(partial[min(i, j), max(i, j)]) for all i, j (the host's symmetric fill).
cudaError_t gptq_hessian_add(const float* partial, int64_t n, double* H, cudaStream_t s);

// dead[j] = (H[j, j] == 0), and then H[j, j] = 1; diag[j] = H[j, j] afterwards.
cudaError_t gptq_dead_columns(double* H, int64_t n, uint8_t* dead, double* diag, cudaStream_t s);

// R[i, j] = H[p(n-1-i), p(n-1-j)] + (i == j ? damp : 0), p = perm (null: identity): the damped,
// column-ordered Hessian reversed, ready for the lower Cholesky.
cudaError_t gptq_reverse_permute(const double* H, const int64_t* perm, int64_t n, double damp, double* R,
                                 cudaStream_t s);

// Lower Cholesky of the SPD matrix R (read: its lower triangle) and the inverse of the factor:
// R's lower triangle becomes L (its strict upper triangle is used as scratch and left undefined),
// Inv (n², must not alias R) becomes L⁻¹ (strict upper triangle zero). *fail (device int, zeroed
// by the caller) becomes 1 when a pivot is not positive and finite (the host's test).
cudaError_t gptq_cholesky_inverse(double* R, int64_t n, double* Inv, int* fail, cudaStream_t s);

// U[a, b] = Inv[n-1-a, n-1-b].
cudaError_t gptq_reverse(const double* Inv, int64_t n, double* U, cudaStream_t s);

struct GptqSolveArgs {
  int64_t out = 0, n = 0, padded_in = 0;
  int group = 128, block = 128;  // !act_order: block % group == 0; block ≤ 256
  bool symmetric = true, act_order = false;
  // Group parameters fixed before the solve from the original weights (act_order), else taken
  // at each group's first column from its current (error-updated) values. With clip_grid/
  // clip_steps > 0 each group's range is the MSE-optimal shrink (passes/quant/quantizer.h
  // ClipSearch: the same candidates, error sum and tie rule).
  bool static_groups = false;
  int clip_grid = 0, clip_steps = 0;
  const float* w = nullptr;       // [out, n] the Linear's weights
  const uint8_t* dead = nullptr;  // [n] columns whose H diagonal was 0 (zeroed before the solve)
  const int64_t* perm = nullptr;  // [n] act_order column order (null otherwise)
  const double* U = nullptr;      // [n, n] upper Cholesky factor of H⁻¹ (in perm order)
  double* wd = nullptr;           // [out, n] scratch: the weights being solved
  double* err = nullptr;          // [out, kSolveErrBlocks·block] scratch: the scaled errors of a superblock
  uint8_t* codes = nullptr;       // [out, padded_in] out; padding columns hold the zero point
  float* scales = nullptr;        // [out, padded_in / group] out (fp16 values)
  uint8_t* zeros = nullptr;       // [out, padded_in / group] out
  double* row_loss = nullptr;     // [out] out: Σ err² / d² / 2 over the row's columns, in order
};

// The errors of kSolveErrBlocks column blocks update the columns after them in one GEMM (the
// columns inside the superblock are updated after each block, as they are solved next).
constexpr int kSolveErrBlocks = 4;

// The whole blocked GPTQ solve of one Linear (several kernels on `s`).
cudaError_t gptq_solve(const GptqSolveArgs& a, cudaStream_t s);

}  // namespace g4c::cuda
