// A small strict JSON reader for tokenizer.json: streams model.vocab / model.merges
// into flat buffers and builds nlohmann::json values for the rest. nlohmann's own
// parser (even its SAX mode) spends ~0.3 s on the 33 MB Gemma 3 file; scanning strings
// with a tight loop brings the whole load well under the 1 s budget.
#include "models/tokenizer_json.h"

#include <charconv>

#include "models/error.h"
#include "models/tokenizer_bpe.h"

namespace g4c::models::tokenizer_detail {
namespace {

using json = nlohmann::json;

constexpr int kMaxDepth = 512;  // recursion bound for hostile inputs

class Parser {
 public:
  Parser(std::string_view text, const std::string& name, TokenizerJson& doc)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), name_(name), doc_(doc) {}

  void parse_document() {
    skip_ws();
    if (peek() == '{') {
      doc_.rest = parse_object(1, /*is_root=*/true, /*is_model=*/false);
    } else {
      doc_.rest = parse_value(1);
    }
    skip_ws();
    if (p_ != end_) malformed("unexpected text after the top-level value");
  }

 private:
  [[noreturn]] void malformed(const std::string& what) const {
    throw Error(name_ + ": malformed JSON at byte " + std::to_string(p_ - begin_) + ": " + what);
  }
  [[noreturn]] void invalid(const std::string& what) const { throw Error(name_ + ": " + what); }

  char peek() const { return p_ < end_ ? *p_ : '\0'; }
  bool at_end() const { return p_ >= end_; }
  void skip_ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  void expect(char c, const char* what) {
    skip_ws();
    if (at_end() || *p_ != c) malformed(std::string("expected ") + what);
    ++p_;
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  uint32_t parse_hex4() {
    if (end_ - p_ < 4) malformed("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int d = hex_digit(p_[i]);
      if (d < 0) malformed("bad \\u escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    p_ += 4;
    return v;
  }
  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // Appends the unescaped string at p_ (which must be at its opening quote) to `out`.
  // Strict: no raw control characters, valid UTF-8, paired surrogates.
  void parse_string(std::string& out) {
    skip_ws();
    if (at_end() || *p_ != '"') malformed("expected a string");
    ++p_;
    for (;;) {
      const char* run = p_;
      while (p_ < end_) {
        const auto c = static_cast<uint8_t>(*p_);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++p_;
      }
      out.append(run, p_);
      if (at_end()) malformed("unterminated string");
      const auto c = static_cast<uint8_t>(*p_);
      if (c == '"') {
        ++p_;
        return;
      }
      if (c < 0x20) malformed("control character in a string");
      if (c >= 0x80) {
        uint32_t cp;
        const int len = utf8_char(std::string_view(p_, static_cast<size_t>(end_ - p_)), 0, &cp);
        if (len == 0) malformed("invalid UTF-8 in a string");
        out.append(p_, static_cast<size_t>(len));
        p_ += len;
        continue;
      }
      ++p_;  // backslash
      if (at_end()) malformed("unterminated escape");
      const char e = *p_++;
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) malformed("lone low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') malformed("high surrogate without a low one");
            p_ += 2;
            const uint32_t low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) malformed("high surrogate without a low one");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          malformed(std::string("bad escape \\") + e);
      }
    }
  }

  json parse_number() {
    const char* start = p_;
    bool integral = true;
    if (peek() == '-') ++p_;
    if (peek() == '0') {
      ++p_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9') ++p_;
    } else {
      malformed("bad number");
    }
    if (peek() == '.') {
      integral = false;
      ++p_;
      if (!(peek() >= '0' && peek() <= '9')) malformed("bad number");
      while (peek() >= '0' && peek() <= '9') ++p_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++p_;
      if (peek() == '+' || peek() == '-') ++p_;
      if (!(peek() >= '0' && peek() <= '9')) malformed("bad number");
      while (peek() >= '0' && peek() <= '9') ++p_;
    }
    if (integral) {
      if (*start == '-') {
        int64_t v;
        if (std::from_chars(start, p_, v).ec == std::errc()) return json(v);
      } else {
        uint64_t v;
        if (std::from_chars(start, p_, v).ec == std::errc()) return json(v);
      }
    }
    double d = 0;
    std::from_chars(start, p_, d);  // out-of-range values saturate, as in nlohmann
    return json(d);
  }

  void literal(const char* word) {
    const size_t n = std::char_traits<char>::length(word);
    if (static_cast<size_t>(end_ - p_) < n || std::string_view(p_, n) != word) malformed("invalid literal");
    p_ += n;
  }

  json parse_value(int depth) {
    if (depth > kMaxDepth) malformed("nested deeper than 512 levels");
    skip_ws();
    switch (peek()) {
      case '{': return parse_object(depth, false, false);
      case '[': {
        ++p_;
        json array = json::array();
        skip_ws();
        if (peek() == ']') {
          ++p_;
          return array;
        }
        for (;;) {
          array.push_back(parse_value(depth + 1));
          skip_ws();
          if (peek() == ',') {
            ++p_;
          } else if (peek() == ']') {
            ++p_;
            return array;
          } else {
            malformed("expected ',' or ']'");
          }
        }
      }
      case '"': {
        std::string s;
        parse_string(s);
        return json(std::move(s));
      }
      case 't': literal("true"); return json(true);
      case 'f': literal("false"); return json(false);
      case 'n': literal("null"); return json(nullptr);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        malformed(at_end() ? "unexpected end of input" : "expected a value");
    }
  }

  // The root object streams its "model" member's vocab/merges; other objects are plain.
  json parse_object(int depth, bool is_root, bool is_model) {
    if (depth > kMaxDepth) malformed("nested deeper than 512 levels");
    expect('{', "'{'");
    json object = json::object();
    skip_ws();
    if (peek() == '}') {
      ++p_;
      return object;
    }
    std::string key;
    for (;;) {
      key.clear();
      parse_string(key);
      expect(':', "':'");
      skip_ws();
      if (is_root && key == "model" && peek() == '{') {
        object[key] = parse_object(depth + 1, false, true);
      } else if (is_model && key == "vocab" && peek() == '{') {
        parse_vocab();
        object.erase(key);
      } else if (is_model && key == "merges" && peek() == '[') {
        parse_merges();
        object.erase(key);
      } else {
        object[key] = parse_value(depth + 1);
      }
      skip_ws();
      if (peek() == ',') {
        ++p_;
      } else if (peek() == '}') {
        ++p_;
        return object;
      } else {
        malformed("expected ',' or '}'");
      }
    }
  }

  // "vocab": {"token": id, ...}
  void parse_vocab() {
    doc_.has_vocab = true;
    doc_.vocab.clear();
    doc_.vocab_text.clear();
    ++p_;  // '{'
    skip_ws();
    if (peek() == '}') {
      ++p_;
      return;
    }
    for (;;) {
      const size_t offset = doc_.vocab_text.size();
      parse_string(doc_.vocab_text);
      const TextRef ref{static_cast<uint32_t>(offset), static_cast<uint32_t>(doc_.vocab_text.size() - offset)};
      expect(':', "':'");
      skip_ws();
      const std::string token_for_message = "model.vocab[\"" + std::string(doc_.vocab_token(ref).substr(0, 64)) + "\"]";
      if (peek() == '-') {
        const json v = parse_number();
        invalid(token_for_message + (v.is_number_integer() ? " has a negative id " + v.dump() : " must be an integer id"));
      }
      if (!(peek() >= '0' && peek() <= '9')) {
        if (peek() == '"' || peek() == '{' || peek() == '[' || peek() == 't' || peek() == 'f' || peek() == 'n')
          invalid(token_for_message + " must be an integer id");
        malformed("expected a value");
      }
      const json v = parse_number();
      if (!v.is_number_unsigned()) invalid(token_for_message + " must be an integer id");
      if (v.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)) invalid(token_for_message + " has an id out of range");
      doc_.vocab.emplace_back(ref, static_cast<int64_t>(v.get<uint64_t>()));
      skip_ws();
      if (peek() == ',') {
        ++p_;
      } else if (peek() == '}') {
        ++p_;
        return;
      } else {
        malformed("expected ',' or '}'");
      }
    }
  }

