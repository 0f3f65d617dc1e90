// libFuzzer target: (1) Tokenizer::from_json_text on the input as tokenizer.json text,
// and, when that loads, encoding a fixed text and decoding the ids; (2) encoding the
// input as text with a small valid Gemma-style tokenizer, and decoding it (and the
// input bytes read as ids). Only g4c::Error may come out; ASan/UBSan catch the rest.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/error.h"
#include "models/tokenizer.h"

namespace {

// Gemma-style: Replace normalizer, Split pre-tokenizer, byte fallback, added tokens,
// BOS template, Replace+ByteFallback+Fuse decoder.
const char* kSmallTokenizer = R"({
 "version": "1.0",
 "added_tokens": [
  {"id": 0, "content": "<pad>", "special": true, "normalized": false},
  {"id": 1, "content": "<eos>", "special": true, "normalized": false},
  {"id": 2, "content": "<bos>", "special": true, "normalized": false},
  {"id": 3, "content": "<unk>", "special": true, "normalized": false},
  {"id": 266, "content": "\n\n", "special": false, "normalized": false},
  {"id": 267, "content": "<x>", "special": false, "normalized": true, "lstrip": true, "rstrip": true}],
 "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
 "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false},
 "post_processor": {"type": "TemplateProcessing",
   "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
   "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
 "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
   {"type": "ByteFallback"}, {"type": "Fuse"}]},
 "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
   "vocab": {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<0x00>": 4, "<0x01>": 5, "<0x41>": 6, "<0xC3>": 7,
     "<0xA9>": 8, "<0xE2>": 9, "<0x96>": 10, "<0x81>": 11, "\u2581": 260, "a": 261, "b": 262, "ab": 263,
     "\u2581a": 264, "\n": 265, "\n\n": 266, "<x>": 267, "aa": 268},
   "merges": [["a", "b"], ["\u2581", "a"], ["a", "a"], ["\n", "\n"]]}
})";

const g4c::models::Tokenizer& small() {
  static const auto tok = g4c::models::Tokenizer::from_json_text(kSmallTokenizer, "fuzz-small.json");
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  try {
    const auto tok = g4c::models::Tokenizer::from_json_text(input, "fuzz.json");
    const auto ids = tok->encode("ab a\n\n<x> \xC3\xA9\xFF");
    tok->decode(ids, true);
    tok->decode(ids, false);
  } catch (const g4c::Error&) {
  }
  try {
    const auto& tok = small();
    const auto ids = tok.encode(input);
    tok.decode(ids, false);
    std::vector<int32_t> raw(input.begin(), input.end());
    tok.decode(raw);
  } catch (const g4c::Error&) {
  }
  return 0;
}
