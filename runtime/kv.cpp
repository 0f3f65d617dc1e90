#include "runtime/kv.h"

#include <algorithm>
#include <string>

#include "models/error.h"

namespace g4c::runtime {

RingSlots::RingSlots(int slots) : used_(slots, false) {
  for (int i = slots - 1; i >= 0; --i) free_.push_back(i);
}

int RingSlots::allocate() {
  if (free_.empty()) throw Error("KV: no free ring slot");
  int s = free_.back();
  free_.pop_back();
  used_[s] = true;
  return s;
}

void RingSlots::free(int slot) {
  if (slot < 0 || slot >= num_slots() || !used_[slot]) throw Error("KV: freeing ring slot " + std::to_string(slot) + " twice");
  used_[slot] = false;
  free_.push_back(slot);
}

BlockPool::BlockPool(int num_blocks, int block_size) : block_size_(block_size), used_(num_blocks, false) {
  if (block_size <= 0) throw Error("KV: block size must be positive");
  for (int i = num_blocks - 1; i >= 0; --i) free_.push_back(i);
}

void BlockPool::append(BlockTable& table, int total_tokens) {
  if (!can_append(table, total_tokens))
    throw Error("KV: block pool exhausted (" + std::to_string(num_free()) + " free blocks)");
  while (int(table.size()) < blocks_for(total_tokens)) {
    int b = free_.back();
    free_.pop_back();
    used_[b] = true;
    table.push_back(b);
  }
}

void BlockPool::free(BlockTable& table) {
  for (int b : table) {
    if (b == kReleasedBlock) continue;
    if (b < 0 || b >= num_blocks() || !used_[b]) throw Error("KV: freeing block " + std::to_string(b) + " twice");
    used_[b] = false;
    free_.push_back(b);
  }
  table.clear();
}

int BlockPool::release_before(BlockTable& table, int first_needed) {
  int released = 0;
  const int whole = std::min<int>(int(table.size()), std::max(0, first_needed) / block_size_);
  for (int i = 0; i < whole; ++i) {
    const int b = table[i];
    if (b == kReleasedBlock) continue;
    if (b < 0 || b >= num_blocks() || !used_[b]) throw Error("KV: releasing block " + std::to_string(b) + " twice");
    used_[b] = false;
    free_.push_back(b);
    table[i] = kReleasedBlock;
    ++released;
  }
  return released;
}

int BlockPool::held(const BlockTable& table) {
  int n = 0;
  for (int b : table) n += b != kReleasedBlock;
  return n;
}

}  // namespace g4c::runtime
