// Fast reader for Hugging Face tokenizer.json files.
//
// A 262k-entry tokenizer.json is ~33 MB, most of it `model.vocab` (token → id) and
// `model.merges`. Building a full nlohmann DOM for it takes ~0.9 s; this reader uses
// nlohmann's SAX interface instead and streams those two members straight into flat
// vectors, building a DOM only for the (small) rest of the file. Internal to
// models/tokenizer*.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace g4c::models::tokenizer_detail {

struct TokenizerJson {
  // The whole document except model.vocab and model.merges when those have the
  // streamed shapes (object of ids; array of "a b" strings or [a, b] pairs).
  nlohmann::json rest;
  bool has_vocab = false;   // model.vocab was an object and was streamed below
  bool has_merges = false;  // model.merges was an array and was streamed below
  std::vector<std::pair<std::string, int64_t>> vocab;        // in file order
  std::vector<std::pair<std::string, std::string>> merges;   // in rank order
};

// Parses `text`; throws g4c::Error("<name>: ...") for malformed JSON or a vocab/merges
// member of the wrong shape.
TokenizerJson parse_tokenizer_json(std::string_view text, const std::string& name);

}  // namespace g4c::models::tokenizer_detail
