//===- OutputPaths.h - where a command may write --------------------------===//
//
// The checks every command that writes files makes before it computes
// anything: the output base names a file in a directory that exists, and no
// output replaces or removes a file the command reads (the model, an input
// array), whatever name, link or symbolic link leads to it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace gradc {

/// A file the command reads, as the user named it.
struct ReadFile {
  const char *role; // "model", "input"
  std::string path;
};

/// True if `a` and `b` name one file: the same inode (through any name,
/// link or symlink) or, where either does not exist, the same path once `.`,
/// `..` and symlinks are resolved.
bool same_file(const std::string &a, const std::string &b);

/// `-o BASE` is the common stem of the files written, so it must end in a
/// file name: `-o .` would write `..o`, `-o out/` a hidden `out/.o`. Like
/// `cc -o DIR`, a base that can only name a directory is an error (exit 2,
/// after printing it), not a guess. `-o out` beside a directory `out/` is
/// fine: it writes out.o, out.h, ... `example` says what `-o out/model`
/// writes.
bool check_output_base(const std::string &base, const std::string &example, std::ostream &err);

/// The directory BASE's files go to exists (exit 1 after printing the
/// error otherwise). Nothing creates it: a mistyped -o is not a new folder.
bool check_output_dir(const std::string &base, std::ostream &err);

/// Prints the error and returns true if writing `output` would replace a
/// file of `reads` (same_file). A `directory` output (written whole, FileSet.h) also
/// replaces every file under the directory standing there. `advice` says
/// what to do instead ("choose another -o").
bool refuse_overwriting(const std::string &output, bool directory, const std::vector<ReadFile> &reads,
                        const char *advice, std::ostream &err);

} // namespace gradc
