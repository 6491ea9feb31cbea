//===- FileSet.h - writing the files of one command as a set --------------===//
//
// Every file gradc writes (compile's artifacts and --report picture, run's
// outputs, import's .relay and weights directory, dumps) goes through
// write_files_atomic: all of a command's files are replaced together, or none
// is, and concurrent gradc processes commit one whole set after another.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/support/SharedBytes.h"

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gradc {

/// Any failure to read or write a file, with a message for the user.
struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One output of a set that is written together: a file holding `data`, or
/// (is_directory) a directory holding exactly `entries`, each a file whose
/// `path` is a plain file name. A directory replaces whatever directory
/// stood at `path` as a whole: files an earlier set left in it are gone.
struct OutputFile {
  std::string path;
  std::string data;
  /// Bytes written before `data` (an .npy header before a weight's bytes,
  /// which then move into `data` rather than being copied behind it).
  std::string prefix;
  /// Bytes written after `data`: a weight borrowed from the model file.
  SharedBytes tail;
  bool is_directory = false;
  std::vector<OutputFile> entries;

  static OutputFile directory(std::string path, std::vector<OutputFile> entries) {
    return {std::move(path), {}, {}, {}, true, std::move(entries)};
  }
};

/// Writes every output of `files`, or none of them, then removes the files
/// `stale()` names (outputs of an earlier run that this one does not replace).
///
///  1. Checks that each path can be replaced: a file not by a directory, a
///     directory not by a file (a symbolic link is replaced, never followed),
///     no name longer than its directory takes, no path listed twice.
///  2. Writes each file to a new temporary `PATH.tmp.XXXXXX` in its own
///     directory (the name part shortened where it would be too long; each
///     directory to a new temporary directory of that name, its entries
///     inside) and fsyncs it.
///  3. The commit, under an exclusive lock (flock) of every directory it
///     touches, so that concurrent gradc processes commit one whole set after
///     another (two compiles to one -o never leave an object of one beside a
///     header of the other; two imports never mix their weights): asks
///     `stale()`, renames every temporary onto its path (a directory is
///     exchanged with the one it replaces, which is then removed), unlinks
///     the stale files (missing ones are skipped), fsyncs the directories.
///
/// A failure in 1 or 2 removes every temporary, leaves every path and every
/// stale file as it was, and throws FileError naming the output path. SIGINT,
/// SIGTERM, SIGHUP and SIGQUIT (unless ignored) are caught from 2 on: during 2
/// the handler unlinks the temporaries and ends the process by the same
/// signal, with nothing changed; during 3 the signal is held until the whole
/// set is in place. A rename that fails in 3 (the checks of 1 make that an
/// I/O error) throws FileError naming the paths already replaced.
///
/// It never checks what it replaces against what the command reads: callers
/// refuse such outputs first (OutputPaths.h).
///
/// Test-only hook: with GRADC_TEST_COMMIT_DELAY_MS=N in the environment it
/// sleeps N milliseconds between 2 and 3, so that a test can kill gradc while
/// its temporaries exist, and as long after each rename of 3, so that a test
/// can run two commits at once. Nothing else reads it.
void write_files_atomic(const std::vector<OutputFile> &files,
                        const std::function<std::vector<std::string>()> &stale = {});

/// write_files_atomic of one file: on failure `path` keeps what it held and
/// no temporary is left.
void write_file_atomic(const std::string &path, const std::string &data);

/// Unlinks the temporaries of a write_files_atomic in progress, if any, and
/// makes the commit impossible. Async-signal-safe: for fatal-signal handlers
/// (SIGSEGV, ...) that end the process.
void remove_temporary_files() noexcept;

} // namespace gradc
