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

#include <stdexcept>
#include <string>
#include <vector>

namespace gradc {

/// Any failure to read or write a file, with a message for the user.
struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Writes `data` to `path` through a temporary file in the same directory
/// and rename(2): on failure nothing is left under `path`. Throws FileError.
void write_file_atomic(const std::string &path, const std::string &data);

/// A dense row-major array as stored in a .npy file.
struct NpyArray {
  DType dtype = DType::Float32;
  Shape shape;
  std::string data; // numel * dtype_bytes bytes, little-endian, C order
};

/// Reads .npy format 1.0/2.0/3.0 with dtypes <f2 <f4 <f8 <i4 <i8 |b1 (and
/// |u1 as bool), C order. Throws FileError naming the file and the problem
/// (not a .npy file, unsupported dtype, Fortran order, truncated data, ...).
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
