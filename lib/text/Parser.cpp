//===- Parser.cpp - recursive-descent parser for the Relay text format ----===//
//
// Second stage of the front end: it pulls tokens from the lexer one at a
// time (one token of lookahead). Each parse function has its grammar
// production above it. Every syntax error goes through expect() or fail(),
// which report at the offending token and unwind with ParseError.
// Nesting depth is bounded (kMaxNesting) and the parser runs on a stack of
// its own sized for it, so adversarial input cannot exhaust the stack.
//
//===----------------------------------------------------------------------===//
#include "gradc/text/Parser.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Registry.h"
#include "gradc/text/Lexer.h"

#include <exception>
#include <functional>
#include <new>
#include <pthread.h>
#include <unordered_map>
#include <unordered_set>

namespace gradc {

namespace {

struct ParseError {};

/// How deep an input may nest (README "Limits"): parentheses, brackets and
/// calls as written (DepthGuard, which bounds the parser's recursion), and
/// the expression trees built (nested(), which bounds every later walk).
constexpr int kMaxNesting = 1000;

class Parser {
public:
  Parser(std::shared_ptr<const SourceFile> file, DiagEngine &diag)
      : file_(std::move(file)), diag_(diag), lexer_(*file_, diag) {}

  std::optional<Module> run() {
    Module m;
    m.source = file_;
    try {
      cur_ = pull();
      header();
      while (!at(Tok::End))
        m.functions.push_back(definition());
    } catch (ParseError &) {
      return std::nullopt;
    } catch (std::bad_alloc &) {
      // Free what was built, then say where parsing stopped (exit 1: the
      // input is too large for this machine, not a gradc bug).
      m.functions.clear();
      scopes_.clear();
      nesting_.clear();
      global_calls_.clear();
      diag_.error(cur_.span,
                  "out of memory while parsing (the input is " + std::to_string(file_->text().size()) + " bytes)");
      return std::nullopt;
    }
    check_global_calls(m);
    if (diag_.error_count())
      return std::nullopt;
    return m;
  }

private:
  std::shared_ptr<const SourceFile> file_;
  DiagEngine &diag_;
  Lexer lexer_;
  Token cur_;                  // the current token
  std::optional<Token> ahead_; // the one after it, once peeked at
  uint32_t prev_end_ = 0;      // where the last consumed token ends
  size_t consumed_ = 0;        // how many tokens were consumed
  int depth_ = 0;
  std::vector<std::unordered_map<std::string, ExprPtr>> scopes_;
  std::vector<ExprPtr> global_calls_;

  /// Every later walk of an expression (and its destruction) recurses into its
  /// operands, so an expression may nest at most kMaxNesting levels. A
  /// left-associative chain `a + b + c + ...` nests one level per operator
  /// without deep recursion here, so depth is tracked per node as it is built
  /// and parsing stops at the first node past the limit.
  std::unordered_map<const Expr *, int> nesting_;

  ExprPtr nested(ExprPtr e) {
    int d = 1;
    for (const ExprPtr &a : e->args)
      if (auto it = nesting_.find(a.get()); it != nesting_.end())
        d = std::max(d, it->second + 1);
    if (d > kMaxNesting)
      fail(e->span, "expression nested more than " + std::to_string(kMaxNesting) +
                        " levels deep (each operator of a chain such as `a + b + c` is a level): "
                        "bind parts of it to variables");
    nesting_[e.get()] = d;
    return e;
  }

  //===--- token helpers -------------------------------------------------===//

  /// The next token from the lexer; a lexical error (already reported) ends parsing.
  Token pull() {
    Token t = lexer_.next();
    if (lexer_.failed())
      throw ParseError();
    return t;
  }
  const Token &cur() const { return cur_; }
  bool at(Tok k) const { return cur().kind == k; }
  bool at_ident(const char *word) const { return at(Tok::Ident) && cur().text == word; }
  /// The kind of the token after the current one.
  Tok peek_kind() {
    if (!ahead_ && !at(Tok::End))
      ahead_ = pull();
    return ahead_ ? ahead_->kind : Tok::End;
  }
  /// Consumes the current token and returns it (End stays current at the end).
  Token advance() {
    if (at(Tok::End))
      return cur_;
    Token t = std::move(cur_);
    prev_end_ = t.span.end;
    ++consumed_;
    cur_ = ahead_ ? std::move(*ahead_) : pull();
    ahead_.reset();
    return t;
  }
  bool accept(Tok k) {
    if (!at(k))
      return false;
    advance();
    return true;
  }

