// Lexer of the chat template engine: template text → tokens.
//
// Preprocessing is that of @huggingface/jinja's Template (and of transformers'
// apply_chat_template, which renders with trim_blocks and lstrip_blocks): one trailing
// newline is dropped; spaces and tabs before a block or comment tag at the start of a line
// are removed (lstrip_blocks); the newline right after a block or comment tag is removed
// (trim_blocks). Whitespace control: `{%-`, `{{-`, `{#-` strip the whitespace before the
// tag, `-%}`, `-}}`, `-#}` the whitespace after it.
#include <string>
#include <vector>

#include "models/chat_template_ast.h"
#include "models/chat_template_value.h"
#include "models/error.h"

namespace g4c::models::jinja {
namespace {

// The preprocessed source, with the original line of each byte.
struct Source {
  std::string text;
  std::vector<int> line;
};

Source preprocess(const std::string& in) {
  std::string src = in;
  std::vector<int> lines(src.size());
  int ln = 1;
  for (size_t k = 0; k < src.size(); ++k) {
    lines[k] = ln;
    if (src[k] == '\n') ++ln;
  }
  if (!src.empty() && src.back() == '\n') {
    src.pop_back();
    lines.pop_back();
  }
  Source out;
  auto keep = [&](size_t k) {
    out.text.push_back(src[k]);
    out.line.push_back(lines[k]);
  };
  // lstrip_blocks: /^[ \t]*({[#%-])/gm → "$1"
  Source lstripped;
  for (size_t k = 0; k < src.size();) {
    if (k == 0 || src[k - 1] == '\n') {
      size_t e = k;
      while (e < src.size() && (src[e] == ' ' || src[e] == '\t')) ++e;
      if (e + 1 < src.size() && src[e] == '{' && (src[e + 1] == '#' || src[e + 1] == '%' || src[e + 1] == '-')) {
        k = e;
      }
    }
    keep(k);
    ++k;
  }
  lstripped = std::move(out);
  out = {};
  // trim_blocks: /([#%-]})\n/g → "$1"
  const std::string& t = lstripped.text;
  for (size_t k = 0; k < t.size(); ++k) {
    out.text.push_back(t[k]);
    out.line.push_back(lstripped.line[k]);
    if ((t[k] == '#' || t[k] == '%' || t[k] == '-') && k + 2 < t.size() && t[k + 1] == '}' && t[k + 2] == '\n') {
      out.text.push_back('}');
      out.line.push_back(lstripped.line[k + 1]);
      k += 2;
    }
  }
  return out;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  Lexer(const std::string& source, const std::string& origin) : src_(preprocess(source)), origin_(origin) {}

  std::vector<Token> run() {
    const std::string& s = src_.text;
    while (pos_ < s.size()) {
      if (!in_tag_) {
        size_t end = pos_;
        while (true) {
          end = s.find('{', end);
          if (end == std::string::npos) {
            end = s.size();
            break;
          }
          if (end + 1 < s.size() && (s[end + 1] == '%' || s[end + 1] == '{' || s[end + 1] == '#')) break;
          ++end;
        }
        if (end > pos_) {
          push(Token::Type::Text, s.substr(pos_, end - pos_), pos_);
          pos_ = end;
          continue;
        }
        open_tag();
        continue;
      }
      lex_in_tag();
    }
    if (in_tag_) fail(tag_line_, "unterminated tag (no closing '%}' or '}}')");
    tokens_.push_back({Token::Type::End, "", src_.line.empty() ? 1 : src_.line.back()});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw g4c::Error(origin_ + ":" + std::to_string(line) + ": chat template: " + what);
  }
  int line_at(size_t p) const { return src_.line.empty() ? 1 : src_.line[std::min(p, src_.line.size() - 1)]; }

  void push(Token::Type type, std::string value, size_t at) {
    tokens_.push_back({type, std::move(value), line_at(at)});
  }

  void strip_trailing_text() {
    if (tokens_.empty() || tokens_.back().type != Token::Type::Text) return;
    std::string& v = tokens_.back().value;
    v = trim_js(v, false, true);
    if (v.empty()) tokens_.pop_back();
  }

  void skip_leading_space() {
    const std::string& s = src_.text;
    while (pos_ < s.size()) {
      size_t len = 0;
      if (!is_js_space(decode_utf8(s, pos_, &len))) break;
      pos_ += len;
    }
  }

  // At "{%", "{{" or "{#" outside a tag.
  void open_tag() {
    const std::string& s = src_.text;
    const char kind = s[pos_ + 1];
    const int line = line_at(pos_);
    const bool strip = pos_ + 2 < s.size() && s[pos_ + 2] == '-';
    if (kind == '#') {
      size_t start = pos_ + 2 + (strip ? 1 : 0);
      size_t end = s.find("#}", start);
      if (end == std::string::npos) fail(line, "unterminated comment (no closing '#}')");
      const bool strip_after = end > start && s[end - 1] == '-';
      if (strip) strip_trailing_text();
      pos_ = end + 2;
      if (strip_after) skip_leading_space();
      // A comment ends text the way a tag does: the next text is a new token.
      tokens_.push_back({Token::Type::Text, "", line});
      return;
    }
    if (strip) strip_trailing_text();
    if (!tokens_.empty() && tokens_.back().type == Token::Type::Text && tokens_.back().value.empty()) tokens_.pop_back();
    push(kind == '%' ? Token::Type::OpenStmt : Token::Type::OpenExpr, kind == '%' ? "{%" : "{{", pos_);
    pos_ += strip ? 3 : 2;
    in_tag_ = true;
    tag_line_ = line;
    curly_ = 0;
  }

  void close_tag(Token::Type type, bool strip) {
    push(type, type == Token::Type::CloseStmt ? "%}" : "}}", pos_);
    pos_ += strip ? 3 : 2;
    in_tag_ = false;
    if (strip) skip_leading_space();
  }

  void lex_in_tag() {
    const std::string& s = src_.text;
    while (pos_ < s.size() && (s[pos_] == ' ' || s[pos_] == '\t' || s[pos_] == '\n' || s[pos_] == '\r' ||
                               s[pos_] == '\f' || s[pos_] == '\v'))
      ++pos_;
    if (pos_ >= s.size()) return;
    const char c = s[pos_];
    const char n1 = pos_ + 1 < s.size() ? s[pos_ + 1] : '\0';
    const char n2 = pos_ + 2 < s.size() ? s[pos_ + 2] : '\0';
    const bool stmt = tokens_back_open() == Token::Type::OpenStmt;
    if (c == '-' && n2 == '}' && (n1 == '%' || n1 == '}')) {
      if ((n1 == '%') != stmt) fail(line_at(pos_), std::string("'-") + n1 + "}' closes a tag opened with '" + (stmt ? "{%" : "{{") + "'");
      return close_tag(n1 == '%' ? Token::Type::CloseStmt : Token::Type::CloseExpr, true);
    }
    if (c == '%' && n1 == '}') {
      if (!stmt) fail(line_at(pos_), "'%}' closes a tag opened with '{{'");
      return close_tag(Token::Type::CloseStmt, false);
    }
    if (c == '}' && n1 == '}' && curly_ == 0) {
      if (stmt) fail(line_at(pos_), "'}}' closes a tag opened with '{%'");
      return close_tag(Token::Type::CloseExpr, false);
    }
    if (c == '\'' || c == '"') return lex_string(c);
    if (is_digit(c)) {
      size_t e = pos_;
      while (e < s.size() && is_digit(s[e])) ++e;
      const bool after_dot = !tokens_.empty() && tokens_.back().type == Token::Type::Op && tokens_.back().value == ".";
      if (!after_dot && e + 1 < s.size() && s[e] == '.' && is_digit(s[e + 1])) {
        ++e;
        while (e < s.size() && is_digit(s[e])) ++e;
        push(Token::Type::Float, s.substr(pos_, e - pos_), pos_);
      } else {
        push(Token::Type::Integer, s.substr(pos_, e - pos_), pos_);
      }
      pos_ = e;
      return;
    }
    if (is_name_char(c)) {
      size_t e = pos_;
      while (e < s.size() && is_name_char(s[e])) ++e;
      push(Token::Type::Name, s.substr(pos_, e - pos_), pos_);
      pos_ = e;
      return;
    }
    static const char* const two[] = {"**", "//", "==", "!=", "<=", ">="};
    for (const char* op : two) {
      if (c == op[0] && n1 == op[1]) {
        push(Token::Type::Op, op, pos_);
        pos_ += 2;
        return;
      }
    }
    if (std::string("()[]{},.:|+-~*/%<>=").find(c) != std::string::npos) {
      if (c == '{') ++curly_;
      if (c == '}') --curly_;
      push(Token::Type::Op, std::string(1, c), pos_);
      ++pos_;
      return;
    }
    size_t len = 0;
    decode_utf8(s, pos_, &len);
    fail(line_at(pos_), "unexpected character '" + s.substr(pos_, len) + "' in a tag");
  }

  Token::Type tokens_back_open() const {
    for (auto it = tokens_.rbegin(); it != tokens_.rend(); ++it)
      if (it->type == Token::Type::OpenStmt || it->type == Token::Type::OpenExpr) return it->type;
    return Token::Type::End;
  }

  void lex_string(char quote) {
    const std::string& s = src_.text;
    const int line = line_at(pos_);
    std::string out;
    size_t p = pos_ + 1;
    while (true) {
      if (p >= s.size()) fail(line, "unterminated string literal");
      const char ch = s[p];
      if (ch == quote) break;
      if (ch != '\\') {
        out.push_back(ch);
        ++p;
        continue;
      }
      if (++p >= s.size()) fail(line, "unterminated string literal");
      const char e = s[p++];
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case '\'': case '"': case '\\': out.push_back(e); break;
        case 'x': case 'u': {
          const size_t digits = e == 'x' ? 2 : 4;
          if (p + digits > s.size()) fail(line, "bad escape sequence in a string literal");
          uint32_t cp = 0;
          for (size_t k = 0; k < digits; ++k) {
            const char h = s[p + k];
            const int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) fail(line, std::string("bad escape sequence '\\") + e + "' in a string literal");
            cp = cp * 16 + uint32_t(d);
          }
          p += digits;
          if (cp >= 0xD800 && cp <= 0xDFFF) fail(line, "a '\\u' escape of a lone surrogate is not supported");
          if (cp < 0x80) {
            out.push_back(char(cp));
          } else if (cp < 0x800) {
            out.push_back(char(0xC0 | (cp >> 6)));
            out.push_back(char(0x80 | (cp & 0x3F)));
          } else {
            out.push_back(char(0xE0 | (cp >> 12)));
            out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(char(0x80 | (cp & 0x3F)));
          }
          break;
        }
        default:
          fail(line, std::string("unknown escape sequence '\\") + e + "' in a string literal");
      }
    }
    tokens_.push_back({Token::Type::String, std::move(out), line});
    pos_ = p + 1;
  }

  Source src_;
  std::string origin_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool in_tag_ = false;
  int tag_line_ = 0;
  int curly_ = 0;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const std::string& origin) {
  std::vector<Token> tokens = Lexer(source, origin).run();
  // Drop the empty text markers left by comments.
  std::vector<Token> out;
  out.reserve(tokens.size());
  for (auto& t : tokens)
    if (!(t.type == Token::Type::Text && t.value.empty())) out.push_back(std::move(t));
  return out;
}

}  // namespace g4c::models::jinja
