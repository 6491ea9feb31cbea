//===- Lexer.cpp - tokenizer for the Relay text format --------------------===//
//
// First stage of the front end: the parser pulls one token at a time. Linear
// in the input size, iterative (no recursion), so nested comments or a 1 GB
// line cannot overflow the stack.
//
//===----------------------------------------------------------------------===//
#include "gradc/text/Lexer.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace gradc {

const char *tok_name(Tok kind) {
  switch (kind) {
  case Tok::End:
    return "end of file";
  case Tok::Local:
    return "local variable";
  case Tok::Global:
    return "global name";
  case Tok::Ident:
    return "identifier";
  case Tok::Int:
    return "integer";
  case Tok::Float:
    return "float";
  case Tok::String:
    return "string";
  case Tok::LParen:
    return "'('";
  case Tok::RParen:
    return "')'";
  case Tok::LBracket:
    return "'['";
  case Tok::RBracket:
    return "']'";
  case Tok::LBrace:
    return "'{'";
  case Tok::RBrace:
    return "'}'";
  case Tok::Comma:
    return "','";
  case Tok::Colon:
    return "':'";
  case Tok::Semi:
    return "';'";
  case Tok::Dot:
    return "'.'";
  case Tok::Assign:
    return "'='";
  case Tok::Arrow:
    return "'->'";
  case Tok::Question:
    return "'?'";
  case Tok::Plus:
    return "'+'";
  case Tok::Minus:
    return "'-'";
  case Tok::Star:
    return "'*'";
  case Tok::Slash:
    return "'/'";
  case Tok::Lt:
    return "'<'";
  case Tok::Le:
    return "'<='";
  case Tok::Gt:
    return "'>'";
  case Tok::Ge:
    return "'>='";
  case Tok::EqEq:
    return "'=='";
  case Tok::Ne:
    return "'!='";
  case Tok::HashBracket:
    return "'#['";
  }
  return "?";
}

namespace {

bool is_ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
bool is_ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

} // namespace

Token Lexer::next() {
  Token t;
  if (!failed_ && skip_space_and_comments() && pos_ < src_.size() && token(t))
    return t;
  t = Token{};
  t.kind = Tok::End;
  t.span = {uint32_t(pos_), uint32_t(pos_)};
  return t;
}

void Lexer::error(size_t begin, size_t end, const std::string &msg) {
  failed_ = true;
  diag_.error({uint32_t(begin), uint32_t(end)}, msg);
}

bool Lexer::skip_space_and_comments() {
  while (pos_ < src_.size()) {
    char c = src_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (c == '/' && peek(1) == '/') {
      while (pos_ < src_.size() && src_[pos_] != '\n' && src_[pos_] != '\r')
        ++pos_;
    } else if (c == '/' && peek(1) == '*') {
      size_t start = pos_;
      int depth = 0;
      do {
        if (peek() == '/' && peek(1) == '*') {
          ++depth;
          pos_ += 2;
        } else if (peek() == '*' && peek(1) == '/') {
          --depth;
          pos_ += 2;
        } else {
          ++pos_;
        }
      } while (depth > 0 && pos_ < src_.size());
      if (depth > 0) {
        error(start, start + 2, "unterminated block comment");
        return false;
      }
    } else {
      return true;
    }
  }
  return true;
}

bool Lexer::token(Token &t) {
  size_t start = pos_;
  char c = src_[pos_];
  auto single = [&](Tok kind, size_t len) {
    t.kind = kind;
    pos_ += len;
    t.span = {uint32_t(start), uint32_t(pos_)};
    return true;
  };
  if (c == '%' || c == '@') {
    ++pos_;
    while (pos_ < src_.size() && is_ident_char(src_[pos_]))
      ++pos_;
    if (pos_ == start + 1) {
      error(start, start + 1, std::string("expected a name after '") + c + "'");
      return false;
    }
    t.kind = c == '%' ? Tok::Local : Tok::Global;
    t.text = src_.substr(start + 1, pos_ - start - 1);
    t.span = {uint32_t(start), uint32_t(pos_)};
    return true;
  }
  if (is_ident_start(c)) {
    while (pos_ < src_.size() && is_ident_char(src_[pos_]))
      ++pos_;
    t.kind = Tok::Ident;
    t.text = src_.substr(start, pos_ - start);
    t.span = {uint32_t(start), uint32_t(pos_)};
    // TVM's infinity literal `inff` (float32); `inff16` and `inff64` are
    // gradc's spelling for the other widths, and `nanf`, `nanf16`, `nanf32`,
    // `nanf64` its not-a-number, so every constant prints back (`-inff` is
    // the negation of `inff`, as `-2f` is of `2f`).
    for (const char *word : {"inf", "nan"}) {
      std::string rest = t.text.substr(0, 3) == word ? t.text.substr(3) : "";
      if (rest == "f" || rest == "f16" || rest == "f32" || rest == "f64") {
        t.kind = Tok::Float;
        t.suffix = rest;
        t.text = word;
        t.fvalue = t.text == "inf" ? HUGE_VAL : NAN;
        t.nonzero = true;
        break;
      }
    }
    return true;
  }
  if (isdigit((unsigned char)c))
    return number(t);
  if (c == '"')
    return string(t);
  switch (c) {
  case '(':
    return single(Tok::LParen, 1);
  case ')':
    return single(Tok::RParen, 1);
  case '[':
    return single(Tok::LBracket, 1);
  case ']':
    return single(Tok::RBracket, 1);
  case '{':
    return single(Tok::LBrace, 1);
  case '}':
    return single(Tok::RBrace, 1);
  case ',':
    return single(Tok::Comma, 1);
  case ':':
    return single(Tok::Colon, 1);
  case ';':
    return single(Tok::Semi, 1);
  case '.':
    return single(Tok::Dot, 1);
  case '?':
    return single(Tok::Question, 1);
  case '+':
    return single(Tok::Plus, 1);
  case '*':
    return single(Tok::Star, 1);
  case '/':
    return single(Tok::Slash, 1);
  case '-':
    return peek(1) == '>' ? single(Tok::Arrow, 2) : single(Tok::Minus, 1);
  case '=':
    return peek(1) == '=' ? single(Tok::EqEq, 2) : single(Tok::Assign, 1);
  case '<':
    return peek(1) == '=' ? single(Tok::Le, 2) : single(Tok::Lt, 1);
  case '>':
    return peek(1) == '=' ? single(Tok::Ge, 2) : single(Tok::Gt, 1);
  case '!':
    if (peek(1) == '=')
      return single(Tok::Ne, 2);
    break;
  case '#':
    if (peek(1) == '[')
      return single(Tok::HashBracket, 2);
    break;
  }
  if ((unsigned char)c >= 32 && (unsigned char)c < 127)
    error(start, start + 1, std::string("unexpected character '") + c + "'");
  else {
    char buf[8];
    snprintf(buf, sizeof buf, "0x%02x", (unsigned char)c);
    error(start, start + 1, std::string("unexpected byte ") + buf);
  }
  return false;
}

