//===- FileSet.cpp - writing the files of one command as a set ------------===//
//
// write_files_atomic (FileSet.h): temporaries beside their targets, then one
// commit under a lock of the directories, renaming every temporary into
// place. The signal handling that keeps an interrupted write from leaving
// temporaries or half a set lives here too.
//
//===----------------------------------------------------------------------===//
#include "gradc/driver/FileSet.h"
#include "gradc/support/Diagnostics.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace gradc {

namespace {

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
/// The temporaries' names, one slot per temporary file or directory, a
/// directory's entries before the directory itself; a name is published
/// before the file is created and withdrawn only if it was not created.
std::atomic<std::atomic<const char *> *> g_slots{nullptr};
std::atomic<size_t> g_slot_count{0};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<const char *>::is_always_lock_free &&
                  std::atomic<size_t>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

/// The signals that interrupt a write: the ones a user or a supervisor sends.
constexpr int kCaughtSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

/// Removes every published temporary, in slot order: a temporary
/// directory's files are gone before it is removed itself.
void unlink_temporaries() noexcept {
  std::atomic<const char *> *slots = g_slots.load();
  size_t n = g_slot_count.load();
  for (size_t i = 0; slots && i < n; ++i)
    if (const char *name = slots[i].load(); name && ::unlink(name) != 0)
      ::rmdir(name);
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

/// The directory a path's directory entry lives in.
std::string parent_dir(const std::string &path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

/// The longest file name the directory of `path` takes (NAME_MAX where the
/// file system does not say).
size_t name_max(const std::string &path) {
  long n = ::pathconf(parent_dir(path).c_str(), _PC_NAME_MAX);
  return n > 0 ? size_t(n) : size_t(NAME_MAX);
}

/// `PATH.tmp.XXXXXX` with six random letters and digits. The file name part
/// of PATH is shortened where the suffix would make it longer than a
/// directory entry may be: any PATH that can be written has a temporary.
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
  std::string suffix = ".tmp.";
  for (int i = 0; i < 6; ++i, z /= 62)
    suffix += alphabet[z % 62];
  size_t slash = path.rfind('/');
  size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  size_t max = name_max(path), longest = max - std::min(max, suffix.size());
  return path.substr(0, name_start + std::min(path.size() - name_start, longest)) + suffix;
}

std::string cannot_write(const std::string &path, int err) {
  return "cannot write '" + path + "': " + std::strerror(err);
}

/// fsync of a directory, for the renames and creations in it to last; a file
/// system that cannot sync a directory has nothing to gain from it, so
/// failures are ignored.
void sync_directory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
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

/// Puts the directory `from` at `to`, where a directory (or a symbolic link)
/// may stand; returns 0, or the errno of the failure with `to` as it was.
/// What stood at `to` is then at `from`, for the caller to remove. The two
/// entries are exchanged in one step where the file system can; elsewhere
/// the old one is moved aside first.
int replace_directory(const std::string &from, const std::string &to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0)
    return 0;
  if (errno == ENOENT && ::rename(from.c_str(), to.c_str()) == 0)
    return 0; // nothing stood there
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
    return errno;
  std::string aside = temporary_name(to);
  if (::rename(to.c_str(), aside.c_str()) != 0)
    return errno;
  if (::rename(from.c_str(), to.c_str()) != 0) {
    int err = errno;
    ::rename(aside.c_str(), to.c_str());
    return err;
  }
  // The new directory stands at `to`: the swap succeeded, whichever place
  // the old one is removed from.
  if (::rename(aside.c_str(), from.c_str()) != 0) {
    std::error_code ignored;
    std::filesystem::remove_all(aside, ignored);
  }
  return 0;
}

/// The temporaries of one write_files_atomic, from creation to commit or
/// discard. Only one set is open at a time (gradc writes from one thread).
class TemporarySet {
public:
  /// Lays out the slots: a file takes one, a directory one per entry and
  /// one for itself, after its entries.
  explicit TemporarySet(const std::vector<OutputFile> &files) : files_(files) {
    for (const OutputFile &f : files) {
      first_slot_.push_back(count_);
      count_ += f.is_directory ? f.entries.size() + 1 : 1;
    }
    slots_.reset(new std::atomic<const char *>[count_]);
    for (size_t i = 0; i < count_; ++i)
      slots_[i].store(nullptr);
    int expected = kIdle;
    GRADC_CHECK(g_state.compare_exchange_strong(expected, kWriting), "write_files_atomic",
                "another set of files is being written");
    g_slots.store(slots_.get());
    g_slot_count.store(count_);
    handlers_.emplace();
  }
  TemporarySet(const TemporarySet &) = delete;
  TemporarySet &operator=(const TemporarySet &) = delete;
  ~TemporarySet() {
    if (open_)
      discard();
  }

