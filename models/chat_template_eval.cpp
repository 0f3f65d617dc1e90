// Evaluator of the chat template engine: statements and expressions over jinja::Value.
//
// Scoping is Jinja's: `for` and macro bodies get a scope of their own, so a `set` inside a
// loop is not seen after it (a namespace carries state out); `if` shares its scope.
// Operators follow @huggingface/jinja: `and`/`or` return an operand, `~` prints both sides
// (undefined as ""), `+` adds numbers, concatenates lists, and concatenates when either
// side is a string; arithmetic or comparison on none/undefined is an error.
#include <cmath>
#include <memory>
#include <string>
#include <unordered_map>

#include "models/chat_template_eval.h"
#include "models/error.h"

namespace g4c::models::jinja {
namespace {

using K = Value::Kind;

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { Normal, Break, Continue };

[[noreturn]] void err(const std::string& what) { throw EvalError(what); }

// A g4c::Error already carrying its position passes through the line handlers unchanged.
struct Positioned : g4c::Error {
  using g4c::Error::Error;
};

class Evaluator {
 public:
  Evaluator(const std::string& origin, const Limits& limits) : origin_(origin), limits_(limits) {}

  std::string run(const Body& body, const std::vector<std::pair<std::string, Value>>& globals) {
    auto root = std::make_shared<Scope>();
    for (const char* name : {"namespace", "range", "raise_exception"})
      root->vars[name] = global_function(name, limits_);
    for (const auto& [k, v] : globals) root->vars[k] = v;
    std::string out;
    if (exec_body(body, root, out) != Flow::Normal) fail(0, "'break' or 'continue' outside a loop");
    return out;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Positioned(origin_ + ":" + std::to_string(line) + ": chat template: " + what);
  }

  void step(int line) {
    if (++steps_ > limits_.max_steps)
      fail(line, "rendering takes more than " + std::to_string(limits_.max_steps) + " steps (a runaway loop?)");
  }

  void append(std::string& out, const std::string& s, int line) {
    if (out.size() + s.size() > limits_.max_string_bytes)
      fail(line, "output larger than " + std::to_string(limits_.max_string_bytes >> 20) + " MiB");
    out += s;
  }

  static Value lookup(const ScopePtr& scope, const std::string& name) {
    for (const Scope* s = scope.get(); s; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return it->second;
    }
    return Value::undefined();
  }

  // ---- statements ----
  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const auto& s : body) {
      const Flow flow = exec(*s, scope, out);
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
    step(s.line);
    switch (s.kind) {
      case Stmt::Kind::Text: append(out, s.text, s.line); return Flow::Normal;
      case Stmt::Kind::Output: append(out, eval(*s.expr, scope).str(), s.line); return Flow::Normal;
      case Stmt::Kind::If:
        return exec_body(eval(*s.expr, scope).truthy() ? s.body : s.else_body, scope, out);
      case Stmt::Kind::For: exec_for(s, scope, out); return Flow::Normal;
      case Stmt::Kind::Set: exec_set(s, scope); return Flow::Normal;
      case Stmt::Kind::Macro: define_macro(s, scope); return Flow::Normal;
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  void exec_for(const Stmt& s, const ScopePtr& parent, std::string& out) {
    auto scope = std::make_shared<Scope>();
    scope->parent = parent;
    const Value seq = eval(*s.expr, scope);
    List items;
    if (seq.is_list()) {
      items = *seq.list;
    } else if (seq.is_mapping()) {
      for (const auto& [k, v] : *seq.dict) items.push_back(Value::string(k));
    } else if (seq.is_string()) {
      for (auto& c : utf8_split(seq.s)) items.push_back(Value::string(c));
    } else {
      fail(s.line, std::string("cannot loop over a ") + seq.type_name());
    }
    const int64_t n = int64_t(items.size());
    for (int64_t i = 0; i < n; ++i) {
      step(s.line);
      const Value& item = items[size_t(i)];
      Dict loop = {
          {"index", Value::integer(i + 1)},
          {"index0", Value::integer(i)},
          {"revindex", Value::integer(n - i)},
          {"revindex0", Value::integer(n - i - 1)},
          {"first", Value::boolean(i == 0)},
          {"last", Value::boolean(i == n - 1)},
          {"length", Value::integer(n)},
          {"previtem", i > 0 ? items[size_t(i - 1)] : Value::undefined()},
          {"nextitem", i + 1 < n ? items[size_t(i + 1)] : Value::undefined()},
      };
      scope->vars["loop"] = Value::make_dict(std::move(loop));
      bind_targets(s.targets, item, *scope, s.line);
      if (exec_body(s.body, scope, out) == Flow::Break) break;
    }
    if (items.empty()) exec_body(s.else_body, scope, out);
  }

  void bind_targets(const std::vector<std::string>& targets, const Value& v, Scope& scope, int line) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = v;
      return;
    }
    if (!v.is_list()) fail(line, std::string("cannot unpack a ") + v.type_name() + " into " + std::to_string(targets.size()) + " names");
    if (v.list->size() != targets.size())
      fail(line, "cannot unpack " + std::to_string(v.list->size()) + " items into " + std::to_string(targets.size()) + " names");
    for (size_t k = 0; k < targets.size(); ++k) scope.vars[targets[k]] = (*v.list)[k];
  }

