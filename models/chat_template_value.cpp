// The value type of the chat template engine: conversion from JSON, truthiness, printing,
// equality, `tojson`, and the UTF-8 / whitespace helpers the filters share.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "models/chat_template_value.h"
#include "models/error.h"

namespace g4c::models::jinja {

namespace {

uint32_t child_depth(const Value& child) {
  if (child.kind == Value::Kind::Namespace)
    throw g4c::Error("chat template: a namespace cannot be stored in a list, dict or namespace");
  return child.depth;
}

uint32_t checked_depth(uint32_t inner) {
  if (inner + 1 > Value::kMaxDepth)
    throw g4c::Error("chat template: value nested deeper than " + std::to_string(Value::kMaxDepth) + " levels");
  return inner + 1;
}

}  // namespace

Value Value::make_list(List x) {
  uint32_t inner = 0;
  for (const auto& v : x) inner = std::max(inner, child_depth(v));
  Value v;
  v.kind = Kind::List;
  v.depth = checked_depth(inner);
  v.list = std::make_shared<const List>(std::move(x));
  return v;
}

Value Value::make_dict(Dict x) {
  uint32_t inner = 0;
  for (const auto& e : x) inner = std::max(inner, child_depth(e.second));
  Value v;
  v.kind = Kind::Dict;
  v.depth = checked_depth(inner);
  v.dict = std::make_shared<Dict>(std::move(x));
  return v;
}

Value Value::make_namespace(Dict x) {
  Value v = make_dict(std::move(x));
  v.kind = Kind::Namespace;
  return v;
}

Value Value::from_json(const nlohmann::json& j, uint32_t depth) {
  if (depth > kMaxDepth)
    throw g4c::Error("chat template: JSON input nested deeper than " + std::to_string(kMaxDepth) + " levels");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return none();
    case nlohmann::json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return integer(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      return u <= uint64_t(INT64_MAX) ? integer(int64_t(u)) : floating(double(u));
    }
    case nlohmann::json::value_t::number_float: {
      // JSON has one number type: an integral value is an integer (as in the reference
      // engine, which reads JSON numbers in JavaScript).
      const double d = j.get<double>();
      if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.007199254740992e15) return integer(int64_t(d));
      return floating(d);
    }
    case nlohmann::json::value_t::string: return string(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x, depth + 1));
      return make_list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(it.key(), from_json(it.value(), depth + 1));
      return make_dict(std::move(items));
    }
    default: throw g4c::Error("chat template: unsupported JSON value (binary) in the template variables");
  }
}

const Value* Value::find(const std::string& key) const {
  if (!dict) return nullptr;
  for (const auto& [k, v] : *dict)
    if (k == key) return &v;
  return nullptr;
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::Undefined: case Kind::None: return false;
    case Kind::Bool: return b;
    case Kind::Int: return i != 0;
    case Kind::Float: return f != 0 && !std::isnan(f);
    case Kind::String: return !s.empty();
    case Kind::List: return !list->empty();
    case Kind::Dict: return !dict->empty();
    case Kind::Namespace: case Kind::Function: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "none";
    case Kind::Bool: return "boolean";
    case Kind::Int: return "integer";
    case Kind::Float: return "float";
    case Kind::String: return "string";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "namespace";
    case Kind::Function: return "function";
  }
  return "?";
}

std::string format_float(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  // Shortest round-trip digits and decimal exponent, laid out as JavaScript does.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, std::fabs(x), std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t epos = sci.find('e');
  std::string digits;
  for (size_t k = 0; k < epos; ++k)
    if (sci[k] != '.') digits.push_back(sci[k]);
  const int exp10 = std::stoi(sci.substr(epos + 1));
  const int n = exp10 + 1;  // position of the decimal point relative to the digits
  const int k = int(digits.size());
  std::string out = x < 0 ? "-" : "";
  if (k <= n && n <= 21) {
    out += digits + std::string(size_t(n - k), '0');
    if (x == std::trunc(x)) out += ".0";
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, size_t(n)) + "." + digits.substr(size_t(n));
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(size_t(-n), '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += (n - 1 >= 0 ? "e+" : "e-") + std::to_string(std::abs(n - 1));
  }
  return out;
}

std::string Value::str() const {
  switch (kind) {
    case Kind::Undefined: case Kind::None: return "";
    case Kind::Bool: return b ? "true" : "false";
    case Kind::Int: return std::to_string(i);
    case Kind::Float: return format_float(f);
    case Kind::String: return s;
    case Kind::List: case Kind::Dict: case Kind::Namespace: {
      JsonFormat fmt;
      return to_json(*this, fmt);
    }
    case Kind::Function: return "[function]";
  }
  return "";
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_numeric_like() && b.is_numeric_like()) {
    if (a.kind != K::Float && b.kind != K::Float)
      return (a.kind == K::Bool ? int64_t(a.b) : a.i) == (b.kind == K::Bool ? int64_t(b.b) : b.i);
    return a.number() == b.number();
  }
  const bool a_null = a.kind == K::None || a.kind == K::Undefined;
  const bool b_null = b.kind == K::None || b.kind == K::Undefined;
  if (a_null || b_null) return a_null && b_null;
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::String: return a.s == b.s;
    case K::List: {
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    }
    case K::Dict: {
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [key, v] : *a.dict) {
        const Value* w = b.find(key);
        if (!w || !equal(v, *w)) return false;
      }
      return true;
    }
    default: return a.dict == b.dict && a.fn == b.fn;
  }
}

