// Filters, tests, attribute/subscript access and the methods of strings and dicts of the
// chat template engine (internal to models/chat_template*.cpp).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/chat_template_value.h"

namespace g4c::models::jinja {

// A runtime error without a position; the evaluator adds the template line.
struct EvalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Limits that keep a hostile template or input from exhausting memory or time.
struct Limits {
  size_t max_string_bytes = size_t(16) << 20;  // any string value, and the rendered prompt
  size_t max_list_items = size_t(1) << 20;      // range() and list building
  size_t max_steps = 2'000'000;                 // evaluated nodes per render (a 1,000-turn Gemma chat: ~0.1 M)
  int max_call_depth = 64;                      // nested macro calls
};

// `value | name(args, kwargs)`.
Value apply_filter(const std::string& name, const Value& operand, std::vector<Value>& args, KwArgs& kwargs,
                   const Limits& limits);
// `value is name`; throws EvalError for an unknown test.
bool apply_test(const std::string& name, const Value& operand);
// `object.key` and `object[key]`: dict entries, list/string items (negative indices count
// from the end), and the methods of strings (strip, startswith, split, replace, ...) and
// dicts (get, items, keys, values) as bound functions. Missing → undefined.
Value member(const Value& object, const Value& key);
// `object[start:stop:step]` of a list or string (Python semantics; strings by code point).
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);
// The global functions: namespace(), range(), raise_exception() (the latter throws
// RaisedError).
struct RaisedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
Value global_function(const std::string& name, const Limits& limits);

}  // namespace g4c::models::jinja
