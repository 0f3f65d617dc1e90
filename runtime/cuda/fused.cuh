// Small fused ops of the Gemma 4 forward pass (DESIGN.md §2). Host API only; kernels in fused.cu.
// All tensors are device pointers, row-major, bf16 unless stated; H (hidden) % 8 == 0.
// Rounding points follow the Hugging Face bf16 run: each op computes in fp32 and rounds its
// outputs to bf16 where HF materializes a bf16 tensor (stated per op).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/kernel_options.h"
#include "runtime/cuda/sample_row.h"

namespace g4c::cuda {

using bf16 = __nv_bfloat16;

// rmsnorm, add_rmsnorm and qk_norm_rope_kv_write take KernelOptions: with ko.pdl they launch by
// programmatic dependent launch (each lets the kernel after it launch at its start and waits for
// the kernel before it before reading its inputs; the decode GEMMs and the decode attention after
// them read only weights / already-cached keys until their own wait).

// out[t][:] = bf16(E[ids[t]][:] · scale). Pass scale already rounded to bf16 (HF multiplies by a
// bf16 normalizer: 62.0 for hidden 3840). ids out of [0, vocab) produce a zero row.
cudaError_t embed_gather_scale(const int* ids, int t, const bf16* table, int vocab, int h,
                               float scale, bf16* out, cudaStream_t stream);

// KERNELS.md RmsNorm / SelectLogitRows: for each of the cols/norm_dim groups of a row,
// out[i][grp] = bf16(rms(x[row_i][grp], w)), rms(x, w) = x·(mean(x²)+eps)^-½·w with w AS IS
// (w null: no weight). rows (nullable): row_i = rows[i] (only the rows that need logits), else i.
// out may alias x when rows is null. cols % norm_dim == 0, norm_dim % 8 == 0.
cudaError_t rmsnorm(const bf16* x, int ldx, const int* rows, int n, int cols, int norm_dim,
                    const bf16* w, float eps, bf16* out, int ldo, cudaStream_t stream,
                    const KernelOptions& ko = {});

// The residual-stream update around a sub-block, one pass per token:
//   t  = bf16(rms(x, w_post))
//   h  = bf16(h + t);  if layer_scalar: h = bf16(h · layer_scalar[0])      (h updated in place)
//   if w_next: out_next = bf16(rms(h, w_next))   (pre_feedforward / next layer's input norm)
cudaError_t add_rmsnorm(const bf16* x, const bf16* w_post, bf16* h, const bf16* layer_scalar,
                        const bf16* w_next, bf16* out_next, int n, int hdim, float eps,
                        cudaStream_t stream, const KernelOptions& ko = {});

// Per-head q/k RMSNorm + RoPE (rotate-half) + KV cache write for n tokens.
//   q [n][hq][d] → q_out (may alias q): bf16(rms_head(q, q_w)) then rope.
//   k_raw [n][hkv][d] → k_cache[slot[t]][hkv][d]: bf16(rms_head(k, k_w)) then rope.
//   v_raw [n][hkv][d] (null: use k_raw, k_eq_v layers) → v_cache[slot[t]]: bf16(rms_head(v))
//   (no weight, no rope).
// rope, rounded where HF's bf16 run rounds (modeling_gemma4.py apply_rotary_pos_emb; the list is
// in tests/bf16/hf_bf16.h): y = bf16(rms_head(x, w)); inv_freq_j = 1 / fp32pow(θ, fp32(2j)/d)
// in fp32 for j < rotary_pairs (default rope: d/2; proportional: int(p·d/2)), pairs
// j ≥ rotary_pairs unchanged; angle = fp32(pos · inv_freq_j); c, s = bf16(cos), bf16(sin);
// (a, b) = (y_j, y_{j+d/2}) → (bf16(bf16(a·c) + bf16(−b·s)), bf16(bf16(b·c) + bf16(a·s))).
// Preconditions: d ∈ {64, 128, 256, 512}; row strides are hq·d / hkv·d.
cudaError_t qk_norm_rope_kv_write(const bf16* q, const bf16* k_raw, const bf16* v_raw,
                                  const bf16* q_w, const bf16* k_w, const int* positions,
                                  const int64_t* slots, int n, int hq, int hkv, int d, float theta,
                                  int rotary_pairs, float eps, bf16* q_out, bf16* k_cache,
                                  bf16* v_cache, cudaStream_t stream, const KernelOptions& ko = {});

// The FP8 KV cache (attention.cuh KvCache::k8): codes [slots][hkv][d] and a scale per (slot, kv
// head) for K and for V.
struct Fp8Kv {
  uint8_t* k = nullptr;
  uint8_t* v = nullptr;
  float* k_scale = nullptr;
  float* v_scale = nullptr;
};
// The same with an FP8 cache: each K / V row is the bf16 row above, quantized as
// runtime/fp8.h's quantize_row_e4m3 (scale = amax / 448, codes rounded to nearest even).
cudaError_t qk_norm_rope_kv_write(const bf16* q, const bf16* k_raw, const bf16* v_raw,
                                  const bf16* q_w, const bf16* k_w, const int* positions,
                                  const int64_t* slots, int n, int hq, int hkv, int d, float theta,
                                  int rotary_pairs, float eps, bf16* q_out, const Fp8Kv& cache,
                                  cudaStream_t stream, const KernelOptions& ko = {});

// out[i] = argmax_j logits[i][j] (fp32 [m][n], row stride ldl); ties → smallest j.
cudaError_t argmax_rows(const float* logits, int m, int n, long ldl, int* out, cudaStream_t stream);

// out[i] = the token runtime::sample_u(logits[i], n, rows[i], rows[i].u) picks (runtime/sampler.h's
// definition; sample.cu says where rounding may differ), rows (device) [m]. One block per row.
cudaError_t sample_rows(const float* logits, int m, int n, long ldl, const SampleRow* rows, int* out,
                        cudaStream_t stream);

}  // namespace g4c::cuda
