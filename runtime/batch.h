// The batch of one program execution (KERNELS.md "The batch of a step"): which tokens,
// at which positions, of which sequences, where their KV lives, which rows need logits.
// Built by the engine from the scheduler's decisions; read by every backend kernel.
#pragma once

#include <cstdint>
#include <vector>

namespace g4c::runtime {

struct BatchSequence {
  int first_row = 0;                // first token row of this sequence in the batch
  int num_rows = 0;                 // tokens this sequence feeds in this step
  int ring_slot = -1;               // ring index in every Ring KV layer
  const std::vector<int32_t>* block_table = nullptr;  // paged blocks (position p in block p / block_size)
  // Paged sliding layers (KvLayer with a window): blocks of the window pool, indexed like
  // block_table; blocks wholly before the first visible key are released (-1, never read).
  const std::vector<int32_t>* window_block_table = nullptr;
};

struct BatchDesc {
  std::vector<int32_t> token_ids;   // [T]
  std::vector<int32_t> positions;   // [T]
  std::vector<int32_t> seq_of_row;  // [T] index into seqs
  std::vector<BatchSequence> seqs;  // [S]
  std::vector<int32_t> logit_rows;  // [R] ascending token rows that need logits

  int num_tokens() const { return int(token_ids.size()); }
  // Appends `n` tokens of one sequence starting at `position`; rows needing logits:
  // all of them (all_logits) or only the last one (last_logit).
  void add_sequence(const int32_t* tokens, int n, int position, int ring_slot, const std::vector<int32_t>* blocks,
                    bool all_logits, bool last_logit, const std::vector<int32_t>* window_blocks = nullptr) {
    BatchSequence s{num_tokens(), n, ring_slot, blocks, window_blocks};
    for (int i = 0; i < n; ++i) {
      if (all_logits || (last_logit && i == n - 1)) logit_rows.push_back(num_tokens());
      token_ids.push_back(tokens[i]);
      positions.push_back(position + i);
      seq_of_row.push_back(int(seqs.size()));
    }
    seqs.push_back(s);
  }
};

}  // namespace g4c::runtime
