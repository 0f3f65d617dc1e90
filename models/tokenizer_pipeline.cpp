// Added-token matching, normalizers, pre-tokenizers and decoders of tokenizer.json,
// following Hugging Face tokenizers (added_vocabulary.rs, normalizers/, pre_tokenizers/,
// decoders/).
#include "models/tokenizer_pipeline.h"

#include "models/error.h"
#include "models/tokenizer_bpe.h"

namespace g4c::models::tokenizer_detail {
namespace {

using json = nlohmann::json;

bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
// Word characters for single_word: ASCII alphanumerics and '_', and any non-ASCII
// byte (an approximation of char::is_alphanumeric that treats all non-ASCII as letters).
bool is_word_byte(uint8_t c) { return c >= 0x80 || c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }

std::string type_of(const json& config, const std::string& where) {
  if (!config.is_object()) throw Error(where + " must be an object or null");
  const auto it = config.find("type");
  if (it == config.end() || !it->is_string()) throw Error(where + ".type is missing or not a string");
  return it->get<std::string>();
}

const json& required(const json& config, const char* key, const std::string& where) {
  const auto it = config.find(key);
  if (it == config.end()) throw Error(where + "." + key + " is missing");
  return *it;
}

std::string string_field(const json& config, const char* key, const std::string& where) {
  const json& v = required(config, key, where);
  if (!v.is_string()) throw Error(where + "." + key + " must be a string");
  return v.get<std::string>();
}

std::string string_field_or(const json& config, const char* key, const std::string& where, std::string fallback) {
  return config.contains(key) ? string_field(config, key, where) : fallback;
}

bool bool_field_or(const json& config, const char* key, const std::string& where, bool fallback) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw Error(where + "." + key + " must be a boolean");
  return it->get<bool>();
}

size_t count_field_or(const json& config, const char* key, const std::string& where, size_t fallback) {
  const auto it = config.find(key);
  if (it == config.end()) return fallback;
  if (!it->is_number_unsigned()) throw Error(where + "." + key + " must be a non-negative integer");
  return it->get<size_t>();
}

// {"String": "..."} → the string; {"Regex": ...} is not supported.
std::string string_pattern(const json& config, const std::string& where) {
  const json& pattern = required(config, "pattern", where);
  if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
    std::string s = pattern["String"].get<std::string>();
    if (s.empty()) throw Error(where + ".pattern is an empty string");
    return s;
  }
  if (pattern.is_object() && pattern.contains("Regex"))
    throw Error(where + ".pattern: Regex patterns are not supported (only {\"String\": ...})");
  throw Error(where + ".pattern must be {\"String\": \"...\"}");
}

const json& array_field(const json& config, const char* key, const std::string& where) {
  const json& v = required(config, key, where);
  if (!v.is_array()) throw Error(where + "." + key + " must be an array");
  return v;
}

void replace_all(std::string& text, std::string_view pattern, std::string_view content) {
  if (text.find(pattern) == std::string::npos) return;
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  size_t at = 0;
  for (size_t hit; (hit = text.find(pattern, at)) != std::string::npos; at = hit + pattern.size()) {
    out.append(text, at, hit - at);
    out.append(content);
  }
  out.append(text, at, std::string::npos);
  text = std::move(out);
}

// Metaspace's prepend_scheme, or the legacy add_prefix_space flag.
bool metaspace_scheme(const json& config, const std::string& where, bool* first_only) {
  *first_only = false;
  if (config.contains("prepend_scheme")) {
    const std::string scheme = string_field(config, "prepend_scheme", where);
    if (scheme == "always") return true;
    if (scheme == "never") return false;
    if (scheme == "first") return *first_only = true;
    throw Error(where + ".prepend_scheme must be \"always\", \"first\" or \"never\", not \"" + scheme + "\"");
  }
  return bool_field_or(config, "add_prefix_space", where, true);
}

}  // namespace

// ---- added tokens ----

