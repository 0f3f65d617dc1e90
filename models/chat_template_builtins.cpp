// Filters, tests, member access, slices, methods and global functions of the chat template
// engine. Semantics follow @huggingface/jinja (and Python Jinja where that engine has none):
// a filter applied to a value of a type it does not take is an error, not an empty string.
// String case mapping (upper/lower/capitalize) uses the C.UTF-8 locale's simple mappings.
#include <algorithm>
#include <clocale>
#include <cmath>
#include <cwctype>
#include <string>
#include <vector>

#include <locale.h>

#include "models/chat_template_builtins.h"

namespace g4c::models::jinja {
namespace {

using K = Value::Kind;

[[noreturn]] void err(const std::string& what) { throw EvalError(what); }

std::string encode_utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
  return out;
}

locale_t utf8_locale() {
  static const locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(0));
  return loc;
}

uint32_t map_case(uint32_t cp, bool upper) {
  if (cp < 0x80) return upper ? uint32_t(std::toupper(int(cp))) : uint32_t(std::tolower(int(cp)));
  const locale_t loc = utf8_locale();
  if (loc == locale_t(0)) return cp;
  return uint32_t(upper ? towupper_l(wint_t(cp), loc) : towlower_l(wint_t(cp), loc));
}

std::string change_case(const std::string& s, bool upper, size_t only_first = std::string::npos) {
  std::string out;
  size_t n = 0;
  for (size_t p = 0; p < s.size(); ++n) {
    size_t len = 0;
    const uint32_t cp = decode_utf8(s, p, &len);
    if (only_first != std::string::npos && n >= only_first) {
      out.append(s, p, std::string::npos);
      break;
    }
    out += (cp == 0xFFFD && len == 1) ? s.substr(p, 1) : encode_utf8(map_case(cp, upper));
    p += len;
  }
  return out;
}