  std::string describe(const Token &t) const {
    switch (t.kind) {
    case Tok::Ident:
      return "'" + t.text + "'";
    case Tok::Local:
      return "'%" + t.text + "'";
    case Tok::Global:
      return "'@" + t.text + "'";
    case Tok::Int:
    case Tok::Float:
      return "number '" + file_->text().substr(t.span.begin, t.span.end - t.span.begin) + "'";
    case Tok::String:
      return "string \"" + t.text + "\"";
    default:
      return tok_name(t.kind);
    }
  }

  [[noreturn]] void fail(Span span, const std::string &msg) {
    diag_.error(span, msg);
    throw ParseError();
  }

  /// The one helper for "expected X, found Y" errors.
  Token expect(Tok k, const char *context) {
    if (!at(k))
      fail(cur().span, std::string("expected ") + tok_name(k) + " " + context + ", found " + describe(cur()));
    return advance();
  }

  /// One level of nesting as written, held while a construct that recurses
  /// is parsed: parentheses or a tuple, a call's arguments, a unary minus, a
  /// `fn`, a tuple type, an attribute list.
  struct DepthGuard {
    Parser &p;
    explicit DepthGuard(Parser &p) : p(p) {
      if (++p.depth_ > kMaxNesting)
        p.fail(p.cur().span, "nested more than " + std::to_string(kMaxNesting) +
                                 " levels deep (each parenthesis, bracket and call is a level)");
    }
    ~DepthGuard() { --p.depth_; }
  };

  Span from(Span begin) const { return {begin.begin, std::max(prev_end_, begin.end)}; }

  //===--- scopes ----------------------------------------------------------===//

  void declare(const ExprPtr &var) { scopes_.back()[var->name] = var; }

  /// An undefined name is reported once per scope and parsing goes on with a
  /// placeholder, so every undefined variable is reported.
  ExprPtr lookup(const Token &t) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(t.text);
      if (found != it->end())
        return found->second;
    }
    diag_.error(t.span, "undefined variable '%" + t.text + "'");
    ExprPtr placeholder = make_var(t.text, {}, t.span);
    scopes_.back()[t.text] = placeholder;
    return placeholder;
  }

  //===--- module structure -----------------------------------------------===//

  // header := '#[' 'version' '=' STRING ']'
  void header() {
    if (!at(Tok::HashBracket))
      fail(cur().span, "expected the version header " + relay_version_header() + " at the start of the file");
    advance();
    Token key = expect(Tok::Ident, "in the version header");
    if (key.text != "version")
      fail(key.span, "expected 'version' in the header, found '" + key.text + "'");
    expect(Tok::Assign, "after 'version'");
    Token v = expect(Tok::String, "as the version");
    if (v.text != kRelayVersion)
      fail(v.span, "unsupported Relay text format version \"" + v.text + "\" (expected \"" + kRelayVersion + "\")");
    expect(Tok::RBracket, "to close the version header");
  }

  // definition := 'def' GLOBAL '(' params? ')' ('->' type)? '{' body '}'
  FunctionPtr definition() {
    reject_unsupported();
    if (!at_ident("def"))
      fail(cur().span, "expected 'def', found " + describe(cur()));
    advance();
    auto fn = std::make_shared<Function>();
    Token name = expect(Tok::Global, "after 'def'");
    fn->name = name.text;
    fn->span = name.span;
    scopes_.emplace_back();
    fn->params = params(/*annotated=*/false, &fn->attrs);
    if (accept(Tok::Arrow))
      fn->ret_type = type();
    expect(Tok::LBrace, "to open the function body");
    fn->body = body();
    expect(Tok::RBrace, "to close the function body");
    scopes_.pop_back();
    return fn;
  }

