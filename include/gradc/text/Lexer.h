//===- Lexer.h - tokens of the Relay text format --------------------------===//
#pragma once

#include "gradc/support/Diagnostics.h"

#include <string>

namespace gradc {

/// The version of the Relay text format that gradc reads and writes.
inline constexpr char kRelayVersion[] = "0.0.5";

/// The first line of a module in that format: `#[version = "VERSION"]`.
inline std::string relay_version_header() { return std::string("#[version = \"") + kRelayVersion + "\"]"; }

enum class Tok {
  End,
  Local,  // %x, %0 (text without '%')
  Global, // @main (text without '@')
  Ident,  // add, nn, Tensor, float32, def, let, fn, True, ...
  Int,    // 3, 3i64 (suffix in `suffix`)
  Float,  // 1f, 0.5f, 1e-3f, 2f64, 1.5, inff
  String, // "mean" (text unescaped)
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Colon,
  Semi,
  Dot,
  Assign,
  Arrow,
  Question,
  Plus,
  Minus,
  Star,
  Slash,
  Lt,
  Le,
  Gt,
  Ge,
  EqEq,
  Ne,
  HashBracket, // #[
};
const char *tok_name(Tok kind);

/// A numeric token carries the magnitude of the literal as written (a
/// leading '-' is a separate token): whether the value fits its dtype depends
/// on that sign, so the parser decides it (literal_value in Parser.cpp).
struct Token {
  Tok kind;
  Span span;
  std::string text;       // identifier, name or unescaped string
  std::string suffix;     // numeric literal suffix: "", "f", "f16", "f32", "f64", "i32", "i64"
  double fvalue = 0;      // Float: the value rounded to double (inf for `inff` or beyond double's range)
                          // Int: the value as a double
  int64_t ivalue = 0;     // Int: the value, saturated at INT64_MAX
  uint64_t magnitude = 0; // Int: the exact value
  bool too_large = false; // Int: beyond 2^64 - 1
  bool nonzero = false;   // Float: the digits are not all zero (0 in fvalue then means underflow)
};

/// Splits a file into tokens on demand: the parser pulls them one at a time,
/// so memory does not grow with the number of tokens (an attribute list of
/// millions of entries costs its values, not a Token each). Skips whitespace,
/// `// line` comments and nested `/* block */` comments; a line comment ends
/// at LF, CRLF or a lone CR. On a lexical error, reports it, returns End from
/// then on and failed() is true (the parser stops there).
class Lexer {
public:
  Lexer(const SourceFile &file, DiagEngine &diag) : src_(file.text()), diag_(diag) {}
  Token next();
  bool failed() const { return failed_; }

private:
  const std::string &src_;
  DiagEngine &diag_;
  size_t pos_ = 0;
  bool failed_ = false;

  char peek(size_t k = 0) const { return pos_ + k < src_.size() ? src_[pos_ + k] : '\0'; }
  void error(size_t begin, size_t end, const std::string &msg);
  bool skip_space_and_comments();
  bool token(Token &t);
  bool number(Token &t);
  bool string(Token &t);
};

} // namespace gradc
