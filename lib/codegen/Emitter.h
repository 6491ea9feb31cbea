//===- Emitter.h - internals shared by the LLVM code generators -----------===//
//
// Private to lib/codegen. Emitter.cpp turns loop IR into LLVM IR (kernels and
// the argument checks of the entry points); Codegen.cpp holds the target
// plumbing; CpuTarget.cpp, CudaTarget.cpp and Jit.cpp build on both.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/codegen/Codegen.h"
#include "gradc/loops/Templates.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <unordered_set>

namespace gradc::codegen {

/// Appends (name, seconds since the last step) to a CodegenOutput's times.
class StepTimer {
public:
  explicit StepTimer(std::vector<std::pair<std::string, double>> &times) : times_(times) {}
  void step(const char *name) {
    auto now = std::chrono::steady_clock::now();
    times_.push_back({name, std::chrono::duration<double>(now - last_).count()});
    last_ = now;
  }

private:
  std::vector<std::pair<std::string, double>> &times_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// Here `Type` is LLVM's; the tensor IR's gradc::Type is not used in codegen.
using llvm::Type;

/// A CPU kernel is an internal function that the entry point calls; a GPU
/// kernel is a PTX entry whose buffers are global-memory pointers.
enum class Device { CPU, GPU };

/// The LLVM values of the IR nodes in scope (buffers' pointers, loop
/// variables' indices), looked up by node. A walk over them (the captures of
/// an outlined parallel loop) goes in the order the entries were made, never
/// in hash order: that follows where the allocator put the nodes, and would
/// reach the object's bytes (STYLE 13).
template <typename Key> class ScopeValues {
public:
  /// The value of `k`; an entry made on first use keeps its place in the order.
  llvm::Value *&operator[](const Key *k) {
    auto [it, fresh] = map_.try_emplace(k, Entry{next_, nullptr});
    next_ += fresh;
    return it->second.value;
  }
  /// Adds `k` unless it is there; false if it was.
  bool emplace(const Key *k, llvm::Value *v) {
    if (map_.count(k))
      return false;
    (*this)[k] = v;
    return true;
  }
  /// The value of `k`, or null if it is not in scope.
  llvm::Value *lookup(const Key *k) const {
    auto it = map_.find(k);
    return it == map_.end() ? nullptr : it->second.value;
  }
  void erase(const Key *k) { map_.erase(k); }
  /// Every entry, in the order the entries were made.
  std::vector<std::pair<const Key *, llvm::Value *>> in_order() const {
    std::vector<std::pair<uint64_t, std::pair<const Key *, llvm::Value *>>> entries;
    for (const auto &[k, e] : map_)
      entries.push_back({e.order, {k, e.value}});
    std::sort(entries.begin(), entries.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    std::vector<std::pair<const Key *, llvm::Value *>> out;
    for (const auto &e : entries)
      out.push_back(e.second);
    return out;
  }

private:
  struct Entry {
    uint64_t order;
    llvm::Value *value;
  };
  std::unordered_map<const Key *, Entry> map_;
  uint64_t next_ = 0;
};

/// The pointer that each non-Local buffer of a function lives at.
using BufferValues = ScopeValues<Buffer>;

/// How a kernel's loops map onto the machine.
struct KernelOptions {
  Device device = Device::CPU;
  /// CPU: outline the outermost profitable Parallel loop into a task of the
  /// runtime's thread pool (runtime/gradc_runtime.h).
  bool threads = false;
  /// CPU: the target has fused multiply-add (the inline math functions use it).
  bool fma = false;
  /// CPU: the kernel is a template (loops/Templates.h) whose arguments these
  /// are: the function takes their table as a last pointer argument.
  const KernelParams *params = nullptr;
  /// The kernel's buffers that share bytes with another (shares_bytes): not noalias.
  const std::unordered_set<const Buffer *> *shared = nullptr;
};

/// Emits `kernel` as `void symbol(ptr buffer...)`, one noalias pointer per
/// Kernel::buffers entry. `symbol` must be free in `m` (see unique_symbol).
llvm::Function *emit_kernel(llvm::Module &m, const Kernel &kernel, const std::string &symbol,
                            const KernelOptions &opts);

/// A host module for `module` (triple and data layout of `tm`) with the
/// entry of every function declared first, so that no kernel or global can
/// take an exported name. entries[i] belongs to module.functions[i].
struct HostModule {
  std::unique_ptr<llvm::Module> module;
  std::vector<llvm::Function *> entries;
};
HostModule create_host_module(const LoweredModule &module, const std::string &prefix, llvm::LLVMContext &ctx,
                              const llvm::TargetMachine &tm, bool with_stream);

/// Emits the argument checks of an entry point at `b` (return 1 for a null
/// pointer, 2 for one that is not 64-byte aligned) and returns where every
/// buffer of `fn` lives. `b` is left where all checks have passed.
BufferValues emit_entry_prologue(llvm::IRBuilder<> &b, const LoweredFunction &fn);

/// The values of `kernel`'s parameters, in Kernel::buffers order.
std::vector<llvm::Value *> kernel_arguments(const BufferValues &buffers, const Kernel &kernel);

/// `symbol`, or `symbol_N` for the first N that no global of `m` uses yet.
std::string unique_symbol(const llvm::Module &m, const std::string &symbol);

// Target plumbing (Codegen.cpp).

/// Registers every LLVM target once per process.
void initialize_llvm();
/// Keeps LLVM's warnings and remarks ("loop not vectorized") off the user's
/// terminal; optimize and emit_file turn LLVM errors into internal errors.
void quiet_diagnostics(llvm::LLVMContext &ctx);
/// A user error in the codegen options: prints it (print_error) and throws
/// CompileError.
[[noreturn]] void option_error(const std::string &message);
/// No FP contraction: results must not depend on where a computation is compiled.
llvm::TargetOptions target_options();
llvm::CodeGenOptLevel codegen_opt_level(int opt_level);
std::unique_ptr<llvm::TargetMachine> create_target_machine(const std::string &triple, const std::string &cpu,
                                                           const std::string &features, int opt_level);
/// Verifies `m`, then runs the new pass manager's default pipeline for `opt_level`.
void optimize(llvm::Module &m, llvm::TargetMachine &tm, int opt_level);
/// Object or assembly text of `m` (codegen runs on a copy, so it may be called twice).
std::string emit_file(const llvm::Module &m, llvm::TargetMachine &tm, llvm::CodeGenFileType type);
std::string print_module(const llvm::Module &m);

// The C runtime (Runtime.cpp).

/// Whether the runtime's bitcode can be linked into code for `triple`.
bool runtime_supports(const llvm::Triple &triple);
/// Links what `m` uses of the runtime into `m`, every runtime symbol internal.
void link_runtime(llvm::Module &m);
enum class RuntimeFn { ParallelFor, SetNumThreads, GetNumThreads, Shutdown, CudaRun };
llvm::FunctionCallee runtime_function(llvm::Module &m, RuntimeFn which);

// CPU (CpuTarget.cpp); the CUDA host stub and the JIT use it too.

struct HostTarget {
  std::string triple, cpu, features;
};
/// The host (its CPU and all its features) unless opts.triple/opts.cpu say
/// otherwise; an option error for what cpu_target_problem refuses.
HostTarget resolve_cpu_target(const CodegenOptions &opts);
std::unique_ptr<llvm::TargetMachine> create_cpu_target_machine(const CodegenOptions &opts);
/// Where the runtime a CPU module calls comes from: linked into it (an object
/// file), or the compiler's own copy (the JIT; see Jit.cpp).
enum class RuntimeSource { Bitcode, Process };
/// The unoptimized CPU module: kernels and one entry point per function.
std::unique_ptr<llvm::Module> build_cpu_module(const LoweredModule &module, const CodegenOptions &opts,
                                               llvm::LLVMContext &ctx, const llvm::TargetMachine &tm,
                                               RuntimeSource runtime);
CodegenOutput generate_cpu(const LoweredModule &module, const CodegenOptions &opts, const CodegenRequest &what);

// Relocatable objects (ObjectMerge.cpp).

/// Whether merge_objects can join objects for `triple`: ELF64 little endian
/// with RELA relocations (x86-64, AArch64).
bool can_merge_objects(const llvm::Triple &triple);
/// One relocatable object from `objects` (each as LLVM wrote it for the same
/// target), as `ld -r` would join them; a hidden definition becomes local once
/// the other objects' references to it are bound. See ObjectMerge.cpp.
std::string merge_objects(const std::vector<std::string> &objects);

// CUDA (CudaTarget.cpp).
CodegenOutput generate_cuda(const LoweredModule &module, const CodegenOptions &opts, const CodegenRequest &what);

} // namespace gradc::codegen