  // params      := '(' (param (',' param)*)? (',' fn_attrs)? ')' | '(' fn_attrs ')'
  // param       := LOCAL ('{' param_attrs '}')? ':' type
  // param_attrs := IDENT '=' skipped (',' IDENT '=' skipped)*
  // fn_attrs    := IDENT '=' skipped (',' IDENT '=' skipped)*
  // TVM writes a parameter's device as `%x {virtual_device=meta[VirtualDevice][0]}: T` and the
  // function's as a trailing `virtual_device=...` in the parameter list. gradc compiles every
  // function for one target, where placement does not change a value, so `virtual_device` is
  // accepted and ignored (its value is skipped unread: TVM writes a meta reference). A `def`
  // also takes gradc's own (FunctionAttrs): role="primal"|"adjoint"|"train_step",
  // primal="NAME", optimizer="sgd(...)", inplace_indices=[...]. Any other attribute is a located error. Parameter
  // names are distinct (a located error).
  /// `annotated`: each parameter needs a type (a `def`'s; a `fn`'s may
  /// leave theirs to the operator it is the body of). `attrs`: where a
  /// `def`'s attributes go (null for a `fn`, which has none).
  std::vector<ExprPtr> params(bool annotated = true, FunctionAttrs *attrs = nullptr) {
    expect(Tok::LParen, "to open the parameter list");
    std::vector<ExprPtr> out;
    std::unordered_map<std::string, Span> seen;
    while (!at(Tok::RParen)) {
      if (at(Tok::Ident) && peek_kind() == Tok::Assign) {
        function_attrs(attrs);
        break;
      }
      Token name = expect(Tok::Local, "as a parameter");
      if (accept(Tok::LBrace)) {
        ignored_attrs("parameter", Tok::RBrace);
        expect(Tok::RBrace, "to close the parameter's attributes");
      }
      Type ann;
      if (accept(Tok::Colon))
        ann = type();
      else if (annotated)
        fail(name.span, "parameter '%" + name.text + "' needs a type annotation");
      auto [first, fresh] = seen.emplace(name.text, name.span);
      if (!fresh) {
        diag_.error(name.span, "parameter '%" + name.text + "' is declared twice");
        diag_.note(first->second, "'%" + name.text + "' is first declared here");
      }
      auto var = make_var(name.text, ann, name.span);
      declare(var);
      out.push_back(var);
      if (!accept(Tok::Comma))
        break;
    }
    expect(Tok::RParen, "to close the parameter list");
    return out;
  }

  /// A function's `key=value, ...` up to ')': gradc's own into `attrs`
  /// (where it is not null), virtual_device skipped.
  void function_attrs(FunctionAttrs *attrs) {
    std::unordered_set<std::string> given;
    while (attrs && at(Tok::Ident) && peek_kind() == Tok::Assign && cur().text != "virtual_device") {
      Token key = advance();
      advance();
      if (!given.insert(key.text).second)
        fail(key.span, "function attribute '" + key.text + "' is given twice");
      AttrValue v = attr_value();
      v.span = from(key.span);
      if (key.text == "role") {
        static const FunctionRole roles[] = {FunctionRole::Primal, FunctionRole::Adjoint, FunctionRole::TrainStep};
        auto known = std::find_if(std::begin(roles), std::end(roles),
                                  [&](FunctionRole r) { return v.kind == AttrValue::String && v.s == role_name(r); });
        if (known == std::end(roles))
          fail(v.span, "function attribute 'role' must be \"primal\", \"adjoint\" or \"train_step\"");
        attrs->role = *known;
      } else if (key.text == "primal") {
        if (v.kind != AttrValue::String || v.s.empty())
          fail(v.span, "function attribute 'primal' must name a function (a string)");
        attrs->primal = v.s;
      } else if (key.text == "optimizer") {
        if (v.kind != AttrValue::String || v.s.empty())
          fail(v.span, "function attribute 'optimizer' must be a string (as --train takes it: \"sgd(lr=0.1)\")");
        attrs->optimizer = v.s;
      } else if (key.text == "inplace_indices") {
        if (v.kind != AttrValue::List || !v.list.empty())
          fail(v.span, "function attribute 'inplace_indices' must be a list of integers (a parameter's index or -1 "
                       "per result leaf)");
        attrs->inplace = v.int_list;
        attrs->inplace_span = v.span;
      } else {
        fail(key.span, "function attribute '" + key.text +
                           "' is not supported (gradc takes role, primal, optimizer, inplace_indices and virtual_device)");
      }
      if (!accept(Tok::Comma))
        break;
    }
    if (at(Tok::Ident) && peek_kind() == Tok::Assign)
      ignored_attrs("function", Tok::RParen);
  }