void AddedTokenMatcher::add(const AddedToken& token, std::string pattern) {
  if (pattern.empty()) return;  // can never match
  int32_t node = 0;
  for (const char ch : pattern) {
    const auto byte = static_cast<uint8_t>(ch);
    int32_t next = -1;
    for (const auto& [b, child] : nodes_[node].children)
      if (b == byte) next = child;
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_[node].children.emplace_back(byte, next);
      nodes_.emplace_back();
    }
    node = next;
  }
  first_byte_[static_cast<uint8_t>(pattern[0])] = true;
  nodes_[node].token = static_cast<int32_t>(tokens_.size());
  tokens_.push_back(token);
}

bool AddedTokenMatcher::find(std::string_view text, size_t from, Match* match) const {
  for (size_t i = from; i < text.size(); ++i) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
    int32_t node = 0, best = -1;
    size_t best_end = i;
    for (size_t j = i; j < text.size(); ++j) {
      const auto byte = static_cast<uint8_t>(text[j]);
      int32_t next = -1;
      for (const auto& [b, child] : nodes_[node].children)
        if (b == byte) next = child;
      if (next < 0) break;
      node = next;
      if (nodes_[node].token >= 0) best = nodes_[node].token, best_end = j + 1;
    }
    if (best < 0) continue;
    const AddedToken& token = tokens_[best];
    if (token.single_word) {
      const bool starts_word = i == 0 || !is_word_byte(static_cast<uint8_t>(text[i - 1]));
      const bool ends_word = best_end == text.size() || !is_word_byte(static_cast<uint8_t>(text[best_end]));
      if (!starts_word || !ends_word) {
        i = best_end - 1;  // the rejected span is consumed, as in aho-corasick's iterator
        continue;
      }
    }
    size_t begin = i, end = best_end;
    if (token.lstrip)
      while (begin > from && is_space(static_cast<uint8_t>(text[begin - 1]))) --begin;
    if (token.rstrip)
      while (end < text.size() && is_space(static_cast<uint8_t>(text[end]))) ++end;
    *match = Match{begin, end, static_cast<size_t>(best)};
    return true;
  }
  return false;
}

// ---- normalizer ----

Normalizer Normalizer::parse(const json& config, const std::string& where) {
  Normalizer out;
  if (config.is_null()) return out;
  const std::string type = type_of(config, where);
  if (type == "Sequence") {
    const json& list = array_field(config, "normalizers", where);
    for (size_t i = 0; i < list.size(); ++i) {
      Normalizer inner = parse(list[i], where + ".normalizers[" + std::to_string(i) + "]");
      out.steps_.insert(out.steps_.end(), inner.steps_.begin(), inner.steps_.end());
    }
  } else if (type == "Replace") {
    out.steps_.push_back(Step{Step::kReplace, string_pattern(config, where), string_field(config, "content", where)});
  } else if (type == "Prepend") {
    out.steps_.push_back(Step{Step::kPrepend, {}, string_field(config, "prepend", where)});
  } else {
    throw Error(where + ": unsupported normalizer type \"" + type + "\" (supported: Replace, Prepend, Sequence)");
  }
  return out;
}

void Normalizer::apply(std::string& text) const {
  for (const Step& step : steps_) {
    if (step.kind == Step::kReplace) {
      replace_all(text, step.pattern, step.content);
    } else if (!text.empty()) {
      text.insert(0, step.content);
    }
  }
}

// ---- pre-tokenizer ----

