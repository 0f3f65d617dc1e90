// Reference CPU math of the plan kernels (KERNELS.md): fp32 storage, fp32 accumulation
// (norm sums in double). Pure functions over row-major arrays; the backend binds them.
#pragma once

#include <cstdint>

#include "runtime/cpu/gemm.h"  // gelu_tanh, gelu_tanh_mul
#include "runtime/thread_pool.h"
#include "runtime/plan/plan.h"

namespace g4c::runtime::cpu {

// Weights whose packed panels exceed this many floats (an LM head over a large vocabulary)
// are packed per task, column tile by column tile, instead of once per call. Default 2^26;
// tests lower it to reach that path with small shapes.
inline int64_t linear_pack_all_limit = int64_t(1) << 26;

// y[rows, N] = epilogue(x[rows, K] · W0[N, K]ᵀ [, W1]); residual may alias y.
void linear(ThreadPool& pool, const float* x, int rows, int K, const float* w0, const float* w1, int N,
            const float* residual, float* y, plan::fb::Epilogue epilogue);

// y = rms(x, w) over groups of norm_dim columns; y may alias x; w may be null.
void rms_norm(const float* x, float* y, int rows, int cols, int norm_dim, const float* w, float eps);

// Rotate-half RoPE in place on every head of D columns of each row, at positions[row].
void rope(float* x, int rows, int cols, const int32_t* positions, int head_dim, int rotary_pairs, double theta);

}  // namespace g4c::runtime::cpu