  /// `key=value, ...` up to `close`, where only virtual_device is accepted
  /// (and ignored); each value is skipped as a balanced run of tokens.
  void ignored_attrs(const char *what, Tok close) {
    while (true) {
      Token key = expect(Tok::Ident, what[0] == 'p' ? "as a parameter attribute" : "as a function attribute");
      if (key.text != "virtual_device")
        fail(key.span, std::string(what) + " attribute '" + key.text +
                           "' is not supported (only virtual_device, which gradc accepts and ignores)");
      expect(Tok::Assign, "after the attribute name");
      size_t begin = consumed_;
      int depth = 0;
      for (; !at(Tok::End); advance()) {
        Tok k = cur().kind;
        bool opens = k == Tok::LParen || k == Tok::LBracket || k == Tok::LBrace;
        bool closes = k == Tok::RParen || k == Tok::RBracket || k == Tok::RBrace;
        if (depth == 0 && (closes || k == Tok::Comma))
          break;
        depth += opens ? 1 : closes ? -1 : 0;
      }
      if (consumed_ == begin)
        fail(cur().span, "expected a value for attribute '" + key.text + "', found " + describe(cur()));
      if (!at(Tok::Comma) || peek_kind() == close)
        break;
      advance();
    }
    accept(Tok::Comma);
    if (!at(close))
      fail(cur().span,
           std::string("expected ") + tok_name(close) + " after the " + what + " attributes, found " + describe(cur()));
  }

  // body    := binding* expr
  // binding := LOCAL '=' expr ';'
  //          | 'let' LOCAL (':' type)? '=' expr ';'
  Body body() {
    Body b;
    while (true) {
      reject_unsupported();
      if (at_ident("let")) {
        advance();
        Token name = expect(Tok::Local, "after 'let'");
        Type ann;
        if (accept(Tok::Colon))
          ann = type();
        expect(Tok::Assign, "in a let binding");
        ExprPtr value = expr();
        expect(Tok::Semi, "after a let binding");
        auto var = make_var(name.text, ann, name.span);
        declare(var);
        b.bindings.push_back({var, value, true});
      } else if (at(Tok::Local) && peek_kind() == Tok::Assign) {
        Token name = advance();
        advance();
        ExprPtr value = expr();
        expect(Tok::Semi, "after a binding");
        auto var = make_var(name.text, {}, name.span);
        declare(var);
        b.bindings.push_back({var, value, false});
      } else {
        b.result = expr();
        return b;
      }
    }
  }

  void reject_unsupported() {
    static const char *words[] = {"if", "match", "ref", "free_var", "type", "meta", "extern"};
    if (at(Tok::Ident))
      for (const char *w : words)
        if (cur().text == w)
          fail(cur().span, std::string("'") + w + "' is not supported by gradc");
  }

  //===--- types ----------------------------------------------------------===//

