// The non-model stages of a tokenizer.json: added-token matching, normalizer,
// pre-tokenizer, decoder. Each is parsed from its JSON member (throwing g4c::Error
// naming the file and the member for unsupported types) and applied with Hugging
// Face tokenizers' semantics. Internal to models/tokenizer*.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace g4c::models::tokenizer_detail {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// Leftmost-longest matcher over added tokens (a byte trie). Strip flags widen a
// match over the whitespace next to it; single_word rejects matches inside a word.
class AddedTokenMatcher {
 public:
  void add(const AddedToken& token, std::string pattern);
  bool empty() const { return nodes_.size() <= 1; }
  const AddedToken& token(size_t index) const { return tokens_[index]; }

  struct Match {
    size_t begin, end;  // span consumed in the text (including stripped whitespace)
    size_t token;       // index into the tokens passed to add()
  };
  // The next match at or after `from`, or false.
  bool find(std::string_view text, size_t from, Match* match) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t token = -1;
  };
  std::vector<Node> nodes_{Node{}};
  std::vector<AddedToken> tokens_;
  bool first_byte_[256] = {};
};

// A string-to-string normalizer (Replace, Prepend, Sequence of those); NFC-style
// unicode normalizers are not supported.
class Normalizer {
 public:
  static Normalizer parse(const nlohmann::json& config, const std::string& where);
  void apply(std::string& text) const;
  bool empty() const { return steps_.empty(); }

 private:
  struct Step {
    enum Kind { kReplace, kPrepend } kind;
    std::string pattern, content;
  };
  std::vector<Step> steps_;
};

// Split (string pattern) / Metaspace / Sequence pre-tokenizers.
class PreTokenizer {
 public:
  static PreTokenizer parse(const nlohmann::json& config, const std::string& where);
  // Splits one normalized section into words. `first_section`: the section starts
  // the original text (Metaspace's prepend_scheme "first").
  void apply(std::string_view section, bool first_section, std::vector<std::string>& words) const;
  bool empty() const { return steps_.empty(); }

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  enum class Prepend { kAlways, kFirst, kNever };
  struct Step {
    enum Kind { kSplit, kMetaspace } kind;
    std::string pattern;  // split string / metaspace replacement
    Behavior behavior = Behavior::kIsolated;
    Prepend prepend = Prepend::kAlways;
    bool metaspace_split = true;
  };
  static void split(std::string_view text, std::string_view pattern, Behavior behavior,
                    std::vector<std::string>& out);
  std::vector<Step> steps_;
};

// Replace / ByteFallback / Fuse / Strip / Metaspace / Sequence decoders over a token list.
class Decoder {
 public:
  static Decoder parse(const nlohmann::json& config, const std::string& where);
  std::string apply(std::vector<std::string> tokens) const;

 private:
  struct Step {
    enum Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind;
    std::string pattern, content;
    size_t strip_start = 0, strip_stop = 0;
    bool metaspace_strip_first = true;  // prepend_scheme != "never"
  };
  std::vector<Step> steps_;
};

}  // namespace g4c::models::tokenizer_detail