PreTokenizer PreTokenizer::parse(const json& config, const std::string& where) {
  PreTokenizer out;
  if (config.is_null()) return out;
  const std::string type = type_of(config, where);
  if (type == "Sequence") {
    const json& list = array_field(config, "pretokenizers", where);
    for (size_t i = 0; i < list.size(); ++i) {
      PreTokenizer inner = parse(list[i], where + ".pretokenizers[" + std::to_string(i) + "]");
      out.steps_.insert(out.steps_.end(), inner.steps_.begin(), inner.steps_.end());
    }
  } else if (type == "Split") {
    Step step{Step::kSplit, string_pattern(config, where)};
    if (bool_field_or(config, "invert", where, false)) throw Error(where + ".invert = true is not supported");
    const std::string behavior = string_field(config, "behavior", where);
    if (behavior == "Removed") {
      step.behavior = Behavior::kRemoved;
    } else if (behavior == "Isolated") {
      step.behavior = Behavior::kIsolated;
    } else if (behavior == "MergedWithPrevious") {
      step.behavior = Behavior::kMergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      step.behavior = Behavior::kMergedWithNext;
    } else if (behavior == "Contiguous") {
      step.behavior = Behavior::kContiguous;
    } else {
      throw Error(where + ".behavior \"" + behavior + "\" is not a split behavior");
    }
    out.steps_.push_back(step);
  } else if (type == "Metaspace") {
    Step step{Step::kMetaspace, string_field_or(config, "replacement", where, "\xE2\x96\x81")};
    uint32_t cp;
    if (step.pattern.empty() || utf8_char(step.pattern, 0, &cp) != static_cast<int>(step.pattern.size()))
      throw Error(where + ".replacement must be one character");
    bool first_only = false;
    const bool prepend = metaspace_scheme(config, where, &first_only);
    step.prepend = !prepend ? Prepend::kNever : first_only ? Prepend::kFirst : Prepend::kAlways;
    step.metaspace_split = bool_field_or(config, "split", where, true);
    out.steps_.push_back(step);
  } else {
    throw Error(where + ": unsupported pre_tokenizer type \"" + type + "\" (supported: Split, Metaspace, Sequence)");
  }
  return out;
}

