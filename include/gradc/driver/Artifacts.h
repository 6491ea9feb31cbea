//===- Artifacts.h - files gradc writes: header, manifest, .npy -----------===//
//
// Everything here is plain C++ (no LLVM): the C header and JSON manifest of
// SPEC §8, .npy reading and writing for `gradc run`, and atomic file output.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/codegen/Codegen.h"
#include "gradc/ir/Type.h"
#include "gradc/loops/LoopIR.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gradc {

/// Any failure to read or write a file, with a message for the user.
struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One file of a set that is written together.
struct OutputFile {
  std::string path;
  std::string data;
};

/// Writes every file of `files`, or none of them, then removes the files
/// `stale()` names (outputs of an earlier run that this one does not replace).
///
///  1. Checks that each path can be replaced: not a directory, not listed twice.
///  2. Writes each file to a new temporary `PATH.tmp.XXXXXX` in its own
///     directory and fsyncs it.
///  3. The commit, under an exclusive lock (flock) of every directory it
///     touches, so that concurrent gradc processes commit one whole set after
///     another (two compiles to one -o never leave an object of one beside a
///     header of the other): asks `stale()`, renames every temporary onto its
///     path, unlinks the stale files (missing ones are skipped), fsyncs the
///     directories.
///
/// A failure in 1 or 2 removes every temporary, leaves every path and every
/// stale file as it was, and throws FileError. SIGINT, SIGTERM, SIGHUP and
/// SIGQUIT (unless ignored) are caught from 2 on: during 2 the handler unlinks
/// the temporaries and ends the process by the same signal, with nothing
/// changed; during 3 the signal is held until the whole set is in place. A
/// rename that fails in 3 (the checks of 1 make that an I/O error) throws
/// FileError naming the paths already replaced.
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

/// A dense row-major array as stored in a .npy file.
struct NpyArray {
  DType dtype = DType::Float32;
  Shape shape;
  std::string data; // numel * dtype_bytes bytes, little-endian, C order
};

/// Reads .npy format 1.0/2.0/3.0 with dtypes <f2 <f4 <f8 <i4 <i8 |b1 (and
/// |u1 as bool; the byte order may also be written '=', '|' or not at all),
/// C order, or Fortran order where it is the same layout (at most one
/// dimension longer than 1). Throws FileError naming the file and the problem
/// (not a .npy file, unsupported dtype, a real Fortran-ordered array,
/// truncated data, ...).
NpyArray read_npy(const std::string &path);
/// Serializes an array as .npy 1.0 (bytes only; use write_file_atomic).
std::string encode_npy(const NpyArray &array);

/// Per-function facts that the compiler knows beyond the lowered code.
struct FunctionReport {
  std::string name;
  std::vector<std::string> param_names; // in order, without '%'
  int64_t flops = 0;
  int64_t peak_before_remat = 0; // planned workspace with --remat=none
  int64_t peak_after_remat = 0;  // planned workspace as compiled
  int remat_segments = 0;
  int remat_recomputed = 0;
  bool is_adjoint = false;
  int64_t forward_flops = 0;               // the adjoint's forward pass (its bindings up to the primal value)
  int64_t extra_flops = 0;                 // what rematerialization recomputes
  std::vector<std::string> recomputed;     // the values recomputed, each once
  std::string remat_strategy = "none";     // none, manual, or the plan auto chose (none, sqrt, chain)
  int64_t budget_bytes = -1;               // --memory-budget, -1 without
  int remat_plans = 0;                     // the plans auto or sqrt chose from
  double remat_solver_seconds = -1;        // the time their search took, -1 without
};

struct ManifestInfo {
  std::string tool_version;
  std::string llvm_version;
  std::vector<std::string> argv; // the command line
  std::string target;            // "cpu" or "cuda"
  std::string triple, cpu, gpu_arch;
  int opt_level = 2;
  std::string remat; // none / manual / auto
  int64_t memory_budget = -1;
};

/// The C header of SPEC §8 for symbol prefix `prefix`.
std::string emit_c_header(const LoweredModule &module, const std::vector<FunctionReport> &reports,
                          const std::string &prefix, TargetKind target);

/// The versioned JSON manifest of SPEC §8.
nlohmann::json build_manifest(const LoweredModule &module, const std::vector<FunctionReport> &reports,
                              const ManifestInfo &info, const std::string &prefix);

} // namespace gradc