  // type := 'Tensor' '[' ('(' dims? ')' | INT) ',' DTYPE ']' | DTYPE | '(' (type (',' type)* ','?)? ')'
  // dims := INT (',' INT)* ','?
  Type type() {
    if (accept(Tok::LParen)) {
      DepthGuard guard(*this);
      std::vector<Type> fields;
      while (!at(Tok::RParen)) {
        fields.push_back(type());
        if (!accept(Tok::Comma))
          break;
      }
      expect(Tok::RParen, "to close a tuple type");
      return Type::tuple(std::move(fields));
    }
    Token t = expect(Tok::Ident, "as a type");
    if (auto dt = parse_dtype(t.text))
      return Type::tensor({}, *dt);
    if (t.text != "Tensor")
      fail(t.span, "unknown type '" + t.text + "' (expected Tensor[...], a dtype or a tuple)");
    expect(Tok::LBracket, "after 'Tensor'");
    Shape shape;
    if (at(Tok::LParen)) {
      advance();
      while (!at(Tok::RParen)) {
        shape.push_back(dim());
        if (!accept(Tok::Comma))
          break;
      }
      expect(Tok::RParen, "to close the shape");
    } else {
      shape.push_back(dim());
    }
    expect(Tok::Comma, "between the shape and the dtype");
    Token d = expect(Tok::Ident, "as the dtype");
    auto dt = parse_dtype(d.text);
    if (!dt)
      fail(d.span, "unknown dtype '" + d.text + "' (expected float32, float64, float16, int32, int64 or bool)");
    Token close = expect(Tok::RBracket, "to close the tensor type");
    if (auto problem = shape_problem(shape))
      fail(close.span, *problem);
    return Type::tensor(std::move(shape), *dt);
  }

  int64_t dim() {
    if (at(Tok::Question) || at_ident("Any"))
      fail(cur().span, "dynamic dimensions are not supported: shapes must be static");
    Token t = expect(Tok::Int, "as a dimension");
    if (!t.suffix.empty() && t.suffix != "i64" && t.suffix != "i32")
      fail(t.span, "a dimension must be an integer");
    if (t.ivalue > (int64_t(1) << 40))
      fail(t.span, "dimension " + std::to_string(t.ivalue) + " is too large");
    return t.ivalue;
  }

  //===--- expressions ----------------------------------------------------===//
  // Relay precedence, loosest first: == != ; < <= > >= ; + - ; * / ; unary - ;
  // postfix projection `.N`. Every level of nesting as written costs a few
  // stack frames (expr, unary, postfix, primary and a call's arguments), so
  // kMaxNesting levels stay far below the default 8 MiB stack.

  struct InfixOp {
    Tok tok;
    int level; // precedence, loosest 0
    const OpRef &op;
  };

  /// The infix operator at the current token, or null.
  const InfixOp *infix_op() const {
    static const InfixOp table[] = {{Tok::EqEq, 0, ops::equal},    {Tok::Ne, 0, ops::not_equal},
                                    {Tok::Lt, 1, ops::less},       {Tok::Le, 1, ops::less_equal},
                                    {Tok::Gt, 1, ops::greater},    {Tok::Ge, 1, ops::greater_equal},
                                    {Tok::Plus, 2, ops::add},      {Tok::Minus, 2, ops::subtract},
                                    {Tok::Star, 3, ops::multiply}, {Tok::Slash, 3, ops::divide}};
    for (const InfixOp &o : table)
      if (at(o.tok))
        return &o;
    return nullptr;
  }

  // expr := unary (INFIX unary)*   (precedence climbing: operators of one
  // level associate to the left, in a loop rather than by recursion)
  ExprPtr expr(int min_level = 0) {
    ExprPtr lhs = unary();
    while (const InfixOp *op = infix_op()) {
      if (op->level < min_level)
        break;
      Span at = advance().span;
      ExprPtr rhs = expr(op->level + 1);
      lhs = nested(make_call(op->op, {lhs, rhs}, {}, at));
    }
    return lhs;
  }

  // unary := '-' literal | '-' unary | postfix
  // As in TVM, where '-' before a number is part of the literal, `-2147483648`
  // is an int32 literal and `-5` a constant, not a call of negative.
  ExprPtr unary() {
    if (at(Tok::Minus)) {
      Token minus = advance();
      if (at(Tok::Int) || at(Tok::Float))
        return literal(&minus);
      DepthGuard guard(*this);
      ExprPtr operand = unary();
      return nested(make_call(ops::negative, {operand}, {}, minus.span));
    }
    return postfix();
  }