  void exec_set(const Stmt& s, const ScopePtr& scope) {
    Value v = eval(*s.expr, scope);
    if (!s.set_attr) return bind_targets(s.targets, v, *scope, s.line);
    const Value ns = lookup(scope, s.targets[0]);
    if (v.kind == K::Namespace) fail(s.line, "a namespace cannot be stored in a namespace");
    if (v.depth + 1 > Value::kMaxDepth) fail(s.line, "value nested deeper than " + std::to_string(Value::kMaxDepth) + " levels");
    if (ns.kind != K::Namespace)
      fail(s.line, "cannot set attribute '" + s.targets[1] + "' of '" + s.targets[0] + "', a " + ns.type_name() + " (only a namespace() can be assigned to)");
    for (auto& [k, x] : *ns.dict) {
      if (k == s.targets[1]) {
        x = std::move(v);
        return;
      }
    }
    ns.dict->emplace_back(s.targets[1], std::move(v));
  }

  void define_macro(const Stmt& s, const ScopePtr& scope) {
    const Stmt* macro = &s;
    std::weak_ptr<Scope> defining = scope;  // the macro lives in this scope: no ownership cycle
    scope->vars[s.name] = Value::function([this, macro, defining](std::vector<Value>& args, KwArgs& kwargs) {
      auto parent = defining.lock();
      if (!parent) err("macro '" + macro->name + "' called after its scope ended");
      if (args.size() > macro->params.size())
        err("macro '" + macro->name + "' takes at most " + std::to_string(macro->params.size()) + " arguments");
      auto local = std::make_shared<Scope>();
      local->parent = parent;
      for (const auto& [k, v] : kwargs) {
        bool known = false;
        for (const auto& p : macro->params) known = known || p.first == k;
        if (!known) err("macro '" + macro->name + "' has no parameter '" + k + "'");
      }
      for (size_t p = 0; p < macro->params.size(); ++p) {
        const auto& [pname, def] = macro->params[p];
        const Value* given = p < args.size() ? &args[p] : nullptr;
        for (const auto& [k, v] : kwargs)
          if (!given && k == pname) given = &v;
        local->vars[pname] = given ? *given : def ? eval(*def, local) : Value::undefined();
      }
      if (++depth_ > limits_.max_call_depth) {
        --depth_;
        err("macro calls nested deeper than " + std::to_string(limits_.max_call_depth));
      }
      std::string out;
      try {
        exec_body(macro->body, local, out);
      } catch (...) {
        --depth_;
        throw;
      }
      --depth_;
      return Value::string(std::move(out));
    });
  }

  // ---- expressions ----
  Value eval(const Expr& e, const ScopePtr& scope) {
    step(e.line);
    // Nesting of expressions, statements and macro calls together: bounds the C++ stack.
    struct Depth {
      explicit Depth(int& d) : d(d) { ++d; }
      ~Depth() { --d; }
      int& d;
    } depth(eval_depth_);
    if (eval_depth_ > kMaxEvalDepth) fail(e.line, "expressions and macro calls nested deeper than " + std::to_string(kMaxEvalDepth));
    try {
      return eval_inner(e, scope);
    } catch (const EvalError& x) {
      fail(e.line, x.what());
    } catch (const RaisedError& x) {
      throw Positioned(origin_ + ":" + std::to_string(e.line) + ": chat template raised an exception: " + x.what());
    } catch (const Positioned&) {
      throw;
    } catch (const g4c::Error& x) {  // from the value type: no position yet
      std::string what = x.what();
      const std::string prefix = "chat template: ";
      if (what.compare(0, prefix.size(), prefix) == 0) what = what.substr(prefix.size());
      fail(e.line, what);
    }
  }

