//===- Artifacts.h - files gradc writes: header, manifest, .npy -----------===//
//
// Everything here is plain C++ (no LLVM): the C header (CHeader.cpp) and JSON
// manifest (Manifest.cpp) of SPEC §8, and .npy reading and writing for
// `gradc run` and `gradc import` (Npy.cpp). FileSet.h writes them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/codegen/Codegen.h"
#include "gradc/driver/FileSet.h"
#include "gradc/ir/Type.h"
#include "gradc/ir/Expr.h"
#include "gradc/loops/LoopIR.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace gradc {

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
/// The .npy header of an array of `dtype` and `shape` (encode_npy is it
/// followed by the data).
std::string npy_header(DType dtype, const Shape &shape);

/// Per-function facts that the compiler knows beyond the lowered code.
struct FunctionReport {
  std::string name;
  std::vector<std::string> param_names; // in order, without '%'
  int64_t flops = 0;
  int64_t peak_before_remat = 0; // planned workspace with --remat=none
  int64_t peak_after_remat = 0;  // planned workspace as compiled
  int remat_segments = 0;
  int remat_recomputed = 0;
  FunctionAttrs attrs;                     // its role, and the parameters it updates in place
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
  bool gpu_tf32 = false;
  int opt_level = 2;
  std::string remat; // none / manual / auto
  int64_t memory_budget = -1;
};

/// The C header of SPEC §8 for symbol prefix `prefix`.
std::string emit_c_header(const LoweredModule &module, const std::vector<FunctionReport> &reports,
                          const std::string &prefix, TargetKind target);

/// The struct fields the C header gives one function's tensors, in order.
struct CFieldNames {
  std::vector<std::string> inputs, outputs;
};

/// The fields of every function of `module` as emit_c_header names them: a
/// parameter's name where C allows it, else a prefixed or numbered one
/// (`%int` is `p_int`, `%w` beside `%W` is `w_2`). Where the header cannot
/// be written (a function named @strerror), the fields it would have.
std::vector<CFieldNames> c_field_names(const LoweredModule &module, const std::vector<FunctionReport> &reports,
                                       const std::string &prefix);

/// The versioned JSON manifest of SPEC §8; each parameter and result carries
/// its header field (`c_field`).
nlohmann::json build_manifest(const LoweredModule &module, const std::vector<FunctionReport> &reports,
                              const ManifestInfo &info, const std::string &prefix);

} // namespace gradc