  TextRef merge_string() {
    const size_t offset = doc_.merge_text.size();
    parse_string(doc_.merge_text);
    return TextRef{static_cast<uint32_t>(offset), static_cast<uint32_t>(doc_.merge_text.size() - offset)};
  }

  // "merges": ["left right", ...] (before tokenizers 0.20) or [["left", "right"], ...]
  void parse_merges() {
    doc_.has_merges = true;
    doc_.merges.clear();
    doc_.merge_text.clear();
    ++p_;  // '['
    skip_ws();
    if (peek() == ']') {
      ++p_;
      return;
    }
    for (;;) {
      const std::string where = "model.merges[" + std::to_string(doc_.merges.size()) + "]";
      skip_ws();
      if (peek() == '"') {
        const TextRef both = merge_string();
        const std::string_view s = doc_.merge_token(both);
        const size_t sp = s.find(' ');
        if (sp == std::string_view::npos || s.find(' ', sp + 1) != std::string_view::npos)
          invalid(where + " is not \"left right\": \"" + std::string(s.substr(0, 64)) + "\"");
        doc_.merges.emplace_back(TextRef{both.offset, static_cast<uint32_t>(sp)},
                                 TextRef{static_cast<uint32_t>(both.offset + sp + 1),
                                         static_cast<uint32_t>(both.length - sp - 1)});
      } else if (peek() == '[') {
        ++p_;
        const auto require = [&](char c) {
          skip_ws();
          if (at_end()) malformed("unexpected end of input");
          if (peek() != c) invalid(where + " must be \"left right\" or [left, right]");
        };
        require('"');
        const TextRef left = merge_string();
        require(',');
        ++p_;
        require('"');
        const TextRef right = merge_string();
        require(']');
        ++p_;
        doc_.merges.emplace_back(left, right);
      } else if (at_end()) {
        malformed("unexpected end of input");
      } else {
        invalid(where + " must be \"left right\" or [left, right]");
      }
      skip_ws();
      if (peek() == ',') {
        ++p_;
      } else if (peek() == ']') {
        ++p_;
        return;
      } else {
        malformed("expected ',' or ']'");
      }
    }
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  const std::string& name_;
  TokenizerJson& doc_;
};

}  // namespace

TokenizerJson parse_tokenizer_json(std::string_view text, const std::string& name) {
  if (text.size() >= UINT32_MAX) throw Error(name + ": tokenizer.json larger than 4 GiB");
  TokenizerJson doc;
  doc.vocab_text.reserve(text.size() / 8);
  doc.merge_text.reserve(text.size() / 8);
  Parser(text, name, doc).parse_document();
  return doc;
}

}  // namespace g4c::models::tokenizer_detail
