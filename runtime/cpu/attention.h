// Causal (optionally sliding-window) GQA attention of the CPU backend over a batch's rows,
// reading K/V rows through the backend's KV layout (ring or paged).
#pragma once

#include <cstddef>
#include <functional>

#include "runtime/batch.h"
#include "runtime/thread_pool.h"

namespace g4c::runtime::cpu {

struct KvRows {
  const float* k;  // K rows
  const float* v;  // V rows
  // Float offset of the row of (batch sequence, position) in k / v.
  std::function<size_t(int seq, int pos)> index;
};

// o[r, h·D..] = Σ_j softmax_j(scale · q_h·k_j) v_j over the keys j visible to row r:
// j ≤ position(r), and j > position(r) − window when window > 0 (DESIGN.md §2). Query head
// h reads kv head h / (Hq / Hkv). Rows of one sequence at consecutive positions are
// processed in blocks that share one gathered copy of their keys and values.
void attention(ThreadPool& pool, const BatchDesc& batch, const float* q, float* o, int num_q_heads,
               int num_kv_heads, int head_dim, int window, float scale, const KvRows& kv);

}  // namespace g4c::runtime::cpu
