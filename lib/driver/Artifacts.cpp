//===- Artifacts.cpp - the C header, the JSON manifest, atomic writes -----===//
//
// What `gradc compile` writes next to the object file (SPEC §8): the header a
// C program includes to call the compiled functions, and the manifest a tool
// reads to learn the same facts. Both are built from the lowered module.
//
//===----------------------------------------------------------------------===//
#include "gradc/driver/Artifacts.h"
#include "gradc/lower/Passes.h"
#include "gradc/support/Diagnostics.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace gradc {

namespace {

// ------------------------------------------------ a set of files, atomically
//
// What a signal handler needs to know of the set being written lives in
// lock-free atomics. g_state goes kIdle -> kWriting (temporaries being made)
// -> kClosing (renamed into place, or discarded) -> kIdle; a signal that
// arrives first moves it kWriting -> kDying instead. The writer and the
// handler (which may run in any thread) both move it by compare-and-swap, so
// exactly one of them decides between commit and discard.

enum State : int { kIdle, kWriting, kClosing, kDying };
std::atomic<int> g_state{kIdle};
/// A signal that arrived while the set was closing; raised once it is closed.
std::atomic<int> g_held_signal{0};
/// The temporaries' names, one slot per file; a name is published before the
/// file is created and withdrawn only if it was not created.
std::atomic<std::atomic<const char *> *> g_slots{nullptr};
std::atomic<size_t> g_slot_count{0};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<const char *>::is_always_lock_free &&
                  std::atomic<size_t>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

/// The signals that interrupt a write: the ones a user or a supervisor sends.
constexpr int kCaughtSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

void unlink_temporaries() noexcept {
  std::atomic<const char *> *slots = g_slots.load();
  size_t n = g_slot_count.load();
  for (size_t i = 0; slots && i < n; ++i)
    if (const char *name = slots[i].load())
      ::unlink(name);
}

/// Ends the process by `sig` with its default action (async-signal-safe).
[[noreturn]] void die_by(int sig) noexcept {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);
}

extern "C" void on_interrupt_while_writing(int sig) {
  int saved_errno = errno;
  int expected = kWriting;
  if (g_state.compare_exchange_strong(expected, kDying)) {
    unlink_temporaries();
    die_by(sig);
  }
  if (expected == kIdle)
    die_by(sig);
  if (expected == kClosing)
    g_held_signal.store(sig); // raised by the writer once every file is in place
  // kDying: another thread is removing the temporaries and ending the process.
  errno = saved_errno;
}

/// Installs the handler for the caught signals that are not ignored (a
/// process started with SIGINT ignored, under nohup or in the background,
/// keeps ignoring it), and puts the old dispositions back.
class InterruptHandlers {
public:
  InterruptHandlers() {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt_while_writing;
    sigemptyset(&sa.sa_mask);
    for (int sig : kCaughtSignals)
      sigaddset(&sa.sa_mask, sig);
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < std::size(kCaughtSignals); ++i) {
      installed_[i] = ::sigaction(kCaughtSignals[i], nullptr, &old_[i]) == 0 && old_[i].sa_handler != SIG_IGN &&
                      ::sigaction(kCaughtSignals[i], &sa, nullptr) == 0;
    }
  }
  InterruptHandlers(const InterruptHandlers &) = delete;
  InterruptHandlers &operator=(const InterruptHandlers &) = delete;
  void restore() {
    for (size_t i = 0; i < std::size(kCaughtSignals); ++i)
      if (installed_[i])
        ::sigaction(kCaughtSignals[i], &old_[i], nullptr);
    std::fill(std::begin(installed_), std::end(installed_), false);
  }
  ~InterruptHandlers() { restore(); }

private:
  struct sigaction old_[std::size(kCaughtSignals)] {};
  bool installed_[std::size(kCaughtSignals)] = {};
};

/// `PATH.tmp.XXXXXX` with six random letters and digits.
std::string temporary_name(const std::string &path) {
  static uint64_t state = [] {
    uint64_t seed = uint64_t(::getpid()) << 32 ^ uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    try {
      seed ^= uint64_t(std::random_device{}()) << 16;
    } catch (...) {
    }
    return seed;
  }();
  // splitmix64
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string name = path + ".tmp.";
  for (int i = 0; i < 6; ++i, z /= 62)
    name += alphabet[z % 62];
  return name;
}

std::string cannot_write(const std::string &path, int err) {
  return "cannot write '" + path + "': " + std::strerror(err);
}

