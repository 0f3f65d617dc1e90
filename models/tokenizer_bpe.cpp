// BPE with merges applied by rank (priority queue over a linked list of symbols),
// byte fallback to <0xNN> tokens and fused unknowns — Hugging Face tokenizers'
// `BPE::merge_word` semantics.
#include "models/tokenizer_bpe.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "models/error.h"

namespace g4c::models::tokenizer_detail {

int utf8_char(std::string_view s, size_t i, uint32_t* cp) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  int len;
  uint32_t c;
  uint32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, c = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, c = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, c = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (int k = 1; k < len; ++k) {
    const uint8_t b = byte(i + k);
    if ((b & 0xC0) != 0x80) return 0;
    c = (c << 6) | (b & 0x3F);
  }
  // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
  if (c < min || (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) return 0;
  *cp = c;
  return len;
}

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t hash_key(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) ^ (key >> 29); }

std::string quoted(std::string_view s) {
  std::string out = "\"";
  out.append(s.substr(0, 64));
  if (s.size() > 64) out += "...";
  return out + "\"";
}

// Min-heap order on (rank, pos) for std::push_heap/pop_heap (which build max-heaps).
bool later(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

BpeModel::BpeModel(TokenizerJson& doc, BpeOptions options, const std::string& name)
    : name_(name), options_(std::move(options)) {
  const auto& vocab = doc.vocab;
  if (vocab.empty()) throw Error(name_ + ": model.vocab is empty");
  int64_t max_id = 0;
  for (const auto& [ref, id] : vocab) max_id = std::max(max_id, id);
  // Ids are dense in every real tokenizer; a bound keeps a corrupt file from asking
  // for gigabytes of id → token table.
  if (max_id >= 2 * static_cast<int64_t>(vocab.size()) + 1024)
    throw Error(name_ + ": model.vocab id " + std::to_string(max_id) + " is far beyond its " +
                std::to_string(vocab.size()) + " entries (ids must be dense)");
  text_ = std::move(doc.vocab_text);
  tokens_.assign(static_cast<size_t>(max_id) + 1, TextRef{0, kAbsent});
  for (const auto& [ref, id] : vocab) {
    if (tokens_[id].length != kAbsent)
      throw Error(name_ + ": model.vocab id " + std::to_string(id) + " is used by both " + quoted(token(id)) +
                  " and " + quoted(std::string_view(text_).substr(ref.offset, ref.length)));
    tokens_[id] = ref;
  }
  size_t capacity = 16;
  while (capacity < vocab.size() * 2) capacity *= 2;
  token_index_.assign(capacity, 0);
  token_mask_ = capacity - 1;
  // File order, so a token listed twice maps to its last id (as a JSON object would).
  for (const auto& [ref, id] : vocab) index_token(static_cast<int32_t>(id));
  doc.vocab.clear();
  doc.vocab.shrink_to_fit();

  bmp_char_ids_.assign(0x10000, -1);
  for (int32_t id = 0; id < size(); ++id) {
    if (tokens_[id].length == kAbsent) continue;
    const std::string_view t = token(id);
    uint32_t cp;
    if (!t.empty() && utf8_char(t, 0, &cp) == static_cast<int>(t.size())) {
      if (cp < 0x10000) {
        bmp_char_ids_[cp] = id;
      } else {
        astral_char_ids_[cp] = id;
      }
    }
  }
  all_bytes_present_ = true;
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    byte_ids_[b] = token_to_id(buf);
    all_bytes_present_ = all_bytes_present_ && byte_ids_[b] >= 0;
  }
  if (!options_.unk_token.empty()) unk_id_ = token_to_id(options_.unk_token);

  const auto& merges = doc.merges;
  capacity = 16;
  while (capacity < merges.size() * 2) capacity *= 2;
  merge_table_.assign(capacity, MergeSlot{kEmpty, 0, 0});
  merge_mask_ = capacity - 1;
  // Resolving merges to ids is most of the load time for 500k merges: split it over
  // a few threads (read-only lookups), then fill the table in rank order.
  struct Resolved {
    int32_t left, right, merged;
  };
  std::vector<Resolved> resolved(merges.size());
  const auto resolve = [&](size_t begin, size_t end) {
    std::string merged;
    for (size_t rank = begin; rank < end; ++rank) {
      const std::string_view left = doc.merge_token(merges[rank].first);
      const std::string_view right = doc.merge_token(merges[rank].second);
      merged.assign(left).append(right);
      resolved[rank] = Resolved{token_to_id(left), token_to_id(right), token_to_id(merged)};
    }
  };
  const size_t threads = merges.size() < 50000 ? 1 : std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4);
  std::vector<std::thread> workers;
  for (size_t t = 1; t < threads; ++t)
    workers.emplace_back(resolve, merges.size() * t / threads, merges.size() * (t + 1) / threads);
  resolve(0, merges.size() / threads);
  for (std::thread& w : workers) w.join();

  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left_id, right_id, merged_id] = resolved[rank];
    if (left_id < 0 || right_id < 0 || merged_id < 0) {
      const char* missing = left_id < 0 ? "its left token" : right_id < 0 ? "its right token" : "the merged token";
      throw Error(name_ + ": model.merges[" + std::to_string(rank) + "] (" +
                  quoted(doc.merge_token(merges[rank].first)) + ", " + quoted(doc.merge_token(merges[rank].second)) +
                  "): " + missing + " is not in model.vocab");
    }
    // A pair listed twice keeps its last rank, as in tokenizers and transformers.js.
    const uint64_t key = pair_key(left_id, right_id);
    for (uint64_t slot = hash_key(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
      MergeSlot& entry = merge_table_[slot];
      if (entry.key == kEmpty || entry.key == key) {
        entry = MergeSlot{key, static_cast<int32_t>(rank), merged_id};
        break;
      }
    }
  }
  find_word_splits(merges, doc);
}