// number := digits ('.' digits?)? ([eE] [+-]? digits)? suffix?
// suffix := 'f' | 'f16' | 'f32' | 'f64' | 'i32' | 'i64'
// As in TVM, a number with an 'f' suffix is a float (`2f64`), one with an
// 'i' suffix an integer; `1.` needs a suffix or an exponent (`1.f`, `1.e3f`),
// else the '.' is a tuple projection. Without a suffix, a fraction or an
// exponent makes a float32 (SPEC §3: `1.5`), else an integer. Whether the
// value fits its dtype is decided by the parser, which knows the sign.
bool Lexer::number(Token &t) {
  size_t start = pos_;
  bool is_float = false;
  auto exponent_at = [&](size_t k) {
    return (peek(k) == 'e' || peek(k) == 'E') &&
           (isdigit((unsigned char)peek(k + 1)) ||
            ((peek(k + 1) == '-' || peek(k + 1) == '+') && isdigit((unsigned char)peek(k + 2))));
  };
  while (isdigit((unsigned char)peek()))
    ++pos_;
  size_t mantissa_end = pos_;
  if (peek() == '.' && (isdigit((unsigned char)peek(1)) || peek(1) == 'f' || exponent_at(1))) {
    is_float = true;
    ++pos_;
    while (isdigit((unsigned char)peek()))
      ++pos_;
    mantissa_end = pos_;
  }
  if (exponent_at(0)) {
    is_float = true;
    pos_ += 2;
    while (isdigit((unsigned char)peek()))
      ++pos_;
  }
  std::string digits = src_.substr(start, pos_ - start);
  size_t suffix_start = pos_;
  while (is_ident_char(peek()))
    ++pos_;
  t.suffix = src_.substr(suffix_start, pos_ - suffix_start);
  t.span = {uint32_t(start), uint32_t(pos_)};
  const std::string &s = t.suffix;
  if (s == "f" || s == "f16" || s == "f32" || s == "f64")
    is_float = true;
  else if (s == "i32" || s == "i64") {
    if (is_float) {
      error(start, pos_, "integer suffix '" + s + "' on a floating-point literal");
      return false;
    }
  } else if (!s.empty()) {
    if (digits == "0" && (s[0] == 'x' || s[0] == 'X'))
      error(start, pos_, "hexadecimal literals are not supported (write the value in decimal)");
    else
      error(start, pos_, "unknown literal suffix '" + s + "' (expected f, f16, f32, f64, i32 or i64)");
    return false;
  }
  errno = 0;
  if (is_float) {
    t.kind = Tok::Float;
    t.fvalue = strtod(digits.c_str(), nullptr); // HUGE_VAL beyond double, 0 below its subnormals
    for (size_t k = start; k < mantissa_end; ++k)
      t.nonzero |= src_[k] >= '1' && src_[k] <= '9';
  } else {
    t.kind = Tok::Int;
    t.magnitude = strtoull(digits.c_str(), nullptr, 10);
    t.too_large = errno == ERANGE;
    t.ivalue = t.magnitude > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(t.magnitude);
    t.fvalue = double(t.magnitude);
  }
  return true;
}

bool Lexer::string(Token &t) {
  size_t start = pos_++;
  std::string out;
  while (pos_ < src_.size() && src_[pos_] != '"' && src_[pos_] != '\n' && src_[pos_] != '\r') {
    if (src_[pos_] == '\\' && pos_ + 1 < src_.size())
      ++pos_;
    out += src_[pos_++];
  }
  if (pos_ >= src_.size() || src_[pos_] != '"') {
    error(start, start + 1, "unterminated string literal");
    return false;
  }
  ++pos_;
  t.kind = Tok::String;
  t.text = std::move(out);
  t.span = {uint32_t(start), uint32_t(pos_)};
  return true;
}

} // namespace gradc