/// The directory a path's directory entry lives in.
std::string parent_dir(const std::string &path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

void test_commit_delay();

/// Exclusive flock()s of directories, taken in sorted order (so that two
/// processes never wait for each other crosswise) and released together.
/// A file system without flock on directories commits unlocked, as before.
class DirectoryLocks {
public:
  explicit DirectoryLocks(const std::set<std::string> &dirs) {
    for (const std::string &dir : dirs) {
      int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0)
        continue;
      while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
      }
      fds_.push_back(fd);
    }
  }
  DirectoryLocks(const DirectoryLocks &) = delete;
  DirectoryLocks &operator=(const DirectoryLocks &) = delete;
  ~DirectoryLocks() {
    for (int fd : fds_)
      ::close(fd); // closing the last descriptor releases its lock
  }

private:
  std::vector<int> fds_;
};

/// The temporaries of one write_files_atomic, from creation to commit or
/// discard. Only one set is open at a time (gradc writes from one thread).
class TemporarySet {
public:
  explicit TemporarySet(size_t n) : slots_(new std::atomic<const char *>[n]), count_(n) {
    for (size_t i = 0; i < n; ++i)
      slots_[i].store(nullptr);
    int expected = kIdle;
    GRADC_CHECK(g_state.compare_exchange_strong(expected, kWriting), "write_files_atomic",
                "another set of files is being written");
    g_slots.store(slots_.get());
    g_slot_count.store(n);
    handlers_.emplace();
  }
  TemporarySet(const TemporarySet &) = delete;
  TemporarySet &operator=(const TemporarySet &) = delete;
  ~TemporarySet() {
    if (open_)
      discard();
  }

  /// Writes `data` to a new temporary for slot `i` and fsyncs it.
  void write(size_t i, const std::string &target, const std::string &data) {
    int fd = -1;
    for (int attempt = 0; fd < 0; ++attempt) {
      names_.push_back(temporary_name(target));
      slots_[i].store(names_.back().c_str());
      fd = ::open(names_.back().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd < 0) {
        int err = errno;
        slots_[i].store(nullptr);
        if (err != EEXIST || attempt == 100)
          throw FileError(cannot_write(target, err));
      }
    }
    auto fail = [&](int err) {
      ::close(fd);
      throw FileError(cannot_write(target, err));
    };
    for (size_t done = 0; done < data.size();) {
      ssize_t n = ::write(fd, data.data() + done, std::min<size_t>(data.size() - done, size_t(1) << 30));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        fail(errno);
      done += size_t(n);
    }
    while (::fsync(fd) != 0)
      if (errno != EINTR)
        fail(errno);
    if (::close(fd) != 0 && errno != EINTR)
      throw FileError(cannot_write(target, errno));
  }

  /// Renames every temporary onto its file, then unlinks what `stale`
  /// names, holding the lock of every directory touched. A signal that
  /// arrives meanwhile is held until the end.
  void commit(const std::vector<OutputFile> &files, const std::function<std::vector<std::string>()> &stale_of) {
    close_set();
    std::set<std::string> locked;
    for (const OutputFile &f : files)
      locked.insert(parent_dir(f.path));
    DirectoryLocks locks(locked);
    std::vector<std::string> stale = stale_of ? stale_of() : std::vector<std::string>{};
    std::set<std::string> dirs;
    std::vector<std::string> replaced;
    std::string error;
    for (size_t i = 0; i < count_ && error.empty(); ++i) {
      if (::rename(slots_[i].load(), files[i].path.c_str()) != 0) {
        error = cannot_write(files[i].path, errno);
        break;
      }
      slots_[i].store(nullptr);
      replaced.push_back(files[i].path);
      dirs.insert(parent_dir(files[i].path));
      test_commit_delay();
    }
    if (!error.empty()) {
      unlink_temporaries();
      if (!replaced.empty()) {
        error += " (already replaced:";
        for (const std::string &r : replaced)
          error += " '" + r + "'";
        error += ")";
      }
    }
    for (size_t i = 0; i < stale.size() && error.empty(); ++i) {
      if (::unlink(stale[i].c_str()) != 0 && errno != ENOENT)
        error = "wrote every output but cannot remove '" + stale[i] + "' of an earlier run: " + std::strerror(errno);
      dirs.insert(parent_dir(stale[i]));
    }
    // Make the renames durable; a file system that cannot sync a directory
    // has nothing to gain from it, so failures here are ignored.
    for (const std::string &dir : dirs) {
      int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
      }
    }
    finish();
    if (!error.empty())
      throw FileError(error);
  }

  /// Unlinks every temporary; the files keep what they held.
  void discard() noexcept {
    close_set();
    unlink_temporaries();
    finish();
  }