  Value eval_inner(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::Literal:
        switch (e.lit_kind) {
          case Expr::LitKind::String: return Value::string(e.str);
          case Expr::LitKind::Integer: return Value::integer(e.integer);
          case Expr::LitKind::Float: return Value::floating(e.floating);
          case Expr::LitKind::Bool: return Value::boolean(e.boolean);
          case Expr::LitKind::None: return Value::none();
        }
        break;
      case Expr::Kind::Name: return lookup(scope, e.str);
      case Expr::Kind::List: case Expr::Kind::Tuple: {
        List items;
        for (const auto& x : e.items) items.push_back(eval(*x, scope));
        return Value::make_list(std::move(items));
      }
      case Expr::Kind::Dict: {
        Dict items;
        for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
          Value key = eval(*e.items[k], scope);
          if (!key.is_string()) err(std::string("dict keys must be strings, not ") + key.type_name());
          Value v = eval(*e.items[k + 1], scope);
          bool replaced = false;
          for (auto& [name, x] : items)
            if (name == key.s) {
              x = v;
              replaced = true;
            }
          if (!replaced) items.emplace_back(key.s, std::move(v));
        }
        return Value::make_dict(std::move(items));
      }
      case Expr::Kind::Attr: return member(eval(*e.a, scope), Value::string(e.str));
      case Expr::Kind::Index: {
        Value object = eval(*e.a, scope);
        return member(object, eval(*e.b, scope));
      }
      case Expr::Kind::Slice: {
        Value object = eval(*e.a, scope);
        const Value start = e.b ? eval(*e.b, scope) : Value::undefined();
        const Value stop = e.c ? eval(*e.c, scope) : Value::undefined();
        const Value step = e.items.empty() ? Value::undefined() : eval(*e.items[0], scope);
        return slice(object, start, stop, step);
      }
      case Expr::Kind::Call: {
        auto [args, kwargs] = eval_args(e, scope);
        const Value fn = eval(*e.a, scope);
        if (fn.kind != K::Function) err(std::string("cannot call a ") + fn.type_name());
        Value result = (*fn.fn)(args, kwargs);
        if (result.is_string() && result.s.size() > limits_.max_string_bytes) err("string larger than the template string limit");
        return result;
      }
      case Expr::Kind::Filter: {
        const Value operand = eval(*e.a, scope);
        auto [args, kwargs] = eval_args(e, scope);
        return apply_filter(e.str, operand, args, kwargs, limits_);
      }
      case Expr::Kind::Test: return Value::boolean(apply_test(e.str, eval(*e.a, scope)) != e.negate);
      case Expr::Kind::Unary: {
        const Value v = eval(*e.a, scope);
        if (e.str == "not") return Value::boolean(!v.truthy());
        if (!v.is_numeric_like()) err("unary '" + e.str + "' on a " + v.type_name());
        if (v.kind == K::Float) return Value::floating(e.str == "-" ? -v.f : v.f);
        const int64_t x = v.kind == K::Bool ? int64_t(v.b) : v.i;
        if (e.str == "-" && x == INT64_MIN) err("integer overflow");
        return Value::integer(e.str == "-" ? -x : x);
      }
      case Expr::Kind::Ternary:
        if (eval(*e.a, scope).truthy()) return eval(*e.b, scope);
        return e.c ? eval(*e.c, scope) : Value::undefined();
      case Expr::Kind::Binary: return binary(e, scope);
    }
    err("unknown expression");
  }

  std::pair<std::vector<Value>, KwArgs> eval_args(const Expr& e, const ScopePtr& scope) {
    std::vector<Value> args;
    KwArgs kwargs;
    for (const auto& x : e.items) args.push_back(eval(*x, scope));
    for (const auto& [k, x] : e.kwargs) {
      for (const auto& [seen, v] : kwargs)
        if (seen == k) err("keyword argument '" + k + "' given twice");
      kwargs.emplace_back(k, eval(*x, scope));
    }
    return {std::move(args), std::move(kwargs)};
  }

  Value checked_string(std::string s) const {
    if (s.size() > limits_.max_string_bytes) err("string larger than the template string limit");
    return Value::string(std::move(s));
  }

  Value arithmetic(const std::string& op, const Value& l, const Value& r) {
    if (l.kind == K::Int && r.kind == K::Int && op != "/") {
      int64_t out = 0;
      const int64_t a = l.i, b = r.i;
      if (op == "+" && !__builtin_add_overflow(a, b, &out)) return Value::integer(out);
      if (op == "-" && !__builtin_sub_overflow(a, b, &out)) return Value::integer(out);
      if (op == "*" && !__builtin_mul_overflow(a, b, &out)) return Value::integer(out);
      if (op == "//" || op == "%") {
        if (b == 0) err("integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) err("integer overflow");
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
          --q;
          m += b;
        }
        return Value::integer(op == "//" ? q : m);
      }
      if (op == "+" || op == "-" || op == "*") err("integer overflow in '" + op + "'");
    }
    const double a = l.number(), b = r.number();
    if (op == "+") return Value::floating(a + b);
    if (op == "-") return Value::floating(a - b);
    if (op == "*") return Value::floating(a * b);
    if (b == 0 && (op == "/" || op == "//" || op == "%")) err("division by zero");
    if (op == "/") return Value::floating(a / b);
    if (op == "//") return Value::floating(std::floor(a / b));
    const double m = std::fmod(a, b);
    return Value::floating(m != 0 && ((m < 0) != (b < 0)) ? m + b : m);
  }

  Value binary(const Expr& e, const ScopePtr& scope) {
    const std::string& op = e.str;
    const Value l = eval(*e.a, scope);
    if (op == "and") return l.truthy() ? eval(*e.b, scope) : l;
    if (op == "or") return l.truthy() ? l : eval(*e.b, scope);
    const Value r = eval(*e.b, scope);
    if (op == "==") return Value::boolean(equal(l, r));
    if (op == "!=") return Value::boolean(!equal(l, r));
    if (l.is_number() && r.is_number() && op != "~" && op != "**") {
      if (op == "<") return Value::boolean(l.number() < r.number());
      if (op == ">") return Value::boolean(l.number() > r.number());
      if (op == "<=") return Value::boolean(l.number() <= r.number());
      if (op == ">=") return Value::boolean(l.number() >= r.number());
      if (op != "in" && op != "not in") return arithmetic(op, l, r);
    }
    if (l.is_undefined() || r.is_undefined()) {
      if (r.is_undefined() && (op == "in" || op == "not in")) return Value::boolean(op == "not in");
      if (op == "~" && !l.is_none() && !r.is_none()) return checked_string(l.str() + r.str());
      err("'" + op + "' on an undefined value");
    }
    if (l.is_none() || r.is_none()) err("'" + op + "' on none");
    if (op == "~") return checked_string(l.str() + r.str());
    if (op == "**" && l.is_numeric_like() && r.is_numeric_like()) {
      const double x = std::pow(l.number(), r.number());
      if (!std::isfinite(x)) err("'**' result is not a finite number");
      if (l.kind != K::Float && r.kind != K::Float && r.number() >= 0 && std::fabs(x) < 9.2e18) return Value::integer(int64_t(x));
      return Value::floating(x);
    }
    if (op == "+" && l.is_list() && r.is_list()) {
      if (l.list->size() + r.list->size() > limits_.max_list_items) err("list larger than the template list limit");
      List items = *l.list;
      items.insert(items.end(), r.list->begin(), r.list->end());
      return Value::make_list(std::move(items));
    }
    if (op == "in" || op == "not in") {
      bool found;
      if (r.is_list()) {
        found = false;
        for (const auto& x : *r.list) found = found || equal(l, x);
      } else if (r.is_string() && l.is_string()) {
        found = r.s.find(l.s) != std::string::npos;
      } else if (r.kind == K::Dict && l.is_string()) {
        found = r.find(l.s) != nullptr;
      } else {
        err(std::string("'") + op + "' with a " + l.type_name() + " and a " + r.type_name());
      }
      return Value::boolean(found == (op == "in"));
    }
    if (op == "+" && (l.is_string() || r.is_string()) && l.kind != K::Function && r.kind != K::Function)
      return checked_string(l.str() + r.str());
    if (l.is_string() && r.is_string()) {
      const int c = l.s.compare(r.s);
      if (op == "<") return Value::boolean(c < 0);
      if (op == ">") return Value::boolean(c > 0);
      if (op == "<=") return Value::boolean(c <= 0);
      if (op == ">=") return Value::boolean(c >= 0);
    }
    err("unsupported operator '" + op + "' between a " + l.type_name() + " and a " + r.type_name());
  }

  std::string origin_;
  const Limits& limits_;
  size_t steps_ = 0;
  int depth_ = 0;
  int eval_depth_ = 0;
  static constexpr int kMaxEvalDepth = 600;
};

}  // namespace

std::string render(const Body& body, const std::string& origin, const std::vector<std::pair<std::string, Value>>& globals,
                   const Limits& limits) {
  return Evaluator(origin, limits).run(body, globals);
}

}  // namespace g4c::models::jinja
