// Batch metadata of the CUDA backend (see meta.h).
#include "runtime/cuda_backend/meta.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "models/error.h"

namespace g4c::cudart {
namespace {
size_t align256(size_t b) { return (b + 255) & ~size_t(255); }
}  // namespace

MetaLayout layout_meta(int cap_T, int cap_S, int cap_R, int num_groups, int max_blocks) {
  MetaLayout m;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t o = at;
    at = align256(at + bytes);
    return o;
  };
  m.tokens = take(size_t(cap_T) * 4);
  m.positions = take(size_t(cap_T) * 4);
  m.logit_rows = take(size_t(cap_R) * 4);
  m.q_start = take(size_t(cap_S + 1) * 4);
  m.ctx_len = take(size_t(cap_S) * 4);
  for (size_t g = 0; g < size_t(num_groups); ++g) {
    m.slots.push_back(take(size_t(cap_T) * 8));
    m.ring_base.push_back(take(size_t(cap_S) * 4));
  }
  m.block_table = take(size_t(cap_S) * max_blocks * 4);
  m.window_block_table = take(size_t(cap_S) * max_blocks * 4);
  m.bytes = at;
  return m;
}

size_t fill_meta(const runtime::BatchDesc& b, const Shape& sh, const std::vector<KvGroup>& groups, const MetaLayout& m,
                 int max_blocks, int ring_slots, unsigned char* h) {
  auto i32 = [&](size_t off) { return reinterpret_cast<int32_t*>(h + off); };
  int32_t* tok = i32(m.tokens);
  int32_t* pos = i32(m.positions);
  for (int i = 0; i < sh.T; ++i) {
    tok[i] = i < sh.real_T ? b.token_ids[i] : 0;
    pos[i] = i < sh.real_T ? b.positions[i] : 0;
  }
  int32_t* lr = i32(m.logit_rows);
  for (int r = 0; r < sh.R; ++r) lr[r] = r < sh.real_R ? b.logit_rows[r] : 0;
  int32_t* qs = i32(m.q_start);
  int32_t* ctx = i32(m.ctx_len);
  for (int s = 0; s <= sh.S; ++s) qs[s] = s < sh.real_S ? b.seqs[s].first_row : sh.real_T;
  for (int s = 0; s < sh.S; ++s) ctx[s] = s < sh.real_S ? b.positions[b.seqs[s].first_row] : 0;
  bool windowed = false;
  for (const auto& g : groups) windowed |= g.windowed;
  for (const bool window : {false, true}) {
    if (window && !windowed) break;
    int32_t* bt = i32(window ? m.window_block_table : m.block_table);
    std::memset(bt, 0, size_t(sh.S) * max_blocks * 4);
    for (int s = 0; s < sh.real_S; ++s) {
      const auto* table = window ? b.seqs[s].window_block_table : b.seqs[s].block_table;
      if (!table) continue;
      if (int(table->size()) > max_blocks)
        throw Error("cuda backend: a block table of " + std::to_string(table->size()) + " blocks exceeds its width (" +
                    std::to_string(max_blocks) + ")");
      int32_t* row = bt + size_t(s) * max_blocks;
      for (size_t i = 0; i < table->size(); ++i) row[i] = std::max<int32_t>(0, (*table)[i]);  // released: 0
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& grp = groups[g];
    const bool ring = grp.kind == fb::KvKind::Ring;
    int64_t* sl = reinterpret_cast<int64_t*>(h + m.slots[g]);
    int32_t* rb = i32(m.ring_base[g]);
    for (int s = 0; s < sh.S; ++s)
      rb[s] = s < sh.real_S && ring ? int32_t(int64_t(b.seqs[s].ring_slot) * grp.unit) : 0;
    for (int i = 0; i < sh.T; ++i) {
      if (i >= sh.real_T) {
        sl[i] = grp.scratch;
        continue;
      }
      const auto& seq = b.seqs[b.seq_of_row[i]];
      const int p = b.positions[i];
      if (ring) {
        if (seq.ring_slot < 0 || seq.ring_slot >= ring_slots)
          throw Error("cuda backend: ring slot " + std::to_string(seq.ring_slot) + " out of range");
        sl[i] = int64_t(seq.ring_slot) * grp.unit + p % grp.unit;
      } else {
        const size_t blk = size_t(p / grp.unit);
        const auto* table = grp.windowed ? seq.window_block_table : seq.block_table;
        if (!table || blk >= table->size() || (*table)[blk] < 0)
          throw Error("cuda backend: position " + std::to_string(p) + " has no KV block");
        sl[i] = int64_t((*table)[blk]) * grp.unit + p % grp.unit;
      }
    }
  }
  return std::min(m.bytes, (windowed ? m.window_block_table : m.block_table) + size_t(sh.S) * max_blocks * 4);
}

}  // namespace g4c::cudart
