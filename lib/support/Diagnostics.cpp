//===- Diagnostics.cpp - located error printing ---------------------------===//
//
// Formats `FILE:LINE:COL: error: message` with the source line and a caret
// line under the span (SPEC §2). What is printed stays short whatever the
// input: a long source line is shown as a window around the caret, and a
// message that echoes a huge value (an attribute list of millions of
// entries) keeps its head and tail.
//
//===----------------------------------------------------------------------===//
#include "gradc/support/Diagnostics.h"

#include <algorithm>
#include <new>

namespace gradc {

namespace {

/// Columns of a source line shown around the caret.
constexpr size_t kLineWindow = 200;
/// The longest message printed whole.
constexpr size_t kMaxMessage = 512;

/// Said after every internal error but running out of memory.
constexpr std::string_view kBugNote = " (this is a bug in gradc)";

/// `gradc: KIND: MESSAGE`: a diagnostic with no source location.
void print_unlocated(std::ostream &out, std::string_view kind, const std::string &message) {
  out << "gradc: " << kind << ": " << message << "\n";
}

/// `message`, or its head and tail around " ... " when it is longer than
/// kMaxMessage (cut between UTF-8 characters).
std::string shorten(const std::string &message) {
  if (message.size() <= kMaxMessage)
    return message;
  auto boundary = [&](size_t i) {
    while (i > 0 && (message[i] & 0xC0) == 0x80)
      --i;
    return i;
  };
  size_t head = boundary(kMaxMessage * 2 / 3), tail = boundary(message.size() - kMaxMessage / 3);
  return message.substr(0, head) + " ... " + message.substr(tail);
}

} // namespace

SourceFile::SourceFile(std::string path, std::string text) : path_(std::move(path)), text_(std::move(text)) {
  // A line ends at LF, CRLF or a lone CR (classic Mac files).
  line_starts_.push_back(0);
  for (uint32_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n' || (text_[i] == '\r' && (i + 1 == text_.size() || text_[i + 1] != '\n')))
      line_starts_.push_back(i + 1);
}

std::pair<unsigned, unsigned> SourceFile::line_col(uint32_t offset) const {
  offset = std::min<uint32_t>(offset, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  unsigned line = unsigned(it - line_starts_.begin());
  return {line, offset - line_starts_[line - 1] + 1};
}

std::string_view SourceFile::line_text(uint32_t offset) const {
  auto [line, col] = line_col(offset);
  uint32_t begin = line_starts_[line - 1];
  uint32_t end = begin;
  while (end < text_.size() && text_[end] != '\n' && text_[end] != '\r')
    ++end;
  return std::string_view(text_).substr(begin, end - begin);
}

DiagEngine::DiagEngine(std::shared_ptr<const SourceFile> file, std::ostream &out) : file_(std::move(file)), out_(out) {}

void DiagEngine::error(Span span, const std::string &message) {
  ++errors_;
  print(span, "error", message);
}

void DiagEngine::error(const std::string &message) {
  ++errors_;
  print_error(out_, shorten(message));
}

void DiagEngine::note(Span span, const std::string &message) { print(span, "note", message); }

void DiagEngine::print(Span span, const char *kind, const std::string &message) {
  if (!file_) {
    print_unlocated(out_, kind, shorten(message));
    return;
  }
  auto [line, col] = file_->line_col(span.begin);
  out_ << file_->path() << ":" << line << ":" << col << ": " << kind << ": " << shorten(message) << "\n";
  std::string_view text = file_->line_text(span.begin);
  // A long line is shown as kLineWindow columns around the caret, "..."
  // marking each end that is cut, so a 1 GB line stays usable.
  const size_t window = kLineWindow;
  size_t start = 0;
  if (col > window)
    start = col - window / 2;
  std::string_view shown = text.substr(std::min(start, text.size()), window);
  std::string line_out;
  for (char c : shown)
    line_out += (c == '\t' || (unsigned char)c >= 32) ? c : ' ';
  bool cut_end = std::min(start, text.size()) + shown.size() < text.size();
  out_ << (start ? "..." : "") << line_out << (cut_end ? "..." : "") << "\n";
  std::string caret(start ? 3 : 0, ' ');
  for (size_t i = start; i + 1 < col && i - start < shown.size(); ++i)
    caret += (shown[i - start] == '\t') ? '\t' : ' ';
  caret += '^';
  uint32_t line_end = span.begin - (col - 1) + uint32_t(text.size());
  uint32_t end = std::min(span.end, line_end);
  for (uint32_t i = span.begin + 1; i < end && caret.size() < window + 4; ++i)
    caret += '~';
  out_ << caret << "\n";
}

void DiagEngine::check() const {
  if (errors_)
    throw CompileError();
}

void internal_error(const std::string &where, const std::string &what) { throw InternalError(where, what); }

void print_error(std::ostream &out, const std::string &message) { print_unlocated(out, "error", message); }

void print_internal_error(std::ostream &out, const std::exception &e) {
  if (dynamic_cast<const InternalError *>(&e)) // what(): "internal error in WHERE: WHAT"
    out << "gradc: " << e.what() << kBugNote << "\n";
  else
    print_unlocated(out, "internal error", e.what() + std::string(kBugNote));
}

const std::string_view kFatalSignalLine = "gradc: internal error: fatal signal (this is a bug in gradc)\n";

} // namespace gradc
