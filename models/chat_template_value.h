// The value type of the chat template engine (internal to models/chat_template*.cpp).
//
// Values follow the runtime of @huggingface/jinja (the engine transformers.js uses), which
// itself follows Python Jinja: undefined, none, booleans, integers, floats, strings, lists,
// ordered dicts, namespaces (mutable, shared by reference) and callables (macros, builtins).
// Lists and dicts are immutable once built, so they are shared; a namespace is the only
// value a template can mutate (`{% set ns.attr = ... %}`).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace g4c::models::jinja {

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion-ordered
using KwArgs = std::vector<std::pair<std::string, Value>>;
using Callable = std::function<Value(std::vector<Value>& args, KwArgs& kwargs)>;

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };
  Kind kind = Kind::Undefined;
  uint32_t depth = 0;  // nesting of lists/dicts/namespaces
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<const List> list;
  std::shared_ptr<Dict> dict;  // Dict and Namespace
  std::shared_ptr<const Callable> fn;

  static Value undefined() { return {}; }
  static Value none() { Value v; v.kind = Kind::None; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::Int; v.i = x; return v; }
  static Value floating(double x) { Value v; v.kind = Kind::Float; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.kind = Kind::String; v.s = std::move(x); return v; }
  // Lists and dicts track their nesting depth (at most kMaxDepth) and may not hold a
  // namespace: values stay acyclic and shallow enough for recursive printing, comparison
  // and destruction. Both throw g4c::Error otherwise.
  static constexpr uint32_t kMaxDepth = 256;
  static Value make_list(List x);
  static Value make_dict(Dict x);
  static Value make_namespace(Dict x);
  static Value function(Callable c) {
    Value v; v.kind = Kind::Function; v.fn = std::make_shared<const Callable>(std::move(c)); return v;
  }
  static Value from_json(const nlohmann::json& j, uint32_t depth = 0);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_list() const { return kind == Kind::List; }
  bool is_mapping() const { return kind == Kind::Dict || kind == Kind::Namespace; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
  bool is_numeric_like() const { return is_number() || kind == Kind::Bool; }
  double number() const { return kind == Kind::Float ? f : kind == Kind::Bool ? (b ? 1 : 0) : double(i); }

  // Entry `key` of a dict/namespace, or nullptr.
  const Value* find(const std::string& key) const;
  bool truthy() const;
  // What `{{ value }}` prints: none and undefined print nothing, booleans "true"/"false",
  // lists and dicts as JSON (like @huggingface/jinja).
  std::string str() const;
  const char* type_name() const;
};

// Deep equality of `==` (numbers, booleans, strings, none/undefined, lists, dicts).
bool equal(const Value& a, const Value& b);

struct JsonFormat {
  int indent = -1;  // < 0: one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_separator, key_separator;  // empty: the defaults of `tojson`
};
// `tojson`: undefined becomes null; callables are an error.
std::string to_json(const Value& v, const JsonFormat& fmt = {});

// The number formatting of the reference engine (JavaScript's Number#toString, with
// integral floats printed as "2.0").
std::string format_float(double x);

// Whitespace as JavaScript's String#trim sees it (the reference engine's `trim`, `strip`
// and whitespace control), on UTF-8 text.
std::string trim_js(const std::string& s, bool left, bool right);
// JavaScript's whitespace (String#trim) for one code point.
bool is_js_space(uint32_t cp);
// The code point at `pos` of UTF-8 text and its byte length (invalid bytes: U+FFFD, 1 byte).
uint32_t decode_utf8(const std::string& s, size_t pos, size_t* length);
// Number of code points in UTF-8 text.
size_t utf8_length(const std::string& s);
// The code points of UTF-8 text, each as its UTF-8 bytes.
std::vector<std::string> utf8_split(const std::string& s);

}  // namespace g4c::models::jinja
