//===- OutputPaths.cpp - where a command may write ------------------------===//
//
// The checks of OutputPaths.h: compile, run and import make them before
// they compute anything, so that a refused output costs nothing and nothing
// a command reads is ever lost to what it writes.
//
//===----------------------------------------------------------------------===//
#include "gradc/driver/OutputPaths.h"
#include "gradc/support/Diagnostics.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sys/stat.h>

namespace gradc {

bool same_file(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  bool have_a = ::stat(a.c_str(), &sa) == 0, have_b = ::stat(b.c_str(), &sb) == 0;
  if (have_a && have_b)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  std::error_code ec1, ec2;
  std::filesystem::path pa = std::filesystem::weakly_canonical(std::filesystem::absolute(a), ec1);
  std::filesystem::path pb = std::filesystem::weakly_canonical(std::filesystem::absolute(b), ec2);
  return !ec1 && !ec2 && pa == pb;
}

namespace {

/// The file under the directory `dir` (not through a symbolic link: the
/// directory is replaced, what a link points at stays) that is `read`, if
/// any.
std::optional<std::string> file_under(const std::string &dir, const std::string &read) {
  struct stat sd, sr;
  if (::lstat(dir.c_str(), &sd) != 0 || !S_ISDIR(sd.st_mode) || ::stat(read.c_str(), &sr) != 0)
    return std::nullopt;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0 && st.st_dev == sr.st_dev && st.st_ino == sr.st_ino)
      return it->path().string();
  }
  return std::nullopt;
}

} // namespace

bool check_output_base(const std::string &base, const std::string &example, std::ostream &err) {
  std::string name = std::filesystem::path(base).filename().string();
  if (name.empty() || name == "." || name == "..") {
    print_error(err,
                "-o '" + base + "' names a directory; -o takes a base name for the files it writes (" + example + ")");
    return false;
  }
  return true;
}

bool check_output_dir(const std::string &base, std::ostream &err) {
  std::filesystem::path dir = std::filesystem::path(base).parent_path();
  if (dir.empty())
    return true;
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return true;
  int e = errno;
  const char *why = std::strerror(::stat(dir.c_str(), &st) == 0 ? ENOTDIR : e);
  print_error(err, "cannot write '" + base + ".*': " + dir.string() + ": " + why);
  return false;
}

bool refuse_overwriting(const std::string &output, bool directory, const std::vector<ReadFile> &reads,
                        const char *advice, std::ostream &err) {
  for (const ReadFile &read : reads) {
    std::string role = read.role;
    if (same_file(output, read.path)) {
      print_error(err, "the output '" + output + "' is the " + role + " '" + read.path + "' itself; " + advice +
                           " (the " + role + " is left as it is)");
      return true;
    }
    if (std::optional<std::string> under = directory ? file_under(output, read.path) : std::nullopt) {
      print_error(err, "the output directory '" + output + "' is replaced as a whole, and '" + *under +
                           "' in it is the " + role + " '" + read.path + "'; " + advice + " (the " + role +
                           " is left as it is)");
      return true;
    }
  }
  return false;
}

} // namespace gradc