namespace {
constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // ▁
// A point inside `s` where ▁ follows a character other than ▁.
bool is_word_start(std::string_view s, size_t i) {
  return i > 0 && s.compare(i, kMetaspace.size(), kMetaspace) == 0 &&
         !(i >= kMetaspace.size() && s.compare(i - kMetaspace.size(), kMetaspace.size(), kMetaspace) == 0);
}
}  // namespace

void BpeModel::find_word_splits(const std::vector<std::pair<TextRef, TextRef>>& merges, const TokenizerJson& doc) {
  if (options_.ignore_merges) return;  // ignore_merges looks whole words up first
  std::string merged;
  for (const auto& [left, right] : merges) {
    merged.assign(doc.merge_token(left)).append(doc.merge_token(right));
    for (size_t k = 1; k < merged.size(); ++k)
      if (is_word_start(merged, k)) crossing_tokens_.emplace_back(merged, k);
  }
  // With many crossing tokens the checks would cost more than they save.
  split_words_ = crossing_tokens_.size() <= 64;
}

bool BpeModel::can_split_at(std::string_view word, size_t i) const {
  if (!is_word_start(word, i)) return false;
  for (const auto& [token, k] : crossing_tokens_)
    if (i >= k && word.compare(i - k, token.size(), token) == 0) return false;
  return true;
}

void BpeModel::index_token(int32_t id) {
  const std::string_view t = token(id);
  const uint64_t hash = std::hash<std::string_view>{}(t);
  const uint64_t entry = (hash >> 32 << 32) | static_cast<uint64_t>(id + 1);
  for (uint64_t slot = hash & token_mask_;; slot = (slot + 1) & token_mask_) {
    uint64_t& e = token_index_[slot];
    if (e == 0 || ((e >> 32) == (hash >> 32) && token(static_cast<int32_t>((e & 0xFFFFFFFFu) - 1)) == t)) {
      e = entry;
      return;
    }
  }
}

int32_t BpeModel::token_to_id(std::string_view t) const {
  const uint64_t hash = std::hash<std::string_view>{}(t);
  for (uint64_t slot = hash & token_mask_;; slot = (slot + 1) & token_mask_) {
    const uint64_t e = token_index_[slot];
    if (e == 0) return -1;
    const auto id = static_cast<int32_t>((e & 0xFFFFFFFFu) - 1);
    if ((e >> 32) == (hash >> 32) && token(id) == t) return id;
  }
}

std::optional<std::string_view> BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= size() || tokens_[id].length == kAbsent) return std::nullopt;
  return token(id);
}

