// Hugging Face tokenizer.json BPE as used by Gemma (3 and 4): normalizer
// Replace(" " → "▁"), pre-tokenizer Split(" ", MergedWithPrevious) or Metaspace,
// added/special tokens matched before BPE, byte fallback (<0xNN>), BOS template
// post-processor, decoder Replace("▁" → " ") + ByteFallback + Fuse.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace g4c::models {

class Tokenizer {
 public:
  // Loads tokenizer.json (or tokenizer.json.xz is NOT handled here: decompress first).
  // Throws g4c::Error naming the file for unsupported model types or malformed JSON.
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& tokenizer_json);
  static std::unique_ptr<Tokenizer> from_json_text(std::string_view json_text, const std::string& name_for_messages);
  virtual ~Tokenizer() = default;

  // add_bos follows the post-processor (BOS prepended) when true.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos = true) const = 0;
  // skip_special: drop special/added control tokens (bos, eos, pad...) from the text.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special = true) const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  virtual bool is_special(int32_t id) const = 0;
  virtual std::string id_to_token(int32_t id) const = 0;
};

}  // namespace g4c::models
