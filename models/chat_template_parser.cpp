// Parser of the chat template engine: tokens → statements and expressions.
//
// Statements: if/elif/else, for (one or several loop variables, else), set (a name, a
// tuple of names, or namespace.attribute), macro (parameters with defaults), break,
// continue. Expressions, loosest first (Jinja's precedence): `x if c else y`, or, and, not,
// comparisons and `in`/`not in`, `~`, `+ -`, `* / // %`, `**`, unary `- +`, then filters
// (`| name(args)`) and tests (`is [not] name`) on a primary with attribute access,
// subscripts, slices and calls. Anything else (call/filter blocks, include, extends, block
// set, `for ... if`, ...) is an error naming the line and the construct.
#include <cstdlib>
#include <string>
#include <vector>

#include "models/chat_template_ast.h"
#include "models/error.h"

namespace g4c::models::jinja {
namespace {

constexpr int kMaxDepth = 200;  // nesting of expressions/blocks: guards the parser's stack

using T = Token::Type;

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& origin) : t_(tokens), origin_(origin) {}

  Body run() {
    Body body = parse_body({});
    if (peek().type != T::End) fail("unexpected '{% " + stmt_keyword() + " %}'");
    return body;
  }

 private:
  [[noreturn]] void fail(const std::string& what, int line = -1) const {
    throw g4c::Error(origin_ + ":" + std::to_string(line < 0 ? peek().line : line) + ": chat template: " + what);
  }
  const Token& peek(size_t ahead = 0) const { return t_[std::min(p_ + ahead, t_.size() - 1)]; }
  const Token& next() {
    const Token& tok = peek();
    if (p_ < t_.size() - 1) ++p_;
    return tok;
  }
  bool is_op(const char* op, size_t ahead = 0) const { return peek(ahead).type == T::Op && peek(ahead).value == op; }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).type == T::Name && peek(ahead).value == name;
  }
  static std::string describe(const Token& tok) {
    switch (tok.type) {
      case T::End: return "end of template";
      case T::Text: return "text";
      case T::CloseStmt: return "'%}'";
      case T::CloseExpr: return "'}}'";
      case T::OpenStmt: return "'{%'";
      case T::OpenExpr: return "'{{'";
      case T::String: return "string literal";
      default: return "'" + tok.value + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "', found " + describe(peek()));
    next();
  }
  std::string expect_name() {
    if (peek().type != T::Name) fail("expected a name, found " + describe(peek()));
    return next().value;
  }
  void expect(T type, const char* what) {
    if (peek().type != type) fail(std::string("expected ") + what + ", found " + describe(peek()));
    next();
  }
  std::string stmt_keyword() const { return peek(1).type == T::Name ? peek(1).value : describe(peek(1)); }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p(p) {
      if (++p.depth_ > kMaxDepth) p.fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~DepthGuard() { --p.depth_; }
    Parser& p;
  };

  // Statements until `{% <one of ends> ... %}` (left unconsumed) or the end of input.
  Body parse_body(const std::vector<std::string>& ends) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& tok = peek();
      if (tok.type == T::End) {
        if (!ends.empty()) fail("missing '{% " + ends.back() + " %}' (end of template reached)");
        return body;
      }
      if (tok.type == T::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = tok.line;
        s->text = tok.value;
        next();
        body.push_back(std::move(s));
        continue;
      }
      if (tok.type == T::OpenExpr) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Output;
        s->line = tok.line;
        next();
        s->expr = parse_expr();
        expect(T::CloseExpr, "'}}'");
        body.push_back(std::move(s));
        continue;
      }
      if (tok.type != T::OpenStmt) fail("unexpected " + describe(tok));
      const std::string kw = stmt_keyword();
      for (const auto& e : ends)
        if (kw == e) return body;
      body.push_back(parse_statement());
    }
  }

  StmtPtr parse_statement() {
    const int line = next().line;  // {%
    if (peek().type != T::Name) fail("expected a statement name after '{%', found " + describe(peek()));
    const std::string kw = next().value;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (kw == "if") {
      parse_if_rest(*s);
    } else if (kw == "for") {
      parse_for_rest(*s);
    } else if (kw == "set") {
      parse_set_rest(*s);
    } else if (kw == "macro") {
      parse_macro_rest(*s);
    } else if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      expect(T::CloseStmt, "'%}'");
    } else if (kw == "elif" || kw == "else" || kw == "endif" || kw == "endfor" || kw == "endmacro" || kw == "endset") {
      fail("'{% " + kw + " %}' without its opening statement", line);
    } else {
      fail("unsupported construct '{% " + kw + " %}' (the engine implements the subset of Jinja that chat "
           "templates use: if, for, set, macro, break, continue)", line);
    }
    return s;
  }

  void end_tag(const char* kw) {
    expect(T::OpenStmt, "'{%'");
    if (!is_name(kw)) fail(std::string("expected '{% ") + kw + " %}'");
    next();
    expect(T::CloseStmt, "'%}'");
  }

  void parse_if_rest(Stmt& s) {
    s.kind = Stmt::Kind::If;
    s.expr = parse_expr();
    expect(T::CloseStmt, "'%}'");
    s.body = parse_body({"elif", "else", "endif"});
    next();  // {%
    const Token& kw = next();
    if (kw.value == "elif") {
      auto nested = std::make_unique<Stmt>();
      nested->line = kw.line;
      DepthGuard guard(*this);
      parse_if_rest(*nested);  // consumes the shared endif
      s.else_body.push_back(std::move(nested));
      return;
    }
    if (kw.value == "else") {
      expect(T::CloseStmt, "'%}'");
      s.else_body = parse_body({"endif"});
      next();
      next();
    }
    expect(T::CloseStmt, "'%}'");
  }

  void parse_for_rest(Stmt& s) {
    s.kind = Stmt::Kind::For;
    s.targets.push_back(expect_name());
    while (is_op(",")) {
      next();
      s.targets.push_back(expect_name());
    }
    if (!is_name("in")) fail("expected 'in' in '{% for %}', found " + describe(peek()));
    next();
    s.expr = parse_or();  // no ternary: `for x in xs if cond` is a loop filter
    if (is_name("if")) fail("unsupported construct 'for ... if' (loop filter)");
    if (is_name("recursive")) fail("unsupported construct 'for ... recursive'");
    expect(T::CloseStmt, "'%}'");
    s.body = parse_body({"else", "endfor"});
    next();
    if (next().value == "else") {
      expect(T::CloseStmt, "'%}'");
      s.else_body = parse_body({"endfor"});
      next();
      next();
    }
    expect(T::CloseStmt, "'%}'");
  }

  void parse_set_rest(Stmt& s) {
    s.kind = Stmt::Kind::Set;
    s.targets.push_back(expect_name());
    if (is_op(".")) {
      next();
      s.targets.push_back(expect_name());
      s.set_attr = true;
    } else {
      while (is_op(",")) {
        next();
        s.targets.push_back(expect_name());
      }
    }
    if (peek().type == T::CloseStmt) fail("unsupported construct 'block set' ({% set x %}...{% endset %})");
    expect_op("=");
    s.expr = parse_expr();
    expect(T::CloseStmt, "'%}'");
  }

  void parse_macro_rest(Stmt& s) {
    s.kind = Stmt::Kind::Macro;
    s.name = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      std::string param = expect_name();
      ExprPtr def;
      if (is_op("=")) {
        next();
        def = parse_expr();
      }
      s.params.emplace_back(std::move(param), std::move(def));
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
    expect(T::CloseStmt, "'%}'");
    s.body = parse_body({"endmacro"});
    end_tag("endmacro");
  }

  // ---- expressions ----
  ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b, int line) {
    auto e = make(Expr::Kind::Binary, line);
    e->str = std::move(op);
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }

  ExprPtr parse_expr() {
    DepthGuard guard(*this);
    ExprPtr value = parse_or();
    while (is_name("if")) {
      const int line = next().line;
      auto e = make(Expr::Kind::Ternary, line);
      e->a = parse_or();
      e->b = std::move(value);
      if (is_name("else")) {
        next();
        e->c = parse_expr();
      }
      value = std::move(e);
    }
    return value;
  }
  ExprPtr parse_or() {
    ExprPtr a = parse_and();
    while (is_name("or")) {
      const int line = next().line;
      a = binary("or", std::move(a), parse_and(), line);
    }
    return a;
  }
  ExprPtr parse_and() {
    ExprPtr a = parse_not();
    while (is_name("and")) {
      const int line = next().line;
      a = binary("and", std::move(a), parse_not(), line);
    }
    return a;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = make(Expr::Kind::Unary, next().line);
      e->str = "not";
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr a = parse_concat();
    while (true) {
      const Token& tok = peek();
      std::string op;
      if (tok.type == T::Op && (tok.value == "==" || tok.value == "!=" || tok.value == "<" || tok.value == ">" ||
                                tok.value == "<=" || tok.value == ">=")) {
        op = tok.value;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && is_name("in", 1)) {
        op = "not in";
        next();
        next();
      } else {
        return a;
      }
      a = binary(op, std::move(a), parse_concat(), tok.line);
    }
  }
  ExprPtr parse_concat() {
    ExprPtr a = parse_add();
    while (is_op("~")) {
      const int line = next().line;
      a = binary("~", std::move(a), parse_add(), line);
    }
    return a;
  }
  ExprPtr parse_add() {
    ExprPtr a = parse_mul();
    while (is_op("+") || is_op("-")) {
      const Token& tok = next();
      a = binary(tok.value, std::move(a), parse_mul(), tok.line);
    }
    return a;
  }
  ExprPtr parse_mul() {
    ExprPtr a = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& tok = next();
      a = binary(tok.value, std::move(a), parse_pow(), tok.line);
    }
    return a;
  }
  ExprPtr parse_pow() {
    ExprPtr a = parse_unary();
    while (is_op("**")) {
      const int line = next().line;
      a = binary("**", std::move(a), parse_unary(), line);
    }
    return a;
  }
  ExprPtr parse_unary() {
    if (is_op("-") || is_op("+")) {
      DepthGuard guard(*this);
      const Token& tok = next();
      auto e = make(Expr::Kind::Unary, tok.line);
      e->str = tok.value;
      e->a = parse_unary();
      return e;
    }
    return parse_filters(parse_postfix(parse_primary()));
  }

  void parse_call_args(Expr& call) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().type == T::Name && is_op("=", 1)) {
        std::string key = next().value;
        next();
        call.kwargs.emplace_back(std::move(key), parse_expr());
      } else {
        if (!call.kwargs.empty()) fail("a positional argument follows a keyword argument");
        call.items.push_back(parse_expr());
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
  }

  ExprPtr parse_filters(ExprPtr value) {
    while (true) {
      if (is_op("|")) {
        const int line = next().line;
        auto e = make(Expr::Kind::Filter, line);
        e->str = expect_name();
        e->a = std::move(value);
        if (is_op("(")) parse_call_args(*e);
        value = std::move(e);
      } else if (is_name("is")) {
        const int line = next().line;
        auto e = make(Expr::Kind::Test, line);
        if (is_name("not")) {
          next();
          e->negate = true;
        }
        if (peek().type != T::Name) fail("expected a test name after 'is', found " + describe(peek()));
        e->str = next().value;
        e->a = std::move(value);
        if (is_op("(")) fail("unsupported construct: a test with arguments ('is " + e->str + "(...)')");
        value = std::move(e);
      } else {
        return value;
      }
    }
  }

  ExprPtr parse_postfix(ExprPtr value) {
    while (true) {
      if (is_op(".")) {
        const int line = next().line;
        auto e = make(Expr::Kind::Attr, line);
        if (peek().type == T::Integer) {
          // `x.0` is `x[0]`
          e->kind = Expr::Kind::Index;
          e->b = make(Expr::Kind::Literal, line);
          e->b->lit_kind = Expr::LitKind::Integer;
          e->b->integer = parse_int(next());
        } else {
          e->str = expect_name();
        }
        e->a = std::move(value);
        value = std::move(e);
      } else if (is_op("[")) {
        DepthGuard guard(*this);
        const int line = next().line;
        ExprPtr parts[3];
        int colons = 0;
        for (int k = 0; k < 3; ++k) {
          if (!is_op(":") && !is_op("]")) parts[k] = parse_expr();
          if (k < 2 && is_op(":")) {
            next();
            ++colons;
          } else {
            break;
          }
        }
        expect_op("]");
        auto e = make(colons ? Expr::Kind::Slice : Expr::Kind::Index, line);
        if (!colons && !parts[0]) fail("empty subscript '[]'", line);
        e->a = std::move(value);
        e->b = std::move(parts[0]);
        e->c = std::move(parts[1]);
        if (parts[2]) e->items.push_back(std::move(parts[2]));
        value = std::move(e);
      } else if (is_op("(")) {
        DepthGuard guard(*this);
        auto e = make(Expr::Kind::Call, peek().line);
        e->a = std::move(value);
        parse_call_args(*e);
        value = std::move(e);
      } else {
        return value;
      }
    }
  }

  int64_t parse_int(const Token& tok) const {
    int64_t v = 0;
    for (char c : tok.value) {
      if (v > (INT64_MAX - 9) / 10) fail("integer literal '" + tok.value + "' is too large", tok.line);
      v = v * 10 + (c - '0');
    }
    return v;
  }

  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    const Token& tok = peek();
    auto lit = [&](Expr::LitKind kind) {
      auto e = make(Expr::Kind::Literal, tok.line);
      e->lit_kind = kind;
      return e;
    };
    switch (tok.type) {
      case T::String: {
        auto e = lit(Expr::LitKind::String);
        e->str = next().value;
        while (peek().type == T::String) e->str += next().value;  // adjacent literals concatenate
        return e;
      }
      case T::Integer: {
        auto e = lit(Expr::LitKind::Integer);
        e->integer = parse_int(next());
        return e;
      }
      case T::Float: {
        auto e = lit(Expr::LitKind::Float);
        e->floating = std::strtod(next().value.c_str(), nullptr);  // overflow → inf, never throws
        return e;
      }
      case T::Name: {
        const std::string& n = tok.value;
        if (n == "true" || n == "True" || n == "false" || n == "False") {
          auto e = lit(Expr::LitKind::Bool);
          e->boolean = n[0] == 't' || n[0] == 'T';
          next();
          return e;
        }
        if (n == "none" || n == "None") {
          next();
          return lit(Expr::LitKind::None);
        }
        auto e = make(Expr::Kind::Name, tok.line);
        e->str = next().value;
        return e;
      }
      case T::Op:
        if (tok.value == "(") return parse_paren();
        if (tok.value == "[") {
          auto e = make(Expr::Kind::List, next().line);
          while (!is_op("]")) {
            e->items.push_back(parse_expr());
            if (!is_op(",")) break;
            next();
          }
          expect_op("]");
          return e;
        }
        if (tok.value == "{") {
          auto e = make(Expr::Kind::Dict, next().line);
          while (!is_op("}")) {
            e->items.push_back(parse_expr());
            expect_op(":");
            e->items.push_back(parse_expr());
            if (!is_op(",")) break;
            next();
          }
          expect_op("}");
          return e;
        }
        break;
      default:
        break;
    }
    fail("unexpected " + describe(tok) + " in an expression");
  }

  ExprPtr parse_paren() {
    const int line = next().line;
    if (is_op(")")) {
      next();
      return make(Expr::Kind::Tuple, line);
    }
    ExprPtr first = parse_expr();
    if (!is_op(",")) {
      expect_op(")");
      return first;
    }
    auto e = make(Expr::Kind::Tuple, line);
    e->items.push_back(std::move(first));
    while (is_op(",")) {
      next();
      if (is_op(")")) break;
      e->items.push_back(parse_expr());
    }
    expect_op(")");
    return e;
  }

  const std::vector<Token>& t_;
  std::string origin_;
  size_t p_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens, const std::string& origin) { return Parser(tokens, origin).run(); }

}  // namespace g4c::models::jinja
