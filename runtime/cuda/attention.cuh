// Attention family: flash-style attention (tensor cores, fp32 online-softmax state, no score
// matrix in memory) over a packed batch of variable-length query chunks against a KV cache.
// Host API only; kernels in attention.cu.
//
// Math (DESIGN.md §2, KERNELS.md Attention): score = scale·q·k (Gemma 4: scale 1.0), no softcap. Query i of request r has position
// p = ctx_len[r] + i; key j is visible iff j ≤ p, and for a sliding layer (window W > 0) also
// j > p − W. GQA: q head h uses kv head h / (hq/hkv); K/V are never repeated in memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "runtime/cuda/kernel_options.h"

namespace g4c::cuda {

using bf16 = __nv_bfloat16;

// K/V rows are [slots][hkv][d] bf16 (16-byte aligned). Key j of request r lives in slot
//   paged (block_table != null): block_table[r·max_blocks + j/block_size]·block_size + j%block_size
//   ring  (block_table == null): ring_base[r] + j % ring_capacity
// The chunk's own keys must already be in the cache (qk_norm_rope_kv_write). For a ring,
// ring_capacity ≥ window + q_len − 1 (the chunk's writes must not evict keys its earliest query
// still sees).
// FP8 KV (k8 != null; DESIGN.md §4, runtime/fp8.h): k8 / v8 hold E4M3 codes [slots][hkv][d]
// (16-byte aligned) and k_scale / v_scale one fp32 scale per (slot, kv head), [slots][hkv]; a
// value is code · scale. The kernels convert a tile to bf16 (the product in fp32, rounded once)
// as they load it into shared memory; k / v are unused.
struct KvCache {
  const bf16* k = nullptr;
  const bf16* v = nullptr;
  const uint8_t* k8 = nullptr;
  const uint8_t* v8 = nullptr;
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  const int* block_table = nullptr;  // device
  int max_blocks = 0;
  int block_size = 0;
  const int* ring_base = nullptr;  // device, [requests]
  int ring_capacity = 0;
};

struct AttnBatch {
  int num_requests = 0;
  const int* q_start = nullptr;  // device [R+1]: request r's queries are rows q_start[r]..q_start[r+1)
  const int* ctx_len = nullptr;  // device [R]: keys already cached before this chunk
  int total_q = 0;               // host: q_start[R]
  int max_q_len = 0;             // host: max query rows of one request
  int max_kv_len = 0;            // host: max ctx_len + q_len
};

// Heuristic number of KV splits (1 for prefill-sized chunks; more for decode at long context),
// for the cooperative decode kernel. sms: SMs the launch may use (the stream's green context);
// 0 = the device's.
int attention_num_splits(const AttnBatch& b, int hq, int hkv, int d, int window = 0, int sms = 0);
// Workspace (fp32 partial outputs + softmax state) for `splits` > 1; 0 when splits == 1.
size_t attention_workspace_bytes(const AttnBatch& b, int hq, int d, int splits);

// Split-KV decode with the cooperative kernel merges a row set's splits inside the kernel — the
// splits run as one thread-block cluster and combine through distributed shared memory — when
// 2 ≤ splits ≤ 8, the stream has the whole device and all the clusters are resident at once;
// else the separate combine kernel merges them through the workspace. Both merges give
// bitwise-equal outputs (the same fold in split order). The cluster size attention() with these
// arguments (decode-sized) merges its splits in on `stream`: `splits`, or 0 = the combine kernel.
int attention_combine_cluster_size(const AttnBatch& b, int hq, int hkv, int d, int splits, cudaStream_t stream);
// Clusters of `splits` cooperative decode blocks at head dim d resident at once on `stream`
// (the occupancy API; 0 when they cannot launch).
int attention_cluster_capacity(int d, int splits, cudaStream_t stream);

// Kernels: decode-sized chunks (queries · G ≤ 16 per request) take the cooperative 4-warp kernel
// of attention_decode.cu; prefill-sized ones at d 256 / 512 the Hopper wgmma kernel of
// attention_sm90.cu; d 64 / 128 prefill the flash kernel (mma.sync).
// With ko.pdl (KernelOptions) the cooperative decode kernel may start while the kernel ahead of it
// runs — it loads its first cached K/V tiles (keys < ctx_len, block table / ring bases) before it
// waits for that kernel, then Q and the chunk's own keys — and the split combine waits for the
// split kernel. Whatever runs ahead must write nothing else the attention reads (the runtime's
// q/k norm + RoPE + KV write writes Q and the new keys only).
// q: [total_q][hq][d] bf16; out: [total_q][hq][d] bf16 (must not alias q).
// Preconditions: d ∈ {64, 128, 256, 512}; hq % hkv == 0 and hq/hkv ∈ {1,2,4,8,16};
// window ≥ 0 (0 = full causal); scale > 0. Every query sees at least its own key.
cudaError_t attention(const bf16* q, int hq, int hkv, int d, const KvCache& kv, const AttnBatch& b,
                      int window, float scale, bf16* out, int splits, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream, const KernelOptions& ko = {});

}  // namespace g4c::cuda
