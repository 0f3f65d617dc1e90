// The BPE model of a tokenizer.json (model.type == "BPE"): vocab, merge ranks, byte
// fallback. Internal to models/tokenizer*.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "models/tokenizer_json.h"

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
  // Takes doc.vocab / doc.vocab_text (moved out) and doc.merges (read). Throws
  // g4c::Error("<name>: ...") for duplicate ids, merges naming unknown tokens, etc.
  BpeModel(TokenizerJson& doc, BpeOptions options, const std::string& name);

  // Appends the ids of one pre-tokenized word (already normalized). Thread-safe.
  void encode_word(std::string_view word, std::vector<int32_t>& out, BpeScratch& scratch) const;

  // -1 when absent.
  int32_t token_to_id(std::string_view token) const;
  // Token string of `id`, or nullopt when the model vocab has no such id.
  std::optional<std::string_view> id_to_token(int32_t id) const;
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
  // BPE of one piece, through the cache when it is short.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out, BpeScratch& scratch) const;
  void merge_piece(std::string_view piece, std::vector<int32_t>& out, BpeScratch& scratch) const;
  void find_word_splits(const std::vector<std::pair<TextRef, TextRef>>& merges, const TokenizerJson& doc);
  bool can_split_at(std::string_view word, size_t i) const;
  int32_t char_id(uint32_t code_point) const;
  void push_initial_symbols(std::string_view word, BpeScratch& scratch) const;

  std::string name_;
  BpeOptions options_;
  int32_t unk_id_ = -1;
  static constexpr uint32_t kAbsent = ~uint32_t{0};
  std::string_view token(int32_t id) const { return std::string_view(text_).substr(tokens_[id].offset, tokens_[id].length); }
  void index_token(int32_t id);

  std::string text_;            // all token strings (TokenizerJson::vocab_text)
  std::vector<TextRef> tokens_;  // by id; length kAbsent for ids not in the vocab
  // token → id, open addressing: (hash >> 32) << 32 | (id + 1), 0 = empty slot.
  std::vector<uint64_t> token_index_;
  uint64_t token_mask_ = 0;
  std::vector<int32_t> bmp_char_ids_;                        // code point < 0x10000 → id or -1
  std::unordered_map<uint32_t, int32_t> astral_char_ids_;    // code point ≥ 0x10000
  int32_t byte_ids_[256];                                    // <0xNN> → id or -1
  bool all_bytes_present_ = false;
  std::vector<MergeSlot> merge_table_;  // open addressing, power-of-two size
  uint64_t merge_mask_ = 0;

  // Word splitting (a speed-up with identical results): a merge can only join symbols
  // across a point where "▁" follows another character if its merged token spans that
  // point. The few merged tokens that do ("crossing" tokens, e.g. Gemma 3's ">▁</")
  // are kept with the offset of such a point; a word is cut at every such point no
  // crossing token covers, and the pieces are merged (and cached) independently.
  bool split_words_ = false;
  std::vector<std::pair<std::string, size_t>> crossing_tokens_;
  static constexpr size_t kCachedPieceBytes = 64;
  static constexpr size_t kCacheEntries = 1 << 16;  // cleared when full
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

// Decodes one UTF-8 character at s[i]; returns its byte length (1–4) and sets *cp, or
// returns 0 when the bytes there are not valid UTF-8.
int utf8_char(std::string_view s, size_t i, uint32_t* cp);

}  // namespace g4c::models::tokenizer_detail
