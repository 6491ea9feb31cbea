//===- Diagnostics.h - source spans, located errors, internal errors ------===//
//
// Every user-facing error about a model goes through DiagEngine::error, which
// prints `FILE:LINE:COL: error: message`, the source line and a caret under the
// span; an error with no location (the command line, a file that cannot be
// read) goes through print_error. Compiler bugs are InternalError (exit code
// 3) and name the pass; main prints them with print_internal_error.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gradc {

/// A half-open byte range [begin, end) in the module's source text.
struct Span {
  uint32_t begin = 0;
  uint32_t end = 0;
  bool valid() const { return end != 0; } // {0, 0}: no source (a value a pass built)
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
  /// An error with no source location (print_error).
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

/// `gradc: error: MESSAGE` on a line of its own: a user error with no source
/// location. The caller picks the exit code (1 the model or an input, 2 the
/// command line).
void print_error(std::ostream &out, const std::string &message);

/// What main prints for an exception that reaches it (exit code 3): `gradc:
/// internal error in WHERE: WHAT (this is a bug in gradc)` for an
/// InternalError, `gradc: internal error: out of memory` for std::bad_alloc,
/// `gradc: internal error: WHAT (this is a bug in gradc)` for any other.
void print_internal_error(std::ostream &out, const std::exception &e);

/// print_internal_error's line for a fatal signal, for a signal handler to
/// write(2) as it is (it may not format or allocate).
extern const std::string_view kFatalSignalLine;

#define GRADC_CHECK(cond, where, msg)                                                                                  \
  do {                                                                                                                 \
    if (!(cond))                                                                                                       \
      ::gradc::internal_error(where, msg);                                                                             \
  } while (0)

} // namespace gradc
