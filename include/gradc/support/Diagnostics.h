//===- Diagnostics.h - source spans, located errors, internal errors ------===//
//
// Every user-facing error about a model goes through DiagEngine::error, which
// prints `FILE:LINE:COL: error: message`, the source line and a caret under the
// span. Compiler bugs are InternalError (exit code 3) and name the pass.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace gradc {

/// A half-open byte range [begin, end) in the module's source text.
struct Span {
  uint32_t begin = 0;
  uint32_t end = 0;
};

/// The text of one input file, with an index of line starts.
class SourceFile {
public:
  SourceFile(std::string path, std::string text);
  const std::string &path() const { return path_; }
  const std::string &text() const { return text_; }
  /// 1-based line and column of a byte offset.
  std::pair<unsigned, unsigned> line_col(uint32_t offset) const;
  /// The text of the line holding `offset`, without its newline.
  std::string_view line_text(uint32_t offset) const;

private:
  std::string path_;
  std::string text_;
  std::vector<uint32_t> line_starts_;
};

/// Collects and prints located errors. Errors are printed as they are
/// reported; the caller decides when to stop (usually at the end of a pass).
class DiagEngine {
public:
  DiagEngine(std::shared_ptr<const SourceFile> file, std::ostream &out);
  void error(Span span, const std::string &message);
  /// An error with no source location (`gradc: error: ...`).
  void error(const std::string &message);
  void note(Span span, const std::string &message);
  unsigned error_count() const { return errors_; }
  const SourceFile *file() const { return file_.get(); }
  /// Throws CompileError if any error has been reported.
  void check() const;

private:
  void print(Span span, const char *kind, const std::string &message);
  std::shared_ptr<const SourceFile> file_;
  std::ostream &out_;
  unsigned errors_ = 0;
};

/// Thrown after user errors were reported: the driver exits with code 1.
struct CompileError : std::runtime_error {
  CompileError() : std::runtime_error("compilation failed") {}
};

/// A bug in gradc: the driver prints it and exits with code 3.
struct InternalError : std::runtime_error {
  InternalError(const std::string &where, const std::string &what)
      : std::runtime_error("internal error in " + where + ": " + what) {}
};

[[noreturn]] void internal_error(const std::string &where, const std::string &what);

#define GRADC_CHECK(cond, where, msg)                                                                                  \
  do {                                                                                                                 \
    if (!(cond))                                                                                                       \
      ::gradc::internal_error(where, msg);                                                                             \
  } while (0)

} // namespace gradc