private:
  /// Takes the set from the signal handler, or waits for the handler that
  /// got it first to end the process.
  void close_set() noexcept {
    int expected = kWriting;
    if (!g_state.compare_exchange_strong(expected, kClosing))
      for (;;)
        ::pause();
  }

  void finish() noexcept {
    handlers_.reset();
    g_slots.store(nullptr);
    g_slot_count.store(0);
    g_state.store(kIdle);
    open_ = false;
    if (int sig = g_held_signal.exchange(0))
      ::raise(sig);
  }

  std::unique_ptr<std::atomic<const char *>[]> slots_;
  size_t count_;
  std::deque<std::string> names_; // every name tried; a deque never moves its strings
  std::optional<InterruptHandlers> handlers_;
  bool open_ = true;
};

/// The test-only pause between writing the temporaries and the commit.
void test_commit_delay() {
  const char *ms = std::getenv("GRADC_TEST_COMMIT_DELAY_MS");
  if (!ms || !*ms)
    return;
  long n = std::strtol(ms, nullptr, 10);
  if (n > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(n));
}

} // namespace

void write_files_atomic(const std::vector<OutputFile> &files,
                        const std::function<std::vector<std::string>()> &stale) {
  // 1. Every path can be replaced: the renames of the commit cannot fail for
  //    a reason known in advance.
  std::set<std::string> seen;
  for (const OutputFile &f : files) {
    GRADC_CHECK(seen.insert(std::filesystem::path(f.path).lexically_normal().string()).second, "write_files_atomic",
                "'" + f.path + "' is listed twice");
    struct stat st;
    if (::lstat(f.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      throw FileError(cannot_write(f.path, EISDIR));
  }
  // 2. Every temporary, written and synced.
  TemporarySet set(files.size());
  for (size_t i = 0; i < files.size(); ++i)
    set.write(i, files[i].path, files[i].data);
  test_commit_delay();
  // 3. The commit.
  set.commit(files, stale);
}

void write_file_atomic(const std::string &path, const std::string &data) { write_files_atomic({{path, data}}); }

void remove_temporary_files() noexcept {
  int expected = kWriting;
  if (g_state.compare_exchange_strong(expected, kDying))
    unlink_temporaries();
}

namespace {

/// The C type that carries one element of `dt` across the ABI.
const char *c_element_type(DType dt) { return dtype_info(dt).c_type; }

std::string upper(std::string s) {
  for (char &c : s)
    c = char(std::toupper((unsigned char)c));
  return s;
}

bool is_c_identifier(const std::string &s) {
  if (s.empty() || std::isdigit((unsigned char)s[0]))
    return false;
  for (char c : s)
    if (!std::isalnum((unsigned char)c) && c != '_')
      return false;
  return true;
}

/// Names a struct field cannot have: C and C++ keywords, macros, and the type
/// names the header uses (in C++ a member named `int64_t` breaks the
/// declarations that follow it).
bool is_reserved_word(const std::string &s) {
  // clang-format off
  static const std::set<std::string> words = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
      "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
      "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
      "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
      "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
      "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
      "reinterpret_cast", "requires", "restrict", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "typeof", "union", "unsigned",
      "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq", "int8_t",
      "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t",
      "NULL", "CUstream",
      "linux", "unix", "i386"}; // macros in the GNU dialects of C
  // clang-format on
  return words.count(s) > 0;
}

/// Names that a C library header included before ours may define as an
/// object-like macro, which would turn a struct field into a number: every
/// macro of <stdint.h> and <inttypes.h> (INT32_MAX, SIZE_WIDTH, INT64_C,
/// PRId64), <stddef.h> (NULL), <limits.h>, <float.h>, <math.h> (NAN,
/// HUGE_VAL, POSIX's M_PI), <errno.h> (errno, EDOM: C reserves E[0-9A-Z]*),
/// <stdio.h>, <stdlib.h>, <signal.h>, <locale.h>, <time.h>, <fenv.h>,
/// <stdatomic.h>, <threads.h>, <wchar.h>, <complex.h> (I, complex) and
/// <stdnoreturn.h>, as of C23 and POSIX.1-2017; and the type names of
/// <stdint.h> and <stddef.h>.
bool is_library_name(const std::string &s) {
  // clang-format off
  static const std::set<std::string> names = {
      "NULL", "offsetof", "errno", "stdin", "stdout", "stderr", "EOF", "BUFSIZ", "FILENAME_MAX",
      "FOPEN_MAX", "L_tmpnam", "TMP_MAX", "P_tmpdir", "L_ctermid", "EXIT_SUCCESS", "EXIT_FAILURE",
      "RAND_MAX", "MB_CUR_MAX", "MB_LEN_MAX", "CHAR_BIT", "BOOL_WIDTH", "BOOL_MAX", "BITINT_MAXWIDTH",
      "PATH_MAX", "NAME_MAX", "PIPE_BUF", "DECIMAL_DIG", "NAN", "INFINITY", "MATH_ERRNO",
      "MATH_ERREXCEPT", "math_errhandling", "CLOCKS_PER_SEC", "ONCE_FLAG_INIT", "TSS_DTOR_ITERATIONS",
      "WEOF", "I", "complex", "imaginary", "noreturn", "unreachable", "assert"};
  static const std::regex patterns(
      "U?INT(_LEAST|_FAST)?(8|16|32|64)_(MIN|MAX|WIDTH|C)"
      "|U?INT(PTR|MAX)_(MIN|MAX|WIDTH|C)"
      "|(PTRDIFF|SIG_ATOMIC|SIZE|SSIZE|RSIZE|WCHAR|WINT)_(MIN|MAX|WIDTH)"
      "|(PRI|SCN)[diouxXb].*"
      "|U?(CHAR|SCHAR|SHRT|INT|LONG|LLONG)_(MIN|MAX|WIDTH)"
      "|(FLT|DBL|LDBL)_[A-Z0-9_]+"
      "|HUGE_VAL[FL]?|FP_[A-Z0-9_]+|M_[A-Z0-9_]+(l|f[0-9]+x?)?"
      "|E[A-Z0-9]+|SIG[A-Z0-9_]+|LC_[A-Z_]+|(TIME|CLOCK)_[A-Z_]+|FE_[A-Z_]+|ATOMIC_[A-Z0-9_]+"
      // and the types of <stdint.h> and <stddef.h>, like int8_t above
      "|u?int(_least|_fast)?(8|16|32|64)_t|u?int(ptr|max)_t|(s?size|ptrdiff|max_align|nullptr|wint)_t",
      std::regex::optimize);
  // clang-format on
  return names.count(s) > 0 || std::regex_match(s, patterns);
}

/// One tensor of a function as the header names it.
struct CTensor {
  std::string field;  // the struct field
  std::string macro;  // the stem of its macros: PREFIX_FN_FIELD
  std::string origin; // what the user calls it: "%x" or "output_0"
  const Buffer *buffer;
};

/// The header's names for one function.
struct CFunction {
  std::string symbol; // PREFIX_FN
  std::string macro;  // PREFIX_FN upper-cased
  std::vector<CTensor> inputs, outputs;
};

/// Chooses every name the header declares. Relay names may start with a digit,
/// be C keywords, or differ only in case (`%w` and `%W`), and the macros of
/// different tensors and functions share one namespace; a tensor whose name
/// would clash gets a numbered suffix, so the header always compiles.
/// Functions whose names clash after upper-casing are an error instead,
/// because their symbols cannot be renamed.
class HeaderNames {
public:
  explicit HeaderNames(const std::string &prefix) : prefix_(prefix) {
    GRADC_CHECK(is_c_identifier(prefix), "emit_c_header", "symbol prefix '" + prefix + "' is not a C identifier");
    claim(upper(prefix) + "_ALIGNMENT");
    claim("GRADC_" + upper(prefix) + "_H");
  }

  std::vector<CFunction> name(const LoweredModule &module, const std::vector<FunctionReport> &reports) {
    std::vector<CFunction> fns;
    // Function-level names first, then every output (their fields are fixed
    // by the ABI), then parameters, which absorb any clash.
    for (const LoweredFunction &fn : module.functions) {
      CFunction cf;
      cf.symbol = prefix_ + "_" + fn.name;
      cf.macro = upper(cf.symbol);
      for (const char *reserved : {"strerror", "set_num_threads", "get_num_threads", "shutdown_threads"})
        if (fn.name == reserved)
          throw FileError(std::string("cannot write the C header: function @") + reserved + " would clash with " +
                          prefix_ + "_" + reserved + "; rename the function");
      for (const char *suffix : {"_WORKSPACE_SIZE", "_STACK_SIZE"})
        if (!claim(cf.macro + suffix))
          throw FileError("cannot write the C header: function @" + fn.name + " needs the name " + cf.macro +
                          suffix + ", which another function has; rename one");
      fns.push_back(cf);
    }
    for (size_t f = 0; f < fns.size(); ++f)
      for (size_t i = 0; i < module.functions[f].outputs.size(); ++i)
        fns[f].outputs.push_back(tensor(fns[f], "output_" + std::to_string(i), "output_" + std::to_string(i),
                                        *module.functions[f].outputs[i]));
    for (size_t f = 0; f < fns.size(); ++f) {
      const LoweredFunction &fn = module.functions[f];
      for (size_t i = 0; i < fn.inputs.size(); ++i) {
        const std::string &param = reports[f].param_names[i];
        // `%0` becomes p_0, `%int` p_int, `%INT32_MAX` p_INT32_MAX, `%_x`
        // p_x (C reserves _X and __x): no field is a keyword, a type name or
        // a macro, the library's or this header's.
        std::string field = param;
        if (!is_c_identifier(field) || field[0] == '_' || is_reserved_word(field) || is_library_name(field) ||
            is_own_macro(field))
          field = (field[0] == '_' ? "p" : "p_") + field;
        fns[f].inputs.push_back(tensor(fns[f], field, "%" + param, *fn.inputs[i]));
      }
    }
    return fns;
  }

private:
  /// True for a name spelled like a macro this header defines (all begin
  /// with PREFIX_ or GRADC_ and have no lower-case letter): a field of one
  /// function may be named like a macro of another, defined before it.
  bool is_own_macro(const std::string &s) const {
    const std::string P = upper(prefix_) + "_";
    if (s.compare(0, P.size(), P) != 0 && s.compare(0, 6, "GRADC_") != 0)
      return false;
    return std::none_of(s.begin(), s.end(), [](char c) { return std::islower((unsigned char)c); });
  }

  /// Takes a macro name; false if it is already taken.
  bool claim(const std::string &macro) { return macros_.insert(macro).second; }

  static std::vector<std::string> macro_suffixes(const Buffer &buf) {
    std::vector<std::string> suffixes = {"_RANK", "_SIZE", "_BYTES"};
    if (!buf.shape.empty())
      suffixes.push_back("_SHAPE");
    for (size_t d = 0; d < buf.shape.size(); ++d)
      suffixes.push_back("_DIM" + std::to_string(d));
    return suffixes;
  }

  /// `base`, or `base_2`, `base_3`, ...: the first whose macros are free.
  /// Two fields of a function with one name would have the same macros, so
  /// this also keeps the fields of each struct distinct.
  CTensor tensor(const CFunction &fn, const std::string &base, const std::string &origin, const Buffer &buf) {
    for (int n = 1;; ++n) {
      std::string field = n == 1 ? base : base + "_" + std::to_string(n);
      std::string stem = fn.macro + "_" + upper(field);
      bool free = true;
      for (const std::string &suffix : macro_suffixes(buf))
        free = free && !macros_.count(stem + suffix);
      if (!free)
        continue;
      for (const std::string &suffix : macro_suffixes(buf))
        claim(stem + suffix);
      return CTensor{field, stem, origin, &buf};
    }
  }

  std::string prefix_;
  std::set<std::string> macros_;
};

/// The `#define`s of one tensor: rank, dimensions, shape, elements, bytes.
void emit_tensor_macros(std::ostream &os, const CTensor &t) {
  const Buffer &b = *t.buffer;
  os << "\n/* " << t.origin << " */\n";
  os << "#define " << t.macro << "_RANK " << b.shape.size() << "\n";
  std::string shape;
  for (size_t d = 0; d < b.shape.size(); ++d) {
    os << "#define " << t.macro << "_DIM" << d << " " << b.shape[d] << "\n";
    shape += (d ? ", " : "") + std::to_string(b.shape[d]);
  }
  // A scalar has no SHAPE: C has no empty initializer list.
  if (!b.shape.empty())
    os << "#define " << t.macro << "_SHAPE {" << shape << "}\n";
  os << "#define " << t.macro << "_SIZE " << b.numel() << " /* elements */\n";
  os << "#define " << t.macro << "_BYTES " << b.bytes() << "\n";
}

void emit_struct(std::ostream &os, const std::string &tag, const std::vector<CTensor> &tensors, const char *qualifier) {
  os << "struct " << tag << " {\n";
  for (const CTensor &t : tensors) {
    os << "  " << qualifier << c_element_type(t.buffer->dtype) << " *" << t.field << "; /* ";
    if (t.origin != t.field)
      os << t.origin << ": ";
    os << Type::tensor(t.buffer->shape, t.buffer->dtype).str() << " */\n";
  }
  if (tensors.empty())
    os << "  char unused; /* C does not allow an empty struct */\n";
  os << "};\n";
}

void check_io_order(const LoweredFunction &fn, size_t param_names) {
  GRADC_CHECK(param_names == fn.inputs.size(), "artifacts",
              "@" + fn.name + " has " + std::to_string(fn.inputs.size()) + " inputs but " +
                  std::to_string(param_names) + " parameter names");
  // The struct fields are read by position, which is the buffer's io_index.
  for (size_t i = 0; i < fn.inputs.size(); ++i)
    GRADC_CHECK(fn.inputs[i]->io_index == int(i), "artifacts", "inputs out of order");
  for (size_t i = 0; i < fn.outputs.size(); ++i)
    GRADC_CHECK(fn.outputs[i]->io_index == int(i), "artifacts", "outputs out of order");
}

void check_reports(const LoweredModule &module, const std::vector<FunctionReport> &reports) {
  GRADC_CHECK(reports.size() == module.functions.size(), "artifacts", "one report per function expected");
  for (size_t f = 0; f < reports.size(); ++f)
    check_io_order(module.functions[f], reports[f].param_names.size());
}

} // namespace

std::string emit_c_header(const LoweredModule &module, const std::vector<FunctionReport> &reports,
                          const std::string &prefix, TargetKind target) {
  check_reports(module, reports);
  std::vector<CFunction> fns = HeaderNames(prefix).name(module, reports);
  const std::string P = upper(prefix);
  const bool cuda = target == TargetKind::CUDA;
  std::ostringstream os;

  os << "/* Generated by gradc; do not edit.\n"
     << " *\n"
     << " * The C interface of the functions gradc compiled with the symbol prefix\n"
     << " * \"" << prefix << "\". To call a function FN:\n"
     << " *\n";
  if (cuda)
    os << " *   1. Allocate the workspace with cudaMalloc (or cuMemAlloc), of\n"
       << " *      " << P << "_FN_WORKSPACE_SIZE bytes (0: pass NULL).\n"
       << " *   2. Point the fields of a struct " << prefix << "_FN_inputs at the parameters and those\n"
       << " *      of a struct " << prefix << "_FN_outputs at buffers for the results, all device\n"
       << " *      memory; " << P << "_FN_<TENSOR>_BYTES says how large each one is.\n"
       << " *   3. int32_t rc = " << prefix << "_FN(&inputs, &outputs, workspace, stream);\n"
       << " *      It runs the kernels on `stream` and returns when they are done.\n"
       << " *   4. rc is 0 on success; " << prefix << "_strerror(rc) says what failed otherwise.\n"
       << " *\n"
       << " * Every pointer is a CUDA device pointer. The kernels run in the calling\n"
       << " * thread's current context, or else in the one that owns the buffers.\n"
       << " * libcuda.so.1 is opened at run time, so linking needs no CUDA library.\n"
       << " * If you include cuda.h, include it before this header.\n";
  else
    os << " *   1. Allocate the workspace: aligned_alloc(" << P << "_ALIGNMENT, " << P << "_FN_WORKSPACE_SIZE)\n"
       << " *      (the size is a multiple of " << P << "_ALIGNMENT; when it is 0, pass NULL).\n"
       << " *   2. Point the fields of a struct " << prefix << "_FN_inputs at the parameters and those\n"
       << " *      of a struct " << prefix << "_FN_outputs at buffers for the results;\n"
       << " *      " << P << "_FN_<TENSOR>_BYTES says how large each one is.\n"
       << " *   3. int32_t rc = " << prefix << "_FN(&inputs, &outputs, workspace);\n"
       << " *   4. rc is 0 on success; " << prefix << "_strerror(rc) says what failed otherwise.\n"
       << " *\n"
       << " * Threads: large loops are split across a thread pool inside the object,\n"
       << " * started on first use with one thread per online CPU. " << prefix << "_set_num_threads(n)\n"
       << " * sets its size (1: no thread is ever started; n <= 0: the default again);\n"
       << " * " << prefix << "_get_num_threads() reads it. The pool is the object's only global\n"
       << " * state. Several threads may call the functions at once, each with its own\n"
       << " * workspace; a call that finds the pool busy runs its loops on its own thread.\n"
       << " * Results never depend on the number of threads. " << prefix << "_shutdown_threads()\n"
       << " * stops and joins the workers (waiting for a call in progress); a later call\n"
       << " * starts them again. Unloading the object (dlclose) stops them by itself.\n";
  os << " *\n"
     << " * Every buffer is dense and row-major, aligned to " << P << "_ALIGNMENT bytes,\n"
     << " * and overlaps no other." << (cuda ? " Threads may call the functions at once, each with its\n"
                                               " * own workspace. The object's one piece of global state is a table of\n"
                                               " * loaded modules: the first call in a CUDA context loads the PTX, later\n"
                                               " * calls in it reuse the module (with a driver that has cuCtxGetId,\n"
                                               " * CUDA 12; an older one loads and unloads it on every call)."
                                             : "")
     << " float16 elements are passed as\n"
     << " * their IEEE bit pattern (uint16_t), bool elements as one byte, 0 or 1.\n"
     << " */\n";

  const std::string guard = "GRADC_" + P + "_H";
  os << "#ifndef " << guard << "\n#define " << guard << "\n\n"
     << "#include <stddef.h>\n#include <stdint.h>\n\n"
     << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  if (cuda)
    // cuda.h declares the same typedef; C99 forbids repeating a typedef.
    os << "#ifndef __cuda_cuda_h__\ntypedef struct CUstream_st *CUstream;\n#endif\n\n";
  os << "/* The alignment, in bytes, of every buffer passed to a function. */\n"
     << "#define " << P << "_ALIGNMENT " << kBufferAlignment << "\n\n";

  // Emitted inline so that the object file needs no symbol besides the entries.
  os << "/* What a function's return code means. */\n"
     << "static inline const char *" << prefix << "_strerror(int32_t code) {\n"
     << "  switch (code) {\n";
  // Codes are dense from 0; the first code without a message of its own ends them.
  const std::string unknown = status_message(-1);
  for (int32_t code = 0; status_message(code) != unknown; ++code)
    os << "  case " << code << ": return \"" << status_message(code) << "\";\n";
  os << "  default: return \"" << unknown << "\";\n"
     << "  }\n}\n";

  if (!cuda)
    os << "\n/* The size of the object's thread pool (see above). */\n"
       << "void " << prefix << "_set_num_threads(int32_t n);\n"
       << "int32_t " << prefix << "_get_num_threads(void);\n"
       << "void " << prefix << "_shutdown_threads(void);\n";

  for (size_t f = 0; f < fns.size(); ++f) {
    const LoweredFunction &fn = module.functions[f];
    const CFunction &cf = fns[f];
    os << "\n/* ===== @" << fn.name << (reports[f].is_adjoint ? " (a gradient)" : "") << " ===== */\n\n";
    emit_struct(os, cf.symbol + "_inputs", cf.inputs, "const ");
    os << "\n";
    emit_struct(os, cf.symbol + "_outputs", cf.outputs, "");
    os << "\n/* The planned peak of intermediates (bytes, a multiple of " << P << "_ALIGNMENT). */\n"
       << "#define " << cf.macro << "_WORKSPACE_SIZE " << fn.workspace_bytes << "\n"
       << "/* The stack its kernels' scratch (register tiles, matrix panels) takes on the calling\n"
       << " * thread and on each pool worker, in bytes; frames add a few KiB. */\n"
       << "#define " << cf.macro << "_STACK_SIZE " << stack_bytes(fn) << "\n";
    for (const CTensor &t : cf.inputs)
      emit_tensor_macros(os, t);
    for (const CTensor &t : cf.outputs)
      emit_tensor_macros(os, t);
    std::string indent(cf.symbol.size() + 9, ' ');
    os << "\nint32_t " << cf.symbol << "(const struct " << cf.symbol << "_inputs *inputs,\n"
       << indent << "struct " << cf.symbol << "_outputs *outputs, void *workspace" << (cuda ? ", CUstream stream" : "")
       << ");\n";
  }

  os << "\n#ifdef __cplusplus\n} /* extern \"C\" */\n#endif\n\n#endif /* " << guard << " */\n";
  return os.str();
}

namespace {

nlohmann::json tensor_json(const std::string &name, const char *role, const Buffer &buf) {
  return {
      {"name", name}, {"role", role}, {"dtype", dtype_name(buf.dtype)}, {"shape", buf.shape}, {"bytes", buf.bytes()}};
}

nlohmann::json string_or_null(const std::string &s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); }

} // namespace