const Value* kwarg(KwArgs& kwargs, const char* name) {
  for (auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

// Positional argument `index`, else keyword `name`, else nullptr.
const Value* arg(std::vector<Value>& args, KwArgs& kwargs, size_t index, const char* name) {
  if (index < args.size()) return &args[index];
  return kwarg(kwargs, name);
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {
    const auto chars = utf8_split(s);
    int64_t done = 0;
    for (const auto& c : chars) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += c;
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t p = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(from, p);
    if (at == std::string::npos) break;
    out.append(s, p, at - p);
    out += to;
    p = at + from.size();
    ++done;
  }
  out.append(s, p, std::string::npos);
  return out;
}

std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right) {
  if (!chars || chars->is_none()) return trim_js(s, left, right);
  if (!chars->is_string()) err("strip() argument must be a string or none");
  const auto set = utf8_split(chars->s);
  auto in_set = [&](const std::string& c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  auto cps = utf8_split(s);
  size_t b = 0, e = cps.size();
  while (left && b < e && in_set(cps[b])) ++b;
  while (right && e > b && in_set(cps[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cps[k];
  return out;
}

bool affix_match(const std::string& s, const Value* pattern, bool prefix, const char* name) {
  auto one = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (!pattern) err(std::string(name) + "() requires at least one argument");
  if (pattern->is_string()) return one(pattern->s);
  if (pattern->is_list()) {
    for (const auto& item : *pattern->list) {
      if (!item.is_string()) err(std::string(name) + "() tuple elements must be strings");
      if (one(item.s)) return true;
    }
    return false;
  }
  err(std::string(name) + "() argument must be a string or tuple of strings");
}

Value split(const std::string& s, std::vector<Value>& args, KwArgs& kwargs) {
  const Value* sep = arg(args, kwargs, 0, "sep");
  const Value* maxsplit_v = arg(args, kwargs, 1, "maxsplit");
  if (sep && !sep->is_string() && !sep->is_none()) err("split(): sep must be a string or none");
  if (maxsplit_v && maxsplit_v->kind != K::Int) err("split(): maxsplit must be an integer");
  const int64_t maxsplit = maxsplit_v ? maxsplit_v->i : -1;
  List out;
  if (!sep || sep->is_none()) {
    size_t p = 0;
    auto at_space = [&](size_t q, size_t* len) { return is_js_space(decode_utf8(s, q, len)); };
    auto skip_space = [&] {
      size_t len = 0;
      while (p < s.size() && at_space(p, &len)) p += len;
    };
    skip_space();
    while (p < s.size()) {
      if (maxsplit >= 0 && int64_t(out.size()) >= maxsplit) {
        out.push_back(Value::string(s.substr(p)));
        break;
      }
      size_t e = p, len = 0;
      while (e < s.size() && !at_space(e, &len)) e += len;
      out.push_back(Value::string(s.substr(p, e - p)));
      p = e;
      skip_space();
    }
    return Value::make_list(std::move(out));
  }
  if (sep->s.empty()) err("split(): empty separator");
  size_t p = 0;
  while (true) {
    const size_t at = s.find(sep->s, p);
    if (at == std::string::npos || (maxsplit >= 0 && int64_t(out.size()) >= maxsplit)) break;
    out.push_back(Value::string(s.substr(p, at - p)));
    p = at + sep->s.size();
  }
  out.push_back(Value::string(s.substr(p)));
  return Value::make_list(std::move(out));
}

Value string_method(const std::string& s, const std::string& name) {
  using Args = std::vector<Value>;
  auto fn = [](auto f) { return Value::function(f); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return fn([s, l, r](Args& a, KwArgs& kw) { return Value::string(strip_chars(s, arg(a, kw, 0, "chars"), l, r)); });
  }
  if (name == "upper" || name == "lower")
    return fn([s, up = name == "upper"](Args&, KwArgs&) { return Value::string(change_case(s, up)); });
  if (name == "capitalize")
    return fn([s](Args&, KwArgs&) { return Value::string(change_case(s, true, 1)); });
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return fn([s, prefix](Args& a, KwArgs& kw) {
      return Value::boolean(affix_match(s, arg(a, kw, 0, "prefix"), prefix, prefix ? "startswith" : "endswith"));
    });
  }
  if (name == "split") return fn([s](Args& a, KwArgs& kw) { return split(s, a, kw); });
  if (name == "replace") {
    return fn([s](Args& a, KwArgs& kw) {
      const Value* from = arg(a, kw, 0, "old");
      const Value* to = arg(a, kw, 1, "new");
      const Value* count = arg(a, kw, 2, "count");
      if (!from || !to) err("replace() requires at least two arguments");
      if (!from->is_string() || !to->is_string()) err("replace() arguments must be strings");
      if (count && count->kind != K::Int && !count->is_none()) err("replace() count must be an integer");
      return Value::string(replace_all(s, from->s, to->s, count && count->kind == K::Int ? count->i : -1));
    });
  }
  if (name == "length") return Value::integer(int64_t(utf8_length(s)));
  return Value::undefined();
}

Value dict_items(const Value& d) {
  List out;
  for (const auto& [k, v] : *d.dict) out.push_back(Value::make_list({Value::string(k), v}));
  return Value::make_list(std::move(out));
}

Value dict_method(const Value& d, const std::string& name) {
  using Args = std::vector<Value>;
  if (name == "get") {
    return Value::function([d](Args& a, KwArgs& kw) {
      const Value* key = arg(a, kw, 0, "key");
      const Value* def = arg(a, kw, 1, "default");
      if (!key || !key->is_string()) err("dict.get(): the key must be a string");
      const Value* v = d.find(key->s);
      return v ? *v : def ? *def : Value::none();
    });
  }
  if (name == "items") return Value::function([d](Args&, KwArgs&) { return dict_items(d); });
  if (name == "keys" || name == "values") {
    return Value::function([d, keys = name == "keys"](Args&, KwArgs&) {
      List out;
      for (const auto& [k, v] : *d.dict) out.push_back(keys ? Value::string(k) : v);
      return Value::make_list(std::move(out));
    });
  }
  return Value::undefined();
}

int64_t normalize_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

}  // namespace

Value member(const Value& object, const Value& key) {
  if (object.is_mapping()) {
    if (!key.is_string()) err(std::string("cannot index a ") + object.type_name() + " with a " + key.type_name());
    if (const Value* v = object.find(key.s)) return *v;
    return object.kind == K::Dict ? dict_method(object, key.s) : Value::undefined();
  }
  if (object.is_list() || object.is_string()) {
    if (key.kind == K::Int) {
      if (object.is_list()) {
        const int64_t n = int64_t(object.list->size());
        const int64_t i = normalize_index(key.i, n);
        return i >= 0 && i < n ? (*object.list)[size_t(i)] : Value::undefined();
      }
      const auto chars = utf8_split(object.s);
      const int64_t i = normalize_index(key.i, int64_t(chars.size()));
      return i >= 0 && i < int64_t(chars.size()) ? Value::string(chars[size_t(i)]) : Value::undefined();
    }
    if (key.is_string()) {
      if (object.is_string()) return string_method(object.s, key.s);
      return key.s == "length" ? Value::integer(int64_t(object.list->size())) : Value::undefined();
    }
    err(std::string("cannot index a ") + object.type_name() + " with a " + key.type_name());
  }
  if (!key.is_string()) err(std::string("cannot index ") + object.type_name() + " with a " + key.type_name());
  return Value::undefined();
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (!object.is_list() && !object.is_string()) err(std::string("cannot slice a ") + object.type_name());
  for (const Value* v : {&start, &stop, &step})
    if (v->kind != K::Int && !v->is_undefined() && !v->is_none()) err("slice indices must be integers");
  std::vector<std::string> chars;
  if (object.is_string()) chars = utf8_split(object.s);
  const int64_t n = object.is_list() ? int64_t(object.list->size()) : int64_t(chars.size());
  const int64_t st = step.kind == K::Int ? step.i : 1;
  if (st == 0) err("slice step cannot be zero");
  auto bound = [&](const Value& v, int64_t def) {
    if (v.kind != K::Int) return def;
    int64_t i = v.i < 0 ? std::max<int64_t>(v.i + n, st > 0 ? 0 : -1) : v.i;
    return st > 0 ? std::min(i, n) : std::min(i, n - 1);
  };
  const int64_t b = bound(start, st > 0 ? 0 : n - 1);
  const int64_t e = bound(stop, st > 0 ? n : -1);
  List items;
  std::string text;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (object.is_list()) {
      items.push_back((*object.list)[size_t(i)]);
    } else {
      text += chars[size_t(i)];
    }
  }
  return object.is_list() ? Value::make_list(std::move(items)) : Value::string(std::move(text));
}

bool apply_test(const std::string& name, const Value& v) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind == K::Int;
  if (name == "float") return v.kind == K::Float;
  if (name == "boolean") return v.kind == K::Bool;
  if (name == "true") return v.kind == K::Bool && v.b;
  if (name == "false") return v.kind == K::Bool && !v.b;
  if (name == "iterable") return v.is_list() || v.is_string();
  if (name == "mapping") return v.kind == K::Dict;
  if (name == "sequence") return v.is_list() || v.kind == K::Dict || v.is_string();
  if (name == "callable") return v.kind == K::Function;
  if (name == "odd" || name == "even") {
    if (v.kind != K::Int) err("cannot test '" + name + "' on a " + v.type_name());
    return (v.i % 2 != 0) == (name == "odd");
  }
  if (name == "lower" || name == "upper")
    return v.is_string() && change_case(v.s, name == "upper") == v.s;
  err("unknown test 'is " + name + "'");
}

Value apply_filter(const std::string& name, const Value& v, std::vector<Value>& args, KwArgs& kwargs,
                   const Limits& limits) {
  auto bad_type = [&]() -> Value { err("filter '" + name + "' cannot be applied to a " + v.type_name()); };
  if (name == "safe") return v;
  if (name == "tojson") {
    JsonFormat fmt;
    if (const Value* indent = kwarg(kwargs, "indent"); indent && !indent->is_none()) {
      if (indent->kind != K::Int) err("tojson: indent must be an integer");
      fmt.indent = int(std::clamp<int64_t>(indent->i, -1, 64));
    }
    if (const Value* a = kwarg(kwargs, "ensure_ascii")) fmt.ensure_ascii = a->truthy();
    if (const Value* a = kwarg(kwargs, "sort_keys")) fmt.sort_keys = a->truthy();
    if (const Value* sep = kwarg(kwargs, "separators"); sep && !sep->is_none()) {
      if (!sep->is_list() || sep->list->size() != 2 || !(*sep->list)[0].is_string() || !(*sep->list)[1].is_string())
        err("tojson: separators must be a tuple of two strings");
      fmt.item_separator = (*sep->list)[0].s;
      fmt.key_separator = (*sep->list)[1].s;
    }
    std::string out = to_json(v, fmt);
    if (out.size() > limits.max_string_bytes) err("tojson: output larger than the template string limit");
    return Value::string(std::move(out));
  }
  if (name == "default" || name == "d") {
    const Value* def = arg(args, kwargs, 0, "default_value");
    const Value* boolean = arg(args, kwargs, 1, "boolean");
    if (v.is_undefined() || (boolean && boolean->truthy() && !v.truthy())) return def ? *def : Value::string("");
    return v;
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value::integer(int64_t(utf8_length(v.s)));
    if (v.is_list()) return Value::integer(int64_t(v.list->size()));
    if (v.is_mapping()) return Value::integer(int64_t(v.dict->size()));
    return bad_type();
  }
  if (name == "string") {
    if (v.is_undefined() || v.is_none() || v.kind == K::Function) return bad_type();
    return Value::string(v.str());
  }
  if (name == "int" || name == "float") {
    const bool to_int = name == "int";
    const Value* def = arg(args, kwargs, 0, "default");
    const Value fallback = def ? *def : to_int ? Value::integer(0) : Value::floating(0);
    if (v.is_string()) {
      const std::string t = trim_js(v.s, true, false);
      char* end = nullptr;
      if (to_int) {
        errno = 0;
        const long long x = std::strtoll(t.c_str(), &end, 10);
        return end == t.c_str() || errno == ERANGE ? fallback : Value::integer(x);
      }
      const double x = std::strtod(t.c_str(), &end);
      return end == t.c_str() ? fallback : Value::floating(x);
    }
    if (v.is_numeric_like()) {
      if (!to_int) return Value::floating(v.number());
      if (v.kind != K::Float) return Value::integer(v.kind == K::Bool ? int64_t(v.b) : v.i);
      if (!std::isfinite(v.f) || std::fabs(v.f) >= 9.2e18) err("int: value out of range");
      return Value::integer(int64_t(std::trunc(v.f)));
    }
    return bad_type();
  }
  if (name == "abs") {
    if (v.kind == K::Int) {
      if (v.i == INT64_MIN) err("abs: integer overflow");
      return Value::integer(v.i < 0 ? -v.i : v.i);
    }
    if (v.kind == K::Float) return Value::floating(std::fabs(v.f));
    return bad_type();
  }
  if (name == "bool") {
    if (v.kind == K::Bool) return v;
    return bad_type();
  }
  if (v.is_string()) {
    if (name == "trim") return Value::string(strip_chars(v.s, arg(args, kwargs, 0, "chars"), true, true));
    if (name == "upper" || name == "lower") return Value::string(change_case(v.s, name == "upper"));
    if (name == "capitalize") return Value::string(change_case(v.s, true, 1));
    if (name == "replace") {
      Value method = string_method(v.s, "replace");
      return (*method.fn)(args, kwargs);
    }
    if (name == "join") return v;
    if (name == "list") {
      List out;
      for (auto& c : utf8_split(v.s)) out.push_back(Value::string(c));
      return Value::make_list(std::move(out));
    }
    if (name == "indent") {
      const Value* width = arg(args, kwargs, 0, "width");
      const Value* first = arg(args, kwargs, 1, "first");
      const Value* blank = arg(args, kwargs, 2, "blank");
      std::string pad(4, ' ');
      if (width && width->kind == K::Int) pad = std::string(size_t(std::clamp<int64_t>(width->i, 0, 256)), ' ');
      else if (width && width->is_string()) pad = width->s;
      else if (width) err("indent: width must be an integer or a string");
      std::string out;
      size_t line = 0, p = 0;
      while (true) {
        const size_t nl = v.s.find('\n', p);
        const std::string text = v.s.substr(p, nl == std::string::npos ? std::string::npos : nl - p);
        const bool indent = (line > 0 || (first && first->truthy())) && (!text.empty() || (blank && blank->truthy()));
        if (indent) out += pad;
        out += text;
        if (out.size() > limits.max_string_bytes) err("indent: output larger than the template string limit");
        if (nl == std::string::npos) break;
        out.push_back('\n');
        p = nl + 1;
        ++line;
      }
      return Value::string(std::move(out));
    }
    return bad_type();
  }
  if (v.is_list()) {
    const List& items = *v.list;
    if (name == "first") return items.empty() ? Value::undefined() : items.front();
    if (name == "last") return items.empty() ? Value::undefined() : items.back();
    if (name == "list") return v;
    if (name == "reverse") return Value::make_list(List(items.rbegin(), items.rend()));
    if (name == "join") {
      const Value* sep = arg(args, kwargs, 0, "d");
      if (sep && !sep->is_string()) err("join: the separator must be a string");
      std::string out;
      for (size_t k = 0; k < items.size(); ++k) {
        if (k && sep) out += sep->s;
        out += items[k].str();
        if (out.size() > limits.max_string_bytes) err("join: output larger than the template string limit");
      }
      return Value::string(std::move(out));
    }
    if (name == "map") {
      const Value* attribute = kwarg(kwargs, "attribute");
      if (!attribute || !attribute->is_string()) err("map: only map(attribute='name') is supported");
      const Value* def = kwarg(kwargs, "default");
      List out;
      for (const auto& item : items) {
        if (!item.is_mapping()) err("map: items must be dicts");
        const Value* x = item.find(attribute->s);
        out.push_back(x ? *x : def ? *def : Value::undefined());
      }
      return Value::make_list(std::move(out));
    }
    if (name == "selectattr" || name == "rejectattr") {
      const bool select = name == "selectattr";
      if (args.empty() || !args[0].is_string()) err(name + ": the attribute must be a string");
      List out;
      for (const auto& item : items) {
        if (!item.is_mapping()) err(name + ": items must be dicts");
        const Value* x = item.find(args[0].s);
        bool ok = false;
        if (x) {
          if (args.size() < 2) ok = x->truthy();
          else if (!args[1].is_string()) err(name + ": the test name must be a string");
          else if (args[1].s == "equalto" || args[1].s == "eq" || args[1].s == "==") ok = args.size() > 2 && equal(*x, args[2]);
          else ok = apply_test(args[1].s, *x);
        }
        if (ok == select) out.push_back(item);
      }
      return Value::make_list(std::move(out));
    }
    return bad_type();
  }
  if (v.is_mapping()) {
    if (name == "items") return dict_items(v);
    if (name == "keys" || name == "values") {
      Value method = dict_method(v, name);
      return (*method.fn)(args, kwargs);
    }
    if (name == "dictsort") {
      Value items = dict_items(v);
      List sorted = *items.list;
      std::stable_sort(sorted.begin(), sorted.end(), [](const Value& a, const Value& b) {
        return change_case((*a.list)[0].s, false) < change_case((*b.list)[0].s, false);
      });
      return Value::make_list(std::move(sorted));
    }
    return bad_type();
  }
  if (name == "trim" || name == "upper" || name == "lower" || name == "join" || name == "first" ||
      name == "last" || name == "items" || name == "replace" || name == "map" || name == "reverse" ||
      name == "list" || name == "capitalize" || name == "indent" || name == "selectattr" ||
      name == "rejectattr" || name == "dictsort" || name == "keys" || name == "values")
    return bad_type();
  err("unknown filter '" + name + "'");
}

Value global_function(const std::string& name, const Limits& limits) {
  using Args = std::vector<Value>;
  if (name == "raise_exception") {
    return Value::function([](Args& a, KwArgs&) -> Value {
      throw RaisedError(a.empty() ? std::string("raise_exception() called") : a[0].str());
    });
  }
  if (name == "namespace") {
    return Value::function([](Args& a, KwArgs& kw) {
      Dict entries;
      auto put = [&](const std::string& k, const Value& x) {
        for (auto& e : entries)
          if (e.first == k) {
            e.second = x;
            return;
          }
        entries.emplace_back(k, x);
      };
      if (a.size() > 1) err("namespace() takes at most one positional argument");
      if (a.size() == 1) {
        if (!a[0].is_mapping()) err("namespace(): the positional argument must be a dict");
        for (const auto& [k, x] : *a[0].dict) put(k, x);
      }
      for (const auto& [k, x] : kw) put(k, x);
      return Value::make_namespace(std::move(entries));
    });
  }
  if (name == "range") {
    return Value::function([max = limits.max_list_items](Args& a, KwArgs&) {
      for (const auto& x : a)
        if (x.kind != K::Int) err("range() arguments must be integers");
      if (a.empty() || a.size() > 3) err("range() takes 1 to 3 arguments");
      const int64_t start = a.size() > 1 ? a[0].i : 0;
      const int64_t stop = a.size() > 1 ? a[1].i : a[0].i;
      const int64_t step = a.size() > 2 ? a[2].i : 1;
      if (step == 0) err("range() step cannot be zero");
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.size() >= max) err("range() longer than " + std::to_string(max) + " items");
        out.push_back(Value::integer(i));
        if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
      }
      return Value::make_list(std::move(out));
    });
  }
  return Value::undefined();
}

}  // namespace g4c::models::jinja
