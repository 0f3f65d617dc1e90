// Causal (optionally sliding-window) GQA attention of the CPU backend over a batch's rows,
// reading K/V rows through the backend's KV layout (ring or paged), stored as fp32 or as FP8
// E4M3 codes with a scale per (token, kv head) row (runtime/fp8.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "runtime/batch.h"
#include "runtime/thread_pool.h"

namespace g4c::runtime::cpu {

struct KvRows {
  const float* k = nullptr;  // K rows (fp32 cache)
  const float* v = nullptr;  // V rows (fp32 cache)
  // Element offset of the row of (batch sequence, position) in k / v, or in k_codes / v_codes.
  std::function<size_t(int seq, int pos)> index;
  // FP8 cache (k and v null): one E4M3 code per element at the offsets of `index`, and one
  // fp32 scale per (token, kv head) at (element offset of that head's D values) / head_dim.
  const uint8_t* k_codes = nullptr;
  const uint8_t* v_codes = nullptr;
  const float* k_scales = nullptr;
  const float* v_scales = nullptr;
};

// o[r, h·D..] = Σ_j softmax_j(scale · q_h·k_j) v_j over the keys j visible to row r:
// j ≤ position(r), and j > position(r) − window when window > 0 (DESIGN.md §2). Query head
// h reads kv head h / (Hq / Hkv). Rows of one sequence at consecutive positions are
// processed in blocks that share one gathered copy of their keys and values (an FP8 cache is
// decoded into that per-thread copy, code · scale in fp32).
void attention(ThreadPool& pool, const BatchDesc& batch, const float* q, float* o, int num_q_heads,
               int num_kv_heads, int head_dim, int window, float scale, const KvRows& kv);

}  // namespace g4c::runtime::cpu
