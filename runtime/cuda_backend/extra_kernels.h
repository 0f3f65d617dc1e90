// Simple CUDA kernels the CUDA backend needs beyond runtime/cuda/kernels.h: the unfused
// elementwise steps of KERNELS.md (Rope, KvWrite, Add, Mul, Scale, GeluTanh, Softcap,
// SelectLogitRows) and dtype conversions for weight upload and read_value/write_value.
// Plain host API (correct and simple, not tuned); kernels in extra_kernels.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace g4c::cudart {

using bf16 = __nv_bfloat16;

// Element type of a device value buffer.
enum class VType : int { BF16 = 0, F32 = 1, I32 = 2 };

// y = a op b elementwise (n elements, same type t; y may alias a). op: 0 add, 1 mul.
cudaError_t binary(int op, const void* a, const void* b, void* y, long n, VType t, cudaStream_t s);
// y = x · (scalar ? bf16 scalar[0] : scale); y may alias x.
cudaError_t scale(const void* x, const bf16* scalar, float scale, void* y, long n, VType t, cudaStream_t s);
// y = gelu_tanh(x) (op 0) or the softcap (op 1) as HF's bf16 run computes it:
// bf16(bf16(tanh(bf16(bf16(x)·fp32(1/cap)))) · cap) (tests/bf16/hf_bf16.h, points 10–11).
cudaError_t unary(int op, const void* x, void* y, long n, float cap, VType t, cudaStream_t s);
// In place on fp32 logits [rows][cols] (row stride ld): x = bf16(x) (HF's lm_head output is a
// bf16 tensor), then if cap > 0 the bf16 softcap of unary op 1. Values stay stored as fp32.
cudaError_t round_softcap_bf16(float* x, int rows, int cols, long ld, float cap, cudaStream_t s);
// y[r] = x[rows[r]] for r < nrows (cols elements per row, type t).
cudaError_t select_rows(const void* x, const int* rows, int nrows, int cols, void* y, VType t, cudaStream_t s);
// RoPE of KERNELS.md in place on x [n][heads·d] (bf16) at positions[i], rounded as HF's bf16
// run (bf16 cos/sin, each product and the sum rounded; see runtime/cuda/fused.cuh).
cudaError_t rope(bf16* x, int n, int heads, int d, int rotary_pairs, double theta, const int* positions,
                 cudaStream_t s);
// cache[slot[i]] = row i of src ([n][row] bf16).
cudaError_t kv_write(const bf16* src, const int64_t* slots, int n, int row, bf16* cache, cudaStream_t s);
// The FP8 form: row i of src ([n][hkv][d] bf16) quantized per (token, kv head) as runtime/fp8.h's
// quantize_row_e4m3 into codes[slot[i]][hkv][d] and scales[slot[i]][hkv].
cudaError_t kv_write_fp8(const bf16* src, const int64_t* slots, int n, int hkv, int d, uint8_t* codes, float* scales,
                         cudaStream_t s);
// Conversions: out = bf16(in) / float(in) (n elements).
cudaError_t f32_to_bf16(const float* in, bf16* out, long n, cudaStream_t s);
cudaError_t bf16_to_f32(const bf16* in, float* out, long n, cudaStream_t s);
cudaError_t i32_to_f32(const int* in, float* out, long n, cudaStream_t s);
cudaError_t f32_to_i32(const float* in, int* out, long n, cudaStream_t s);

}  // namespace g4c::cudart
