// KV capacity managers. They only answer "can I?" and hand out / take back storage units;
// the scheduler owns the queues and decides (nano-vllm style). No device memory here: the
// backend holds the bytes, indexed by the slot and block ids these managers hand out.
//
//  - RingSlots: sliding layers. Every running sequence owns one ring (of plan capacity
//    W−1+max_chunk tokens) in every Ring layer; position p lives at p mod capacity, so a
//    ring never grows and positions beyond the window are overwritten in place.
//  - BlockPool: paged layers. Fixed-size blocks from one pool shared by all Paged layers of
//    one kind; a sequence's BlockTable grows one block per block_size tokens; freed blocks go
//    back to the free list at once (LIFO, so they are reused first). Full layers hold every
//    block of a sequence. Sliding layers in paged blocks (a KvLayer with a window) draw from a
//    second pool of their own: a block goes back as soon as every position in it has left the
//    window of the next query (release_before), its table entry then reads kReleasedBlock, so
//    a sequence holds about window - 1 + chunk tokens there however long it grows.
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
// A table entry whose block left the window and went back to the pool.
inline constexpr int32_t kReleasedBlock = -1;

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
  // Returns the blocks of `table` that hold only positions < first_needed (keys no later query
  // sees); their entries become kReleasedBlock. Returns how many went back.
  int release_before(BlockTable& table, int first_needed);
  // Blocks `table` holds (entries not released).
  static int held(const BlockTable& table);
  // Most blocks a sequence holds in a sliding layer of window W fed chunks of at most `chunk`
  // tokens: the keys of one chunk span W - 1 + chunk positions, over at most one block more
  // than they fill.
  int window_blocks(int window, int chunk) const { return window_blocks_for(window, chunk, block_size_); }
  static int window_blocks_for(int window, int chunk, int block_size) {
    return (window - 1 + chunk + block_size - 1) / block_size + 1;
  }

 private:
  int block_size_;
  std::vector<int32_t> free_;
  std::vector<bool> used_;
};

}  // namespace g4c::runtime
