// KV capacity managers. They only answer "can I?" and hand out / take back storage units;
// the scheduler owns the queues and decides (nano-vllm style). No device memory here: the
// backend holds the bytes, indexed by the slot and block ids these managers hand out.
//
//  - RingSlots: sliding layers. Every running sequence owns one ring (of plan capacity
//    W−1+max_chunk tokens) in every Ring layer; position p lives at p mod capacity, so a
//    ring never grows and positions beyond the window are overwritten in place.
//  - BlockPool: full layers. Fixed-size blocks from one pool shared by all Paged layers;
//    a sequence's BlockTable grows one block per block_size tokens; freed blocks go back
//    to the free list at once (LIFO, so they are reused first).
#pragma once

#include <cstdint>
#include <vector>

namespace g4c::runtime {

class RingSlots {
 public:
  explicit RingSlots(int slots);
  bool can_allocate() const { return !free_.empty(); }
  int allocate();        // throws g4c::Error when none is free
  void free(int slot);   // throws on a slot that is not allocated
  int num_free() const { return int(free_.size()); }
  int num_slots() const { return int(used_.size()); }

 private:
  std::vector<int> free_;
  std::vector<bool> used_;
};

using BlockTable = std::vector<int32_t>;

class BlockPool {
 public:
  BlockPool(int num_blocks, int block_size);
  int block_size() const { return block_size_; }
  int num_blocks() const { return int(used_.size()); }
  int num_free() const { return int(free_.size()); }
  int blocks_for(int tokens) const { return (tokens + block_size_ - 1) / block_size_; }
  // A new sequence of `tokens` tokens fits in the free blocks.
  bool can_allocate(int tokens) const { return blocks_for(tokens) <= num_free(); }
  // `table` can grow to hold `total_tokens` tokens.
  bool can_append(const BlockTable& table, int total_tokens) const {
    return blocks_for(total_tokens) - int(table.size()) <= num_free();
  }
  // Grows `table` to hold `total_tokens` tokens; throws when the pool cannot.
  void append(BlockTable& table, int total_tokens);
  // Returns every block of `table` to the pool and clears it.
  void free(BlockTable& table);

 private:
  int block_size_;
  std::vector<int32_t> free_;
  std::vector<bool> used_;
};

}  // namespace g4c::runtime