namespace {

void json_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out.push_back('"');
  for (size_t p = 0; p < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[p]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(char(c));
      ++p;
    } else if (c < 0x20) {
      static const char* const named[] = {"b", "t", "n", nullptr, "f", "r"};
      if (c >= 8 && c <= 13 && named[c - 8]) {
        out.push_back('\\');
        out += named[c - 8];
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      }
      ++p;
    } else if (c < 0x80 || !ensure_ascii) {
      if (c == 0x7f && ensure_ascii) {
        out += "\\u007f";
      } else {
        out.push_back(char(c));
      }
      ++p;
    } else {
      size_t len = 0;
      uint32_t cp = decode_utf8(s, p, &len);
      p += len;
      char buf[16];
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out += buf;
    }
  }
  out.push_back('"');
}

void json_value(const Value& v, const JsonFormat& fmt, int depth, std::string& out) {
  using K = Value::Kind;
  if (depth > 512) throw g4c::Error("chat template: tojson: value nested deeper than 512 levels");
  const std::string item_sep = !fmt.item_separator.empty() ? fmt.item_separator : fmt.indent > 0 ? "," : ", ";
  const std::string key_sep = !fmt.key_separator.empty() ? fmt.key_separator : ": ";
  const std::string unit = fmt.indent > 0 ? std::string(size_t(fmt.indent), ' ') : "";
  std::string base = "\n", child = "\n";
  for (int k = 0; k < depth; ++k) base += unit;
  child = base + unit;
  switch (v.kind) {
    case K::Undefined: case K::None: out += "null"; return;
    case K::Bool: out += v.b ? "true" : "false"; return;
    case K::Int: out += std::to_string(v.i); return;
    case K::Float: {
      if (!std::isfinite(v.f)) {
        out += "null";
        return;
      }
      std::string s = format_float(v.f);
      if (v.f == std::trunc(v.f) && s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
      out += s == "-0" ? "0" : s;
      return;
    }
    case K::String: json_string(v.s, fmt.ensure_ascii, out); return;
    case K::List: {
      out.push_back('[');
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep;
        if (fmt.indent > 0) out += child;
        json_value((*v.list)[k], fmt, depth + 1, out);
      }
      if (fmt.indent > 0 && !v.list->empty()) out += base;
      out.push_back(']');
      return;
    }
    case K::Dict: case K::Namespace: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : *v.dict) entries.push_back(&e);
      if (fmt.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](auto* x, auto* y) { return x->first < y->first; });
      out.push_back('{');
      for (size_t k = 0; k < entries.size(); ++k) {
        if (k) out += item_sep;
        if (fmt.indent > 0) out += child;
        json_string(entries[k]->first, fmt.ensure_ascii, out);
        out += key_sep;
        json_value(entries[k]->second, fmt, depth + 1, out);
      }
      if (fmt.indent > 0 && !entries.empty()) out += base;
      out.push_back('}');
      return;
    }
    case K::Function: throw g4c::Error("chat template: tojson: cannot convert a function to JSON");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonFormat& fmt) {
  std::string out;
  json_value(v, fmt, 0, out);
  return out;
}

bool is_js_space(uint32_t cp) {
  if (cp <= 32) return cp == 32 || (cp >= 9 && cp <= 13);
  return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

uint32_t decode_utf8(const std::string& s, size_t pos, size_t* length) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(pos);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || pos + n > s.size()) {
    *length = 1;
    return c < 0x80 ? c : 0xFFFD;
  }
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(pos + k) & 0xC0) != 0x80) {
      *length = 1;
      return 0xFFFD;
    }
    cp = (cp << 6) | (byte(pos + k) & 0x3F);
  }
  *length = n;
  return cp;
}

std::string trim_js(const std::string& s, bool left, bool right) {
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      size_t len = 0;
      if (!is_js_space(decode_utf8(s, begin, &len))) break;
      begin += len;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
      size_t len = 0;
      const uint32_t cp = decode_utf8(s, start, &len);
      if (start + len != end || !is_js_space(cp)) break;
      end = start;
    }
  }
  return s.substr(begin, end - begin);
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (size_t p = 0; p < s.size(); ++n) {
    size_t len = 0;
    decode_utf8(s, p, &len);
    p += len;
  }
  return n;
}

std::vector<std::string> utf8_split(const std::string& s) {
  std::vector<std::string> out;
  for (size_t p = 0; p < s.size();) {
    size_t len = 0;
    decode_utf8(s, p, &len);
    out.push_back(s.substr(p, len));
    p += len;
  }
  return out;
}

}  // namespace g4c::models::jinja
