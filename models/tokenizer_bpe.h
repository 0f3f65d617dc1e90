// The BPE model of a tokenizer.json (model.type == "BPE"): vocab, merge ranks, byte
// fallback. Internal to models/tokenizer*.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace g4c::models::tokenizer_detail {

struct BpeOptions {
  std::string unk_token;  // empty: none
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
};

// Reusable buffers for one encode() call (avoids re-allocating per word).
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;  // -1 at the end; a merged-away symbol has id -1
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;  // index of the left symbol; ties on rank go to the leftmost pair
    int32_t new_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

class BpeModel {
 public:
  // `vocab`: (token, id) pairs (consumed); `merges`: (left, right) in rank order.
  // Throws g4c::Error("<name>: ...") for duplicate ids, merges naming unknown tokens,
  // a missing unk token, etc.
  BpeModel(std::vector<std::pair<std::string, int64_t>> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
           const std::string& name);
  BpeModel(const BpeModel&) = delete;  // token_ids_ holds views into tokens_
  BpeModel& operator=(const BpeModel&) = delete;

  // Appends the ids of one pre-tokenized word (already normalized).
  void encode_word(std::string_view word, std::vector<int32_t>& out, BpeScratch& scratch) const;

  // -1 when absent.
  int32_t token_to_id(std::string_view token) const;
  // Token string of `id`, or nullptr when the model vocab has no such id.
  const std::string* id_to_token(int32_t id) const;
  // One past the largest id of the model vocab.
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }

 private:
  struct MergeSlot {
    uint64_t key;  // (left << 32) | right; kEmpty when unused
    int32_t rank;
    int32_t new_id;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  const MergeSlot* find_merge(int32_t left, int32_t right) const;
  int32_t char_id(uint32_t code_point) const;
  void push_initial_symbols(std::string_view word, BpeScratch& scratch) const;

  std::string name_;
  BpeOptions options_;
  int32_t unk_id_ = -1;
  std::vector<std::string> tokens_;  // by id; gaps are empty and absent from token_ids_
  std::vector<bool> present_;
  std::unordered_map<std::string_view, int32_t> token_ids_;  // views into tokens_
  std::vector<int32_t> bmp_char_ids_;                        // code point < 0x10000 → id or -1
  std::unordered_map<uint32_t, int32_t> astral_char_ids_;    // code point ≥ 0x10000
  int32_t byte_ids_[256];                                    // <0xNN> → id or -1
  bool all_bytes_present_ = false;
  std::vector<MergeSlot> merge_table_;  // open addressing, power-of-two size
  uint64_t merge_mask_ = 0;
};

// Decodes one UTF-8 character at s[i]; returns its byte length (1–4) and sets *cp, or
// returns 0 when the bytes there are not valid UTF-8.
int utf8_char(std::string_view s, size_t i, uint32_t* cp);

}  // namespace g4c::models::tokenizer_detail