  // postfix := primary ('.' INT)*
  ExprPtr postfix() {
    ExprPtr e = primary();
    while (at(Tok::Dot)) {
      Token dot = advance();
      if (at(Tok::Float) && cur().suffix.empty())
        fail(cur().span, "expected integer as a tuple index after '.', found " + describe(cur()) +
                             " (a projection of a projection is written `(%t.0).1`)");
      Token idx = expect(Tok::Int, "as a tuple index after '.'");
      if (idx.ivalue < 0 || idx.ivalue > (1 << 20))
        fail(idx.span, "tuple index out of range");
      e = nested(make_tuple_get(e, int(idx.ivalue), from(dot.span)));
    }
    return e;
  }

  // primary := LOCAL | literal | GLOBAL '(' args ')' | opname '(' args ')'
  //          | '(' ')' | '(' expr ',' ')' | '(' expr (',' expr)+ ')' | '(' expr ')'
  //          | 'fn' params ('->' type)? '{' body '}'
  ExprPtr primary() {
    reject_unsupported();
    const Token &t = cur();
    if (t.kind == Tok::Local)
      return lookup(advance());
    if (t.kind == Tok::Int || t.kind == Tok::Float)
      return literal();
    if (t.kind == Tok::Ident && (t.text == "True" || t.text == "False")) {
      Token b = advance();
      return make_int_constant(b.text == "True", DType::Bool, b.span);
    }
    DepthGuard guard(*this); // the other primaries nest
    switch (t.kind) {
    case Tok::Global: {
      Token name = advance();
      auto [args, attrs] = call_args();
      if (!attrs.items.empty())
        fail(attrs.items[0].second.span, "a call of '@" + name.text + "' takes no attributes");
      ExprPtr call = nested(make_global_call(name.text, std::move(args), name.span));
      global_calls_.push_back(call);
      return call;
    }
    case Tok::LParen: {
      Token open = advance();
      if (accept(Tok::RParen))
        return make_tuple({}, from(open.span));
      ExprPtr first = expr();
      if (accept(Tok::RParen))
        return first;
      std::vector<ExprPtr> fields{first};
      while (accept(Tok::Comma)) {
        if (at(Tok::RParen))
          break;
        fields.push_back(expr());
      }
      expect(Tok::RParen, "to close a tuple");
      return nested(make_tuple(std::move(fields), from(open.span)));
    }
    case Tok::Ident:
      if (t.text == "fn")
        return function_expr();
      return op_call();
    default:
      fail(t.span, "expected an expression, found " + describe(t));
    }
  }

  // literal := '-'? (INT | FLOAT)   (the suffix picks the dtype, see literal_value)
  ExprPtr literal(const Token *minus = nullptr) {
    Token t = advance();
    Span span = minus ? from(minus->span) : t.span;
    LiteralValue v = literal_value(t, minus != nullptr, span);
    if (is_float(v.dtype))
      return make_constant(v.f, v.dtype, span);
    return make_int_constant(v.i, v.dtype, span);
  }

  struct LiteralValue {
    DType dtype;
    int64_t i = 0; // integer dtypes
    double f = 0;  // float dtypes
  };