  /// Writes output `i` to a new temporary and fsyncs it: a file, or a
  /// directory with its entries inside.
  void write(size_t i) {
    const OutputFile &f = files_[i];
    auto [name, fd] = create(slot(i), f.path, f.is_directory);
    if (!f.is_directory) {
      write_data(fd, f.path, f);
      return;
    }
    for (size_t e = 0; e < f.entries.size(); ++e) {
      std::string target = f.path + "/" + f.entries[e].path;
      names_.push_back(std::string(name) + "/" + f.entries[e].path);
      slots_[first_slot_[i] + e].store(names_.back().c_str());
      int entry_fd = ::open(names_.back().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (entry_fd < 0)
        throw FileError(cannot_write(target, errno));
      write_data(entry_fd, target, f.entries[e]);
    }
    sync_directory(name);
  }

  /// Renames every temporary onto its output, then unlinks what `stale`
  /// names, holding the lock of every directory touched. A signal that
  /// arrives meanwhile is held until the end.
  void commit(const std::function<std::vector<std::string>()> &stale_of) {
    close_set();
    std::set<std::string> locked;
    for (const OutputFile &f : files_)
      locked.insert(parent_dir(f.path));
    DirectoryLocks locks(locked);
    std::vector<std::string> stale = stale_of ? stale_of() : std::vector<std::string>{};
    std::set<std::string> dirs;
    std::vector<std::string> replaced, replaced_directories;
    std::string error;
    for (size_t i = 0; i < files_.size(); ++i) {
      const OutputFile &f = files_[i];
      std::string temporary = slots_[slot(i)].load();
      int err = 0;
      if (f.is_directory)
        err = replace_directory(temporary, f.path);
      else if (::rename(temporary.c_str(), f.path.c_str()) != 0)
        err = errno;
      if (err) {
        error = cannot_write(f.path, err);
        break;
      }
      // The temporary's name now holds what was replaced, or nothing.
      for (size_t s = first_slot_[i]; s <= slot(i); ++s)
        slots_[s].store(nullptr);
      if (f.is_directory)
        replaced_directories.push_back(temporary);
      replaced.push_back(f.path);
      dirs.insert(parent_dir(f.path));
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
    // What the new directories replaced; a symbolic link is removed, never
    // followed.
    for (const std::string &old : replaced_directories) {
      std::error_code ec;
      std::filesystem::remove_all(old, ec);
      if (ec && error.empty())
        error = "wrote every output but cannot remove the directory it replaced, now '" + old + "': " + ec.message();
    }
    for (const std::string &dir : dirs)
      sync_directory(dir);
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
  /// The slot of output `i` itself (a directory's comes after its entries).
  size_t slot(size_t i) const { return first_slot_[i] + (files_[i].is_directory ? files_[i].entries.size() : 0); }

  /// Creates a new temporary file or directory for `target`, its name
  /// published in `slot` first; returns the name and, for a file, its open
  /// descriptor.
  std::pair<const char *, int> create(size_t slot, const std::string &target, bool directory) {
    for (int attempt = 0;; ++attempt) {
      names_.push_back(temporary_name(target));
      const char *name = names_.back().c_str();
      slots_[slot].store(name);
      int fd = directory ? ::mkdir(name, 0777) : ::open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd >= 0)
        return {name, directory ? -1 : fd};
      int err = errno;
      slots_[slot].store(nullptr);
      if (err != EEXIST || attempt == 100)
        throw FileError(cannot_write(target, err));
    }
  }

  /// Writes `f`'s prefix, data and tail to the new file open as `fd`, fsyncs
  /// and closes it; errors name `target`, the file the user will see.
  static void write_data(int fd, const std::string &target, const OutputFile &f) {
    auto fail = [&](int err) {
      ::close(fd);
      throw FileError(cannot_write(target, err));
    };
    for (std::string_view part : {std::string_view(f.prefix), std::string_view(f.data), f.tail.view()})
      for (size_t done = 0; done < part.size();) {
        ssize_t n = ::write(fd, part.data() + done, std::min<size_t>(part.size() - done, size_t(1) << 30));
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

  const std::vector<OutputFile> &files_;
  std::vector<size_t> first_slot_;
  size_t count_ = 0;
  std::unique_ptr<std::atomic<const char *>[]> slots_;
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

/// A directory entry's name as the writer accepts it: one path component.
bool is_plain_file_name(const std::string &name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

} // namespace

void write_files_atomic(const std::vector<OutputFile> &files, const std::function<std::vector<std::string>()> &stale) {
  // 1. Every path can be replaced: the renames of the commit cannot fail for
  //    a reason known in advance.
  std::set<std::string> seen;
  for (const OutputFile &f : files) {
    GRADC_CHECK(seen.insert(std::filesystem::path(f.path).lexically_normal().string()).second, "write_files_atomic",
                "'" + f.path + "' is listed twice");
    struct stat st;
    bool exists = ::lstat(f.path.c_str(), &st) == 0;
    if (!f.is_directory && exists && S_ISDIR(st.st_mode))
      throw FileError(cannot_write(f.path, EISDIR));
    if (f.is_directory && exists && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
      throw FileError(cannot_write(f.path, ENOTDIR));
    if (std::filesystem::path(f.path).filename().string().size() > name_max(f.path))
      throw FileError(cannot_write(f.path, ENAMETOOLONG));
    std::set<std::string> names;
    for (const OutputFile &e : f.entries)
      GRADC_CHECK(f.is_directory && !e.is_directory && is_plain_file_name(e.path) && names.insert(e.path).second,
                  "write_files_atomic", "'" + f.path + "/" + e.path + "' is not one new file of a directory");
  }
  // 2. Every temporary, written and synced.
  TemporarySet set(files);
  for (size_t i = 0; i < files.size(); ++i)
    set.write(i);
  test_commit_delay();
  // 3. The commit.
  set.commit(stale);
}

void write_file_atomic(const std::string &path, const std::string &data) { write_files_atomic({{path, data}}); }

void remove_temporary_files() noexcept {
  int expected = kWriting;
  if (g_state.compare_exchange_strong(expected, kDying))
    unlink_temporaries();
}

} // namespace gradc