nlohmann::json build_manifest(const LoweredModule &module, const std::vector<FunctionReport> &reports,
                              const ManifestInfo &info, const std::string &prefix) {
  check_reports(module, reports);
  const bool cuda = info.target == "cuda";
  // Provenance: the binding of the tensor function a kernel or buffer comes from.
  auto origin_json = [](const Origin &o) { return o.set() ? nlohmann::json("%" + o.var) : nlohmann::json(); };
  nlohmann::json functions = nlohmann::json::array();
  for (size_t f = 0; f < module.functions.size(); ++f) {
    const LoweredFunction &fn = module.functions[f];
    const FunctionReport &report = reports[f];
    nlohmann::json params = nlohmann::json::array(), results = nlohmann::json::array();
    for (size_t i = 0; i < fn.inputs.size(); ++i)
      params.push_back(tensor_json(report.param_names[i], "input", *fn.inputs[i]));
    for (size_t i = 0; i < fn.outputs.size(); ++i)
      results.push_back(tensor_json("output_" + std::to_string(i), "output", *fn.outputs[i]));

    nlohmann::json kernels = nlohmann::json::array();
    for (const Kernel &k : fn.kernels) {
      nlohmann::json buffers = nlohmann::json::array();
      for (const BufferPtr &b : k.buffers)
        buffers.push_back(b->name);
      nlohmann::json kernel = {{"name", k.name}, {"buffers", buffers}, {"binding", origin_json(k.origin)}};
      // A kernel's launch arguments are its buffers, in order (CudaTarget.cpp).
      if (cuda)
        kernel["launch"] = {
            {"grid", {k.grid, 1, 1}}, {"block", {k.block, 1, 1}}, {"shared_memory_bytes", 0}, {"arguments", buffers}};
      kernels.push_back(kernel);
    }

    // Kernel-level loops: kernels [first, last) run `extent` times, or with
    // `trips` trips[i] times on their i-th entry (TimeLoop).
    nlohmann::json time_loops = nlohmann::json::array();
    for (const TimeLoop &l : fn.time_loops) {
      time_loops.push_back({{"first_kernel", l.first}, {"end_kernel", l.last}, {"extent", l.extent}});
      if (l.streamed())
        time_loops.back()["trips"] = l.trips;
    }

    // Each arena buffer with the kernels it is live over (what the plan
    // placed) and the binding it comes from.
    nlohmann::json arena = nlohmann::json::array();
    auto life = buffer_lifetimes(fn);
    for (const BufferPtr &b : fn.arena)
      arena.push_back({{"name", b->name},
                       {"offset", b->offset},
                       {"bytes", b->bytes()},
                       {"live_kernels", {life[b.get()].first, life[b.get()].second}},
                       {"binding", b == fn.status ? nlohmann::json() : origin_json(b->origin)}});

    functions.push_back({
        {"name", fn.name},
        {"symbol", prefix + "_" + fn.name},
        {"parameters", params},
        {"results", results},
        {"workspace_bytes", fn.workspace_bytes},
        {"stack_bytes", stack_bytes(fn)},
        {"planned_peak_bytes", {{"before_remat", report.peak_before_remat}, {"after_remat", report.peak_after_remat}}},
        {"remat", {{"segments", report.remat_segments}, {"recomputed_bindings", report.remat_recomputed}}},
        {"flops", report.flops},
        // What rematerialization bought and cost (SPEC §6): the planned
        // peak, the peak keeping everything, the forward pass's FLOPs and
        // the FLOPs recomputed, the values recomputed, the plan, the budget.
        {"peak_bytes", report.peak_after_remat},
        {"peak_bytes_no_remat", report.peak_before_remat},
        {"forward_flops", report.forward_flops},
        {"extra_flops", report.extra_flops},
        {"recomputed", report.recomputed},
        {"remat_strategy", report.remat_strategy},
        {"budget_bytes", report.budget_bytes >= 0 ? nlohmann::json(report.budget_bytes) : nlohmann::json()},
        {"remat_plans", report.remat_plans},
        {"remat_solver_seconds",
         report.remat_solver_seconds >= 0 ? nlohmann::json(report.remat_solver_seconds) : nlohmann::json()},
        {"kernels", kernels},
        {"time_loops", time_loops},
        {"arena", arena},
    });
  }

  return {
      {"format", "gradc-manifest"},
      {"version", 1},
      {"tool", {{"name", "gradc"}, {"version", info.tool_version}}},
      {"llvm_version", info.llvm_version},
      {"command_line", info.argv},
      {"target",
       {{"kind", info.target},
        {"triple", string_or_null(info.triple)},
        {"cpu", string_or_null(info.cpu)},
        {"gpu_arch", cuda ? string_or_null(info.gpu_arch) : nlohmann::json()}}},
      {"opt_level", info.opt_level},
      {"remat",
       {{"mode", info.remat},
        {"memory_budget", info.memory_budget < 0 ? nlohmann::json() : nlohmann::json(info.memory_budget)}}},
      {"functions", functions},
  };
}

} // namespace gradc
