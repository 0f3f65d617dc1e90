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
  // Loads tokenizer.json, or tokenizer.json.xz (decompressed in memory with liblzma).
  // Throws g4c::Error naming the file for unsupported model/normalizer/pre-tokenizer/
  // decoder/post-processor types, missing or ill-typed fields, or malformed JSON.
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& tokenizer_json);
  static std::unique_ptr<Tokenizer> from_json_text(std::string_view json_text, const std::string& name_for_messages);
  virtual ~Tokenizer() = default;

  // add_bos = true applies the post-processor template (for Gemma: BOS prepended),
  // like `add_special_tokens=True` in Hugging Face; false gives the bare ids.
  // Special/added tokens written in the text (e.g. "<bos>", "<start_of_turn>") are
  // matched before BPE, as in Hugging Face. Invalid UTF-8 bytes fall back to <0xNN>.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos = true) const = 0;
  // skip_special: drop added tokens marked "special" (bos, eos, pad...) from the text.
  // Throws g4c::Error for an id outside [0, vocab_size()) or one with no token.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special = true) const = 0;
  // One past the largest id (model vocab and added tokens): 262,145 for Gemma 3's
  // tokenizer.json, whose <image_soft_token> (262144) lies past the 262,144 model ids.
  virtual int32_t vocab_size() const = 0;
  // The template's first special token before the sequence (else "<bos>"); -1 if none.
  virtual int32_t bos_id() const = 0;
  // The id of "<eos>" (else "</s>"); -1 if none. Generation stops on the EOS ids of
  // generation_config.json, which may list more (e.g. <end_of_turn>).
  virtual int32_t eos_id() const = 0;
  virtual bool is_special(int32_t id) const = 0;
  // "" for an id with no token.
  virtual std::string id_to_token(int32_t id) const = 0;
  // -1 when the token is neither an added token nor in the model vocab.
  virtual int32_t token_to_id(std::string_view token) const = 0;
};

}  // namespace g4c::models