const BpeModel::MergeSlot* BpeModel::find_merge(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  for (uint64_t slot = hash_key(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
    const MergeSlot& entry = merge_table_[slot];
    if (entry.key == key) return &entry;
    if (entry.key == kEmpty) return nullptr;
  }
}

int32_t BpeModel::char_id(uint32_t code_point) const {
  if (code_point < 0x10000) return bmp_char_ids_[code_point];
  const auto it = astral_char_ids_.find(code_point);
  return it == astral_char_ids_.end() ? -1 : it->second;
}

void BpeModel::push_initial_symbols(std::string_view word, BpeScratch& scratch) const {
  auto& symbols = scratch.symbols;
  symbols.clear();
  bool previous_unk = false;
  const auto push = [&](int32_t id) {
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back(BpeScratch::Symbol{id, index - 1, index + 1});
  };
  for (size_t i = 0; i < word.size();) {
    uint32_t cp = 0;
    int len = utf8_char(word, i, &cp);
    const int32_t id = len > 0 ? char_id(cp) : -1;
    if (len == 0) len = 1;  // an invalid byte stands alone (and falls back to <0xNN>)
    if (id >= 0) {
      push(id);
      previous_unk = false;
    } else {
      bool bytes_ok = options_.byte_fallback;
      for (int k = 0; bytes_ok && !all_bytes_present_ && k < len; ++k)
        bytes_ok = byte_ids_[static_cast<uint8_t>(word[i + k])] >= 0;
      if (bytes_ok) {
        for (int k = 0; k < len; ++k) push(byte_ids_[static_cast<uint8_t>(word[i + k])]);
        previous_unk = false;
      } else {
        if (unk_id_ < 0)
          throw Error(name_ + ": text has a character (" + quoted(word.substr(i, len)) +
                      ") that is in neither the vocabulary nor the byte fallback, and there is no unk_token");
        if (!(options_.fuse_unk && previous_unk)) push(unk_id_);
        previous_unk = true;
      }
    }
    i += len;
  }
  if (!symbols.empty()) symbols.back().next = -1;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out, BpeScratch& scratch) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    const int32_t id = token_to_id(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (!split_words_) {
    merge_piece(word, out, scratch);
    return;
  }
  size_t start = 0;
  for (size_t i = 1; i < word.size(); ++i) {
    if (static_cast<uint8_t>(word[i]) != 0xE2 || !can_split_at(word, i)) continue;
    encode_piece(word.substr(start, i - start), out, scratch);
    start = i;
  }
  encode_piece(word.substr(start), out, scratch);
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out, BpeScratch& scratch) const {
  if (piece.size() > kCachedPieceBytes) {
    merge_piece(piece, out, scratch);
    return;
  }
  const std::string key(piece);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_piece(piece, out, scratch);
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kCacheEntries) cache_.clear();
  cache_.emplace(key, std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
}

void BpeModel::merge_piece(std::string_view word, std::vector<int32_t>& out, BpeScratch& scratch) const {
  push_initial_symbols(word, scratch);
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  heap.clear();
  const auto n = static_cast<int32_t>(symbols.size());
  for (int32_t i = 0; i + 1 < n; ++i) {
    if (const MergeSlot* m = find_merge(symbols[i].id, symbols[i + 1].id))
      heap.push_back(BpeScratch::Candidate{m->rank, i, m->new_id});
  }
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const BpeScratch::Candidate top = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& left = symbols[top.pos];
    if (left.id < 0 || left.next < 0) continue;
    // Stale candidate: the pair at `pos` changed since it was queued (a changed
    // pair always yields a different merged token, so new_id identifies it).
    const int32_t right_pos = left.next;
    const MergeSlot* current = find_merge(left.id, symbols[right_pos].id);
    if (current == nullptr || current->new_id != top.new_id) continue;
    left.id = top.new_id;
    left.next = symbols[right_pos].next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    symbols[right_pos].id = -1;
    if (left.prev >= 0) {
      if (const MergeSlot* m = find_merge(symbols[left.prev].id, left.id)) {
        heap.push_back(BpeScratch::Candidate{m->rank, left.prev, m->new_id});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
    if (left.next >= 0) {
      if (const MergeSlot* m = find_merge(left.id, symbols[left.next].id)) {
        heap.push_back(BpeScratch::Candidate{m->rank, top.pos, m->new_id});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }
  // Symbol 0 is never merged away (merges keep the left position), so it heads the list.
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace g4c::models::tokenizer_detail