void PreTokenizer::split(std::string_view text, std::string_view pattern, Behavior behavior,
                         std::vector<std::string>& out) {
  // Segments alternate between text and pattern matches; empty ones are never produced.
  struct Segment {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Segment> segments;
  size_t at = 0;
  for (size_t hit; (hit = text.find(pattern, at)) != std::string_view::npos; at = hit + pattern.size()) {
    if (hit > at) segments.push_back({at, hit, false});
    segments.push_back({hit, hit + pattern.size(), true});
  }
  if (at < text.size()) segments.push_back({at, text.size(), false});

  std::vector<Segment> merged;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Segment& s : segments)
        if (!s.is_match) merged.push_back(s);
      break;
    case Behavior::kIsolated:
      merged = segments;
      break;
    case Behavior::kMergedWithPrevious:
      for (const Segment& s : segments) {
        if (s.is_match && !previous_match && !merged.empty()) {
          merged.back().end = s.end;
        } else {
          merged.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (size_t k = segments.size(); k-- > 0;) {
        const Segment& s = segments[k];
        if (s.is_match && !previous_match && !merged.empty()) {
          merged.back().begin = s.begin;
        } else {
          merged.push_back(s);
        }
        previous_match = s.is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case Behavior::kContiguous:
      for (const Segment& s : segments) {
        if (s.is_match && previous_match && !merged.empty()) {
          merged.back().end = s.end;
        } else {
          merged.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
  }
  for (const Segment& s : merged) out.emplace_back(text.substr(s.begin, s.end - s.begin));
}

void PreTokenizer::apply(std::string_view section, bool first_section, std::vector<std::string>& words) const {
  words.clear();
  words.emplace_back(section);
  std::vector<std::string> next;
  for (const Step& step : steps_) {
    next.clear();
    for (size_t w = 0; w < words.size(); ++w) {
      if (step.kind == Step::kSplit) {
        split(words[w], step.pattern, step.behavior, next);
        continue;
      }
      std::string word = words[w];
      replace_all(word, " ", step.pattern);
      const bool prepend = step.prepend == Prepend::kAlways ||
                           (step.prepend == Prepend::kFirst && first_section && w == 0);
      if (prepend && word.compare(0, step.pattern.size(), step.pattern) != 0) word.insert(0, step.pattern);
      if (step.metaspace_split) {
        split(word, step.pattern, Behavior::kMergedWithNext, next);
      } else if (!word.empty()) {
        next.push_back(std::move(word));
      }
    }
    words.swap(next);
  }
}

// ---- decoder ----

Decoder Decoder::parse(const json& config, const std::string& where) {
  Decoder out;
  if (config.is_null()) return out;
  const std::string type = type_of(config, where);
  if (type == "Sequence") {
    const json& list = array_field(config, "decoders", where);
    for (size_t i = 0; i < list.size(); ++i) {
      Decoder inner = parse(list[i], where + ".decoders[" + std::to_string(i) + "]");
      out.steps_.insert(out.steps_.end(), inner.steps_.begin(), inner.steps_.end());
    }
  } else if (type == "Replace") {
    out.steps_.push_back(Step{Step::kReplace, string_pattern(config, where), string_field(config, "content", where)});
  } else if (type == "ByteFallback") {
    out.steps_.push_back(Step{Step::kByteFallback, {}, {}});
  } else if (type == "Fuse") {
    out.steps_.push_back(Step{Step::kFuse, {}, {}});
  } else if (type == "Strip") {
    Step step{Step::kStrip, {}, string_field(config, "content", where)};
    uint32_t cp;
    if (step.content.empty() || utf8_char(step.content, 0, &cp) != static_cast<int>(step.content.size()))
      throw Error(where + ".content must be one character");
    step.strip_start = count_field_or(config, "start", where, 0);
    step.strip_stop = count_field_or(config, "stop", where, 0);
    out.steps_.push_back(step);
  } else if (type == "Metaspace") {
    Step step{Step::kMetaspace, string_field_or(config, "replacement", where, "\xE2\x96\x81"), " "};
    bool first_only = false;
    step.metaspace_strip_first = metaspace_scheme(config, where, &first_only);
    out.steps_.push_back(step);
  } else {
    throw Error(where + ": unsupported decoder type \"" + type +
                "\" (supported: Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence)");
  }
  return out;
}

std::string Decoder::apply(std::vector<std::string> tokens) const {
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::kReplace:
      case Step::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          // Metaspace drops every replacement character of the first token (tokenizers'
          // metaspace.rs decode_chain) unless prepend_scheme is "never".
          const bool drop = step.kind == Step::kMetaspace && i == 0 && step.metaspace_strip_first;
          replace_all(tokens[i], step.pattern, drop ? std::string_view() : std::string_view(step.content));
        }
        break;
      case Step::kByteFallback: {
        // Runs of <0xNN> tokens become their bytes when those are valid UTF-8, else
        // one U+FFFD per byte.
        std::vector<std::string> out;
        std::string bytes;
        const auto flush = [&] {
          if (bytes.empty()) return;
          bool valid = true;
          for (size_t i = 0; valid && i < bytes.size();) {
            uint32_t cp;
            const int len = utf8_char(bytes, i, &cp);
            valid = len > 0;
            i += len;
          }
          if (valid) {
            out.push_back(bytes);
          } else {
            for (size_t i = 0; i < bytes.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
          }
          bytes.clear();
        };
        for (std::string& token : tokens) {
          const auto hex = [](char c) {
            return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
          };
          if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' && hex(token[3]) >= 0 &&
              hex(token[4]) >= 0) {
            bytes.push_back(static_cast<char>(hex(token[3]) * 16 + hex(token[4])));
          } else {
            flush();
            out.push_back(std::move(token));
          }
        }
        flush();
        tokens = std::move(out);
        break;
      }
      case Step::kFuse: {
        std::string fused;
        for (const std::string& token : tokens) fused += token;
        tokens.assign(1, std::move(fused));
        break;
      }
      case Step::kStrip:
        for (std::string& token : tokens) {
          size_t begin = 0, end = token.size();
          const size_t width = step.content.size();
          for (size_t k = 0; k < step.strip_start && token.compare(begin, width, step.content) == 0 && begin + width <= end; ++k)
            begin += width;
          for (size_t k = 0; k < step.strip_stop && end >= begin + width && token.compare(end - width, width, step.content) == 0; ++k)
            end -= width;
          token = token.substr(begin, end - begin);
        }
        break;
    }
  }
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

}  // namespace g4c::models::tokenizer_detail