  /// The dtype and value of the numeric literal `t`, negated if `negative`
  /// (then `span` includes the '-'). TVM's rules, with the limits from the
  /// dtype table: without a suffix an integer is int32, or int64 where int32
  /// cannot hold it; `i32`/`i64` must hold it; `f`/`f32` (or a fraction or
  /// exponent without suffix) is float32, `f16` float16, `f64` float64, and
  /// the value must be finite there (`inff` is infinity, `nanf` not a
  /// number) and not round to zero (subnormals are fine). Anything else is a
  /// located error; parsing goes on with 0, so every bad literal is reported.
  LiteralValue literal_value(const Token &t, bool negative, Span span) {
    std::string text = file_->text().substr(span.begin, span.end - span.begin);
    const std::string &s = t.suffix;
    if (t.kind == Tok::Int && (s.empty() || s[0] == 'i')) {
      std::vector<DType> fits = s.empty() ? std::vector<DType>{DType::Int32, DType::Int64}
                                          : std::vector<DType>{s == "i32" ? DType::Int32 : DType::Int64};
      for (DType dt : fits) {
        const DTypeInfo &info = dtype_info(dt);
        uint64_t limit = negative ? uint64_t(-(info.int_min + 1)) + 1 : uint64_t(info.int_max);
        if (!t.too_large && t.magnitude <= limit)
          return {dt, negative ? int64_t(~t.magnitude + 1) : int64_t(t.magnitude), 0};
      }
      const DTypeInfo &info = dtype_info(fits.back());
      diag_.error(span, "integer literal " + text + " is out of range for " + info.name + " (" +
                            std::to_string(info.int_min) + " to " + std::to_string(info.int_max) + ")");
      return {fits.back(), 0, 0};
    }
    DType dt = s == "f16" ? DType::Float16 : s == "f64" ? DType::Float64 : DType::Float32;
    const DTypeInfo &info = dtype_info(dt);
    double v = t.fvalue;
    if (t.text != "inf" && t.text != "nan" && !(v <= info.max_finite)) {
      diag_.error(span, "float literal " + text + " is out of range for " + info.name + " (largest finite magnitude " +
                            format_float(info.max_finite, dt) + ")");
      return {dt, 0, 0};
    }
    if (t.nonzero && v <= info.min_subnormal / 2) {
      diag_.error(span, "float literal " + text + " underflows to zero in " + info.name + " (smallest subnormal " +
                            format_float(info.min_subnormal, dt) + ")");
      return {dt, 0, 0};
    }
    return {dt, 0, negative ? -v : v};
  }

  // fn := 'fn' params ('->' type)? '{' body '}'
  ExprPtr function_expr() {
    Token kw = advance();
    auto fn = std::make_shared<Function>();
    fn->span = kw.span;
    scopes_.emplace_back();
    fn->params = params(/*annotated=*/false);
    if (accept(Tok::Arrow))
      fn->ret_type = type();
    expect(Tok::LBrace, "to open the body of fn");
    fn->body = body();
    expect(Tok::RBrace, "to close the body of fn");
    scopes_.pop_back();
    return make_func(fn, kw.span);
  }

  // opcall := IDENT ('.' IDENT)* '(' args ')'
  ExprPtr op_call() {
    Token first = advance();
    std::string name = first.text;
    Span span = first.span;
    while (at(Tok::Dot) && peek_kind() == Tok::Ident) {
      advance();
      name += "." + advance().text;
      span = from(first.span);
    }
    const OpDef *def = OpRegistry::global().find(name);
    if (!at(Tok::LParen)) {
      if (def)
        fail(cur().span, "expected '(' after operator '" + name + "', found " + describe(cur()));
      fail(span, "expected an expression, found '" + name + "'");
    }
    // Parsing goes on after an unknown operator (the module is not returned),
    // so every one of the file is reported; its arguments stand in for it.
    if (!def)
      diag_.error(span, "unknown operator '" + name + "'");
    auto [args, attrs] = call_args();
    if (!def)
      return nested(make_tuple(std::move(args), span));
    return nested(make_call(def, std::move(args), std::move(attrs), span));
  }

  // args := '(' (arg (',' arg)*)? ')'
  // arg  := expr | IDENT '=' attr_value
  std::pair<std::vector<ExprPtr>, Attrs> call_args() {
    expect(Tok::LParen, "to open the argument list");
    std::vector<ExprPtr> args;
    Attrs attrs;
    while (!at(Tok::RParen)) {
      if (at(Tok::Ident) && peek_kind() == Tok::Assign) {
        Token key = advance();
        advance();
        if (attrs.find(key.text))
          fail(key.span, "attribute '" + key.text + "' is given twice");
        AttrValue v = attr_value();
        v.span = from(key.span);
        attrs.items.emplace_back(key.text, std::move(v));
      } else {
        if (!attrs.items.empty())
          fail(cur().span, "positional argument after keyword attributes");
        args.push_back(expr());
      }
      if (!accept(Tok::Comma))
        break;
    }
    expect(Tok::RParen, "to close the argument list");
    return {std::move(args), std::move(attrs)};
  }

