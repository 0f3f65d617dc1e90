// Tokens and syntax tree of the chat template engine (internal to models/chat_template*.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace g4c::models::jinja {

// ---- lexer ----
struct Token {
  enum class Type {
    Text,        // template text between tags
    OpenStmt,    // {%
    CloseStmt,   // %}
    OpenExpr,    // {{
    CloseExpr,   // }}
    Name,        // identifier or keyword
    String,      // string literal (value unescaped)
    Integer,
    Float,
    Op,          // operators and punctuation: ( ) [ ] { } , . : | + - ~ * / // % ** == != < > <= >= =
    End,
  };
  Type type;
  std::string value;
  int line;
};

// The tokens of a template, after the preprocessing @huggingface/jinja and transformers apply
// (one trailing newline dropped, trim_blocks, lstrip_blocks) and whitespace control (`-`).
// Comments are dropped. Throws g4c::Error naming the line on bad syntax.
std::vector<Token> tokenize(const std::string& source, const std::string& origin);

// ---- syntax tree ----
struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,    // value: str (String), integer / floating / boolean / none via lit_kind
    Name,       // name
    List,       // items
    Tuple,      // items
    Dict,       // items as key, value pairs (even/odd)
    Attr,       // a.name
    Index,      // a[b]
    Slice,      // a[b:c:d] (missing parts null)
    Call,       // a(args, kwargs)
    Filter,     // a | name(args, kwargs)
    Test,       // a is [not] name
    Unary,      // op a   (not, -, +)
    Binary,     // a op b
    Ternary,    // b if a else c
  };
  enum class LitKind { String, Integer, Float, Bool, None };
  Kind kind;
  int line = 0;
  LitKind lit_kind = LitKind::None;
  std::string str;       // literal string, name, attribute, operator, filter or test name
  int64_t integer = 0;
  double floating = 0;
  bool boolean = false;
  bool negate = false;   // is not
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;                         // list/tuple/dict items, call args
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind { Text, Output, If, For, Set, Macro, Break, Continue };
  Kind kind;
  int line = 0;
  std::string text;                   // Text
  ExprPtr expr;                       // Output value, If/For condition/iterable, Set value
  std::vector<std::string> targets;   // For loop variables, Set target (name or ns.attr as two)
  bool set_attr = false;              // Set: targets = {namespace, attribute}
  Body body, else_body;               // If then/else (elif nests), For body/else, Macro body
  std::string name;                   // Macro name
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro parameters (default or null)
};

// Parses tokens into statements; throws g4c::Error naming the line and the construct for
// anything outside the supported subset.
Body parse(const std::vector<Token>& tokens, const std::string& origin);

}  // namespace g4c::models::jinja
