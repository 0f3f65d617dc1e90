// Batch metadata of the CUDA backend: one buffer (pinned on the host, mirrored on the device)
// with token ids, positions, logit rows, per-request query starts and cached lengths, ring
// bases, block tables and the KV slot of every row per slot mapping (KERNELS.md "KV cache
// addressing"). Plain C++ (no CUDA): tested on the CPU (tests/cuda_backend/test_meta.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/batch.h"
#include "runtime/plan/plan.h"

namespace g4c::cudart {

namespace fb = plan::fb;

// KV slot mapping shared by KV layers of the same kind, unit (ring capacity / block size) and
// pool (paged sliding layers draw from the window pool, through the window block tables).
struct KvGroup {
  fb::KvKind kind;
  int unit = 0;          // ring capacity or block size
  int64_t scratch = 0;   // slot written by padded rows (one past the last real slot)
  bool windowed = false; // Paged with a window: BatchSequence::window_block_table
};

// Shape of one launch: the real batch, or a decode bucket (padded).
struct Shape {
  int T = 0, S = 0, R = 0;       // rows used by the kernels (padded for buckets)
  int real_T = 0, real_S = 0, real_R = 0;
  int max_q_len = 0, max_kv_len = 0;
  bool bucket = false;
};

// Offsets (in bytes) of the batch metadata in one device buffer (mirrored in pinned memory).
struct MetaLayout {
  size_t tokens = 0, positions = 0, logit_rows = 0, q_start = 0, ctx_len = 0;
  std::vector<size_t> slots;      // per KvGroup: int64 [cap_T]
  std::vector<size_t> ring_base;  // per KvGroup: int32 [cap_S] (rings)
  size_t block_table = 0;         // int32 [cap_S][max_blocks]
  // int32 [cap_S][max_blocks]: the window pool's tables (paged sliding layers); a block that
  // left the window reads 0, a real block that the window mask keeps every kernel from using.
  size_t window_block_table = 0;
  size_t bytes = 0;
};

// Byte offsets for capacities cap_T tokens, cap_S sequences, cap_R logit rows (256-aligned parts).
MetaLayout layout_meta(int cap_T, int cap_S, int cap_R, int num_groups, int max_blocks);

// Writes the metadata of `b` launched as `sh` into `host` (m.bytes). Rows past sh.real_T are
// padding: token 0 at position 0, KV slot = the group's scratch slot, in no request
// (q_start[s] = real_T for s ≥ real_S). Returns the bytes to upload (through the used block
// tables). Throws g4c::Error for a ring slot or KV block that does not exist.
size_t fill_meta(const runtime::BatchDesc& b, const Shape& sh, const std::vector<KvGroup>& groups, const MetaLayout& m,
                 int max_blocks, int ring_slots, unsigned char* host);

}  // namespace g4c::cudart