  // attr_value := '-'? INT | '-'? FLOAT | STRING | 'True' | 'False' | 'None'
  //             | '[' (attr_value (',' attr_value)*)? ']' | dtype name
  AttrValue attr_value() {
    Span start = cur().span;
    AttrValue v;
    if (accept(Tok::LBracket)) {
      DepthGuard guard(*this);
      // Integers are kept as int64s while every element is one (AttrValue).
      std::vector<int64_t> ints;
      std::vector<AttrValue> elements;
      while (!at(Tok::RBracket)) {
        AttrValue e = attr_value();
        if (e.kind == AttrValue::Int && elements.empty()) {
          ints.push_back(e.i);
        } else {
          for (int64_t i : ints)
            elements.push_back(AttrValue::of(i));
          ints.clear();
          elements.push_back(std::move(e));
        }
        if (!accept(Tok::Comma))
          break;
      }
      expect(Tok::RBracket, "to close an attribute list");
      v = elements.empty() ? AttrValue::ints(std::move(ints)) : AttrValue::of_list(std::move(elements));
    } else if (at(Tok::String)) {
      v = AttrValue::of(advance().text);
    } else if (at(Tok::Ident)) {
      Token t = advance();
      if (t.text == "True" || t.text == "False")
        v = AttrValue::of(t.text == "True");
      else if (t.text == "None")
        v = AttrValue::none();
      else if (parse_dtype(t.text))
        v = AttrValue::of(t.text);
      else
        fail(t.span, "expected an attribute value, found '" + t.text + "'");
    } else {
      bool negative = accept(Tok::Minus);
      if (at(Tok::Int) || at(Tok::Float)) {
        Token t = advance();
        LiteralValue lit = literal_value(t, negative, from(start));
        v = is_float(lit.dtype) ? AttrValue::of(lit.f) : AttrValue::of(lit.i);
      } else {
        fail(cur().span, "expected an attribute value, found " + describe(cur()));
      }
    }
    v.span = from(start);
    return v;
  }

  void check_global_calls(const Module &m) {
    for (const ExprPtr &call : global_calls_)
      if (!m.find(call->name))
        diag_.error(call->span, "call of undefined function '@" + call->name + "'");
  }
};

/// The parser recurses a few frames per level of nesting: about 1.5 KB a
/// level in a release build, several times that with sanitizers at -O0 (the
/// fuzzing and sanitizer builds). It runs on a stack of its own, so that
/// kMaxNesting levels fit in any build, whatever the caller's stack.
constexpr size_t kParserStack = size_t(64) << 20;

/// Runs `fn` on a thread with a stack of `bytes` (on this thread if none can
/// be started) and rethrows here what it throws.
void run_on_stack(size_t bytes, const std::function<void()> &fn) {
  struct Job {
    const std::function<void()> &fn;
    std::exception_ptr error;
  } job{fn, nullptr};
  auto body = [](void *arg) -> void * {
    Job &j = *static_cast<Job *>(arg);
    try {
      j.fn();
    } catch (...) {
      j.error = std::current_exception();
    }
    return nullptr;
  };
  pthread_attr_t attr;
  pthread_t thread;
  if (pthread_attr_init(&attr) != 0) {
    fn();
    return;
  }
  bool started = pthread_attr_setstacksize(&attr, bytes) == 0 && pthread_create(&thread, &attr, body, &job) == 0;
  pthread_attr_destroy(&attr);
  if (!started) {
    fn();
    return;
  }
  pthread_join(thread, nullptr);
  if (job.error)
    std::rethrow_exception(job.error);
}

} // namespace

std::optional<Module> parse_module(std::shared_ptr<const SourceFile> file, DiagEngine &diag) {
  std::optional<Module> module;
  run_on_stack(kParserStack, [&] { module = Parser(std::move(file), diag).run(); });
  return module;
}

} // namespace gradc
