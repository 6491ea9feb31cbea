//===- Codegen.h - LLVM code generation for CPU and CUDA ------------------===//
//
// The last stage of the pipeline: a LoweredModule becomes an LLVM module, then
// a relocatable object, assembly, or PTX. This header is LLVM-free on purpose:
// only files under lib/codegen/ include LLVM headers.
//
// ABI (SPEC §8), for each function FN and symbol prefix P:
//   int32_t P_FN(void *const *inputs, void *const *outputs, void *workspace);
//     (CUDA adds a trailing `void *stream` and all pointers are device pointers.)
// `inputs` is the C struct P_FN_inputs (one pointer per parameter, in order),
// `outputs` the struct P_FN_outputs (one pointer per result leaf). Return
// codes: 0 ok, 1 null argument, 2 misaligned buffer, 3 and 4 CUDA driver
// errors, 5 an index input out of range (kStatusIndexOutOfRange; kernels read
// a clamped index, so memory stays safe either way).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/loops/LoopIR.h"
#include "gradc/loops/Target.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace gradc {

struct CodegenOptions {
  TargetKind target = TargetKind::CPU;
  std::string prefix = "model"; // symbol prefix P
  std::string cpu;              // CPU name; empty or "native" = the host's
  std::string triple;           // target triple; empty = host
  std::string gpu_arch = "sm_80";
  bool gpu_tf32 = false; // --gpu-math=tf32: float32 products on tensor cores with tf32 operands
  int opt_level = 2;
};

/// What the code generators produced; a field is filled only when asked for.
struct CodegenOutput {
  std::string object;   // ELF relocatable object (CPU code, or the CUDA host stub)
  std::string llvm_ir;  // textual LLVM IR (of the kernels, for CUDA: NVPTX module)
  std::string assembly; // target assembly (CPU)
  std::string ptx;      // CUDA only
  /// Seconds per step, in order (--report): building the LLVM IR, LLVM's
  /// optimization pipeline, and emitting the object/assembly/PTX.
  std::vector<std::pair<std::string, double>> times;
};

struct CodegenRequest {
  bool object = false, llvm_ir = false, assembly = false, ptx = false;
};

/// Compiles `module`. Throws InternalError on an LLVM failure (a gradc bug)
/// and CompileError after printing a diagnostic for unusable options (an
/// unknown --cpu or --triple).
CodegenOutput generate_code(const LoweredModule &module, const CodegenOptions &opts, const CodegenRequest &what);

/// What the schedule passes need to know of the machine `opts` compiles for:
/// triple, CPU and its widest vector register (from the host's actual features,
/// or those --cpu implies), cores (the host's online CPUs when compiling for
/// it), and for CUDA the GPU's launch limits. Prints a diagnostic and throws
/// CompileError for an unknown --cpu or --triple.
Target describe_target(const CodegenOptions &opts);

/// Why --triple/--cpu name no CPU target gradc compiles for (a command-line
/// error, exit 2): a triple outside the tested list, a CPU unknown for the
/// triple or unable to run it. nullopt if they are fine. `--cpu=native` (or
/// none) is the host's CPU.
std::optional<std::string> cpu_target_problem(const CodegenOptions &opts);
/// The CPU targets gradc is tested on, for messages: "x86_64-linux-gnu, ...".
std::string tested_triples();

/// The LLVM version gradc was built with ("19.1.7").
std::string llvm_version();

/// The messages of the entry points' return codes (what P_strerror returns).
const char *status_message(int32_t code);

/// In-process compilation for `gradc run` (CPU only), through LLVM ORC.
class JitSession {
public:
  using Entry = int32_t (*)(void *const *, void *const *, void *);
  static std::unique_ptr<JitSession> create(const LoweredModule &module, const CodegenOptions &opts);
  /// Why code for `opts` (its --triple and --cpu) cannot run in this process
  /// (another architecture, or a CPU feature this machine lacks), if so.
  static std::optional<std::string> cannot_run_here(const CodegenOptions &opts);
  virtual ~JitSession() = default;
  /// The entry point of function `name` (internal error if absent).
  virtual Entry lookup(const std::string &name) = 0;
  /// The thread count of the session's parallel loops (n <= 0: the online CPUs).
  virtual void set_num_threads(int32_t n) = 0;
};

} // namespace gradc
