// Fast reader for Hugging Face tokenizer.json files.
//
// A 262k-entry tokenizer.json is ~33 MB, most of it `model.vocab` (token → id) and
// `model.merges`. Building a full nlohmann DOM for it takes ~0.9 s (and its SAX mode
// ~0.3 s); this strict reader streams those two members straight into flat buffers and
// builds nlohmann::json values only for the (small) rest of the file. Internal to
// models/tokenizer*.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace g4c::models::tokenizer_detail {

// A string stored in one of TokenizerJson's text buffers.
struct TextRef {
  uint32_t offset = 0;
  uint32_t length = 0;
};

struct TokenizerJson {
  // The whole document except model.vocab and model.merges when those have the
  // streamed shapes (object of ids; array of "a b" strings or [a, b] pairs).
  nlohmann::json rest;
  bool has_vocab = false;   // model.vocab was an object and was streamed below
  bool has_merges = false;  // model.merges was an array and was streamed below
  // Streamed members: strings back to back in one buffer each (a million small
  // std::strings would dominate load time).
  std::string vocab_text;
  std::vector<std::pair<TextRef, int64_t>> vocab;  // (token, id) in file order
  std::string merge_text;
  std::vector<std::pair<TextRef, TextRef>> merges;  // (left, right) in rank order

  std::string_view vocab_token(const TextRef& r) const { return std::string_view(vocab_text).substr(r.offset, r.length); }
  std::string_view merge_token(const TextRef& r) const { return std::string_view(merge_text).substr(r.offset, r.length); }
};

// Parses `text` (RFC 8259: no comments, no trailing commas, valid UTF-8, ≤ 512 levels
// deep); throws g4c::Error("<name>: malformed JSON at byte N: ...") for bad JSON, or
// g4c::Error("<name>: model.vocab[...] ...") for a vocab/merges entry of the wrong shape.
TokenizerJson parse_tokenizer_json(std::string_view text, const std::string& name);

}  // namespace g4c::models::tokenizer_detail
